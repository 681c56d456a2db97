// Package agent assembles shoal-agent, the program on every node: the CRI
// connection and node inventory, the state dir and work runner, the link to
// the coordinator, the memberlist mesh, and the metrics/health endpoint.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/agent/endpointauth"
	"github.com/shoal-io/shoal/agent/link"
	"github.com/shoal-io/shoal/agent/mesh"
	"github.com/shoal-io/shoal/agent/state"
	"github.com/shoal-io/shoal/agent/work"
	"github.com/shoal-io/shoal/cri"
	imagewarmnode "github.com/shoal-io/shoal/imagewarm/node"
	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/tracker"
	"github.com/shoal-io/shoal/internal/httpserve"
	"github.com/shoal-io/shoal/probes"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Options are the agent's flags (docs/dev/backbone.md).
type Options struct {
	// NodeName is the node the agent runs on.
	NodeName string
	// Version is the agent's build version.
	Version string
	// Coordinator is the coordinator's host:port.
	Coordinator string
	// CoordinatorServerName is the name on the coordinator's certificate.
	CoordinatorServerName string
	// CAFile, TokenFile and MeshKeyFile are mounted by the DaemonSet.
	CAFile, TokenFile, MeshKeyFile string
	// MeshBindPort is memberlist's port; MeshAdvertise the node's address.
	MeshBindPort  int
	MeshAdvertise string
	// RuntimeEndpoint forces a CRI socket; empty means detect under HostRoot.
	RuntimeEndpoint, HostRoot string
	// StateDir keeps accepted work across restarts.
	StateDir string
	// MetricsAddr serves /metrics, /healthz, /readyz and /inventory.
	MetricsAddr string
	// Zone is the node's topology zone, if known.
	Zone string
	// Profiling serves Go's runtime profiles under /debug/pprof/ on MetricsAddr.
	Profiling bool
	// MaxConcurrentPulls caps the image pulls (pull work items) that run
	// at once on the node; 0 means work.DefaultMaxConcurrentPulls.
	MaxConcurrentPulls int
	// P2PPort is the image swarm's port on MeshAdvertise (peers and
	// trackers); 0 disables the swarm and the registry mirror.
	P2PPort int
	// PlainPeers serves and reaches peers over plain HTTP, without the
	// mutual TLS that otherwise guards peer blobs and the tracker: for a
	// rolling upgrade from agents that had no peer TLS, and nothing else.
	PlainPeers bool
	// MirrorPort is the registry mirror's port on 127.0.0.1, named in the
	// runtime's hosts.toml.
	MirrorPort int
	// MirrorRegistries are the registries the agent mirrors for the
	// runtime.
	MirrorRegistries []MirrorRegistry
	// CertsDir is where containerd reads hosts.toml, as mounted in the
	// agent; empty means HostRoot + containerd's own config_path.
	CertsDir string
	// ImageStoreQuota bounds the swarm's blob store in bytes (0: none).
	ImageStoreQuota int64
	// IngressBytesPerSecond and EgressBytesPerSecond bound the swarm's
	// transfer rates (0: unbounded); MaxPeerUploads caps the uploads to
	// peers at once (0: the swarm's default).
	IngressBytesPerSecond, EgressBytesPerSecond int64
	MaxPeerUploads                              int
}

// stateLockWait bounds the wait for a state dir another agent holds. An
// agent pod deleted at once (grace period 0) is replaced by its DaemonSet
// while the kubelet still stops the old container, which holds the state
// dir's lock (and the node's ports) until it exits.
const stateLockWait = 2 * time.Minute

