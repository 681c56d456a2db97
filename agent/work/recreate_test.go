package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/shoal-io/shoal/agent/state"
	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

const (
	testPodUID = "uid-web"
	testPodIP  = "127.0.0.1"
	testGrace  = 30
)

// recreateEnv is a node with one pod (default/web) in a fake CRI runtime,
// and a state dir for runners.
type recreateEnv struct {
	t   *testing.T
	f   *critest.Fake
	sb  critest.Sandbox
	clk *clocktesting.FakeClock // nil: the real clock
	dir string
}

func newRecreateEnv(t *testing.T, fakeClock bool) *recreateEnv {
	e := &recreateEnv{t: t, f: critest.NewHooked(t), dir: t.TempDir()}
	e.sb = e.f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: testPodUID, IP: testPodIP})
	if fakeClock {
		e.clk = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	return e
}

// handler is a fresh Recreate (as in a new agent process) over the env.
func (e *recreateEnv) handler() *Recreate {
	opts := []RecreateOption{RecreatePollInterval(time.Millisecond)}
	if e.clk != nil {
		opts = append(opts, RecreateClock(e.clk))
	}
	return NewRecreate(func() (*cri.Runtime, error) { return e.f.Runtime, nil }, opts...)
}

// start runs a runner with a fresh handler until the test ends.
func (e *recreateEnv) start() *Runner {
	return start(e.t, e.dir, map[string]Handler{nodework.KindRecreate: e.handler()})
}

// container adds a container of the pod in the given state.
func (e *recreateEnv) container(name string, attempt uint32, st runtimeapi.ContainerState) critest.Container {
	c := critest.Container{Name: name, Attempt: attempt, State: st}
	if st == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.StartedAt = time.Now()
	}
	return e.f.AddContainer(e.sb, c)
}

func (e *recreateEnv) running(name string) critest.Container {
	return e.container(name, 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
}

// spec asks to recreate cs, as the coordinator would from the pod's status.
func (e *recreateEnv) spec(cs ...critest.Container) *nodeworkv1.RecreateSpec {
	s := &nodeworkv1.RecreateSpec{
		PodNamespace: "default", PodName: "web", PodUid: testPodUID, PodIp: testPodIP,
		TerminationGraceSeconds: testGrace,
	}
	for _, c := range cs {
		s.Containers = append(s.Containers, &nodeworkv1.RecreateContainer{
			Name: c.Name, ContainerId: "containerd://" + c.ID, RestartCount: int32(c.Attempt),
		})
	}
	return s
}

// latest is the CRI's latest instance of a container of the pod.
func (e *recreateEnv) latest(name string) cri.Container {
	e.t.Helper()
	cs, err := e.f.Runtime.PodContainers(context.Background(), testPodUID)
	require.NoError(e.t, err)
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	e.t.Fatalf("no container %q", name)
	return cri.Container{}
}

// polls waits until handlers have read the pod's containers n more times.
func (e *recreateEnv) polls(n int) {
	e.t.Helper()
	base := e.f.CallCount("ListContainers")
	require.Eventually(e.t, func() bool { return e.f.CallCount("ListContainers") >= base+n }, 10*time.Second, time.Millisecond)
}

// waitStops waits until exactly n StopContainer calls were made.
func (e *recreateEnv) waitStops(n int) []critest.Call {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return len(e.f.StopCalls()) >= n }, 10*time.Second, time.Millisecond)
	stops := e.f.StopCalls()
	require.Len(e.t, stops, n)
	return stops
}

func recreateItem(name string, generation int64, spec *nodeworkv1.RecreateSpec) *nodeworkv1.WorkItem {
	return &nodeworkv1.WorkItem{
		Id: nodework.RecreateID("default", name), Generation: generation, Kind: nodework.KindRecreate,
		Spec: &nodeworkv1.WorkItem_Recreate{Recreate: spec},
	}
}

// waitReport waits until the item's report satisfies cond.
func waitReport(t *testing.T, r *Runner, id, what string, cond func(*nodeworkv1.WorkReport) bool) *nodeworkv1.WorkReport {
	t.Helper()
	var rep *nodeworkv1.WorkReport
	require.Eventually(t, func() bool {
		rep, _ = r.Report(id)
		return rep != nil && cond(rep)
	}, 10*time.Second, time.Millisecond, "%s: %v", what, rep)
	return rep
}

