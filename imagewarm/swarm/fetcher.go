package swarm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/imagewarm/blobserver"
	"github.com/shoal-io/shoal/imagewarm/store"
	"github.com/shoal-io/shoal/imagewarm/tracker"
)

// Mode is how a Fetcher shares blobs.
type Mode int

const (
	// Swarm fetches pieces from complete and partial holders and from
	// upstream only under a tracker lease.
	Swarm Mode = iota
	// SpegelLike announces and fetches only complete blobs, takes no
	// lease and goes upstream whenever no node holds the blob complete
	// (a baseline for the benchmark).
	SpegelLike
	// Naive fetches every blob from upstream (a baseline).
	Naive
)

// String returns the mode's name as the benchmark prints it.
func (m Mode) String() string {
	switch m {
	case SpegelLike:
		return "spegel-like"
	case Naive:
		return "naive"
	default:
		return "swarm"
	}
}

// ParseMode parses a Mode's String.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Swarm, SpegelLike, Naive} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown swarm mode %q (want swarm, spegel-like or naive)", s)
}

// Defaults for Config.
const (
	// DefaultMaxInflight is the piece requests a node keeps in flight,
	// over all its fetches. Requests share the node's ingress, so each
	// one more makes every piece take longer, and a piece is of use to
	// other nodes only once it has fully arrived; too few, and the link
	// idles while requests wait on busy holders (429) or on holders that
	// just gave a fresh piece to someone else. In the benchmark at B=R=4
	// MiB/s, 4 gave eta p50 0.88, 6 gave 0.92 and 8 gave 0.91; 2 and 3
	// left the link idle (0.61 and 0.78 at 8 MiB/s), and with 32 the
	// nodes trailed the upstream by a fifth of the run.
	DefaultMaxInflight = 6
	// DefaultPieceStall is how long a piece request may go without a byte
	// (headers included) before it is given up. It bounds silence, not
	// the whole request: on a slow link, or with many requests sharing
	// the ingress, a healthy piece can take far longer than any fixed
	// deadline (one of 4 s per MiB had every request on a 4 MiB/s link
	// abandoned, and the fetch never finished).
	DefaultPieceStall = 4 * time.Second
	// DefaultPerPeer is the piece requests one fetch sends one holder at
	// once.
	DefaultPerPeer = 2
	// DefaultPoll is how often a fetch looks its digest up.
	DefaultPoll = 250 * time.Millisecond
	// DefaultAnnounceInterval is how often a fetch announces its progress.
	DefaultAnnounceInterval = 250 * time.Millisecond
	// DefaultLeaseDefer is how long a fetch waits, per upstream lease its
	// node holds already, before asking for its blob's lease: long enough
	// for the nodes that hold none to ask first on a cold start, short
	// enough not to matter to a node pulling alone.
	DefaultLeaseDefer = 500 * time.Millisecond
	// DefaultStuckAfter is how long a fetch with piece requests out may
	// get no piece before it asks for the upstream lease (see
	// Config.StuckAfter). It is well past the pieces' tail at the end of
	// a healthy swarm's run, where a node's last pieces wait a few seconds
	// on busy holders and a lease would only fetch them twice.
	DefaultStuckAfter = 10 * time.Second
	// DefaultBlacklistFor is how long a peer that sent bad data is shunned
	// (Kraken's 30 s).
	DefaultBlacklistFor = 30 * time.Second
	// MinPieceSize and MaxPieceSize bound PieceSizeFor.
	MinPieceSize = 1 << 20
	MaxPieceSize = 16 << 20
)

// PieceSizeFor is the piece size every node uses for a blob of size bytes:
// about a 256th of it, a power of two within [MinPieceSize, MaxPieceSize].
// Small pieces keep the per-hop delay of the swarm's pipeline short
// ((p/B)·log2 N, p2p-image-distribution.md §2); the bound keeps bitmaps
// and hash lists small. It depends on the size alone, so all nodes agree
// without asking.
func PieceSizeFor(size int64) int64 {
	p := int64(MinPieceSize)
	for p < MaxPieceSize && p*256 < size {
		p *= 2
	}
	return p
}

// Config configures a Fetcher.
type Config struct {
	// Self is this node's name (a tracker's holder name). Required.
	Self string
	// Store holds the blobs. Required.
	Store *store.Store
	// Trackers is this node's tracker client; required unless Mode is
	// Naive.
	Trackers *tracker.Client
	// Upstream reads blobs from registries. Required.
	Upstream Upstream
	// Mode is Swarm unless a baseline is wanted.
	Mode Mode
	// Peers sends piece requests to other nodes (a plain http.Client when
	// nil).
	Peers *http.Client
	// PeerScheme is the URL scheme of peers' blob endpoints: "http"
	// (default) or "https" (mutual TLS, package imagewarm/peertls).
	PeerScheme string
	// Ingress, if set, paces every byte received, from peers and upstream.
	Ingress *blobserver.Limiter
	// MaxInflight (per node), PerPeer (per fetch and holder), Poll,
	// AnnounceInterval and BlacklistFor default to the constants above.
	MaxInflight      int
	PerPeer          int
	Poll             time.Duration
	AnnounceInterval time.Duration
	BlacklistFor     time.Duration
	// PieceStall is how long a piece request may receive nothing before
	// it is given up (DefaultPieceStall).
	PieceStall time.Duration
	// LeaseDefer is how long a fetch defers asking for an upstream lease
	// per lease its node holds already (DefaultLeaseDefer).
	LeaseDefer time.Duration
	// StuckAfter is how long a fetch with piece requests out may get no
	// piece (or four times its usual piece time, if longer) before it asks
	// for the upstream lease as if no holder had what it lacks
	// (DefaultStuckAfter).
	StuckAfter time.Duration
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger is the fetcher's logger (klog.Background() when zero).
	Logger klog.Logger
}