// openState opens the state dir, waiting up to wait while another process
// holds it, instead of failing (and being restarted by the kubelet until
// the old agent is gone).
func openState(ctx context.Context, dir string, wait time.Duration, log klog.Logger) (*state.Store, error) {
	deadline := time.Now().Add(wait)
	logged := false
	for {
		st, err := state.Open(dir, state.WithLogger(log))
		if !errors.Is(err, state.ErrLocked) || !time.Now().Before(deadline) {
			return st, err
		}
		if !logged {
			log.Info("Another agent holds the state dir, likely the one this pod replaces, still stopping; waiting for it",
				"reason", err.Error(), "upTo", wait)
			logged = true
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	log := klog.FromContext(ctx)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	store, err := openState(ctx, o.StateDir, stateLockWait, log)
	if err != nil {
		return fmt.Errorf("open state dir: %w", err)
	}
	defer func() { _ = store.Close() }()

	rt := &runtimeConn{hostRoot: o.HostRoot, explicit: o.RuntimeEndpoint}
	maxPulls := o.MaxConcurrentPulls
	if maxPulls <= 0 {
		maxPulls = work.DefaultMaxConcurrentPulls
	}

	key, err := mesh.LoadKey(o.MeshKeyFile)
	if err != nil {
		return fmt.Errorf("mesh encryption key: %w", err)
	}
	_, metricsPort, _ := net.SplitHostPort(o.MetricsAddr)
	meta := mesh.Meta{Endpoint: net.JoinHostPort(o.MeshAdvertise, metricsPort), Zone: o.Zone, Version: o.Version, Arch: arch()}
	if o.P2PPort > 0 {
		meta.P2P = net.JoinHostPort(o.MeshAdvertise, strconv.Itoa(o.P2PPort))
	}
	var swarmNode *imagewarmnode.Node
	m, err := mesh.New(mesh.Config{
		NodeName:      o.NodeName,
		BindPort:      o.MeshBindPort,
		AdvertiseAddr: o.MeshAdvertise,
		Key:           key,
		Meta:          meta,
		Registerer:    reg,
		OnChange: tracker.ForgetDeparted(func(node string) {
			if swarmNode != nil {
				swarmNode.Forget(node)
			}
		}),
	}, log)
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}

	pullOpts := []work.PullOption{work.PullProgressMeter(cri.NewContentMeter(cri.WithPlatform(platform())))}
	var setup *mirrorSetup
	rc := &runtimeContent{rt: rt}
	defer rc.close()
	var peerID *peertls.Identity
	if o.P2PPort > 0 && !o.PlainPeers {
		if peerID, err = peertls.NewIdentity(peertls.Options{Node: o.NodeName, Registerer: reg, Logger: log,
			StateFile: filepath.Join(o.StateDir, "peer-identity.json")}); err != nil {
			return fmt.Errorf("peer TLS identity: %w", err)
		}
	}
	if o.P2PPort > 0 {
		swarmNode, err = newImageSwarm(o, rc, tracker.MeshMembership(m), peerID, reg, log)
		if err != nil {
			return err
		}
		pullOpts = append(pullOpts, work.PullWarmer(swarmWarmer{n: swarmNode}))
		setup = &mirrorSetup{o: o, rt: rt}
		reg.MustRegister(setup)
	}
	// The runtime's container events wake recreate items as soon as the
	// kubelet starts a new instance, and sidecar-terminate items as soon as
	// a Job pod's main container exits (the poll stays as a fallback).
	events := &cri.Events{}
	// PodProbeMarker probes: one runner for every probed pod of the node.
	probeRunner := probes.New(probes.CRIRuntime(rt.get, events), probes.WithRegisterer(reg))
	probeWork := work.NewProbe(probeRunner, nil)
	runner := work.New(store, map[string]work.Handler{
		nodework.KindNoop:             work.Noop{},
		nodework.KindRecreate:         work.NewRecreate(rt.get, work.RecreateEvents(events)),
		nodework.KindPull:             work.NewPull(rt.get, work.NewPullSlots(maxPulls), pullOpts...),
		nodework.KindSidecarTerminate: work.NewSidecarTerminate(rt.get, work.SidecarTerminateEvents(events)),
		nodework.KindProbe:            probeWork,
	}, log)
	reg.MustRegister(runner)

	l := link.New(link.Config{
		Address:    o.Coordinator,
		ServerName: o.CoordinatorServerName,
		CAFile:     o.CAFile,
		TokenFile:  o.TokenFile,
		Runner:     runner,
		Registerer: reg,
		Hello: func() *nodeworkv1.Hello {
			name, version := rt.info()
			return &nodeworkv1.Hello{
				NodeName:    o.NodeName,
				MeshAddress: net.JoinHostPort(o.MeshAdvertise, strconv.Itoa(o.MeshBindPort)),
				Capabilities: &nodeworkv1.Capabilities{
					RuntimeName: name, RuntimeVersion: version, Os: runtime.GOOS, Arch: arch(),
					Zone: o.Zone, AgentVersion: o.Version, WorkKinds: runner.Kinds(),
				},
			}
		},
		OnPeers: func(peers []*nodeworkv1.Peer) {
			addrs := make([]string, 0, len(peers))
			for _, p := range peers {
				addrs = append(addrs, p.GetMeshAddress())
			}
			if len(addrs) == 0 {
				return
			}
			if n, err := m.Join(addrs); err != nil {
				log.Info("Could not join mesh peers", "peers", len(addrs), "joined", n, "err", err.Error())
			}
		},
	})

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return rt.run(ctx) })
	g.Go(func() error { return runner.Run(ctx) })
	g.Go(func() error { return probeRunner.Run(ctx) })
	g.Go(func() error { return probeWork.Relay(ctx) })
	g.Go(func() error { return events.Run(ctx, rt.get) })
	g.Go(func() error { return m.Run(ctx) })
	g.Go(func() error { return l.Run(ctx) })
	if peerID != nil {
		g.Go(func() error {
			return peerID.Run(ctx, func(ctx context.Context, csr []byte) ([]byte, []byte, error) {
				return l.IssuePeerCertificate(ctx, o.NodeName, csr)
			})
		})
	}
	if swarmNode != nil {
		g.Go(func() error { return swarmNode.Run(ctx) })
		g.Go(func() error { return setup.run(ctx) })
	}
	g.Go(func() error {
		return serveHTTP(ctx, o, reg, rt, m, linkReviewer(l), func() error {
			select {
			case <-runner.Ready():
			default:
				return errors.New("state dir not loaded yet")
			}
			if err := rt.err(); err != nil {
				return err
			}
			return nil
		})
	})
	return g.Wait()
}

