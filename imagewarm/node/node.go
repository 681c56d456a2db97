// Package node assembles one agent's part of the image swarm: its blob
// store, the tracker it plays for some digests, its tracker client, the
// blob server (for peers, and for the local runtime as a registry mirror)
// and the swarm fetcher. The agent runs one Node; the benchmark runs one
// per simulated node, in its own process.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/imagewarm/blobserver"
	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/placement"
	"github.com/shoal-io/shoal/imagewarm/store"
	"github.com/shoal-io/shoal/imagewarm/swarm"
	"github.com/shoal-io/shoal/imagewarm/tracker"
)

// Defaults for Config.
const (
	// DefaultMaxPeerUploads caps the uploads a node serves peers at once.
	DefaultMaxPeerUploads = 4
	// DefaultSpreadWindow is the blob server's SpreadWindow. Every
	// partial holder gives a piece to one peer per window, so a fresh
	// piece reaches N nodes in about log2(N) windows at best: with 1 s,
	// the last pieces of a 16-node cold swarm arrived some 4 s after the
	// upstream finished (benchmark, B=R=8 MiB/s: η p50 0.86-0.89 with
	// 1 s, 0.88-0.91 with 250 ms, 0.87 with none).
	DefaultSpreadWindow = 250 * time.Millisecond
	// DefaultReleaseInterval is how often blobs the runtime holds are
	// dropped from the store.
	DefaultReleaseInterval = 30 * time.Second
	// pullThroughLimit bounds a fetch started by a runtime request.
	pullThroughLimit = 30 * time.Minute
	// credentialTTL is how long credentials a warm used stay usable for
	// the runtime's requests of the same repository.
	credentialTTL = 15 * time.Minute
)

// Upstream describes a registry the node mirrors.
type Upstream struct {
	// Registry is the host[:port] of image references.
	Registry string
	// Insecure reaches it over plain HTTP.
	Insecure bool
}

// Config configures a Node.
type Config struct {
	// Name is the node's name (its mesh member name). Required.
	Name string
	// Zone is the node's topology zone, if known.
	Zone string
	// Listener serves peers and trackers; Advertise is host:port others
	// reach it at (its address when empty). Required.
	Listener  net.Listener
	Advertise string
	// RuntimeListener, if set, serves the local runtime as its registry
	// mirror (a loopback address named in hosts.toml).
	RuntimeListener net.Listener
	// StoreDir is the store's root; QuotaBytes bounds it (0: no quota).
	StoreDir   string
	QuotaBytes int64
	// Members lists the live members trackers are chosen from. Required.
	Members tracker.Membership
	// Mode is the swarm mode (swarm.Swarm unless a baseline is wanted).
	Mode swarm.Mode
	// IngressBytesPerSecond and EgressBytesPerSecond bound the node's
	// transfer rates (0: unbounded); MaxPeerUploads caps concurrent uploads
	// (0: DefaultMaxPeerUploads).
	IngressBytesPerSecond, EgressBytesPerSecond int64
	MaxPeerUploads                              int
	// SpreadWindow is the blob server's SpreadWindow (DefaultSpreadWindow
	// when 0; negative turns it off).
	SpreadWindow time.Duration
	// Upstreams are the registries with settings other than the default
	// (HTTPS): the ones reached over plain HTTP.
	Upstreams []Upstream
	// Transport reaches registries (http.DefaultTransport when nil).
	Transport http.RoundTripper
	// Runtime, if set, serves peers blobs the runtime already holds, and
	// lets the node drop its own copy of them.
	Runtime RuntimeContent
	// Platform picks the image of an index (linux/GOARCH when zero).
	Platform v1.Platform
	// PeerTLS, if set, serves peers and trackers over mutual TLS with
	// this identity and reaches them the same way: a request without a
	// certificate of a live member of Members gets 401 or 403 and nothing
	// else (peertls.Identity.Guard). Nil: plain HTTP, unauthenticated.
	// A Fetch.Peers client the caller sets must carry
	// PeerTLS.ClientConfig() itself.
	PeerTLS *peertls.Identity
	// WrapPeer, if set, wraps the peer blob handler (the benchmark's
	// fault injection).
	WrapPeer func(http.Handler) http.Handler
	// Fetch tunes the fetcher; Self, Store, Trackers, Upstream, Mode,
	// Ingress, Registerer and Logger are set by New.
	Fetch swarm.Config
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger is the node's logger (klog.Background() when zero).
	Logger klog.Logger
}

