package blobserver

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Limiter is a token bucket of bytes: on average at most its rate, with
// bursts of at most its burst. Every response it paces draws from the same
// bucket, so it bounds the node's total egress (or ingress). Waiters are
// served in the order they asked (each takes its tokens at once, going into
// debt, and sleeps until the debt is repaid), except that WaitNAhead's
// callers go before WaitN's. It is safe for concurrent use.
type Limiter struct {
	clk   clock.Clock
	rate  float64 // bytes per second
	burst int64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewLimiter returns a full bucket of burst bytes refilled at
// bytesPerSecond. burst <= 0 means a tenth of a second at the rate, at
// least 64 KiB. A nil clk means the real clock.
func NewLimiter(bytesPerSecond, burst int64, clk clock.Clock) *Limiter {
	if bytesPerSecond <= 0 {
		panic("blobserver: limiter rate must be positive")
	}
	if burst <= 0 {
		burst = max(64<<10, bytesPerSecond/10)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Limiter{clk: clk, rate: float64(bytesPerSecond), burst: burst, tokens: float64(burst), last: clk.Now()}
}

// Burst returns the largest n WaitN accepts.
func (l *Limiter) Burst() int64 { return l.burst }

// Rate returns the refill rate in bytes per second.
func (l *Limiter) Rate() int64 { return int64(l.rate) }

// reserve takes n tokens at now and returns how long the caller must wait
// before using them: until the debt is repaid, or, ahead of the others,
// until it is down to one burst.
func (l *Limiter) reserve(now time.Time, n int64, ahead bool) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el := now.Sub(l.last); el > 0 {
		l.tokens = min(float64(l.burst), l.tokens+el.Seconds()*l.rate)
		l.last = now
	}
	l.tokens -= float64(n)
	allowed := 0.0
	if ahead {
		allowed = float64(l.burst)
	}
	if l.tokens+allowed >= 0 {
		return 0
	}
	// Round up, so that the debt is always repaid when the wait ends.
	return time.Duration(math.Ceil(-(l.tokens + allowed) / l.rate * float64(time.Second)))
}

// refund gives back tokens reserved by a waiter that gave up.
func (l *Limiter) refund(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens = min(float64(l.burst), l.tokens+float64(n))
}

// WaitN blocks until n bytes may be sent or ctx ends. n must not exceed
// Burst.
func (l *Limiter) WaitN(ctx context.Context, n int64) error {
	return l.wait(ctx, n, false)
}

// WaitNAhead is WaitN for traffic that goes before every WaitN caller: it
// runs up to a burst into debt without waiting, so it waits only when
// WaitNAhead's callers alone use the whole rate, and WaitN's callers get
// what it leaves. Even then WaitN's callers are slowed, not starved: each
// gets its n once per burst's worth of time. The swarm reads upstream this
// way: the registry's one copy is what every other node waits for, and a
// lease holder's own peer downloads sharing its ingress must not slow it.
func (l *Limiter) WaitNAhead(ctx context.Context, n int64) error {
	return l.wait(ctx, n, true)
}

// wait is WaitN or, if ahead, WaitNAhead.
func (l *Limiter) wait(ctx context.Context, n int64, ahead bool) error {
	if n > l.burst {
		return fmt.Errorf("rate limiter: %d bytes asked at once, burst is %d", n, l.burst)
	}
	d := l.reserve(l.clk.Now(), n, ahead)
	if d <= 0 {
		return nil
	}
	t := l.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		l.refund(n)
		return fmt.Errorf("rate limiter: %w", context.Cause(ctx))
	}
}

// pacedWriter writes through a Limiter in chunks of at most its burst.
type pacedWriter struct {
	ctx context.Context
	l   *Limiter
	w   io.Writer
}

// Write implements io.Writer.
func (p *pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		k := min(int64(len(b)), p.l.burst)
		if err := p.l.WaitN(p.ctx, k); err != nil {
			return written, err
		}
		n, err := p.w.Write(b[:k])
		written += n
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}
