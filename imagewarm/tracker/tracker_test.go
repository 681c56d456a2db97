package tracker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/imagewarm/tracker"
	"github.com/shoal-io/shoal/internal/metricstest"
)

// t0 is the fake clocks' start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// digest returns a distinct sha256 digest for i.
func digest(i int) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(i)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// newTracker returns a tracker on a fake clock with its metrics registry.
func newTracker(t *testing.T, cfg tracker.Config) (*tracker.Tracker, *clocktesting.FakeClock, *prometheus.Registry) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	cfg.Clock = clk
	cfg.Registerer = reg
	tr, err := tracker.New(cfg)
	require.NoError(t, err)
	return tr, clk, reg
}

// complete returns a complete announcement of d by node in zone.
func complete(d, node, zone string) tracker.Announcement {
	return tracker.Announcement{Digest: d, Node: node, Endpoint: node + ":9480", Zone: zone, Complete: true, Size: 100}
}

// partial returns a partial announcement of d by node in zone: a blob of
// 10 pieces of 10 bytes, of which the first have ones.
func partial(d, node, zone string, have int) tracker.Announcement {
	bm := tracker.NewBitmap(10)
	for i := range have {
		bm.Set(i)
	}
	return tracker.Announcement{Digest: d, Node: node, Endpoint: node + ":9480", Zone: zone, Size: 100, PieceSize: 10, Pieces: bm}
}

// nodesOf returns the holders' node names.
func nodesOf(hs []tracker.Holder) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Node
	}
	return out
}

// lookup looks d up as node in zone and fails the test on error.
func lookup(t *testing.T, tr *tracker.Tracker, d, node, zone string) tracker.LookupResult {
	t.Helper()
	res, err := tr.Lookup(tracker.LookupRequest{Digest: d, Node: node, Zone: zone})
	require.NoError(t, err)
	return res
}

func TestBitmap(t *testing.T) {
	bm := tracker.NewBitmap(10)
	require.Len(t, bm, 2)
	bm.Set(0)
	bm.Set(9)
	bm.Set(16) // beyond the bytes: ignored
	bm.Set(-1)
	require.Equal(t, tracker.Bitmap{0x80, 0x40}, bm)
	require.True(t, bm.Has(0))
	require.True(t, bm.Has(9))
	require.False(t, bm.Has(1))
	require.False(t, bm.Has(16))
	require.Equal(t, 2, bm.Count())
	require.Equal(t, int64(3), tracker.PieceCount(21, 10))
	require.Equal(t, int64(0), tracker.PieceCount(0, 10))
}

func TestAnnounceValidation(t *testing.T) {
	d := digest(1)
	tests := []struct {
		name    string
		mutate  func(a *tracker.Announcement)
		wantErr string
	}{
		{name: "valid partial", mutate: func(*tracker.Announcement) {}},
		{name: "no digest", mutate: func(a *tracker.Announcement) { a.Digest = "" }, wantErr: "digest must be"},
		{name: "digest without algorithm", mutate: func(a *tracker.Announcement) { a.Digest = ":abc" }, wantErr: "not algorithm:encoded"},
		{name: "digest without colon", mutate: func(a *tracker.Announcement) { a.Digest = "sha256" }, wantErr: "not algorithm:encoded"},
		{name: "digest with a slash", mutate: func(a *tracker.Announcement) { a.Digest = "sha256:../x" }, wantErr: "not algorithm:encoded"},
		{name: "no node", mutate: func(a *tracker.Announcement) { a.Node = "" }, wantErr: "node name must be"},
		{name: "endpoint not host:port", mutate: func(a *tracker.Announcement) { a.Endpoint = "n1" }, wantErr: "not host:port"},
		{name: "negative size", mutate: func(a *tracker.Announcement) { a.Size = -1 }, wantErr: "negative"},
		{name: "partial without piece size", mutate: func(a *tracker.Announcement) { a.PieceSize = 0 }, wantErr: "must be positive"},
		{name: "bitmap too short", mutate: func(a *tracker.Announcement) { a.Pieces = a.Pieces[:1] }, wantErr: "bitmap is 1 bytes, want 2 for 10 pieces"},
		{name: "bits past the last piece", mutate: func(a *tracker.Announcement) { a.Pieces.Set(10) }, wantErr: "bits set beyond its 10 pieces"},
		{name: "too many pieces", mutate: func(a *tracker.Announcement) { a.Size = 1 << 40; a.PieceSize = 1 }, wantErr: "at most 65536"},
		{name: "complete with a bitmap", mutate: func(a *tracker.Announcement) { a.Complete = true }, wantErr: "carries no piece bitmap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTracker(t, tracker.Config{})
			a := partial(d, "n1", "z1", 3)
			tc.mutate(&a)
			err := tr.Announce(a)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tracker.ErrInvalid)
			require.ErrorContains(t, err, tc.wantErr)
			require.Zero(t, tr.Stats().Digests, "nothing recorded")
		})
	}
}

