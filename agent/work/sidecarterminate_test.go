package work

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/agent/state"
	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

const (
	jobPodUID = "uid-job"
	jobGrace  = 17
)

var (
	never     = nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_NEVER
	onFailure = nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE
)

// jobEnv is a node with one Job pod (default/job-x) in a fake CRI runtime,
// and a state dir for runners.
type jobEnv struct {
	t   *testing.T
	f   *critest.Fake
	sb  critest.Sandbox
	dir string
	ids map[string]string // container name -> id
}

func newJobEnv(t *testing.T, running ...string) *jobEnv {
	e := &jobEnv{t: t, f: critest.NewHooked(t), dir: t.TempDir(), ids: map[string]string{}}
	e.sb = e.f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "job-x", UID: jobPodUID})
	for _, name := range running {
		c := e.f.AddContainer(e.sb, critest.Container{Name: name, State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: time.Now()})
		e.ids[name] = c.ID
	}
	return e
}

// handler is a fresh handler (as in a new agent process) that polls fast.
func (e *jobEnv) handler(opts ...SidecarTerminateOption) *SidecarTerminate {
	opts = append([]SidecarTerminateOption{SidecarTerminatePollInterval(time.Millisecond, time.Millisecond), SidecarTerminateSettle(0)}, opts...)
	return NewSidecarTerminate(func() (*cri.Runtime, error) { return e.f.Runtime, nil }, opts...)
}

func (e *jobEnv) start(opts ...SidecarTerminateOption) *Runner {
	return start(e.t, e.dir, map[string]Handler{nodework.KindSidecarTerminate: e.handler(opts...)})
}

// exit plays container name exiting with code.
func (e *jobEnv) exit(name string, code int32) {
	id := e.ids[name]
	e.f.RuntimeService.Lock()
	e.f.RuntimeService.Containers[id].ExitCode = code
	e.f.RuntimeService.Unlock()
	e.f.SetState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
}

// exitOnStop makes every stopped container exit with code (the runtime
// leaves the exit code to the process).
func (e *jobEnv) exitOnStop(code int32) {
	e.f.OnStop(func(id string) {
		e.f.RuntimeService.Lock()
		e.f.RuntimeService.Containers[id].ExitCode = code
		e.f.RuntimeService.Unlock()
	})
}

func (e *jobEnv) polls(n int) {
	e.t.Helper()
	base := e.f.CallCount("ListContainers")
	require.Eventually(e.t, func() bool { return e.f.CallCount("ListContainers") >= base+n }, 10*time.Second, time.Millisecond)
}

// stoppedIDs lists the ids of the StopContainer calls so far, checking
// each used the pod's grace.
func (e *jobEnv) stoppedIDs() []string {
	var ids []string
	for _, c := range e.f.StopCalls() {
		require.Equal(e.t, jobGrace*time.Second, c.Timeout, "the pod's grace")
		ids = append(ids, c.ContainerID)
	}
	return ids
}

func jobSpec(policy nodeworkv1.JobRestartPolicy, mains, sidecars, ignore []string) *nodeworkv1.SidecarTerminateSpec {
	return &nodeworkv1.SidecarTerminateSpec{
		PodNamespace: "default", PodName: "job-x", PodUid: jobPodUID,
		MainContainers: mains, SidecarContainers: sidecars, IgnoreExitCodeContainers: ignore,
		RestartPolicy: policy, TerminationGraceSeconds: jobGrace,
	}
}

func jobItem(generation int64, spec *nodeworkv1.SidecarTerminateSpec) *nodeworkv1.WorkItem {
	return &nodeworkv1.WorkItem{
		Id: nodework.SidecarTerminateID("default", "job-x"), Generation: generation, Kind: nodework.KindSidecarTerminate,
		Spec: &nodeworkv1.WorkItem_SidecarTerminate{SidecarTerminate: spec},
	}
}

