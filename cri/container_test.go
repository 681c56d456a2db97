package cri_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
)

func TestParseContainerID(t *testing.T) {
	tests := []struct {
		in, runtime, id string
	}{
		{"containerd://abc", "containerd", "abc"},
		{"cri-o://0123", "cri-o", "0123"},
		{"docker://x://y", "docker", "x://y"},
		{"abc", "", "abc"},
		{"", "", ""},
		{"://abc", "", "abc"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			rt, id := cri.ParseContainerID(tc.in)
			require.Equal(t, tc.runtime, rt)
			require.Equal(t, tc.id, id)
		})
	}
}

func TestPodContainers(t *testing.T) {
	ctx := context.Background()
	f := nodeFixture(t)
	inv, err := f.Runtime.Inventory(ctx)
	require.NoError(t, err)

	tests := []struct {
		name      string
		namespace string
		pod       string
		uid       string
		want      []string // container names
	}{
		{"latest attempt of each name", "default", "web", "uid-web", []string{"app", "init-config", "sidecar"}},
		{"only the pod's own UID", "default", "db-0", "uid-db-new", []string{"db"}},
		{"created, not started", "kube-system", "coredns", "uid-dns", []string{"coredns"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.Runtime.PodContainers(ctx, tc.uid)
			require.NoError(t, err)
			names := make([]string, 0, len(got))
			for _, c := range got {
				names = append(names, c.Name)
			}
			require.Equal(t, tc.want, names)
			// The same view as the inventory's.
			p, ok := inv.Find(tc.namespace, tc.pod)
			require.True(t, ok)
			require.Equal(t, p.Containers, got)
		})
	}

	t.Run("state, attempt, restart count and start time", func(t *testing.T) {
		got, err := f.Runtime.PodContainers(ctx, "uid-web")
		require.NoError(t, err)
		app := got[0]
		require.Equal(t, cri.ContainerRunning, app.State)
		require.EqualValues(t, 2, app.Attempt)
		require.Equal(t, 2, app.RestartCount)
		require.Equal(t, 2, app.OlderAttempts)
		require.NotNil(t, app.StartedAt)
		require.Equal(t, at(161), *app.StartedAt)
		require.Equal(t, preStopExec, app.PreStop)
	})

	t.Run("unknown pod", func(t *testing.T) {
		got, err := f.Runtime.PodContainers(ctx, "uid-none")
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("empty UID", func(t *testing.T) {
		_, err := f.Runtime.PodContainers(ctx, "")
		require.ErrorContains(t, err, "empty pod UID")
	})

	t.Run("list fails", func(t *testing.T) {
		boom := errors.New("boom")
		f.RuntimeService.InjectError("ListContainers", boom)
		_, err := f.Runtime.PodContainers(ctx, "uid-web")
		require.ErrorIs(t, err, boom)
		require.ErrorContains(t, err, "list containers of pod uid-web")
	})

	t.Run("status fails: a warning, not an error", func(t *testing.T) {
		f.RuntimeService.InjectError("ContainerStatus", errors.New("flaky"))
		got, err := f.Runtime.PodContainers(ctx, "uid-db-new")
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Len(t, got[0].Warnings, 1)
		require.Contains(t, got[0].Warnings[0], "flaky")
	})

	t.Run("context ended", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		f.RuntimeService.InjectError("ContainerStatus", context.Canceled)
		_, err := f.Runtime.PodContainers(cctx, "uid-web")
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestStopContainer(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{"no grace", 0, 0},
		{"negative is no grace", -time.Second, 0},
		{"whole seconds", 30 * time.Second, 30 * time.Second},
		{"rounded up", 1500 * time.Millisecond, 2 * time.Second},
		{"a nanosecond is a second", time.Nanosecond, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := critest.NewHooked(t)
			sb := f.AddSandbox(critest.Sandbox{Namespace: "ns", Name: "p", UID: "u"})
			c := f.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING})

			require.NoError(t, f.Runtime.StopContainer(ctx, c.ID, tc.timeout))
			require.Equal(t, []critest.Call{{Method: "StopContainer", ContainerID: c.ID, Timeout: tc.want}}, f.StopCalls())
			got, err := f.Runtime.PodContainers(ctx, "u")
			require.NoError(t, err)
			require.Equal(t, cri.ContainerExited, got[0].State)
		})
	}

	t.Run("error", func(t *testing.T) {
		f := critest.NewHooked(t)
		err := f.Runtime.StopContainer(context.Background(), "missing", time.Second)
		require.ErrorContains(t, err, `stop container "missing"`)

		boom := errors.New("boom")
		f.RuntimeService.InjectError("StopContainer", boom)
		err = f.Runtime.StopContainer(context.Background(), "missing", time.Second)
		require.ErrorIs(t, err, boom)
	})
}