func TestLookupHandout(t *testing.T) {
	d := digest(1)
	tests := []struct {
		name     string
		announce []tracker.Announcement
		req      tracker.LookupRequest
		// wantTiers are the expected holders, group by group: order within
		// a group is random.
		wantTiers             [][]string
		wantComplete, wantPar int
	}{
		{name: "unknown digest", req: tracker.LookupRequest{Digest: d}},
		{
			name:      "complete before partial, asker excluded",
			announce:  []tracker.Announcement{partial(d, "p1", "", 5), complete(d, "c1", ""), complete(d, "asker", ""), partial(d, "p2", "", 1)},
			req:       tracker.LookupRequest{Digest: d, Node: "asker"},
			wantTiers: [][]string{{"c1"}, {"p1", "p2"}}, wantComplete: 1, wantPar: 2,
		},
		{
			name: "same zone first within each group",
			announce: []tracker.Announcement{
				complete(d, "c-far", "z2"), complete(d, "c-near", "z1"), partial(d, "p-far", "z2", 9), partial(d, "p-near", "z1", 1),
			},
			req:       tracker.LookupRequest{Digest: d, Zone: "z1"},
			wantTiers: [][]string{{"c-near"}, {"c-far"}, {"p-near"}, {"p-far"}}, wantComplete: 2, wantPar: 2,
		},
		{
			name: "limit keeps the best groups",
			announce: []tracker.Announcement{
				complete(d, "c1", "z2"), complete(d, "c2", "z2"), complete(d, "c3", "z1"), partial(d, "p1", "z1", 3),
			},
			req:       tracker.LookupRequest{Digest: d, Zone: "z1", Limit: 2},
			wantTiers: [][]string{{"c3"}, {"c1", "c2"}}, wantComplete: 3, wantPar: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTracker(t, tracker.Config{})
			for _, a := range tc.announce {
				require.NoError(t, tr.Announce(a))
			}
			res, err := tr.Lookup(tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.wantComplete, res.Complete)
			require.Equal(t, tc.wantPar, res.Partial)
			require.Equal(t, 1, res.Lease.Max)
			got := nodesOf(res.Holders)
			for _, tier := range tc.wantTiers {
				n := min(len(tier), len(got))
				if n == 0 {
					break
				}
				require.Subset(t, tier, got[:n], "holders %v", got)
				got = got[n:]
			}
			require.Empty(t, got, "no extra holders")
		})
	}

	t.Run("partial holders carry their bitmaps", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{})
		a := partial(d, "p1", "", 3)
		require.NoError(t, tr.Announce(a))
		a.Pieces.Set(9) // the tracker kept its own copy
		res := lookup(t, tr, d, "", "")
		require.Len(t, res.Holders, 1)
		h := res.Holders[0]
		require.Equal(t, tracker.Bitmap{0xe0, 0x00}, h.Pieces)
		require.Equal(t, int64(10), h.PieceSize)
		require.Equal(t, int64(100), h.Size)
		require.Equal(t, "p1:9480", h.Endpoint)
		require.Equal(t, t0, h.LastAnnounce)
	})

	t.Run("handout is capped and random", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{})
		const holders = 4 * tracker.DefaultMaxHandout
		for i := range holders {
			require.NoError(t, tr.Announce(complete(d, fmt.Sprintf("c%03d", i), "z1")))
		}
		seen := map[string]bool{}
		sets := map[string]bool{}
		for range 20 {
			res := lookup(t, tr, d, "", "z1")
			require.Len(t, res.Holders, tracker.DefaultMaxHandout)
			require.Equal(t, holders, res.Complete)
			names := nodesOf(res.Holders)
			for _, n := range names {
				seen[n] = true
			}
			slices.Sort(names)
			sets[fmt.Sprint(names)] = true
		}
		// 20 draws of a quarter: the same set twice, or fewer than three
		// quarters of the holders ever handed out, would mean the handout
		// is not random.
		require.Len(t, sets, 20)
		require.Greater(t, len(seen), holders*3/4)
	})
}

