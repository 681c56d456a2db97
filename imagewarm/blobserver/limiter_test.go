package blobserver

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestLimiterLongRunRate runs greedy writers against the bucket on a
// simulated timeline (each writer sleeps exactly the delay it is told) and
// checks the bytes granted over a long run against the token-bucket bound
// burst + rate·T and the rate itself.
func TestLimiterLongRunRate(t *testing.T) {
	for _, tc := range []struct {
		name           string
		rate, burst    int64
		chunk, writers int
	}{
		{"one writer, chunk below burst", 1 << 20, 256 << 10, 32 << 10, 1},
		{"one writer, chunk equals burst", 10 << 20, 64 << 10, 64 << 10, 1},
		{"eight writers", 100 << 20, 1 << 20, 256 << 10, 8},
		{"slow link, odd sizes", 12345, 4000, 999, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimiter(tc.rate, tc.burst, clocktesting.NewFakeClock(t0))
			const horizon = 100 * time.Second
			// next[i] is when writer i may ask again.
			next := make([]time.Time, tc.writers)
			for i := range next {
				next[i] = t0
			}
			var granted int64
			for {
				w := earliest(next)
				now := next[w]
				if now.After(t0.Add(horizon)) {
					break
				}
				d := l.reserve(now, int64(tc.chunk), false)
				if now.Add(d).After(t0.Add(horizon)) {
					break // granted after the horizon
				}
				granted += int64(tc.chunk)
				require.LessOrEqual(t, float64(granted), float64(tc.burst)+float64(tc.rate)*now.Add(d).Sub(t0).Seconds()+1e-6*float64(granted),
					"more than burst + rate·T granted by %s", now.Add(d).Sub(t0))
				next[w] = now.Add(d)
			}
			got := float64(granted) / horizon.Seconds()
			require.InDelta(t, float64(tc.rate), got, float64(tc.rate)*0.01+float64(tc.burst+int64(tc.chunk*tc.writers))/horizon.Seconds(),
				"long-run rate %.0f B/s, want %d", got, tc.rate)
		})
	}
}

// earliest returns the index of the earliest of times: the simulated
// reader that asks next.
func earliest(times []time.Time) int {
	w := 0
	for i := range times {
		if times[i].Before(times[w]) {
			w = i
		}
	}
	return w
}

// TestLimiterAhead runs one WaitNAhead reader that wants a given rate next
// to four greedy WaitN readers on a simulated timeline: the ahead reader
// gets what it wants up to the whole rate, never waiting below it, and the
// others share what it leaves.
func TestLimiterAhead(t *testing.T) {
	const rate, burst, chunk = 8 << 20, 800 << 10, 32 << 10
	const horizon = 60 * time.Second
	for _, tc := range []struct {
		name string
		want float64 // the ahead reader's demand, a share of the rate
	}{
		{"ahead wants a quarter", 0.25},
		{"ahead wants half", 0.5},
		{"ahead wants more than the rate", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimiter(rate, burst, clocktesting.NewFakeClock(t0))
			// Reader 0 is ahead and asks every chunk/(want·rate); the
			// others ask again as soon as their wait ends.
			every := time.Duration(float64(chunk) / (tc.want * rate) * float64(time.Second))
			next := []time.Time{t0, t0, t0, t0, t0}
			granted := make([]int64, len(next))
			waitedAhead := false
			for {
				w := earliest(next)
				now := next[w]
				if now.After(t0.Add(horizon)) {
					break
				}
				d := l.reserve(now, chunk, w == 0)
				if now.Add(d).After(t0.Add(horizon)) {
					next[w] = now.Add(d)
					continue
				}
				granted[w] += chunk
				if w == 0 {
					waitedAhead = waitedAhead || d > 0
					next[w] = now.Add(max(d, every))
				} else {
					next[w] = now.Add(d)
				}
			}
			var total, others int64
			for i, g := range granted {
				total += g
				if i > 0 {
					others += g
				}
			}
			secs := horizon.Seconds()
			if tc.want <= 1 {
				require.InDelta(t, tc.want*rate, float64(granted[0])/secs, rate*0.02, "the ahead reader's rate")
				require.InDelta(t, (1-tc.want)*rate, float64(others)/secs, rate*0.02, "what the others got")
			} else {
				// The others are slowed, not starved: one chunk each per
				// burst's worth of time.
				least := rate * (1 - 4.0*chunk/burst)
				require.GreaterOrEqual(t, float64(granted[0])/secs, least*0.98, "the ahead reader's rate")
				require.Positive(t, others, "the others starved")
				require.InDelta(t, rate, float64(total)/secs, rate*0.02, "the whole rate is used")
			}
			require.LessOrEqual(t, float64(total), 2*burst+rate*secs, "at most a burst more than the bucket's bound")
			require.Equal(t, tc.want > 1, waitedAhead, "the ahead reader waits only when it alone wants more than the rate")
		})
	}
}

func TestLimiterBurstAfterIdle(t *testing.T) {
	l := NewLimiter(1000, 5000, clocktesting.NewFakeClock(t0))
	require.Zero(t, l.reserve(t0, 5000, false), "a full bucket to start")
	require.Equal(t, time.Second, l.reserve(t0, 1000, false))
	// An hour idle refills only up to the burst.
	later := t0.Add(time.Hour)
	require.Zero(t, l.reserve(later, 5000, false))
	require.Equal(t, 500*time.Millisecond, l.reserve(later, 500, false))
	require.Error(t, l.WaitN(t.Context(), 5001), "more than the burst at once")
}

func TestLimiterWaitNCancel(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewLimiter(1000, 1000, clk)
	require.NoError(t, l.WaitN(t.Context(), 1000))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.WaitN(ctx, 1000) }()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	// The cancelled waiter's tokens came back: after one second the bucket
	// holds a full burst again instead of being in debt.
	require.Zero(t, l.reserve(t0.Add(time.Second), 1000, false))
}

// TestEgressRateLimit serves three peers at once through a server paced at
// 1 MiB/s on a fake clock, advanced only while a response waits for
// tokens, and checks the long-run rate of the whole node.
func TestEgressRateLimit(t *testing.T) {
	const rate, burst = 1 << 20, 64 << 10
	const step = 10 * time.Millisecond
	clk := clocktesting.NewFakeClock(t0)
	h := newHarness(t, Options{EgressBytesPerSecond: rate, EgressBurst: burst, Clock: clk})
	data, d := randomBlob(20, 2<<20)
	h.put(t, data, d)

	const peers = 3
	var wg sync.WaitGroup
	for range peers {
		wg.Go(func() {
			resp, err := http.Get(blobURL(h.peer.URL, d))
			if err != nil {
				t.Error(err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != string(data) {
				t.Errorf("peer got %d bytes, err %v", len(got), err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			if clk.HasWaiters() {
				clk.Step(step)
			} else {
				runtime.Gosched()
			}
		}
	}

	total := float64(peers * len(data))
	elapsed := clk.Since(t0)
	lower := time.Duration((total - burst) / rate * float64(time.Second))
	upper := time.Duration(total/rate*float64(time.Second)) + 5*step
	require.GreaterOrEqual(t, elapsed, lower, "a token bucket never grants more than burst + rate·T")
	require.LessOrEqual(t, elapsed, upper, "the bucket was left idle while peers waited")
	t.Logf("served %.0f bytes in %s of fake time: %.3f MiB/s (limit 1)", total, elapsed, total/elapsed.Seconds()/(1<<20))
}
