package statuswriter_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/coordinator/statuswriter"
)

var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// write is one call of a write func.
type write struct {
	key string
	val int
	at  time.Duration // fake time since start
	err error
}

// recorder hands out write funcs that record their calls.
type recorder struct {
	clk *clocktesting.FakeClock
	mu  sync.Mutex
	log []write
}

// fn is a write func of key writing val that returns what errs returns
// (nil errs: always succeeds).
func (r *recorder) fn(key string, val int, errs func() error) func(context.Context) error {
	return func(ctx context.Context) error {
		var err error
		if errs != nil {
			err = errs()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.log = append(r.log, write{key: key, val: val, at: r.clk.Since(start), err: err})
		return err
	}
}

func (r *recorder) writes(key string) []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []write
	for _, w := range r.log {
		if key == "" || w.key == key {
			out = append(out, w)
		}
	}
	return out
}

// failTimes returns an errs func that fails n times, then succeeds.
func failTimes(n int) func() error {
	var mu sync.Mutex
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			n--
			return errors.New("conflict")
		}
		return nil
	}
}

type harness struct {
	w   *statuswriter.Writer
	clk *clocktesting.FakeClock
	rec *recorder
	reg *prometheus.Registry
}

// run makes a Writer with a fake clock and runs it until the test ends.
func run(t *testing.T, opts statuswriter.Options) *harness {
	t.Helper()
	h := newHarness(t, opts)
	h.start(t)
	return h
}

func newHarness(t *testing.T, opts statuswriter.Options) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(start)
	reg := prometheus.NewRegistry()
	opts.Clock, opts.Registerer = clk, reg
	w, err := statuswriter.New(opts)
	require.NoError(t, err)
	return &harness{w: w, clk: clk, rec: &recorder{clk: clk}, reg: reg}
}

func (h *harness) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// flush steps the fake clock by step whenever the writer waits on a timer,
// until nothing is pending. It fails the test after 10s of real time.
func (h *harness) flush(t *testing.T, step time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.w.Flush(ctx) }()
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			return
		case <-tick.C:
			if h.clk.HasWaiters() {
				h.clk.Step(step)
			}
		}
	}
}

// eventually waits (real time, bounded) until cond holds.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, msg)
}

