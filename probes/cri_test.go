package probes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	fakeremote "k8s.io/cri-client/pkg/fake"
	utilexec "k8s.io/utils/exec"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
	"github.com/shoal-io/shoal/probes"
	"github.com/shoal-io/shoal/probes/probestest"
)

// criHarness drives CRIRuntime over the CRI fakes of
// k8s.io/cri-api/pkg/apis/testing, filled as kubelet would.
type criHarness struct {
	t   *testing.T
	f   *critest.Fake
	rt  probes.Runtime
	sbs map[string]critest.Sandbox
}

func newCRIHarness(t *testing.T) probestest.Harness {
	f := critest.NewHooked(t)
	return &criHarness{t: t, f: f, rt: probes.CRIRuntime(func() (*cri.Runtime, error) { return f.Runtime, nil }, nil), sbs: map[string]critest.Sandbox{}}
}

func (h *criHarness) Runtime() probes.Runtime { return h.rt }

func (h *criHarness) sandbox(podUID string) critest.Sandbox {
	sb, ok := h.sbs[podUID]
	if !ok {
		sb = h.f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "pod-" + podUID, UID: podUID, IP: "10.0.0.1"})
		h.sbs[podUID] = sb
	}
	return sb
}

func (h *criHarness) AddRunning(podUID, name string, startedAt time.Time) string {
	return h.f.AddContainer(h.sandbox(podUID), critest.Container{Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: startedAt}).ID
}

func (h *criHarness) AddCreated(podUID, name string) string {
	return h.f.AddContainer(h.sandbox(podUID), critest.Container{Name: name, State: runtimeapi.ContainerState_CONTAINER_CREATED}).ID
}

func (h *criHarness) Exit(id string) { h.f.SetState(id, runtimeapi.ContainerState_CONTAINER_EXITED) }

func (h *criHarness) Restart(id string, startedAt time.Time) string {
	newID := h.f.Restart(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	h.f.RuntimeService.Lock()
	h.f.RuntimeService.Containers[newID].StartedAt = startedAt.UnixNano()
	h.f.RuntimeService.Unlock()
	return newID
}

func (h *criHarness) ReplyExec(r probestest.ExecReply) {
	h.f.OnExec(func(_ context.Context, _ string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
		switch {
		case r.TimedOut:
			// What the CRI client returns when the runtime answers
			// DeadlineExceeded.
			return nil, nil, fmt.Errorf("%w: %q timed out after %s", remote.ErrCommandTimedOut, cmd, timeout)
		case r.Err != nil:
			return nil, nil, r.Err
		case r.ExitCode != 0:
			return []byte(r.Stdout), []byte(r.Stderr), utilexec.CodeExitError{Err: errors.New("exited"), Code: int(r.ExitCode)}
		}
		return []byte(r.Stdout), []byte(r.Stderr), nil
	})
}

func TestCRIRuntimeConformance(t *testing.T) {
	probestest.RuntimeConformance(t, newCRIHarness)
}

func TestCRIRuntimeNoRuntime(t *testing.T) {
	rt := probes.CRIRuntime(func() (*cri.Runtime, error) { return nil, errors.New("not connected") }, nil)
	_, err := rt.ContainerOf(t.Context(), "u", "app")
	require.ErrorContains(t, err, "not connected")
	require.NotErrorIs(t, err, probes.ErrContainerNotFound)
	_, _, _, err = rt.ExecSync(t.Context(), "c", []string{"true"}, time.Second)
	require.ErrorContains(t, err, "not connected")
	require.NotErrorIs(t, err, probes.ErrExecTimeout)
}

func TestCRIRuntimeStatusError(t *testing.T) {
	h := newCRIHarness(t).(*criHarness)
	h.AddRunning("u", "app", time.Now())
	h.f.RuntimeService.InjectError("ContainerStatus", errors.New("runtime busy"))
	_, err := h.rt.ContainerOf(t.Context(), "u", "app")
	require.ErrorContains(t, err, "runtime busy")
	require.NotErrorIs(t, err, probes.ErrContainerNotFound)
}

// TestCRIRuntimeOverGRPC runs CRIRuntime through the real CRI client
// against the cri-client fake server: exit codes travel in the response,
// and a runtime's DeadlineExceeded becomes ErrExecTimeout.
func TestCRIRuntimeOverGRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "run", "containerd.sock")
	require.NoError(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	srv := fakeremote.NewFakeRemoteRuntime()
	require.NoError(t, srv.Start("unix://"+sock))
	t.Cleanup(srv.Stop)
	crt, err := cri.Connect(ctx, cri.Endpoint{Name: cri.RuntimeContainerd, Address: "unix://" + sock}, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, crt.Close(context.Background())) })
	rt := probes.CRIRuntime(func() (*cri.Runtime, error) { return crt, nil }, nil)

	fill := &critest.Fake{RuntimeService: srv.RuntimeService, ImageService: srv.ImageService}
	sb := fill.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "u1"})
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old := fill.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_EXITED, StartedAt: started.Add(-time.Hour)})
	c := fill.AddContainer(sb, critest.Container{Name: "app", Attempt: 1, State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: started})
	fill.AddContainer(sb, critest.Container{Name: "sidecar", Attempt: 5, State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: started})
	require.NotEqual(t, old.ID, c.ID)

	got, err := rt.ContainerOf(ctx, "u1", "app")
	require.NoError(t, err)
	require.Equal(t, probes.Container{ID: c.ID, Running: true, StartedAt: started}, got)
	_, err = rt.ContainerOf(ctx, "u1", "missing")
	require.ErrorIs(t, err, probes.ErrContainerNotFound)

	srv.RuntimeService.InjectError("ExecSync", utilexec.CodeExitError{Err: errors.New("exit 7"), Code: 7})
	_, _, code, err := rt.ExecSync(ctx, c.ID, []string{"false"}, time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 7, code)

	srv.RuntimeService.InjectError("ExecSync", status.Error(codes.DeadlineExceeded, "timeout 1s exceeded"))
	_, _, _, err = rt.ExecSync(ctx, c.ID, []string{"sleep", "9"}, time.Second)
	require.ErrorIs(t, err, probes.ErrExecTimeout)

	srv.RuntimeService.InjectError("ExecSync", status.Error(codes.NotFound, "no such container"))
	_, _, _, err = rt.ExecSync(ctx, c.ID, []string{"true"}, time.Second)
	require.Error(t, err)
	require.NotErrorIs(t, err, probes.ErrExecTimeout)
}

