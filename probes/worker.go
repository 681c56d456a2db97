package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// lookupTimeout bounds one Runtime.ContainerOf call.
const lookupTimeout = 10 * time.Second

// worker probes one key. Everything below mu is the worker goroutine's own:
// its spec, the container it last saw, its threshold counters and its last
// published result. It shares nothing with other workers; the runner hands
// it new specs through next/kick, and it publishes results to the runner's
// results, which checks that it still owns the key.
type worker struct {
	r      *Runner
	key    Key
	owner  uint64
	log    klog.Logger
	cancel context.CancelFunc
	latest Spec // the last spec the runner handed over; guarded by the runner's mu

	mu   sync.Mutex
	next *Spec         // a spec from Set not yet applied
	kick chan struct{} // capacity 1: next is set

	spec        Spec
	t           timings
	containerID string // of the container last seen; "" before the first
	res         Result // last published result, valid when has
	has         bool
	verdict     State // last probe verdict, for the thresholds
	streak      int   // how many probes in a row gave verdict
	nextAt      time.Time
}

func newWorker(r *Runner, s Spec, owner uint64, seed *Result) *worker {
	w := &worker{
		r:      r,
		key:    s.Key,
		owner:  owner,
		log:    r.log.WithValues("pod", klog.KRef(s.PodNamespace, s.PodName), "podUID", s.PodUID, "container", s.Container, "probe", s.ProbeName),
		kick:   make(chan struct{}, 1),
		latest: s,
		spec:   s,
		t:      timingsOf(&s.Probe),
	}
	if seed != nil {
		w.res, w.has, w.containerID = *seed, true, seed.ContainerID
	}
	return w
}

