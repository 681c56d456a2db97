package tracker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Defaults for Config.
const (
	// DefaultAnnounceInterval is how often holders re-announce.
	DefaultAnnounceInterval = 60 * time.Second
	// DefaultTTL is how long an announcement lives: three announce
	// intervals, so that no holding depends on a single re-announce.
	DefaultTTL = 3 * DefaultAnnounceInterval
	// DefaultStallTimeout is how long a lease holder may go without
	// announcing more pieces before its lease goes to the next asker.
	DefaultStallTimeout = 10 * time.Second
	// DefaultMaxLeases is U, the upstream leases per digest: one fetch
	// from the registry, everyone else from peers. Raise it only when the
	// registry is faster than a node's link.
	DefaultMaxLeases = 1
	// FreshComplete is how long after a holder first announced a blob
	// complete a new upstream lease on it is refused (the asker is told
	// to fetch from the holder): a few lookup rounds, the time a node
	// needs to see the holder.
	FreshComplete = 3 * time.Second
	// DefaultMaxHandout caps the holders a lookup returns: BitTorrent
	// trackers' and Kraken's usual 50. A fetch sees only the holders it
	// is handed, and while a blob streams in, each partial holder's newest
	// pieces are ones few others have: with 10, a 16-node swarm's fetches
	// missed a third of the holders at each lookup.
	DefaultMaxHandout = 50
	// DefaultMaxDigests caps the digests one tracker tracks.
	DefaultMaxDigests = 1 << 16
	// DefaultMaxHolders caps the holders of one digest.
	DefaultMaxHolders = 1 << 14
	// DefaultMaxHashBytes caps the piece-hash bytes one tracker keeps.
	DefaultMaxHashBytes = 64 << 20
)

// Config configures a Tracker. Zero fields take the defaults.
type Config struct {
	// TTL is how long an announcement is kept without a refresh
	// (DefaultTTL).
	TTL time.Duration
	// StallTimeout is how long a lease holder may make no progress before
	// the lease is reassigned (DefaultStallTimeout).
	StallTimeout time.Duration
	// MaxLeases is U, the upstream leases per digest (DefaultMaxLeases).
	MaxLeases int
	// MaxHandout caps the holders a lookup returns (DefaultMaxHandout).
	MaxHandout int
	// MaxDigests caps the digests tracked (DefaultMaxDigests).
	MaxDigests int
	// MaxHolders caps the holders per digest (DefaultMaxHolders).
	MaxHolders int
	// MaxHashBytes caps the piece-hash bytes kept (DefaultMaxHashBytes).
	MaxHashBytes int
	// Clock is the time source (the real clock when nil).
	Clock clock.WithTicker
	// Registerer receives the tracker metrics; nil registers none.
	Registerer prometheus.Registerer
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	def(&c.MaxLeases, DefaultMaxLeases)
	def(&c.MaxHandout, DefaultMaxHandout)
	def(&c.MaxDigests, DefaultMaxDigests)
	def(&c.MaxHolders, DefaultMaxHolders)
	def(&c.MaxHashBytes, DefaultMaxHashBytes)
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Tracker is the soft state one agent keeps for the digests rendezvous
// hashing maps to it: who holds each blob, who may fetch it upstream, and
// its piece hashes. Nothing is persisted: holders re-announce every
// interval and a restarted tracker is whole again after one. Its methods
// are safe for concurrent use and never block on the network, so
// ForgetNode may be called from the mesh's membership callbacks.
type Tracker struct {
	cfg Config
	clk clock.WithTicker
	met *serverMetrics

	mu        sync.Mutex
	entries   map[string]*entry
	hashBytes int
}

// holding is a holder with the time, on its own clock, at which it read
// what it announced.
type holding struct {
	Holder
	readAt int64
	// completeSince is when the node first announced the blob complete.
	completeSince time.Time
}

// entry is one digest's state.
type entry struct {
	holders map[string]*holding
	leases  []*lease
	hashes  *PieceHashes
	// active is the last announce, lease or publication: an entry left
	// with piece hashes only is dropped a TTL after it.
	active time.Time
}

// lease is one upstream lease.
type lease struct {
	node       string
	since      time.Time
	progressAt time.Time
	pieces     int
}

// New returns a Tracker; it registers its metrics on cfg.Registerer.
func New(cfg Config) (*Tracker, error) {
	cfg = cfg.withDefaults()
	if cfg.TTL < 0 || cfg.StallTimeout < 0 || cfg.MaxLeases < 0 || cfg.MaxHandout < 0 || cfg.MaxDigests < 0 || cfg.MaxHolders < 0 || cfg.MaxHashBytes < 0 {
		return nil, errors.New("tracker: negative limit in config")
	}
	t := &Tracker{cfg: cfg, clk: cfg.Clock, entries: map[string]*entry{}}
	t.met = newServerMetrics(t)
	if cfg.Registerer != nil {
		if err := t.met.register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("tracker: %w", err)
		}
	}
	return t, nil
}

