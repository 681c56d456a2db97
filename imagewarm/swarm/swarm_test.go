package swarm_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/shoal-io/shoal/imagewarm/blobserver"
	"github.com/shoal-io/shoal/imagewarm/placement"
	"github.com/shoal-io/shoal/imagewarm/store"
	"github.com/shoal-io/shoal/imagewarm/swarm"
	"github.com/shoal-io/shoal/imagewarm/tracker"
	"github.com/shoal-io/shoal/internal/metricstest"
)

// upstream is a registry serving one blob with Range, counting the bytes
// it sends.
type upstream struct {
	srv   *httptest.Server
	data  []byte
	desc  v1.Descriptor
	sent  atomic.Int64
	rate  int64 // bytes per second; 0 unthrottled
	fails atomic.Int32
}

func newUpstream(t *testing.T, size int, rate int64) *upstream {
	t.Helper()
	u := &upstream{data: make([]byte, size), rate: rate}
	r := rand.NewChaCha8([32]byte{byte(size)})
	_, _ = r.Read(u.data)
	sum := sha256.Sum256(u.data)
	u.desc = v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Size: int64(size)}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		if u.fails.Load() > 0 {
			u.fails.Add(-1)
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/blobs/"+u.desc.Digest.String()) {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(&countingWriter{ResponseWriter: w, u: u, ctx: r.Context()}, r, "", time.Time{}, bytes.NewReader(u.data))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// countingWriter counts (and optionally paces) the body an upstream sends.
type countingWriter struct {
	http.ResponseWriter
	u     *upstream
	ctx   context.Context
	start time.Time
	n     int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.start.IsZero() {
		c.start = time.Now()
	}
	total := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), 32<<10)]
		if c.u.rate > 0 {
			due := c.start.Add(time.Duration(float64(c.n+int64(len(chunk))) / float64(c.u.rate) * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-c.ctx.Done():
				return total, c.ctx.Err()
			}
		}
		n, err := c.ResponseWriter.Write(chunk)
		c.n += int64(n)
		c.u.sent.Add(int64(n))
		total += n
		if err != nil {
			return total, err
		}
		p = p[n:]
	}
	return total, nil
}

func (u *upstream) origin() swarm.Origin {
	return swarm.Origin{Registry: strings.TrimPrefix(u.srv.URL, "http://"), Repository: "bench/image", Insecure: true}
}

// node is one in-process swarm member: store, tracker, blob server and
// fetcher, served on a loopback httptest server.
type node struct {
	name    string
	dir     string
	store   *store.Store
	tracker *tracker.Tracker
	client  *tracker.Client
	fetcher *swarm.Fetcher
	reg     *prometheus.Registry
	srv     *httptest.Server
	poison  atomic.Bool
	// stall makes the node answer piece requests with headers and then
	// nothing, until the requester gives up; stalled counts them.
	stall, stalled atomic.Int32
}

type nodeOptions struct {
	mode       swarm.Mode
	maxUploads int
	egress     int64 // bytes per second each node uploads; 0 unpaced
	// egressOf, if set, overrides egress for the named node.
	egressOf   map[string]int64
	stuckAfter time.Duration
	pieceStall time.Duration
	leaseDefer time.Duration
}

// newSwarm starts n nodes that know each other.
func newSwarm(t *testing.T, n int, o nodeOptions) []*node {
	t.Helper()
	nodes := make([]*node, n)
	var members []placement.Member
	for i := range nodes {
		nd := &node{name: "node-" + string(rune('a'+i)), dir: t.TempDir()}
		nd.srv = httptest.NewUnstartedServer(nil)
		nd.srv.Start()
		t.Cleanup(nd.srv.Close)
		members = append(members, placement.Member{Name: nd.name, Endpoint: strings.TrimPrefix(nd.srv.URL, "http://")})
		nodes[i] = nd
	}
	mf := tracker.MembersFunc(func() []placement.Member { return members })
	for i, nd := range nodes {
		nd.start(t, members[i], mf, o)
	}
	return nodes
}

