package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/probes"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

const (
	// defaultProbeRefresh is how often a probe item reports its states
	// although nothing changed, so the coordinator's view and the pods'
	// lastProbeTime do not grow old (OpenKruise's daemon refreshes every
	// 600 s).
	defaultProbeRefresh = 10 * time.Minute
	// probeLinger is how long a stopped probe item's probes keep running:
	// a new spec of the same item (a marker added a probe) restarts the
	// item's Run, and its unchanged probes must not restart from Unknown.
	probeLinger = 5 * time.Second
)

// Probe runs probe work items (PodProbeMarker): each item names one pod
// and its probes; all items share one probes.Runner, which runs a worker
// per probe. An item never finishes on its own: it reports its probes'
// states (only when a state or message changes, plus a refresh every
// defaultProbeRefresh) until the coordinator removes it. It keeps running
// while the coordinator is away, and its last reported states are its
// saved progress, restored into the runner when the item starts again
// after an agent restart, so conditions do not flap to Unknown.
type Probe struct {
	runner  *probes.Runner
	clock   clock.WithTickerAndDelayedExecution
	refresh time.Duration

	mu sync.Mutex
	// specs holds each item's probes, by item id; the runner runs their
	// union.
	specs map[string][]probes.Spec
	// gens counts each item's registrations, so a lingering removal does
	// not drop probes a newer Run registered.
	gens map[string]int
	// subs wakes the Run of each pod UID when one of its probes changes.
	subs map[string]chan struct{}
}

// NewProbe returns the probe handler over runner. Run the runner and
// Probe.Run (which relays the runner's changes) alongside the work runner.
func NewProbe(runner *probes.Runner, clk clock.WithTickerAndDelayedExecution) *Probe {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Probe{runner: runner, clock: clk, refresh: defaultProbeRefresh,
		specs: map[string][]probes.Spec{}, gens: map[string]int{}, subs: map[string]chan struct{}{}}
}

// Relay wakes the items whose probes changed until the runner's change
// stream ends or ctx does.
func (p *Probe) Relay(ctx context.Context) error {
	changes := p.runner.Changes()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r, ok := <-changes:
			if !ok {
				return nil
			}
			p.mu.Lock()
			if ch := p.subs[r.PodUID]; ch != nil {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			p.mu.Unlock()
		}
	}
}

// probeProgress is a probe item's saved progress: its last reported
// results.
type probeProgress struct {
	Results []probes.Result `json:"results,omitempty"`
}

// Run implements Handler.
func (p *Probe) Run(ctx context.Context, t *Task) error {
	spec := t.Item.GetProbe()
	if spec == nil {
		return errors.New("probe work item has no probe spec")
	}
	log := klog.FromContext(ctx).WithValues("pod", spec.GetPodNamespace()+"/"+spec.GetPodName())
	specs, bad := probeSpecs(spec)
	if len(specs) == 0 {
		return fmt.Errorf("no probe of the pod can run: %s", strings.Join(bad, "; "))
	}
	if len(bad) > 0 {
		log.Info("Some probes cannot run", "problems", bad)
	}
	var saved probeProgress
	if _, err := t.LoadProgress(&saved); err != nil {
		log.Info("Ignoring unreadable saved probe results", "err", err.Error())
	}
	wake := make(chan struct{}, 1)
	id := t.Item.GetId()
	p.mu.Lock()
	p.gens[id]++
	gen := p.gens[id]
	p.specs[id] = specs
	p.subs[spec.GetPodUid()] = wake
	p.runner.Restore(saved.Results)
	p.apply()
	p.mu.Unlock()
	defer p.release(id, gen, spec.GetPodUid(), wake)

	refresh := p.clock.NewTicker(p.refresh)
	defer refresh.Stop()
	var last []probes.Result
	for {
		results := p.resultsOf(spec.GetPodUid(), specs)
		if !sameStates(last, results) {
			if err := p.report(t, spec, results); err != nil {
				return err
			}
			last = results
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-refresh.C():
			if err := p.report(t, spec, results); err != nil {
				return err
			}
			last = results
		}
	}
}