// Fetcher fetches blobs into the store. It is safe for concurrent use.
type Fetcher struct {
	cfg Config
	log klog.Logger
	m   *metrics

	// bufs pools piece buffers by piece size: a piece is read into one,
	// written to the store and the buffer reused, instead of a fresh
	// allocation (and its page faults) per piece.
	bufs sync.Map // int64 -> *sync.Pool

	// peerInflight counts this node's piece requests, over all fetches
	// (MaxInflight bounds it; fetches scheduling at the same moment can
	// overshoot it by one each).
	peerInflight atomic.Int32
	// leases counts the upstream leases this node's fetches hold or are
	// asking for.
	leases atomic.Int32

	wg        sync.WaitGroup // a flight's goroutine, until it ends
	mu        sync.Mutex
	flights   map[v1.Hash]*flight
	blacklist map[string]time.Time // node -> until
}

// flight is one fetch of a digest, shared by every caller that wants it.
type flight struct {
	done   chan struct{}
	err    error
	cancel context.CancelFunc
	refs   int
}

// New validates cfg and returns a Fetcher.
func New(cfg Config) (*Fetcher, error) {
	if cfg.Self == "" || cfg.Store == nil || cfg.Upstream == nil {
		return nil, errors.New("swarm: Self, Store and Upstream are required")
	}
	if cfg.Mode != Naive && cfg.Trackers == nil {
		return nil, fmt.Errorf("swarm: mode %s needs Trackers", cfg.Mode)
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.PerPeer <= 0 {
		cfg.PerPeer = DefaultPerPeer
	}
	if cfg.LeaseDefer <= 0 {
		cfg.LeaseDefer = DefaultLeaseDefer
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = DefaultStuckAfter
	}
	if cfg.AnnounceInterval <= 0 {
		cfg.AnnounceInterval = DefaultAnnounceInterval
	}
	if cfg.PieceStall <= 0 {
		cfg.PieceStall = DefaultPieceStall
	}
	if cfg.BlacklistFor <= 0 {
		cfg.BlacklistFor = DefaultBlacklistFor
	}
	if cfg.Peers == nil {
		cfg.Peers = &http.Client{}
	}
	if cfg.PeerScheme == "" {
		cfg.PeerScheme = "http"
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	f := &Fetcher{cfg: cfg, log: log.WithName("swarm"), flights: map[v1.Hash]*flight{}, blacklist: map[string]time.Time{}}
	m, err := newMetrics(cfg.Registerer, func() float64 { return float64(f.peerInflight.Load()) })
	if err != nil {
		return nil, fmt.Errorf("swarm: %w", err)
	}
	f.m = m
	return f, nil
}

// Fetch makes blob d (of the descriptor's size) present and verified in the
// store, fetching it from o's registry only as the mode allows. Callers
// asking for one digest at once share one fetch; it is cancelled when the
// last of them gives up.
func (f *Fetcher) Fetch(ctx context.Context, d v1.Descriptor, o Origin) error {
	fl := f.join(d, o)
	defer f.leave(fl)
	select {
	case <-fl.done:
		return fl.err
	case <-ctx.Done():
		return fmt.Errorf("fetch %s: %w", d.Digest, ctx.Err())
	}
}

// Start begins fetching d in the background (if no fetch of it runs) and
// returns at once; the fetch runs until it ends or for at most limit.
// The runtime's mirror requests use it and then stream the blob from the
// store as its pieces land.
func (f *Fetcher) Start(d v1.Descriptor, o Origin, limit time.Duration) {
	fl := f.join(d, o)
	go func() {
		defer f.leave(fl)
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-fl.done:
		case <-t.C:
		}
	}()
}

// join returns d's flight, starting it if none runs. A flight whose last
// caller left is winding down (cancelled): join waits for it to end and
// starts a new one, rather than handing the caller a fetch that can only
// fail (a runtime that gave up on a blob and asked again at once got
// "context canceled").
func (f *Fetcher) join(d v1.Descriptor, o Origin) *flight {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		fl, ok := f.flights[d.Digest]
		if !ok {
			break
		}
		if fl.refs > 0 {
			fl.refs++
			return fl
		}
		// Cancelled: its job stops promptly (requests and the upstream
		// stream are cancelled, the lease is given back within
		// rpcTimeout) and removes it.
		done := fl.done
		f.mu.Unlock()
		<-done
		f.mu.Lock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	fl := &flight{done: make(chan struct{}), cancel: cancel, refs: 1}
	f.flights[d.Digest] = fl
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		start := time.Now()
		err := f.fetch(klog.NewContext(ctx, f.log.WithValues("digest", d.Digest.String())), d, o)
		f.m.fetches.WithLabelValues(resultLabel(err)).Inc()
		f.m.fetchSeconds.Observe(time.Since(start).Seconds())
		f.mu.Lock()
		fl.err = err
		delete(f.flights, d.Digest)
		f.mu.Unlock()
		close(fl.done)
		cancel()
	}()
	return fl
}