// start opens the node's store and serves it (again, after a restart).
func (nd *node) start(t *testing.T, self placement.Member, mf tracker.Membership, o nodeOptions) {
	t.Helper()
	var err error
	nd.store, err = store.Open(nd.dir, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = nd.store.Close() })
	nd.reg = prometheus.NewRegistry()
	if nd.tracker == nil {
		nd.tracker, err = tracker.New(tracker.Config{})
		require.NoError(t, err)
	}
	nd.client, err = tracker.NewClient(tracker.ClientConfig{Self: self, Members: mf, Local: nd.tracker})
	require.NoError(t, err)
	egress := o.egress
	if e, ok := o.egressOf[nd.name]; ok {
		egress = e
	}
	bs, err := blobserver.New(blobserver.Options{Store: nd.store, MaxPeerUploads: o.maxUploads, EgressBytesPerSecond: egress})
	require.NoError(t, err)
	nd.fetcher, err = swarm.New(swarm.Config{Self: nd.name, Store: nd.store, Trackers: nd.client, Upstream: &swarm.Registry{},
		Mode: o.mode, Poll: 50 * time.Millisecond, AnnounceInterval: 50 * time.Millisecond, PieceStall: o.pieceStall, LeaseDefer: o.leaseDefer, StuckAfter: o.stuckAfter,
		Registerer: nd.reg})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(tracker.DefaultPathPrefix+"/", nd.tracker.Handler(tracker.DefaultPathPrefix))
	peer := bs.Handler(blobserver.Peer)
	mux.Handle("/v2/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if nd.poison.Load() {
			peer.ServeHTTP(&flipWriter{ResponseWriter: w}, r)
			return
		}
		if nd.stall.Load() != 0 {
			nd.stalled.Add(1)
			w.WriteHeader(http.StatusPartialContent)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		peer.ServeHTTP(w, r)
	}))
	nd.srv.Config.Handler = mux
}

// flipWriter corrupts the first byte of every body write.
type flipWriter struct{ http.ResponseWriter }

func (f *flipWriter) Write(p []byte) (int, error) {
	q := bytes.Clone(p)
	if len(q) > 0 {
		q[0] ^= 0xff
	}
	return f.ResponseWriter.Write(q)
}

// counter sums the samples of the node's metric name that carry labels.
func (nd *node) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.Sum(t, nd.reg, name, labels)
}

// requireVerified checks that the node holds the blob, verified, with the
// upstream's content.
func requireVerified(t *testing.T, nd *node, u *upstream) {
	t.Helper()
	b, err := nd.store.Get(u.desc.Digest)
	require.NoError(t, err, nd.name)
	defer func() { _ = b.Close() }()
	require.True(t, b.Verified(), nd.name)
	got := make([]byte, b.Size())
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(u.data, got), "%s holds other bytes", nd.name)
}

func fetchAll(t *testing.T, nodes []*node, u *upstream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	for _, nd := range nodes {
		g.Go(func() error { return nd.fetcher.Fetch(ctx, u.desc, u.origin()) })
	}
	require.NoError(t, g.Wait())
	for _, nd := range nodes {
		requireVerified(t, nd, u)
	}
}

func TestPieceSizeFor(t *testing.T) {
	for _, tc := range []struct{ size, want int64 }{
		{1, 1 << 20}, {256 << 20, 1 << 20}, {257 << 20, 2 << 20}, {1 << 30, 4 << 20}, {4 << 30, 16 << 20}, {100 << 30, 16 << 20},
	} {
		require.Equal(t, tc.want, swarm.PieceSizeFor(tc.size), "size %d", tc.size)
	}
}

