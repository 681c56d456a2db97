package probes

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Runner runs the node's PodProbeMarker probes: one worker goroutine per
// Key, started, updated and stopped by Set, reporting state changes on
// Changes and the state of every key through Results.
//
// The zero value is not usable; build one with New. All methods are safe
// for concurrent use.
type Runner struct {
	rt      Runtime
	clock   clock.Clock
	tick    time.Duration // workers wake on multiples of it; 0: whenever due
	prober  *prober
	metrics *metrics
	results *results
	changes chan Result

	mu        sync.Mutex
	log       klog.Logger
	ctx       context.Context // Run's context, while Run runs; workers derive theirs from it
	started   bool            // Run was called
	startedAt time.Time       // when Run started, for the start-up jitter
	specsSet  bool            // Set was called
	specs     map[Key]Spec
	workers   map[Key]*worker
	seeds     map[Key]Result // restored results not yet claimed by a worker
	lastOwner uint64
	wg        sync.WaitGroup
}

// Option configures a Runner.
type Option func(*options)

type options struct {
	clock clock.Clock
	dial  DialFunc
	reg   prometheus.Registerer
	tick  time.Duration
}

// DefaultTick is how finely the runner times probes by default: a worker
// wakes on the multiple of DefaultTick nearest to when its probe is due.
// It costs each probe at most 100 ms of timing, which periods of whole
// seconds do not notice, and lets the probes due within one tick share one
// wake-up of the process. A Go process woken from idle for each probe
// spends about 0.2 ms of CPU on the wake-up alone (the scheduler's timers,
// the netpoller, futexes), as much as the probe itself.
const DefaultTick = 200 * time.Millisecond

// WithTick sets the runner's tick (default DefaultTick): workers wake only
// on multiples of d (counted from the zero time, so every worker's ticks
// are the same instants) nearest to when their probes are due. 0 wakes each
// worker exactly when its probe is due.
func WithTick(d time.Duration) Option {
	return func(o *options) { o.tick = max(d, 0) }
}

// WithClock sets the clock that times probes, initial delays and result
// times (default: the real clock).
func WithClock(c clock.Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithDialer sets how TCP and HTTP probes connect to the pod (default: a
// net.Dialer). Tests use it to put probes on a fake network.
func WithDialer(d DialFunc) Option {
	return func(o *options) { o.dial = d }
}

// WithRegisterer registers the runner's metrics (MetricResults,
// MetricStateChanges, MetricWorkers) with reg. New panics if they are
// already registered there.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.reg = reg }
}

// New returns a runner that reaches containers through rt. It runs nothing
// until Run is called.
func New(rt Runtime, opts ...Option) *Runner {
	o := options{clock: clock.RealClock{}, tick: DefaultTick}
	for _, opt := range opts {
		opt(&o)
	}
	if o.dial == nil {
		o.dial = (&net.Dialer{}).DialContext
	}
	m := newMetrics()
	if o.reg != nil {
		o.reg.MustRegister(m.collectors()...)
	}
	return &Runner{
		rt:      rt,
		clock:   o.clock,
		tick:    o.tick,
		prober:  newProber(rt, o.dial),
		metrics: m,
		results: newResults(m),
		changes: make(chan Result),
		log:     klog.Background().WithName("probes"),
		specs:   map[Key]Spec{},
		workers: map[Key]*worker{},
		seeds:   map[Key]Result{},
	}
}

// Run runs the probes given to Set (before or while Run runs) until ctx
// ends, then stops every worker, waits for them, closes Changes and returns
// nil. It may be called once; a second call returns an error.
//
// Workers started within one probe period of Run's start wait a random
// part of their period before their first probe, so that an agent restart
// does not fire every probe of the node at once; workers started later
// probe at once (subject to the initial delay).
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("probe runner: Run called twice")
	}
	r.started = true
	r.log = klog.FromContext(ctx).WithName("probes")
	r.ctx = ctx
	r.startedAt = r.clock.Now()
	r.reconcile()
	r.mu.Unlock()

	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		r.dispatch(ctx)
	}()

	<-ctx.Done()
	r.mu.Lock()
	r.ctx = nil
	for k, w := range r.workers {
		w.cancel()
		delete(r.workers, k)
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.metrics.workers.Set(0)
	<-dispatched
	close(r.changes)
	return nil
}

// onTick is when a worker whose probe is due at t wakes: the multiple of
// the runner's tick nearest to t, or t itself without a tick. Every worker
// rounds against the same instants, so the Go runtime fires their timers
// together.
func (r *Runner) onTick(t time.Time) time.Time {
	if r.tick <= 0 {
		return t
	}
	return t.Round(r.tick)
}