// Close cancels every fetch and waits until they have stopped writing to
// the store (a Fetch or Start returns, or gives up waiting, before that).
// The store may be closed after it.
func (f *Fetcher) Close() {
	f.mu.Lock()
	for _, fl := range f.flights {
		fl.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// leave drops one caller of fl and cancels it when none is left.
func (f *Fetcher) leave(fl *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl.refs--; fl.refs == 0 {
		fl.cancel()
	}
}

// buffer returns a buffer of cap size from the pool.
func (f *Fetcher) buffer(size int64) []byte {
	p, _ := f.bufs.LoadOrStore(size, &sync.Pool{New: func() any { b := make([]byte, size); return &b }})
	return *(p.(*sync.Pool).Get().(*[]byte))
}

// recycle returns a buffer from buffer to its pool.
func (f *Fetcher) recycle(b []byte) {
	if b == nil {
		return
	}
	b = b[:cap(b)]
	if p, ok := f.bufs.Load(int64(cap(b))); ok {
		p.(*sync.Pool).Put(&b)
	}
}

// resultLabel is a fetch's result for the metrics.
func resultLabel(err error) string {
	switch {
	case err == nil:
		return "verified"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	default:
		return "failed"
	}
}

// blacklisted reports whether node is shunned now.
func (f *Fetcher) blacklisted(node string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.blacklist[node]
	if ok && !now.Before(until) {
		delete(f.blacklist, node)
		return false
	}
	return ok
}

// ban shuns node for BlacklistFor.
func (f *Fetcher) ban(ctx context.Context, node, why string) {
	f.mu.Lock()
	f.blacklist[node] = time.Now().Add(f.cfg.BlacklistFor)
	f.mu.Unlock()
	f.m.blacklisted.Inc()
	klog.FromContext(ctx).Info("Blacklisting peer", "peer", node, "for", f.cfg.BlacklistFor, "reason", why)
}

// busy reports whether the node has MaxInflight piece requests out.
func (f *Fetcher) busy() bool { return int(f.peerInflight.Load()) >= f.cfg.MaxInflight }

// Blacklisted returns the nodes shunned now, for status, tests and lease
// requests (a tracker refuses no lease for a holder the asker shuns).
func (f *Fetcher) Blacklisted() []string {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n, until := range f.blacklist {
		if now.Before(until) {
			out = append(out, n)
		}
	}
	return out
}

// HoldingsOf adapts the store to the tracker client's re-announcements:
// verified blobs as complete and, unless completeOnly, partial blobs with
// their pieces.
func HoldingsOf(s *store.Store, completeOnly bool) tracker.Holdings {
	return tracker.HoldingsFunc(func() []tracker.Holding {
		var out []tracker.Holding
		for _, h := range s.Holdings() {
			switch {
			case h.Verified:
				out = append(out, tracker.Holding{Digest: h.Digest.String(), Complete: true, Size: h.Size})
			case !completeOnly && h.Bitmap.Count() > 0:
				out = append(out, tracker.Holding{Digest: h.Digest.String(), Size: h.Size, PieceSize: h.PieceSize,
					Pieces: wireBitmap(h.Bitmap)})
			}
		}
		return out
	})
}

// wireBitmap converts the store's bitmap to the trackers' (same bytes).
func wireBitmap(b store.Bitmap) tracker.Bitmap { return tracker.Bitmap(b.Bytes()) }

// storeHashes converts published piece hashes to the store's form; the
// store's SetPieceHashes rejects a geometry that is not the blob's.
func storeHashes(p *tracker.PieceHashes) store.PieceHashes {
	h := store.PieceHashes{PieceSize: p.PieceSize, Sums: make([]store.PieceSum, len(p.Sums)/32)}
	for i := range h.Sums {
		h.Sums[i], _ = p.Sum(i)
	}
	return h
}

// wireHashes converts the store's piece hashes to the trackers' form.
func wireHashes(size int64, h store.PieceHashes) tracker.PieceHashes {
	sums := make([]byte, 0, 32*len(h.Sums))
	for _, s := range h.Sums {
		sums = append(sums, s[:]...)
	}
	return tracker.PieceHashes{Size: size, PieceSize: h.PieceSize, Sums: sums}
}