func stageIs(stage nodeworkv1.SidecarTerminateStage) func(*nodeworkv1.WorkReport) bool {
	return func(rep *nodeworkv1.WorkReport) bool { return rep.GetSidecarTerminate().GetStage() == stage }
}

// findSidecar returns one sidecar's state from a report, nil if absent.
func findSidecar(rep *nodeworkv1.WorkReport, name string) *nodeworkv1.SidecarTerminateContainerState {
	for _, s := range rep.GetSidecarTerminate().GetSidecars() {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

// sidecarOf returns one sidecar's state from a report.
func sidecarOf(t *testing.T, rep *nodeworkv1.WorkReport, name string) *nodeworkv1.SidecarTerminateContainerState {
	t.Helper()
	st := findSidecar(rep, name)
	require.NotNil(t, st, "no sidecar %q in %v", name, rep)
	return st
}

func TestSidecarTerminateStopsSidecarsWhenMainsFinish(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy nodeworkv1.JobRestartPolicy
		codes  []int32 // exit codes of main-1 and main-2
		stops  bool
	}{
		{"Never, both succeeded", never, []int32{0, 0}, true},
		{"Never, one failed", never, []int32{0, 3}, true},
		{"OnFailure, both succeeded", onFailure, []int32{0, 0}, true},
		{"OnFailure, one failed: the kubelet restarts it, nothing stopped", onFailure, []int32{0, 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, "main-1", "main-2", "log", "proxy")
			r := e.start()
			item := jobItem(1, jobSpec(tc.policy, []string{"main-1", "main-2"}, []string{"log", "proxy"}, nil))
			r.Upsert(item)
			waitReport(t, r, item.GetId(), "watching", stageIs(stageWaitingMains))

			e.exit("main-1", tc.codes[0])
			e.polls(3)
			require.Empty(t, e.f.StopCalls(), "one main still runs")
			e.exit("main-2", tc.codes[1])

			if !tc.stops {
				e.polls(5)
				require.Empty(t, e.f.StopCalls())
				rep, _ := r.Report(item.GetId())
				require.Equal(t, stageWaitingMains, rep.GetSidecarTerminate().GetStage())
				require.Contains(t, rep.GetMessage(), "main-2 (exited with code 3; the kubelet restarts it)")
				return
			}
			rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
			require.ElementsMatch(t, []string{e.ids["log"], e.ids["proxy"]}, e.stoppedIDs())
			st := rep.GetSidecarTerminate()
			require.Equal(t, stageDone, st.GetStage())
			require.Equal(t, jobPodUID, st.GetPodUid())
			require.Positive(t, st.GetMainsFinishedUnixNanos())
			require.Positive(t, st.GetStopDelayMillis())
			require.Len(t, st.GetMains(), 2)
			require.True(t, st.GetMains()[1].GetExited())
			require.Equal(t, tc.codes[1], st.GetMains()[1].GetExitCode())
			for _, name := range []string{"log", "proxy"} {
				s := sidecarOf(t, rep, name)
				require.True(t, s.GetExited())
				require.EqualValues(t, 1, s.GetStops())
				require.Contains(t, s.GetMessage(), "stopped; exited with code 0")
			}
		})
	}
}

