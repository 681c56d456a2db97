// Package statuswriter batches the coordinator's status writes.
//
// The coordinator is the only writer of custom resources' status, and
// agent reports can change one object's status many times a second. A
// Writer keeps at most one pending write per key (usually an object's
// namespace/name): a newer write replaces the pending one, a key's
// progress is written at most once per MinInterval (a final write, such as
// a terminal status, goes at once), all keys together at most QPS
// times a second (with bursts of Burst), and failed writes are retried
// with capped exponential backoff unless a newer write replaced them.
package statuswriter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultMinInterval  = time.Second
	DefaultQPS          = 20
	DefaultBurst        = 40
	DefaultWorkers      = 4
	DefaultMaxBackoff   = time.Minute
	DefaultWriteTimeout = 30 * time.Second
)

// Metric names.
const (
	// MetricWrites counts the write attempts by result ("ok" or "error").
	MetricWrites = "shoal_coordinator_status_writes_total"
	// MetricPending is the number of keys with a write waiting or in
	// flight.
	MetricPending = "shoal_coordinator_status_writes_pending"
)

// WriteFunc writes one status. It should read the object's latest state
// itself, so that a retry writes the current status, and must return when
// ctx ends. It is an alias, so that plain funcs and interfaces naming
// func(context.Context) error fit.
type WriteFunc = func(ctx context.Context) error

// Enqueuer is what controllers need of a Writer: queueing a write of one
// key, a progress write or a final one. Tests may pass their own.
type Enqueuer interface {
	Enqueue(key string, write WriteFunc)
	EnqueueFinal(key string, write WriteFunc)
}

// Options configure a Writer. Zero fields take their defaults.
type Options struct {
	// MinInterval is the least time between the starts of two writes of
	// one key, and the first retry delay (default 1s).
	MinInterval time.Duration
	// QPS is the rate of writes of all keys together (default 20).
	QPS float64
	// Burst is how many writes may go at once above QPS (default 40).
	Burst int
	// Workers is the number of writes in flight at once (default 4).
	Workers int
	// MaxBackoff caps the delay of retries (default 1 minute).
	MaxBackoff time.Duration
	// WriteTimeout bounds one write (default 30s).
	WriteTimeout time.Duration
	// Clock tells the time and makes the timers; nil means the real clock.
	Clock clock.WithTicker
	// Registerer receives the metrics; nil registers them nowhere.
	Registerer prometheus.Registerer
}

// Writer coalesces, paces and retries status writes. Create it with New,
// enqueue writes from anywhere, and drive it with Run.
type Writer struct {
	opts    Options
	clock   clock.WithTicker
	writes  *prometheus.CounterVec
	pending prometheus.Gauge
	running atomic.Bool

	mu       sync.Mutex
	keys     map[string]*entry
	nPending int
	idle     chan struct{} // closed while nPending is 0
	wake     chan struct{} // a scheduling change; capacity 1
	tokens   float64       // of the global rate limit
	refilled time.Time
}

// entry is the state of one key. It stays in the map while a write is
// pending or in flight, and then until notBefore, so that MinInterval and
// backoff hold across writes.
type entry struct {
	write     WriteFunc // waiting to be written, or nil
	gen       uint64    // counts Enqueue and Forget calls
	inFlight  bool
	final     bool      // the waiting write is final: MinInterval does not hold it back
	notBefore time.Time // the next write may start then
	failures  int       // consecutive failed writes
}

func (e *entry) isPending() bool { return e.write != nil || e.inFlight }

// dueAt is when e's waiting write may start: notBefore, or at once for a
// final write that is not backing off after a failure.
func (e *entry) dueAt(now time.Time) time.Time {
	if e.final && e.failures == 0 {
		return now
	}
	return e.notBefore
}

