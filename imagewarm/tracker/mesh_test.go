package tracker_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/agent/mesh"
	"github.com/shoal-io/shoal/agent/mesh/meshtest"
	"github.com/shoal-io/shoal/imagewarm/placement"
	"github.com/shoal-io/shoal/imagewarm/tracker"
	"github.com/shoal-io/shoal/imagewarm/tracker/trackertest"
)

// Bounds of the polls in the mesh tests: failure detection takes a few
// seconds with the mesh's local tuning; the rest is slack for -race on a
// busy machine.
const (
	waitFor = 30 * time.Second
	tick    = 20 * time.Millisecond
)

// agent is one node of the test mesh: the agent's mesh, a tracker and a
// client.
type agent struct {
	name     string
	endpoint string
	m        *mesh.Mesh
	stop     func()
	tr       *tracker.Tracker
	cl       *tracker.Client
	reg      *prometheus.Registry
	members  tracker.Membership
}

// startAgent starts the agent name on the mesh network mnet, serving its
// tracker on hnet.
func startAgent(t *testing.T, mnet *meshtest.Network, hnet *trackertest.Network, clk *clocktesting.FakeClock, name, zone string) *agent {
	t.Helper()
	a := &agent{name: name, endpoint: net.JoinHostPort(name, "9480"), reg: prometheus.NewRegistry()}
	var err error
	a.tr, err = tracker.New(tracker.Config{Clock: clk, Registerer: a.reg})
	require.NoError(t, err)

	a.m, err = mesh.New(mesh.Config{
		NodeName:  name,
		Meta:      mesh.Meta{P2P: a.endpoint, Zone: zone, Version: "test", Arch: "amd64"},
		Transport: mnet.Transport(name),
		Tuning:    mesh.TuningLocal,
		OnChange:  tracker.ForgetDeparted(a.tr.ForgetNode),
	}, ktesting.NewLogger(t, ktesting.NewConfig()).WithValues("self", name))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.m.Run(ctx) }()
	a.stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "Run of %s", name)
		case <-time.After(waitFor):
			t.Errorf("Run of %s did not return within %v", name, waitFor)
		}
	})
	t.Cleanup(a.stop)
	select {
	case <-a.m.Started():
	case <-time.After(waitFor):
		t.Fatalf("mesh of %s not started within %v", name, waitFor)
	}

	hnet.Handle(a.endpoint, a.tr.Handler(tracker.DefaultPathPrefix))
	a.members = tracker.MeshMembership(a.m)
	a.cl, err = tracker.NewClient(tracker.ClientConfig{
		Self:       placement.Member{Name: name, Endpoint: a.endpoint, Zone: zone, Version: "test"},
		Members:    a.members,
		Local:      a.tr,
		HTTPClient: hnet.Client(),
		Clock:      clk,
	})
	require.NoError(t, err)
	return a
}

