package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Every node owns the cgroup /<node> in every hierarchy: kubelet runs pods
// under it (cgroupRoot), and the node's own daemons live in /<node>/system.
// Two kubelets on one machine must not share a cgroup root, or each cleans
// up the other's pods; and killing everything in /<node> stops a node
// without leaving shims or containers behind.

// cgroupMounts lists the mount points of the machine's cgroup hierarchies
// (one for cgroup v2, one per controller group for v1).
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer func() { _ = f.Close() }()
	seen := map[string]bool{}
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, fstype := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fstype) == 0 || (fstype[0] != "cgroup" && fstype[0] != "cgroup2") {
			continue
		}
		if mp := fields[4]; !seen[mp] {
			seen[mp] = true
			mounts = append(mounts, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	if len(mounts) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	sort.Strings(mounts)
	return mounts, nil
}

// createNodeCgroups creates /<node> and /<node>/system in every hierarchy.
func createNodeCgroups(node string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, "cgroup.subtree_control")); err == nil {
			// cgroup v2: let children use the controllers kubelet needs.
			for _, dir := range []string{m, filepath.Join(m, node)} {
				if dir != m {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						return fmt.Errorf("create cgroup %s: %w", dir, err)
					}
				}
				_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +cpuset +memory +pids"), 0o644)
			}
		}
		for _, dir := range []string{filepath.Join(m, node), filepath.Join(m, node, "system")} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			// A v1 cpuset cgroup takes no task until it has cpus and mems.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
				if err != nil {
					continue
				}
				if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) == "" {
					if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
						return fmt.Errorf("set %s of %s: %w", f, dir, err)
					}
				}
			}
		}
	}
	return nil
}

// joinNodeCgroup moves pid into /<node>/system in every hierarchy.
func joinNodeCgroup(node string, pid int) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		procs := filepath.Join(m, node, "system", "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("join %s: %w", procs, err)
		}
	}
	return nil
}

// nodeCgroupPids lists the processes anywhere under /<node>.
func nodeCgroupPids(node string) ([]int, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var pids []int
	for _, m := range mounts {
		root := filepath.Join(m, node)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil // raced with removal
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list processes of %s: %w", root, err)
		}
	}
	return pids, nil
}

// killNodeCgroups kills every process of the node and removes its cgroups,
// deepest first.
func killNodeCgroups(ctx context.Context, node string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids, err := nodeCgroupPids(node)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of %s survive SIGKILL", pids, node)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, node), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for k := len(dirs) - 1; k >= 0; k-- { // children come after parents in a walk
			if err := removeCgroup(ctx, dirs[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeCgroup removes an empty cgroup; the kernel may report it busy for
// a moment after its last task exits.
func removeCgroup(ctx context.Context, dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// leftoverCgroups lists node cgroups present in any hierarchy.
func leftoverCgroups() ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var left []string
	for _, m := range mounts {
		entries, err := os.ReadDir(m)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), NodePrefix) {
				left = append(left, filepath.Join(m, e.Name()))
			}
		}
	}
	return left, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