// findState returns one container's state from a report, nil if absent.
func findState(rep *nodeworkv1.WorkReport, name string) *nodeworkv1.RecreateContainerState {
	for _, c := range rep.GetRecreate().GetContainers() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// containerState returns one container's state from a report.
func containerState(t *testing.T, rep *nodeworkv1.WorkReport, name string) *nodeworkv1.RecreateContainerState {
	t.Helper()
	st := findState(rep, name)
	require.NotNil(t, st, "no state for %q in %v", name, rep)
	return st
}

// containerIs builds a report condition on one container's phase.
func containerIs(name string, phase nodeworkv1.RecreatePhase) func(*nodeworkv1.WorkReport) bool {
	return func(rep *nodeworkv1.WorkReport) bool {
		return findState(rep, name).GetPhase() == phase
	}
}

// containerHas builds a report condition on one container's message.
func containerHas(name, message string) func(*nodeworkv1.WorkReport) bool {
	return func(rep *nodeworkv1.WorkReport) bool {
		return strings.Contains(findState(rep, name).GetMessage(), message)
	}
}

// progressOf reads an item's saved progress.
func progressOf(t *testing.T, r *Runner, id string) recreateProgress {
	t.Helper()
	r.mu.Lock()
	raw := r.entries[id].progress
	r.mu.Unlock()
	var p recreateProgress
	require.NoError(t, json.Unmarshal(raw, &p))
	return p
}

const (
	pending    = nodeworkv1.RecreatePhase_RECREATE_PHASE_PENDING
	recreating = nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING
	succeeded  = nodeworkv1.RecreatePhase_RECREATE_PHASE_SUCCEEDED
	failed     = nodeworkv1.RecreatePhase_RECREATE_PHASE_FAILED
)

func TestRecreateSimple(t *testing.T) {
	for _, names := range [][]string{{"app"}, {"app", "sidecar"}} {
		t.Run(strconv.Itoa(len(names))+" containers", func(t *testing.T) {
			e := newRecreateEnv(t, false)
			var cs []critest.Container
			for _, n := range names {
				cs = append(cs, e.running(n))
			}
			e.f.RestartOnStop()
			r := e.start()
			item := recreateItem("crr", 1, e.spec(cs...))
			r.Upsert(item)
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)

			require.Empty(t, rep.GetMessage())
			require.Len(t, rep.GetRecreate().GetContainers(), len(names))
			stops := e.f.StopCalls()
			require.Len(t, stops, len(names))
			for i, c := range cs {
				st := rep.GetRecreate().GetContainers()[i]
				require.Equal(t, c.Name, st.GetName(), "spec order")
				require.Equal(t, succeeded, st.GetPhase())
				require.True(t, st.GetIsKilled())
				require.Empty(t, st.GetMessage())
				cur := e.latest(c.Name)
				require.NotEqual(t, c.ID, cur.ID)
				require.Equal(t, "containerd://"+cur.ID, st.GetNewContainerId())
				require.EqualValues(t, 1, st.GetRestartCount())
				require.Equal(t, critest.Call{Method: "StopContainer", ContainerID: c.ID, Timeout: testGrace * time.Second}, stops[i])
			}
			require.Empty(t, e.f.ExecCalls(), "no preStop hook")
			p := progressOf(t, r, item.GetId())
			require.Equal(t, testPodUID, p.PodUID)
			require.Equal(t, 1, p.Starts)
			require.NotNil(t, p.Containers[0].KillStartedAt)
			require.NotNil(t, p.Containers[0].StoppedAt)
			require.NotNil(t, p.Containers[0].RunningSince)
		})
	}
}

func TestRecreateOrder(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			e := newRecreateEnv(t, false)
			a, b := e.running("a"), e.running("b")
			spec := e.spec(a, b)
			spec.Ordered = ordered
			r := e.start()
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)

			// Nobody restarts a: ordered waits for it, unordered does not.
			if ordered {
				stops := e.waitStops(1)
				require.Equal(t, a.ID, stops[0].ContainerID)
				e.polls(5)
				require.Len(t, e.f.StopCalls(), 1, "b is not stopped before a is back")
				rep, _ := r.Report(item.GetId())
				require.Equal(t, recreating, containerState(t, rep, "a").GetPhase())
				require.True(t, containerState(t, rep, "a").GetIsKilled())
				require.Equal(t, pending, containerState(t, rep, "b").GetPhase())
				require.False(t, containerState(t, rep, "b").GetIsKilled())

				e.f.Restart(a.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
				stops = e.waitStops(2)
				require.Equal(t, b.ID, stops[1].ContainerID)
			} else {
				stops := e.waitStops(2)
				require.Equal(t, []string{a.ID, b.ID}, []string{stops[0].ContainerID, stops[1].ContainerID})
				e.f.Restart(a.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
			}
			e.f.Restart(b.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			require.Equal(t, succeeded, containerState(t, rep, "a").GetPhase())
			require.Equal(t, succeeded, containerState(t, rep, "b").GetPhase())
			require.Len(t, e.f.StopCalls(), 2)
		})
	}
}

func TestRecreateMinStarted(t *testing.T) {
	e := newRecreateEnv(t, true)
	app := e.running("app")
	e.f.RestartOnStop()
	spec := e.spec(app)
	spec.MinStartedSeconds = 10
	r := e.start()
	item := recreateItem("crr", 1, spec)
	r.Upsert(item)

	rep := waitReport(t, r, item.GetId(), "new instance seen running", containerHas("app", "waiting until it has run"))
	st := containerState(t, rep, "app")
	require.Equal(t, recreating, st.GetPhase())
	require.Contains(t, st.GetMessage(), "waiting until it has run for 10s")

	e.clk.Step(9 * time.Second)
	e.polls(5)
	rep, _ = r.Report(item.GetId())
	require.Equal(t, nodeworkv1.Phase_PHASE_RUNNING, rep.GetPhase(), "9 s is not enough")

	e.clk.Step(time.Second)
	waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Len(t, e.f.StopCalls(), 1)
}

