// Package mesh joins shoal-agent to the agents' memberlist mesh. The mesh
// carries membership, failure detection and a few bytes of per-node metadata
// (Meta) only; anything bigger travels by direct RPC between agents.
//
// Memberlist forgets failed nodes once it stops gossiping about them and
// never contacts them again, so a network partition longer than about 30 s
// would leave two meshes. Run therefore re-joins, every few seconds, the
// addresses of members it saw die and the bootstrap peers it was given, and
// the mesh heals by itself when the network comes back.
package mesh

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultPort is the memberlist port agents use (TCP and UDP).
const DefaultPort = 7946

const (
	// joinParallelism is how many peers a join contacts at once.
	joinParallelism = 4
	// joinEnough is how many successful contacts end Join: one push/pull
	// already gives the whole membership, a few guard against stale peers.
	joinEnough = 3
	// maxRejoin caps the addresses one periodic rejoin round contacts.
	maxRejoin = 8
)

// ErrNotRunning is returned by Join when Run has not created the memberlist
// yet (or has already stopped).
var ErrNotRunning = errors.New("mesh is not running")

// State is a member's state as this node sees it.
type State string

// Member states.
const (
	// StateAlive means the member answers probes.
	StateAlive State = "alive"
	// StateSuspect means a probe of the member failed and memberlist is
	// waiting for it to refute before declaring it dead. Memberlist does not
	// expose suspicion; the mesh learns it from this node's own failed probes
	// (best effort: a suspicion raised only by other nodes is not seen).
	StateSuspect State = "suspect"
	// StateDead means the member was declared failed.
	StateDead State = "dead"
	// StateLeft means the member left gracefully.
	StateLeft State = "left"
)

// Event says what happened to a member.
type Event string

// Membership events.
const (
	// EventJoin is a member appearing or coming back to life.
	EventJoin Event = "join"
	// EventLeave is a member leaving or being declared dead; Member.State
	// tells which.
	EventLeave Event = "leave"
	// EventUpdate is a member changing its metadata.
	EventUpdate Event = "update"
)

// Member is one node of the mesh as this node sees it.
type Member struct {
	// Name is the member's node name.
	Name string `json:"name"`
	// Addr is the member's memberlist address, ip:port.
	Addr string `json:"addr"`
	// Meta is the metadata the member advertises.
	Meta Meta `json:"meta"`
	// State is the member's state.
	State State `json:"state"`
	// Since is when this node saw State begin (local clock).
	Since time.Time `json:"since"`
}

// Config configures a Mesh.
type Config struct {
	// NodeName is this node's unique name in the mesh (the Kubernetes node
	// name). Required.
	NodeName string
	// BindAddr is the address memberlist listens on ("" means 0.0.0.0).
	BindAddr string
	// BindPort is the TCP and UDP port memberlist listens on; 0 picks a free
	// port (tests). Agents use DefaultPort.
	BindPort int
	// AdvertiseAddr is the address other members reach this node at ("":
	// memberlist picks a private address of the host).
	AdvertiseAddr string
	// AdvertisePort is the port other members reach this node at (0 means
	// BindPort).
	AdvertisePort int
	// Key is the AES key (16, 24 or 32 bytes) that encrypts all mesh
	// traffic; nil disables encryption. Members with another key cannot join.
	Key []byte
	// Meta is the metadata this node advertises.
	Meta Meta
	// Transport carries memberlist traffic; nil uses the real network. Tests
	// pass a transport from meshtest.
	Transport memberlist.Transport
	// Registerer receives the mesh metrics; nil registers none.
	Registerer prometheus.Registerer
	// Tuning names the timing profile: TuningLAN ("" or "lan", production)
	// or TuningLocal ("local", fast, for tests).
	Tuning string
	// OnChange, when set, is called for every membership event, in order,
	// from a single goroutine owned by Run (never under a mesh lock, so it
	// may call the Mesh's methods).
	OnChange func(Member, Event)
}

