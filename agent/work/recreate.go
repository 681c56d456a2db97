package work

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/cri"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

const (
	// defaultRecreatePoll is how often a recreate item looks at the CRI.
	defaultRecreatePoll = 500 * time.Millisecond
	// restartPoll and restartWatch: for restartWatch after this agent
	// stopped a container, while the new instance is not seen running, an
	// item looks every restartPoll instead (unless the runtime's container
	// events wake it). The kubelet starts the new instance within its 1 s
	// relist; seeing it within restartPoll instead of a poll took the
	// mean restart stage of make bench-crr on containerd 1.6 (no events)
	// from 683 to 598 ms, and p50 from 744 to 683 ms (three runs of 40
	// requests each way).
	restartPoll  = 100 * time.Millisecond
	restartWatch = 3 * time.Second
	// minGraceAfterPreStop is the least grace StopContainer gets after a
	// preStop hook ran, as in the kubelet.
	minGraceAfterPreStop = 2 * time.Second
	// killSlack is how much longer than its grace a kill may take before it
	// is given up (the CRI client allows the same for StopContainer).
	killSlack = 2 * time.Minute
	// keepKillResults is how long the result of a kill nobody collected is
	// kept for a later run of the item that started it.
	keepKillResults = 10 * time.Minute
	// maxHookResponseBytes bounds what is read of an httpGet hook's
	// response.
	maxHookResponseBytes = 64 << 10
)

// Per-container phases as they are saved in the progress.
const (
	recreatePending    = "Pending"
	recreateRecreating = "Recreating"
	recreateSucceeded  = "Succeeded"
	recreateFailed     = "Failed"
)

// Recreate runs recreate work items (ContainerRecreateRequest): for each
// container of the spec it runs the preStop hook, stops the container
// through the CRI within the grace period, and watches the CRI until the
// kubelet's next instance is running, has run for min_started_seconds and
// is ready.
//
// It never stops an instance twice, and never one but the instance the spec
// names: the progress records "kill started" before the preStop hook and
// StopContainer run and "stopped" after; a container whose kill started in
// an earlier agent process and that still runs is stopped again without
// its preStop hook, one that is no longer running is not touched. "Already
// recreated?" compares container ids and restart counts only.
//
// A kill runs detached from the item's Run: when the item's spec changes
// (its ready_container_ids follow the pod's status) the runner stops Run and
// starts it again with the saved progress, and the new Run collects the
// running kill instead of interrupting a preStop hook.
//
// With finish_only (the request ran out of time) a Run only finishes a
// kill already started, starts no other, and ends.
type Recreate struct {
	runtime func() (*cri.Runtime, error)
	clock   clock.Clock
	poll    time.Duration
	events  *cri.Events

	mu    sync.Mutex
	kills map[string]*killJob // by CRI container id
}

// RecreateOption configures a Recreate.
type RecreateOption func(*Recreate)

// RecreateClock sets the clock that times min_started_seconds, the
// preStop hook's grace and the durations reported (default: the real
// clock). Polling the CRI uses real time.
func RecreateClock(c clock.Clock) RecreateOption {
	return func(r *Recreate) { r.clock = c }
}

// RecreateEvents makes items wake on the runtime's container events for
// their pod (the kubelet starting the new instance, say) as well as at
// every poll: a recreate is seen done as soon as the runtime says so, not
// up to a poll interval later.
func RecreateEvents(e *cri.Events) RecreateOption {
	return func(r *Recreate) { r.events = e }
}

// RecreatePollInterval sets how often an item looks at the CRI while it
// waits (default 500 ms).
func RecreatePollInterval(d time.Duration) RecreateOption {
	return func(r *Recreate) {
		if d > 0 {
			r.poll = d
		}
	}
}