func TestSoftStateTTL(t *testing.T) {
	d := digest(1)
	tr, clk, _ := newTracker(t, tracker.Config{})
	require.Equal(t, 3*time.Minute, tracker.DefaultTTL)
	require.NoError(t, tr.Announce(complete(d, "a", "")))
	require.NoError(t, tr.Announce(complete(d, "b", "")))

	clk.Step(tracker.DefaultTTL - time.Minute)
	require.NoError(t, tr.Announce(complete(d, "b", ""))) // b re-announces, a does not
	clk.Step(time.Minute)
	require.ElementsMatch(t, []string{"a", "b"}, nodesOf(lookup(t, tr, d, "", "").Holders), "exactly TTL old: still there")

	clk.Step(time.Second)
	require.Equal(t, []string{"b"}, nodesOf(lookup(t, tr, d, "", "").Holders), "a expired")

	clk.Step(tracker.DefaultTTL)
	tr.Expire()
	require.Empty(t, lookup(t, tr, d, "", "").Holders)
	require.Equal(t, tracker.Stats{}, tr.Stats(), "Expire freed the digest")
}

// TestOvertakenAnnouncement shows that an announcement read before the
// one a tracker has from the same node is ignored, whatever order they
// arrive in; an unstamped one always counts.
func TestOvertakenAnnouncement(t *testing.T) {
	d := digest(1)
	stamped := func(a tracker.Announcement, readAt int64) tracker.Announcement {
		a.ReadAt = readAt
		return a
	}
	tests := []struct {
		name         string
		first, then  tracker.Announcement
		wantComplete bool
		wantPieces   int
	}{
		{"late partial ignored", stamped(complete(d, "a", ""), 20), stamped(partial(d, "a", "", 9), 10), true, 0},
		{"newer partial counts", stamped(complete(d, "a", ""), 10), stamped(partial(d, "a", "", 9), 20), false, 9},
		{"late fewer pieces ignored", stamped(partial(d, "a", "", 5), 20), stamped(partial(d, "a", "", 3), 10), false, 5},
		{"unstamped counts", stamped(complete(d, "a", ""), 20), partial(d, "a", "", 4), false, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTracker(t, tracker.Config{})
			require.NoError(t, tr.Announce(tc.first))
			require.NoError(t, tr.Announce(tc.then))
			hs := lookup(t, tr, d, "", "").Holders
			require.Len(t, hs, 1)
			require.Equal(t, tc.wantComplete, hs[0].Complete)
			require.Equal(t, tc.wantPieces, hs[0].Pieces.Count())
		})
	}
}

func TestWithdrawAndForget(t *testing.T) {
	d1, d2 := digest(1), digest(2)
	tests := []struct {
		name   string
		act    func(tr *tracker.Tracker)
		wantD1 []string
		wantD2 []string
	}{
		{name: "nothing", act: func(*tracker.Tracker) {}, wantD1: []string{"a", "b"}, wantD2: []string{"a"}},
		{name: "withdraw one digest", act: func(tr *tracker.Tracker) { tr.Withdraw(d1, "a") }, wantD1: []string{"b"}, wantD2: []string{"a"}},
		{name: "withdraw unknown", act: func(tr *tracker.Tracker) { tr.Withdraw(digest(3), "a"); tr.Withdraw(d1, "zz") }, wantD1: []string{"a", "b"}, wantD2: []string{"a"}},
		{name: "forget a node", act: func(tr *tracker.Tracker) { tr.ForgetNode("a") }, wantD1: []string{"b"}, wantD2: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTracker(t, tracker.Config{})
			require.NoError(t, tr.Announce(complete(d1, "a", "")))
			require.NoError(t, tr.Announce(partial(d1, "b", "", 2)))
			require.NoError(t, tr.Announce(complete(d2, "a", "")))
			tc.act(tr)
			require.ElementsMatch(t, tc.wantD1, nodesOf(lookup(t, tr, d1, "", "").Holders))
			require.ElementsMatch(t, tc.wantD2, nodesOf(lookup(t, tr, d2, "", "").Holders))
			if tc.wantD2 == nil {
				require.Equal(t, 1, tr.Stats().Digests, "an empty digest is dropped")
			}
		})
	}
}

