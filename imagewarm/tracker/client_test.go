package tracker_test

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/imagewarm/placement"
	"github.com/shoal-io/shoal/imagewarm/tracker"
	"github.com/shoal-io/shoal/imagewarm/tracker/trackertest"
)

// cluster is a set of agents, each with a Tracker served on an in-memory
// network, and a static membership.
type cluster struct {
	t       *testing.T
	netw    *trackertest.Network
	clk     *clocktesting.FakeClock
	members []placement.Member
	byName  map[string]*tracker.Tracker

	mu      sync.Mutex
	removed map[string]bool
}

// newCluster starts n trackers named n0..n{n-1}, in zones z0/z1 by parity.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, netw: trackertest.NewNetwork(), clk: clocktesting.NewFakeClock(t0), byName: map[string]*tracker.Tracker{}, removed: map[string]bool{}}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		m := placement.Member{Name: name, Endpoint: name + ":9480", Zone: fmt.Sprintf("z%d", i%2)}
		tr, err := tracker.New(tracker.Config{Clock: c.clk})
		require.NoError(t, err)
		c.members = append(c.members, m)
		c.byName[name] = tr
		c.netw.Handle(m.Endpoint, tr.Handler(tracker.DefaultPathPrefix))
	}
	return c
}

// Members implements tracker.Membership: every member not removed.
func (c *cluster) Members() []placement.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []placement.Member
	for _, m := range c.members {
		if !c.removed[m.Name] {
			out = append(out, m)
		}
	}
	return out
}

// member returns the named member.
func (c *cluster) member(name string) placement.Member {
	for _, m := range c.members {
		if m.Name == name {
			return m
		}
	}
	c.t.Fatalf("no member %s", name)
	return placement.Member{}
}

// kill makes name unreachable; leaveView also drops it from the membership.
func (c *cluster) kill(name string, leaveView bool) {
	c.netw.Remove(c.member(name).Endpoint)
	if leaveView {
		c.mu.Lock()
		c.removed[name] = true
		c.mu.Unlock()
	}
}

// clientOpts tweak client.
type clientOpts struct {
	local    bool
	holdings tracker.Holdings
	reg      prometheus.Registerer
	timeout  time.Duration
	members  tracker.Membership // the cluster's when nil
}

// client returns a Client for the agent name.
func (c *cluster) client(name string, o clientOpts) *tracker.Client {
	c.t.Helper()
	cfg := tracker.ClientConfig{
		Self:       c.member(name),
		Members:    cmp.Or[tracker.Membership](o.members, c),
		Holdings:   o.holdings,
		HTTPClient: c.netw.Client(),
		Clock:      c.clk,
		Registerer: o.reg,
		Timeout:    o.timeout,
		Logger:     ktesting.NewLogger(c.t, ktesting.NewConfig(ktesting.Verbosity(2))),
	}
	if o.local {
		cfg.Local = c.byName[name]
	}
	cl, err := tracker.NewClient(cfg)
	require.NoError(c.t, err)
	return cl
}

// holderCount returns how many holders of d the tracker name keeps.
func (c *cluster) holderCount(name, d string) int {
	res, err := c.byName[name].Lookup(tracker.LookupRequest{Digest: d})
	require.NoError(c.t, err)
	return len(res.Holders)
}

func TestClientAnnounceLookup(t *testing.T) {
	c := newCluster(t, 7)
	ctx := context.Background()
	d := digest(1)
	a := c.client("n1", clientOpts{})
	b := c.client("n2", clientOpts{})

	require.NoError(t, a.Announce(ctx, tracker.Holding{Digest: d, Complete: true, Size: 100}))
	trackers := a.Trackers(d)
	require.Len(t, trackers, placement.DefaultReplicas)
	for _, m := range c.members {
		want := 0
		if containsMember(trackers, m.Name) {
			want = 1
		}
		require.Equal(t, want, c.holderCount(m.Name, d), "tracker %s", m.Name)
	}

	res, err := b.Lookup(ctx, d, tracker.LookupOptions{})
	require.NoError(t, err)
	require.Len(t, res.Holders, 1)
	require.Equal(t, "n1", res.Holders[0].Node)
	require.Equal(t, "n1:9480", res.Holders[0].Endpoint)
	require.True(t, res.Holders[0].Complete)
	require.Equal(t, 1, res.Complete)

	self, err := a.Lookup(ctx, d, tracker.LookupOptions{})
	require.NoError(t, err)
	require.Empty(t, self.Holders, "the asker is not handed itself")

	require.NoError(t, a.Withdraw(ctx, d))
	res, err = b.Lookup(ctx, d, tracker.LookupOptions{})
	require.NoError(t, err)
	require.Empty(t, res.Holders)
}