// apply hands the union of every item's probes to the runner; the caller
// holds p.mu.
func (p *Probe) apply() {
	var all []probes.Spec
	for _, id := range slices.Sorted(maps.Keys(p.specs)) {
		all = append(all, p.specs[id]...)
	}
	p.runner.Set(all)
}

// release drops an item's probes probeLinger after its Run ended, unless
// a newer Run of the item registered meanwhile.
func (p *Probe) release(id string, gen int, podUID string, wake chan struct{}) {
	p.mu.Lock()
	if p.subs[podUID] == wake {
		delete(p.subs, podUID)
	}
	p.mu.Unlock()
	p.clock.AfterFunc(probeLinger, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.gens[id] != gen {
			return
		}
		delete(p.specs, id)
		delete(p.gens, id)
		p.apply()
	})
}

// resultsOf returns the runner's results of the pod's probes in specs
// order.
func (p *Probe) resultsOf(podUID string, specs []probes.Spec) []probes.Result {
	byKey := map[probes.Key]probes.Result{}
	for _, r := range p.runner.Results() {
		if r.PodUID == podUID {
			byKey[r.Key] = r
		}
	}
	out := make([]probes.Result, 0, len(specs))
	for _, s := range specs {
		if r, ok := byKey[s.Key]; ok {
			out = append(out, r)
		}
	}
	return out
}

// sameStates reports whether two result lists say the same: states and
// messages (times move with every probe).
func sameStates(a, b []probes.Result) bool {
	return slices.EqualFunc(a, b, func(x, y probes.Result) bool {
		return x.Key == y.Key && x.State == y.State && x.Message == y.Message && x.ContainerID == y.ContainerID
	})
}

// report saves results as the item's progress and reports them.
func (p *Probe) report(t *Task, spec *nodeworkv1.ProbeSpec, results []probes.Result) error {
	status := &nodeworkv1.ProbeStatus{PodUid: spec.GetPodUid()}
	var summary []string
	for _, r := range results {
		status.Probes = append(status.Probes, &nodeworkv1.ProbeResult{
			Name: r.ProbeName, State: probeStateOf(r.State), Message: r.Message,
			LastProbeUnixNanos: unixNanos(r.LastProbeTime), LastTransitionUnixNanos: unixNanos(r.LastTransitionTime),
		})
		summary = append(summary, r.ProbeName+"="+string(r.State))
	}
	msg := fmt.Sprintf("%d of %d probes have a result", len(results), len(spec.GetProbes()))
	if len(summary) > 0 {
		msg += ": " + strings.Join(summary, ", ")
	}
	return t.Update(probeProgress{Results: results}, nodeworkv1.Phase_PHASE_RUNNING, msg, func(rep *nodeworkv1.WorkReport) {
		rep.Status = &nodeworkv1.WorkReport_Probe{Probe: status}
	})
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func probeStateOf(s probes.State) nodeworkv1.ProbeState {
	switch s {
	case probes.StateSucceeded:
		return nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED
	case probes.StateFailed:
		return nodeworkv1.ProbeState_PROBE_STATE_FAILED
	default:
		return nodeworkv1.ProbeState_PROBE_STATE_UNSPECIFIED
	}
}

// probeSpecs decodes an item's probes; bad lists the ones that cannot
// run and why.
func probeSpecs(spec *nodeworkv1.ProbeSpec) (out []probes.Spec, bad []string) {
	for _, pp := range spec.GetProbes() {
		var probe corev1.Probe
		if err := json.Unmarshal(pp.GetProbeJson(), &probe); err != nil {
			bad = append(bad, fmt.Sprintf("%s: decode probe: %v", pp.GetName(), err))
			continue
		}
		out = append(out, probes.Spec{
			Key:          probes.Key{PodUID: spec.GetPodUid(), Container: pp.GetContainerName(), ProbeName: pp.GetName()},
			PodNamespace: spec.GetPodNamespace(), PodName: spec.GetPodName(), PodIP: spec.GetPodIp(), Probe: probe,
		})
	}
	return out, bad
}