// TestSidecarTerminateIgnoreExitCode: the ignore-exit-code sidecar waits
// for the coordinator's go-ahead (a new spec) and then a settle delay;
// the normal one is stopped at once.
func TestSidecarTerminateIgnoreExitCode(t *testing.T) {
	e := newJobEnv(t, "main", "log", "proxy")
	clk := clocktesting.NewFakeClock(time.Now())
	r := e.start(SidecarTerminateSettle(time.Minute), SidecarTerminateClock(clk))
	spec := jobSpec(never, []string{"main"}, []string{"log"}, []string{"proxy"})
	item := jobItem(1, spec)
	r.Upsert(item)
	e.exitOnStop(143)
	e.exit("main", 0)

	rep := waitReport(t, r, item.GetId(), "waiting for the go-ahead", stageIs(stageAwaiting))
	require.Equal(t, []string{e.ids["log"]}, e.stoppedIDs())
	require.Contains(t, sidecarOf(t, rep, "proxy").GetMessage(), "waiting for the coordinator to set the pod's phase")
	require.Contains(t, rep.GetMessage(), "waiting for the coordinator to set the pod's phase before stopping sidecars proxy")
	e.polls(3)
	require.Len(t, e.f.StopCalls(), 1, "not before the go-ahead")

	next := proto.Clone(item).(*nodeworkv1.WorkItem)
	next.Generation = 2
	next.GetSidecarTerminate().StopIgnoreExitCode = true
	r.Upsert(next)
	waitReport(t, r, item.GetId(), "settling", func(rep *nodeworkv1.WorkReport) bool {
		return rep.GetObservedGeneration() == 2 && strings.Contains(findSidecar(rep, "proxy").GetMessage(), "stopping it in a moment")
	})
	e.polls(3)
	require.Len(t, e.f.StopCalls(), 1, "not before the settle delay")
	clk.Step(time.Minute)

	rep = waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Equal(t, []string{e.ids["log"], e.ids["proxy"]}, e.stoppedIDs())
	require.EqualValues(t, 143, sidecarOf(t, rep, "proxy").GetExitCode(), "its exit code does not matter")
	require.Equal(t, 2, progressOfSidecars(t, r, item.GetId()).Starts)
}

// TestSidecarTerminateKubeletStopsIgnoreExitCodeSidecar: once the pod's
// phase is terminal the kubelet stops the remaining sidecars itself; the
// item is done without a stop of its own.
func TestSidecarTerminateKubeletStopsIgnoreExitCodeSidecar(t *testing.T) {
	e := newJobEnv(t, "main", "proxy")
	r := e.start(SidecarTerminateSettle(time.Hour))
	spec := jobSpec(never, []string{"main"}, nil, []string{"proxy"})
	spec.StopIgnoreExitCode = true
	item := jobItem(1, spec)
	r.Upsert(item)
	e.exit("main", 0)
	waitReport(t, r, item.GetId(), "settling", stageIs(stageStopping))
	e.exit("proxy", 137)
	rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Empty(t, e.f.StopCalls())
	require.EqualValues(t, 0, sidecarOf(t, rep, "proxy").GetStops())
}

// TestSidecarTerminateOnFailureRestartedSidecar: under OnFailure a sidecar
// that exits non-zero when stopped is started again by the kubelet; each
// new instance is stopped, and after maxSidecarStops the item fails with
// the advice.
func TestSidecarTerminateOnFailureRestartedSidecar(t *testing.T) {
	e := newJobEnv(t, "main", "log")
	r := e.start()
	e.f.OnStop(func(id string) {
		e.f.RuntimeService.Lock()
		e.f.RuntimeService.Containers[id].ExitCode = 1
		e.f.RuntimeService.Unlock()
		go e.f.Restart(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	})
	item := jobItem(1, jobSpec(onFailure, []string{"main"}, []string{"log"}, nil))
	r.Upsert(item)
	e.exit("main", 0)
	rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_FAILED)
	require.Len(t, e.f.StopCalls(), maxSidecarStops)
	require.Contains(t, rep.GetMessage(), "sidecar log was stopped 5 times and started again by the kubelet")
	require.Contains(t, rep.GetMessage(), "must exit 0 on SIGTERM")
}