// containsMember reports whether ms has a member named name.
func containsMember(ms []placement.Member, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

func TestClientLookupMerges(t *testing.T) {
	ctx := context.Background()
	d := digest(2)

	t.Run("union over trackers that know different holders", func(t *testing.T) {
		c := newCluster(t, 6)
		trackers := placement.Trackers(d, c.members, 3)
		// Each tracker heard from a different holder (say after churn).
		for i, m := range trackers {
			require.NoError(t, c.byName[m.Name].Announce(partial(d, fmt.Sprintf("h%d", i), "", i+1)))
		}
		// And all three heard from one complete holder, announced at
		// different times: the entry is merged into one.
		for _, m := range trackers {
			require.NoError(t, c.byName[m.Name].Announce(complete(d, "full", "")))
			c.clk.Step(time.Second)
		}
		asker := c.client(trackers[0].Name, clientOpts{})
		res, err := asker.Lookup(ctx, d, tracker.LookupOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{"full"}, nodesOf(res.Holders[:1]), "complete first")
		require.ElementsMatch(t, []string{"h0", "h1", "h2"}, nodesOf(res.Holders[1:]))
		require.Equal(t, t0.Add(2*time.Second), res.Holders[0].LastAnnounce, "the most recent announcement wins")
		require.Equal(t, 1, res.Complete)
		require.Equal(t, 3, res.Partial)

		res, err = asker.Lookup(ctx, d, tracker.LookupOptions{Limit: 2})
		require.NoError(t, err)
		require.Len(t, res.Holders, 2)
		require.Equal(t, "full", res.Holders[0].Node)
	})

	t.Run("dead and hung trackers are skipped within the timeout", func(t *testing.T) {
		c := newCluster(t, 6)
		trackers := placement.Trackers(d, c.members, 3)
		holder := c.client(c.members[5].Name, clientOpts{})
		require.NoError(t, holder.Announce(ctx, tracker.Holding{Digest: d, Complete: true}))
		c.kill(trackers[0].Name, false)
		c.netw.Hang(trackers[1].Endpoint)
		reg := prometheus.NewRegistry()
		asker := c.client(c.members[4].Name, clientOpts{reg: reg, timeout: 50 * time.Millisecond})
		res, err := asker.Lookup(ctx, d, tracker.LookupOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{c.members[5].Name}, nodesOf(res.Holders))
		require.Equal(t, 1.0, metricValue(t, reg, "shoal_agent_tracker_client_rpcs_total", map[string]string{"op": "lookup", "result": "ok"}))
		require.Equal(t, 1.0, metricValue(t, reg, "shoal_agent_tracker_client_rpcs_total", map[string]string{"op": "lookup", "result": "timeout"}))
		require.Equal(t, 1.0, metricValue(t, reg, "shoal_agent_tracker_client_rpcs_total", map[string]string{"op": "lookup", "result": "error"}))

		c.kill(trackers[2].Name, false)
		_, err = asker.Lookup(ctx, d, tracker.LookupOptions{})
		require.ErrorContains(t, err, "no tracker answered")
		err = asker.Announce(ctx, tracker.Holding{Digest: d, Complete: true})
		require.ErrorContains(t, err, "no tracker accepted")
	})

	t.Run("no members", func(t *testing.T) {
		cl, err := tracker.NewClient(tracker.ClientConfig{
			Self:    placement.Member{Name: "a", Endpoint: "a:1"},
			Members: tracker.MembersFunc(func() []placement.Member { return nil }),
		})
		require.NoError(t, err)
		_, err = cl.Lookup(ctx, d, tracker.LookupOptions{})
		require.ErrorIs(t, err, tracker.ErrNoTrackers)
		_, err = cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.ErrorIs(t, err, tracker.ErrNoTrackers)
	})

	t.Run("invalid input is refused before sending", func(t *testing.T) {
		c := newCluster(t, 3)
		cl := c.client("n0", clientOpts{})
		_, err := cl.Lookup(ctx, "bad", tracker.LookupOptions{})
		require.ErrorIs(t, err, tracker.ErrInvalid)
		require.ErrorIs(t, cl.Announce(ctx, tracker.Holding{Digest: d, Size: 10}), tracker.ErrInvalid, "partial without pieces")
		require.ErrorIs(t, cl.Withdraw(ctx, "bad"), tracker.ErrInvalid)
		for _, m := range c.members {
			require.Zero(t, c.netw.Requests(m.Endpoint))
		}
	})
}

func TestClientLease(t *testing.T) {
	ctx := context.Background()
	d := digest(3)

	t.Run("first tracker decides, the next is the fallback", func(t *testing.T) {
		c := newCluster(t, 6)
		trackers := placement.Trackers(d, c.members, 3)
		var others []string
		for _, m := range c.members {
			if !containsMember(trackers, m.Name) {
				others = append(others, m.Name)
			}
		}
		a, b, e := c.client(others[0], clientOpts{}), c.client(others[1], clientOpts{}), c.client(others[2], clientOpts{})

		g, err := a.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.NoError(t, err)
		require.True(t, g.Granted)
		require.Equal(t, 1, c.byName[trackers[0].Name].Stats().Leases, "granted by the first tracker")
		require.Zero(t, c.byName[trackers[1].Name].Stats().Leases)

		g, err = b.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.NoError(t, err)
		require.False(t, g.Granted)
		require.True(t, g.Lease.Held(others[0]), "b learns whom to wait for")

		res, err := b.Lookup(ctx, d, tracker.LookupOptions{})
		require.NoError(t, err)
		require.True(t, res.Lease.Held(others[0]), "lookups report the authority's lease state")

		// The authority dies: the next tracker in rendezvous order decides.
		c.kill(trackers[0].Name, false)
		g, err = b.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.NoError(t, err)
		require.True(t, g.Granted)
		require.Equal(t, 1, c.byName[trackers[1].Name].Stats().Leases)
		g, err = e.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.NoError(t, err)
		require.False(t, g.Granted)

		// Release reaches every live tracker.
		require.NoError(t, b.ReleaseLease(ctx, d))
		require.Zero(t, c.byName[trackers[1].Name].Stats().Leases)
	})

	t.Run("stalled lease moves; progress through announcements keeps it", func(t *testing.T) {
		c := newCluster(t, 5)
		a, b := c.client("n0", clientOpts{local: true}), c.client("n1", clientOpts{local: true})
		g, err := a.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.NoError(t, err)
		require.True(t, g.Granted)

		bm := tracker.NewBitmap(10)
		for i := range 3 {
			c.clk.Step(tracker.DefaultStallTimeout)
			bm.Set(i)
			require.NoError(t, a.Announce(ctx, tracker.Holding{Digest: d, Size: 100, PieceSize: 10, Pieces: bm}))
			g, err = b.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
			require.NoError(t, err)
			require.False(t, g.Granted, "a makes progress")
		}
		c.clk.Step(tracker.DefaultStallTimeout + time.Second)
		g, err = b.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.NoError(t, err)
		require.True(t, g.Granted, "a stalled")
		require.Equal(t, "n1", g.Lease.Holders[0].Node)
	})

	t.Run("every tracker down", func(t *testing.T) {
		c := newCluster(t, 3)
		cl := c.client("n0", clientOpts{})
		for _, m := range c.members {
			c.kill(m.Name, false)
		}
		_, err := cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
		require.ErrorContains(t, err, "acquiring upstream lease on "+d)
		require.ErrorContains(t, err, "connection refused")
	})
}

func TestClientPieceHashes(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5)
	d := digest(4)
	a, b := c.client("n0", clientOpts{}), c.client("n1", clientOpts{})
	p := tracker.PieceHashes{Size: 20, PieceSize: 10, Sums: make([]byte, 64)}
	require.NoError(t, a.PublishPieceHashes(ctx, d, p))

	res, err := b.Lookup(ctx, d, tracker.LookupOptions{PieceHashes: true})
	require.NoError(t, err)
	require.NotNil(t, res.PieceHashes)
	require.Equal(t, "n0", res.PieceHashes.Publisher)
	require.Equal(t, p.Sums, res.PieceHashes.Sums)

	p.Sums[0] = 1
	err = b.PublishPieceHashes(ctx, d, p)
	require.ErrorIs(t, err, tracker.ErrConflict)
}