// RuntimeContent is the runtime's content store, read-only.
type RuntimeContent interface {
	blobserver.BlobSource
	// Has reports whether the runtime holds blob d.
	Has(ctx context.Context, d v1.Hash) (bool, error)
}

// Node is one agent's swarm member.
type Node struct {
	cfg     Config
	log     klog.Logger
	store   *store.Store
	tracker *tracker.Tracker
	client  *tracker.Client
	fetcher *swarm.Fetcher
	server  *blobserver.Server
	up      *swarm.Registry

	mu    sync.Mutex
	creds map[string]credential // registry/repository -> last credentials used
	// inRuntime are verified blobs dropped from the store because the
	// runtime holds them: still announced as complete (peers are served
	// from the runtime's content store) while the runtime has them.
	inRuntime map[v1.Hash]int64
}

// credential is an authenticator a warm used, kept for the runtime's
// requests of the same repository.
type credential struct {
	auth  authn.Authenticator
	until time.Time
}

// New opens the store and builds the node; Run serves it.
func New(cfg Config) (*Node, error) {
	if cfg.Name == "" || cfg.Listener == nil || cfg.Members == nil || cfg.StoreDir == "" {
		return nil, errors.New("image swarm node: Name, Listener, Members and StoreDir are required")
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Listener.Addr().String()
	}
	if cfg.SpreadWindow == 0 {
		cfg.SpreadWindow = DefaultSpreadWindow
	}
	if cfg.MaxPeerUploads == 0 {
		cfg.MaxPeerUploads = DefaultMaxPeerUploads
	}
	if cfg.Platform.OS == "" {
		cfg.Platform = v1.Platform{OS: "linux", Architecture: defaultArch()}
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	n := &Node{cfg: cfg, log: log.WithName("imagewarm"), creds: map[string]credential{}, inRuntime: map[v1.Hash]int64{},
		up: &swarm.Registry{Transport: cfg.Transport}}

	var client *tracker.Client
	st, err := store.Open(cfg.StoreDir, store.Options{QuotaBytes: cfg.QuotaBytes, Logger: n.log,
		OnEvict: func(d v1.Hash) {
			ctx, cancel := context.WithTimeout(context.Background(), tracker.DefaultTimeout)
			defer cancel()
			if client != nil {
				_ = client.Withdraw(ctx, d.String())
			}
		}})
	if err != nil {
		return nil, fmt.Errorf("image swarm node: %w", err)
	}
	n.store = st
	fail := func(err error) (*Node, error) {
		_ = st.Close()
		return nil, fmt.Errorf("image swarm node: %w", err)
	}
	if n.tracker, err = tracker.New(tracker.Config{Registerer: cfg.Registerer}); err != nil {
		return fail(err)
	}
	scheme := "http"
	if cfg.PeerTLS != nil {
		scheme = "https"
	}
	if cfg.Fetch.Peers == nil {
		t := swarmTransport()
		if cfg.PeerTLS != nil {
			t.TLSClientConfig = cfg.PeerTLS.ClientConfig()
		}
		cfg.Fetch.Peers = &http.Client{Transport: t}
	}
	cfg.Fetch.PeerScheme = scheme
	client, err = tracker.NewClient(tracker.ClientConfig{
		HTTPClient: cfg.Fetch.Peers, Scheme: scheme,
		Self:     placement.Member{Name: cfg.Name, Endpoint: cfg.Advertise, Zone: cfg.Zone},
		Members:  cfg.Members,
		Holdings: n.holdings(swarm.HoldingsOf(st, cfg.Mode == swarm.SpegelLike)),
		Local:    n.tracker, Registerer: cfg.Registerer, Logger: n.log,
	})
	if err != nil {
		return fail(err)
	}
	n.client = client
	fc := cfg.Fetch
	fc.Self, fc.Store, fc.Trackers, fc.Upstream, fc.Mode = cfg.Name, st, client, n.up, cfg.Mode
	fc.Registerer, fc.Logger = cfg.Registerer, n.log
	if cfg.IngressBytesPerSecond > 0 {
		fc.Ingress = blobserver.NewLimiter(cfg.IngressBytesPerSecond, 0, nil)
	}
	if n.fetcher, err = swarm.New(fc); err != nil {
		return fail(err)
	}
	bo := blobserver.Options{Store: st, MaxPeerUploads: cfg.MaxPeerUploads, EgressBytesPerSecond: cfg.EgressBytesPerSecond,
		PullThrough: n.pullThrough, SpreadWindow: cfg.SpreadWindow, Runtime: cfg.Runtime, Registerer: cfg.Registerer}
	if n.server, err = blobserver.New(bo); err != nil {
		return fail(err)
	}
	return n, nil
}

// Store returns the node's blob store.
func (n *Node) Store() *store.Store { return n.store }

// Tracker returns the tracker this node plays.
func (n *Node) Tracker() *tracker.Tracker { return n.tracker }

// Run serves peers (and the runtime) until ctx ends, and keeps the
// trackers' soft state fresh. When it returns it stops every fetch and
// closes the store.
func (n *Node) Run(ctx context.Context) error {
	defer func() { _ = n.store.Close() }()
	defer n.fetcher.Close() // before the store closes
	mux := http.NewServeMux()
	mux.Handle(tracker.DefaultPathPrefix+"/", n.tracker.Handler(tracker.DefaultPathPrefix))
	var peer http.Handler = n.server.Handler(blobserver.Peer)
	if n.cfg.WrapPeer != nil {
		peer = n.cfg.WrapPeer(peer)
	}
	mux.Handle("/v2/", peer)
	var peers http.Handler = mux
	listener := n.cfg.Listener
	if n.cfg.PeerTLS != nil {
		peers = n.cfg.PeerTLS.Guard(mux, liveMember(n.cfg.Members, n.cfg.Name))
		listener = tls.NewListener(listener, n.cfg.PeerTLS.ServerConfig())
	}

	g, ctx := errgroup.WithContext(ctx)
	serve := func(l net.Listener, h http.Handler) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			BaseContext: func(net.Listener) context.Context { return klog.NewContext(context.Background(), n.log) }}
		g.Go(func() error {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve %s: %w", l.Addr(), err)
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				_ = srv.Close()
			}
			return nil
		})
	}
	serve(listener, peers)
	if n.cfg.RuntimeListener != nil {
		serve(n.cfg.RuntimeListener, n.server.Handler(blobserver.Runtime))
	}
	g.Go(func() error { return n.tracker.Run(ctx) })
	g.Go(func() error { return n.client.Run(ctx) })
	if n.cfg.Runtime != nil {
		g.Go(func() error { return n.releaseLoop(ctx) })
	}
	return g.Wait()
}

