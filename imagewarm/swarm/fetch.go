package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/imagewarm/store"
	"github.com/shoal-io/shoal/imagewarm/tracker"
)

// Tuning of one fetch.
const (
	// readChunk is the most bytes read (and drawn from the ingress bucket)
	// at once.
	readChunk = 32 << 10
	// maxErrorBody is the most of a peer's error answer read (and
	// dropped) so that its connection can serve the next request.
	maxErrorBody = 16 << 10
	// leaseRetry is how often a starving fetch asks for the lease again.
	leaseRetry = time.Second
	// maxMismatches is how many digest mismatches a fetch survives (each
	// blacklists the peers that supplied pieces) before it gives up.
	maxMismatches = 3
	// maxUpstreamRetries bounds the retries of a failing upstream stream
	// that makes no progress between them.
	maxUpstreamRetries = 8
	// lookupFailuresBeforeUpstream is how many failed lookups in a row make
	// a fetch go upstream without a lease (the trackers are unreachable).
	lookupFailuresBeforeUpstream = 3
	// minHedge is the least time a piece request runs before it is hedged.
	minHedge = time.Second
	// maxDuplicates bounds the duplicate requests (hedges and endgame) of
	// one fetch in flight at once.
	maxDuplicates = 2
	// minBusyBackoff is the least wait after a 429 (Retry-After has
	// whole seconds; a piece usually frees a slot sooner).
	minBusyBackoff = 100 * time.Millisecond
	// rpcTimeout bounds a tracker call made from the fetch loop.
	rpcTimeout = 2 * time.Second
	// relayGrace is how long after this fetch learned the piece hashes a
	// partial holder is not blamed for a bad piece: it may have relayed it
	// in good faith, before the hashes were published, and drops it at its
	// own next lookup (within four polls and a call). Blacklisting such an
	// honest relay for BlacklistFor took half of a small swarm's holders
	// away from every node that got a bad piece from it.
	relayGrace = 3 * time.Second
)

// job is the state of one blob's fetch. Only its run goroutine touches it,
// except where noted.
type job struct {
	f    *Fetcher
	b    *store.Blob
	d    v1.Hash
	o    Origin
	size int64
	ps   int64
	n    int
	log  klog.Logger
	rng  *rand.Rand

	holders  map[string]*holder
	inflight map[int][]*request
	perPeer  map[string]int
	requests int
	sources  []string // the peer that supplied each piece ("" when upstream or resumed)
	results  chan result

	lookups     chan lookupResult
	looking     bool
	lastLookup  time.Time
	lookupFails int
	looked      bool // a lookup answered at least once
	hashesKnown bool
	hashesAt    time.Time // when hashesKnown was set
	// awaitHashes is set once the blob failed its digest check: peers'
	// pieces are taken again only when they can be checked one by one.
	awaitHashes  bool
	leaseHeld    bool
	lastLeaseTry time.Time
	// leaseWaitFrom is when this fetch first deferred asking for the lease
	// to nodes holding none (zero: it has not).
	leaseWaitFrom time.Time
	upRunning     bool
	upDone        chan error
	upCancel      context.CancelFunc
	upPos         atomic.Int64 // the piece the upstream stream is on (-1: none)
	upFails       int
	upBackoff     time.Time
	upProgress    chan struct{}
	mismatches    int
	pieceTime     time.Duration // moving average of a piece request's duration
	lastPiece     time.Time     // when a peer's piece was last stored (or the fetch began)
	announced     int
	lastAnnounce  time.Time
	// announcing is closed when the background progress announcement
	// ends; nil before the first.
	announcing     chan struct{}
	directUpstream bool // going upstream without a lease (trackers unreachable)
}

// holder is one node that has some of the blob, as the last lookup said.
type holder struct {
	node, endpoint string
	complete       bool
	pieces         tracker.Bitmap
	backoffUntil   time.Time
	fails          int
	// bad are the pieces it sent that did not match their hashes, while
	// it was not yet blamed for them (relayGrace): not asked of it again.
	bad map[int]bool
}

// has reports whether the holder has piece i and may be asked for it.
func (h *holder) has(i int) bool { return !h.bad[i] && (h.complete || h.pieces.Has(i)) }