func TestRecreateReadiness(t *testing.T) {
	e := newRecreateEnv(t, false)
	app := e.running("app")
	e.f.RestartOnStop()
	spec := e.spec(app)
	spec.Containers[0].HasReadinessProbe = true
	spec.ReadyContainerIds = []string{"containerd://" + app.ID} // the old instance was ready
	r := e.start()
	item := recreateItem("crr", 1, spec)
	r.Upsert(item)

	rep := waitReport(t, r, item.GetId(), "waiting for readiness", containerHas("app", "waiting for it to be ready"))
	require.Contains(t, containerState(t, rep, "app").GetMessage(), "waiting for it to be ready")
	e.polls(5)
	rep, _ = r.Report(item.GetId())
	require.Equal(t, recreating, containerState(t, rep, "app").GetPhase(), "running is not ready with a readiness probe")
	before := progressOf(t, r, item.GetId())

	// The coordinator copies the pod's ready containers into a new
	// generation: another spec, so the runner starts Run afresh, and the
	// handler must go on from where it was.
	next := proto.Clone(item).(*nodeworkv1.WorkItem)
	next.Generation = 2
	next.GetRecreate().ReadyContainerIds = []string{containerState(t, rep, "app").GetNewContainerId()}
	r.Upsert(next)
	rep = waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.EqualValues(t, 2, rep.GetObservedGeneration())
	require.Equal(t, succeeded, containerState(t, rep, "app").GetPhase())
	require.Len(t, e.f.StopCalls(), 1, "not stopped again")

	after := progressOf(t, r, item.GetId())
	require.Equal(t, before.Starts+1, after.Starts, "resumed, not started over")
	require.Equal(t, before.Containers[0].KillStartedAt, after.Containers[0].KillStartedAt)
	require.Equal(t, before.Containers[0].StoppedAt, after.Containers[0].StoppedAt)
	require.Equal(t, before.Containers[0].RunningSince, after.Containers[0].RunningSince)
}

func TestRecreateForce(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			e := newRecreateEnv(t, false)
			app := e.container("app", 0, runtimeapi.ContainerState_CONTAINER_CREATED) // still starting
			e.f.RestartOnStop()
			spec := e.spec(app)
			spec.Force = force
			r := e.start()
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)

			if !force {
				rep := waitReport(t, r, item.GetId(), "waiting for the start", containerHas("app", "waiting for the container to start"))
				require.Equal(t, pending, containerState(t, rep, "app").GetPhase())
				require.Contains(t, containerState(t, rep, "app").GetMessage(), "waiting for the container to start")
				e.polls(5)
				require.Empty(t, e.f.StopCalls(), "a starting container waits without force")
				e.f.SetState(app.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
			}
			waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			stops := e.f.StopCalls()
			require.Len(t, stops, 1)
			require.Equal(t, app.ID, stops[0].ContainerID)
		})
	}
}

// TestRecreateForceRetargetsTheRunningInstance: the request names an
// instance that has exited (the kubelet does not update the pod's status
// while the next instance runs its postStart hook). With force the agent
// stops the instance running now, found through the CRI; without force
// the named instance counts as recreated and nothing is stopped.
func TestRecreateForceRetargetsTheRunningInstance(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			e := newRecreateEnv(t, false)
			app := e.running("app")
			spec := e.spec(app) // what the pod's status said
			starting := e.f.Restart(app.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
			spec.Force = force
			e.f.RestartOnStop()
			r := e.start()
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)

			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			st := containerState(t, rep, "app")
			stops := e.f.StopCalls()
			if !force {
				require.Empty(t, stops, "without force a newer instance is already recreated")
				require.False(t, st.GetIsKilled())
				require.Equal(t, "containerd://"+starting, st.GetNewContainerId())
				return
			}
			require.Len(t, stops, 1)
			require.Equal(t, starting, stops[0].ContainerID, "force stops the instance running now")
			require.True(t, st.GetIsKilled())
			latest := e.latest("app")
			require.NotEqual(t, starting, latest.ID)
			require.Equal(t, "containerd://"+latest.ID, st.GetNewContainerId())
			require.EqualValues(t, 2, st.GetRestartCount())
			p := progressOf(t, r, item.GetId())
			require.Equal(t, app.ID, p.Containers[0].SpecContainerID)
		})
	}
}

// TestRecreateUnorderedStopsTogether: without orderedRecreate every
// container's stop starts at once; with it, the second waits for the
// first to be recreated.
func TestRecreateUnorderedStopsTogether(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			e := newRecreateEnv(t, false)
			a, b := e.running("a"), e.running("b")
			var mu sync.Mutex
			sawOther := map[string]bool{}
			e.f.OnStop(func(id string) {
				// A stop that takes its time (a container ignoring
				// SIGTERM): does the other container's stop start
				// meanwhile?
				deadline := time.Now().Add(2 * time.Second)
				for len(e.f.StopCalls()) < 2 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				mu.Lock()
				sawOther[id] = len(e.f.StopCalls()) >= 2
				mu.Unlock()
				e.f.Restart(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
			})
			spec := e.spec(a, b)
			spec.Ordered = ordered
			r := e.start()
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			for _, name := range []string{"a", "b"} {
				require.True(t, containerState(t, rep, name).GetIsKilled(), name)
			}
			mu.Lock()
			defer mu.Unlock()
			if ordered {
				require.False(t, sawOther[a.ID], "ordered: b is not stopped while a's stop runs")
				return
			}
			require.True(t, sawOther[a.ID], "a's stop ran alongside b's")
			require.True(t, sawOther[b.ID], "b's stop ran alongside a's")
		})
	}
}

// hookServer is an httptest server that records preStop requests and how
// many stops had been made when each arrived.
type hookServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	stops    []int
	block    bool
}

func newHookServer(t *testing.T, f *critest.Fake, tlsServer, block bool) *hookServer {
	h := &hookServer{block: block}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.mu.Lock()
		h.requests = append(h.requests, req.Clone(context.Background()))
		h.stops = append(h.stops, len(f.StopCalls()))
		h.mu.Unlock()
		if h.block {
			<-req.Context().Done()
			return
		}
		_, _ = w.Write([]byte("bye"))
	})
	if tlsServer {
		h.Server = httptest.NewTLSServer(handler)
	} else {
		h.Server = httptest.NewServer(handler)
	}
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) port(t *testing.T) int32 {
	_, p, err := net.SplitHostPort(h.Listener.Addr().String())
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return int32(n)
}

