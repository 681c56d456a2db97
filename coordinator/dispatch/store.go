// Package dispatch turns per-node work into streams: a Store holds every
// node's work set and the agents' latest reports, and a Server serves the
// node-work gRPC stream that keeps each connected agent converged on its
// node's set.
package dispatch

import (
	"maps"
	"slices"
	"sync"

	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// ReportFunc receives an agent's report for a work item of one kind. item is
// the item as the store holds it now (nil when it has been removed since);
// it is called without the store's lock held and must not block for long.
type ReportFunc func(node string, item *nodeworkv1.WorkItem, report *nodeworkv1.WorkReport)

// Store holds the work set of every node. Controllers Put and Delete items;
// sessions watch their node's set; reports flow back to the handler
// registered for the item's kind. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	nodes    map[string]*nodeWork
	handlers map[string]ReportFunc
}

type nodeWork struct {
	items   map[string]*nodeworkv1.WorkItem
	reports map[string]*nodeworkv1.WorkReport
	// watchers are signalled (without blocking) on every change.
	watchers map[chan struct{}]struct{}
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{nodes: map[string]*nodeWork{}, handlers: map[string]ReportFunc{}}
}

// HandleReports registers the report handler for one work kind. Register
// before the server starts.
func (s *Store) HandleReports(kind string, fn ReportFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[kind] = fn
}

func (s *Store) node(name string) *nodeWork {
	n := s.nodes[name]
	if n == nil {
		n = &nodeWork{items: map[string]*nodeworkv1.WorkItem{}, reports: map[string]*nodeworkv1.WorkReport{}, watchers: map[chan struct{}]struct{}{}}
		s.nodes[name] = n
	}
	return n
}

// Put sets one work item of a node. The store owns item afterwards. A zero
// Generation means "derive it": 1 for a new item, unchanged when the spec is
// the same, one more when the spec changed. Put reports whether anything
// changed.
func (s *Store) Put(node string, item *nodeworkv1.WorkItem) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node(node)
	old := n.items[item.GetId()]
	same := old != nil && nodework.SameSpec(old, item)
	if item.Generation == 0 {
		switch {
		case old == nil:
			item.Generation = 1
		case same:
			item.Generation = old.Generation
		default:
			item.Generation = old.Generation + 1
		}
	}
	if same && old.Generation == item.Generation {
		return false
	}
	n.items[item.GetId()] = item
	n.signal()
	return true
}

// Delete removes one work item (and its report) from a node.
func (s *Store) Delete(node, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[node]
	if n == nil {
		return
	}
	if _, ok := n.items[id]; !ok {
		return
	}
	delete(n.items, id)
	delete(n.reports, id)
	n.signal()
	s.gc(node, n)
}

// gc forgets a node with nothing left and nobody watching.
func (s *Store) gc(name string, n *nodeWork) {
	if len(n.items) == 0 && len(n.reports) == 0 && len(n.watchers) == 0 {
		delete(s.nodes, name)
	}
}

// Item returns a node's work item and its latest report (either may be nil).
func (s *Store) Item(node, id string) (*nodeworkv1.WorkItem, *nodeworkv1.WorkReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[node]
	if n == nil {
		return nil, nil
	}
	return n.items[id], n.reports[id]
}

// Items returns a node's work items sorted by id. The items are shared:
// treat them as read-only.
func (s *Store) Items(node string) []*nodeworkv1.WorkItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[node]
	if n == nil {
		return nil
	}
	ids := slices.Sorted(maps.Keys(n.items))
	out := make([]*nodeworkv1.WorkItem, 0, len(ids))
	for _, id := range ids {
		out = append(out, n.items[id])
	}
	return out
}

// Report records an agent's report and hands it to the kind's handler.
// Reports for items the store does not hold (removed meanwhile) still reach
// the handler with a nil item, so it can finish bookkeeping.
func (s *Store) Report(node string, r *nodeworkv1.WorkReport) {
	s.mu.Lock()
	n := s.node(node)
	item := n.items[r.GetId()]
	if item != nil {
		n.reports[r.GetId()] = r
	}
	kind := r.GetKind()
	if item != nil {
		kind = item.GetKind()
	}
	fn := s.handlers[kind]
	s.gc(node, n)
	s.mu.Unlock()
	if fn != nil {
		fn(node, item, r)
	}
}

// Watch returns a channel that receives a value (coalesced) whenever the
// node's set changes, and a function that stops the watch.
func (s *Store) Watch(node string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.node(node).watchers[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if n := s.nodes[node]; n != nil {
			delete(n.watchers, ch)
			s.gc(node, n)
		}
	}
}

func (n *nodeWork) signal() {
	for ch := range n.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Counts returns the number of work items by kind and state, where state is
// the latest report's phase for the item's current generation, or
// "dispatched" when the agent has not reported on it yet.
func (s *Store) Counts() map[[2]string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[[2]string]int{}
	for _, n := range s.nodes {
		for id, it := range n.items {
			state := "dispatched"
			if r := n.reports[id]; r != nil && r.GetObservedGeneration() == it.GetGeneration() {
				state = PhaseName(r.GetPhase())
			}
			out[[2]string{it.GetKind(), state}]++
		}
	}
	return out
}

// PhaseName is the lower-case name of a phase, e.g. "running".
func PhaseName(p nodeworkv1.Phase) string {
	switch p {
	case nodeworkv1.Phase_PHASE_PENDING:
		return "pending"
	case nodeworkv1.Phase_PHASE_RUNNING:
		return "running"
	case nodeworkv1.Phase_PHASE_SUCCEEDED:
		return "succeeded"
	case nodeworkv1.Phase_PHASE_FAILED:
		return "failed"
	case nodeworkv1.Phase_PHASE_UNSUPPORTED:
		return "unsupported"
	default:
		return "unknown"
	}
}