// Mesh is this node's membership in the agents' mesh. Create it with New and
// start it with Run; its methods are safe for concurrent use.
type Mesh struct {
	cfg     Config
	log     klog.Logger
	tune    tuning
	mlBase  *memberlist.Config // the tuned profile, for timing computations
	clk     clock.WithTicker
	meta    atomic.Pointer[[]byte]
	events  *prometheus.CounterVec
	ran     atomic.Bool
	stopped atomic.Bool   // memberlist was shut down: ignore late callbacks
	started chan struct{} // closed once memberlist runs
	wake    chan struct{}

	mu        sync.Mutex
	ml        *memberlist.Memberlist
	localMeta Meta
	members   map[string]*record
	bootstrap []string
	pending   []change
}

// record is the last known state of one member.
type record struct {
	Member
	// suspectUntil is when a suspicion that was neither confirmed nor
	// refuted stops counting (memberlist has decided by then).
	suspectUntil time.Time
}

// change is one event waiting for delivery to Config.OnChange.
type change struct {
	member Member
	event  Event
}

// New validates cfg and returns a Mesh that Run will start. logger receives the
// mesh's own messages and memberlist's (at high verbosity).
func New(cfg Config, logger klog.Logger) (*Mesh, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("mesh: node name is required")
	}
	if cfg.Key != nil && !validKeySize(len(cfg.Key)) {
		return nil, fmt.Errorf("mesh: encryption key is %d bytes, want 16, 24 or 32", len(cfg.Key))
	}
	if cfg.BindPort < 0 || cfg.BindPort > 65535 || cfg.AdvertisePort < 0 || cfg.AdvertisePort > 65535 {
		return nil, fmt.Errorf("mesh: ports must be within 0-65535, got bind %d advertise %d", cfg.BindPort, cfg.AdvertisePort)
	}
	tune, err := tuningFor(cfg.Tuning)
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	meta, err := cfg.Meta.Encode()
	if err != nil {
		return nil, fmt.Errorf("mesh: %w", err)
	}
	m := &Mesh{
		cfg:       cfg,
		log:       logger.WithName("mesh"),
		tune:      tune,
		mlBase:    tune.base(),
		clk:       clock.RealClock{},
		wake:      make(chan struct{}, 1),
		started:   make(chan struct{}),
		members:   map[string]*record{},
		localMeta: cfg.Meta,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_agent_mesh_events_total",
			Help: "Membership events seen by this agent, by event (join, leave, update).",
		}, []string{"event"}),
	}
	m.meta.Store(&meta)
	for _, ev := range []Event{EventJoin, EventLeave, EventUpdate} {
		m.events.WithLabelValues(string(ev))
	}
	if cfg.Registerer != nil {
		if err := registerMetrics(cfg.Registerer, m); err != nil {
			return nil, fmt.Errorf("mesh: %w", err)
		}
	}
	return m, nil
}

// Run creates the memberlist, joins the peers given to Join so far, and
// keeps re-joining dead members and bootstrap peers every few seconds until
// ctx is done. Then it leaves the mesh gracefully (bounded by a timeout) and
// shuts memberlist down. Run may be called once.
func (m *Mesh) Run(ctx context.Context) error {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("mesh: Run called twice")
	}
	ml, err := memberlist.Create(m.memberlistConfig())
	if err != nil {
		return fmt.Errorf("mesh: starting memberlist for node %s on %s:%d: %w", m.cfg.NodeName, m.cfg.BindAddr, m.cfg.BindPort, err)
	}
	m.mu.Lock()
	m.ml = ml
	boot := slices.Clone(m.bootstrap)
	m.mu.Unlock()
	close(m.started)
	m.log.Info("Started mesh member", "node", m.cfg.NodeName, "addr", m.selfAddr(), "encrypted", m.cfg.Key != nil)

	stopDispatch := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.dispatch(stopDispatch)
	}()

	if len(boot) > 0 {
		if n, err := m.joinAddrs(ctx, ml, boot, joinEnough); err != nil {
			m.log.Info("Could not join bootstrap peers yet; will retry", "peers", len(boot), "err", err)
		} else {
			m.log.V(1).Info("Joined bootstrap peers", "contacted", n)
		}
	}

	ticker := m.clk.NewTicker(m.tune.rejoinInterval)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-ticker.C():
			m.rejoin(ctx, ml)
			m.prune()
		}
	}
	ticker.Stop()

	// Flag the metadata first so that peers can tell this leave from a
	// failure (memberlist does not tell them), then leave.
	m.mu.Lock()
	meta := m.localMeta
	m.mu.Unlock()
	leaving := leavingMeta(meta)
	m.meta.Store(&leaving)
	if err := ml.UpdateNode(m.tune.leaveTimeout); err != nil {
		m.log.Info("Announcing the leave did not complete", "err", err)
	}
	if err := ml.Leave(m.tune.leaveTimeout); err != nil {
		m.log.Info("Leaving the mesh did not complete; shutting down anyway", "err", err)
	}
	if err := ml.Shutdown(); err != nil {
		m.log.Error(err, "Shutting down memberlist")
	}
	// Memberlist's suspicion timers outlive Shutdown; ignore what they say.
	m.stopped.Store(true)
	m.mu.Lock()
	m.ml = nil
	m.mu.Unlock()
	close(stopDispatch)
	wg.Wait()
	m.log.Info("Left mesh", "node", m.cfg.NodeName)
	return nil
}