// NewRecreate returns the recreate handler. runtime returns the node's CRI
// runtime, or an error while there is none; items wait for it.
func NewRecreate(runtime func() (*cri.Runtime, error), opts ...RecreateOption) *Recreate {
	r := &Recreate{
		runtime: runtime,
		clock:   clock.RealClock{},
		poll:    defaultRecreatePoll,
		kills:   map[string]*killJob{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// recreateProgress is a recreate item's saved progress.
type recreateProgress struct {
	// PodUID is the pod the progress belongs to.
	PodUID string `json:"podUid"`
	// Starts counts the runs of the item (1 on the first, +1 on a resume).
	Starts int `json:"starts"`
	// Containers follow the spec's order.
	Containers []containerProgress `json:"containers"`
}

// containerProgress is one container's saved progress. Times are the
// agent's own clock.
type containerProgress struct {
	Name string `json:"name"`
	// ContainerID is the instance to recreate: the CRI id from the spec's
	// container_id, without the runtime prefix, or, with force, the
	// instance that ran when the request first looked (see SpecContainerID).
	ContainerID string `json:"containerId"`
	Phase       string `json:"phase"`
	Message     string `json:"message,omitempty"`
	IsKilled    bool   `json:"isKilled,omitempty"`
	// SpecContainerID is set when force moved ContainerID from the
	// spec's instance (this one, restart count in the spec) to the
	// instance running then (TargetRestartCount).
	SpecContainerID    string `json:"specContainerId,omitempty"`
	TargetRestartCount int32  `json:"targetRestartCount,omitempty"`
	// NewContainerID is the CRI id of the instance that replaced it.
	NewContainerID string `json:"newContainerId,omitempty"`
	RestartCount   int32  `json:"restartCount"`
	// KillStartedAt is saved before the preStop hook and StopContainer of
	// ContainerID start.
	KillStartedAt *time.Time `json:"killStartedAt,omitempty"`
	// StoppedAt is saved once StopContainer of ContainerID succeeded.
	StoppedAt    *time.Time `json:"stoppedAt,omitempty"`
	PreStopError string     `json:"preStopError,omitempty"`
	// RunningID and RunningSince are the new instance seen running and
	// when the agent first saw it running (for min_started_seconds).
	RunningID    string     `json:"runningId,omitempty"`
	RunningSince *time.Time `json:"runningSince,omitempty"`
	// EnvCheckedID is the new instance whose env matched the spec's
	// expected_env; EnvRestarts counts the instances recreated again
	// because theirs did not.
	EnvCheckedID  string `json:"envCheckedId,omitempty"`
	EnvRestarts   int    `json:"envRestarts,omitempty"`
	PreStopMillis int64  `json:"preStopMillis,omitempty"`
	StopMillis    int64  `json:"stopMillis,omitempty"`
	RestartMillis int64  `json:"restartMillis,omitempty"`
}

func (c *containerProgress) done() bool {
	return c.Phase == recreateSucceeded || c.Phase == recreateFailed
}

// retargeted reports whether force moved ContainerID off the spec's
// instance.
func (c *containerProgress) retargeted() bool { return c.SpecContainerID != "" }

// specID is the CRI id of the instance the spec names.
func (c *containerProgress) specID() string {
	if c.retargeted() {
		return c.SpecContainerID
	}
	return c.ContainerID
}

// baseRestartCount is the restart count of the instance to recreate;
// specCount is the spec's.
func (c *containerProgress) baseRestartCount(specCount int32) int32 {
	if c.retargeted() {
		return c.TargetRestartCount
	}
	return specCount
}

// retarget makes the instance cur (restart count count), running now,
// the one to recreate instead of the spec's: force recreates the instance
// the runtime runs, whatever the pod's status said when the request was
// made (it may still name the instance before, while the kubelet runs a
// postStart hook and does not update the pod's status).
func (c *containerProgress) retarget(cur *cri.Container, count int32) {
	if !c.retargeted() {
		c.SpecContainerID = c.ContainerID
	}
	c.ContainerID, c.TargetRestartCount = cur.ID, count
	c.NewContainerID, c.RunningID, c.RunningSince = "", "", nil
}

// killJob is one kill (preStop hook then StopContainer) of one container.
// res, aborted and finished are written before done is closed.
type killJob struct {
	item     string // the item that started it
	id       string // the CRI id of the container it stops
	done     chan struct{}
	res      killResult
	aborted  bool // never launched
	finished time.Time
}

type killResult struct {
	preStopMillis int64
	preStopErr    error
	stopMillis    int64
	stopErr       error
	stoppedAt     time.Time
}

// Run implements Handler.
func (r *Recreate) Run(ctx context.Context, t *Task) error {
	spec := t.Item.GetRecreate()
	if spec == nil {
		return errors.New("recreate work item has no recreate spec")
	}
	n := len(spec.GetContainers())
	x := &recreateRun{r: r, t: t, spec: spec, log: klog.FromContext(ctx), killable: make([]bool, n),
		kills: map[int]*killJob{}, killEnded: make(chan struct{}, 1)}
	if r.events != nil {
		var stop func()
		x.changed, stop = r.events.Subscribe(spec.GetPodUid())
		defer stop()
	}
	x.prog = r.resume(t, spec, x.log)
	x.prog.Starts++
	if err := x.save(x.summary()); err != nil {
		return err
	}
	for {
		// Kills that ended since the last pass are recorded first, so
		// that the pass sees their results.
		if err := x.collectKills(); err != nil {
			return err
		}
		rt, err := r.runtime()
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
		x.observe(cs)
		x.checkEnv(ctx, rt, cs)
		kills, finished, failure := x.walk()
		if err := x.save(x.summary()); err != nil {
			return err
		}
		switch {
		case failure != nil:
			return failure
		case finished && len(x.kills) == 0:
			return nil
		}
		// Every kill the pass allows starts now, each with its own grace
		// and preStop hook (one at a time only with ordered recreation,
		// which walk enforces); each is recorded as it ends.
		for _, i := range kills {
			if err := x.startKill(ctx, rt, i); err != nil {
				return err
			}
		}
		if err := x.wait(ctx); err != nil {
			return err
		}
	}
}

// resume rebuilds the progress for spec from what was saved (by an earlier
// Run, of this spec or an earlier one). A container's saved progress is
// kept only if it is about the same pod and the same original instance.
func (r *Recreate) resume(t *Task, spec *nodeworkv1.RecreateSpec, log klog.Logger) recreateProgress {
	var saved recreateProgress
	ok, err := t.LoadProgress(&saved)
	if err != nil || !ok {
		if err != nil {
			log.Error(err, "Ignoring unreadable recreate progress")
		}
		saved = recreateProgress{}
	}
	p := recreateProgress{PodUID: spec.GetPodUid(), Starts: saved.Starts}
	for _, c := range spec.GetContainers() {
		_, orig := cri.ParseContainerID(c.GetContainerId())
		cp := containerProgress{Name: c.GetName(), ContainerID: orig, Phase: recreatePending, RestartCount: c.GetRestartCount()}
		if saved.PodUID == spec.GetPodUid() {
			if i := slices.IndexFunc(saved.Containers, func(s containerProgress) bool {
				return s.Name == c.GetName() && s.specID() == orig
			}); i >= 0 {
				cp = saved.Containers[i]
			}
		}
		p.Containers = append(p.Containers, cp)
	}
	return p
}

// recreateRun is one Run of one recreate item.
type recreateRun struct {
	r    *Recreate
	t    *Task
	spec *nodeworkv1.RecreateSpec
	log  klog.Logger
	prog recreateProgress
	// killable marks, for this pass, the Pending containers whose original
	// instance may be stopped now.
	killable []bool

	saved    []byte
	savedMsg string

	// kills are the kills this Run waits for, by container index;
	// killEnded wakes wait when one of them has ended.
	kills     map[int]*killJob
	killEnded chan struct{}
	// changed wakes wait when the runtime reports a change to one of the
	// pod's containers (nil without RecreateEvents).
	changed <-chan struct{}
}

// save persists the progress and the report built from it, if either
// changed.
func (x *recreateRun) save(msg string) error {
	msg = clip(msg)
	raw, err := json.Marshal(x.prog)
	if err != nil {
		return fmt.Errorf("encode recreate progress: %w", err)
	}
	if x.saved != nil && bytes.Equal(raw, x.saved) && msg == x.savedMsg {
		return nil
	}
	st := x.status()
	if err := x.t.Update(json.RawMessage(raw), nodeworkv1.Phase_PHASE_RUNNING, msg, func(rep *nodeworkv1.WorkReport) {
		rep.Status = &nodeworkv1.WorkReport_Recreate{Recreate: st}
	}); err != nil {
		return err
	}
	x.saved, x.savedMsg = raw, msg
	return nil
}

// status is the report's view of the progress.
func (x *recreateRun) status() *nodeworkv1.RecreateStatus {
	st := &nodeworkv1.RecreateStatus{}
	for i, cp := range x.prog.Containers {
		st.Containers = append(st.Containers, &nodeworkv1.RecreateContainerState{
			Name:           cp.Name,
			Phase:          phaseEnum(cp.Phase),
			Message:        clip(cp.Message),
			IsKilled:       cp.IsKilled,
			NewContainerId: x.fullID(i, cp.NewContainerID),
			RestartCount:   cp.RestartCount,
			PreStopMillis:  cp.PreStopMillis,
			StopMillis:     cp.StopMillis,
			RestartMillis:  cp.RestartMillis,
		})
	}
	return st
}

// fullID gives a CRI id of container i the "<runtime>://" prefix its
// spec's container_id has.
func (x *recreateRun) fullID(i int, id string) string {
	if id == "" {
		return ""
	}
	if rt, _ := cri.ParseContainerID(x.spec.GetContainers()[i].GetContainerId()); rt != "" {
		return rt + "://" + id
	}
	return id
}

func phaseEnum(p string) nodeworkv1.RecreatePhase {
	switch p {
	case recreateRecreating:
		return nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING
	case recreateSucceeded:
		return nodeworkv1.RecreatePhase_RECREATE_PHASE_SUCCEEDED
	case recreateFailed:
		return nodeworkv1.RecreatePhase_RECREATE_PHASE_FAILED
	default:
		return nodeworkv1.RecreatePhase_RECREATE_PHASE_PENDING
	}
}

// summary is the report's message while the item runs.
func (x *recreateRun) summary() string {
	n := 0
	for _, cp := range x.prog.Containers {
		if cp.Phase == recreateSucceeded {
			n++
		}
	}
	return fmt.Sprintf("%d of %d containers recreated", n, len(x.prog.Containers))
}

// wait returns after the poll interval, or as soon as a kill ends or the
// runtime reports a change to one of the pod's containers.
func (x *recreateRun) wait(ctx context.Context) error {
	timer := time.NewTimer(x.interval())
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-x.killEnded:
		return nil
	case <-x.changed:
		return nil
	case <-timer.C:
		return nil
	}
}

// interval is how long wait waits at most: the poll, or restartPoll
// while a container this agent stopped is waiting for its new instance
// (for restartWatch) and no container events come.
func (x *recreateRun) interval() time.Duration {
	if x.r.events != nil && x.r.events.Connected() {
		return x.r.poll
	}
	now := x.r.clock.Now()
	for _, cp := range x.prog.Containers {
		if cp.Phase == recreateRecreating && cp.RunningSince == nil && cp.StoppedAt != nil && now.Sub(*cp.StoppedAt) < restartWatch {
			return min(x.r.poll, restartPoll)
		}
	}
	return x.r.poll
}

// observe computes each unfinished container's phase from the CRI's view
// of the pod.
func (x *recreateRun) observe(cs []cri.Container) {
	now := x.r.clock.Now()
	for i, c := range x.spec.GetContainers() {
		cp := &x.prog.Containers[i]
		x.killable[i] = false
		if cp.done() {
			continue
		}
		j := slices.IndexFunc(cs, func(k cri.Container) bool { return k.Name == c.GetName() })
		if j < 0 {
			cp.Phase, cp.Message = recreatePending, "not found container on Node"
			continue
		}
		cur := &cs[j]
		count := restartCount(cur)
		if x.spec.GetForce() && cp.KillStartedAt == nil && cur.ID != cp.ContainerID && cur.State == cri.ContainerRunning {
			x.log.Info("Force: recreating the instance running now, not the one the request names",
				"container", c.GetName(), "named", cp.ContainerID, "running", cur.ID)
			cp.retarget(cur, count)
		}
		switch {
		case cur.ID != cp.ContainerID || count > cp.baseRestartCount(c.GetRestartCount()):
			x.observeNew(i, cur, count, now)
		case cur.State == cri.ContainerExited:
			// isKilled: only if this request's kill was under way (its
			// result may not be in yet, or came before an agent restart);
			// not when the instance exited by itself.
			cp.Phase, cp.RestartCount = recreateRecreating, count
			cp.IsKilled = cp.IsKilled || cp.KillStartedAt != nil
			cp.Message = withPreStopNote("exited; waiting for the kubelet to start it again", cp)
		case cp.StoppedAt != nil:
			// Stopped by this agent, though the runtime does not show it
			// yet: never stopped twice.
			cp.Phase, cp.IsKilled, cp.RestartCount = recreateRecreating, true, count
			cp.Message = withPreStopNote("stopped; waiting for the kubelet to start it again", cp)
		case cur.State == cri.ContainerRunning || x.spec.GetForce():
			cp.Phase, cp.RestartCount = recreatePending, count
			if cp.KillStartedAt == nil && x.kills[i] == nil {
				// Not while this run waits on another request's kill of
				// it: that message says so.
				cp.Message = ""
			}
			x.killable[i] = true
		default:
			cp.Phase, cp.RestartCount = recreatePending, count
			cp.Message = fmt.Sprintf("waiting for the container to start (state %s)", cur.State)
		}
	}
}

// observeNew handles a container whose original instance was replaced.
func (x *recreateRun) observeNew(i int, cur *cri.Container, count int32, now time.Time) {
	c := x.spec.GetContainers()[i]
	cp := &x.prog.Containers[i]
	// An instance replaced without this request stopping it was recreated,
	// not killed: isKilled only if this request's kill was under way.
	cp.Phase, cp.NewContainerID, cp.RestartCount = recreateRecreating, cur.ID, count
	cp.IsKilled = cp.IsKilled || cp.KillStartedAt != nil
	if cur.State != cri.ContainerRunning {
		cp.RunningID, cp.RunningSince = "", nil
		cp.Message = withPreStopNote(fmt.Sprintf("waiting for the new instance to run (state %s)", cur.State), cp)
		return
	}
	if cp.RunningID != cur.ID || cp.RunningSince == nil {
		seen := now.UTC()
		cp.RunningID, cp.RunningSince = cur.ID, &seen
		if cp.StoppedAt != nil {
			cp.RestartMillis = max(0, seen.Sub(*cp.StoppedAt).Milliseconds())
		}
	}
	minStarted := time.Duration(x.spec.GetMinStartedSeconds()) * time.Second
	switch {
	case now.Sub(*cp.RunningSince) < minStarted:
		cp.Message = withPreStopNote(fmt.Sprintf("new instance running; waiting until it has run for %s", minStarted), cp)
	case c.GetHasReadinessProbe() && !x.ready(cur.ID):
		cp.Message = withPreStopNote("new instance running; waiting for it to be ready", cp)
	default:
		cp.Phase = recreateSucceeded
		cp.Message = withPreStopNote("", cp)
	}
}

// maxEnvRestarts bounds how often a container is recreated again because
// its new instance's env is not the expected one (a kubelet that built it
// from a pod view older than the metadata change).
const maxEnvRestarts = 3

// checkEnv checks, for each container the pass found recreated and whose
// spec has expected_env, that the new instance's env (read from the
// runtime, never from inside the container) has those values. A
// container whose new instance has them stays Succeeded; one whose
// instance's env cannot be read yet waits; one whose env differs is
// recreated again, up to maxEnvRestarts times, and then fails.
func (x *recreateRun) checkEnv(ctx context.Context, rt *cri.Runtime, cs []cri.Container) {
	for i, c := range x.spec.GetContainers() {
		cp := &x.prog.Containers[i]
		want := c.GetExpectedEnv()
		if len(want) == 0 || cp.Phase != recreateSucceeded || cp.EnvCheckedID == cp.NewContainerID {
			continue
		}
		got, err := rt.ContainerEnv(ctx, cp.NewContainerID)
		if err != nil {
			cp.Phase, cp.Message = recreateRecreating, "new instance running; reading its env: "+err.Error()
			continue
		}
		var stale []string
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got[k] != want[k] {
				stale = append(stale, fmt.Sprintf("%s is %q, want %q", k, got[k], want[k]))
			}
		}
		if len(stale) == 0 {
			cp.EnvCheckedID = cp.NewContainerID
			continue
		}
		j := slices.IndexFunc(cs, func(k cri.Container) bool { return k.ID == cp.NewContainerID })
		if cp.EnvRestarts >= maxEnvRestarts || j < 0 {
			cp.Phase = recreateFailed
			cp.Message = fmt.Sprintf("the new instance's env is stale after %d recreations: %s", cp.EnvRestarts, strings.Join(stale, ", "))
			continue
		}
		x.log.Info("Recreated container has a stale env; recreating it again", "container", c.GetName(),
			"containerID", cp.NewContainerID, "stale", stale)
		cp.EnvRestarts++
		cp.retarget(&cs[j], restartCount(&cs[j]))
		cp.KillStartedAt, cp.StoppedAt = nil, nil
		cp.Phase = recreatePending
		cp.Message = "the new instance's env is stale (" + strings.Join(stale, ", ") + "); recreating it again"
	}
}

// ready reports whether the kubelet reported the instance ready.
func (x *recreateRun) ready(id string) bool {
	for _, full := range x.spec.GetReadyContainerIds() {
		if _, rid := cri.ParseContainerID(full); rid == id {
			return true
		}
	}
	return false
}

// restartCount is the instance's restart count: kubelet's annotation, or
// the CRI attempt it mirrors.
func restartCount(c *cri.Container) int32 {
	return int32(min(max(int64(c.Attempt), int64(c.RestartCount)), math.MaxInt32))
}

func withPreStopNote(msg string, cp *containerProgress) string {
	if cp.PreStopError == "" {
		return msg
	}
	note := "preStop hook failed: " + cp.PreStopError
	if msg == "" {
		return note
	}
	return msg + "; " + note
}

// walk goes through the containers in the spec's order and decides what
// this pass does: the containers to kill now (without ordered recreation
// every killable one; with it, only the first container not yet
// recreated), whether all are done, or the failure that ends the item.
func (x *recreateRun) walk() (kills []int, finished bool, failure error) {
	if x.spec.GetFinishOnly() {
		// Only a kill already started is finished; nothing else starts.
		for i, cp := range x.prog.Containers {
			if cp.Phase == recreatePending && cp.KillStartedAt != nil && cp.StoppedAt == nil && x.killable[i] {
				kills = append(kills, i)
			}
		}
		return kills, len(kills) == 0, nil
	}
	finished = true
	for i := range x.prog.Containers {
		cp := &x.prog.Containers[i]
		switch cp.Phase {
		case recreateSucceeded:
		case recreateFailed:
			if !x.spec.GetIgnoreFailures() {
				return nil, false, errors.New(cp.Message)
			}
		case recreateRecreating:
			if x.spec.GetOrdered() {
				return kills, false, nil
			}
			finished = false
		default:
			finished = false
			if x.killable[i] {
				kills = append(kills, i)
			}
			if x.spec.GetOrdered() {
				return kills, false, nil
			}
		}
	}
	return kills, finished, nil
}

// startKill starts stopping container i's instance, unless this Run
// already waits for its kill: it starts the kill (after saving that it
// started) or joins one already under way. collectKills records the
// result when the kill has ended.
func (x *recreateRun) startKill(ctx context.Context, rt *cri.Runtime, i int) error {
	if x.kills[i] != nil {
		return nil
	}
	c := x.spec.GetContainers()[i]
	cp := &x.prog.Containers[i]
	id := cp.ContainerID
	r := x.r
	item := x.t.Item.GetId()

	job, owner := r.claimKill(item, id)
	if owner {
		resumed := cp.KillStartedAt != nil
		if resumed {
			cp.Message = "stopping again after an agent restart (the preStop hook is not repeated)"
		} else {
			now := r.clock.Now().UTC()
			cp.KillStartedAt = &now
			cp.Message = "stopping"
			if c.GetPreStop() != nil && x.spec.GetTerminationGraceSeconds() > 0 {
				cp.Message = "running the preStop hook"
			}
		}
		// Saved before anything is stopped: a later run knows the kill
		// started.
		if err := x.save(x.summary()); err != nil {
			r.abortKill(id, job)
			return err
		}
		x.log.Info("Stopping container to recreate it", "container", c.GetName(), "containerID", id,
			"graceSeconds", x.spec.GetTerminationGraceSeconds(), "skipPreStop", resumed)
		r.launchKill(ctx, rt, id, job, killPlan{
			hook:        c.GetPreStop(),
			skipPreStop: resumed,
			grace:       time.Duration(x.spec.GetTerminationGraceSeconds()) * time.Second,
			startedAt:   *cp.KillStartedAt,
			podIP:       x.spec.GetPodIp(),
		})
	} else {
		if cp.KillStartedAt == nil {
			// Another item's kill (or this item's, from before a restart
			// of Run, which saved its own message).
			cp.Message = "being stopped for another request"
			if err := x.save(x.summary()); err != nil {
				return err
			}
		}
		x.log.V(2).Info("Waiting for a kill already under way", "container", c.GetName(), "containerID", id)
	}
	x.kills[i] = job
	go func() {
		select {
		case <-job.done:
			select {
			case x.killEnded <- struct{}{}:
			default: // a wake-up is pending already
			}
		case <-ctx.Done(): // the kill goes on; the next Run collects it
		}
	}()
	return nil
}

// collectKills records the results of the kills that have ended and saves
// the progress if any did.
func (x *recreateRun) collectKills() error {
	ended := false
	for i, job := range x.kills {
		select {
		case <-job.done:
			x.collectKill(i, job)
			delete(x.kills, i)
			ended = true
		default:
		}
	}
	if !ended {
		return nil
	}
	return x.save(x.summary())
}

// collectKill records the result of container i's kill job. The phase
// moves on only from Pending: the CRI may have shown the container
// exited, or its next instance, before the kill's result came in.
func (x *recreateRun) collectKill(i int, job *killJob) {
	if job.aborted {
		return // its owner gave up before stopping anything; look again
	}
	c := x.spec.GetContainers()[i]
	cp := &x.prog.Containers[i]
	id := job.id
	res := job.res
	if id != cp.ContainerID {
		// The container was retargeted to a newer instance (its env
		// check found it stale) before this kill's result came in: the
		// result is about an instance this request no longer tracks.
		x.forgetKill(id, job)
		return
	}
	cp.PreStopMillis = max(cp.PreStopMillis, res.preStopMillis)
	cp.StopMillis = res.stopMillis
	if res.preStopErr != nil {
		cp.PreStopError = res.preStopErr.Error()
		x.log.Info("PreStop hook failed; stopping the container anyway", "container", c.GetName(), "containerID", id, "err", cp.PreStopError)
		if cp.Phase == recreateSucceeded {
			// The new instance was seen before this result came in: its
			// message gets the note now (observe no longer looks at it).
			cp.Message = withPreStopNote("", cp)
		}
	}
	if res.stopErr != nil {
		if cp.Phase == recreatePending {
			cp.Phase, cp.Message = recreateFailed, withPreStopNote("kill container error: "+res.stopErr.Error(), cp)
		}
		x.log.Info("Could not stop container", "container", c.GetName(), "containerID", id, "err", res.stopErr.Error())
	} else {
		stopped := res.stoppedAt.UTC()
		cp.StoppedAt = &stopped
		cp.IsKilled = true
		if cp.Phase == recreatePending {
			cp.Phase = recreateRecreating
			cp.Message = withPreStopNote("stopped; waiting for the kubelet to start it again", cp)
		}
		x.log.Info("Stopped container", "container", c.GetName(), "containerID", id, "preStopMillis", cp.PreStopMillis, "stopMillis", cp.StopMillis)
	}
	x.forgetKill(id, job)
}

// forgetKill drops this item's collected kill job of container id.
func (x *recreateRun) forgetKill(id string, job *killJob) {
	r, item := x.r, x.t.Item.GetId()
	r.mu.Lock()
	if r.kills[id] == job && job.item == item {
		delete(r.kills, id)
	}
	r.mu.Unlock()
}

// killPlan is what a kill does.
type killPlan struct {
	hook        *nodeworkv1.PreStopHook
	skipPreStop bool
	grace       time.Duration
	startedAt   time.Time // when the kill first started (grace counts from here)
	podIP       string
}

// claimKill returns the kill of container id under way (or finished and
// not yet collected by item, which started it), or registers a new one that the caller owns and must
// launch or abort. Registering first means two items never both kill the
// same container. It also forgets old results nobody collected.
func (r *Recreate) claimKill(item, id string) (job *killJob, owner bool) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, j := range r.kills {
		select {
		case <-j.done:
			if now.Sub(j.finished) > keepKillResults {
				delete(r.kills, k)
			}
		default:
		}
	}
	if j := r.kills[id]; j != nil {
		select {
		case <-j.done:
			// A finished kill's result is only for the item that started
			// it; anyone else looks at the container afresh.
			if j.item == item {
				return j, false
			}
		default:
			return j, false
		}
	}
	job = &killJob{item: item, id: id, done: make(chan struct{})}
	r.kills[id] = job
	return job, true
}