// Announce records that a.Node holds a.Digest (or refreshes it). An
// announcement with more pieces than the node's lease recorded counts as
// the lease's progress; a complete one ends the node's lease.
func (t *Tracker) Announce(a Announcement) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("announce %s from %s: %w", a.Digest, a.Node, err)
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.entryLocked(a.Digest, now)
	if err != nil {
		return fmt.Errorf("announce %s from %s: %w", a.Digest, a.Node, err)
	}
	h := e.holders[a.Node]
	if h != nil && a.ReadAt != 0 && a.ReadAt < h.readAt {
		return nil // overtaken by a newer announcement
	}
	if h == nil {
		if len(e.holders) >= t.cfg.MaxHolders {
			t.dropIfEmptyLocked(a.Digest, e, now)
			return fmt.Errorf("announce %s from %s: %w: %d holders already", a.Digest, a.Node, ErrFull, len(e.holders))
		}
		h = &holding{}
		e.holders[a.Node] = h
	}
	h.readAt = a.ReadAt
	switch {
	case !a.Complete:
		h.completeSince = time.Time{}
	case !h.Complete: // complete from now on
		h.completeSince = now
	}
	h.Holder = Holder{
		Node:         a.Node,
		Endpoint:     a.Endpoint,
		Zone:         a.Zone,
		Complete:     a.Complete,
		Size:         a.Size,
		PieceSize:    a.PieceSize,
		Pieces:       slices.Clone(a.Pieces),
		LastAnnounce: now,
	}
	e.active = now
	count := h.Pieces.Count()
	if a.Leased && !a.Complete && !slices.ContainsFunc(e.leases, func(l *lease) bool { return l.node == a.Node }) {
		// Granted by another tracker: record it even past MaxLeases, as
		// the holder is fetching regardless.
		e.leases = append(e.leases, &lease{node: a.Node, since: now, progressAt: now, pieces: count})
	}
	e.leases = slices.DeleteFunc(e.leases, func(l *lease) bool {
		if l.node != a.Node {
			return false
		}
		if a.Complete {
			return true // done: nothing left to fetch upstream
		}
		if count > l.pieces {
			l.pieces = count
			l.progressAt = now
		}
		return false
	})
	return nil
}

// Withdraw records that node no longer holds digest, and ends its lease.
func (t *Tracker) Withdraw(digest, node string) {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[digest]
	if e == nil {
		return
	}
	delete(e.holders, node)
	t.removeLeaseLocked(e, node, false)
	t.dropIfEmptyLocked(digest, e, now)
}

// ForgetNode drops everything node announced and its leases. Call it when
// the mesh reports the node left or died (ForgetDeparted); a node that comes back
// re-announces.
func (t *Tracker) ForgetNode(node string) {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for d, e := range t.entries {
		delete(e.holders, node)
		t.removeLeaseLocked(e, node, true)
		t.dropIfEmptyLocked(d, e, now)
	}
}

