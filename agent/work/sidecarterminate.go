package work

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

const (
	// defaultSidecarPoll is how often a sidecar-terminate item reads its
	// pod's containers while the runtime's container events are not
	// connected: the sidecars are stopped at most about this long after
	// the last main container exited.
	defaultSidecarPoll = time.Second
	// defaultSidecarEventPoll is the poll while the events are connected:
	// an event wakes the item at once, the poll only covers a lost one.
	defaultSidecarEventPoll = 3 * time.Second
	// defaultIgnoreExitCodeSettle is how long after the coordinator's
	// go-ahead the agent waits before stopping ignore-exit-code sidecars:
	// the coordinator sends the go-ahead once its watch shows the pod's
	// new phase, and the kubelet must have seen that phase too before the
	// sidecar exits, or it would compute the phase from the sidecar's
	// exit code (see coordinator/sidecarterminator). The kubelet usually
	// stops them itself well within it, so the wait only delays the
	// fallback. It was 1 s until a run of the e2e parallel group (2 cores
	// at over 90% CPU) saw a kubelet whose watch lagged more than that:
	// the pod ended Failed.
	defaultIgnoreExitCodeSettle = 5 * time.Second
	// maxSidecarStops bounds how often one sidecar is stopped: under
	// restartPolicy OnFailure the kubelet restarts a sidecar that exited
	// non-zero, and the agent stops each new instance until this many.
	maxSidecarStops = 5
	// maxStopFailures bounds the failed StopContainer calls of one sidecar
	// before the item fails.
	maxStopFailures = 3
)

// Stages as the report shows them.
const (
	stageWaitingMains = nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_WAITING_MAINS
	stageStopping     = nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_STOPPING
	stageAwaiting     = nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_AWAITING_GO_AHEAD
	stageDone         = nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_DONE
)

// SidecarTerminate runs sidecar-terminate work items (the Job sidecar
// terminator): it watches the main containers of one pod through the CRI
// (woken by the runtime's container events, with a short poll as the
// fallback) and, as soon as they have finished as the pod's restart policy
// requires (Never: all exited; OnFailure: all exited with code 0), stops
// the sidecars with CRI StopContainer and the pod's grace period. The
// ignore-exit-code sidecars are stopped only once the spec carries the
// coordinator's go-ahead (it has set the pod's phase first), and a moment
// later.
//
// It never stops an instance twice, nor a container of another pod UID:
// the progress records, per sidecar, the instance whose stop started
// (saved before StopContainer) and the one stopped. A stop started by an
// earlier agent process whose instance still runs is issued again (a stop
// has no hook to repeat); an instance the kubelet started after a stop
// (OnFailure restarts a sidecar that exited non-zero) is stopped again, up
// to maxSidecarStops times.
//
// A stop runs detached from the item's Run: when the spec changes (the
// go-ahead) the runner stops Run and starts it again, and the new Run
// collects the stop under way instead of issuing another. The item ends
// once every sidecar has exited, or when the pod's containers are gone
// from the node (the pod was deleted while the coordinator was away).
type SidecarTerminate struct {
	runtime   func() (*cri.Runtime, error)
	clock     clock.Clock
	poll      time.Duration
	eventPoll time.Duration
	settle    time.Duration
	events    *cri.Events

	mu    sync.Mutex
	stops map[string]*stopJob // by CRI container id
}

// SidecarTerminateOption configures a SidecarTerminate.
type SidecarTerminateOption func(*SidecarTerminate)

// SidecarTerminateEvents makes items wake on the runtime's container
// events for their pod: a main container's exit is seen at once, not up
// to a poll later.
func SidecarTerminateEvents(e *cri.Events) SidecarTerminateOption {
	return func(s *SidecarTerminate) { s.events = e }
}

