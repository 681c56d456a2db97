// Package expectations remembers the pods a workload controller created,
// deleted or updated in place until its informer shows them, so that a
// reconcile running on a stale cache neither creates, deletes nor updates
// a pod twice. A
// controller skips scaling and updating a workload while its
// expectations are unsatisfied; an expectation the informer never meets
// (a create the apiserver refused after all, an event lost) expires after
// a timeout so the workload is not stuck.
package expectations

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultTimeout is how long an unmet expectation holds a workload back.
const DefaultTimeout = 5 * time.Minute

// Action is what the controller did to a pod.
type Action string

const (
	// Create is a pod the controller created.
	Create Action = "create"
	// Delete is a pod the controller deleted.
	Delete Action = "delete"
	// Update is a pod the controller moved to another revision in place.
	Update Action = "update"
)

// Expectations holds the pending expectations of every workload of one
// controller, by the workload's key (namespace/name). It is safe for
// concurrent use; the zero value is not: use New.
type Expectations struct {
	clock   clock.PassiveClock
	timeout time.Duration

	mu      sync.Mutex
	pending map[string]map[expectation]time.Time // workload -> expectation -> since
}

type expectation struct {
	action Action
	pod    string
}

// New returns empty Expectations that expire after timeout (DefaultTimeout
// if 0), timed by clk (the real clock if nil).
func New(clk clock.PassiveClock, timeout time.Duration) *Expectations {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Expectations{clock: clk, timeout: timeout, pending: map[string]map[expectation]time.Time{}}
}

// Expect records that the controller did action to pod for workload key;
// call it before the API call, so that an informer event racing the
// answer finds it.
func (e *Expectations) Expect(key string, action Action, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[key] == nil {
		e.pending[key] = map[expectation]time.Time{}
	}
	e.pending[key][expectation{action, pod}] = e.clock.Now()
}

// Observe records that the informer showed action done to pod (a create
// as an added pod, a delete as a deleted or deleting pod, an update as a
// pod whose revision label changed). Observing what was not expected is a
// no-op. Call it also when the API call failed.
func (e *Expectations) Observe(key string, action Action, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending[key], expectation{action, pod})
	if len(e.pending[key]) == 0 {
		delete(e.pending, key)
	}
}

// Satisfied reports whether the workload may scale: nothing it expects is
// pending, except what has waited longer than the timeout (dropped now).
// It returns what still holds it back, sorted, for logs and events.
//
// Call it before reading the workload's pods from the informer, never
// after: a pod the informer shows in between would be observed, so the
// answer is yes, and yet missing from the pods read, so the sync would
// create or delete again what is already done.
func (e *Expectations) Satisfied(key string) (bool, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var waiting []string
	for x, since := range e.pending[key] {
		if now.Sub(since) >= e.timeout {
			delete(e.pending[key], x)
			continue
		}
		waiting = append(waiting, string(x.action)+" "+x.pod)
	}
	if len(e.pending[key]) == 0 {
		delete(e.pending, key)
	}
	sort.Strings(waiting)
	return len(waiting) == 0, waiting
}

// Forget drops every expectation of a workload (it was deleted).
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, key)
}

// NextExpiry is how long until the oldest pending expectation of key
// times out (0 when none is pending): a workload waiting on the informer
// looks again then, even if the awaited event never comes.
func (e *Expectations) NextExpiry(key string) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var next time.Duration
	for _, since := range e.pending[key] {
		if left := max(since.Add(e.timeout).Sub(now), 0) + 100*time.Millisecond; next == 0 || left < next {
			next = left
		}
	}
	return next
}