func TestLeases(t *testing.T) {
	d := digest(1)
	// acquire asks for the lease and checks the answer.
	ask := func(t *testing.T, tr *tracker.Tracker, req tracker.LeaseRequest, want bool) tracker.LeaseGrant {
		t.Helper()
		req.Digest = d
		g, err := tr.AcquireLease(req)
		require.NoError(t, err)
		require.Equal(t, want, g.Granted, "lease for %s: %+v", req.Node, g)
		return g
	}
	acquire := func(t *testing.T, tr *tracker.Tracker, node string, want bool) tracker.LeaseGrant {
		t.Helper()
		return ask(t, tr, tracker.LeaseRequest{Node: node}, want)
	}
	const stall = tracker.DefaultStallTimeout

	t.Run("one lease; the others learn who holds it", func(t *testing.T) {
		tr, _, reg := newTracker(t, tracker.Config{})
		g := acquire(t, tr, "a", true)
		require.Equal(t, 1, g.Lease.Max)
		require.True(t, g.Lease.Held("a"))
		g = acquire(t, tr, "b", false)
		require.Len(t, g.Lease.Holders, 1)
		require.Equal(t, tracker.LeaseHolder{Node: "a", Since: t0, LastProgress: t0}, g.Lease.Holders[0])
		acquire(t, tr, "a", true) // asking again keeps it
		require.Equal(t, 1.0, leaseCount(t, reg, "granted"))
		require.Equal(t, 1.0, leaseCount(t, reg, "held"))
		require.Equal(t, 1.0, leaseCount(t, reg, "denied"))
	})

	t.Run("a lease held by a node the asker avoids does not count for it", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{})
		acquire(t, tr, "bad", true)
		// b found bad's data bad: bad's lease is of no use to it.
		g := ask(t, tr, tracker.LeaseRequest{Node: "b", Avoid: []string{"bad"}}, true)
		require.True(t, g.Lease.Held("bad") && g.Lease.Held("b"), "%+v", g.Lease)
		// c avoids bad too, but b's lease serves it: no third.
		g = ask(t, tr, tracker.LeaseRequest{Node: "c", Avoid: []string{"bad"}}, false)
		require.Len(t, g.Lease.Holders, 2)
		acquire(t, tr, "d", false) // shunning nobody, d waits for the holders
	})

	t.Run("a tracker learns a lease another granted from its holder", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{})
		a := partial(d, "a", "", 3)
		a.Leased = true
		require.NoError(t, tr.Announce(a))
		g := acquire(t, tr, "b", false)
		require.Equal(t, []tracker.LeaseHolder{{Node: "a", Since: t0, LastProgress: t0, Pieces: 3}}, g.Lease.Holders)
		acquire(t, tr, "a", true)
		a.Complete, a.Pieces = true, nil
		require.NoError(t, tr.Announce(a))
		// Complete: the lease ended, and b should fetch from a.
		require.Empty(t, acquire(t, tr, "b", false).Lease.Holders)
	})

	t.Run("a complete holder refuses a new lease unless avoided", func(t *testing.T) {
		tr, clk, reg := newTracker(t, tracker.Config{})
		require.NoError(t, tr.Announce(complete(d, "a", "")))
		g := acquire(t, tr, "b", false)
		require.Equal(t, "a", g.CompleteHolder, "the grant says whom to fetch from")
		require.Equal(t, 1.0, leaseCount(t, reg, "denied"))
		// b blacklisted a, or cannot check anyone's pieces yet.
		ask(t, tr, tracker.LeaseRequest{Node: "b", Avoid: []string{"a"}}, true)
		tr.ReleaseLease(d, "b")
		ask(t, tr, tracker.LeaseRequest{Node: "b", NoPeers: true}, true)
		tr.ReleaseLease(d, "b")
		// The complete holder itself may have it, and anyone once the
		// holder completed a while ago: an asker that still starves has
		// seen it and found it of no use (too slow, say).
		acquire(t, tr, "a", true)
		tr.ReleaseLease(d, "a")
		clk.Step(tracker.FreshComplete - time.Millisecond)
		require.NoError(t, tr.Announce(complete(d, "a", ""))) // a re-announcement
		acquire(t, tr, "b", false)
		clk.Step(time.Millisecond)
		g = acquire(t, tr, "b", true)
		require.Empty(t, g.CompleteHolder)
	})

	t.Run("progress keeps the lease", func(t *testing.T) {
		tr, clk, _ := newTracker(t, tracker.Config{})
		acquire(t, tr, "a", true)
		for have := 1; have <= 5; have++ {
			clk.Step(stall)
			require.NoError(t, tr.Announce(partial(d, "a", "", have)))
			acquire(t, tr, "b", false)
		}
		g := acquire(t, tr, "b", false)
		require.Equal(t, 5, g.Lease.Holders[0].Pieces)
		require.Equal(t, t0.Add(5*stall), g.Lease.Holders[0].LastProgress)
	})

	t.Run("a stall moves the lease to the next asker", func(t *testing.T) {
		tr, clk, reg := newTracker(t, tracker.Config{})
		acquire(t, tr, "a", true)
		require.NoError(t, tr.Announce(partial(d, "a", "", 2)))
		clk.Step(stall)
		require.NoError(t, tr.Announce(partial(d, "a", "", 2))) // no new pieces
		acquire(t, tr, "b", false)
		clk.Step(time.Second)
		res := lookup(t, tr, d, "", "")
		require.True(t, res.Lease.Holders[0].Stalled, "lookups show the stall")
		acquire(t, tr, "a", true) // the stalled holder asking again does not refresh it
		g := acquire(t, tr, "b", true)
		require.Equal(t, []tracker.LeaseHolder{{Node: "b", Since: clk.Now(), LastProgress: clk.Now()}}, g.Lease.Holders)
		acquire(t, tr, "a", false)
		require.Equal(t, 1.0, reassignedCount(t, reg, "stalled"))
	})

	t.Run("a new leaseholder's existing pieces are its baseline", func(t *testing.T) {
		tr, clk, _ := newTracker(t, tracker.Config{})
		require.NoError(t, tr.Announce(partial(d, "a", "", 4)))
		acquire(t, tr, "a", true)
		clk.Step(stall + time.Second)
		require.NoError(t, tr.Announce(partial(d, "a", "", 4)))
		acquire(t, tr, "b", true)
	})

	t.Run("complete, withdraw, release and forget end the lease", func(t *testing.T) {
		for name, end := range map[string]func(tr *tracker.Tracker){
			"complete": func(tr *tracker.Tracker) { require.NoError(t, tr.Announce(complete(d, "a", ""))) },
			"withdraw": func(tr *tracker.Tracker) { tr.Withdraw(d, "a") },
			"release":  func(tr *tracker.Tracker) { tr.ReleaseLease(d, "a") },
			"forget":   func(tr *tracker.Tracker) { tr.ForgetNode("a") },
		} {
			t.Run(name, func(t *testing.T) {
				tr, _, reg := newTracker(t, tracker.Config{})
				acquire(t, tr, "a", true)
				end(tr)
				// b avoids a: once complete, a would refuse b the lease.
				ask(t, tr, tracker.LeaseRequest{Node: "b", Avoid: []string{"a"}}, true)
				want := 0.0
				if name == "forget" {
					want = 1
				}
				require.Equal(t, want, reassignedCount(t, reg, "forgotten"))
			})
		}
	})

	t.Run("release by another node changes nothing", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{})
		acquire(t, tr, "a", true)
		tr.ReleaseLease(d, "b")
		tr.ReleaseLease(digest(9), "a")
		acquire(t, tr, "b", false)
	})

	t.Run("U leases", func(t *testing.T) {
		tr, clk, _ := newTracker(t, tracker.Config{MaxLeases: 2})
		acquire(t, tr, "a", true)
		clk.Step(time.Second)
		acquire(t, tr, "b", true)
		g := acquire(t, tr, "c", false)
		require.Equal(t, 2, g.Lease.Max)
		require.Equal(t, []string{"a", "b"}, []string{g.Lease.Holders[0].Node, g.Lease.Holders[1].Node})
		clk.Step(stall) // a stalled, b not yet
		g = acquire(t, tr, "c", true)
		require.Equal(t, []string{"b", "c"}, []string{g.Lease.Holders[0].Node, g.Lease.Holders[1].Node})
	})

	t.Run("a lease without progress for a TTL expires", func(t *testing.T) {
		tr, clk, _ := newTracker(t, tracker.Config{})
		acquire(t, tr, "a", true)
		clk.Step(tracker.DefaultTTL + time.Second)
		tr.Expire()
		require.Equal(t, tracker.Stats{}, tr.Stats())
	})

	t.Run("invalid requests", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{})
		_, err := tr.AcquireLease(tracker.LeaseRequest{Digest: "nope", Node: "a"})
		require.ErrorIs(t, err, tracker.ErrInvalid)
		_, err = tr.AcquireLease(tracker.LeaseRequest{Digest: d, Node: ""})
		require.ErrorIs(t, err, tracker.ErrInvalid)
	})
}