func TestSwarmColdFetchesUpstreamOnce(t *testing.T) {
	u := newUpstream(t, 6<<20+12345, 12<<20)
	nodes := newSwarm(t, 6, nodeOptions{})
	fetchAll(t, nodes, u)
	// One lease, one upstream copy (α = 1): every other node got its
	// pieces from peers.
	require.Equal(t, u.desc.Size, u.sent.Load(), "upstream bytes")
	var leases, fromPeers float64
	for _, nd := range nodes {
		leases += nd.counter(t, "shoal_agent_swarm_upstream_leases_total", nil)
		fromPeers += nd.counter(t, "shoal_agent_swarm_pieces_total", map[string]string{"source": "peer"})
	}
	require.Equal(t, 1.0, leases)
	// The 5 nodes without the lease got all 7 pieces each from peers.
	require.GreaterOrEqual(t, fromPeers, float64(5*7))
}

func TestNaiveFetchesUpstreamPerNode(t *testing.T) {
	u := newUpstream(t, 3<<20, 0)
	nodes := newSwarm(t, 3, nodeOptions{mode: swarm.Naive})
	fetchAll(t, nodes, u)
	require.Equal(t, 3*u.desc.Size, u.sent.Load())
}

func TestSpegelLikeServesOnlyCompleteBlobs(t *testing.T) {
	u := newUpstream(t, 3<<20, 0)
	nodes := newSwarm(t, 3, nodeOptions{mode: swarm.SpegelLike})
	fetchAll(t, nodes[:1], u)
	require.Equal(t, u.desc.Size, u.sent.Load())
	// Once one node has it complete, the others take it from the peer.
	fetchAll(t, nodes[1:], u)
	require.Equal(t, u.desc.Size, u.sent.Load())
}

// TestDigestMismatchAwaitsHashes: a holder serves corrupted bytes and no
// piece hashes are known. The blob fails its digest; nobody is blamed (a
// relay could not be told from the corrupter), and the node takes no more
// peer pieces until the blob can be checked piece by piece: it fetches it
// from upstream, verifies it and publishes the hashes. A later node checks
// each piece on arrival and blacklists only the corrupting holder.
func TestDigestMismatchAwaitsHashes(t *testing.T) {
	u := newUpstream(t, 3<<20, 0)
	nodes := newSwarm(t, 3, nodeOptions{})
	bad, first, later := nodes[0], nodes[1], nodes[2]
	// The bad node holds the blob (verified) and announces it without
	// publishing piece hashes.
	b, err := bad.store.Begin(u.desc.Digest, u.desc.Size, swarm.PieceSizeFor(u.desc.Size))
	require.NoError(t, err)
	for i := range b.NumPieces() {
		off := int64(i) * b.PieceSize()
		require.NoError(t, b.WritePiece(i, u.data[off:min(off+b.PieceSize(), int64(len(u.data)))]))
	}
	require.NoError(t, b.Commit())
	require.NoError(t, b.Close())
	require.NoError(t, bad.client.Announce(context.Background(), tracker.Holding{Digest: u.desc.Digest.String(), Complete: true, Size: u.desc.Size}))
	bad.poison.Store(true)

	fetchAll(t, []*node{first}, u)
	require.Empty(t, first.fetcher.Blacklisted(), "no piece hashes: nobody to blame")
	require.Equal(t, 1.0, first.counter(t, "shoal_agent_swarm_digest_mismatches_total", nil))
	require.Equal(t, u.desc.Size, u.sent.Load(), "the refetch came from upstream")

	fetchAll(t, []*node{later}, u)
	require.Zero(t, later.counter(t, "shoal_agent_swarm_digest_mismatches_total", nil))
	if later.counter(t, "shoal_agent_swarm_bad_pieces_total", nil) > 0 {
		require.Equal(t, []string{bad.name}, later.fetcher.Blacklisted())
	}
	require.Equal(t, u.desc.Size, u.sent.Load(), "the later node fetched from peers")
}

