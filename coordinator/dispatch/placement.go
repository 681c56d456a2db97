package dispatch

import (
	"sync"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Placement keeps work items that each follow one object to its node (a
// pod's sidecar-terminate or probe work): Place puts the item on the
// node the object is on now, and takes it off the node it was on before.
// It is safe for concurrent use.
type Placement struct {
	store *Store
	mu    sync.Mutex
	nodes map[string]string // item id -> node
}

// NewPlacement returns a Placement over store.
func NewPlacement(store *Store) *Placement {
	return &Placement{store: store, nodes: map[string]string{}}
}

// Place makes the store hold exactly item (an id, kind and spec; nil for
// none) as the work of id, on node.
func (p *Placement) Place(id, node string, item *nodeworkv1.WorkItem) {
	p.mu.Lock()
	old := p.nodes[id]
	if item != nil {
		p.nodes[id] = node
	} else {
		delete(p.nodes, id)
	}
	p.mu.Unlock()
	if old != "" && (item == nil || old != node) {
		p.store.Delete(old, id)
	}
	if item != nil {
		p.store.Put(node, item)
	}
}

// Node returns the node the item id is on ("" when it is on none).
func (p *Placement) Node(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[id]
}