// leaseCount returns shoal_agent_tracker_lease_requests_total{result}.
func leaseCount(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	return metricValue(t, reg, "shoal_agent_tracker_lease_requests_total", map[string]string{"result": result})
}

// reassignedCount returns shoal_agent_tracker_leases_reassigned_total{reason}.
func reassignedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return metricValue(t, reg, "shoal_agent_tracker_leases_reassigned_total", map[string]string{"reason": reason})
}

// metricValue sums the series of the counter or gauge name that carry
// labels (0 when absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.Sum(t, reg, name, labels)
}

func TestPieceHashes(t *testing.T) {
	d := digest(1)
	sums := func(n int, seed byte) []byte {
		b := make([]byte, 32*n)
		for i := range b {
			b[i] = seed + byte(i)
		}
		return b
	}
	good := tracker.PieceHashes{Size: 100, PieceSize: 10, Sums: sums(10, 1), Publisher: "a"}

	tests := []struct {
		name    string
		first   *tracker.PieceHashes
		publish tracker.PieceHashes
		wantErr error
		errText string
	}{
		{name: "first publication", publish: good},
		{name: "same again, from another node", first: &good, publish: func() tracker.PieceHashes { p := good; p.Publisher = "b"; return p }()},
		{name: "different sums conflict", first: &good, publish: tracker.PieceHashes{Size: 100, PieceSize: 10, Sums: sums(10, 2), Publisher: "b"},
			wantErr: tracker.ErrConflict, errText: "first published by a"},
		{name: "another piece size conflicts", first: &good, publish: tracker.PieceHashes{Size: 100, PieceSize: 20, Sums: sums(5, 1), Publisher: "b"},
			wantErr: tracker.ErrConflict},
		{name: "wrong number of sums", publish: tracker.PieceHashes{Size: 100, PieceSize: 10, Sums: sums(9, 1), Publisher: "a"},
			wantErr: tracker.ErrInvalid, errText: "288 bytes of sums, want 32 for each of 10 pieces"},
		{name: "no publisher", publish: tracker.PieceHashes{Size: 100, PieceSize: 10, Sums: sums(10, 1)}, wantErr: tracker.ErrInvalid},
		{name: "no size", publish: tracker.PieceHashes{PieceSize: 10, Publisher: "a"}, wantErr: tracker.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTracker(t, tracker.Config{})
			if tc.first != nil {
				require.NoError(t, tr.PublishPieceHashes(d, *tc.first))
			}
			err := tr.PublishPieceHashes(d, tc.publish)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorContains(t, err, tc.errText)
				return
			}
			require.NoError(t, err)
			res, err := tr.Lookup(tracker.LookupRequest{Digest: d, PieceHashes: true})
			require.NoError(t, err)
			require.NotNil(t, res.PieceHashes)
			require.Equal(t, good, *res.PieceHashes, "the first publication stays")
			s, ok := res.PieceHashes.Sum(9)
			require.True(t, ok)
			require.Equal(t, good.Sums[9*32:], s[:])
			_, ok = res.PieceHashes.Sum(10)
			require.False(t, ok)
			res = lookup(t, tr, d, "", "")
			require.Nil(t, res.PieceHashes, "only when asked")
		})
	}

	t.Run("kept a TTL after the last holder, then dropped", func(t *testing.T) {
		tr, clk, _ := newTracker(t, tracker.Config{})
		require.NoError(t, tr.Announce(complete(d, "a", "")))
		require.NoError(t, tr.PublishPieceHashes(d, good))
		require.Equal(t, 320, tr.Stats().HashBytes)
		tr.Withdraw(d, "a")
		clk.Step(tracker.DefaultTTL)
		tr.Expire()
		res, err := tr.Lookup(tracker.LookupRequest{Digest: d, PieceHashes: true})
		require.NoError(t, err)
		require.NotNil(t, res.PieceHashes)
		clk.Step(time.Second)
		tr.Expire()
		require.Equal(t, tracker.Stats{}, tr.Stats())
	})

	t.Run("hash memory is capped", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{MaxHashBytes: 500})
		require.NoError(t, tr.PublishPieceHashes(d, good))
		err := tr.PublishPieceHashes(digest(2), good)
		require.ErrorIs(t, err, tracker.ErrFull)
		require.Equal(t, 1, tr.Stats().Digests, "the refused digest left nothing behind")
	})
}