// TestSidecarTerminateGoAheadDuringStopDoesNotRepeatIt: a new spec while
// a stop is under way restarts Run; the new Run collects that stop.
func TestSidecarTerminateGoAheadDuringStopDoesNotRepeatIt(t *testing.T) {
	e := newJobEnv(t, "main", "log", "proxy")
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	e.f.OnStop(func(string) { <-release })
	r := e.start()
	item := jobItem(1, jobSpec(never, []string{"main"}, []string{"log"}, []string{"proxy"}))
	r.Upsert(item)
	e.exit("main", 0)
	require.Eventually(t, func() bool { return len(e.f.StopCalls()) == 1 }, 10*time.Second, time.Millisecond)

	next := proto.Clone(item).(*nodeworkv1.WorkItem)
	next.Generation = 2
	next.GetSidecarTerminate().StopIgnoreExitCode = true
	r.Upsert(next)
	waitReport(t, r, item.GetId(), "the new run waits", func(rep *nodeworkv1.WorkReport) bool {
		return rep.GetObservedGeneration() == 2 && strings.Contains(findSidecar(rep, "log").GetMessage(), "stopped; exited")
	})
	close(release)
	waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Equal(t, []string{e.ids["log"], e.ids["proxy"]}, e.stoppedIDs(), "one stop each")
}

func TestSidecarTerminateResumeFromSavedProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		// progress is the saved state of sidecar "log".
		progress func(e *jobEnv) sidecarProgress
		// stopAgain says the agent issues a stop of the running instance.
		stopAgain bool
	}{
		{"stop started, instance still runs: stopped again", func(e *jobEnv) sidecarProgress {
			at := time.Now().Add(-time.Second)
			return sidecarProgress{Name: "log", StoppingID: e.ids["log"], StopStarted: &at}
		}, true},
		{"stopped, runtime still shows it running: not stopped again", func(e *jobEnv) sidecarProgress {
			at := time.Now().Add(-time.Second)
			return sidecarProgress{Name: "log", StoppingID: e.ids["log"], StopStarted: &at, StoppedID: e.ids["log"], Stops: 1}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, "main", "log")
			e.exit("main", 0)
			item := jobItem(1, jobSpec(never, []string{"main"}, []string{"log"}, nil))
			finished := time.Now().Add(-2 * time.Second).UTC()
			seedSidecarTerminate(t, e.dir, item, sidecarTerminateProgress{PodUID: jobPodUID, Starts: 1, SeenContainers: true,
				MainsFinishedAt: &finished, StopDelayMillis: 40, Sidecars: []sidecarProgress{tc.progress(e)}})
			r := e.start()
			if tc.stopAgain {
				rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
				require.Equal(t, []string{e.ids["log"]}, e.stoppedIDs())
				require.EqualValues(t, 1, sidecarOf(t, rep, "log").GetStops())
				require.EqualValues(t, 40, rep.GetSidecarTerminate().GetStopDelayMillis(), "kept from the first run")
			} else {
				waitReport(t, r, item.GetId(), "waiting for the runtime", func(rep *nodeworkv1.WorkReport) bool {
					return strings.Contains(findSidecar(rep, "log").GetMessage(), "waiting for the runtime to show it exited")
				})
				e.polls(3)
				require.Empty(t, e.f.StopCalls())
				e.exit("log", 0)
				waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
				require.Empty(t, e.f.StopCalls())
			}
			require.Equal(t, 2, progressOfSidecars(t, r, item.GetId()).Starts)
		})
	}
}

func TestSidecarTerminateProgressOfAnotherPodIsIgnored(t *testing.T) {
	e := newJobEnv(t, "main", "log")
	e.exit("main", 0)
	item := jobItem(1, jobSpec(never, []string{"main"}, []string{"log"}, nil))
	at := time.Now()
	seedSidecarTerminate(t, e.dir, item, sidecarTerminateProgress{PodUID: "uid-older", Starts: 3, MainsFinishedAt: &at,
		Sidecars: []sidecarProgress{{Name: "log", StoppedID: e.ids["log"], Stops: 1}}})
	r := e.start()
	waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Equal(t, []string{e.ids["log"]}, e.stoppedIDs(), "stopped: the saved stop was another pod's")
}

