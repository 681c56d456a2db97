//go:build bench

package probecost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/internal/containerdtest"
	"github.com/shoal-io/shoal/internal/ociimage"
	"github.com/shoal-io/shoal/test/cluster/images"
)

// sandboxImageHost is the registry of containerdtest's sandbox_image
// ("127.0.0.1:1/pause:unused"): nothing listens there, so the bench gives
// containerd a hosts.toml that sends that host to the in-process registry,
// where the pause image is pushed as pause:unused.
const sandboxImageHost = "127.0.0.1:1"

// Names of the benchmark pod and its two containers.
const (
	podNamespace = "bench"
	podName      = "probecost"
	podUID       = "probecost-0000-4000-8000-000000000001"
	// serverContainer runs the testserver: the target of TCP and HTTP
	// probes (the pod shares the node's network, so 127.0.0.1:port).
	serverContainer = "server"
	// shellContainer runs busybox: the target of exec probes.
	shellContainer = "shell"
)

// podEnv is a private containerd running one real pod (runc containers
// made through CRI, the way the kubelet makes them): the testserver and a
// busybox shell.
type podEnv struct {
	ctrd      *containerdtest.Containerd
	rt        *cri.Runtime
	sandboxID string
	serverID  string
	shellID   string
	// port is the testserver's port on 127.0.0.1.
	port int
	// runcRoot is the runc state root containerd's shim uses for the
	// pod's containers ("" when it could not be found).
	runcRoot string
	// containerdPID is the private containerd's process.
	containerdPID int
}