func TestCapacity(t *testing.T) {
	t.Run("digests", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{MaxDigests: 2})
		require.NoError(t, tr.Announce(complete(digest(1), "a", "")))
		require.NoError(t, tr.Announce(complete(digest(2), "a", "")))
		require.ErrorIs(t, tr.Announce(complete(digest(3), "a", "")), tracker.ErrFull)
		_, err := tr.AcquireLease(tracker.LeaseRequest{Digest: digest(3), Node: "a"})
		require.ErrorIs(t, err, tracker.ErrFull)
		require.NoError(t, tr.Announce(complete(digest(2), "b", "")), "known digests still take holders")
	})
	t.Run("holders", func(t *testing.T) {
		tr, _, _ := newTracker(t, tracker.Config{MaxHolders: 2})
		d := digest(1)
		require.NoError(t, tr.Announce(complete(d, "a", "")))
		require.NoError(t, tr.Announce(complete(d, "b", "")))
		require.ErrorIs(t, tr.Announce(complete(d, "c", "")), tracker.ErrFull)
		require.NoError(t, tr.Announce(partial(d, "b", "", 1)), "known holders still refresh")
	})
	t.Run("negative config", func(t *testing.T) {
		_, err := tracker.New(tracker.Config{MaxLeases: -1})
		require.Error(t, err)
	})
}

