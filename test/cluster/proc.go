package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procSpec is how to (re)start one long-lived process of the cluster. It
// is kept next to the pid file so that a stopped control-plane component
// can be started again with the same command line.
type procSpec struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
	Log  string   `json:"log"`
}

func (c *Config) runDir() string { return filepath.Join(c.StateDir(), "run") }

// startDetached starts spec in its own session, detached from the caller,
// logging to spec.Log, and records its pid and spec under runDir.
func startDetached(cfg *Config, spec procSpec) (int, error) {
	if err := os.MkdirAll(cfg.runDir(), 0o755); err != nil {
		return 0, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	logf, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("start %s: open log: %w", spec.Name, err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(cfg.runDir(), spec.Name+".json"), data, 0o644); err != nil {
		return 0, fmt.Errorf("record %s: %w", spec.Name, err)
	}
	if err := writePidFile(cfg, spec.Name, pid); err != nil {
		return 0, fmt.Errorf("record %s: %w", spec.Name, err)
	}
	return pid, nil
}

// A pid file holds "<pid> <start time> <boot id>", so that a pid reused by
// an unrelated process after a crash or reboot is never taken for ours.
func writePidFile(cfg *Config, name string, pid int) error {
	start, err := procStartTime(pid)
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.runDir(), name+".pid")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d %s %s", pid, start, bootID())), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// procStartTime is field 22 of /proc/<pid>/stat: when the process started,
// in clock ticks since boot.
func procStartTime(pid int) (string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 20 {
		return "", fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return fields[19], nil
}

func bootID() string {
	id, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(id))
}

// restartDetached starts a recorded process again if it is not running.
func restartDetached(cfg *Config, name string) error {
	if pid, ok := runningPid(cfg, name); ok {
		return fmt.Errorf("%s is already running (pid %d)", name, pid)
	}
	data, err := os.ReadFile(filepath.Join(cfg.runDir(), name+".json"))
	if err != nil {
		return fmt.Errorf("%s was never started by this cluster: %w", name, err)
	}
	var spec procSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("read spec of %s: %w", name, err)
	}
	_, err = startDetached(cfg, spec)
	return err
}

// runningPid returns the recorded pid of name if that very process (same
// start time, same boot) still runs.
func runningPid(cfg *Config, name string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(cfg.runDir(), name+".pid"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) != 3 || f[2] != bootID() {
		return 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || !alive(pid) {
		return 0, false
	}
	if start, err := procStartTime(pid); err != nil || start != f[1] {
		return 0, false
	}
	return pid, true
}

// stopDetached sends SIGTERM (or SIGKILL when kill is set) to a recorded
// process and waits up to grace for it to exit, then kills it.
func stopDetached(ctx context.Context, cfg *Config, name string, kill bool, grace time.Duration) error {
	pid, ok := runningPid(cfg, name)
	if ok {
		if err := terminate(ctx, pid, kill, grace); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(cfg.runDir(), name+".pid")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forget %s: %w", name, err)
	}
	return nil
}

func terminate(ctx context.Context, pid int, kill bool, grace time.Duration) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	if gone, err := waitGone(ctx, pid, grace); gone || err != nil {
		return err
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if gone, err := waitGone(ctx, pid, 5*time.Second); gone || err != nil {
		return err
	}
	return fmt.Errorf("process %d survives SIGKILL", pid)
}

// waitGone polls until pid has exited or timeout passes.
func waitGone(ctx context.Context, pid int, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return false, err
		}
	}
	return true, nil
}

// alive reports whether pid runs (zombies do not count).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, so look after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// procInfo is what /proc says about one process.
type procInfo struct {
	pid  int
	exe  string
	args []string
}

// listProcs returns the processes of the machine for which match is true.
func listProcs(match func(procInfo) bool) []procInfo {
	entries, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(raw) == 0 {
			continue
		}
		p := procInfo{pid: pid, exe: exe, args: strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")}
		if match(p) {
			out = append(out, p)
		}
	}
	return out
}

// clusterProcs finds every process the cluster started, whether or not its
// pid file survived: this program's long-lived subcommands, and the cached
// Kubernetes and etcd binaries running with this cluster's state dir on
// their command line. Other processes that merely mention the state dir
// (a `tail -f` of a log), other clusters running the cached binaries, and
// other checkouts' shoal-cluster are not matched. A node's containerd and
// its containers are found through the node's cgroup (killNodeCgroups).
func clusterProcs(cfg *Config) []procInfo {
	self, _ := os.Executable()
	state := cfg.StateDir() + string(filepath.Separator)
	binDir := cfg.BinDir() + string(filepath.Separator)
	return listProcs(func(p procInfo) bool {
		exe := strings.TrimSuffix(p.exe, " (deleted)") // rebuilt since it started
		if exe == self {
			return len(p.args) > 1 && (p.args[1] == "node-supervisor" || p.args[1] == "registry")
		}
		if !strings.HasPrefix(exe, binDir) && exe != cfg.EtcdBinary() {
			return false
		}
		for _, a := range p.args {
			if strings.Contains(a, state) {
				return true
			}
		}
		return false
	})
}

// leftoverMounts lists mount points under the state dir visible from here.
func leftoverMounts(cfg *Config) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (strings.HasPrefix(f[4], cfg.StateDir()) || strings.HasPrefix(f[4], "/var/run/netns/"+NodePrefix) || strings.HasPrefix(f[4], "/run/netns/"+NodePrefix)) {
			out = append(out, f[4])
		}
	}
	return out
}

// removeAll removes a directory tree, refusing to cross into mounts.
func removeAll(cfg *Config, dir string) error {
	if m := leftoverMounts(cfg); len(m) > 0 {
		return fmt.Errorf("refusing to remove %s: still mounted: %s", dir, strings.Join(m, ", "))
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
