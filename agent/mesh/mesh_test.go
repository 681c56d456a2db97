package mesh_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/agent/mesh"
	"github.com/shoal-io/shoal/agent/mesh/meshtest"
)

// waitFor bounds every poll in these tests; the local tuning detects a
// failure in about two seconds, the rest is slack for -race on busy CPUs.
const (
	waitFor = 30 * time.Second
	tick    = 50 * time.Millisecond
)

// node is one running Mesh in a test.
type node struct {
	name string
	m    *mesh.Mesh
	reg  *prometheus.Registry
	stop func()

	mu     sync.Mutex
	events []string // "event:member:state"
}

// nodeOpts tweaks startNode.
type nodeOpts struct {
	key      []byte
	bindAddr string           // set: real network on this address, port 0
	before   func(*mesh.Mesh) // runs before Run starts
}

// startNode starts a Mesh named name and stops it when the test ends.
func startNode(t *testing.T, netw *meshtest.Network, name string, o nodeOpts) *node {
	t.Helper()
	n := &node{name: name, reg: prometheus.NewRegistry()}
	cfg := mesh.Config{
		NodeName: name,
		Meta:     mesh.Meta{Endpoint: name + ":9480", Zone: "z1", Version: "test", Arch: "amd64"},
		Key:      o.key,
		Tuning:   mesh.TuningLocal,
		OnChange: func(m mesh.Member, ev mesh.Event) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.events = append(n.events, string(ev)+":"+m.Name+":"+string(m.State))
		},
		Registerer: n.reg,
	}
	if o.bindAddr != "" {
		cfg.BindAddr = o.bindAddr
		cfg.AdvertiseAddr = o.bindAddr
	} else {
		cfg.Transport = netw.Transport(name)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	m, err := mesh.New(cfg, logger.WithValues("self", name))
	require.NoError(t, err)
	n.m = m
	if o.before != nil {
		o.before(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "Run of %s", name)
			case <-time.After(waitFor):
				t.Errorf("Run of %s did not return within %v", name, waitFor)
			}
		})
	}
	t.Cleanup(n.stop)
	select {
	case <-m.Started():
	case <-time.After(waitFor):
		t.Fatalf("%s did not start within %v", name, waitFor)
	}
	require.Equal(t, mesh.StateAlive, n.self().State)
	return n
}

// self returns the node's own member entry.
func (n *node) self() mesh.Member {
	return n.member(n.name)
}

// member returns name as n sees it (zero Member when unknown).
func (n *node) member(name string) mesh.Member {
	for _, m := range n.m.Members() {
		if m.Name == name {
			return m
		}
	}
	return mesh.Member{}
}

// sawEvent reports whether n's OnChange got ev.
func (n *node) sawEvent(ev string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.events, ev)
}

// states returns name -> state as n sees it.
func (n *node) states() map[string]mesh.State {
	out := map[string]mesh.State{}
	for _, m := range n.m.Members() {
		out[m.Name] = m.State
	}
	return out
}

// metric returns the value of a gauge or counter with one label.
func (n *node) metric(t *testing.T, name, label, value string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					if m.GetGauge() != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("metric %s{%s=%q} not found", name, label, value)
	return 0
}

// live returns the alive plus suspect members metrics (a transient false
// suspicion under a loaded CPU must not fail a test).
func (n *node) live(t *testing.T) float64 {
	t.Helper()
	return n.metric(t, "shoal_agent_mesh_members", "state", "alive") + n.metric(t, "shoal_agent_mesh_members", "state", "suspect")
}

// eventually polls cond on every node until it holds for all.
func eventually(t *testing.T, nodes []*node, what string, cond func(n *node) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if !cond(n) {
				return false
			}
		}
		return true
	}, waitFor, tick, what)
}

// allAlive reports whether n sees exactly names, all alive.
func allAlive(names ...string) func(n *node) bool {
	return func(n *node) bool {
		st := n.states()
		if len(st) != len(names) {
			return false
		}
		for _, name := range names {
			if st[name] != mesh.StateAlive {
				return false
			}
		}
		return true
	}
}