// arch is GOARCH with the ARM variant, e.g. "arm/v7".
func arch() string {
	if runtime.GOARCH == "arm" {
		return "arm/v" + goarm()
	}
	return runtime.GOARCH
}

// platform is the node's platform as image indexes name it, e.g. linux,
// arm, v7.
func platform() v1.Platform {
	p := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	if runtime.GOARCH == "arm" {
		p.Variant = "v" + goarm()
	}
	return p
}

// runtimeConn finds and keeps the CRI connection. Until a runtime is found
// the agent is not ready and says why; it keeps looking.
type runtimeConn struct {
	hostRoot, explicit string

	mu      sync.Mutex
	rt      *cri.Runtime
	lastErr error
}

func (c *runtimeConn) run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("cri")
	for {
		ep, err := cri.Detect(c.hostRoot, c.explicit)
		var rt *cri.Runtime
		if err == nil {
			rt, err = cri.Connect(ctx, ep, 10*time.Second)
		}
		if err == nil {
			c.mu.Lock()
			c.rt, c.lastErr = rt, nil
			c.mu.Unlock()
			log.Info("Connected to the container runtime", "runtime", rt.Name(), "version", rt.Version(), "endpoint", ep.Address)
			<-ctx.Done()
			closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = rt.Close(closeCtx)
			return nil
		}
		c.mu.Lock()
		c.lastErr = fmt.Errorf("no container runtime: %w", err)
		c.mu.Unlock()
		log.Error(err, "No container runtime found; retrying in 10s")
		timer := time.NewTimer(10 * time.Second)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

func (c *runtimeConn) get() (*cri.Runtime, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rt == nil {
		if c.lastErr != nil {
			return nil, c.lastErr
		}
		return nil, errors.New("container runtime not connected yet")
	}
	return c.rt, nil
}

func (c *runtimeConn) err() error {
	_, err := c.get()
	return err
}

func (c *runtimeConn) info() (name, version string) {
	if rt, err := c.get(); err == nil {
		return rt.Name(), rt.Version()
	}
	return "", ""
}

// serveHTTP serves the agent's endpoint.
func serveHTTP(ctx context.Context, o Options, reg *prometheus.Registry, rt *runtimeConn, m *mesh.Mesh, reviewer endpointauth.Reviewer, ready func() error) error {
	mux := httpserve.Mux(reg, ready)
	// /metrics, /healthz and /readyz stay open, as node exporters' do; the
	// endpoints that show what runs on the node need a token whose user
	// may get them (package endpointauth).
	guarded := http.NewServeMux()
	guarded.HandleFunc("/inventory", func(w http.ResponseWriter, r *http.Request) {
		c, err := rt.get()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		inv, err := c.Inventory(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, inv)
	})
	guarded.HandleFunc("/mesh", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, m.Members()) })
	guard := (&endpointauth.Guard{Reviewer: reviewer, Registerer: reg}).Protect(guarded)
	mux.Handle("/inventory", guard)
	mux.Handle("/mesh", guard)
	if o.Profiling {
		httpserve.Profiling(guarded)
		mux.Handle("/debug/pprof/", guard)
	}
	return httpserve.ListenAndServe(ctx, o.MetricsAddr, mux)
}

// linkReviewer reviews endpoint tokens through the coordinator.
func linkReviewer(l *link.Link) endpointauth.Reviewer {
	return endpointauth.ReviewerFunc(func(ctx context.Context, token, verb, path string) (endpointauth.Decision, error) {
		r, err := l.ReviewAccess(ctx, token, verb, path)
		if err != nil {
			return endpointauth.Decision{}, err
		}
		return endpointauth.Decision{Authenticated: r.GetAuthenticated(), Allowed: r.GetAllowed(), User: r.GetUser(), Reason: r.GetReason()}, nil
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