// abortKill releases a claimed kill that was never launched.
func (r *Recreate) abortKill(id string, job *killJob) {
	r.mu.Lock()
	if r.kills[id] == job {
		delete(r.kills, id)
	}
	r.mu.Unlock()
	job.aborted = true
	job.finished = r.clock.Now()
	close(job.done)
}

// launchKill runs a claimed kill of container id in the background,
// detached from ctx's cancellation (not from its values).
func (r *Recreate) launchKill(ctx context.Context, rt *cri.Runtime, id string, job *killJob, p killPlan) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.grace+minGraceAfterPreStop+killSlack)
	go func() {
		defer cancel()
		defer close(job.done)
		job.res = r.runKill(kctx, rt, id, p)
		job.finished = r.clock.Now()
	}()
}

// runKill runs the preStop hook (bounded by the grace) and then
// StopContainer with what is left of the grace, at least 2 s after a hook
// as in the kubelet. A failed hook does not stop the kill.
func (r *Recreate) runKill(ctx context.Context, rt *cri.Runtime, id string, p killPlan) killResult {
	var res killResult
	hasHook := p.hook != nil && p.grace > 0
	if hasHook && !p.skipPreStop {
		start := r.clock.Now()
		res.preStopErr = r.runPreStop(ctx, rt, id, p.hook, p.podIP, p.grace)
		res.preStopMillis = r.clock.Since(start).Milliseconds()
	}
	remaining := max(0, p.grace-r.clock.Since(p.startedAt))
	if hasHook && remaining < minGraceAfterPreStop {
		remaining = minGraceAfterPreStop
	}
	start := r.clock.Now()
	res.stopErr = rt.StopContainer(ctx, id, remaining)
	res.stoppedAt = r.clock.Now()
	res.stopMillis = res.stoppedAt.Sub(start).Milliseconds()
	return res
}