// TestPieceHashesCatchPoisonedPeer: once piece hashes are published, a
// corrupted piece is rejected on arrival and its sender blacklisted.
func TestPieceHashesCatchPoisonedPeer(t *testing.T) {
	u := newUpstream(t, 4<<20, 0)
	nodes := newSwarm(t, 4, nodeOptions{})
	fetchAll(t, nodes[:2], u) // both verified; hashes published
	nodes[0].poison.Store(true)
	fetchAll(t, nodes[2:], u)
	var bad float64
	for _, nd := range nodes[2:] {
		bad += nd.counter(t, "shoal_agent_swarm_bad_pieces_total", nil)
		if nd.counter(t, "shoal_agent_swarm_bad_pieces_total", nil) > 0 {
			require.Contains(t, nd.fetcher.Blacklisted(), nodes[0].name)
		}
		require.Zero(t, nd.counter(t, "shoal_agent_swarm_digest_mismatches_total", nil), nd.name)
	}
	require.Positive(t, bad, "someone asked the poisoned peer")
}

// TestRelayNotBlamedWithinGrace: a partial holder serves a bad piece, as
// an honest node would that relayed it before the piece hashes were
// published. The node that catches it takes the piece from elsewhere (here
// upstream, under the lease) and never asks the holder for it again, but
// does not blacklist it: the holder drops the piece at its own next lookup.
func TestRelayNotBlamedWithinGrace(t *testing.T) {
	u := newUpstream(t, 3<<20, 0)
	nodes := newSwarm(t, 2, nodeOptions{})
	relay, later := nodes[0], nodes[1]
	ps := swarm.PieceSizeFor(u.desc.Size)
	b, err := relay.store.Begin(u.desc.Digest, u.desc.Size, ps)
	require.NoError(t, err)
	held := tracker.NewBitmap(b.NumPieces())
	var sums []byte
	for i := range b.NumPieces() {
		piece := bytes.Clone(u.data[int64(i)*ps : min(int64(i+1)*ps, u.desc.Size)])
		sum := sha256.Sum256(piece)
		sums = append(sums, sum[:]...)
		if i == 0 {
			piece[0] ^= 0xff
		}
		require.NoError(t, b.WritePiece(i, piece))
		held.Set(i)
	}
	require.NoError(t, b.Close())
	ctx := context.Background()
	d := u.desc.Digest.String()
	require.NoError(t, relay.client.Announce(ctx, tracker.Holding{Digest: d, Size: u.desc.Size, PieceSize: ps, Pieces: held}))
	require.NoError(t, relay.client.PublishPieceHashes(ctx, d, tracker.PieceHashes{Size: u.desc.Size, PieceSize: ps, Sums: sums}))

	fetchAll(t, []*node{later}, u)
	require.Equal(t, 1.0, later.counter(t, "shoal_agent_swarm_bad_pieces_total", nil), "piece 0 was asked of the relay once")
	require.Empty(t, later.fetcher.Blacklisted())
	require.Positive(t, u.sent.Load(), "piece 0 came from upstream")
	require.Zero(t, later.counter(t, "shoal_agent_swarm_digest_mismatches_total", nil))
}

// TestSlowOnlyHolderSendsUpstream: the rest of a blob is only on a holder
// with a slow uplink (a node that streamed it under its lease). Once no
// piece has come for StuckAfter, the node takes the lease and fetches the
// rest from upstream instead of creeping along.
func TestSlowOnlyHolderSendsUpstream(t *testing.T) {
	u := newUpstream(t, 6<<20, 0)
	nodes := newSwarm(t, 3, nodeOptions{egressOf: map[string]int64{"node-b": 64 << 10}, stuckAfter: time.Second})
	fast, slow, later := nodes[0], nodes[1], nodes[2]
	ps := swarm.PieceSizeFor(u.desc.Size)
	ctx := context.Background()
	d := u.desc.Digest.String()
	// slow holds the blob verified; fast holds its first half.
	for _, nd := range []*node{slow, fast} {
		b, err := nd.store.Begin(u.desc.Digest, u.desc.Size, ps)
		require.NoError(t, err)
		held := tracker.NewBitmap(b.NumPieces())
		for i := range b.NumPieces() {
			if nd == fast && i >= b.NumPieces()/2 {
				break
			}
			require.NoError(t, b.WritePiece(i, u.data[int64(i)*ps:min(int64(i+1)*ps, u.desc.Size)]))
			held.Set(i)
		}
		h := tracker.Holding{Digest: d, Size: u.desc.Size, PieceSize: ps, Pieces: held}
		if nd == slow {
			require.NoError(t, b.Commit())
			h = tracker.Holding{Digest: d, Size: u.desc.Size, Complete: true}
		}
		require.NoError(t, b.Close())
		require.NoError(t, nd.client.Announce(ctx, h))
	}

	fetchAll(t, []*node{later}, u)
	require.Equal(t, 1.0, later.counter(t, "shoal_agent_swarm_upstream_leases_total", nil), "no lease taken")
	require.Positive(t, later.counter(t, "shoal_agent_swarm_pieces_total", map[string]string{"source": "upstream"}))
}

