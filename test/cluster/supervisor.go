package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nodeProcess is one daemon a node runs, in start order.
type nodeProcess struct {
	// Name is how fault injection refers to it: containerd, kubelet, kube-proxy.
	Name string `json:"name"`
	// Args is the command line.
	Args []string `json:"args"`
	// Ready, when set, is a path that exists once the daemon serves (the
	// next daemon starts only then).
	Ready string `json:"ready,omitempty"`
}

func nodeProcessesFile(cfg *Config, node string) string {
	return filepath.Join(cfg.NodeDir(node), "processes.json")
}

func controlSocket(cfg *Config, node string) string {
	return filepath.Join(cfg.NodeDir(node), "control.sock")
}

// supervisor runs a node's daemons inside the node's namespaces. It is the
// child subreaper of everything the node starts (containerd shims
// included), so it reaps them all, and it serves fault-injection commands
// on a unix socket.
type supervisor struct {
	cfg   *Config
	node  string
	specs []nodeProcess

	mu   sync.Mutex
	pids map[string]int // running daemons by name
}

// RunNodeSupervisor is the body of `shoal-cluster node-supervisor`. The
// caller has already put it in the node's network namespace and a private
// mount namespace (nsenter + unshare). It returns when ctx ends or a
// shutdown command arrives, after stopping everything the node runs.
func RunNodeSupervisor(ctx context.Context, cfg *Config, node string) error {
	data, err := os.ReadFile(nodeProcessesFile(cfg, node))
	if err != nil {
		return fmt.Errorf("read node processes: %w", err)
	}
	s := &supervisor{cfg: cfg, node: node, pids: map[string]int{}}
	if err := json.Unmarshal(data, &s.specs); err != nil {
		return fmt.Errorf("decode %s: %w", nodeProcessesFile(cfg, node), err)
	}
	for _, ns := range []string{"mnt", "net"} {
		self, _ := os.Readlink("/proc/self/ns/" + ns)
		host, _ := os.Readlink("/proc/1/ns/" + ns)
		if self == host {
			return fmt.Errorf("node-supervisor must run in the node's own %s namespace (shoal-cluster up starts it through nsenter and unshare); refusing to change the host's", ns)
		}
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become subreaper: %w", err)
	}
	if err := joinNodeCgroup(node, os.Getpid()); err != nil {
		return err
	}
	if err := s.mountNodeFilesystem(); err != nil {
		return err
	}
	// The reaper outlives ctx: shutdown needs it to see daemons exit.
	reapCtx, stopReaping := context.WithCancel(context.Background())
	defer stopReaping()
	go s.reap(reapCtx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	for _, p := range s.specs {
		if err := s.start(ctx, p.Name); err != nil {
			s.shutdown()
			return err
		}
	}
	sock := controlSocket(cfg, node)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		s.shutdown()
		return fmt.Errorf("listen on %s: %w", sock, err)
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	log.Printf("node %s up: %v", node, s.status())
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		if s.serve(ctx, conn) {
			cancel()
		}
	}
	s.shutdown()
	_ = os.Remove(sock)
	return nil
}

// mountNodeFilesystem gives the node its own /run and its own /var/lib,
// /var/log, /etc/containerd and /etc/cni (directories under NodeDir).
func (s *supervisor) mountNodeFilesystem() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=755"); err != nil {
		return fmt.Errorf("mount /run: %w", err)
	}
	for _, m := range nodeMounts {
		src := filepath.Join(s.cfg.NodeDir(s.node), m.hostSubdir)
		if err := os.MkdirAll(m.path, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", m.path, err)
		}
		if err := unix.Mount(src, m.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, m.path, err)
		}
	}
	return nil
}

// reap collects every child that exits (daemons, and orphans that were
// re-parented to the supervisor).
func (s *supervisor) reap(ctx context.Context) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	tick := time.NewTicker(time.Second) // SIGCHLD may coalesce
	defer tick.Stop()
	for {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			s.exited(pid, ws)
		}
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-tick.C:
		}
	}
}

func (s *supervisor) exited(pid int, ws unix.WaitStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, p := range s.pids {
		if p == pid {
			delete(s.pids, name)
			log.Printf("%s (pid %d) exited: status %d, signal %v", name, pid, ws.ExitStatus(), ws.Signal())
		}
	}
}

func (s *supervisor) spec(name string) (nodeProcess, error) {
	for _, p := range s.specs {
		if p.Name == name {
			return p, nil
		}
	}
	var names []string
	for _, p := range s.specs {
		names = append(names, p.Name)
	}
	return nodeProcess{}, fmt.Errorf("no process %q on %s; known: %s", name, s.node, strings.Join(names, ", "))
}