// request is one piece request to one holder.
type request struct {
	piece  int
	node   string
	start  time.Time
	cancel context.CancelFunc
}

// result is a piece request's outcome.
type result struct {
	req    *request
	data   []byte
	err    error
	status int
}

// lookupResult is a lookup's outcome.
type lookupResult struct {
	res tracker.LookupResult
	err error
}

// upstreamSource marks pieces that came from upstream in log messages.
const upstreamSource = "upstream"

// fetch runs one flight: d ends verified in the store, or an error.
func (f *Fetcher) fetch(ctx context.Context, d v1.Descriptor, o Origin) error {
	if d.Size <= 0 {
		return fmt.Errorf("fetch %s: the descriptor has no size", d.Digest)
	}
	b, err := f.cfg.Store.Begin(d.Digest, d.Size, PieceSizeFor(d.Size))
	if err != nil {
		return fmt.Errorf("fetch %s: begin in the store: %w", d.Digest, err)
	}
	defer func() { _ = b.Close() }()
	j := &job{
		f: f, b: b, d: d.Digest, o: o, size: d.Size, ps: b.PieceSize(), n: b.NumPieces(),
		log:      klog.FromContext(ctx),
		rng:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		holders:  map[string]*holder{},
		inflight: map[int][]*request{},
		perPeer:  map[string]int{},
		sources:  make([]string, b.NumPieces()),
		results:  make(chan result, f.cfg.MaxInflight*2),
		lookups:  make(chan lookupResult, 1),
		upDone:   make(chan error, 1),
		// A buffer of one: the stream never blocks on telling the loop.
		upProgress: make(chan struct{}, 1),
		lastPiece:  time.Now(),
	}
	j.upPos.Store(-1)
	if b.Verified() {
		return nil // announced as complete by the trackers' re-announcements
	}
	return j.run(ctx)
}

// run is the fetch loop.
func (j *job) run(ctx context.Context) error {
	defer j.stop()
	tick := time.NewTicker(j.f.cfg.Poll / 2)
	defer tick.Stop()
	for {
		now := time.Now()
		// One copy of the bitmap per pass: every step below reads it.
		bm := j.b.Bitmap()
		if bm.Full() && !j.upRunning {
			done, err := j.commit(ctx)
			if done {
				return err
			}
			continue
		}
		// Look up often while there is room for more requests, less while
		// every request slot is busy (each lookup costs the k trackers).
		every := j.f.cfg.Poll
		if j.f.busy() {
			every = 4 * j.f.cfg.Poll
		}
		if j.f.cfg.Mode != Naive && !j.looking && (j.lastLookup.IsZero() || now.Sub(j.lastLookup) >= every) {
			j.startLookup(ctx, now)
		}
		j.schedule(ctx, bm, now)
		if err := j.maybeUpstream(ctx, bm, now); err != nil {
			return err
		}
		j.maybeAnnounce(ctx, bm, now)
		select {
		case r := <-j.results:
			j.handle(ctx, r)
		case lr := <-j.lookups:
			j.looking = false
			j.applyLookup(ctx, lr)
		case err := <-j.upDone:
			if err := j.upstreamEnded(ctx, err); err != nil {
				return err
			}
		case <-j.upProgress:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("fetch %s: %w", j.d, ctx.Err())
		}
	}
}

// stop cancels every request and the upstream stream and waits for the
// stream (its writes use the blob handle run's caller closes).
func (j *job) stop() {
	for _, rs := range j.inflight {
		for _, r := range rs {
			r.cancel()
		}
	}
	// Every request ends with one result (a cancelled one at once). They
	// are taken here so that the node's count of requests in flight is
	// right for the fetches that come after: a fetch that ended with a
	// request out (the endgame's losing duplicate, or a fetch cancelled by
	// its callers) leaked one each, and after MaxInflight of them the
	// node sent no piece request again (the e2e image pull that crept
	// to its deadline at 591 bytes).
	for j.requests > 0 {
		r := <-j.results
		j.untrack(r.req)
		j.f.recycle(r.data)
	}
	if j.upRunning {
		j.upCancel()
		<-j.upDone
		j.upRunning = false
	}
	if j.leaseHeld {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		if err := j.f.cfg.Trackers.ReleaseLease(ctx, j.d.String()); err != nil {
			j.log.V(2).Info("Could not give the upstream lease back", "err", err.Error())
		}
		j.leaseHeld = false
		j.f.leases.Add(-1)
	}
}

