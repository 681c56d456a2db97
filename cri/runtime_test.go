package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
)

// startFakeRuntime serves the cri-client fake runtime over gRPC on a unix
// socket at root+path.
func startFakeRuntime(t *testing.T, root, path string) *fakeremote.RemoteRuntime {
	t.Helper()
	full := filepath.Join(root, path)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	srv := fakeremote.NewFakeRemoteRuntime()
	require.NoError(t, srv.Start("unix://"+full))
	t.Cleanup(srv.Stop)
	return srv
}

func TestDetectConnectAndReadInventoryOverGRPC(t *testing.T) {
	ctx := context.Background()
	root := hostRoot(t)
	srv := startFakeRuntime(t, root, "/run/containerd/containerd.sock")

	ep, err := cri.Detect(root, "")
	require.NoError(t, err)
	require.Equal(t, cri.RuntimeContainerd, ep.Name)

	rt, err := cri.Connect(ctx, ep, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rt.Close(ctx)) })

	require.Equal(t, ep, rt.Endpoint())
	require.Equal(t, apitest.FakeRuntimeName, rt.Name(), "the name the runtime gives, not the guess from the path")
	require.Equal(t, apitest.FakeVersion, rt.Version())
	require.Equal(t, apitest.FakeVersion, rt.APIVersion())

	// The fake behind the socket, filled as kubelet would.
	fill := &critest.Fake{RuntimeService: srv.RuntimeService, ImageService: srv.ImageService}
	sb := fill.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "u1", CreatedAt: at(0), IP: "10.1.2.3"})
	fill.AddContainer(sb, critest.Container{Name: "app", Attempt: 1, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: at(1), StartedAt: at(2), PreStop: preStopExec})
	srv.ImageService.SetFakeImages([]string{"registry.local/app:v1"})

	inv, err := rt.Inventory(ctx)
	require.NoError(t, err)
	p, ok := inv.Find("default", "web")
	require.True(t, ok)
	require.Equal(t, "10.1.2.3", p.IP)
	c, ok := p.Container("app")
	require.True(t, ok)
	require.Equal(t, 1, c.RestartCount)
	require.Equal(t, preStopExec, c.PreStop)
	require.Empty(t, c.Warnings)
	require.Equal(t, ptr.To(at(2)), c.StartedAt)

	images, err := rt.ImageService().ListImages(ctx, nil)
	require.NoError(t, err)
	require.Len(t, images, 1)

	sandboxes, err := rt.RuntimeService().ListPodSandbox(ctx, nil)
	require.NoError(t, err)
	require.Len(t, sandboxes, 1)
}

func TestConnectFails(t *testing.T) {
	tests := []struct {
		name string
		ep   func(t *testing.T) cri.Endpoint
	}{
		{"nothing at the path", func(t *testing.T) cri.Endpoint {
			return cri.Endpoint{Name: cri.RuntimeUnknown, Address: "unix://" + filepath.Join(hostRoot(t), "none.sock")}
		}},
		{"stale socket", func(t *testing.T) cri.Endpoint {
			root := hostRoot(t)
			staleSocketAt(t, root, "/cri.sock")
			return cri.Endpoint{Name: cri.RuntimeUnknown, Address: "unix://" + root + "/cri.sock"}
		}},
		{"not a unix endpoint", func(*testing.T) cri.Endpoint {
			return cri.Endpoint{Name: cri.RuntimeUnknown, Address: "tcp://127.0.0.1:1"}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ep := tc.ep(t)
			_, err := cri.Connect(ctx, ep, 2*time.Second)
			require.ErrorContains(t, err, "connect to CRI runtime service at "+ep.Address)
		})
	}
}

func TestNewRuntimeAndClose(t *testing.T) {
	ctx := context.Background()
	t.Run("version error", func(t *testing.T) {
		rs := apitest.NewFakeRuntimeService()
		rs.InjectError("Version", context.DeadlineExceeded)
		_, err := cri.NewRuntime(ctx, cri.Endpoint{Address: "unix:///x.sock"}, rs, apitest.NewFakeImageService())
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "CRI Version from unix:///x.sock")
	})
	t.Run("close closes both services", func(t *testing.T) {
		f := critest.New(t)
		require.NoError(t, f.Runtime.Close(ctx))
		require.Contains(t, f.RuntimeService.GetCalls(), "Close")
		require.Contains(t, f.ImageService.Called, "Close")
		require.Same(t, f.RuntimeService, f.Runtime.RuntimeService())
		require.Same(t, f.ImageService, f.Runtime.ImageService())
	})
}

// TestConnectRealRuntime talks to a real CRI runtime when there is one:
// $SHOAL_TEST_CRI_ENDPOINT, else containerd's default socket.
func TestConnectRealRuntime(t *testing.T) {
	explicit := os.Getenv("SHOAL_TEST_CRI_ENDPOINT")
	if explicit == "" {
		const sock = "/run/containerd/containerd.sock"
		if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Skipf("no CRI runtime at %s and SHOAL_TEST_CRI_ENDPOINT unset", sock)
		}
		explicit = sock
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, err := cri.Detect("/", explicit)
	require.NoError(t, err)
	rt, err := cri.Connect(ctx, ep, 10*time.Second)
	require.NoError(t, err)
	defer func() { require.NoError(t, rt.Close(ctx)) }()
	t.Logf("runtime %s %s (CRI %s) at %s", rt.Name(), rt.Version(), rt.APIVersion(), ep.Address)
	require.NotEmpty(t, rt.Name())
	require.NotEmpty(t, rt.Version())
	if ep.Name == cri.RuntimeContainerd {
		require.Equal(t, "containerd", rt.Name())
	}
	inv, err := rt.Inventory(ctx)
	require.NoError(t, err)
	t.Logf("%d pods", len(inv.Pods))
}