// update hands the worker a new spec; the latest one wins.
func (w *worker) update(s Spec) {
	w.mu.Lock()
	w.next = &s
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run probes until ctx ends: first after jitter, then every period
// (counted from the start of the previous probe; a probe that overran its
// period is followed by the next at once). Each wake-up is moved to the
// runner's nearest tick (Runner.onTick); a probe that ran on a tick is due
// again one period later, on a tick too, so the worker stays on its tick.
func (w *worker) run(ctx context.Context, jitter time.Duration) {
	clk := w.r.clock
	w.nextAt = clk.Now().Add(jitter)
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for ctx.Err() == nil {
		now := clk.Now()
		due := w.r.onTick(w.nextAt)
		if !due.After(now) {
			w.doProbe(ctx, now)
			w.nextAt = now.Add(w.t.period)
			continue
		}
		// Only a positive wait goes through a timer: fake clocks fire even
		// a zero-length timer only when stepped.
		if wait := due.Sub(now); timer == nil {
			timer = clk.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-w.kick:
			now := clk.Now()
			if w.applyUpdate(now) {
				w.nextAt = now // the handler changed: probe it now
			} else if w.nextAt.Sub(now) > w.t.period {
				w.nextAt = now.Add(w.t.period) // the period shrank
			}
			if !timer.Stop() {
				// Drain a tick fired but not received (clocks whose timers
				// keep the pre-Go 1.23 channel semantics, fake ones).
				select {
				case <-timer.C():
				default:
				}
			}
		}
	}
}

// applyUpdate applies the pending spec, if any, and reports whether what
// the probe checks changed. Such a change resets the result to Unknown (as
// OpenKruise's daemon does); a change of timings only keeps the state and
// the threshold counters.
func (w *worker) applyUpdate(now time.Time) bool {
	w.mu.Lock()
	s := w.next
	w.next = nil
	w.mu.Unlock()
	if s == nil {
		return false
	}
	old := w.spec
	w.spec, w.t = *s, timingsOf(&s.Probe)
	if sameHandler(&old, s) {
		return false
	}
	w.log.V(2).Info("Probe handler changed")
	w.resetRun()
	if w.has {
		w.publish(StateUnknown, "", now)
	}
	return true
}

// sameHandler reports whether two specs probe the same thing: same handler
// and, for TCP and HTTP, the same resolved address.
func sameHandler(a, b *Spec) bool {
	return equality.Semantic.DeepEqual(withoutAddress(&a.Probe.ProbeHandler), withoutAddress(&b.Probe.ProbeHandler)) &&
		target(a) == target(b)
}

// withoutAddress is a copy of h without the host and port of a TCP or HTTP
// handler, which target compares once resolved (a port given by name or by
// the number it resolves to is the same port).
func withoutAddress(h *corev1.ProbeHandler) corev1.ProbeHandler {
	out := *h
	if h.TCPSocket != nil {
		out.TCPSocket = &corev1.TCPSocketAction{}
	}
	if h.HTTPGet != nil {
		g := *h.HTTPGet
		g.Host, g.Port = "", intstr.IntOrString{}
		out.HTTPGet = &g
	}
	return out
}

// target is where a TCP or HTTP probe connects, or why it cannot.
func target(s *Spec) string {
	h := &s.Probe.ProbeHandler
	var host string
	var port intstr.IntOrString
	switch {
	case h.TCPSocket != nil:
		host, port = h.TCPSocket.Host, h.TCPSocket.Port
	case h.HTTPGet != nil:
		host, port = h.HTTPGet.Host, h.HTTPGet.Port
	default:
		return ""
	}
	if host == "" {
		host = s.PodIP
	}
	n, err := resolvePort(port, s.ContainerPorts)
	if err != nil {
		return host + " " + err.Error()
	}
	return net.JoinHostPort(host, strconv.Itoa(n))
}

// doProbe looks at the container and probes it once.
func (w *worker) doProbe(ctx context.Context, now time.Time) {
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	c, err := w.r.rt.ContainerOf(lctx, w.key.PodUID, w.key.Container)
	cancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrContainerNotFound):
			w.log.V(4).Info("Probed container not found")
		default:
			w.log.Error(err, "Could not look up the probed container; keeping the probe's state")
		}
		return
	}
	if c.ID != w.containerID {
		if w.containerID != "" {
			w.log.V(2).Info("Probed container changed", "from", w.containerID, "to", c.ID)
		}
		w.containerID = c.ID
		w.resetRun()
		w.publish(StateUnknown, "", now)
	}
	if !c.Running {
		w.resetRun()
		w.publish(StateFailed, fmt.Sprintf("Container(%s) is Non-running", w.key.Container), now)
		return
	}
	if c.StartedAt.IsZero() {
		w.log.V(2).Info("Running container has no start time; not probing it yet")
		return
	}
	if now.Sub(c.StartedAt) < w.t.initialDelay {
		return
	}

	kind := kindOf(&w.spec.Probe.ProbeHandler)
	st, msg, err := w.r.prober.probe(ctx, &w.spec, w.t, c.ID)
	if ctx.Err() != nil {
		return // stopped: the result may be of a spec no longer wanted
	}
	w.r.metrics.probed(kind, st, err)
	if err != nil {
		w.log.Error(err, "Could not run the probe; keeping its state", "kind", kind)
		return
	}
	done := w.r.clock.Now()
	if st == w.verdict {
		w.streak++
	} else {
		w.verdict, w.streak = st, 1
	}
	threshold := w.t.success
	if st == StateFailed {
		threshold = w.t.failure
	}
	if w.streak < threshold {
		w.touch(done)
		return
	}
	w.publish(st, msg, done)
}

// resetRun forgets the threshold counters.
func (w *worker) resetRun() {
	w.verdict, w.streak = "", 0
}

// publish sets the result's state and message as of now.
func (w *worker) publish(st State, msg string, now time.Time) {
	r := Result{
		Key:                w.key,
		PodNamespace:       w.spec.PodNamespace,
		PodName:            w.spec.PodName,
		State:              st,
		Message:            msg,
		LastProbeTime:      now,
		LastTransitionTime: now,
		ContainerID:        w.containerID,
	}
	if w.has && w.res.State == st {
		r.LastTransitionTime = w.res.LastTransitionTime
	}
	prev, had := w.res.State, w.has
	w.res, w.has = r, true
	if w.r.results.put(w.owner, r) && (!had || prev != st) {
		w.log.V(2).Info("Probe state changed", "from", prev, "to", st, "message", msg)
	}
}

// touch records that the container was probed at now without changing the
// state (a verdict below its threshold).
func (w *worker) touch(now time.Time) {
	if !w.has {
		return
	}
	w.res.LastProbeTime = now
	w.r.results.put(w.owner, w.res)
}