func (h *harness) metric(t *testing.T, result string) float64 {
	t.Helper()
	c, err := h.reg.Gather()
	require.NoError(t, err)
	for _, mf := range c {
		if mf.GetName() != statuswriter.MetricWrites {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func (h *harness) pending(t *testing.T) float64 {
	t.Helper()
	c, err := h.reg.Gather()
	require.NoError(t, err)
	for _, mf := range c {
		if mf.GetName() == statuswriter.MetricPending {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.FailNow(t, "no pending gauge")
	return 0
}

func TestCoalescesOneKey(t *testing.T) {
	h := run(t, statuswriter.Options{})
	for i := range 100 {
		h.w.Enqueue("ns/a", h.rec.fn("ns/a", i, nil))
		h.clk.Step(10 * time.Millisecond) // 100 enqueues within 1s
	}
	h.flush(t, 100*time.Millisecond)

	got := h.rec.writes("")
	require.GreaterOrEqual(t, len(got), 1)
	require.LessOrEqual(t, len(got), 2, "writes: %+v", got)
	require.Equal(t, 99, got[len(got)-1].val, "the last write carries the last func")
	if len(got) == 2 {
		// The first write started at 0 or later (a func records when it
		// runs, which may be after the writer started it).
		require.GreaterOrEqual(t, got[1].at, time.Second, "a key is written at most once per MinInterval")
	}
	require.Equal(t, float64(len(got)), h.metric(t, "ok"))
	require.Zero(t, h.metric(t, "error"))
	require.Zero(t, h.pending(t))
}

func TestMinIntervalPerKey(t *testing.T) {
	tests := []struct {
		name        string
		minInterval time.Duration
		want        time.Duration
	}{
		{name: "default", want: time.Second},
		{name: "configured", minInterval: 5 * time.Second, want: 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := run(t, statuswriter.Options{MinInterval: tc.minInterval})
			h.w.Enqueue("k", h.rec.fn("k", 1, nil))
			h.flush(t, 100*time.Millisecond)
			h.w.Enqueue("k", h.rec.fn("k", 2, nil))
			h.flush(t, 100*time.Millisecond)

			got := h.rec.writes("k")
			require.Len(t, got, 2)
			require.Equal(t, time.Duration(0), got[0].at)
			require.GreaterOrEqual(t, got[1].at, tc.want)
			require.Less(t, got[1].at, tc.want+200*time.Millisecond)
		})
	}
}

// TestFinalWriteIsNotPaced: a final write right after a progress write of
// the same key goes at once, not a MinInterval later; it still waits for a
// write of the key in flight, and after a failure it backs off.
func TestFinalWriteIsNotPaced(t *testing.T) {
	t.Run("after a progress write", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		h.w.Enqueue("k", h.rec.fn("k", 1, nil))
		h.flush(t, 100*time.Millisecond)
		h.w.EnqueueFinal("k", h.rec.fn("k", 2, nil))
		eventually(t, func() bool { return len(h.rec.writes("k")) == 2 }, "the final write goes without stepping the clock")
		got := h.rec.writes("k")
		require.Equal(t, time.Duration(0), got[1].at)
		require.Equal(t, 2, got[1].val)

		// A progress write after it is paced again.
		h.w.Enqueue("k", h.rec.fn("k", 3, nil))
		h.flush(t, 100*time.Millisecond)
		got = h.rec.writes("k")
		require.Len(t, got, 3)
		require.GreaterOrEqual(t, got[2].at, time.Second)
	})
	t.Run("replacing a waiting progress write", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		h.w.Enqueue("k", h.rec.fn("k", 1, nil))
		h.flush(t, 100*time.Millisecond)
		h.w.Enqueue("k", h.rec.fn("k", 2, nil)) // held back by MinInterval
		h.w.EnqueueFinal("k", h.rec.fn("k", 3, nil))
		eventually(t, func() bool { return len(h.rec.writes("k")) == 2 }, "the final write replaces the waiting one and goes at once")
		got := h.rec.writes("k")
		require.Equal(t, 3, got[1].val)
		require.Equal(t, time.Duration(0), got[1].at)
		// The counter goes up after the write returns.
		eventually(t, func() bool { return h.metric(t, "ok") == 2 }, "two writes counted")
		require.Len(t, h.rec.writes("k"), 2, "no more writes than before")
	})
	t.Run("waits for the write in flight", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		release := make(chan struct{})
		var inFlight sync.WaitGroup
		inFlight.Add(1)
		h.w.Enqueue("k", func(ctx context.Context) error {
			inFlight.Done()
			<-release
			return h.rec.fn("k", 1, nil)(ctx)
		})
		inFlight.Wait()
		h.w.EnqueueFinal("k", h.rec.fn("k", 2, nil))
		require.Empty(t, h.rec.writes("k"), "nothing runs beside the write in flight")
		close(release)
		eventually(t, func() bool { return len(h.rec.writes("k")) == 2 }, "the final write follows the one in flight")
		require.Equal(t, []int{1, 2}, []int{h.rec.writes("k")[0].val, h.rec.writes("k")[1].val})
	})
	t.Run("backs off after a failure", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		h.w.EnqueueFinal("k", h.rec.fn("k", 1, failTimes(1)))
		h.flush(t, 100*time.Millisecond)
		got := h.rec.writes("k")
		require.Len(t, got, 2)
		require.Error(t, got[0].err)
		require.NoError(t, got[1].err)
		require.GreaterOrEqual(t, got[1].at, time.Second, "the retry of a final write backs off")
	})
}

func TestKeysAreIndependent(t *testing.T) {
	h := run(t, statuswriter.Options{})
	h.w.Enqueue("a", h.rec.fn("a", 1, nil))
	h.w.Enqueue("b", h.rec.fn("b", 1, nil))
	h.flush(t, 100*time.Millisecond)
	require.Len(t, h.rec.writes(""), 2)
	for _, w := range h.rec.writes("") {
		require.Equal(t, time.Duration(0), w.at, "%s waited for the other key", w.key)
	}

	// a was just written and must wait; c, a new key, must not wait for a.
	h.w.Enqueue("a", h.rec.fn("a", 2, nil))
	h.w.Enqueue("c", h.rec.fn("c", 1, nil))
	eventually(t, func() bool { return len(h.rec.writes("c")) == 1 }, "c is written without stepping the clock")
	require.Len(t, h.rec.writes("a"), 1, "a is written again before MinInterval")
	require.Equal(t, time.Duration(0), h.rec.writes("c")[0].at)

	h.flush(t, 100*time.Millisecond)
	a := h.rec.writes("a")
	require.Len(t, a, 2)
	require.Equal(t, 2, a[1].val)
	require.GreaterOrEqual(t, a[1].at, time.Second)
}