// dispatched is one write taken by a worker.
type dispatched struct {
	key     string
	e       *entry
	write   WriteFunc
	gen     uint64
	final   bool
	started time.Time
}

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent wraps err, returned by a WriteFunc, so that the write is not
// retried (the object is gone, the status is invalid). Permanent(nil) is
// nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// New returns a Writer for opts and registers its metrics with
// opts.Registerer. A Writer created with the same Registerer as an
// earlier one shares its metrics.
func New(opts Options) (*Writer, error) {
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinInterval
	}
	if opts.QPS <= 0 {
		opts.QPS = DefaultQPS
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxBackoff < opts.MinInterval {
		opts.MaxBackoff = opts.MinInterval
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	writes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricWrites,
		Help: "Status write attempts of the coordinator, by result (ok or error).",
	}, []string{"result"})
	pending := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricPending,
		Help: "Objects whose status write is waiting or in flight.",
	})
	if opts.Registerer != nil {
		var err error
		if writes, err = register(opts.Registerer, writes); err != nil {
			return nil, err
		}
		if pending, err = register(opts.Registerer, pending); err != nil {
			return nil, err
		}
	}
	idle := make(chan struct{})
	close(idle)
	return &Writer{
		opts:     opts,
		clock:    clk,
		writes:   writes,
		pending:  pending,
		keys:     map[string]*entry{},
		idle:     idle,
		wake:     make(chan struct{}, 1),
		tokens:   float64(opts.Burst),
		refilled: clk.Now(),
	}, nil
}

// register registers c, or returns the collector already registered in
// its place.
func register[C prometheus.Collector](r prometheus.Registerer, c C) (C, error) {
	err := r.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("register status writer metrics: %w", err)
	}
	return c, nil
}

// Enqueue asks for write to be run for key. If a write of key is already
// waiting, write replaces it; a write in flight finishes, and write runs
// after it. It never blocks on the writes themselves.
func (w *Writer) Enqueue(key string, write WriteFunc) { w.enqueue(key, write, false) }

// EnqueueFinal is Enqueue for a write that ends the object's progress (a
// terminal status): it is not held back by MinInterval, so the final
// answer is not delayed by the pacing of the progress writes before it. It
// still waits for a write of key in flight, for the global rate limit, and
// for the backoff after a failed write. A later Enqueue that replaces it
// stays final.
func (w *Writer) EnqueueFinal(key string, write WriteFunc) { w.enqueue(key, write, true) }

func (w *Writer) enqueue(key string, write WriteFunc, final bool) {
	if write == nil {
		return
	}
	w.mu.Lock()
	e := w.keys[key]
	if e == nil {
		e = &entry{notBefore: w.clock.Now()}
		w.keys[key] = e
	}
	was := e.isPending()
	e.write = write
	e.final = e.final || final
	e.gen++
	w.changedLocked(was, e)
	w.mu.Unlock()
	w.notify()
}

// Forget drops the waiting write of key, and the retry of a write of key
// in flight, for an object that is gone.
func (w *Writer) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.keys[key]
	if e == nil {
		return
	}
	was := e.isPending()
	e.write = nil
	e.final = false
	e.gen++
	w.changedLocked(was, e)
}

// Flush waits until no write is waiting or in flight (Run must be running
// for that), or until ctx ends.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	idle, n := w.idle, w.nPending
	w.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d status writes still pending: %w", n, ctx.Err())
	}
}

// Run writes what is enqueued until ctx ends, then waits for the writes in
// flight (their context is ctx, so they end too) and returns nil. A write
// that fails once ctx has ended is not retried; writes still waiting stay
// pending. A Writer runs once: a second Run is an error.
func (w *Writer) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("status writer: Run called twice")
	}
	logger := klog.FromContext(ctx).WithName("statuswriter")
	ctx = klog.NewContext(ctx, logger)
	logger.V(2).Info("Status writer started", "minInterval", w.opts.MinInterval, "qps", w.opts.QPS,
		"burst", w.opts.Burst, "workers", w.opts.Workers)

	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, w.opts.Workers)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		d, ok := w.next(ctx)
		if !ok {
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			w.do(ctx, d)
		}()
	}
}