// Started returns a channel closed once Run has started memberlist (Join
// then contacts peers immediately instead of returning ErrNotRunning).
func (m *Mesh) Started() <-chan struct{} {
	return m.started
}

// Join contacts peers (ip:port, host:port, or ip with the mesh port implied;
// "name/ip:port" is also accepted) and merges their membership into this
// node's. It skips this node's own address, contacts peers in random order,
// a few at a time, and stops once a few have answered. It returns how many
// peers answered, and an error when peers were given but none answered.
//
// Join may be called any number of times. The peers are also remembered as
// bootstrap peers: Run joins them when it starts (Join before Run returns
// ErrNotRunning) and re-joins those that are not known members every few
// seconds, so a partition heals without the coordinator.
func (m *Mesh) Join(peers []string) (int, error) {
	addrs := m.normalizePeers(peers)
	m.mu.Lock()
	if len(peers) > 0 {
		m.bootstrap = addrs
	}
	ml := m.ml
	m.mu.Unlock()
	if len(addrs) == 0 {
		return 0, nil
	}
	if ml == nil {
		return 0, fmt.Errorf("joining %d mesh peers: %w (they are joined when Run starts)", len(addrs), ErrNotRunning)
	}
	return m.joinAddrs(context.Background(), ml, addrs, joinEnough)
}

// Members returns every member this node knows, itself included, sorted by
// name: alive and suspect ones, and dead or left ones remembered for an hour
// after they went away.
func (m *Mesh) Members() []Member {
	now := m.clk.Now()
	m.mu.Lock()
	out := make([]Member, 0, len(m.members))
	for _, r := range m.members {
		out = append(out, r.effective(now))
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// NumAlive returns how many members, this node included, are alive or
// suspect (memberlist's notion of a live member).
func (m *Mesh) NumAlive() int {
	counts := m.stateCounts()
	return counts[StateAlive] + counts[StateSuspect]
}

// SetMeta changes the metadata this node advertises and, while running,
// broadcasts it (waiting a bounded time for the broadcast to go out).
func (m *Mesh) SetMeta(meta Meta) error {
	b, err := meta.Encode()
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	m.mu.Lock()
	m.meta.Store(&b)
	m.localMeta = meta
	ml := m.ml
	m.mu.Unlock()
	if ml == nil {
		return nil
	}
	if err := ml.UpdateNode(m.tune.leaveTimeout); err != nil {
		return fmt.Errorf("mesh: broadcasting new metadata: %w", err)
	}
	return nil
}

// memberlistConfig builds the memberlist configuration from the tuning
// profile and Config.
func (m *Mesh) memberlistConfig() *memberlist.Config {
	c := m.tune.base()
	c.Name = m.cfg.NodeName
	if m.cfg.BindAddr != "" {
		c.BindAddr = m.cfg.BindAddr
	}
	c.BindPort = m.cfg.BindPort
	c.AdvertiseAddr = m.cfg.AdvertiseAddr
	c.AdvertisePort = m.cfg.AdvertisePort
	if c.AdvertisePort == 0 {
		c.AdvertisePort = m.cfg.BindPort
	}
	c.Transport = m.cfg.Transport
	c.SecretKey = m.cfg.Key
	d := delegate{m: m}
	c.Delegate = d
	c.Events = d
	c.Ping = d
	c.Logger = log.New(logWriter{m: m}, "", 0)
	return c
}

// joinAddrs joins addrs in random order, joinParallelism at a time, until
// enough have answered or ctx is done.
func (m *Mesh) joinAddrs(ctx context.Context, ml *memberlist.Memberlist, addrs []string, enough int) (int, error) {
	addrs = slices.Clone(addrs)
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	joined := 0
	var errs []error
	for start := 0; start < len(addrs) && joined < enough && ctx.Err() == nil; start += joinParallelism {
		wave := addrs[start:min(start+joinParallelism, len(addrs))]
		results := make([]error, len(wave))
		var wg sync.WaitGroup
		for i, addr := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i] = ml.Join([]string{addr})
			}()
		}
		wg.Wait()
		for i, err := range results {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", wave[i], err))
				continue
			}
			joined++
		}
	}
	if joined == 0 {
		if len(errs) == 0 {
			return 0, fmt.Errorf("joining mesh peers: %w", ctx.Err())
		}
		return 0, fmt.Errorf("joining mesh: none of %d peers answered: %w", len(addrs), errors.Join(errs...))
	}
	return joined, nil
}