// start launches a daemon (if not running) and waits for it to be ready.
func (s *supervisor) start(ctx context.Context, name string) error {
	p, err := s.spec(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if pid, ok := s.pids[name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("%s is already running (pid %d)", name, pid)
	}
	logPath := filepath.Join(s.cfg.LogDir(), s.node+"-"+name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("open log of %s: %w", name, err)
	}
	if p.Ready != "" {
		// A killed daemon leaves its socket behind; wait for a fresh one.
		_ = os.Remove(p.Ready)
	}
	devnull, _ := os.Open(os.DevNull)
	proc, err := os.StartProcess(p.Args[0], p.Args, &os.ProcAttr{
		Files: []*os.File{devnull, logf, logf},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	_ = logf.Close()
	_ = devnull.Close()
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.pids[name] = proc.Pid
	s.mu.Unlock()
	log.Printf("started %s (pid %d)", name, proc.Pid)
	if p.Ready == "" {
		return nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(p.Ready); err == nil {
			return nil
		}
		if !s.running(name) {
			return fmt.Errorf("%s exited before it was ready; see %s", name, logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 60s (no %s); see %s", name, p.Ready, logPath)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

func (s *supervisor) running(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pids[name]
	return ok
}

// stop signals a daemon and waits (bounded) until the reaper saw it exit.
func (s *supervisor) stop(name string, sig syscall.Signal) error {
	if _, err := s.spec(name); err != nil {
		return err
	}
	s.mu.Lock()
	pid, ok := s.pids[name]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	_ = syscall.Kill(pid, sig)
	deadline := time.Now().Add(30 * time.Second)
	for s.running(name) {
		if time.Now().After(deadline) {
			if sig == syscall.SIGKILL {
				return fmt.Errorf("%s (pid %d) survives SIGKILL", name, pid)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			sig, deadline = syscall.SIGKILL, time.Now().Add(5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// killComm kills every process of the node whose command name is comm.
func (s *supervisor) killComm(comm string) (int, error) {
	pids, err := nodeCgroupPids(s.node)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range pids {
		c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(c)) == comm && pid != os.Getpid() {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("no process named %q runs on %s", comm, s.node)
	}
	return n, nil
}

func (s *supervisor) status() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, p := range s.specs {
		out[p.Name] = s.pids[p.Name] // 0 = stopped
	}
	return out
}

// shutdown stops the daemons in reverse order, then kills whatever else
// the node still runs (containers, shims).
func (s *supervisor) shutdown() {
	for k := len(s.specs) - 1; k >= 0; k-- {
		if err := s.stop(s.specs[k].Name, syscall.SIGTERM); err != nil {
			log.Printf("stop %s: %v", s.specs[k].Name, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		pids, err := nodeCgroupPids(s.node)
		if err != nil {
			log.Printf("list node processes: %v", err)
			return
		}
		others := 0
		for _, pid := range pids {
			if pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				others++
			}
		}
		if others == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond) // the reaper collects them
	}
	log.Printf("some processes of %s survived shutdown", s.node)
}

// serve handles one control command; it reports whether to shut down.
// Protocol: one line in ("start kubelet", "stop containerd", "kill kubelet",
// "killcomm nginx", "status", "shutdown"), one line out ("ok ..." or
// "error ...").
func (s *supervisor) serve(ctx context.Context, conn net.Conn) bool {
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return false
	}
	verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	reply := func(err error, format string, a ...any) {
		if err != nil {
			_, _ = fmt.Fprintf(conn, "error %v\n", err)
			return
		}
		_, _ = fmt.Fprintf(conn, "ok "+format+"\n", a...)
	}
	switch verb {
	case "status":
		data, _ := json.Marshal(s.status())
		reply(nil, "%s", data)
	case "start":
		reply(s.start(ctx, arg), "started %s", arg)
	case "stop":
		reply(s.stop(arg, syscall.SIGTERM), "stopped %s", arg)
	case "kill":
		reply(s.stop(arg, syscall.SIGKILL), "killed %s", arg)
	case "killcomm":
		n, err := s.killComm(arg)
		reply(err, "killed %d process(es) named %s", n, arg)
	case "shutdown":
		reply(nil, "shutting down")
		return true
	default:
		reply(fmt.Errorf("unknown command %q: use status, start|stop|kill NAME, killcomm COMM, shutdown", verb), "")
	}
	return false
}

// NodeCommand sends one control command to a node's supervisor and
// returns its answer.
func NodeCommand(ctx context.Context, cfg *Config, node, command string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", controlSocket(cfg, node))
	if err != nil {
		return "", fmt.Errorf("node %s is not running (no supervisor): %w", node, err)
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := fmt.Fprintln(conn, command); err != nil {
		return "", fmt.Errorf("send %q to %s: %w", command, node, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read answer of %s to %q: %w", node, command, err)
	}
	status, msg, _ := strings.Cut(strings.TrimSpace(line), " ")
	if status != "ok" {
		return "", fmt.Errorf("%s: %s", node, msg)
	}
	return msg, nil
}

// NodeStatus returns the pid of every daemon of a node (0 = stopped).
func NodeStatus(ctx context.Context, cfg *Config, node string) (map[string]int, error) {
	msg, err := NodeCommand(ctx, cfg, node, "status")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	if err := json.Unmarshal([]byte(msg), &out); err != nil {
		return nil, fmt.Errorf("decode status of %s: %w", node, err)
	}
	return out, nil
}