// next waits until a key is due and the global rate limit has a token,
// and takes that key's write. It returns false when ctx ends.
func (w *Writer) next(ctx context.Context) (dispatched, bool) {
	for {
		w.mu.Lock()
		now := w.clock.Now()
		key, e, wait := w.pickLocked(now)
		if e != nil {
			w.refillLocked(now)
			if w.tokens >= 1 {
				w.tokens--
				d := dispatched{key: key, e: e, write: e.write, gen: e.gen, final: e.final, started: now}
				e.write = nil
				e.final = false
				e.inFlight = true
				w.mu.Unlock()
				return d, true
			}
			wait = time.Duration((1 - w.tokens) / w.opts.QPS * float64(time.Second))
			wait = max(wait, time.Nanosecond)
		}
		w.mu.Unlock()

		if !w.sleep(ctx, wait) {
			return dispatched{}, false
		}
	}
}

// sleep waits for a wake-up, or for d to pass when d > 0. It returns false
// when ctx ends.
func (w *Writer) sleep(ctx context.Context, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := w.clock.NewTimer(d)
		defer t.Stop()
		timer = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-w.wake:
	case <-timer:
	}
	return true
}

// pickLocked returns the due key that has waited longest, or, if none is
// due, how long until the first one is (0: nothing waits). It drops the
// entries that have nothing left to enforce.
func (w *Writer) pickLocked(now time.Time) (string, *entry, time.Duration) {
	var bestKey string
	var best *entry
	for k, e := range w.keys {
		if !e.isPending() && !now.Before(e.notBefore) {
			delete(w.keys, k)
			continue
		}
		if e.write == nil || e.inFlight {
			continue
		}
		if best == nil || e.dueAt(now).Before(best.dueAt(now)) {
			bestKey, best = k, e
		}
	}
	if best == nil {
		return "", nil, 0
	}
	if d := best.dueAt(now).Sub(now); d > 0 {
		return "", nil, d
	}
	return bestKey, best, 0
}

// refillLocked adds the tokens earned since the last refill.
func (w *Writer) refillLocked(now time.Time) {
	if elapsed := now.Sub(w.refilled); elapsed > 0 {
		w.tokens = min(float64(w.opts.Burst), w.tokens+elapsed.Seconds()*w.opts.QPS)
		w.refilled = now
	}
}

// do runs one write and records its outcome.
func (w *Writer) do(ctx context.Context, d dispatched) {
	wctx, cancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
	err := d.write(wctx)
	cancel()

	w.mu.Lock()
	now := w.clock.Now()
	e := d.e
	was := e.isPending()
	e.inFlight = false
	var retryIn time.Duration
	var permanent permanentError
	if err == nil {
		w.writes.WithLabelValues("ok").Inc()
		e.failures = 0
		e.notBefore = d.started.Add(w.opts.MinInterval)
	} else {
		w.writes.WithLabelValues("error").Inc()
		e.failures++
		retryIn = w.backoff(e.failures)
		e.notBefore = later(d.started.Add(w.opts.MinInterval), now.Add(retryIn))
		if e.gen == d.gen && e.write == nil && !errors.As(err, &permanent) && ctx.Err() == nil {
			e.write, e.final = d.write, d.final
		}
	}
	retry, failures, nextIn := e.write != nil, e.failures, e.notBefore.Sub(now)
	w.changedLocked(was, e)
	w.mu.Unlock()
	w.notify()

	if err != nil {
		klog.FromContext(ctx).V(2).Info("Status write failed", "key", d.key, "err", err,
			"failures", failures, "retry", retry, "nextIn", nextIn)
	}
}

// backoff is the delay before retry n (1, 2, ...): MinInterval doubled
// each time, at most MaxBackoff.
func (w *Writer) backoff(n int) time.Duration {
	d := w.opts.MinInterval
	for i := 1; i < n && d < w.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, w.opts.MaxBackoff)
}

// changedLocked updates the pending count, the gauge and the idle channel
// after e changed from pending (was) to whatever it is now.
func (w *Writer) changedLocked(was bool, e *entry) {
	now := e.isPending()
	switch {
	case now && !was:
		w.nPending++
		if w.nPending == 1 {
			w.idle = make(chan struct{})
		}
	case !now && was:
		w.nPending--
	}
	// The gauge first: Flush returns as soon as idle is closed.
	w.pending.Set(float64(w.nPending))
	if !now && was && w.nPending == 0 {
		close(w.idle)
	}
}

// notify wakes the scheduler without blocking.
func (w *Writer) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
