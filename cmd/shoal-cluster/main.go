// Command shoal-cluster runs Shoal's local multi-node Kubernetes cluster:
// up, down, env, status, and fault injection. See docs/dev/local-cluster.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/cluster/registry"
)

const usage = `usage: shoal-cluster COMMAND [ARGS]

  packages                        install the Debian packages the cluster needs (containerd, runc, CNI, ...)
  up [--nodes N]                  start the cluster (default 3 nodes); idempotent
  down                            stop it and remove everything it made; idempotent
  env                             print export lines for a shell (eval "$(shoal-cluster env)")
  status                          show processes and anything left on the machine
  node NODE stop|start|kill PROC  fault: a node's containerd, kubelet or kube-proxy
  node NODE killcomm NAME         fault: kill every process named NAME on the node
  net NODE cut|restore            fault: disconnect / reconnect a node
  net NODE netem [--delay D] [--rate R]  fault: shape traffic (e.g. 100ms, 10mbit); no flags clears
  controlplane stop|kill|start COMPONENT  fault: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shoal-cluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command given")
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := cluster.FindRoot(cwd)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	cmd, rest := args[0], args[1:]
	if cmd == "up" || cmd == "down" {
		// Bridge, namespaces and cgroups have machine-wide names: one
		// up or down at a time.
		unlock, err := lockMachine(ctx)
		if err != nil {
			return err
		}
		defer unlock()
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	nodes := fs.Int("nodes", nodeCount(root), "number of worker nodes")
	switch cmd {
	case "packages":
		// Also what the unit tests that run a real containerd need:
		// hack/install-deps.sh calls this before any test runs.
		return cluster.EnsurePackages(ctx, os.Stdout)
	case "up":
		if err := fs.Parse(rest); err != nil {
			return err
		}
		cfg, err := cluster.LoadConfig(root, *nodes)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := cluster.Up(ctx, cfg, self, os.Stdout); err != nil {
			return err
		}
		fmt.Printf("cluster up in %.1fs: %d nodes; kubeconfig %s; registry %s\n",
			time.Since(start).Seconds(), cfg.Nodes, cfg.Kubeconfig(), cluster.Registry())
		return nil
	case "down":
		cfg, err := cluster.LoadConfig(root, *nodes)
		if err != nil {
			return err
		}
		return cluster.Down(ctx, cfg, os.Stdout)
	case "env":
		cfg, err := cluster.LoadConfig(root, *nodes)
		if err != nil {
			return err
		}
		for _, kv := range cluster.Env(cfg) {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Printf("export %s=%q\n", k, v)
		}
		return nil
	case "status":
		cfg, err := cluster.LoadConfig(root, *nodes)
		if err != nil {
			return err
		}
		return status(ctx, cfg)
	case "node":
		return nodeFault(ctx, root, rest)
	case "net":
		return netFault(ctx, rest)
	case "controlplane":
		if len(rest) != 2 {
			return errors.New("usage: controlplane stop|kill|start COMPONENT")
		}
		cfg, err := cluster.LoadConfig(root, nodeCount(root))
		if err != nil {
			return err
		}
		switch rest[0] {
		case "stop", "kill":
			return cluster.StopComponent(ctx, cfg, rest[1], rest[0] == "kill")
		case "start":
			return cluster.StartComponent(ctx, cfg, rest[1])
		}
		return fmt.Errorf("controlplane %s: use stop, kill or start", rest[0])
	case "node-supervisor":
		node := fs.String("node", "", "node name")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		cfg, err := cluster.LoadConfig(root, *nodes)
		if err != nil {
			return err
		}
		log.SetPrefix(*node + " ")
		return cluster.RunNodeSupervisor(ctx, cfg, *node)
	case "registry":
		dir := fs.String("dir", "", "blob directory")
		var addrs stringList
		fs.Var(&addrs, "addr", "listen address (repeatable)")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		return registry.Serve(ctx, addrs, *dir)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

func nodeFault(ctx context.Context, root string, args []string) error {
	if len(args) != 3 {
		return errors.New("usage: node NODE stop|start|kill PROC, or node NODE killcomm NAME")
	}
	cfg, err := cluster.LoadConfig(root, nodeCount(root))
	if err != nil {
		return err
	}
	msg, err := cluster.NodeCommand(ctx, cfg, args[0], args[1]+" "+args[2])
	if err != nil {
		return err
	}
	fmt.Println(msg)
	return nil
}

func netFault(ctx context.Context, args []string) error {
	if len(args) < 2 {
		return errors.New("usage: net NODE cut|restore|netem [--delay D] [--rate R]")
	}
	node, verb := args[0], args[1]
	switch verb {
	case "cut":
		return cluster.CutNode(ctx, node)
	case "restore":
		return cluster.RestoreNode(ctx, node)
	case "netem":
		fs := flag.NewFlagSet("netem", flag.ContinueOnError)
		delay := fs.String("delay", "", "added latency, e.g. 100ms")
		rate := fs.String("rate", "", "bandwidth limit, e.g. 10mbit")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		return cluster.Netem(ctx, node, *delay, *rate)
	}
	return fmt.Errorf("net %s: use cut, restore or netem", verb)
}

func status(ctx context.Context, cfg *cluster.Config) error {
	healthy := cluster.Healthy(ctx, cfg)
	if healthy != nil {
		fmt.Println("cluster: not healthy:", healthy)
	} else {
		fmt.Println("cluster: healthy")
	}
	for _, node := range cfg.NodeNames() {
		st, err := cluster.NodeStatus(ctx, cfg, node)
		if err != nil {
			fmt.Printf("%s: %v\n", node, err)
			continue
		}
		var parts []string
		for name, pid := range st {
			state := "stopped"
			if pid > 0 {
				state = fmt.Sprintf("pid %d", pid)
			}
			parts = append(parts, name+" "+state)
		}
		sort.Strings(parts)
		fmt.Printf("%s: %s\n", node, strings.Join(parts, ", "))
	}
	if left := cluster.Leftovers(cfg); healthy != nil && len(left) > 0 {
		fmt.Println("left on the machine (make cluster-down removes it):", strings.Join(left, "; "))
	}
	return nil
}

// nodeCount is the size of the cluster in the state dir, or 3.
func nodeCount(root string) int {
	entries, err := os.ReadDir(filepath.Join(root, ".cache", "cluster", "state", "nodes"))
	if err != nil || len(entries) == 0 {
		return 3
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), cluster.NodePrefix) {
			n++
		}
	}
	if n == 0 {
		return 3
	}
	return n
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// lockMachine takes the machine-wide lock of the local cluster, waiting
// (bounded by ctx) while another up or down holds it.
func lockMachine(ctx context.Context) (func(), error) {
	const path = "/run/lock/shoal-cluster.lock"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for another shoal-cluster up/down to finish: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