// runPreStop runs the hook and gives up on it once grace has passed.
func (r *Recreate) runPreStop(ctx context.Context, rt *cri.Runtime, id string, h *nodeworkv1.PreStopHook, podIP string, grace time.Duration) error {
	if s := h.GetSleep(); s != nil {
		// A sleep is cut at the grace period, which is not a failure.
		d := min(time.Duration(s.GetSeconds())*time.Second, grace)
		if d <= 0 {
			return nil
		}
		timer := r.clock.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C():
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sleep: %w", ctx.Err())
		}
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runHook(hctx, rt, id, h, podIP, grace) }()
	timer := r.clock.NewTimer(grace)
	defer timer.Stop()
	select {
	case err := <-errc:
		return err
	case <-timer.C():
		cancel()
		<-errc
		return fmt.Errorf("did not finish within the grace period of %s", grace)
	case <-ctx.Done():
		cancel()
		<-errc
		return ctx.Err()
	}
}

// runHook runs an exec or httpGet hook.
func runHook(ctx context.Context, rt *cri.Runtime, id string, h *nodeworkv1.PreStopHook, podIP string, timeout time.Duration) error {
	switch {
	case h.GetExec() != nil:
		cmd := h.GetExec().GetCommand()
		_, stderr, code, err := rt.ExecSync(ctx, id, cmd, timeout)
		if err != nil {
			return fmt.Errorf("exec %q: %w", cmd, err)
		}
		if code != 0 {
			return fmt.Errorf("exec %q exited with code %d: %s", cmd, code, strings.TrimSpace(string(stderr)))
		}
		return nil
	case h.GetHttpGet() != nil:
		return httpGetHook(ctx, h.GetHttpGet(), podIP)
	default:
		return errors.New("hook has no action")
	}
}

