package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Events fans the runtime's container events (CRI GetContainerEvents:
// created, started, stopped, deleted) out to subscribers by pod UID, so
// that a component waiting for a pod's container to change wakes when it
// does instead of at its next poll. Events are hints, never facts: a
// subscriber still reads the pod's containers (PodContainers) after a
// wake-up, and keeps a slow poll for runtimes without the stream and for
// events lost while the stream reconnects. The zero value is ready to use;
// Run feeds it.
type Events struct {
	mu   sync.Mutex
	subs map[string]map[*subscription]struct{}
	// connected is true while a stream is open.
	connected bool
	// epoch counts the stream's openings and closings: events may be lost
	// across one, so a Token taken before it is stale.
	epoch uint64
	// changes counts the events seen per pod UID since the epoch began.
	changes map[string]uint64
}

// maxTrackedPods bounds the pods whose changes Events counts; past it the
// counts start over in a new epoch (every Token goes stale once).
const maxTrackedPods = 4096

// Token returns a value that changes whenever a container of the pod with
// UID podUID may have changed, and whether the event stream is open (a
// token is only meaningful while it is). A component that caches what it
// read of a pod's containers keeps the token it took before reading and
// trusts the cache while Token still returns it.
func (e *Events) Token(podUID string) (token [2]uint64, connected bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return [2]uint64{e.epoch, e.changes[podUID]}, e.connected
}

// subscription is one subscriber's wake-up channel.
type subscription struct{ wake chan struct{} }

// eventsRetry bounds the wait before opening the stream again;
// eventsUnimplementedRetry is the wait when the runtime has no stream
// (containerd before 1.7): it is asked again in case it was upgraded.
const (
	eventsRetryMin           = 500 * time.Millisecond
	eventsRetryMax           = 30 * time.Second
	eventsUnimplementedRetry = 10 * time.Minute
)

// Subscribe returns a channel that receives a value (coalesced: at most
// one pending) whenever one of the containers of the pod with UID podUID
// changes state, and the function that ends the subscription.
func (e *Events) Subscribe(podUID string) (<-chan struct{}, func()) {
	s := &subscription{wake: make(chan struct{}, 1)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.subs == nil {
		e.subs = map[string]map[*subscription]struct{}{}
	}
	if e.subs[podUID] == nil {
		e.subs[podUID] = map[*subscription]struct{}{}
	}
	e.subs[podUID][s] = struct{}{}
	return s.wake, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.subs[podUID], s)
		if len(e.subs[podUID]) == 0 {
			delete(e.subs, podUID)
		}
	}
}

// Connected reports whether the event stream is open now.
func (e *Events) Connected() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.connected
}

// notify wakes the subscribers of the pod with UID podUID.
func (e *Events) notify(podUID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.changes == nil || len(e.changes) >= maxTrackedPods {
		e.changes = map[string]uint64{}
		e.epoch++
	}
	e.changes[podUID]++
	for s := range e.subs[podUID] {
		select {
		case s.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// Handle takes in one event from the runtime. Run calls it; tests may
// too.
func (e *Events) Handle(ev *runtimeapi.ContainerEventResponse) {
	uid := ev.GetPodSandboxStatus().GetMetadata().GetUid()
	if uid == "" {
		for _, c := range ev.GetContainersStatuses() {
			if uid = c.GetLabels()[LabelPodUID]; uid != "" {
				break
			}
		}
	}
	if uid != "" {
		e.notify(uid)
	}
}

// Run reads the container event stream of the runtime that runtime
// returns until ctx ends, opening it again (with a growing backoff) when
// it fails or the runtime is not there yet. It returns nil when ctx ends.
func (e *Events) Run(ctx context.Context, runtime func() (*Runtime, error)) error {
	log := klog.FromContext(ctx).WithName("cri-events")
	backoff := eventsRetryMin
	unimplemented := false
	for {
		start := time.Now()
		err := e.stream(ctx, runtime)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > eventsRetryMax {
			backoff = eventsRetryMin // it ran for a while: a fresh failure
		}
		wait := backoff
		if status.Code(err) == codes.Unimplemented {
			if !unimplemented {
				log.Info("The container runtime has no event stream; waiting components poll it instead", "askAgainEvery", eventsUnimplementedRetry)
			}
			unimplemented, wait = true, eventsUnimplementedRetry
		} else {
			unimplemented = false
			log.V(2).Info("Container event stream ended; opening it again", "after", backoff, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, eventsRetryMax)
	}
}

// stream reads one stream until it fails or ctx ends.
func (e *Events) stream(ctx context.Context, runtime func() (*Runtime, error)) error {
	rt, err := runtime()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 64)
	done := make(chan error, 1)
	go func() {
		done <- rt.rs.GetContainerEvents(sctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			e.mu.Lock()
			e.connected = true
			e.epoch++
			e.mu.Unlock()
		})
	}()
	defer func() {
		e.mu.Lock()
		e.connected = false
		e.epoch++
		e.mu.Unlock()
	}()
	for {
		select {
		case ev := <-ch:
			e.Handle(ev)
		case err := <-done:
			if err == nil {
				// A runtime (or fake) without the stream returns at once.
				err = errors.New("the runtime closed the stream")
			}
			return fmt.Errorf("container events from %s: %w", rt.Endpoint().Address, err)
		}
	}
}
