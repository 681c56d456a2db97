package probes

import (
	"cmp"
	"slices"
	"sync"
)

// results aggregates the workers' results under its own lock. Each key has
// at most one owner, the worker that may write it; a write from another
// (a worker already stopped, racing with its replacement) is dropped. A
// write that changes a key's state or message queues the key for the
// change stream; queued keys are coalesced, so a slow reader sees the latest
// result of each key, in the order the keys first changed.
type results struct {
	metrics *metrics

	mu      sync.Mutex
	entries map[Key]*entry
	queue   []Key
	queued  map[Key]bool
	wake    chan struct{} // capacity 1: something was queued
}

type entry struct {
	owner uint64 // 0: none (a restored result no worker has claimed)
	has   bool   // res is set
	res   Result
}

func newResults(m *metrics) *results {
	return &results{
		metrics: m,
		entries: map[Key]*entry{},
		queued:  map[Key]bool{},
		wake:    make(chan struct{}, 1),
	}
}

// claim makes owner the only writer of key; a result already held (restored)
// stays.
func (m *results) claim(key Key, owner uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	if e == nil {
		e = &entry{}
		m.entries[key] = e
	}
	e.owner = owner
}

// restore holds r for its key, unless the key has a result already. It is
// not queued as a change: it is what was reported before.
func (m *results) restore(r Result) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[r.Key]; e != nil && (e.has || e.owner != 0) {
		return false
	}
	m.entries[r.Key] = &entry{has: true, res: r}
	return true
}

// retain drops every key for which keep is false.
func (m *results) retain(keep func(Key) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.entries {
		if !keep(k) {
			delete(m.entries, k)
			delete(m.queued, k)
		}
	}
	m.queue = slices.DeleteFunc(m.queue, func(k Key) bool { return !m.queued[k] })
}

// put stores r if owner owns its key, and queues it if its state or message
// changed. It reports whether r was queued.
func (m *results) put(owner uint64, r Result) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[r.Key]
	if e == nil || e.owner != owner {
		return false
	}
	stateChanged := !e.has || e.res.State != r.State
	changed := stateChanged || e.res.Message != r.Message
	e.has, e.res = true, r
	if stateChanged {
		m.metrics.stateChange(r.State)
	}
	if !changed {
		return false
	}
	if !m.queued[r.Key] {
		m.queued[r.Key] = true
		m.queue = append(m.queue, r.Key)
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return true
}

// pop takes the result of the first queued key.
func (m *results) pop() (Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.queue) > 0 {
		k := m.queue[0]
		m.queue = m.queue[1:]
		if !m.queued[k] {
			continue
		}
		delete(m.queued, k)
		if e := m.entries[k]; e != nil && e.has {
			return e.res, true
		}
	}
	return Result{}, false
}

// unpop puts key back at the front of the queue, after pop took it but
// its result could not be sent yet: the next pop returns its latest
// result.
func (m *results) unpop(key Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[key]; !ok {
		return
	}
	m.queued[key] = true
	m.queue = slices.Insert(m.queue, 0, key)
}

// snapshot returns every key's result, sorted by key.
func (m *results) snapshot() []Result {
	m.mu.Lock()
	out := make([]Result, 0, len(m.entries))
	for _, e := range m.entries {
		if e.has {
			out = append(out, e.res)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Result) int { return compareKeys(a.Key, b.Key) })
	return out
}

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Container, b.Container), cmp.Compare(a.ProbeName, b.ProbeName))
}