func (h *hookServer) seen() ([]*http.Request, []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*http.Request(nil), h.requests...), append([]int(nil), h.stops...)
}

func TestRecreatePreStop(t *testing.T) {
	execCmd := []string{"/bin/sh", "-c", "drain"}
	exitErr := utilexec.CodeExitError{Err: errors.New("exit 1"), Code: 1}
	tests := []struct {
		name string
		// grace is the spec's grace (testGrace when 0).
		grace int64
		zero  bool // grace 0
		// hook builds the hook and, optionally, a check to run at the end.
		hook func(t *testing.T, e *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T))
		// exec answers the exec hook; nil is success.
		exec critest.ExecFunc
		// step is how far to move the fake clock once the hook waits.
		step time.Duration
		// wantStop is the StopContainer timeout.
		wantStop time.Duration
		// wantExec says the exec hook ran before the stop.
		wantExec bool
		// wantPreStopMillis is the reported hook time (fake clock); -1 skips.
		wantPreStopMillis int64
		wantMessage       string // in the container's message
	}{
		{
			name:     "exec runs before the stop",
			hook:     execHook(execCmd),
			wantExec: true, wantStop: testGrace * time.Second,
		},
		{
			name: "exec failure still stops",
			hook: execHook(execCmd),
			exec: func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
				return nil, []byte("no drain today"), exitErr
			},
			wantExec: true, wantStop: testGrace * time.Second,
			wantMessage: "preStop hook failed: exec [\"/bin/sh\" \"-c\" \"drain\"] exited with code 1: no drain today",
		},
		{
			name: "exec error still stops",
			hook: execHook(execCmd),
			exec: func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
				return nil, nil, errors.New("exec not supported")
			},
			wantExec: true, wantStop: testGrace * time.Second, wantMessage: "exec not supported",
		},
		{
			name:  "exec bounded by the grace, then at least 2 s to stop",
			grace: 5,
			hook:  execHook(execCmd),
			exec: func(ctx context.Context, _ string, _ []string, _ time.Duration) ([]byte, []byte, error) {
				<-ctx.Done() // a hook that never ends
				return nil, nil, ctx.Err()
			},
			step:     5 * time.Second,
			wantExec: true, wantStop: 2 * time.Second, wantPreStopMillis: 5000,
			wantMessage: "did not finish within the grace period of 5s",
		},
		{
			name:     "sleep",
			hook:     sleepHook(3),
			step:     3 * time.Second,
			wantStop: (testGrace - 3) * time.Second, wantPreStopMillis: 3000,
		},
		{
			name:     "sleep cut at the grace",
			grace:    5,
			hook:     sleepHook(100),
			step:     5 * time.Second,
			wantStop: 2 * time.Second, wantPreStopMillis: 5000,
		},
		{
			name:     "no grace: no hook, no grace",
			zero:     true,
			hook:     execHook(execCmd),
			wantStop: 0,
		},
		{
			name: "httpGet to the pod IP",
			hook: func(t *testing.T, e *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
				srv := newHookServer(t, e.f, false, false)
				hook := &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_HttpGet{HttpGet: &nodeworkv1.HTTPGetAction{
					Port: srv.port(t), Path: "drain?now=1", // host: the pod's IP
					Headers: []*nodeworkv1.HTTPHeader{{Name: "X-Reason", Value: "recreate"}, {Name: "Host", Value: "web.local"}},
				}}}
				check := func(t *testing.T) {
					reqs, stops := srv.seen()
					require.Len(t, reqs, 1)
					require.Equal(t, []int{0}, stops, "the hook ran before the stop")
					require.Equal(t, http.MethodGet, reqs[0].Method)
					require.Equal(t, "/drain", reqs[0].URL.Path)
					require.Equal(t, "now=1", reqs[0].URL.RawQuery)
					require.Equal(t, "recreate", reqs[0].Header.Get("X-Reason"))
					require.Equal(t, "web.local", reqs[0].Host)
				}
				return hook, check
			},
			wantStop: testGrace * time.Second,
		},
		{
			name: "httpGet over HTTPS without verifying",
			hook: func(t *testing.T, e *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
				srv := newHookServer(t, e.f, true, false)
				hook := &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_HttpGet{HttpGet: &nodeworkv1.HTTPGetAction{
					Host: "127.0.0.1", Port: srv.port(t), Path: "/stop", Scheme: "HTTPS",
				}}}
				check := func(t *testing.T) {
					reqs, stops := srv.seen()
					require.Len(t, reqs, 1)
					require.Equal(t, []int{0}, stops)
					require.Equal(t, "/stop", reqs[0].URL.Path)
					require.NotNil(t, reqs[0].TLS)
				}
				return hook, check
			},
			wantStop: testGrace * time.Second,
		},
		{
			name:  "httpGet bounded by the grace",
			grace: 4,
			hook: func(t *testing.T, e *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
				srv := newHookServer(t, e.f, false, true)
				return &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_HttpGet{HttpGet: &nodeworkv1.HTTPGetAction{Port: srv.port(t)}}}, nil
			},
			step:     4 * time.Second,
			wantStop: 2 * time.Second, wantPreStopMillis: 4000,
			wantMessage: "did not finish within the grace period of 4s",
		},
		{
			name: "httpGet failure still stops",
			hook: func(t *testing.T, _ *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				port := l.Addr().(*net.TCPAddr).Port
				require.NoError(t, l.Close()) // nothing listens there now
				return &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_HttpGet{HttpGet: &nodeworkv1.HTTPGetAction{Port: int32(port)}}}, nil
			},
			wantStop:    testGrace * time.Second,
			wantMessage: "preStop hook failed: httpGet http://127.0.0.1:",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newRecreateEnv(t, true)
			app := e.running("app")
			e.f.RestartOnStop()
			if tc.exec != nil {
				e.f.OnExec(tc.exec)
			}
			spec := e.spec(app)
			switch {
			case tc.zero:
				spec.TerminationGraceSeconds = 0
			case tc.grace != 0:
				spec.TerminationGraceSeconds = tc.grace
			}
			hook, check := tc.hook(t, e)
			spec.Containers[0].PreStop = hook
			r := e.start()
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)

			if tc.step > 0 {
				require.Eventually(t, e.clk.HasWaiters, 10*time.Second, time.Millisecond, "the hook waits on the clock")
				require.Empty(t, e.f.StopCalls(), "no stop while the hook runs")
				e.clk.Step(tc.step)
			}
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			st := containerState(t, rep, "app")
			require.Equal(t, succeeded, st.GetPhase())
			require.True(t, st.GetIsKilled())
			if tc.wantMessage == "" {
				require.Empty(t, st.GetMessage())
			} else {
				require.Contains(t, st.GetMessage(), tc.wantMessage)
			}
			if tc.wantPreStopMillis > 0 {
				require.Equal(t, tc.wantPreStopMillis, st.GetPreStopMillis())
			}

			calls := e.f.Calls()
			want := []critest.Call{}
			if tc.wantExec {
				grace := time.Duration(spec.GetTerminationGraceSeconds()) * time.Second
				want = append(want, critest.Call{Method: "ExecSync", ContainerID: app.ID, Cmd: execCmd, Timeout: grace})
			}
			want = append(want, critest.Call{Method: "StopContainer", ContainerID: app.ID, Timeout: tc.wantStop})
			require.Equal(t, want, calls, "the hook, then one stop")
			if check != nil {
				check(t)
			}
		})
	}
}