// TestPieceStall: a holder that answers and then sends nothing is given
// up on after PieceStall and the pieces come from the other holder, while
// a holder that sends slowly but steadily is kept, however long a piece
// takes.
func TestPieceStall(t *testing.T) {
	const stall = 300 * time.Millisecond
	t.Run("silent holder given up", func(t *testing.T) {
		u := newUpstream(t, 3<<20, 0)
		nodes := newSwarm(t, 3, nodeOptions{pieceStall: stall})
		fetchAll(t, nodes[:2], u)
		nodes[0].stall.Store(1)
		fetchAll(t, nodes[2:], u)
		requireVerified(t, nodes[2], u)
		require.Positive(t, nodes[0].stalled.Load(), "the silent holder was asked")
		require.Equal(t, u.desc.Size, u.sent.Load(), "one upstream copy")
	})
	t.Run("slow holder kept", func(t *testing.T) {
		u := newUpstream(t, 3<<20, 0)
		// 1 MiB pieces at 1 MiB/s shared by two requests: 2 s a piece,
		// and a chunk every 0.1 s.
		nodes := newSwarm(t, 2, nodeOptions{pieceStall: stall, egress: 1 << 20})
		fetchAll(t, nodes[:1], u)
		fetchAll(t, nodes[1:], u)
		requireVerified(t, nodes[1], u)
		require.Equal(t, u.desc.Size, u.sent.Load(), "every piece came from the slow holder")
	})
}

// TestBusyHolderAnswers429: with an upload cap of one (and uploads paced
// so that they overlap), requesters get 429 with Retry-After, back off,
// and still all finish.
func TestBusyHolderAnswers429(t *testing.T) {
	u := newUpstream(t, 4<<20, 0)
	nodes := newSwarm(t, 5, nodeOptions{maxUploads: 1, egress: 16 << 20})
	fetchAll(t, nodes[:1], u)
	fetchAll(t, nodes[1:], u)
	var busy float64
	for _, nd := range nodes[1:] {
		busy += nd.counter(t, "shoal_agent_swarm_busy_answers_total", nil)
	}
	require.Positive(t, busy)
}

// TestUpstreamRetriesAfter503: the lease holder's stream survives a
// registry answering 503 for a while.
func TestUpstreamRetriesAfter503(t *testing.T) {
	u := newUpstream(t, 2<<20, 0)
	u.fails.Store(3)
	nodes := newSwarm(t, 2, nodeOptions{})
	fetchAll(t, nodes, u)
	var retries float64
	for _, nd := range nodes {
		retries += nd.counter(t, "shoal_agent_swarm_upstream_retries_total", nil)
	}
	require.Positive(t, retries)
}