// TestCRIRuntimeCachesLookupsBetweenEvents: with the runtime's event
// stream open, a second lookup of an unchanged container makes no CRI call;
// a restart (an event) makes the next lookup read the new container.
func TestCRIRuntimeCachesLookupsBetweenEvents(t *testing.T) {
	f := critest.NewHooked(t)
	sb := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web"})
	c := f.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: time.Now().Add(-time.Minute)})
	get := func() (*cri.Runtime, error) { return f.Runtime, nil }
	var events cri.Events
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- events.Run(ctx, get) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, events.Connected, 10*time.Second, time.Millisecond)

	rt := probes.CRIRuntime(get, &events)
	first, err := rt.ContainerOf(ctx, "uid-web", "app")
	require.NoError(t, err)
	require.Equal(t, c.ID, first.ID)
	calls := f.CallCount("ListContainers")
	again, err := rt.ContainerOf(ctx, "uid-web", "app")
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, calls, f.CallCount("ListContainers"), "an unchanged container is answered from the cache")

	next := f.Restart(c.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
	require.Eventually(t, func() bool {
		got, err := rt.ContainerOf(ctx, "uid-web", "app")
		return err == nil && got.ID == next
	}, 10*time.Second, time.Millisecond, "the restart's event invalidates the cache")
}

// TestCRIRuntimeChecksRememberedContainer: without an event stream, a
// container found running before is checked against the node's running
// list, one ListContainers that every lookup within RunningMaxAge shares
// (no status call at all); a restart or an exit is seen once that list is
// older than RunningMaxAge, as the kubelet's own prober sees it after its
// PLEG relist.
func TestCRIRuntimeChecksRememberedContainer(t *testing.T) {
	f := critest.NewHooked(t)
	sb := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web"})
	c := f.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: time.Now().Add(-time.Minute)})
	f.AddContainer(sb, critest.Container{Name: "sidecar", State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: time.Now().Add(-time.Minute)})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rt := probes.NewCRIRuntimeWithClock(func() (*cri.Runtime, error) { return f.Runtime, nil }, nil, func() time.Time { return now })
	ctx := t.Context()
	first, err := rt.ContainerOf(ctx, "uid-web", "app")
	require.NoError(t, err)
	_, err = rt.ContainerOf(ctx, "uid-web", "sidecar")
	require.NoError(t, err)

	lists, statuses := f.CallCount("ListContainers"), f.CallCount("ContainerStatus")
	for range 3 {
		for _, name := range []string{"app", "sidecar"} {
			got, err := rt.ContainerOf(ctx, "uid-web", name)
			require.NoError(t, err)
			require.True(t, got.Running)
		}
	}
	again, err := rt.ContainerOf(ctx, "uid-web", "app")
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, lists+1, f.CallCount("ListContainers"), "one running list for every lookup within RunningMaxAge")
	require.Equal(t, statuses, f.CallCount("ContainerStatus"), "no status call for a remembered container")

	next := f.Restart(c.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
	now = now.Add(probes.RunningMaxAge)
	got, err := rt.ContainerOf(ctx, "uid-web", "app")
	require.NoError(t, err)
	require.Equal(t, next, got.ID, "the restart is seen once the running list is RunningMaxAge old")

	f.SetState(next, runtimeapi.ContainerState_CONTAINER_EXITED)
	now = now.Add(probes.RunningMaxAge)
	got, err = rt.ContainerOf(ctx, "uid-web", "app")
	require.NoError(t, err)
	require.Equal(t, next, got.ID)
	require.False(t, got.Running, "the exit is seen once the running list is RunningMaxAge old")
}

// TestCRIRuntimeSharesOneRunningList: 20 lookups at once of remembered
// containers share one ListContainers.
func TestCRIRuntimeSharesOneRunningList(t *testing.T) {
	f := critest.NewHooked(t)
	sb := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web"})
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("c%d", i)
		names = append(names, name)
		f.AddContainer(sb, critest.Container{Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: time.Now().Add(-time.Minute)})
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	rt := probes.NewCRIRuntimeWithClock(func() (*cri.Runtime, error) { return f.Runtime, nil }, nil, clock)
	ctx := t.Context()
	for _, name := range names {
		_, err := rt.ContainerOf(ctx, "uid-web", name)
		require.NoError(t, err)
	}
	clockMu.Lock()
	now = now.Add(probes.RunningMaxAge)
	clockMu.Unlock()

	lists := f.CallCount("ListContainers")
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			got, err := rt.ContainerOf(ctx, "uid-web", name)
			assert.NoError(t, err)
			assert.True(t, got.Running)
		})
	}
	wg.Wait()
	// The cached lookups were made at the old time: the first refresh
	// after it serves every later one.
	require.Equal(t, lists+1, f.CallCount("ListContainers"), "one running list for 20 lookups at once")
}