// startCluster starts nodes a, b and c on netw and joins them.
func startCluster(t *testing.T, netw *meshtest.Network) []*node {
	t.Helper()
	a := startNode(t, netw, "a", nodeOpts{})
	b := startNode(t, netw, "b", nodeOpts{})
	c := startNode(t, netw, "c", nodeOpts{})
	n, err := b.m.Join([]string{netw.Addr("a")})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// c is given every address, its own included, as the coordinator would.
	n, err = c.m.Join([]string{netw.Addr("a"), netw.Addr("b"), netw.Addr("c")})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	nodes := []*node{a, b, c}
	eventually(t, nodes, "all three nodes see three alive members", allAlive("a", "b", "c"))
	return nodes
}

// newNetwork returns a network closed at the end of the test (after the
// nodes, whose cleanups run first).
func newNetwork(t *testing.T, names ...string) *meshtest.Network {
	netw := meshtest.NewNetwork(names...)
	t.Cleanup(netw.Close)
	return netw
}

func TestMembership(t *testing.T) {
	netw := newNetwork(t, "a", "b", "c")
	nodes := startCluster(t, netw)
	a, b, c := nodes[0], nodes[1], nodes[2]

	t.Run("members carry address and metadata", func(t *testing.T) {
		for _, n := range nodes {
			require.Equal(t, 3, n.m.NumAlive())
			for _, name := range []string{"a", "b", "c"} {
				m := n.member(name)
				require.Equal(t, netw.Addr(name), m.Addr)
				require.Equal(t, mesh.Meta{Endpoint: name + ":9480", Zone: "z1", Version: "test", Arch: "amd64"}, m.Meta)
				require.False(t, m.Since.IsZero())
			}
		}
	})

	t.Run("join events and metrics", func(t *testing.T) {
		eventually(t, nodes, "join events delivered", func(n *node) bool {
			return n.sawEvent("join:a:alive") && n.sawEvent("join:b:alive") && n.sawEvent("join:c:alive")
		})
		for _, n := range nodes {
			require.Equal(t, 3.0, n.live(t))
			require.Equal(t, 0.0, n.metric(t, "shoal_agent_mesh_members", "state", "dead"))
			require.GreaterOrEqual(t, n.metric(t, "shoal_agent_mesh_events_total", "event", "join"), 3.0)
		}
	})

	t.Run("repeated join is harmless", func(t *testing.T) {
		n, err := a.m.Join([]string{netw.Addr("b"), netw.Addr("c")})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		eventually(t, nodes, "still three alive", allAlive("a", "b", "c"))
	})

	t.Run("metadata update reaches peers", func(t *testing.T) {
		require.NoError(t, c.m.SetMeta(mesh.Meta{Endpoint: "c:9999", Zone: "z2"}))
		eventually(t, []*node{a, b}, "peers see c's new metadata", func(n *node) bool {
			return n.member("c").Meta == mesh.Meta{Endpoint: "c:9999", Zone: "z2"}
		})
		eventually(t, []*node{a, b}, "update event delivered", func(n *node) bool { return n.sawEvent("update:c:alive") })
	})
}

func TestGracefulLeave(t *testing.T) {
	netw := newNetwork(t, "a", "b", "c")
	nodes := startCluster(t, netw)
	a, b, c := nodes[0], nodes[1], nodes[2]

	c.stop()
	eventually(t, []*node{a, b}, "a and b see c left", func(n *node) bool {
		return n.member("c").State == mesh.StateLeft && n.member("a").State == mesh.StateAlive && n.member("b").State == mesh.StateAlive
	})
	eventually(t, []*node{a, b}, "leave event delivered", func(n *node) bool { return n.sawEvent("leave:c:left") })
	for _, n := range []*node{a, b} {
		require.Equal(t, 2, n.m.NumAlive())
		require.Equal(t, 0.0, n.metric(t, "shoal_agent_mesh_members", "state", "dead"))
	}
}