// SidecarTerminatePollInterval sets how often an item reads its pod's
// containers without container events (default 1 s) and with them
// (default 3 s). Zero keeps a default.
func SidecarTerminatePollInterval(withoutEvents, withEvents time.Duration) SidecarTerminateOption {
	return func(s *SidecarTerminate) {
		if withoutEvents > 0 {
			s.poll = withoutEvents
		}
		if withEvents > 0 {
			s.eventPoll = withEvents
		}
	}
}

// SidecarTerminateSettle sets how long after the coordinator's go-ahead
// the ignore-exit-code sidecars are stopped (default 1 s; negative means
// at once).
func SidecarTerminateSettle(d time.Duration) SidecarTerminateOption {
	return func(s *SidecarTerminate) { s.settle = max(d, 0) }
}

// SidecarTerminateClock sets the clock that times the settle delay and
// the durations reported (default: the real clock). Waiting between
// reads of the CRI uses real time.
func SidecarTerminateClock(c clock.Clock) SidecarTerminateOption {
	return func(s *SidecarTerminate) { s.clock = c }
}

// NewSidecarTerminate returns the sidecar-terminate handler. runtime
// returns the node's CRI runtime, or an error while there is none; items
// wait for it.
func NewSidecarTerminate(runtime func() (*cri.Runtime, error), opts ...SidecarTerminateOption) *SidecarTerminate {
	s := &SidecarTerminate{
		runtime:   runtime,
		clock:     clock.RealClock{},
		poll:      defaultSidecarPoll,
		eventPoll: defaultSidecarEventPoll,
		settle:    defaultIgnoreExitCodeSettle,
		stops:     map[string]*stopJob{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// sidecarTerminateProgress is a sidecar-terminate item's saved progress.
// Times are the agent's own clock, except MainsFinishedAt (the runtime's).
type sidecarTerminateProgress struct {
	// PodUID is the pod the progress belongs to.
	PodUID string `json:"podUid"`
	// Starts counts the runs of the item.
	Starts int `json:"starts"`
	// SeenContainers is set once the pod's containers were seen on the
	// node: an empty list afterwards means the pod is gone.
	SeenContainers bool `json:"seenContainers,omitempty"`
	// MainsFinishedAt is when the last main container exited, set once
	// the main containers have finished (they cannot run again then).
	MainsFinishedAt *time.Time `json:"mainsFinishedAt,omitempty"`
	// GoAheadAt is when this agent first ran the spec with the go-ahead.
	GoAheadAt *time.Time `json:"goAheadAt,omitempty"`
	// StopDelayMillis is from MainsFinishedAt to the first stop.
	StopDelayMillis int64 `json:"stopDelayMillis,omitempty"`
	// Sidecars follow nodework.SidecarTerminateSidecars.
	Sidecars []sidecarProgress `json:"sidecars"`
}

// sidecarProgress is one sidecar's saved progress.
type sidecarProgress struct {
	Name           string `json:"name"`
	IgnoreExitCode bool   `json:"ignoreExitCode,omitempty"`
	// StoppingID is the instance whose stop started (saved before
	// StopContainer); StoppedID the last instance stopped.
	StoppingID   string     `json:"stoppingId,omitempty"`
	StopStarted  *time.Time `json:"stopStarted,omitempty"`
	StoppedID    string     `json:"stoppedId,omitempty"`
	Stops        int32      `json:"stops,omitempty"`
	StopMillis   int64      `json:"stopMillis,omitempty"`
	StopFailures int        `json:"stopFailures,omitempty"`
	Message      string     `json:"message,omitempty"`
}

// stopJob is one StopContainer of one sidecar instance. err, millis and
// finished are written before done is closed.
type stopJob struct {
	item     string
	id       string
	done     chan struct{}
	err      error
	millis   int64
	finished time.Time
}

// Run implements Handler.
func (s *SidecarTerminate) Run(ctx context.Context, t *Task) error {
	spec := t.Item.GetSidecarTerminate()
	if spec == nil {
		return errors.New("sidecar-terminate work item has no sidecar-terminate spec")
	}
	x := &sidecarRun{s: s, t: t, spec: spec, log: klog.FromContext(ctx).WithValues("pod", spec.GetPodNamespace()+"/"+spec.GetPodName()),
		jobs: map[int]*stopJob{}, stopEnded: make(chan struct{}, 1)}
	if s.events != nil {
		var stop func()
		x.changed, stop = s.events.Subscribe(spec.GetPodUid())
		defer stop()
	}
	x.prog = x.resume()
	x.prog.Starts++
	if spec.GetStopIgnoreExitCode() && x.prog.GoAheadAt == nil {
		now := s.clock.Now().UTC()
		x.prog.GoAheadAt = &now
	}
	if err := x.save(x.summary()); err != nil {
		return err
	}
	for {
		if err := x.collect(); err != nil {
			return err
		}
		rt, err := s.runtime()
		if err != nil {
			if err := x.save("waiting for the container runtime: " + err.Error()); err != nil {
				return err
			}
			if err := x.wait(ctx); err != nil {
				return err
			}
			continue
		}
		cs, err := rt.PodContainers(ctx, spec.GetPodUid())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := x.save("reading the pod's containers: " + err.Error()); err != nil {
				return err
			}
			if err := x.wait(ctx); err != nil {
				return err
			}
			continue
		}
		if len(cs) == 0 && x.prog.SeenContainers && len(x.jobs) == 0 {
			x.stage = stageDone
			return x.finish("the pod's containers are gone from the node")
		}
		x.prog.SeenContainers = x.prog.SeenContainers || len(cs) > 0
		stops, failure := x.observe(cs)
		if failure != nil {
			if err := x.save(failure.Error()); err != nil {
				return err
			}
			return failure
		}
		if x.stage == stageDone && len(x.jobs) == 0 {
			return x.finish("")
		}
		for _, i := range stops {
			if err := x.startStop(ctx, rt, i); err != nil {
				return err
			}
		}
		if err := x.save(x.summary()); err != nil {
			return err
		}
		if err := x.wait(ctx); err != nil {
			return err
		}
	}
}

// sidecarRun is one Run of one sidecar-terminate item.
type sidecarRun struct {
	s    *SidecarTerminate
	t    *Task
	spec *nodeworkv1.SidecarTerminateSpec
	log  klog.Logger
	prog sidecarTerminateProgress

	// stage, mains and sidecars are what the last pass observed.
	stage    nodeworkv1.SidecarTerminateStage
	mains    []*nodeworkv1.SidecarTerminateContainerState
	sidecars []*nodeworkv1.SidecarTerminateContainerState
	// mainsWaiting says which main containers have not finished yet.
	mainsWaiting []string
	// settleLeft is how long ignore-exit-code sidecars still wait after
	// the go-ahead (0 when not waiting).
	settleLeft time.Duration

	savedProg   []byte
	savedMsg    string
	savedStatus *nodeworkv1.SidecarTerminateStatus

	// jobs are the stops this Run waits for, by sidecar index; stopEnded
	// wakes wait when one has ended.
	jobs      map[int]*stopJob
	stopEnded chan struct{}
	changed   <-chan struct{}
}

// resume rebuilds the progress for the spec from what was saved: a
// sidecar's progress is kept when it is about the same pod and sidecar.
func (x *sidecarRun) resume() sidecarTerminateProgress {
	var saved sidecarTerminateProgress
	ok, err := x.t.LoadProgress(&saved)
	if err != nil || !ok || saved.PodUID != x.spec.GetPodUid() {
		if err != nil {
			x.log.Error(err, "Ignoring unreadable sidecar-terminate progress")
		}
		saved = sidecarTerminateProgress{Starts: saved.Starts}
	}
	p := sidecarTerminateProgress{
		PodUID: x.spec.GetPodUid(), Starts: saved.Starts, SeenContainers: saved.SeenContainers,
		MainsFinishedAt: saved.MainsFinishedAt, GoAheadAt: saved.GoAheadAt, StopDelayMillis: saved.StopDelayMillis,
	}
	if !x.spec.GetStopIgnoreExitCode() {
		p.GoAheadAt = nil
	}
	nIgnore := len(x.spec.GetIgnoreExitCodeContainers())
	names := nodework.SidecarTerminateSidecars(x.spec)
	for i, name := range names {
		sp := sidecarProgress{Name: name, IgnoreExitCode: i >= len(names)-nIgnore}
		if j := slices.IndexFunc(saved.Sidecars, func(o sidecarProgress) bool { return o.Name == name }); j >= 0 {
			prev := saved.Sidecars[j]
			prev.IgnoreExitCode = sp.IgnoreExitCode
			sp = prev
		}
		p.Sidecars = append(p.Sidecars, sp)
	}
	return p
}

// mainsFinished reports whether the main containers have finished as the
// restart policy requires, when the last one exited, and a word on each
// one that has not.
func (x *sidecarRun) mainsFinished(byName map[string]*cri.Container) (done bool, last time.Time, waiting []string) {
	onFailure := x.spec.GetRestartPolicy() == nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE
	for _, name := range x.spec.GetMainContainers() {
		c := byName[name]
		switch {
		case c == nil:
			waiting = append(waiting, name+" (not created yet)")
		case c.State != cri.ContainerExited || c.ExitCode == nil:
			waiting = append(waiting, fmt.Sprintf("%s (%s)", name, strings.ToLower(string(c.State))))
		case onFailure && *c.ExitCode != 0:
			waiting = append(waiting, fmt.Sprintf("%s (exited with code %d; the kubelet restarts it)", name, *c.ExitCode))
		default:
			if c.FinishedAt != nil && c.FinishedAt.After(last) {
				last = *c.FinishedAt
			}
		}
	}
	return len(waiting) == 0, last, waiting
}

// observe reads the pod's containers: it records the main containers'
// and sidecars' states, decides the stage, and returns the sidecars to
// stop now (or the failure that ends the item).
func (x *sidecarRun) observe(cs []cri.Container) (stops []int, failure error) {
	byName := make(map[string]*cri.Container, len(cs))
	for i := range cs {
		byName[cs[i].Name] = &cs[i]
	}
	x.mains = x.mains[:0]
	for _, name := range x.spec.GetMainContainers() {
		x.mains = append(x.mains, sidecarContainerState(name, byName[name]))
	}
	done, last, waiting := x.mainsFinished(byName)
	x.mainsWaiting = waiting
	now := x.s.clock.Now()
	if done && x.prog.MainsFinishedAt == nil {
		if last.IsZero() {
			last = now
		}
		last = last.UTC()
		x.prog.MainsFinishedAt = &last
		x.log.Info("Main containers finished; stopping the sidecars", "restartPolicy", x.spec.GetRestartPolicy().String(),
			"sidecars", x.spec.GetSidecarContainers(), "ignoreExitCodeSidecars", x.spec.GetIgnoreExitCodeContainers())
	}
	mainsDone := x.prog.MainsFinishedAt != nil
	x.settleLeft = 0
	onFailure := x.spec.GetRestartPolicy() == nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE
	x.sidecars = x.sidecars[:0]
	allDone, normalDone := true, true
	for i := range x.prog.Sidecars {
		sp := &x.prog.Sidecars[i]
		cur := byName[sp.Name]
		st := sidecarContainerState(sp.Name, cur)
		finished := false
		switch {
		case cur == nil:
			sp.Message = "not created yet"
		case cur.State == cri.ContainerExited:
			code := int32(0)
			if cur.ExitCode != nil {
				code = *cur.ExitCode
			}
			if code == 0 || !onFailure || sp.IgnoreExitCode {
				finished = true
				sp.Message = fmt.Sprintf("exited with code %d", code)
				if sp.StoppedID == cur.ID || sp.StoppingID == cur.ID {
					sp.Message = fmt.Sprintf("stopped; exited with code %d", code)
				}
			} else {
				// OnFailure: the kubelet starts it again; its next
				// instance is stopped too.
				sp.Message = fmt.Sprintf("exited with code %d; under restartPolicy OnFailure the kubelet restarts it "+
					"(make it exit 0 on SIGTERM, or set %s=true)", code, "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE")
			}
		case !mainsDone:
			sp.Message = ""
		case cur.State != cri.ContainerRunning:
			sp.Message = fmt.Sprintf("waiting for it to start (%s) to stop it", strings.ToLower(string(cur.State)))
		case x.jobs[i] != nil:
			// Its stop is under way: startStop set the message.
		case sp.StoppedID == cur.ID:
			sp.Message = "stopped; waiting for the runtime to show it exited"
		case sp.IgnoreExitCode && !x.spec.GetStopIgnoreExitCode():
			sp.Message = "waiting for the coordinator to set the pod's phase before stopping it"
		case sp.IgnoreExitCode && x.prog.GoAheadAt != nil && now.Sub(*x.prog.GoAheadAt) < x.s.settle:
			x.settleLeft = x.s.settle - now.Sub(*x.prog.GoAheadAt)
			sp.Message = "the pod's phase is set; stopping it in a moment"
		case sp.Stops >= maxSidecarStops:
			return nil, fmt.Errorf("sidecar %s was stopped %d times and started again by the kubelet each time: under restartPolicy "+
				"OnFailure it must exit 0 on SIGTERM (or set KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true)", sp.Name, sp.Stops)
		case sp.StopFailures >= maxStopFailures:
			return nil, fmt.Errorf("sidecar %s could not be stopped: %s", sp.Name, sp.Message)
		default:
			stops = append(stops, i)
		}
		st.Stops, st.StopMillis, st.Message = sp.Stops, sp.StopMillis, clip(sp.Message)
		x.sidecars = append(x.sidecars, st)
		allDone = allDone && finished
		if !sp.IgnoreExitCode {
			normalDone = normalDone && finished
		}
	}
	switch {
	case allDone:
		x.stage = stageDone
	case !mainsDone:
		x.stage = stageWaitingMains
	case normalDone && !x.spec.GetStopIgnoreExitCode():
		x.stage = stageAwaiting
	default:
		x.stage = stageStopping
	}
	return stops, nil
}

// sidecarContainerState is the report's view of a container's latest instance.
func sidecarContainerState(name string, c *cri.Container) *nodeworkv1.SidecarTerminateContainerState {
	st := &nodeworkv1.SidecarTerminateContainerState{Name: name}
	if c == nil {
		return st
	}
	st.ContainerId = c.ID
	st.Running = c.State == cri.ContainerRunning
	st.Exited = c.State == cri.ContainerExited
	if st.Exited && c.ExitCode != nil {
		st.ExitCode = *c.ExitCode
	}
	if st.Exited && c.FinishedAt != nil {
		st.FinishedUnixNanos = c.FinishedAt.UnixNano()
	}
	return st
}

// status is the report's kind-specific part.
func (x *sidecarRun) status() *nodeworkv1.SidecarTerminateStatus {
	st := &nodeworkv1.SidecarTerminateStatus{
		PodUid: x.spec.GetPodUid(), Stage: x.stage, StopDelayMillis: x.prog.StopDelayMillis,
		Mains: x.mains, Sidecars: x.sidecars,
	}
	if st.Stage == nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_UNSPECIFIED {
		st.Stage = stageWaitingMains
	}
	if x.prog.MainsFinishedAt != nil {
		st.MainsFinishedUnixNanos = x.prog.MainsFinishedAt.UnixNano()
	}
	return proto.Clone(st).(*nodeworkv1.SidecarTerminateStatus)
}

// summary is the report's message while the item runs.
func (x *sidecarRun) summary() string {
	switch x.stage {
	case stageStopping:
		var names []string
		for _, sp := range x.prog.Sidecars {
			if sp.StoppingID != "" || sp.StoppedID != "" {
				names = append(names, sp.Name)
			}
		}
		return "main containers finished; stopping sidecars " + strings.Join(names, ", ")
	case stageAwaiting:
		return "main containers finished; waiting for the coordinator to set the pod's phase before stopping sidecars " +
			strings.Join(x.spec.GetIgnoreExitCodeContainers(), ", ")
	case stageDone:
		return "every sidecar has exited"
	default:
		if len(x.mainsWaiting) == 0 {
			return "watching the main containers"
		}
		return "waiting for main containers " + strings.Join(x.mainsWaiting, ", ")
	}
}

// save persists the progress and reports the status, if either changed.
func (x *sidecarRun) save(msg string) error {
	return x.put(nodeworkv1.Phase_PHASE_RUNNING, msg)
}

// finish saves the final state and ends the item successfully.
func (x *sidecarRun) finish(msg string) error {
	if msg == "" {
		msg = x.summary()
	}
	if err := x.put(nodeworkv1.Phase_PHASE_RUNNING, msg); err != nil {
		return err
	}
	x.log.V(2).Info("Sidecar termination finished", "message", msg)
	return nil
}

func (x *sidecarRun) put(phase nodeworkv1.Phase, msg string) error {
	msg = clip(msg)
	raw, err := json.Marshal(x.prog)
	if err != nil {
		return fmt.Errorf("encode sidecar-terminate progress: %w", err)
	}
	st := x.status()
	if x.savedProg != nil && bytes.Equal(raw, x.savedProg) && msg == x.savedMsg && proto.Equal(st, x.savedStatus) {
		return nil
	}
	if err := x.t.Update(json.RawMessage(raw), phase, msg, func(rep *nodeworkv1.WorkReport) {
		rep.Status = &nodeworkv1.WorkReport_SidecarTerminate{SidecarTerminate: st}
	}); err != nil {
		return err
	}
	x.savedProg, x.savedMsg, x.savedStatus = raw, msg, st
	return nil
}

// wait returns after the poll interval, or as soon as a stop ends, the
// runtime reports a change to one of the pod's containers, or the settle
// delay is over.
func (x *sidecarRun) wait(ctx context.Context) error {
	d := x.s.poll
	if x.s.events != nil && x.s.events.Connected() {
		d = x.s.eventPoll
	}
	if x.settleLeft > 0 {
		d = min(d, x.settleLeft)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-x.stopEnded:
	case <-x.changed:
	case <-timer.C:
	}
	return nil
}

// startStop starts stopping sidecar i's running instance, or joins the
// stop of it already under way.
func (x *sidecarRun) startStop(ctx context.Context, rt *cri.Runtime, i int) error {
	if x.jobs[i] != nil {
		return nil
	}
	sp := &x.prog.Sidecars[i]
	id := x.sidecars[i].GetContainerId()
	s := x.s
	job, owner := s.claimStop(x.t.Item.GetId(), id)
	if owner {
		resumed := sp.StoppingID == id && sp.StopStarted != nil
		now := s.clock.Now().UTC()
		if !resumed {
			sp.StoppingID, sp.StopStarted = id, &now
		}
		sp.Message = "stopping"
		if resumed {
			sp.Message = "stopping again after an agent restart"
		}
		if x.prog.StopDelayMillis == 0 && x.prog.MainsFinishedAt != nil {
			x.prog.StopDelayMillis = max(1, now.Sub(*x.prog.MainsFinishedAt).Milliseconds())
		}
		x.sidecars[i].Message = sp.Message
		if x.stage == stageWaitingMains || x.stage == stageAwaiting {
			x.stage = stageStopping
		}
		// Saved before anything is stopped: a later run knows the stop
		// started.
		if err := x.save(x.summary()); err != nil {
			s.abortStop(id, job)
			return err
		}
		grace := time.Duration(x.spec.GetTerminationGraceSeconds()) * time.Second
		x.log.Info("Stopping sidecar container", "container", sp.Name, "containerID", id, "graceSeconds", x.spec.GetTerminationGraceSeconds(),
			"ignoreExitCode", sp.IgnoreExitCode, "resumed", resumed)
		s.launchStop(ctx, rt, job, grace)
	} else {
		sp.Message = "being stopped"
		x.sidecars[i].Message = sp.Message
		x.log.V(2).Info("Waiting for a stop already under way", "container", sp.Name, "containerID", id)
	}
	x.jobs[i] = job
	go func() {
		select {
		case <-job.done:
			select {
			case x.stopEnded <- struct{}{}:
			default:
			}
		case <-ctx.Done(): // the stop goes on; the next Run collects it
		}
	}()
	return nil
}

// collect records the results of the stops that have ended.
func (x *sidecarRun) collect() error {
	ended := false
	for i, job := range x.jobs {
		select {
		case <-job.done:
		default:
			continue
		}
		delete(x.jobs, i)
		ended = true
		sp := &x.prog.Sidecars[i]
		x.s.forgetStop(x.t.Item.GetId(), job)
		if job.aborted() {
			continue
		}
		if job.err != nil {
			sp.StopFailures++
			sp.StoppingID, sp.StopStarted = "", nil
			sp.Message = "stop failed: " + job.err.Error()
			x.log.Info("Could not stop sidecar container", "container", sp.Name, "containerID", job.id, "err", job.err.Error(), "failures", sp.StopFailures)
			continue
		}
		if sp.StoppedID != job.id {
			sp.Stops++
		}
		sp.StoppedID, sp.StopMillis, sp.StopFailures = job.id, job.millis, 0
		sp.Message = "stopped"
		x.log.Info("Stopped sidecar container", "container", sp.Name, "containerID", job.id, "stopMillis", job.millis)
	}
	if !ended {
		return nil
	}
	return x.save(x.summary())
}

// claimStop returns the stop of container id under way (or finished and
// not yet collected by item), or registers a new one the caller owns and
// must launch or abort. It also forgets old results nobody collected.
func (s *SidecarTerminate) claimStop(item, id string) (job *stopJob, owner bool) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, j := range s.stops {
		select {
		case <-j.done:
			if now.Sub(j.finished) > keepKillResults {
				delete(s.stops, k)
			}
		default:
		}
	}
	if j := s.stops[id]; j != nil {
		select {
		case <-j.done:
			if j.item == item {
				return j, false
			}
		default:
			return j, false
		}
	}
	job = &stopJob{item: item, id: id, done: make(chan struct{})}
	s.stops[id] = job
	return job, true
}

// errStopAborted marks a stop that was never launched.
var errStopAborted = errors.New("stop aborted before it started")

func (j *stopJob) aborted() bool { return errors.Is(j.err, errStopAborted) }

// abortStop releases a claimed stop that was never launched.
func (s *SidecarTerminate) abortStop(id string, job *stopJob) {
	s.mu.Lock()
	if s.stops[id] == job {
		delete(s.stops, id)
	}
	s.mu.Unlock()
	job.err, job.finished = errStopAborted, s.clock.Now()
	close(job.done)
}

// forgetStop drops item's collected stop.
func (s *SidecarTerminate) forgetStop(item string, job *stopJob) {
	s.mu.Lock()
	if s.stops[job.id] == job && job.item == item {
		delete(s.stops, job.id)
	}
	s.mu.Unlock()
}

// launchStop runs a claimed stop in the background, detached from ctx's
// cancellation (not from its values) and bounded by the grace period
// plus killSlack.
func (s *SidecarTerminate) launchStop(ctx context.Context, rt *cri.Runtime, job *stopJob, grace time.Duration) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+killSlack)
	go func() {
		defer cancel()
		defer close(job.done)
		start := s.clock.Now()
		job.err = rt.StopContainer(sctx, job.id, grace)
		job.finished = s.clock.Now()
		job.millis = job.finished.Sub(start).Milliseconds()
	}()
}