func execHook(cmd []string) func(*testing.T, *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
	return func(*testing.T, *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
		return &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Exec{Exec: &nodeworkv1.ExecAction{Command: cmd}}}, nil
	}
}

func sleepHook(seconds int64) func(*testing.T, *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
	return func(*testing.T, *recreateEnv) (*nodeworkv1.PreStopHook, func(*testing.T)) {
		return &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Sleep{Sleep: &nodeworkv1.SleepAction{Seconds: seconds}}}, nil
	}
}

func TestRecreateStopError(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoreFailures=%v", ignore), func(t *testing.T) {
			e := newRecreateEnv(t, false)
			a, b := e.running("a"), e.running("b")
			e.f.RestartOnStop()
			e.f.RuntimeService.InjectError("StopContainer", errors.New("runtime says no"))
			spec := e.spec(a, b)
			spec.IgnoreFailures = ignore
			spec.Ordered = true
			r := e.start()
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)

			const msg = `kill container error: stop container "` // + id + `": runtime says no`
			if !ignore {
				rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_FAILED)
				want := msg + a.ID + `": runtime says no`
				require.Equal(t, want, rep.GetMessage())
				require.Equal(t, failed, containerState(t, rep, "a").GetPhase())
				require.Equal(t, want, containerState(t, rep, "a").GetMessage())
				require.False(t, containerState(t, rep, "a").GetIsKilled())
				require.Equal(t, pending, containerState(t, rep, "b").GetPhase())
				require.Len(t, e.f.StopCalls(), 1, "b is left alone")
				return
			}
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			require.Equal(t, failed, containerState(t, rep, "a").GetPhase())
			require.Equal(t, msg+a.ID+`": runtime says no`, containerState(t, rep, "a").GetMessage())
			require.Equal(t, succeeded, containerState(t, rep, "b").GetPhase())
			stops := e.f.StopCalls()
			require.Len(t, stops, 2, "a is not tried again")
			require.Equal(t, b.ID, stops[1].ContainerID)
		})
	}
}

func TestRecreateNotFound(t *testing.T) {
	tests := []struct {
		name string
		spec func(e *recreateEnv) *nodeworkv1.RecreateSpec
	}{
		{"container not on the node", func(e *recreateEnv) *nodeworkv1.RecreateSpec {
			e.running("app")
			return e.spec(critest.Container{Name: "ghost", ID: "c-ghost"})
		}},
		{"pod not on the node", func(e *recreateEnv) *nodeworkv1.RecreateSpec {
			s := e.spec(critest.Container{Name: "app", ID: "c-app"})
			s.PodUid = "uid-other"
			return s
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newRecreateEnv(t, false)
			r := e.start()
			spec := tc.spec(e)
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)
			name := spec.GetContainers()[0].GetName()
			rep := waitReport(t, r, item.GetId(), "not found", containerHas(name, "not found"))
			require.Equal(t, nodeworkv1.Phase_PHASE_RUNNING, rep.GetPhase())
			require.Equal(t, pending, containerState(t, rep, name).GetPhase())
			require.Equal(t, "not found container on Node", containerState(t, rep, name).GetMessage())
			e.polls(3)
			require.Empty(t, e.f.StopCalls())
		})
	}
}