// memberNames returns the names a sees as live trackers.
func (a *agent) memberNames() []string {
	var out []string
	for _, m := range a.members.Members() {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// digestAvoiding returns a digest none of whose k trackers among members
// is avoid, so that the test exercises remote trackers forgetting avoid.
func digestAvoiding(t *testing.T, members []placement.Member, avoid string, from int) string {
	t.Helper()
	for i := from; i < from+1000; i++ {
		d := digest(i)
		if !containsMember(placement.Trackers(d, members, placement.DefaultReplicas), avoid) {
			return d
		}
	}
	t.Fatal("no digest avoids " + avoid)
	return ""
}

func TestMesh(t *testing.T) {
	names := []string{"n0", "n1", "n2", "n3", "n4"}
	mnet := meshtest.NewNetwork(names...)
	t.Cleanup(mnet.Close) // runs after every memberlist shut down
	hnet := trackertest.NewNetwork()
	clk := clocktesting.NewFakeClock(t0)
	ctx := context.Background()

	agents := map[string]*agent{}
	for i, n := range names {
		agents[n] = startAgent(t, mnet, hnet, clk, n, fmt.Sprintf("z%d", i%2))
	}
	for _, n := range names[1:] {
		_, err := agents[n].m.Join([]string{mnet.Addr("n0")})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, a := range agents {
			if !slices.Equal(names, a.memberNames()) {
				return false
			}
		}
		return true
	}, waitFor, tick, "all five agents see each other")

	members := agents["n0"].members.Members()
	require.Len(t, members, 5)
	for _, m := range members {
		require.Equal(t, m.Name+":9480", m.Endpoint, "endpoint from the mesh's metadata")
		require.Equal(t, "test", m.Version)
	}

	a, b, c, d := agents["n1"], agents["n2"], agents["n3"], agents["n4"]
	held := digestAvoiding(t, members, a.name, 0)     // A holds it
	leased := digestAvoiding(t, members, a.name, 500) // A fetches it upstream
	stalled := digest(2000)                           // C fetches it upstream, then stalls

	// Announce on A, look up from B.
	require.NoError(t, a.cl.Announce(ctx, tracker.Holding{Digest: held, Complete: true, Size: 1}))
	res, err := b.cl.Lookup(ctx, held, tracker.LookupOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{a.name}, nodesOf(res.Holders))
	require.Equal(t, a.endpoint, res.Holders[0].Endpoint)

	// A takes the upstream lease of another digest; C has to wait for it.
	g, err := a.cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: leased})
	require.NoError(t, err)
	require.True(t, g.Granted)
	g, err = c.cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: leased})
	require.NoError(t, err)
	require.False(t, g.Granted)
	require.True(t, g.Lease.Held(a.name))

	// C takes a lease and stalls: after the stall timeout D gets it.
	g, err = c.cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: stalled})
	require.NoError(t, err)
	require.True(t, g.Granted)
	g, err = d.cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: stalled})
	require.NoError(t, err)
	require.False(t, g.Granted)
	clk.Step(tracker.DefaultStallTimeout + time.Second)
	g, err = d.cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: stalled})
	require.NoError(t, err)
	require.True(t, g.Granted, "reassigned after the stall")
	require.Equal(t, d.name, g.Lease.Holders[0].Node)

	// Cut A off without a graceful leave: the others declare it dead.
	mnet.Cut(a.name)
	hnet.Remove(a.endpoint)
	survivors := []string{"n0", "n2", "n3", "n4"}
	require.Eventually(t, func() bool {
		for _, n := range survivors {
			if !slices.Equal(survivors, agents[n].memberNames()) {
				return false
			}
		}
		return true
	}, waitFor, tick, "the survivors notice A is gone")

	// Its announcements are gone at once (no TTL has passed on the fake
	// clock): every tracker of the digest forgot A.
	for _, m := range placement.Trackers(held, members, placement.DefaultReplicas) {
		require.Eventually(t, func() bool {
			r, err := agents[m.Name].tr.Lookup(tracker.LookupRequest{Digest: held})
			return err == nil && len(r.Holders) == 0
		}, waitFor, tick, "tracker %s forgot A", m.Name)
	}
	res, err = b.cl.Lookup(ctx, held, tracker.LookupOptions{})
	require.NoError(t, err)
	require.Empty(t, res.Holders)

	// A's lease went with it: C gets it from the same authority as before.
	authority := placement.Trackers(leased, members, 1)[0].Name
	g, err = c.cl.AcquireLease(ctx, tracker.LeaseRequest{Digest: leased})
	require.NoError(t, err)
	require.True(t, g.Granted, "reassigned on leave")
	require.Equal(t, 1.0, metricValue(t, agents[authority].reg, "shoal_agent_tracker_leases_reassigned_total", map[string]string{"reason": "forgotten"}))
}

func TestMeshMembers(t *testing.T) {
	members := []mesh.Member{
		{Name: "ok", State: mesh.StateAlive, Meta: mesh.Meta{P2P: "10.0.0.1:9480", Zone: "z1", Version: "v1"}},
		{Name: "suspect", State: mesh.StateSuspect, Meta: mesh.Meta{P2P: "10.0.0.2:9480"}},
		{Name: "no-endpoint", State: mesh.StateAlive, Meta: mesh.Meta{Zone: "z1"}},
		{Name: "swarm-off", State: mesh.StateAlive, Meta: mesh.Meta{Endpoint: "10.0.0.3:9480"}},
		{Name: "dead", State: mesh.StateDead, Meta: mesh.Meta{P2P: "10.0.0.5:9480"}},
		{Name: "left", State: mesh.StateLeft, Meta: mesh.Meta{P2P: "10.0.0.6:9480"}},
	}
	require.Equal(t, []placement.Member{
		{Name: "ok", Endpoint: "10.0.0.1:9480", Zone: "z1", Version: "v1"},
		{Name: "suspect", Endpoint: "10.0.0.2:9480"},
	}, tracker.MeshMembers(members))
}

func TestForgetDeparted(t *testing.T) {
	tr, _, _ := newTracker(t, tracker.Config{})
	d := digest(1)
	require.NoError(t, tr.Announce(complete(d, "a", "")))
	require.NoError(t, tr.Announce(complete(d, "b", "")))
	onChange := tracker.ForgetDeparted(tr.ForgetNode)

	onChange(mesh.Member{Name: "a", State: mesh.StateAlive}, mesh.EventJoin)
	onChange(mesh.Member{Name: "a", State: mesh.StateAlive}, mesh.EventUpdate)
	require.ElementsMatch(t, []string{"a", "b"}, nodesOf(lookup(t, tr, d, "", "").Holders), "join and update forget nothing")
	onChange(mesh.Member{Name: "a", State: mesh.StateDead}, mesh.EventLeave)
	require.Equal(t, []string{"b"}, nodesOf(lookup(t, tr, d, "", "").Holders))
	onChange(mesh.Member{Name: "b", State: mesh.StateLeft}, mesh.EventLeave)
	require.Empty(t, lookup(t, tr, d, "", "").Holders)
}