func TestExecSync(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		answer     critest.ExecFunc
		timeout    time.Duration
		wantOut    string
		wantErrOut string
		wantCode   int32
		wantErr    error
		wantSent   time.Duration
	}{
		{
			name: "success",
			answer: func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
				return []byte("out"), []byte("err"), nil
			},
			timeout: 10 * time.Second, wantOut: "out", wantErrOut: "err", wantSent: 10 * time.Second,
		},
		{
			name: "non-zero exit is not an error",
			answer: func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
				return []byte("o"), []byte("failed"), utilexec.CodeExitError{Err: errors.New("exit 3"), Code: 3}
			},
			timeout: 1500 * time.Millisecond, wantOut: "o", wantErrOut: "failed", wantCode: 3, wantSent: 2 * time.Second,
		},
		{
			name: "could not run",
			answer: func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
				return nil, nil, boom
			},
			wantErr: boom,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := critest.NewHooked(t)
			f.OnExec(tc.answer)
			out, errOut, code, err := f.Runtime.ExecSync(context.Background(), "c1", []string{"sh", "-c", "true"}, tc.timeout)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorContains(t, err, `exec in container "c1"`)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantOut, string(out))
			require.Equal(t, tc.wantErrOut, string(errOut))
			require.Equal(t, tc.wantCode, code)
			require.Equal(t, []critest.Call{{Method: "ExecSync", ContainerID: "c1", Cmd: []string{"sh", "-c", "true"}, Timeout: tc.wantSent}}, f.ExecCalls())
		})
	}
}

// TestContainerOpsOverGRPC runs StopContainer and ExecSync through the
// real CRI client against the cri-client fake server, where an exit code
// travels in the response.
func TestContainerOpsOverGRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := hostRoot(t)
	srv := startFakeRuntime(t, root, "/run/containerd/containerd.sock")
	ep, err := cri.Detect(root, "")
	require.NoError(t, err)
	rt, err := cri.Connect(ctx, ep, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rt.Close(ctx)) })

	fill := &critest.Fake{RuntimeService: srv.RuntimeService, ImageService: srv.ImageService}
	sb := fill.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "u1"})
	c := fill.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: at(1)})

	srv.RuntimeService.InjectError("ExecSync", utilexec.CodeExitError{Err: errors.New("exit 7"), Code: 7})
	_, _, code, err := rt.ExecSync(ctx, c.ID, []string{"false"}, time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 7, code)

	_, _, code, err = rt.ExecSync(ctx, c.ID, []string{"true"}, time.Second)
	require.NoError(t, err)
	require.Zero(t, code)

	require.NoError(t, rt.StopContainer(ctx, c.ID, 2*time.Second))
	got, err := rt.PodContainers(ctx, "u1")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, cri.ContainerExited, got[0].State)
	require.Equal(t, c.ID, got[0].ID)
}

func TestFakeRestart(t *testing.T) {
	ctx := context.Background()
	f := critest.NewHooked(t)
	sb := f.AddSandbox(critest.Sandbox{Namespace: "ns", Name: "p", UID: "u"})
	c := f.AddContainer(sb, critest.Container{Name: "app", Attempt: 2, State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	f.RestartOnStop()

	require.NoError(t, f.Runtime.StopContainer(ctx, c.ID, time.Second))
	got, err := f.Runtime.PodContainers(ctx, "u")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotEqual(t, c.ID, got[0].ID)
	require.EqualValues(t, 3, got[0].Attempt)
	require.Equal(t, 3, got[0].RestartCount)
	require.Equal(t, 1, got[0].OlderAttempts)
	require.Equal(t, cri.ContainerRunning, got[0].State)
	require.NotNil(t, got[0].StartedAt)

	f.SetState(got[0].ID, runtimeapi.ContainerState_CONTAINER_EXITED)
	got, err = f.Runtime.PodContainers(ctx, "u")
	require.NoError(t, err)
	require.Equal(t, cri.ContainerExited, got[0].State)
}

func TestContainerEnv(t *testing.T) {
	f := critest.NewHooked(t)
	sb := f.AddSandbox(critest.Sandbox{Namespace: "ns", Name: "p", UID: "u"})
	c := f.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING})

	_, err := f.Runtime.ContainerEnv(t.Context(), c.ID)
	require.ErrorContains(t, err, "no verbose info", "a runtime that reports none")

	f.OnEnv(func(name string, attempt uint32) []string {
		return []string{"PATH=/bin", "TEST_ENV=foo", "EMPTY=", "TEST_ENV=bar", "EQ=a=b"}
	})
	env, err := f.Runtime.ContainerEnv(t.Context(), c.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"PATH": "/bin", "TEST_ENV": "bar", "EMPTY": "", "EQ": "a=b"}, env, "a later entry wins")

	_, err = f.Runtime.ContainerEnv(t.Context(), "no-such-container")
	require.Error(t, err)
}