// startLookup asks the trackers about the digest in the background.
func (j *job) startLookup(ctx context.Context, now time.Time) {
	j.looking, j.lastLookup = true, now
	want := !j.hashesKnown
	go func() {
		lctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		res, err := j.f.cfg.Trackers.Lookup(lctx, j.d.String(), tracker.LookupOptions{PieceHashes: want})
		j.lookups <- lookupResult{res: res, err: err}
	}()
}

// applyLookup takes in what the trackers said.
func (j *job) applyLookup(ctx context.Context, lr lookupResult) {
	if lr.err != nil {
		j.lookupFails++
		if ctx.Err() == nil {
			j.log.V(2).Info("Tracker lookup failed", "failures", j.lookupFails, "err", lr.err.Error())
		}
		return
	}
	j.lookupFails, j.looked = 0, true
	seen := make(map[string]bool, len(lr.res.Holders))
	for _, h := range lr.res.Holders {
		if h.Node == j.f.cfg.Self || (j.f.cfg.Mode == SpegelLike && !h.Complete) {
			continue
		}
		if !h.Complete && (h.PieceSize != j.ps || h.Size != j.size) {
			continue // another geometry: its bitmap means nothing here
		}
		seen[h.Node] = true
		cur, ok := j.holders[h.Node]
		if !ok {
			cur = &holder{node: h.Node}
			j.holders[h.Node] = cur
		}
		cur.endpoint, cur.complete, cur.pieces = h.Endpoint, h.Complete, h.Pieces
	}
	for n := range j.holders {
		if !seen[n] && j.perPeer[n] == 0 {
			delete(j.holders, n)
		}
	}
	if lr.res.PieceHashes != nil && !j.hashesKnown {
		j.takeHashes(lr.res.PieceHashes)
	}
}

// takeHashes gives the blob published piece hashes; pieces already present
// that do not match are dropped and fetched again. Their senders are not
// blamed: a piece that arrived before anyone could check it may have been
// relayed in good faith by a node that got it from the corrupting peer.
// From now on every piece is checked on arrival, and a bad one blames the
// peer that sent it.
func (j *job) takeHashes(p *tracker.PieceHashes) {
	bad, err := j.b.SetPieceHashes(storeHashes(p))
	if err != nil {
		j.log.Info("Could not take piece hashes", "publisher", p.Publisher, "err", err.Error())
		return
	}
	j.hashesKnown, j.hashesAt = true, time.Now()
	for _, i := range bad {
		j.f.m.badPieces.Inc()
		j.sources[i] = ""
	}
	if len(bad) > 0 {
		j.log.Info("Dropped pieces that did not match the published piece hashes", "pieces", len(bad))
	}
}

// eligible reports whether a piece request may go to h now.
func (j *job) eligible(h *holder, now time.Time) bool {
	return h.endpoint != "" && now.After(h.backoffUntil) && j.perPeer[h.node] < j.f.cfg.PerPeer &&
		!j.f.blacklisted(h.node, now)
}