// rejoin contacts the addresses of dead members and the bootstrap peers
// that are not live members, so that partitions heal.
func (m *Mesh) rejoin(ctx context.Context, ml *memberlist.Memberlist) {
	addrs := m.rejoinCandidates()
	if len(addrs) == 0 {
		return
	}
	n, err := m.joinAddrs(ctx, ml, addrs, len(addrs))
	if err != nil {
		m.log.V(2).Info("Periodic mesh rejoin reached nobody", "tried", len(addrs), "err", err)
		return
	}
	m.log.V(1).Info("Periodic mesh rejoin", "tried", len(addrs), "answered", n)
}

// rejoinCandidates returns up to maxRejoin addresses (random choice) of
// members this node saw die and of bootstrap peers that are not live
// members.
func (m *Mesh) rejoinCandidates() []string {
	m.mu.Lock()
	self := ""
	if r := m.members[m.cfg.NodeName]; r != nil {
		self = r.Addr
	}
	live := map[string]bool{self: true}
	var dead []string
	for _, r := range m.members {
		switch {
		case r.Name == m.cfg.NodeName:
		case r.State == StateAlive || r.State == StateSuspect:
			live[r.Addr] = true
		case r.State == StateDead:
			dead = append(dead, r.Addr)
		}
	}
	boot := slices.Clone(m.bootstrap)
	m.mu.Unlock()

	seen := map[string]bool{}
	var out []string
	add := func(full string) {
		addr := full
		if i := strings.LastIndex(full, "/"); i >= 0 {
			addr = full[i+1:]
		}
		if addr == "" || live[addr] || seen[addr] {
			return
		}
		seen[addr] = true
		out = append(out, full)
	}
	for _, a := range dead {
		add(a)
	}
	for _, a := range boot {
		add(a)
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if len(out) > maxRejoin {
		out = out[:maxRejoin]
	}
	return out
}

// prune forgets dead and left members older than the retention.
func (m *Mesh) prune() {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, r := range m.members {
		if name != m.cfg.NodeName && (r.State == StateDead || r.State == StateLeft) && now.Sub(r.Since) > m.tune.retention {
			delete(m.members, name)
		}
	}
}

// normalizePeers trims, adds the default port, drops this node's own
// address and removes duplicates.
func (m *Mesh) normalizePeers(peers []string) []string {
	self := map[string]bool{}
	if a := m.selfAddr(); a != "" {
		self[a] = true
	}
	port := m.defaultPort()
	if m.cfg.AdvertiseAddr != "" {
		self[net.JoinHostPort(m.cfg.AdvertiseAddr, strconv.Itoa(port))] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range peers {
		p = strings.TrimSpace(p)
		prefix, hostport := "", p
		if i := strings.LastIndex(p, "/"); i >= 0 {
			prefix, hostport = p[:i+1], p[i+1:]
		}
		if hostport == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(hostport); err != nil {
			hostport = net.JoinHostPort(strings.Trim(hostport, "[]"), strconv.Itoa(port))
		}
		if self[hostport] || seen[hostport] {
			continue
		}
		seen[hostport] = true
		out = append(out, prefix+hostport)
	}
	return out
}

// selfAddr returns this node's advertised ip:port once memberlist runs.
func (m *Mesh) selfAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.members[m.cfg.NodeName]; r != nil {
		return r.Addr
	}
	return ""
}

// defaultPort is the port assumed for peers given without one.
func (m *Mesh) defaultPort() int {
	if a := m.selfAddr(); a != "" {
		if _, p, err := net.SplitHostPort(a); err == nil {
			if n, err := strconv.Atoi(p); err == nil {
				return n
			}
		}
	}
	switch {
	case m.cfg.AdvertisePort != 0:
		return m.cfg.AdvertisePort
	case m.cfg.BindPort != 0:
		return m.cfg.BindPort
	default:
		return DefaultPort
	}
}

// observe records what memberlist reported about a node. Memberlist calls
// it with its own lock held: it must not call back into memberlist. A node
// that went away is shown as left when its last metadata said it was
// leaving (or it is this node), as dead otherwise.
func (m *Mesh) observe(n *memberlist.Node, st State, ev Event) {
	if m.stopped.Load() {
		return
	}
	w, err := decodeWire(n.Meta)
	if err != nil {
		m.log.V(2).Info("Ignoring undecodable metadata of mesh member", "member", n.Name, "err", err)
	}
	if st == StateDead && (w.Leaving || n.Name == m.cfg.NodeName) {
		st = StateLeft
	}
	now := m.clk.Now()
	mem := Member{Name: n.Name, Addr: n.Address(), Meta: w.meta(), State: st, Since: now}
	m.mu.Lock()
	prev := m.members[n.Name]
	if prev != nil && prev.State == st {
		mem.Since = prev.Since
	}
	if ev == EventUpdate && w.Leaving && prev != nil && prev.Meta == w.meta() {
		// Only the leaving flag changed: the leave event follows.
		m.mu.Unlock()
		return
	}
	m.members[n.Name] = &record{Member: mem}
	if m.cfg.OnChange != nil {
		m.pending = append(m.pending, change{member: mem, event: ev})
	}
	m.mu.Unlock()
	m.events.WithLabelValues(string(ev)).Inc()
	select {
	case m.wake <- struct{}{}:
	default:
	}
	if st == StateDead {
		m.log.Info("Mesh member failed", "member", n.Name, "addr", mem.Addr)
	} else {
		m.log.V(1).Info("Mesh membership changed", "member", n.Name, "addr", mem.Addr, "event", ev, "state", st)
	}
}

// markSuspect records that this node's probe of name failed.
func (m *Mesh) markSuspect(name string) {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.members[name]
	if r == nil || name == m.cfg.NodeName || r.State != StateAlive {
		return
	}
	r.State = StateSuspect
	r.Since = now
	r.suspectUntil = now.Add(maxSuspicion(m.mlBase, len(m.members)))
}

// clearSuspect records that name answered a probe.
func (m *Mesh) clearSuspect(name string) {
	now := m.clk.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.members[name]; r != nil && r.State == StateSuspect {
		r.State = StateAlive
		r.Since = now
	}
}

// effective returns the member with an expired suspicion shown as alive.
func (r *record) effective(now time.Time) Member {
	mem := r.Member
	if mem.State == StateSuspect && now.After(r.suspectUntil) {
		mem.State = StateAlive
		mem.Since = r.suspectUntil
	}
	return mem
}

// stateCounts counts members by effective state.
func (m *Mesh) stateCounts() map[State]int {
	now := m.clk.Now()
	counts := map[State]int{}
	m.mu.Lock()
	for _, r := range m.members {
		counts[r.effective(now).State]++
	}
	m.mu.Unlock()
	return counts
}

// dispatch delivers pending events to Config.OnChange until stop is closed,
// then delivers what is left.
func (m *Mesh) dispatch(stop <-chan struct{}) {
	deliver := func() {
		for {
			m.mu.Lock()
			batch := m.pending
			m.pending = nil
			m.mu.Unlock()
			if len(batch) == 0 {
				return
			}
			for _, c := range batch {
				m.cfg.OnChange(c.member, c.event)
			}
		}
	}
	if m.cfg.OnChange == nil {
		<-stop
		return
	}
	for {
		select {
		case <-m.wake:
			deliver()
		case <-stop:
			deliver()
			return
		}
	}
}