func TestOneWriteOfAKeyAtATime(t *testing.T) {
	h := run(t, statuswriter.Options{})
	var mu sync.Mutex
	running, most := 0, 0
	release := make(chan struct{})
	fn := func(val int, block bool) func(context.Context) error {
		inner := h.rec.fn("k", val, nil)
		return func(ctx context.Context) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				mu.Unlock()
			}()
			if block {
				<-release
			}
			return inner(ctx)
		}
	}
	h.w.Enqueue("k", fn(1, true))
	eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running == 1
	}, "first write running")
	h.w.Enqueue("k", fn(2, false))
	h.clk.Step(2 * time.Second) // the second write is due but must wait
	close(release)
	h.flush(t, 100*time.Millisecond)

	got := h.rec.writes("k")
	require.Len(t, got, 2)
	require.Equal(t, 2, got[1].val)
	require.Equal(t, 1, most, "two writes of one key ran at once")
}

func TestRetries(t *testing.T) {
	t.Run("failures back off and retry until success", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		h.w.Enqueue("k", h.rec.fn("k", 1, failTimes(3)))
		h.flush(t, 50*time.Millisecond)

		got := h.rec.writes("k")
		require.Len(t, got, 4)
		for i, w := range got[:3] {
			require.Error(t, w.err, "attempt %d", i)
		}
		require.NoError(t, got[3].err)
		// MinInterval (1s) doubled after each failure.
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			gap := got[i+1].at - got[i].at
			require.GreaterOrEqual(t, gap, want, "gap before attempt %d", i+1)
			require.Less(t, gap, want+200*time.Millisecond, "gap before attempt %d", i+1)
		}
		require.Equal(t, 3.0, h.metric(t, "error"))
		require.Equal(t, 1.0, h.metric(t, "ok"))
		require.Zero(t, h.pending(t))
	})

	t.Run("backoff is capped", func(t *testing.T) {
		h := run(t, statuswriter.Options{MaxBackoff: 3 * time.Second})
		h.w.Enqueue("k", h.rec.fn("k", 1, failTimes(4)))
		h.flush(t, 50*time.Millisecond)
		got := h.rec.writes("k")
		require.Len(t, got, 5)
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
			gap := got[i+1].at - got[i].at
			require.GreaterOrEqual(t, gap, want, "gap before attempt %d", i+1)
			require.Less(t, gap, want+200*time.Millisecond, "gap before attempt %d", i+1)
		}
	})

	t.Run("a newer func replaces a failed one", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		h.w.Enqueue("k", h.rec.fn("k", 1, func() error { return errors.New("always") }))
		eventually(t, func() bool { return len(h.rec.writes("k")) == 1 }, "first attempt")
		h.w.Enqueue("k", h.rec.fn("k", 2, nil))
		h.flush(t, 50*time.Millisecond)

		got := h.rec.writes("k")
		require.Len(t, got, 2, "the failed func is not retried once replaced: %+v", got)
		require.Equal(t, 2, got[1].val)
		require.NoError(t, got[1].err)
		require.GreaterOrEqual(t, got[1].at, time.Second)
	})

	t.Run("a permanent error is not retried", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		gone := errors.New("not found")
		h.w.Enqueue("k", h.rec.fn("k", 1, func() error { return statuswriter.Permanent(gone) }))
		h.flush(t, 50*time.Millisecond)
		got := h.rec.writes("k")
		require.Len(t, got, 1)
		require.ErrorIs(t, got[0].err, gone)
		require.Equal(t, 1.0, h.metric(t, "error"))
		require.NoError(t, statuswriter.Permanent(nil))
	})

	t.Run("forget drops the retry", func(t *testing.T) {
		h := run(t, statuswriter.Options{})
		h.w.Enqueue("k", h.rec.fn("k", 1, func() error { return errors.New("always") }))
		eventually(t, func() bool { return len(h.rec.writes("k")) == 1 }, "first attempt")
		h.w.Forget("k")
		h.w.Forget("unknown")
		h.flush(t, 50*time.Millisecond)
		require.Len(t, h.rec.writes("k"), 1)
	})
}

