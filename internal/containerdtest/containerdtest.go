// Package containerdtest starts a private containerd for integration
// tests: own root, state, socket and registry config directory, the CRI
// plugin, overlayfs. It is not test code itself, but only tests use it.
package containerdtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/shoal-io/shoal/cri"
)

// Options is what tests choose about a private containerd.
type Options struct {
	// PlainHTTPRegistries are registry hosts ("host:port") containerd
	// pulls from over plain HTTP: each gets a hosts.toml under CertsDir
	// before containerd starts.
	PlainHTTPRegistries []string
}

// Containerd is a running private containerd, stopped and cleaned up
// when the test ends.
type Containerd struct {
	// Dir holds everything of this containerd: root, state, socket,
	// config, log.
	Dir string
	// Socket is the path of containerd's gRPC socket.
	Socket string
	// CertsDir is the CRI registry config_path: one directory per
	// registry host, with its hosts.toml.
	CertsDir string
	// LogPath is containerd's output.
	LogPath string
}

// Start starts a private containerd, or skips the test when that cannot
// be done here (no containerd binary, not root, no mounts). On cleanup it
// stops containerd (SIGTERM, then SIGKILL), dumps the end of its log if
// the test failed, unmounts what is left mounted under Dir and removes
// Dir.
func Start(t *testing.T, opts Options) *Containerd {
	t.Helper()
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Skip("containerd is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("a private containerd needs root")
	}
	dir, err := os.MkdirTemp("", "shoal-ctrd-") // short: the socket path is bounded
	require.NoError(t, err)
	// Unpacking layers mounts; without the privilege to, skip.
	probe := filepath.Join(dir, "mount-probe")
	require.NoError(t, os.Mkdir(probe, 0o755))
	if err := unix.Mount("tmpfs", probe, "tmpfs", 0, "size=1m"); err != nil {
		_ = os.RemoveAll(dir)
		t.Skipf("cannot mount here (%v): a private containerd could not unpack layers", err)
	}
	require.NoError(t, unix.Unmount(probe, 0))
	c := &Containerd{
		Dir:      dir,
		Socket:   filepath.Join(dir, "containerd.sock"),
		LogPath:  filepath.Join(dir, "containerd.log"),
		CertsDir: filepath.Join(dir, "certs.d"),
	}
	require.NoError(t, os.MkdirAll(c.CertsDir, 0o755))
	for _, host := range opts.PlainHTTPRegistries {
		hostsDir := filepath.Join(c.CertsDir, host)
		require.NoError(t, os.MkdirAll(hostsDir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(fmt.Sprintf(
			"server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host)), 0o644))
	}
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "127.0.0.1:1/pause:unused"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[8]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.Socket, c.Socket+".ttrpc", filepath.Join(dir, "opt"),
		filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "net.d"), c.CertsDir)
	cfgPath := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	logf, err := os.Create(c.LogPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logf.Close()
		if t.Failed() {
			c.DumpLog(t)
		}
		unmountUnder(t, dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("clean up the private containerd: %v", err)
		}
	})
	return c
}

// Endpoint is containerd's CRI endpoint.
func (c *Containerd) Endpoint() cri.Endpoint {
	return cri.Endpoint{Name: cri.RuntimeContainerd, Address: "unix://" + c.Socket}
}

// Connect waits (bounded polling) for containerd's CRI to answer and
// returns a runtime closed when the test ends. It skips the test when the
// CRI image service is not usable here.
func (c *Containerd) Connect(ctx context.Context, t *testing.T) *cri.Runtime {
	t.Helper()
	var rt *cri.Runtime
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(c.Socket); err == nil {
			if rt, last = cri.Connect(ctx, c.Endpoint(), 10*time.Second); last == nil {
				break
			}
		}
		timer := time.NewTimer(50 * time.Millisecond) // bounded polling for the daemon to come up
		<-timer.C
	}
	if rt == nil {
		c.DumpLog(t)
		t.Fatalf("containerd's CRI did not come up: %v", last)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	if _, err := rt.ImageService().ImageFsInfo(ctx); err != nil {
		c.DumpLog(t)
		t.Skipf("containerd's CRI image service is not usable here: %v", err)
	}
	return rt
}

// DumpLog logs the last lines of containerd's output.
func (c *Containerd) DumpLog(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	t.Logf("containerd log (last lines):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
}

// unmountUnder unmounts whatever is still mounted under dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", m, err)
		}
	}
}