// dispatch sends queued changes on r.changes until ctx ends.
func (r *Runner) dispatch(ctx context.Context) {
	for {
		res, ok := r.results.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-r.results.wake:
				continue
			}
		}
		select {
		case r.changes <- res:
		case <-r.results.wake:
			// Something changed while the reader was away; if it was this
			// key, send its latest result instead.
			r.results.unpop(res.Key)
		case <-ctx.Done():
			return
		}
	}
}

// Changes returns the stream of state changes: a Result each time a key's
// State or Message changes (including its first result and a reset to
// Unknown). Changes of one key not yet received are coalesced into its
// latest result, so a slow reader never blocks the workers and never sees
// a stale state or message (LastProbeTime moving alone is not a change, so
// a sent result's may be older than Results'); keys come in the order they
// first changed. Removed keys
// send nothing. The channel is closed when Run returns.
func (r *Runner) Changes() <-chan Result { return r.changes }

// Results returns the current result of every key that has one, sorted by
// key; LastProbeTime is fresh even when nothing changed, for callers that
// refresh their report periodically. A key has no result until its
// container was first seen (or one was restored).
func (r *Runner) Results() []Result { return r.results.snapshot() }

// Set makes specs the full set of probes to run (level-based): it starts a
// worker for each new key, hands a changed spec to the key's worker, and
// stops the workers of keys no longer listed and forgets their results.
// A spec change that alters what the probe checks (handler, resolved
// address) resets the key's result to Unknown and probes at once; a change
// of timings only keeps the state. Specs with an incomplete Key are
// ignored, and a later spec with the same Key replaces an earlier one. Set
// before Run only records the specs.
func (r *Runner) Set(specs []Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	desired := make(map[Key]Spec, len(specs))
	for _, s := range specs {
		if err := s.validate(); err != nil {
			r.log.Error(err, "Ignoring probe spec")
			continue
		}
		if _, dup := desired[s.Key]; dup {
			r.log.Info("Duplicate probe spec; the later one wins", "key", s.Key.String())
		}
		desired[s.Key] = s.deepCopy()
	}
	r.specs = desired
	r.specsSet = true
	for k := range r.seeds {
		if _, ok := desired[k]; !ok {
			delete(r.seeds, k)
		}
	}
	r.results.retain(func(k Key) bool { _, ok := desired[k]; return ok })
	if r.ctx != nil {
		r.reconcile()
	}
}

// Restore seeds results saved before an agent restart, so that probes do
// not flap back to Unknown: a key's worker keeps its restored result (and
// LastTransitionTime) while its container has the restored ContainerID,
// and starts from Unknown if the container changed. Restored results are
// not sent on Changes, and Results includes them at once. Call it before
// the Set that lists the keys (Run may already run: the agent restores
// each pod's probes as its work item starts); the next Set drops restored
// keys it does not list. A key that already has a worker or a result, and
// a result with an invalid State, are ignored.
func (r *Runner) Restore(results []Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range results {
		if err := res.validate(); err != nil || !res.State.Valid() {
			r.log.Info("Ignoring restored probe result", "key", res.Key.String(), "state", res.State)
			continue
		}
		if _, ok := r.workers[res.Key]; ok {
			continue
		}
		if r.results.restore(res) {
			r.seeds[res.Key] = res
		}
	}
}

// reconcile starts, updates and stops workers to match r.specs. The caller
// holds r.mu and Run is running.
func (r *Runner) reconcile() {
	for k, w := range r.workers {
		if _, ok := r.specs[k]; !ok {
			w.cancel()
			delete(r.workers, k)
			w.log.V(2).Info("Stopped probe worker")
		}
	}
	for k, s := range r.specs {
		if w, ok := r.workers[k]; ok {
			if !equality.Semantic.DeepEqual(w.latest, s) {
				w.latest = s
				w.update(s)
			}
			continue
		}
		r.startWorker(s)
	}
	r.metrics.workers.Set(float64(len(r.workers)))
}

// startWorker starts the worker of s. The caller holds r.mu.
func (r *Runner) startWorker(s Spec) {
	r.lastOwner++
	var seed *Result
	if res, ok := r.seeds[s.Key]; ok {
		seed = &res
		delete(r.seeds, s.Key)
	}
	w := newWorker(r, s, r.lastOwner, seed)
	r.results.claim(s.Key, w.owner)
	var jitter time.Duration
	if period := timingsOf(&s.Probe).period; r.clock.Since(r.startedAt) < period {
		// Within the period even once moved to the nearest tick.
		jitter = rand.N(max(period-r.tick/2, 1))
	}
	ctx, cancel := context.WithCancel(r.ctx)
	w.cancel = cancel
	r.workers[s.Key] = w
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		w.run(ctx, jitter)
	}()
	w.log.V(2).Info("Started probe worker", "firstProbeIn", jitter)
}