// AcquireLease asks for one of digest's upstream leases for req.Node. It
// is granted when the node already holds one, when fewer than MaxLeases
// are out to holders req does not avoid, or when a holder has stalled (no progress within the stall
// timeout), in which case the stalled lease moves to the node. Otherwise
// the grant names the current holders, so the node knows whom to wait
// for. A live holder that completed the blob within FreshComplete and
// that req does not avoid refuses a new lease: the node should fetch from
// it (the grant names it).
func (t *Tracker) AcquireLease(req LeaseRequest) (LeaseGrant, error) {
	digest, node := req.Digest, req.Node
	if err := req.Validate(); err != nil {
		return LeaseGrant{}, fmt.Errorf("lease %s for %s: %w", digest, node, err)
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.entryLocked(digest, now)
	if err != nil {
		return LeaseGrant{}, fmt.Errorf("lease %s for %s: %w", digest, node, err)
	}
	e.active = now
	granted := slices.ContainsFunc(e.leases, func(l *lease) bool { return l.node == node })
	completeHolder := ""
	if !granted {
		completeHolder = t.usableCompleteLocked(e, req, now)
	}
	switch {
	case granted:
		t.met.leaseRequests.WithLabelValues(leaseHeld).Inc()
	case completeHolder != "":
		t.met.leaseRequests.WithLabelValues(leaseDenied).Inc()
	default:
		pieces := 0
		if h := e.holders[node]; h != nil {
			pieces = h.Pieces.Count()
		}
		fresh := &lease{node: node, since: now, progressAt: now, pieces: pieces}
		switch {
		case usableLeases(e, req) < t.cfg.MaxLeases:
			// Free, or every holder is one the asker shuns (it found
			// their data bad): their pieces are of no use to it.
			e.leases = append(e.leases, fresh)
			granted = true
		default:
			// Take over the lease that has stalled longest.
			stalled := -1
			for i, l := range e.leases {
				if t.stalled(l, now) && (stalled < 0 || l.progressAt.Before(e.leases[stalled].progressAt)) {
					stalled = i
				}
			}
			if stalled >= 0 {
				e.leases = slices.Delete(e.leases, stalled, stalled+1)
				e.leases = append(e.leases, fresh)
				t.met.reassigned.WithLabelValues(reasonStalled).Inc()
				granted = true
			}
		}
		if granted {
			t.met.leaseRequests.WithLabelValues(leaseGranted).Inc()
		} else {
			t.met.leaseRequests.WithLabelValues(leaseDenied).Inc()
		}
	}
	grant := LeaseGrant{Granted: granted, Lease: t.leaseStateLocked(e, now), CompleteHolder: completeHolder}
	t.dropIfEmptyLocked(digest, e, now)
	return grant, nil
}

// usableLeases counts e's leases held by nodes req's asker does not shun.
// A node the asker shuns may hold the lease and stream on, so that its
// lease never stalls; counting it would leave the asker with no source at
// all. One more lease is granted beside it, and the next asker that shuns
// the same node counts that one.
func usableLeases(e *entry, req LeaseRequest) int {
	n := 0
	for _, l := range e.leases {
		if !slices.Contains(req.Avoid, l.node) {
			n++
		}
	}
	return n
}

// usableCompleteLocked returns a live holder of e's complete blob that
// req's node may fetch from and that completed within FreshComplete, or
// "". A node asking right after a holder finished has not seen it yet;
// one still asking well after may well have tried it and found it too
// slow, and gets the lease.
func (t *Tracker) usableCompleteLocked(e *entry, req LeaseRequest, now time.Time) string {
	if req.NoPeers {
		return ""
	}
	t.expireHoldersLocked(e, now)
	for _, h := range e.holders {
		if h.Complete && now.Sub(h.completeSince) < FreshComplete && h.Node != req.Node && !slices.Contains(req.Avoid, h.Node) {
			return h.Node
		}
	}
	return ""
}

// ReleaseLease gives node's lease on digest back (a no-op when it holds
// none).
func (t *Tracker) ReleaseLease(digest, node string) {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[digest]; e != nil {
		t.removeLeaseLocked(e, node, false)
		t.dropIfEmptyLocked(digest, e, now)
	}
}

// PublishPieceHashes stores digest's piece hashes. The first publication
// wins: publishing the same hashes again is a no-op, different ones fail
// with ErrConflict (a corrupt or lying node, or another piece size; the
// blob's digest stays the only trust anchor, so hashes are advisory).
func (t *Tracker) PublishPieceHashes(digest string, p PieceHashes) error {
	req := PublishRequest{Digest: digest, Hashes: p}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("publish piece hashes of %s: %w", digest, err)
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.entryLocked(digest, now)
	if err != nil {
		return fmt.Errorf("publish piece hashes of %s: %w", digest, err)
	}
	switch {
	case e.hashes != nil && e.hashes.equal(p):
	case e.hashes != nil:
		return fmt.Errorf("publish piece hashes of %s from %s: %w (first published by %s)", digest, p.Publisher, ErrConflict, e.hashes.Publisher)
	case t.hashBytes+len(p.Sums) > t.cfg.MaxHashBytes:
		t.dropIfEmptyLocked(digest, e, now)
		return fmt.Errorf("publish piece hashes of %s: %w: %d bytes of hashes kept", digest, ErrFull, t.hashBytes)
	default:
		c := p
		c.Sums = slices.Clone(p.Sums)
		e.hashes = &c
		t.hashBytes += len(c.Sums)
	}
	e.active = now
	return nil
}

// Lookup returns digest's live holders (complete first, then partial;
// within each, the asker's zone first; shuffled within those groups;
// capped at the handout limit), its lease state and, when asked, its piece
// hashes.
func (t *Tracker) Lookup(req LookupRequest) (LookupResult, error) {
	if err := req.Validate(); err != nil {
		return LookupResult{}, fmt.Errorf("lookup %s: %w", req.Digest, err)
	}
	limit := t.cfg.MaxHandout
	if req.Limit > 0 && req.Limit < limit {
		limit = req.Limit
	}
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[req.Digest]
	if e == nil {
		return LookupResult{Lease: LeaseState{Max: t.cfg.MaxLeases}}, nil
	}
	t.expireHoldersLocked(e, now)
	// Four tiers: complete in zone, complete elsewhere, partial in zone,
	// partial elsewhere.
	var tiers [4][]*Holder
	var res LookupResult
	for _, h := range e.holders {
		if h.Node == req.Node {
			continue
		}
		tier := 0
		if h.Complete {
			res.Complete++
		} else {
			res.Partial++
			tier = 2
		}
		if req.Zone == "" || h.Zone != req.Zone {
			tier++
		}
		tiers[tier] = append(tiers[tier], &h.Holder)
	}
	for _, tier := range tiers {
		rand.Shuffle(len(tier), func(i, j int) { tier[i], tier[j] = tier[j], tier[i] })
		for _, h := range tier {
			if len(res.Holders) == limit {
				break
			}
			c := *h
			c.Pieces = slices.Clone(h.Pieces)
			res.Holders = append(res.Holders, c)
		}
	}
	res.Lease = t.leaseStateLocked(e, now)
	if req.PieceHashes && e.hashes != nil {
		c := *e.hashes
		c.Sums = slices.Clone(e.hashes.Sums)
		res.PieceHashes = &c
	}
	t.dropIfEmptyLocked(req.Digest, e, now)
	return res, nil
}

// Expire drops announcements older than the TTL, leases without progress
// for a TTL, and digests left with nothing. Lookups ignore expired
// announcements anyway; Expire frees their memory. Run calls it.
func (t *Tracker) Expire() {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for d, e := range t.entries {
		t.expireHoldersLocked(e, now)
		e.leases = slices.DeleteFunc(e.leases, func(l *lease) bool { return now.Sub(l.progressAt) > t.cfg.TTL })
		t.dropIfEmptyLocked(d, e, now)
	}
}

// Run calls Expire every quarter TTL until ctx is done.
func (t *Tracker) Run(ctx context.Context) error {
	tick := t.clk.NewTicker(t.cfg.TTL / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
			t.Expire()
		}
	}
}