// Forget drops a departed node's holdings and leases from this node's
// tracker (call it on the mesh's leave and death events).
func (n *Node) Forget(node string) { n.tracker.ForgetNode(node) }

// origin returns the origin of a repository of a registry, with the
// credentials a recent warm used for it.
func (n *Node) origin(registry, repository string) swarm.Origin {
	o := swarm.Origin{Registry: registry, Repository: repository, Insecure: n.insecure(registry)}
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.creds[registry+"/"+repository]; ok && time.Now().Before(c.until) {
		o.Auth = c.auth
	}
	return o
}

// insecure reports whether registry is reached over plain HTTP.
func (n *Node) insecure(registry string) bool {
	for _, u := range n.cfg.Upstreams {
		if u.Registry == registry {
			return u.Insecure
		}
	}
	return false
}

// remember keeps the credentials of a warm for the runtime's requests.
func (n *Node) remember(o swarm.Origin) {
	if o.Auth == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	for k, c := range n.creds {
		if now.After(c.until) {
			delete(n.creds, k)
		}
	}
	n.creds[o.Registry+"/"+o.Repository] = credential{auth: o.Auth, until: now.Add(credentialTTL)}
}

// pullThrough starts fetching a blob the runtime asked for and the node
// does not hold: its registry is containerd's ns= parameter, its size the
// trackers' (or upstream's) answer.
func (n *Node) pullThrough(ctx context.Context, repo string, d v1.Hash, q url.Values) (*store.Blob, error) {
	registry := q.Get("ns")
	if registry == "" {
		return nil, errors.New("no ns= parameter: the registry is unknown")
	}
	if registry == "docker.io" {
		registry = name.DefaultRegistry
	}
	o := n.origin(registry, repo)
	size, err := n.size(ctx, d, o)
	if err != nil {
		return nil, err
	}
	b, err := n.store.Begin(d, size, swarm.PieceSizeFor(size))
	if err != nil {
		return nil, err
	}
	n.fetcher.Start(v1.Descriptor{Digest: d, Size: size}, o, pullThroughLimit)
	return b, nil
}