func TestHardFailureAndRestart(t *testing.T) {
	netw := newNetwork(t, "a", "b", "c")
	nodes := startCluster(t, netw)
	a, b, c := nodes[0], nodes[1], nodes[2]

	// Cut c off before stopping it, so its leave message is lost: to a and
	// b it simply stops answering, like a node that lost power.
	netw.Cut("c")
	c.stop()
	eventually(t, []*node{a, b}, "a and b declare c dead", func(n *node) bool {
		return n.member("c").State == mesh.StateDead
	})
	eventually(t, []*node{a, b}, "leave event delivered", func(n *node) bool { return n.sawEvent("leave:c:dead") })
	for _, n := range []*node{a, b} {
		require.Equal(t, 2, n.m.NumAlive())
		require.Equal(t, 1.0, n.metric(t, "shoal_agent_mesh_members", "state", "dead"))
		require.Equal(t, 2.0, n.live(t))
	}

	// c comes back under the same name and address and joins nobody itself:
	// a and b re-join the dead member's address periodically.
	netw.Restore("c")
	c2 := startNode(t, netw, "c", nodeOpts{})
	eventually(t, []*node{a, b, c2}, "c is alive again everywhere", allAlive("a", "b", "c"))
	for _, n := range []*node{a, b} {
		require.Equal(t, 0.0, n.metric(t, "shoal_agent_mesh_members", "state", "dead"))
	}
}

func TestPartitionHeals(t *testing.T) {
	netw := newNetwork(t, "a", "b", "c")
	nodes := startCluster(t, netw)
	a, b, c := nodes[0], nodes[1], nodes[2]

	netw.Cut("c")
	eventually(t, []*node{a, b}, "a and b declare c dead", func(n *node) bool { return n.member("c").State == mesh.StateDead })
	eventually(t, []*node{c}, "c declares a and b dead", func(n *node) bool {
		return n.member("a").State == mesh.StateDead && n.member("b").State == mesh.StateDead
	})
	// Wait past memberlist's gossip-to-the-dead time so that only the
	// mesh's own rejoin can heal the partition.
	require.Eventually(t, func() bool {
		return time.Since(a.member("c").Since) > 3*time.Second
	}, waitFor, tick)

	netw.Restore("c")
	eventually(t, nodes, "the partition heals", allAlive("a", "b", "c"))
}

func TestJoin(t *testing.T) {
	netw := newNetwork(t, "a", "b", "c", "cut")
	a := startNode(t, netw, "a", nodeOpts{})
	netw.Cut("cut")

	tests := []struct {
		name    string
		peers   []string
		want    int
		wantErr string
	}{
		{name: "no peers", peers: nil, want: 0},
		{name: "only own address", peers: []string{netw.Addr("a"), " " + netw.Addr("a") + " "}, want: 0},
		{name: "own name/address form", peers: []string{"a/" + netw.Addr("a")}, want: 0},
		{name: "unknown address", peers: []string{"127.0.0.1:65000"}, wantErr: "none of 1 peers answered"},
		{name: "unreachable peer", peers: []string{netw.Addr("cut")}, wantErr: "none of 1 peers answered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := a.m.Join(tc.peers)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, n)
		})
	}

	t.Run("join before run is remembered", func(t *testing.T) {
		b := startNode(t, netw, "b", nodeOpts{before: func(m *mesh.Mesh) {
			n, err := m.Join([]string{netw.Addr("a")})
			require.ErrorIs(t, err, mesh.ErrNotRunning)
			require.Zero(t, n)
		}})
		eventually(t, []*node{a, b}, "b joined a when it started", allAlive("a", "b"))
	})

	t.Run("some peers unreachable", func(t *testing.T) {
		c := startNode(t, netw, "c", nodeOpts{})
		n, err := c.m.Join([]string{netw.Addr("cut"), netw.Addr("a")})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		eventually(t, []*node{a, c}, "a and c see each other", func(n *node) bool {
			return n.member("a").State == mesh.StateAlive && n.member("c").State == mesh.StateAlive
		})
	})
}