// Stats is a snapshot of a tracker's size.
type Stats struct {
	// Digests is the number of digests tracked.
	Digests int
	// Complete and Partial count holder entries, expired ones included
	// until Expire runs.
	Complete int
	// Partial counts partial holder entries.
	Partial int
	// Leases counts outstanding upstream leases.
	Leases int
	// HashBytes is the piece-hash bytes kept.
	HashBytes int
}

// Stats returns the tracker's current size.
func (t *Tracker) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Stats{Digests: len(t.entries), HashBytes: t.hashBytes}
	for _, e := range t.entries {
		for _, h := range e.holders {
			if h.Complete {
				s.Complete++
			} else {
				s.Partial++
			}
		}
		s.Leases += len(e.leases)
	}
	return s
}

// entryLocked returns digest's entry, creating it within MaxDigests.
func (t *Tracker) entryLocked(digest string, now time.Time) (*entry, error) {
	if e := t.entries[digest]; e != nil {
		return e, nil
	}
	if len(t.entries) >= t.cfg.MaxDigests {
		return nil, fmt.Errorf("%w: %d digests tracked already", ErrFull, len(t.entries))
	}
	e := &entry{holders: map[string]*holding{}, active: now}
	t.entries[digest] = e
	return e, nil
}

// dropIfEmptyLocked forgets digest when nothing is left of it: no holders,
// no leases, and no piece hashes younger than a TTL.
func (t *Tracker) dropIfEmptyLocked(digest string, e *entry, now time.Time) {
	if len(e.holders) > 0 || len(e.leases) > 0 {
		return
	}
	if e.hashes != nil && now.Sub(e.active) <= t.cfg.TTL {
		return
	}
	if e.hashes != nil {
		t.hashBytes -= len(e.hashes.Sums)
	}
	delete(t.entries, digest)
}