// schedule sends piece requests while there is room: the rarest missing
// pieces first, then duplicates of slow or last pieces.
func (j *job) schedule(ctx context.Context, bm store.Bitmap, now time.Time) {
	if j.f.cfg.Mode == Naive || j.f.busy() || len(j.holders) == 0 || (j.awaitHashes && !j.hashesKnown) {
		return
	}
	var ready []*holder
	for _, h := range j.holders {
		if j.eligible(h, now) {
			ready = append(ready, h)
		}
	}
	if len(ready) == 0 {
		return
	}
	up := int(j.upPos.Load())
	type cand struct{ piece, count int }
	var cands []cand
	missing := 0
	for i := range bm.Missing() {
		missing++
		if len(j.inflight[i]) > 0 || (up >= 0 && i >= up && i < up+2) {
			continue
		}
		c := 0
		for _, h := range j.holders {
			if h.has(i) {
				c++
			}
		}
		if c > 0 {
			cands = append(cands, cand{i, c})
		}
	}
	j.rng.Shuffle(len(cands), func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
	slices.SortStableFunc(cands, func(a, b cand) int { return a.count - b.count })
	for _, c := range cands {
		if j.f.busy() {
			return
		}
		if h := j.pick(ready, c.piece, ""); h != nil {
			j.send(ctx, h, c.piece, now)
		}
	}
	// Endgame (every missing piece is requested) and hedging (a request
	// running far past the usual piece time): a second holder races the
	// first; the loser is cancelled.
	endgame := missing > 0 && len(j.inflight) >= missing
	hedge := max(minHedge, 4*j.pieceTime)
	for i, rs := range j.inflight {
		// Requests beyond one per piece are the duplicates in flight.
		if j.f.busy() || j.requests-len(j.inflight) >= maxDuplicates {
			return
		}
		if len(rs) != 1 || (!endgame && now.Sub(rs[0].start) < hedge) {
			continue
		}
		if h := j.pick(ready, i, rs[0].node); h != nil {
			j.f.m.duplicates.Inc()
			j.send(ctx, h, i, now)
		}
	}
}

// pick returns the least loaded ready holder of piece i other than not,
// choosing at random among equals.
func (j *job) pick(ready []*holder, i int, not string) *holder {
	var best *holder
	ties := 0
	for _, h := range ready {
		// ready holders are eligible; only their request counts change
		// while one schedule runs.
		if h.node == not || !h.has(i) || j.perPeer[h.node] >= j.f.cfg.PerPeer {
			continue
		}
		switch {
		case best == nil || j.perPeer[h.node] < j.perPeer[best.node]:
			best, ties = h, 1
		case j.perPeer[h.node] == j.perPeer[best.node]:
			ties++
			if j.rng.IntN(ties) == 0 {
				best = h
			}
		}
	}
	return best
}

// errPieceStalled ends a piece request that received nothing for
// Config.PieceStall.
var errPieceStalled = errors.New("piece request stalled")

// send starts a request for piece i to h.
func (j *job) send(ctx context.Context, h *holder, i int, now time.Time) {
	rctx, cancel := context.WithCancelCause(ctx)
	r := &request{piece: i, node: h.node, start: now, cancel: func() { cancel(context.Canceled) }}
	j.inflight[i] = append(j.inflight[i], r)
	j.perPeer[h.node]++
	j.requests++
	j.f.peerInflight.Add(1)
	endpoint := h.endpoint
	go func() {
		defer cancel(nil)
		stall := time.AfterFunc(j.f.cfg.PieceStall, func() { cancel(errPieceStalled) })
		defer stall.Stop()
		res := j.get(rctx, r, endpoint, stall)
		if res.err != nil && errors.Is(context.Cause(rctx), errPieceStalled) {
			res.err = fmt.Errorf("piece %d from %s: nothing for %s: %w", i, r.node, j.f.cfg.PieceStall, errPieceStalled)
		}
		j.results <- res
	}()
}

// get fetches one piece from a holder; every chunk that arrives pushes
// the stall timer back.
func (j *job) get(ctx context.Context, r *request, endpoint string, stall *time.Timer) result {
	off := int64(r.piece) * j.ps
	n := min(j.ps, j.size-off)
	url := j.f.cfg.PeerScheme + "://" + endpoint + "/v2/" + j.o.Repository + "/blobs/" + j.d.String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return result{req: r, err: err}
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	resp, err := j.f.cfg.Peers.Do(req)
	if err != nil {
		return result{req: r, err: err}
	}
	defer func() {
		if resp.StatusCode != http.StatusPartialContent && resp.StatusCode != http.StatusOK {
			// A short error body read to its end keeps the connection.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		}
		_ = resp.Body.Close()
	}()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if off != 0 || n != j.size {
			return result{req: r, status: resp.StatusCode, err: errors.New("peer ignored the Range header")}
		}
	default:
		return result{req: r, status: resp.StatusCode, err: fmt.Errorf("peer answered %d", resp.StatusCode)}
	}
	buf := j.f.buffer(j.ps)[:n]
	if err := j.readFull(ctx, resp.Body, buf, stall, false); err != nil {
		j.f.recycle(buf)
		return result{req: r, err: fmt.Errorf("read piece %d from %s: %w", r.piece, r.node, err)}
	}
	return result{req: r, data: buf}
}

// readFull fills buf from r, drawing every chunk from the ingress bucket
// and, if stall is set, pushing it back after each. Upstream reads go
// ahead of peer reads (Limiter.WaitNAhead): in the benchmark, a lease
// holder fetching the rest of the image from peers streamed upstream at a
// fifth of its link instead of half.
func (j *job) readFull(ctx context.Context, r io.Reader, buf []byte, stall *time.Timer, upstream bool) error {
	for off := 0; off < len(buf); {
		n := min(len(buf)-off, readChunk)
		if l := j.f.cfg.Ingress; l != nil {
			n = int(min(int64(n), l.Burst()))
			wait := l.WaitN
			if upstream {
				wait = l.WaitNAhead
			}
			if err := wait(ctx, int64(n)); err != nil {
				return err
			}
		}
		if _, err := io.ReadFull(r, buf[off:off+n]); err != nil {
			return err
		}
		if stall != nil {
			stall.Reset(j.f.cfg.PieceStall)
		}
		off += n
	}
	j.f.m.received.Add(float64(len(buf)))
	return nil
}

// handle takes in a piece request's outcome.
func (j *job) handle(ctx context.Context, r result) {
	i, node := r.req.piece, r.req.node
	j.untrack(r.req)
	h := j.holders[node]
	now := time.Now()
	switch {
	case r.err == nil:
		defer j.f.recycle(r.data) // WritePiece copied it
		if h != nil {
			h.fails = 0
		}
		j.f.m.pieces.WithLabelValues("peer").Inc()
		el := now.Sub(r.req.start)
		if j.pieceTime == 0 {
			j.pieceTime = el
		} else {
			j.pieceTime = (7*j.pieceTime + el) / 8
		}
		if j.b.Have(i) {
			j.f.m.wasted.Add(float64(len(r.data)))
			return
		}
		if err := j.b.WritePiece(i, r.data); err != nil {
			var pm *store.PieceMismatchError
			if errors.As(err, &pm) {
				j.f.m.badPieces.Inc()
				if h != nil && !h.complete && now.Sub(j.hashesAt) < relayGrace {
					// Maybe relayed in good faith: not blamed, but not
					// asked for this piece again.
					if h.bad == nil {
						h.bad = map[int]bool{}
					}
					h.bad[i] = true
					j.log.V(2).Info("A partial holder sent a piece that did not match its hash; not blamed yet", "piece", i, "from", node)
					return
				}
				j.f.ban(ctx, node, fmt.Sprintf("piece %d did not match the published piece hash", i))
				return
			}
			j.log.Error(err, "Storing a piece", "piece", i, "from", node)
			return
		}
		j.sources[i] = node
		j.lastPiece = now
		for _, other := range j.inflight[i] {
			other.cancel() // the duplicate lost the race
		}
	case ctx.Err() != nil || errors.Is(r.err, context.Canceled):
		// Cancelled by us (a duplicate that lost) or the fetch ends.
	case h == nil:
	case r.status == http.StatusTooManyRequests:
		h.backoffUntil = now.Add(minBusyBackoff + time.Duration(j.rng.IntN(int(minBusyBackoff))))
		j.f.m.busy.Inc()
	case r.status == http.StatusNotFound:
		// The holder no longer has the range: treat it as withdrawn
		// until the next lookup says otherwise.
		if h.complete {
			h.complete, h.pieces = false, nil
		} else {
			h.pieces.Clear(i) // the lookup's own copy
		}
	default:
		h.fails++
		h.backoffUntil = now.Add(min(time.Duration(1<<min(h.fails, 4))*250*time.Millisecond, 4*time.Second))
		j.log.V(2).Info("Piece request failed", "piece", i, "from", node, "err", r.err.Error())
	}
}

// untrack drops an ended request from the counts of requests in flight.
func (j *job) untrack(req *request) {
	rs := j.inflight[req.piece]
	if k := slices.Index(rs, req); k >= 0 {
		rs = slices.Delete(rs, k, k+1)
	}
	if len(rs) == 0 {
		delete(j.inflight, req.piece)
	} else {
		j.inflight[req.piece] = rs
	}
	j.perPeer[req.node]--
	j.requests--
	j.f.peerInflight.Add(-1)
}

// stuck reports whether the fetch has requests out and got no piece for
// StuckAfter, or for four times its usual piece time if that is longer
// (a slow link makes every piece slow). The holders of what it lacks
// cannot share it, like a node with a slow uplink that streamed the blob
// from upstream under its lease (the benchmark's faults scenario: the
// swarm crept at that node's tenth of a link for two minutes), and
// upstream is the way out.
func (j *job) stuck(now time.Time) bool {
	return j.requests > 0 && now.Sub(j.lastPiece) >= max(j.f.cfg.StuckAfter, 4*j.pieceTime)
}

// maybeUpstream starts the upstream stream when the mode and the lease
// allow it and the swarm cannot supply what is missing.
func (j *job) maybeUpstream(ctx context.Context, bm store.Bitmap, now time.Time) error {
	if j.upRunning || now.Before(j.upBackoff) {
		return nil
	}
	switch j.f.cfg.Mode {
	case Naive:
		j.startUpstream(ctx)
		return nil
	case SpegelLike:
		if !j.looked && j.lookupFails < lookupFailuresBeforeUpstream {
			return nil
		}
		complete := false
		for _, h := range j.holders {
			if h.complete && !j.f.blacklisted(h.node, now) {
				complete = true
			}
		}
		if !complete && j.requests == 0 {
			j.startUpstream(ctx)
		}
		return nil
	}
	if j.leaseHeld || j.directUpstream {
		j.startUpstream(ctx)
		return nil
	}
	if j.lookupFails >= lookupFailuresBeforeUpstream {
		j.log.Info("Trackers unreachable; fetching from upstream without a lease", "failures", j.lookupFails)
		j.directUpstream = true
		j.startUpstream(ctx)
		return nil
	}
	// Starving (nothing in flight and no holder has a missing piece) or
	// stuck. Asking again every leaseRetry is also how a stalled lease
	// moves here.
	if !j.looked || now.Sub(j.lastLeaseTry) < leaseRetry {
		return nil
	}
	if starving := j.requests == 0 && !j.holdersHaveMissing(bm, now); !starving && !j.stuck(now) {
		return nil
	}
	// Count this ask as a lease while it is out, so that fetches asking at
	// the same moment see it; a grant keeps the count.
	held := j.f.leases.Add(1) - 1
	granted := false
	defer func() {
		if !granted {
			j.f.leases.Add(-1)
		}
	}()
	if held > 0 {
		// This node streams another blob from upstream already (or is
		// asking for its lease): leave this lease a moment to the nodes
		// that stream none. On a cold start every node asks for every
		// blob's lease at once, and the node that won them all pulled
		// every blob through its one link while the others' links idled
		// (benchmark at B=R: one node held three of four leases, the
		// swarm ran at 74% of its link speed).
		if j.leaseWaitFrom.IsZero() {
			j.leaseWaitFrom = now
		}
		if now.Sub(j.leaseWaitFrom) < time.Duration(held)*j.f.cfg.LeaseDefer {
			return nil
		}
	}
	j.lastLeaseTry = now
	lctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	req := tracker.LeaseRequest{Digest: j.d.String(), Avoid: j.f.Blacklisted(), NoPeers: j.awaitHashes && !j.hashesKnown}
	g, err := j.f.cfg.Trackers.AcquireLease(lctx, req)
	cancel()
	if err != nil {
		j.log.V(2).Info("Could not ask for the upstream lease", "err", err.Error())
		return nil
	}
	if g.CompleteHolder != "" {
		// Our view was stale: someone finished meanwhile. Look again now.
		j.log.V(2).Info("Lease refused: a holder has the complete blob", "holder", g.CompleteHolder)
		j.lastLookup = time.Time{}
		return nil
	}
	if g.Granted {
		granted = true
		j.leaseHeld = true
		j.f.m.leases.Inc()
		j.log.V(2).Info("Granted the upstream lease")
		j.startUpstream(ctx)
	}
	return nil
}

// holdersHaveMissing reports whether some holder that is not blacklisted
// has a piece this node lacks and would take now.
func (j *job) holdersHaveMissing(bm store.Bitmap, now time.Time) bool {
	if j.awaitHashes && !j.hashesKnown {
		return false // and if no one ever verifies it, a stalled lease comes here
	}
	for _, h := range j.holders {
		if j.f.blacklisted(h.node, now) {
			continue
		}
		for i := range bm.Missing() {
			if h.has(i) {
				return true
			}
		}
	}
	return false
}

// startUpstream starts streaming the missing pieces from upstream.
func (j *job) startUpstream(ctx context.Context) {
	uctx, cancel := context.WithCancel(ctx)
	j.upRunning, j.upCancel = true, cancel
	go func() {
		err := j.streamUpstream(uctx)
		j.upDone <- err
	}()
}

// upstreamEnded handles the end of the upstream stream: a retryable
// failure is retried after a backoff, any other fails the fetch.
func (j *job) upstreamEnded(ctx context.Context, err error) error {
	j.upRunning = false
	j.upCancel()
	j.upPos.Store(-1)
	if err == nil || ctx.Err() != nil {
		j.upFails = 0
		return nil
	}
	var re *RetryError
	if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrUpstreamNotFound) {
		return fmt.Errorf("fetch %s from %s: %w", j.d, j.o, err)
	}
	if j.upFails++; j.upFails > maxUpstreamRetries {
		return fmt.Errorf("fetch %s from %s: giving up after %d attempts: %w", j.d, j.o, j.upFails, err)
	}
	wait := min(time.Duration(1<<min(j.upFails, 4))*250*time.Millisecond, 4*time.Second)
	if errors.As(err, &re) && re.After > wait {
		wait = min(re.After, 10*time.Second)
	}
	j.upBackoff = time.Now().Add(wait)
	j.f.m.upstreamRetries.Inc()
	j.log.Info("Upstream stream failed; retrying", "after", wait, "attempt", j.upFails, "err", err.Error())
	return nil
}