// startPod starts a private containerd (skipping the test where that
// cannot be done: no containerd, not root, no mounts), builds the pause,
// busybox and testserver images without Docker, serves them from an
// in-process registry, and runs the pod with host networking (no CNI
// needed). Everything is stopped and removed when the test ends: the pod
// (sandbox and containers) through CRI, any shim left over by its id,
// then containerd, its mounts and its directory (containerdtest).
func startPod(ctx context.Context, t *testing.T) *podEnv {
	t.Helper()
	if _, err := os.Stat(images.DefaultBusyboxPath); err != nil {
		t.Skipf("busybox-static is not installed (%v): apt-get install busybox-static", err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed")
	}

	// The images, built from scratch like the local cluster's.
	binary, err := images.BuildGoBinary(ctx, images.TestserverPackage, runtime.GOARCH, "", t.TempDir())
	require.NoError(t, err, "build the testserver")
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	refs := map[string]string{}
	for _, b := range []struct {
		repo  string
		build func(string) (v1.Image, error)
		input string
	}{
		{"pause:unused", images.Pause, binary},
		{"busybox:latest", images.Busybox, images.DefaultBusyboxPath},
		{"testserver:latest", images.Testserver, binary},
	} {
		img, err := b.build(b.input)
		require.NoError(t, err, "build %s", b.repo)
		refs[b.repo] = host + "/" + b.repo
		require.NoError(t, ociimage.Push(ctx, refs[b.repo], img), "push %s", b.repo)
	}

	e := &podEnv{}
	// Registered before containerd starts, so it runs after containerd
	// stopped: a shim still alive then (the pod could not be removed)
	// would keep the container's processes and mounts.
	t.Cleanup(func() { e.killShims(t) })
	e.ctrd = containerdtest.Start(t, containerdtest.Options{PlainHTTPRegistries: []string{host}})
	mirror := filepath.Join(e.ctrd.CertsDir, sandboxImageHost)
	require.NoError(t, os.MkdirAll(mirror, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mirror, "hosts.toml"), []byte(fmt.Sprintf(
		"server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host)), 0o644))
	e.rt = e.ctrd.Connect(ctx, t)
	pid, err := e.findContainerd()
	require.NoError(t, err)
	e.containerdPID = pid
	t.Logf("containerd %s (pid %d), registry %s", e.rt.Version(), pid, host)

	e.port = freePort(t)
	sandbox := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: podName, Namespace: podNamespace, Uid: podUID},
		Labels: map[string]string{
			cri.LabelPodName: podName, cri.LabelPodNamespace: podNamespace, cri.LabelPodUID: podUID,
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	for _, repo := range []string{"busybox:latest", "testserver:latest"} {
		_, err := e.rt.PullImage(ctx, refs[repo], nil, sandbox)
		require.NoError(t, err, "pull %s", refs[repo])
	}
	rs := e.rt.RuntimeService()
	e.sandboxID, err = rs.RunPodSandbox(ctx, sandbox, "")
	if err != nil {
		e.ctrd.DumpLog(t)
	}
	require.NoError(t, err, "run the pod sandbox")
	t.Cleanup(func() { e.removePod(t) })

	run := func(name, image string, command, args []string) string {
		cfg := &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Command:  command,
			Args:     args,
			Labels: map[string]string{
				cri.LabelPodName: podName, cri.LabelPodNamespace: podNamespace, cri.LabelPodUID: podUID,
				cri.LabelContainerName: name,
			},
			Linux: &runtimeapi.LinuxContainerConfig{},
		}
		id, err := rs.CreateContainer(ctx, e.sandboxID, cfg, sandbox)
		require.NoError(t, err, "create container %s", name)
		require.NoError(t, rs.StartContainer(ctx, id), "start container %s", name)
		return id
	}
	e.serverID = run(serverContainer, refs["testserver:latest"], nil, []string{"serve", "--port", strconv.Itoa(e.port)})
	e.shellID = run(shellContainer, refs["busybox:latest"], []string{"sleep", "86400"}, nil)
	e.waitServer(ctx, t)
	_, stderr, code, err := e.rt.ExecSync(ctx, e.shellID, execCommand, 5*time.Second)
	require.NoError(t, err, "exec in the shell container")
	require.Zero(t, code, "exec %v in the shell container: %s", execCommand, stderr)
	e.runcRoot = findRuncRoot(e.shellID)
	t.Logf("pod %s: sandbox %.12s, server %.12s on 127.0.0.1:%d, shell %.12s; runc root %q",
		podName, e.sandboxID, e.serverID, e.port, e.shellID, e.runcRoot)
	return e
}

// removePod stops and removes the pod through CRI (containers first, by
// StopPodSandbox), bounded.
func (e *podEnv) removePod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs := e.rt.RuntimeService()
	if err := rs.StopPodSandbox(ctx, e.sandboxID); err != nil {
		t.Logf("stop the pod sandbox: %v", err)
	}
	if err := rs.RemovePodSandbox(ctx, e.sandboxID); err != nil {
		t.Logf("remove the pod sandbox: %v", err)
	}
}

// killShims kills (by pid) the shims of this containerd still running
// after it stopped, if any: normally removing the pod ended them.
func (e *podEnv) killShims(t *testing.T) {
	if e.ctrd == nil {
		return
	}
	for _, pid := range e.shimPIDs() {
		t.Logf("killing leftover shim %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// freePort returns a TCP port free on this machine now. The testserver
// listens on it on every address (the pod shares the node's network).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// waitServer waits (bounded polling) until the testserver accepts.
func (e *podEnv) waitServer(ctx context.Context, t *testing.T) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(e.port))
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond) // bounded polling for the server to listen
	}
	t.Fatalf("the testserver did not listen on %s: %v", addr, last)
}

// findRuncRoot returns the runc root holding container id's state: the
// runc shim's default root, /run/containerd/runc/<namespace>.
func findRuncRoot(id string) string {
	matches, _ := filepath.Glob(filepath.Join("/run/containerd/runc", "*", id, "state.json"))
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(filepath.Dir(matches[0]))
}

// cmdline returns the arguments of process pid.
func cmdline(pid int) []string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// pids lists the processes whose arguments match.
func pids(match func(args []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if args := cmdline(pid); len(args) > 0 && match(args) {
			out = append(out, pid)
		}
	}
	return out
}

// findContainerd returns the pid of the private containerd: the process
// started with its config file.
func (e *podEnv) findContainerd() (int, error) {
	cfg := filepath.Join(e.ctrd.Dir, "config.toml")
	found := pids(func(args []string) bool {
		return filepath.Base(args[0]) == "containerd" && containsArg(args, cfg)
	})
	if len(found) != 1 {
		return 0, errors.New("cannot find the private containerd's process (by its --config " + cfg + ")")
	}
	return found[0], nil
}

// shimPIDs returns the pids of the shims of the private containerd: the
// ones given its socket as -address.
func (e *podEnv) shimPIDs() []int {
	return pids(func(args []string) bool {
		return strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && containsArg(args, e.ctrd.Socket)
	})
}

func containsArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}