func TestRecreateAlreadyRecreated(t *testing.T) {
	tests := []struct {
		name string
		// before changes the container after the request was made and
		// before the item arrives.
		before func(e *recreateEnv, c critest.Container)
		// later brings the container back, if it is not yet.
		later func(e *recreateEnv, c critest.Container)
	}{
		{"replaced by the next attempt", func(e *recreateEnv, c critest.Container) {
			e.f.Restart(c.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
		}, nil},
		{"exited, restarted later", func(e *recreateEnv, c critest.Container) {
			e.f.SetState(c.ID, runtimeapi.ContainerState_CONTAINER_EXITED)
		}, func(e *recreateEnv, c critest.Container) {
			e.f.Restart(c.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newRecreateEnv(t, false)
			app := e.running("app")
			spec := e.spec(app)
			tc.before(e, app)
			r := e.start()
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)
			if tc.later != nil {
				rep := waitReport(t, r, item.GetId(), "recreating", containerIs("app", recreating))
				require.False(t, containerState(t, rep, "app").GetIsKilled(), "isKilled only once this request stopped it")
				e.polls(3)
				tc.later(e, app)
			}
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			st := containerState(t, rep, "app")
			require.False(t, st.GetIsKilled(), "recreated without this request stopping it")
			require.Equal(t, "containerd://"+e.latest("app").ID, st.GetNewContainerId())
			require.Empty(t, e.f.StopCalls(), "never stopped")
		})
	}
}

func TestRecreateResumesAfterAgentRestart(t *testing.T) {
	e := newRecreateEnv(t, false)
	a, b := e.running("a"), e.running("b")
	spec := e.spec(a, b)
	spec.Ordered = true
	item := recreateItem("crr", 1, spec)

	r1, stop1 := startStoppable(t, e.dir, map[string]Handler{nodework.KindRecreate: e.handler()})
	r1.Upsert(item)
	e.waitStops(1)
	waitReport(t, r1, item.GetId(), "a stopped", containerIs("a", recreating))
	stop1() // the agent restarts while a is down

	// The kubelet brings a back while the agent is away.
	e.f.Restart(a.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
	e.f.RestartOnStop()
	r2, _ := startStoppable(t, e.dir, map[string]Handler{nodework.KindRecreate: e.handler()})
	rep := waitPhase(t, r2, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Equal(t, succeeded, containerState(t, rep, "a").GetPhase())
	require.Equal(t, succeeded, containerState(t, rep, "b").GetPhase())
	stops := e.f.StopCalls()
	require.Len(t, stops, 2, "exactly one stop per container")
	require.Equal(t, []string{a.ID, b.ID}, []string{stops[0].ContainerID, stops[1].ContainerID})
	require.Equal(t, 2, progressOf(t, r2, item.GetId()).Starts)
}

func TestRecreateResumeFromSavedProgress(t *testing.T) {
	tests := []struct {
		name string
		// setup shapes the original instance and returns the saved
		// progress of its only container.
		setup func(e *recreateEnv, c critest.Container) containerProgress
		// wantStop is the timeout of the one expected stop; <0 means none.
		wantStop time.Duration
		// wantExec says the preStop hook runs (a fresh kill).
		wantExec bool
	}{
		{"kill started, container exited: not stopped again", func(e *recreateEnv, c critest.Container) containerProgress {
			e.f.SetState(c.ID, runtimeapi.ContainerState_CONTAINER_EXITED)
			at := e.clk.Now().Add(-time.Second)
			return containerProgress{Name: "app", ContainerID: c.ID, Phase: recreatePending, KillStartedAt: &at}
		}, -1, false},
		{"stopped, runtime still shows it running: not stopped again", func(e *recreateEnv, c critest.Container) containerProgress {
			at := e.clk.Now().Add(-time.Second)
			return containerProgress{Name: "app", ContainerID: c.ID, Phase: recreateRecreating, IsKilled: true, KillStartedAt: &at, StoppedAt: &at}
		}, -1, false},
		{"kill started, container still running: stopped without the hook, rest of the grace", func(e *recreateEnv, c critest.Container) containerProgress {
			at := e.clk.Now().Add(-10 * time.Second)
			return containerProgress{Name: "app", ContainerID: c.ID, Phase: recreatePending, KillStartedAt: &at}
		}, (testGrace - 10) * time.Second, false},
		{"progress of another instance is ignored", func(e *recreateEnv, c critest.Container) containerProgress {
			at := e.clk.Now().Add(-time.Second)
			return containerProgress{Name: "app", ContainerID: "c-older", Phase: recreateSucceeded, KillStartedAt: &at, StoppedAt: &at}
		}, testGrace * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newRecreateEnv(t, true)
			app := e.running("app")
			spec := e.spec(app)
			spec.Containers[0].PreStop = &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Exec{Exec: &nodeworkv1.ExecAction{Command: []string{"drain"}}}}
			item := recreateItem("crr", 1, spec)
			cp := tc.setup(e, app)
			seedRecreate(t, e.dir, item, recreateProgress{PodUID: testPodUID, Starts: 1, Containers: []containerProgress{cp}})

			r := e.start()
			if tc.wantStop >= 0 {
				// A hook would be run first; none may be.
				e.waitStops(1)
				e.f.Restart(app.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
			} else {
				waitReport(t, r, item.GetId(), "recreating", containerIs("app", recreating))
				e.polls(3)
				e.f.Restart(app.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
			}
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			require.True(t, containerState(t, rep, "app").GetIsKilled())
			stops := e.f.StopCalls()
			if tc.wantStop < 0 {
				require.Empty(t, stops)
			} else {
				require.Equal(t, []critest.Call{{Method: "StopContainer", ContainerID: app.ID, Timeout: tc.wantStop}}, stops)
			}
			if tc.wantExec {
				require.Len(t, e.f.ExecCalls(), 1)
			} else {
				require.Empty(t, e.f.ExecCalls(), "the preStop hook is not repeated")
			}
			require.Equal(t, 2, progressOf(t, r, item.GetId()).Starts)
		})
	}
}

// seedRecreate writes a recreate item with saved progress, as an agent
// that stopped mid-way would have left it.
func seedRecreate(t *testing.T, dir string, item *nodeworkv1.WorkItem, p recreateProgress) {
	t.Helper()
	st, err := state.Open(dir)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	ib, err := proto.Marshal(item)
	require.NoError(t, err)
	rb, err := proto.Marshal(&nodeworkv1.WorkReport{Id: item.GetId(), ObservedGeneration: item.GetGeneration(), Kind: item.GetKind(), Phase: nodeworkv1.Phase_PHASE_RUNNING})
	require.NoError(t, err)
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	require.NoError(t, st.Put(item.GetId(), state.Record{ID: item.GetId(), Generation: item.GetGeneration(), Kind: item.GetKind(), Item: ib, Report: rb, Progress: raw}))
}

// blockingExec is an exec hook that waits until released.
type blockingExec struct {
	release chan struct{}
	once    sync.Once
}

func newBlockingExec(t *testing.T) *blockingExec {
	b := &blockingExec{release: make(chan struct{})}
	t.Cleanup(b.done)
	return b
}

func (b *blockingExec) done() { b.once.Do(func() { close(b.release) }) }

func (b *blockingExec) exec(ctx context.Context, _ string, _ []string, _ time.Duration) ([]byte, []byte, error) {
	select {
	case <-b.release:
		return nil, nil, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

func TestRecreateSpecChangeDuringPreStopDoesNotRepeatIt(t *testing.T) {
	e := newRecreateEnv(t, false)
	app, side := e.running("app"), e.running("side")
	e.f.RestartOnStop()
	hook := newBlockingExec(t)
	e.f.OnExec(hook.exec)
	spec := e.spec(app)
	spec.Containers[0].PreStop = &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Exec{Exec: &nodeworkv1.ExecAction{Command: []string{"drain"}}}}
	spec.ReadyContainerIds = []string{"containerd://" + app.ID, "containerd://" + side.ID}
	r := e.start()
	item := recreateItem("crr", 1, spec)
	r.Upsert(item)
	require.Eventually(t, func() bool { return len(e.f.ExecCalls()) == 1 }, 10*time.Second, time.Millisecond)

	// The draining app turns unready: a new spec while the hook runs.
	next := proto.Clone(item).(*nodeworkv1.WorkItem)
	next.Generation = 2
	next.GetRecreate().ReadyContainerIds = []string{"containerd://" + side.ID}
	r.Upsert(next)
	waitReport(t, r, item.GetId(), "generation 2 running", func(rep *nodeworkv1.WorkReport) bool {
		return rep.GetObservedGeneration() == 2 && rep.GetPhase() == nodeworkv1.Phase_PHASE_RUNNING && rep.GetRecreate() != nil
	})
	require.Empty(t, e.f.StopCalls(), "the hook is still running")

	hook.done()
	rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Equal(t, succeeded, containerState(t, rep, "app").GetPhase())
	require.Len(t, e.f.ExecCalls(), 1, "the hook ran once")
	require.Len(t, e.f.StopCalls(), 1, "one stop")
	require.Equal(t, 2, progressOf(t, r, item.GetId()).Starts)
}

func TestRecreateTwoItemsForOneContainerShareTheKill(t *testing.T) {
	e := newRecreateEnv(t, false)
	app := e.running("app")
	e.f.RestartOnStop()
	hook := newBlockingExec(t)
	e.f.OnExec(hook.exec)
	spec := e.spec(app)
	spec.Containers[0].PreStop = &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Exec{Exec: &nodeworkv1.ExecAction{Command: []string{"drain"}}}}
	r := e.start()
	one, two := recreateItem("one", 1, spec), recreateItem("two", 1, spec)
	r.Upsert(one)
	r.Upsert(two)
	require.Eventually(t, func() bool { return len(e.f.ExecCalls()) == 1 }, 10*time.Second, time.Millisecond)
	waitReport(t, r, one.GetId(), "a kill under way", func(rep *nodeworkv1.WorkReport) bool {
		a, _ := r.Report(two.GetId())
		msgs := findState(rep, "app").GetMessage() + "|" + findState(a, "app").GetMessage()
		return strings.Contains(msgs, "running the preStop hook") && strings.Contains(msgs, "being stopped for another request")
	})
	hook.done()
	waitPhase(t, r, one.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	waitPhase(t, r, two.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Len(t, e.f.ExecCalls(), 1)
	require.Len(t, e.f.StopCalls(), 1)
}

func TestRecreateWaitsForTheRuntime(t *testing.T) {
	e := newRecreateEnv(t, false)
	app := e.running("app")
	e.f.RestartOnStop()
	var mu sync.Mutex
	var connected bool
	h := NewRecreate(func() (*cri.Runtime, error) {
		mu.Lock()
		defer mu.Unlock()
		if !connected {
			return nil, errors.New("no socket yet")
		}
		return e.f.Runtime, nil
	}, RecreatePollInterval(time.Millisecond))
	r := start(t, e.dir, map[string]Handler{nodework.KindRecreate: h})
	item := recreateItem("crr", 1, e.spec(app))
	r.Upsert(item)
	rep := waitReport(t, r, item.GetId(), "waiting for the runtime", func(rep *nodeworkv1.WorkReport) bool {
		return rep.GetMessage() == "waiting for the container runtime: no socket yet"
	})
	require.Equal(t, nodeworkv1.Phase_PHASE_RUNNING, rep.GetPhase())
	mu.Lock()
	connected = true
	mu.Unlock()
	waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Len(t, e.f.StopCalls(), 1)
}

func TestClip(t *testing.T) {
	long := make([]byte, nodework.MaxMessageTextBytes+10)
	for i := range long {
		long[i] = 'x'
	}
	require.Len(t, clip(string(long)), nodework.MaxMessageTextBytes)
	require.Equal(t, "short", clip("short"))
	multi := string(long[:nodework.MaxMessageTextBytes-4]) + "ééé"
	got := clip(multi)
	require.LessOrEqual(t, len(got), nodework.MaxMessageTextBytes)
	require.True(t, utf8.ValidString(got))
}

// finish_only (the request ran out of time) finishes the stop under way —
// its preStop hook included — and starts no other. (Ordered, so that
// side's stop has not started when the deadline comes.)
func TestRecreateFinishOnly(t *testing.T) {
	e := newRecreateEnv(t, false)
	app, side := e.running("app"), e.running("side")
	e.f.RestartOnStop()
	hook := newBlockingExec(t)
	e.f.OnExec(hook.exec)
	spec := e.spec(app, side)
	spec.Ordered = true
	spec.Containers[0].PreStop = &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Exec{Exec: &nodeworkv1.ExecAction{Command: []string{"drain"}}}}
	r := e.start()
	item := recreateItem("crr", 1, spec)
	r.Upsert(item)
	require.Eventually(t, func() bool { return len(e.f.ExecCalls()) == 1 }, 10*time.Second, time.Millisecond)

	over := proto.Clone(item).(*nodeworkv1.WorkItem)
	over.Generation = 2
	over.GetRecreate().FinishOnly = true
	r.Upsert(over)
	require.Empty(t, e.f.StopCalls(), "the hook is still running")
	hook.done()
	rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.EqualValues(t, 2, rep.GetObservedGeneration())
	appState := containerState(t, rep, "app")
	require.True(t, appState.GetIsKilled(), "the stop under way finished")
	require.NotEqual(t, nodeworkv1.RecreatePhase_RECREATE_PHASE_PENDING, appState.GetPhase())
	require.Equal(t, nodeworkv1.RecreatePhase_RECREATE_PHASE_PENDING, containerState(t, rep, "side").GetPhase(), "no new stop")
	require.Len(t, e.f.ExecCalls(), 1, "the hook ran once")
	stops := e.f.StopCalls()
	require.Len(t, stops, 1, "only the stop under way")
	require.Equal(t, app.ID, stops[0].ContainerID)

	// Nothing under way: it ends at once.
	fresh := recreateItem("late", 1, e.spec(side))
	fresh.GetRecreate().FinishOnly = true
	r.Upsert(fresh)
	waitPhase(t, r, fresh.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Len(t, e.f.StopCalls(), 1)
}

// TestRecreateWakesOnContainerEvents: with the runtime's container events,
// an item sees the kubelet's new instance as soon as the runtime reports
// it, not at its next poll (an hour here).
func TestRecreateWakesOnContainerEvents(t *testing.T) {
	e := newRecreateEnv(t, false)
	app := e.running("app")
	runtime := func() (*cri.Runtime, error) { return e.f.Runtime, nil }
	events := &cri.Events{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- events.Run(ctx, runtime) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, events.Connected, 10*time.Second, time.Millisecond)

	h := NewRecreate(runtime, RecreatePollInterval(time.Hour), RecreateEvents(events))
	r := start(t, e.dir, map[string]Handler{nodework.KindRecreate: h})
	item := recreateItem("crr", 1, e.spec(app))
	r.Upsert(item)
	e.waitStops(1)
	waitReport(t, r, item.GetId(), "the stop seen", containerIs("app", recreating))
	newID := e.f.Restart(app.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
	rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Equal(t, "containerd://"+newID, containerState(t, rep, "app").GetNewContainerId())
}

func TestRecreateChecksExpectedEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		// staleUntil: attempts below it still read the old label value.
		staleUntil uint32
		want       nodeworkv1.RecreatePhase
		stops      int
		message    string
	}{
		{"the first new instance has the new value", 1, succeeded, 1, ""},
		{"a stale instance is recreated again", 2, succeeded, 2, ""},
		{"still stale after three more: failed", 100, failed, 4, `TEST_ENV is "foo", want "bar"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRecreateEnv(t, false)
			c := e.running("app")
			e.f.OnEnv(func(name string, attempt uint32) []string {
				if attempt < tc.staleUntil {
					return []string{"PATH=/bin", "TEST_ENV=foo"}
				}
				return []string{"PATH=/bin", "TEST_ENV=bar"}
			})
			e.f.RestartOnStop()
			r := e.start()
			spec := e.spec(c)
			spec.Containers[0].ExpectedEnv = map[string]string{"TEST_ENV": "bar"}
			item := recreateItem("crr", 1, spec)
			r.Upsert(item)
			rep := waitReport(t, r, item.GetId(), "finished", containerIs("app", tc.want))
			st := containerState(t, rep, "app")
			require.Contains(t, st.GetMessage(), tc.message)
			require.Len(t, e.f.StopCalls(), tc.stops)
			if tc.want == succeeded {
				require.Equal(t, "containerd://"+e.latest("app").ID, st.GetNewContainerId(), "the instance that has the new env")
			}
		})
	}
}