// size finds a blob's size: from a holder, else with a HEAD upstream.
func (n *Node) size(ctx context.Context, d v1.Hash, o swarm.Origin) (int64, error) {
	if n.cfg.Mode != swarm.Naive {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		res, err := n.client.Lookup(lctx, d.String(), tracker.LookupOptions{})
		cancel()
		if err == nil {
			for _, h := range res.Holders {
				if h.Size > 0 {
					return h.Size, nil
				}
			}
		}
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.up.Size(hctx, o, d)
}

// releaseLoop drops verified blobs the runtime holds too, so that a layer
// is not kept twice on the node; peers are then served from the runtime.
func (n *Node) releaseLoop(ctx context.Context) error {
	t := time.NewTicker(DefaultReleaseInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n.ReleaseHeldByRuntime(ctx)
	}
}

// holdings adds the blobs held for the node by the runtime to the
// store's, for the trackers' re-announcements.
func (n *Node) holdings(store tracker.Holdings) tracker.Holdings {
	return tracker.HoldingsFunc(func() []tracker.Holding {
		out := store.Holdings()
		n.mu.Lock()
		defer n.mu.Unlock()
		for d, size := range n.inRuntime {
			out = append(out, tracker.Holding{Digest: d.String(), Complete: true, Size: size})
		}
		return out
	})
}

// ReleaseHeldByRuntime drops every verified blob the runtime holds from
// the store (they stay announced while the runtime has them), and stops
// announcing blobs the runtime no longer has.
func (n *Node) ReleaseHeldByRuntime(ctx context.Context) int {
	if n.cfg.Runtime == nil {
		return 0
	}
	n.mu.Lock()
	held := make(map[v1.Hash]int64, len(n.inRuntime))
	for d, s := range n.inRuntime {
		held[d] = s
	}
	n.mu.Unlock()
	var gone []string
	for d := range held {
		if has, err := n.cfg.Runtime.Has(ctx, d); err == nil && !has {
			n.mu.Lock()
			delete(n.inRuntime, d)
			n.mu.Unlock()
			// Fetched back into the store meanwhile: still held.
			if h, err := n.store.Stat(d); err == nil && h.Verified {
				continue
			}
			gone = append(gone, d.String())
		}
	}
	if len(gone) > 0 {
		wctx, cancel := context.WithTimeout(ctx, tracker.DefaultTimeout)
		_ = n.client.Withdraw(wctx, gone...)
		cancel()
	}
	released := 0
	for _, h := range n.store.Holdings() {
		if !h.Verified {
			continue
		}
		has, err := n.cfg.Runtime.Has(ctx, h.Digest)
		if err != nil || !has {
			continue
		}
		if err := n.store.Release(h.Digest); err == nil {
			released++
			n.mu.Lock()
			n.inRuntime[h.Digest] = h.Size
			n.mu.Unlock()
		}
	}
	if released > 0 {
		n.log.V(2).Info("Dropped blobs the runtime holds", "blobs", released)
	}
	return released
}

// liveMember reports whether a node is a live member of members (or is
// self, which a node may ask of itself), from a set rebuilt at most once a
// second: Guard asks on every peer request, and a member list has
// thousands of entries.
func liveMember(members tracker.Membership, self string) func(node string) bool {
	var (
		mu    sync.Mutex
		set   map[string]bool
		built time.Time
	)
	return func(node string) bool {
		if node == self {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		if set == nil || time.Since(built) > time.Second || !set[node] && time.Since(built) > 100*time.Millisecond {
			ms := members.Members()
			set = make(map[string]bool, len(ms))
			for _, m := range ms {
				set[m.Name] = true
			}
			built = time.Now()
		}
		return set[node]
	}
}

// swarmTransport reaches other agents' swarm endpoints, trackers and blob
// servers alike. Piece requests to one peer from several fetches plus the
// tracker RPCs run well past the default two idle connections per host,
// and every connection beyond them would be closed after its request and
// dialled again for the next.
func swarmTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	t.DisableCompression = true // blobs are compressed already
	return t
}