// expireHoldersLocked drops e's announcements older than the TTL.
func (t *Tracker) expireHoldersLocked(e *entry, now time.Time) {
	for n, h := range e.holders {
		if now.Sub(h.LastAnnounce) > t.cfg.TTL {
			delete(e.holders, n)
		}
	}
}

// removeLeaseLocked ends node's lease on e, if any; forgotten says the
// node left or died (counted as a reassignment: the next asker gets it).
func (t *Tracker) removeLeaseLocked(e *entry, node string, forgotten bool) {
	e.leases = slices.DeleteFunc(e.leases, func(l *lease) bool {
		if l.node != node {
			return false
		}
		if forgotten {
			t.met.reassigned.WithLabelValues(reasonForgotten).Inc()
		}
		return true
	})
}

// stalled reports whether l made no progress within the stall timeout.
func (t *Tracker) stalled(l *lease, now time.Time) bool {
	return now.Sub(l.progressAt) > t.cfg.StallTimeout
}

// leaseStateLocked returns e's lease state.
func (t *Tracker) leaseStateLocked(e *entry, now time.Time) LeaseState {
	s := LeaseState{Max: t.cfg.MaxLeases}
	for _, l := range e.leases {
		s.Holders = append(s.Holders, LeaseHolder{
			Node: l.node, Since: l.since, LastProgress: l.progressAt, Pieces: l.pieces, Stalled: t.stalled(l, now),
		})
	}
	return s
}