// TestResumeAfterRestart: a fetch cut halfway resumes from the pieces on
// disk; upstream sends little more than one copy in all.
func TestResumeAfterRestart(t *testing.T) {
	u := newUpstream(t, 8<<20, 8<<20) // 1 s
	nodes := newSwarm(t, 1, nodeOptions{})
	nd := nodes[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = nd.fetcher.Fetch(ctx, u.desc, u.origin())
	}()
	require.Eventually(t, func() bool {
		h, err := nd.store.Stat(u.desc.Digest)
		return err == nil && h.Bitmap.Count() >= 4
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	wg.Wait()
	nd.fetcher.Close() // the flight has stopped writing: the store may close
	before := u.sent.Load()
	require.Less(t, before, u.desc.Size)

	require.NoError(t, nd.store.Close())
	nd.start(t, placement.Member{Name: nd.name, Endpoint: strings.TrimPrefix(nd.srv.URL, "http://")},
		tracker.MembersFunc(func() []placement.Member {
			return []placement.Member{{Name: nd.name, Endpoint: strings.TrimPrefix(nd.srv.URL, "http://")}}
		}), nodeOptions{})
	fetchAll(t, []*node{nd}, u)
	require.LessOrEqual(t, u.sent.Load(), u.desc.Size+(1<<20), "resumed instead of starting over (sent %d before the restart)", before)
}

// TestLeasesSpreadOverNodes: three nodes warm three blobs at once. A node
// that holds one upstream lease leaves the others a moment to nodes that
// hold none, so the blobs stream from upstream through different nodes'
// links instead of one node pulling them all.
func TestLeasesSpreadOverNodes(t *testing.T) {
	ups := []*upstream{newUpstream(t, 3<<20+1, 1<<20), newUpstream(t, 3<<20+2, 1<<20), newUpstream(t, 3<<20+3, 1<<20)}
	// Deferring as long as a blob takes to stream leaves the other nodes
	// time to ask however slowly the machine runs the test.
	nodes := newSwarm(t, 3, nodeOptions{leaseDefer: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	for _, nd := range nodes {
		for _, u := range ups {
			g.Go(func() error { return nd.fetcher.Fetch(ctx, u.desc, u.origin()) })
		}
	}
	require.NoError(t, g.Wait())
	holders := 0
	for _, nd := range nodes {
		for _, u := range ups {
			requireVerified(t, nd, u)
		}
		if nd.counter(t, "shoal_agent_swarm_upstream_leases_total", nil) > 0 {
			holders++
		}
	}
	for _, u := range ups {
		require.Equal(t, u.desc.Size, u.sent.Load(), "one upstream copy of each blob")
	}
	require.GreaterOrEqual(t, holders, 2, "nodes that streamed from upstream")
}

// TestCancelledFetchFreesRequestSlots: a fetch that ends with piece
// requests out (here cancelled by its caller while the only holder sends
// nothing) gives their slots back, so the node's later fetches still ask
// peers. The slots used to leak, and a node that had leaked MaxInflight of
// them never sent a piece request again.
func TestCancelledFetchFreesRequestSlots(t *testing.T) {
	u := newUpstream(t, 3<<20, 0)
	nodes := newSwarm(t, 2, nodeOptions{pieceStall: time.Minute})
	holder, later := nodes[0], nodes[1]
	fetchAll(t, []*node{holder}, u)
	holder.stall.Store(1)
	const inflight = "shoal_agent_swarm_piece_requests_in_flight"
	for round := range swarm.DefaultMaxInflight {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		asked := holder.stalled.Load()
		go func() { done <- later.fetcher.Fetch(ctx, u.desc, u.origin()) }()
		require.Eventually(t, func() bool { return holder.stalled.Load() > asked }, 10*time.Second, 10*time.Millisecond,
			"round %d: the holder was never asked", round)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Eventually(t, func() bool { return later.counter(t, inflight, nil) == 0 }, 10*time.Second, 10*time.Millisecond,
			"round %d: piece requests still counted in flight after the fetch ended", round)
	}
	holder.stall.Store(0)
	fetchAll(t, []*node{later}, u)
	require.Equal(t, u.desc.Size, u.sent.Load(), "the later node fetched from the holder, not upstream")
	require.Zero(t, later.counter(t, inflight, nil))
}