func TestTrackerMetrics(t *testing.T) {
	tr, _, reg := newTracker(t, tracker.Config{})
	require.NoError(t, tr.Announce(complete(digest(1), "a", "")))
	require.NoError(t, tr.Announce(partial(digest(1), "b", "", 1)))
	require.NoError(t, tr.Announce(partial(digest(2), "b", "", 1)))
	_, err := tr.AcquireLease(tracker.LeaseRequest{Digest: digest(2), Node: "c"})
	require.NoError(t, err)
	require.Equal(t, 2.0, metricValue(t, reg, "shoal_agent_tracker_digests", nil))
	require.Equal(t, 1.0, metricValue(t, reg, "shoal_agent_tracker_holders", map[string]string{"state": "complete"}))
	require.Equal(t, 2.0, metricValue(t, reg, "shoal_agent_tracker_holders", map[string]string{"state": "partial"}))
	require.Equal(t, 1.0, metricValue(t, reg, "shoal_agent_tracker_leases", nil))

	_, err = tracker.New(tracker.Config{Registerer: reg})
	require.ErrorContains(t, err, "registering tracker metrics", "a second tracker on the same registry is refused")
}

func TestTrackerRun(t *testing.T) {
	tr, clk, _ := newTracker(t, tracker.Config{})
	require.NoError(t, tr.Announce(complete(digest(1), "a", "")))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "Run waits on its ticker")
	clk.Step(tracker.DefaultTTL + time.Second)
	require.Eventually(t, func() bool { return tr.Stats().Digests == 0 }, 10*time.Second, time.Millisecond, "Run expired the stale holding")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}