func TestEncryption(t *testing.T) {
	key1 := []byte("0123456789abcdef0123456789abcdef")
	key2 := []byte("fedcba9876543210fedcba9876543210")
	tests := []struct {
		name           string
		keyA, keyB     []byte
		wantJoinFailed bool
	}{
		{name: "same key", keyA: key1, keyB: key1},
		{name: "16-byte key", keyA: key1[:16], keyB: key1[:16]},
		{name: "different keys", keyA: key1, keyB: key2, wantJoinFailed: true},
		{name: "plain joins encrypted", keyA: key1, keyB: nil, wantJoinFailed: true},
		{name: "encrypted joins plain", keyA: nil, keyB: key1, wantJoinFailed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			netw := newNetwork(t, "a", "b")
			a := startNode(t, netw, "a", nodeOpts{key: tc.keyA})
			b := startNode(t, netw, "b", nodeOpts{key: tc.keyB})
			n, err := b.m.Join([]string{netw.Addr("a")})
			if tc.wantJoinFailed {
				require.Error(t, err)
				require.Zero(t, n)
				require.Equal(t, 1, a.m.NumAlive())
				require.Equal(t, 1, b.m.NumAlive())
				return
			}
			require.NoError(t, err)
			eventually(t, []*node{a, b}, "a and b see each other", allAlive("a", "b"))
		})
	}
}

func TestLoopbackNetwork(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a := startNode(t, nil, "a", nodeOpts{key: key, bindAddr: "127.0.0.1"})
	b := startNode(t, nil, "b", nodeOpts{key: key, bindAddr: "127.0.0.1"})
	c := startNode(t, nil, "c", nodeOpts{key: []byte("fedcba9876543210fedcba9876543210"), bindAddr: "127.0.0.1"})

	n, err := b.m.Join([]string{a.self().Addr})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	eventually(t, []*node{a, b}, "a and b see each other over UDP/TCP", allAlive("a", "b"))

	_, err = c.m.Join([]string{a.self().Addr})
	require.Error(t, err, "a node with another key must not join")
	require.Equal(t, 2, a.m.NumAlive())
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name    string
		cfg     mesh.Config
		wantErr string
	}{
		{name: "no name", cfg: mesh.Config{}, wantErr: "node name is required"},
		{name: "bad key", cfg: mesh.Config{NodeName: "a", Key: []byte("short")}, wantErr: "want 16, 24 or 32"},
		{name: "bad tuning", cfg: mesh.Config{NodeName: "a", Tuning: "wan"}, wantErr: `unknown mesh tuning "wan"`},
		{name: "bad port", cfg: mesh.Config{NodeName: "a", BindPort: 70000}, wantErr: "0-65535"},
		{name: "meta too big", cfg: mesh.Config{NodeName: "a", Meta: mesh.Meta{Endpoint: string(make([]byte, 600))}}, wantErr: "limit of 512 bytes"},
		{name: "ok", cfg: mesh.Config{NodeName: "a", Registerer: prometheus.NewRegistry()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			m, err := mesh.New(tc.cfg, logger)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Empty(t, m.Members())
			n, err := m.Join([]string{"10.0.0.1"})
			require.True(t, errors.Is(err, mesh.ErrNotRunning))
			require.Zero(t, n)
		})
	}

	t.Run("metrics registered twice", func(t *testing.T) {
		logger, _ := ktesting.NewTestContext(t)
		reg := prometheus.NewRegistry()
		_, err := mesh.New(mesh.Config{NodeName: "a", Registerer: reg}, logger)
		require.NoError(t, err)
		_, err = mesh.New(mesh.Config{NodeName: "b", Registerer: reg}, logger)
		require.ErrorContains(t, err, "shoal_agent_mesh_members")
	})
}

func TestRunTwice(t *testing.T) {
	netw := newNetwork(t, "a")
	a := startNode(t, netw, "a", nodeOpts{})
	require.ErrorContains(t, a.m.Run(context.Background()), "Run called twice")
}