func TestClientLocalShortcut(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1)
	c.kill("n0", false) // the only agent's HTTP server is down
	cl := c.client("n0", clientOpts{local: true})
	d := digest(5)
	require.NoError(t, cl.Announce(ctx, tracker.Holding{Digest: d, Complete: true}))
	require.Equal(t, 1, c.holderCount("n0", d))
	g, err := cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: d})
	require.NoError(t, err)
	require.True(t, g.Granted)
}

func TestClientAnnounceAll(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5)
	const n = 700
	var holdings []tracker.Holding
	for i := range n {
		holdings = append(holdings, tracker.Holding{Digest: digest(100 + i), Complete: true, Size: 1})
	}
	holdings = append(holdings, tracker.Holding{Digest: "invalid"})
	cl := c.client("n0", clientOpts{holdings: tracker.HoldingsFunc(func() []tracker.Holding { return holdings })})
	require.NoError(t, cl.AnnounceAll(ctx))

	total, requests := 0, 0
	for _, m := range c.members {
		st := c.byName[m.Name].Stats()
		total += st.Complete
		// Every tracker holds what HRW assigns it.
		want := 0
		for _, h := range holdings[:n] {
			if containsMember(placement.Trackers(h.Digest, c.members, 3), m.Name) {
				want++
			}
		}
		require.Equal(t, want, st.Complete, "tracker %s", m.Name)
		r := c.netw.Requests(m.Endpoint)
		require.Equal(t, (want+tracker.MaxBatch-1)/tracker.MaxBatch, r, "batched requests to %s", m.Name)
		requests += r
	}
	require.Equal(t, 3*n, total)
	t.Logf("%d holdings announced to 5 trackers in %d requests", n, requests)

	t.Run("unreachable trackers are reported, the rest announced", func(t *testing.T) {
		c.kill("n3", false)
		err := cl.AnnounceAll(ctx)
		require.ErrorContains(t, err, "requests failed")
		require.ErrorContains(t, err, "tracker n3")
	})
}