// httpGetHook sends the hook's GET to its host (default: the pod's IP).
// Like the kubelet it does not verify HTTPS certificates and does not judge
// the response's status; only a request that fails is an error.
func httpGetHook(ctx context.Context, g *nodeworkv1.HTTPGetAction, podIP string) error {
	host := g.GetHost()
	if host == "" {
		host = podIP
	}
	if host == "" {
		return errors.New("httpGet: no host and the pod has no IP")
	}
	scheme := "http"
	if strings.EqualFold(g.GetScheme(), "HTTPS") {
		scheme = "https"
	}
	path := g.GetPath()
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	target := scheme + "://" + net.JoinHostPort(host, strconv.Itoa(int(g.GetPort()))) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("httpGet %s: %w", target, err)
	}
	for _, hd := range g.GetHeaders() {
		if strings.EqualFold(hd.GetName(), "Host") {
			req.Host = hd.GetValue()
			continue
		}
		req.Header.Add(hd.GetName(), hd.GetValue())
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "shoal-agent/prestop")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "*/*")
	}
	client := &http.Client{
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			// The kubelet does not verify a hook's certificate either.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // lifecycle hooks skip verification, as in the kubelet
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("httpGet %s: %w", target, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxHookResponseBytes))
	_ = resp.Body.Close()
	return nil
}
