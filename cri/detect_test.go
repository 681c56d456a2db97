package cri_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/cri"
)

// hostRoot makes a short temporary host root (unix socket paths are limited
// to about 108 bytes, too little for t.TempDir under long test names).
func hostRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// listenAt creates a listening unix socket at root+path, closed at cleanup.
func listenAt(t *testing.T, root, path string) {
	t.Helper()
	full := filepath.Join(root, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	l, err := net.Listen("unix", full)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
}

// staleSocketAt leaves a unix socket file at root+path that nobody listens
// on, as a crashed runtime would.
func staleSocketAt(t *testing.T, root, path string) {
	t.Helper()
	full := filepath.Join(root, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: full, Net: "unix"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
}

// fileAt creates a regular file at root+path.
func fileAt(t *testing.T, root, path string) {
	t.Helper()
	full := filepath.Join(root, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, os.WriteFile(full, []byte("not a socket"), 0o644))
}

func TestDetectProbes(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, root string)
		wantName string
		wantPath string
	}{
		{
			name:     "containerd socket listening",
			setup:    func(t *testing.T, root string) { listenAt(t, root, "/run/containerd/containerd.sock") },
			wantName: cri.RuntimeContainerd,
			wantPath: "/run/containerd/containerd.sock",
		},
		{
			name: "containerd first when several listen",
			setup: func(t *testing.T, root string) {
				listenAt(t, root, "/run/crio/crio.sock")
				listenAt(t, root, "/run/containerd/containerd.sock")
			},
			wantName: cri.RuntimeContainerd,
			wantPath: "/run/containerd/containerd.sock",
		},
		{
			name: "skips a regular file and a stale socket to reach cri-dockerd",
			setup: func(t *testing.T, root string) {
				fileAt(t, root, "/run/containerd/containerd.sock")
				staleSocketAt(t, root, "/run/crio/crio.sock")
				listenAt(t, root, "/run/cri-dockerd.sock")
			},
			wantName: cri.RuntimeCRIDockerd,
			wantPath: "/run/cri-dockerd.sock",
		},
		{
			name:     "CRI-O under /var/run",
			setup:    func(t *testing.T, root string) { listenAt(t, root, "/var/run/crio/crio.sock") },
			wantName: cri.RuntimeCRIO,
			wantPath: "/var/run/crio/crio.sock",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := hostRoot(t)
			tc.setup(t, root)
			ep, err := cri.Detect(root, "")
			require.NoError(t, err)
			require.Equal(t, cri.Endpoint{Name: tc.wantName, Address: "unix://" + root + tc.wantPath}, ep)
			require.Equal(t, root+tc.wantPath, ep.Path())
		})
	}
}

func TestDetectNothingUsable(t *testing.T) {
	root := hostRoot(t)
	fileAt(t, root, "/run/containerd/containerd.sock")
	staleSocketAt(t, root, "/run/crio/crio.sock")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "/run/cri-dockerd.sock"), 0o755))

	_, err := cri.Detect(root, "")
	require.Error(t, err)
	var derr *cri.DetectError
	require.True(t, errors.As(err, &derr))
	require.Equal(t, root, derr.HostRoot)

	want := []struct {
		path  string
		cause cri.ProbeCause
	}{
		{"/run/containerd/containerd.sock", cri.ProbeNotSocket},
		{"/run/crio/crio.sock", cri.ProbeDialFailed},
		{"/var/run/crio/crio.sock", cri.ProbeNotFound},
		{"/run/cri-dockerd.sock", cri.ProbeNotSocket},
		{"/var/run/cri-dockerd.sock", cri.ProbeNotFound},
	}
	require.Len(t, derr.Probes, len(want))
	for i, w := range want {
		t.Run(w.path, func(t *testing.T) {
			p := derr.Probes[i]
			require.Equal(t, root+w.path, p.Path)
			require.Equal(t, w.cause, p.Cause)
			require.Contains(t, err.Error(), p.String(), "the message lists every path tried and why")
		})
	}

	msg := err.Error()
	for _, s := range []string{"not found", "not a socket", "a regular file", "a directory", "dial error", "connection refused",
		"--host-root", "--runtime-endpoint", filepath.Join(root, "run")} {
		require.Contains(t, msg, s)
	}
}

func TestDetectUnprefixedHostRoot(t *testing.T) {
	for _, root := range []string{"", "/"} {
		t.Run("root="+root, func(t *testing.T) {
			ep, err := cri.Detect(root, "")
			if err == nil {
				// This machine runs a CRI runtime at a default path.
				require.Contains(t, cri.DefaultSocketPaths(), ep.Path())
				return
			}
			var derr *cri.DetectError
			require.True(t, errors.As(err, &derr))
			var paths []string
			for _, p := range derr.Probes {
				paths = append(paths, p.Path)
			}
			require.Equal(t, cri.DefaultSocketPaths(), paths)
		})
	}
}

func TestDetectExplicit(t *testing.T) {
	tests := []struct {
		name     string
		explicit string
		want     cri.Endpoint
		wantErr  string
	}{
		{name: "unix URL", explicit: "unix:///run/k3s/containerd/containerd.sock", want: cri.Endpoint{Name: cri.RuntimeContainerd, Address: "unix:///run/k3s/containerd/containerd.sock"}},
		{name: "plain path", explicit: "/var/run/crio/crio.sock", want: cri.Endpoint{Name: cri.RuntimeCRIO, Address: "unix:///var/run/crio/crio.sock"}},
		{name: "cri-dockerd", explicit: "unix:///var/run/cri-dockerd.sock", want: cri.Endpoint{Name: cri.RuntimeCRIDockerd, Address: "unix:///var/run/cri-dockerd.sock"}},
		{name: "unknown runtime", explicit: "/tmp/x/runtime.sock", want: cri.Endpoint{Name: cri.RuntimeUnknown, Address: "unix:///tmp/x/runtime.sock"}},
		{name: "path is cleaned", explicit: "/run//containerd/./containerd.sock", want: cri.Endpoint{Name: cri.RuntimeContainerd, Address: "unix:///run/containerd/containerd.sock"}},
		{name: "tcp rejected", explicit: "tcp://10.0.0.1:1234", wantErr: `unsupported scheme "tcp"`},
		{name: "empty unix path", explicit: "unix://", wantErr: "empty socket path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The host root is not applied to, nor probed for, an explicit endpoint.
			ep, err := cri.Detect("/nonexistent-host-root", tc.explicit)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, ep)
		})
	}
}

func TestGuessRuntimeName(t *testing.T) {
	tests := map[string]string{
		"/run/containerd/containerd.sock":            cri.RuntimeContainerd,
		"unix:///run/k3s/containerd/containerd.sock": cri.RuntimeContainerd,
		"/var/run/crio/crio.sock":                    cri.RuntimeCRIO,
		"/run/cri-dockerd.sock":                      cri.RuntimeCRIDockerd,
		"/var/run/dockershim.sock":                   cri.RuntimeUnknown,
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			require.Equal(t, want, cri.GuessRuntimeName(in))
		})
	}
}