func TestClientRun(t *testing.T) {
	c := newCluster(t, 3)
	d := digest(6)
	var mu sync.Mutex
	holding := tracker.Holding{Digest: d, Size: 100, PieceSize: 10, Pieces: tracker.NewBitmap(10)}
	cl := c.client("n1", clientOpts{holdings: tracker.HoldingsFunc(func() []tracker.Holding {
		mu.Lock()
		defer mu.Unlock()
		return []tracker.Holding{holding}
	})})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx) }()

	// holderOf returns the first tracker's view of n1's holding.
	first := placement.Trackers(d, c.members, 1)[0].Name
	holderOf := func() (tracker.Holder, bool) {
		res, err := c.byName[first].Lookup(tracker.LookupRequest{Digest: d})
		require.NoError(t, err)
		if len(res.Holders) == 0 {
			return tracker.Holder{}, false
		}
		return res.Holders[0], true
	}
	require.Eventually(t, func() bool { _, ok := holderOf(); return ok }, 10*time.Second, time.Millisecond, "announced at start")
	require.Eventually(t, c.clk.HasWaiters, 10*time.Second, time.Millisecond, "waiting for the next round")

	mu.Lock()
	holding = tracker.Holding{Digest: d, Complete: true, Size: 100}
	mu.Unlock()
	c.clk.Step(tracker.DefaultAnnounceInterval * 11 / 10) // past any jitter
	require.Eventually(t, func() bool { h, _ := holderOf(); return h.Complete }, 10*time.Second, time.Millisecond, "re-announced")

	// Rounds keep the holding alive past the TTL.
	for range 4 {
		require.Eventually(t, c.clk.HasWaiters, 10*time.Second, time.Millisecond)
		c.clk.Step(tracker.DefaultAnnounceInterval * 11 / 10)
	}
	require.Eventually(t, func() bool {
		h, ok := holderOf()
		return ok && c.clk.Since(h.LastAnnounce) < tracker.DefaultAnnounceInterval
	}, 10*time.Second, time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

// TestClientRunRetriesSoon: a round that finds no trackers (the mesh has
// not formed yet) is retried after a second, not a whole interval.
func TestClientRunRetriesSoon(t *testing.T) {
	c := newCluster(t, 3)
	d := digest(7)
	var formed atomic.Bool
	cl := c.client("n1", clientOpts{
		holdings: tracker.HoldingsFunc(func() []tracker.Holding {
			return []tracker.Holding{{Digest: d, Complete: true, Size: 100}}
		}),
		members: tracker.MembersFunc(func() []placement.Member {
			if !formed.Load() {
				return nil
			}
			return c.Members()
		}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx) }()

	first := placement.Trackers(d, c.members, 1)[0].Name
	require.Eventually(t, c.clk.HasWaiters, 10*time.Second, time.Millisecond, "the first round failed")
	formed.Store(true)
	c.clk.Step(time.Second)
	require.Eventually(t, func() bool { return c.holderCount(first, d) == 1 }, 10*time.Second, time.Millisecond, "announced a second later")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestNewClientValidation(t *testing.T) {
	members := tracker.MembersFunc(func() []placement.Member { return nil })
	tests := []struct {
		name string
		cfg  tracker.ClientConfig
		want string
	}{
		{name: "no self", cfg: tracker.ClientConfig{Members: members}, want: "Self needs a name and an endpoint"},
		{name: "no members", cfg: tracker.ClientConfig{Self: placement.Member{Name: "a", Endpoint: "a:1"}}, want: "Members is required"},
		{name: "negative timeout", cfg: tracker.ClientConfig{Self: placement.Member{Name: "a", Endpoint: "a:1"}, Members: members, Timeout: -1}, want: "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tracker.NewClient(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestClientReusesConnections: RPCs over real HTTP keep one connection,
// large (chunked) lookup answers included. A call that closed its answer
// unread dialled anew every time, which on the benchmark's 16 agents cost
// a few CPU-seconds per GiB in dials, accepts and closes.
func TestClientReusesConnections(t *testing.T) {
	tr, err := tracker.New(tracker.Config{})
	require.NoError(t, err)
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(tr.Handler(tracker.DefaultPathPrefix))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	self := placement.Member{Name: "n0", Endpoint: srv.Listener.Addr().String()}
	cl, err := tracker.NewClient(tracker.ClientConfig{
		Self:       self,
		Members:    tracker.MembersFunc(func() []placement.Member { return []placement.Member{self} }),
		HTTPClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Logger:     ktesting.NewLogger(t, ktesting.NewConfig()),
	})
	require.NoError(t, err)

	d := digest(1)
	// Enough partial holders of a many-piece blob that a lookup's answer
	// is chunked.
	for i := range 10 {
		bm := tracker.NewBitmap(1 << 14)
		bm.Set(i)
		a := tracker.Announcement{Digest: d, Node: fmt.Sprintf("holder-%d", i), Endpoint: "h:1", Size: 10 << 14, PieceSize: 10, Pieces: bm}
		require.NoError(t, tr.Announce(a))
	}
	ctx := context.Background()
	for range 20 {
		res, err := cl.Lookup(ctx, d, tracker.LookupOptions{})
		require.NoError(t, err)
		require.Len(t, res.Holders, 10)
		require.NoError(t, cl.Announce(ctx, tracker.Holding{Digest: d, Complete: true, Size: 100}))
	}
	require.Equal(t, int32(1), conns.Load(), "connections dialled for 40 calls")
}