// TestSidecarTerminatePodGone: a pod deleted while the coordinator is away
// ends the item once its containers are gone from the node.
func TestSidecarTerminatePodGone(t *testing.T) {
	e := newJobEnv(t, "main", "log")
	r := e.start()
	item := jobItem(1, jobSpec(never, []string{"main"}, []string{"log"}, nil))
	r.Upsert(item)
	waitReport(t, r, item.GetId(), "containers seen", func(rep *nodeworkv1.WorkReport) bool {
		mains := rep.GetSidecarTerminate().GetMains()
		return len(mains) == 1 && mains[0].GetRunning()
	})
	e.f.RuntimeService.Lock()
	clear(e.f.RuntimeService.Containers)
	e.f.RuntimeService.Unlock()
	waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Empty(t, e.f.StopCalls())
}

// TestSidecarTerminateWaitsForSidecarToStart: a sidecar not running yet
// is not stopped (the runtime would ignore it) but waited for.
func TestSidecarTerminateWaitsForSidecarToStart(t *testing.T) {
	e := newJobEnv(t, "main")
	r := e.start()
	item := jobItem(1, jobSpec(never, []string{"main"}, []string{"log"}, nil))
	r.Upsert(item)
	e.exit("main", 0)
	waitReport(t, r, item.GetId(), "not created", func(rep *nodeworkv1.WorkReport) bool {
		return findSidecar(rep, "log").GetMessage() == "not created yet" && rep.GetSidecarTerminate().GetStage() == stageStopping
	})
	c := e.f.AddContainer(e.sb, critest.Container{Name: "log", State: runtimeapi.ContainerState_CONTAINER_CREATED})
	e.ids["log"] = c.ID
	waitReport(t, r, item.GetId(), "created", func(rep *nodeworkv1.WorkReport) bool {
		return strings.Contains(findSidecar(rep, "log").GetMessage(), "waiting for it to start (created)")
	})
	require.Empty(t, e.f.StopCalls())
	e.f.SetState(c.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
	waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_SUCCEEDED)
	require.Equal(t, []string{c.ID}, e.stoppedIDs())
}

// TestSidecarTerminateWakesOnContainerEvents: with the runtime's container
// events, the main container's exit is seen at once, not at the next
// poll (an hour here).
func TestSidecarTerminateWakesOnContainerEvents(t *testing.T) {
	e := newJobEnv(t, "main", "log")
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

	h := NewSidecarTerminate(runtime, SidecarTerminatePollInterval(time.Hour, time.Hour), SidecarTerminateEvents(events))
	r := start(t, e.dir, map[string]Handler{nodework.KindSidecarTerminate: h})
	item := jobItem(1, jobSpec(never, []string{"main"}, []string{"log"}, nil))
	r.Upsert(item)
	waitReport(t, r, item.GetId(), "watching", stageIs(stageWaitingMains))
	e.exit("main", 0)
	require.Eventually(t, func() bool { return len(e.f.StopCalls()) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{e.ids["log"]}, e.stoppedIDs())
}

func TestSidecarTerminateStopFailures(t *testing.T) {
	e := newJobEnv(t, "main", "log")
	for range maxStopFailures {
		e.f.RuntimeService.InjectError("StopContainer", errTestStop)
	}
	r := e.start()
	item := jobItem(1, jobSpec(never, []string{"main"}, []string{"log"}, nil))
	r.Upsert(item)
	e.exit("main", 0)
	rep := waitPhase(t, r, item.GetId(), nodeworkv1.Phase_PHASE_FAILED)
	require.Contains(t, rep.GetMessage(), "sidecar log could not be stopped: stop failed:")
	require.Contains(t, rep.GetMessage(), errTestStop.Error())
}

var errTestStop = errors.New("runtime refused the stop")

// seedSidecarTerminate writes a sidecar-terminate item with saved
// progress, as an agent that stopped mid-way would have left it.
func seedSidecarTerminate(t *testing.T, dir string, item *nodeworkv1.WorkItem, p sidecarTerminateProgress) {
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

func progressOfSidecars(t *testing.T, r *Runner, id string) sidecarTerminateProgress {
	t.Helper()
	r.mu.Lock()
	raw := r.entries[id].progress
	r.mu.Unlock()
	var p sidecarTerminateProgress
	require.NoError(t, json.Unmarshal(raw, &p))
	return p
}