// streamUpstream reads the blob from upstream in order, from the first
// missing piece, writing every piece not yet present. It reopens past runs
// of pieces that peers supplied meanwhile.
func (j *job) streamUpstream(ctx context.Context) error {
	buf := make([]byte, j.ps)
	for {
		i := j.b.Bitmap().FirstMissing()
		if i < 0 {
			return nil
		}
		rc, err := j.f.cfg.Upstream.Open(ctx, j.o, j.d, int64(i)*j.ps)
		if err != nil {
			return err
		}
		err = j.copyFrom(ctx, rc, i, buf)
		_ = rc.Close()
		if err != nil {
			return err
		}
	}
}

// copyFrom writes pieces from i on as rc delivers them, returning when the
// blob's end is reached or two pieces ahead are already present.
func (j *job) copyFrom(ctx context.Context, rc io.Reader, i int, buf []byte) error {
	for ; i < j.n; i++ {
		if j.b.Have(i) && (i+1 >= j.n || j.b.Have(i+1)) {
			return nil // reopen at the next missing piece
		}
		j.upPos.Store(int64(i))
		n := min(j.ps, j.size-int64(i)*j.ps)
		if err := j.readFull(ctx, rc, buf[:n], nil, true); err != nil {
			return fmt.Errorf("read piece %d from upstream: %w", i, err)
		}
		j.f.m.upstreamBytes.Add(float64(n))
		if j.b.Have(i) {
			continue
		}
		if err := j.b.WritePiece(i, buf[:n]); err != nil {
			return fmt.Errorf("store piece %d from upstream: %w", i, err)
		}
		j.f.m.pieces.WithLabelValues(upstreamSource).Inc()
		j.upFails = 0
		select {
		case j.upProgress <- struct{}{}:
		default:
		}
	}
	return nil
}