func TestGlobalRateLimit(t *testing.T) {
	tests := []struct {
		name  string
		qps   float64
		burst int
		keys  int
	}{
		{name: "configured", qps: 10, burst: 2, keys: 20},
		{name: "defaults", keys: 100}, // 20 QPS, burst 40
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, statuswriter.Options{QPS: tc.qps, Burst: tc.burst})
			qps, burst := tc.qps, tc.burst
			if qps == 0 {
				qps, burst = statuswriter.DefaultQPS, statuswriter.DefaultBurst
			}
			for i := range tc.keys {
				key := string(rune('a'+i%26)) + string(rune('a'+i/26))
				h.w.Enqueue(key, h.rec.fn(key, i, nil))
			}
			require.Equal(t, float64(tc.keys), h.pending(t), "pending before Run")
			h.start(t)
			h.flush(t, 10*time.Millisecond)

			got := h.rec.writes("")
			require.Len(t, got, tc.keys)
			sort.Slice(got, func(i, j int) bool { return got[i].at < got[j].at })
			for i, w := range got {
				// At most burst + qps*t writes by time t.
				earliest := time.Duration(float64(i+1-burst) / qps * float64(time.Second))
				require.GreaterOrEqual(t, w.at, earliest, "write %d", i)
			}
			last := time.Duration(float64(tc.keys-burst) / qps * float64(time.Second))
			require.Less(t, got[len(got)-1].at, last+500*time.Millisecond, "the limit does not slow writes further")
		})
	}
}

func TestFlushAndRun(t *testing.T) {
	t.Run("flush without pending writes returns at once", func(t *testing.T) {
		h := newHarness(t, statuswriter.Options{})
		require.NoError(t, h.w.Flush(t.Context()))
	})

	t.Run("flush ends with its context", func(t *testing.T) {
		h := newHarness(t, statuswriter.Options{})
		h.w.Enqueue("k", h.rec.fn("k", 1, nil))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := h.w.Flush(ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorContains(t, err, "1 status writes still pending")
	})

	t.Run("run twice is an error", func(t *testing.T) {
		h := newHarness(t, statuswriter.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- h.w.Run(ctx) }()
		}
		require.ErrorContains(t, <-errs, "Run called twice")
		cancel()
		require.NoError(t, <-errs)
	})

	t.Run("run ends with its context and cancels writes in flight", func(t *testing.T) {
		h := newHarness(t, statuswriter.Options{})
		started := make(chan struct{})
		var sawCancel bool
		h.w.Enqueue("k", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			sawCancel = true
			return ctx.Err()
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.w.Run(ctx) }()
		<-started
		cancel()
		require.NoError(t, <-done)
		require.True(t, sawCancel)
		// Failed because Run ended: not retried, not pending.
		require.NoError(t, h.w.Flush(t.Context()))
		require.Equal(t, 1.0, h.metric(t, "error"))
	})

	t.Run("nil func is ignored", func(t *testing.T) {
		h := newHarness(t, statuswriter.Options{})
		h.w.Enqueue("k", nil)
		require.NoError(t, h.w.Flush(t.Context()))
	})
}

func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	w1, err := statuswriter.New(statuswriter.Options{Registerer: reg})
	require.NoError(t, err)
	w2, err := statuswriter.New(statuswriter.Options{Registerer: reg})
	require.NoError(t, err, "a second Writer shares the registered metrics")
	require.NotNil(t, w1)
	require.NotNil(t, w2)

	_, err = statuswriter.New(statuswriter.Options{})
	require.NoError(t, err, "no registerer")

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP shoal_coordinator_status_writes_pending Objects whose status write is waiting or in flight.
# TYPE shoal_coordinator_status_writes_pending gauge
shoal_coordinator_status_writes_pending 0
`), statuswriter.MetricPending))

	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: statuswriter.MetricWrites, Help: "x"}))
	_, err = statuswriter.New(statuswriter.Options{Registerer: clash})
	require.ErrorContains(t, err, "register status writer metrics")
}