// maybeAnnounce tells the trackers about new pieces, at most every
// AnnounceInterval, in the background.
func (j *job) maybeAnnounce(ctx context.Context, bm store.Bitmap, now time.Time) {
	if j.f.cfg.Mode != Swarm || now.Sub(j.lastAnnounce) < j.f.cfg.AnnounceInterval || j.stillAnnouncing() {
		return
	}
	c := bm.Count()
	if c == j.announced || c == 0 {
		return
	}
	j.announced, j.lastAnnounce = c, now
	done := make(chan struct{})
	j.announcing = done
	h := tracker.Holding{Digest: j.d.String(), Size: j.size, PieceSize: j.ps, Pieces: wireBitmap(bm), Leased: j.leaseHeld}
	go func() {
		defer close(done)
		actx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		if err := j.f.cfg.Trackers.Announce(actx, h); err != nil && ctx.Err() == nil {
			j.log.V(2).Info("Announcing progress failed", "err", err.Error())
		}
	}()
}

func (j *job) stillAnnouncing() bool {
	if j.announcing == nil {
		return false
	}
	select {
	case <-j.announcing:
		return false
	default:
		return true
	}
}

// commit verifies the complete blob. It returns done=true when the fetch
// is over (verified, or failed for good).
func (j *job) commit(ctx context.Context) (bool, error) {
	err := j.b.Commit()
	switch {
	case err == nil:
		j.finish(ctx)
		return true, nil
	case errors.Is(err, store.ErrDigestMismatch):
		j.f.m.mismatches.Inc()
		j.mismatches++
		peers := map[string]bool{}
		for i, s := range j.sources {
			if s != "" {
				peers[s] = true
			}
			j.sources[i] = ""
		}
		if j.f.cfg.Mode == Swarm {
			// Some peer corrupted a piece, and others may have relayed
			// it: there is no telling them apart without piece hashes,
			// so nobody is blamed, and peers are asked again only once a
			// node verified the blob and published them, when each piece
			// is checked on arrival (fetching from upstream goes on).
			j.awaitHashes = true
			// Ask the trackers for the hashes now, and for the lease only
			// once they answered without them: the lease is free when
			// its holder finished, which published the hashes first.
			j.looked, j.lastLookup = false, time.Time{}
		} else {
			// Whole blobs from verified holders: one of them lied.
			for p := range peers {
				j.f.ban(ctx, p, "supplied pieces of a blob whose digest did not match")
			}
		}
		j.hashesKnown = false
		j.announced = 0
		j.log.Info("Blob failed its digest check; fetching it again", "peers", len(peers), "attempt", j.mismatches)
		if j.mismatches >= maxMismatches {
			return true, fmt.Errorf("fetch %s: %w (%d times)", j.d, err, j.mismatches)
		}
		if len(peers) == 0 && (j.leaseHeld || j.directUpstream || j.f.cfg.Mode != Swarm) {
			// Every piece came from upstream.
			return true, fmt.Errorf("fetch %s from %s: upstream sent other content: %w", j.d, j.o, err)
		}
		return false, nil
	case errors.Is(err, store.ErrIncomplete):
		return false, nil
	default:
		return true, fmt.Errorf("fetch %s: verify: %w", j.d, err)
	}
}

// finish tells the trackers about a verified blob: its piece hashes (for
// later nodes), the complete holding, and the lease given back.
func (j *job) finish(ctx context.Context) {
	if j.f.cfg.Mode == Naive {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rpcTimeout)
	defer cancel()
	if j.announcing != nil {
		// A progress announcement landing after the complete one would
		// turn this node back into a partial holder.
		select {
		case <-j.announcing:
		case <-ctx.Done():
		}
	}
	if j.f.cfg.Mode == Swarm && !j.hashesKnown {
		if h, err := j.b.PieceHashes(); err == nil {
			if err := j.f.cfg.Trackers.PublishPieceHashes(ctx, j.d.String(), wireHashes(j.size, h)); err != nil {
				j.log.V(2).Info("Publishing piece hashes failed", "err", err.Error())
			}
		}
	}
	if err := j.f.cfg.Trackers.Announce(ctx, tracker.Holding{Digest: j.d.String(), Complete: true, Size: j.size}); err != nil {
		j.log.V(2).Info("Announcing the verified blob failed", "err", err.Error())
	}
}
