package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/imagewarm/blobserver"
	"github.com/shoal-io/shoal/imagewarm/mirror"
	"github.com/shoal-io/shoal/imagewarm/node"
	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/tracker"
)

// MirrorRegistry is one registry the agent mirrors for the runtime: Host
// as in image references (or "_default" for every registry without a
// hosts directory of its own), Server its upstream URL when it is not
// https://<Host> (a plain-HTTP registry).
type MirrorRegistry struct {
	Host, Server string
}

// ParseMirrorRegistries parses --mirror-registries: a comma-separated list
// of host or host=scheme://server.
func ParseMirrorRegistries(s string) ([]MirrorRegistry, error) {
	var out []MirrorRegistry
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		host, server, _ := strings.Cut(item, "=")
		if err := mirror.ValidateRegistryServer(host, server); err != nil {
			return nil, fmt.Errorf("--mirror-registries: %q (want host[:port], _default, or host=http(s)://server): %w", item, err)
		}
		out = append(out, MirrorRegistry{Host: host, Server: server})
	}
	return out, nil
}

// runtimeContent reads the runtime's content store through containerd's
// content API once the runtime is known (it is node.RuntimeContent).
type runtimeContent struct {
	rt *runtimeConn

	mu sync.Mutex
	cs *cri.ContentStore
}

// store returns the content store, or an error while the runtime is not
// containerd (or not connected).
func (r *runtimeContent) store() (*cri.ContentStore, error) {
	rt, err := r.rt.get()
	if err != nil {
		return nil, err
	}
	if rt.Name() != cri.RuntimeContainerd {
		return nil, fmt.Errorf("runtime %s: %w", rt.Name(), fs.ErrNotExist)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cs == nil {
		cs, err := cri.NewContentStore(rt.Endpoint().Path(), "")
		if err != nil {
			return nil, err
		}
		r.cs = cs
	}
	return r.cs, nil
}

// OpenBlob implements blobserver.BlobSource.
func (r *runtimeContent) OpenBlob(ctx context.Context, d v1.Hash) (blobserver.SourceBlob, error) {
	cs, err := r.store()
	if err != nil {
		return nil, fmt.Errorf("open %s in the runtime's content store: %w", d, errors.Join(err, fs.ErrNotExist))
	}
	return cs.Open(ctx, d.String())
}

// Has implements node.RuntimeContent.
func (r *runtimeContent) Has(ctx context.Context, d v1.Hash) (bool, error) {
	cs, err := r.store()
	if err != nil {
		return false, err
	}
	return cs.Has(ctx, d.String())
}

// close closes the content store connection.
func (r *runtimeContent) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cs != nil {
		_ = r.cs.Close()
	}
}

// newImageSwarm builds the node's swarm member: peers and trackers on
// MeshAdvertise:P2PPort, the runtime's mirror on 127.0.0.1:MirrorPort.
func newImageSwarm(o Options, rc *runtimeContent, members tracker.Membership, peerID *peertls.Identity,
	reg prometheus.Registerer, log klog.Logger) (*node.Node, error) {
	peerL, err := net.Listen("tcp", net.JoinHostPort(o.MeshAdvertise, strconv.Itoa(o.P2PPort)))
	if err != nil {
		return nil, fmt.Errorf("image swarm peer listener: %w", err)
	}
	mirrorL, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.MirrorPort)))
	if err != nil {
		_ = peerL.Close()
		return nil, fmt.Errorf("image swarm mirror listener: %w", err)
	}
	var ups []node.Upstream
	for _, m := range o.MirrorRegistries {
		if strings.HasPrefix(m.Server, "http://") {
			ups = append(ups, node.Upstream{Registry: m.Host, Insecure: true})
		}
	}
	n, err := node.New(node.Config{
		Name: o.NodeName, Zone: o.Zone, Listener: peerL, RuntimeListener: mirrorL,
		StoreDir: filepath.Join(o.StateDir, "images"), QuotaBytes: o.ImageStoreQuota,
		Members: members, Upstreams: ups, Runtime: rc, Platform: platform(),
		IngressBytesPerSecond: o.IngressBytesPerSecond, EgressBytesPerSecond: o.EgressBytesPerSecond,
		MaxPeerUploads: o.MaxPeerUploads, PeerTLS: peerID, Registerer: reg, Logger: log,
	})
	if err != nil {
		_ = peerL.Close()
		_ = mirrorL.Close()
		return nil, err
	}
	return n, nil
}

// mirrorConfigDesc describes shoal_agent_mirror_config.
var mirrorConfigDesc = prometheus.NewDesc("shoal_agent_mirror_config",
	"1 when the runtime's setting named by check lets the agent work as the node's registry mirror and share the runtime's blobs: "+
		"config_path (containerd reads hosts.toml from the certs dir the agent writes), "+
		"keeps_layers (discard_unpacked_layers is off, so peers can be served from containerd's content store), "+
		"installed (the agent's hosts.toml entries are written).",
	[]string{"check"}, nil)

// mirrorSetup checks the runtime's registry configuration and writes the
// agent's hosts.toml entries; it reports what it found as a metric and in
// the log, and retries until ctx ends when the runtime is not there yet.
type mirrorSetup struct {
	o  Options
	rt *runtimeConn

	mu     sync.Mutex
	checks map[string]bool
}

// Describe implements prometheus.Collector.
func (s *mirrorSetup) Describe(ch chan<- *prometheus.Desc) { ch <- mirrorConfigDesc }

// Collect implements prometheus.Collector.
func (s *mirrorSetup) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ok := range s.checks {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(mirrorConfigDesc, prometheus.GaugeValue, v, k)
	}
}

// Intervals of mirrorSetup.run.
const (
	// mirrorRetry is the wait after a failed install (1 s while the
	// runtime is not connected yet).
	mirrorRetry = 10 * time.Second
	// mirrorRecheck is the wait between checks of an installed mirror:
	// something else may rewrite hosts.toml (configuration management,
	// cluster tooling) and drop the agent's block, which sends the node's
	// pulls around the swarm until the block is back.
	mirrorRecheck = time.Minute
)

// run installs the mirror once the runtime is connected, and puts it back
// whenever a check finds it gone.
func (s *mirrorSetup) run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("mirror")
	return keepInstalled(ctx, log, mirrorRetry, mirrorRecheck, func(ctx context.Context) (bool, error) {
		if _, err := s.rt.get(); err != nil {
			return false, errRuntimeNotConnected
		}
		return s.install(ctx, log)
	})
}

// errRuntimeNotConnected: the runtime connects within seconds of a start.
var errRuntimeNotConnected = errors.New("runtime not connected yet")

// keepInstalled calls install until ctx ends: after retry when it fails
// (a second while the runtime is not connected), after recheck when it
// succeeds. An install that had to change something after the first
// success means something else removed the agent's config: it says so.
func keepInstalled(ctx context.Context, log klog.Logger, retry, recheck time.Duration, install func(context.Context) (changed bool, err error)) error {
	installed := false
	for {
		wait := recheck
		changed, err := install(ctx)
		switch {
		case errors.Is(err, errRuntimeNotConnected):
			wait = time.Second
		case err != nil:
			wait = retry
			log.Info("Registry mirror not set up; retrying", "reason", err.Error(), "in", retry)
		case installed && changed:
			log.Info("WARNING: the registry mirror's hosts.toml had lost the agent's block (something rewrote it); put it back")
		}
		installed = installed || err == nil
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// install checks the runtime and writes the hosts.toml entries; changed
// says whether a file had to be written.
func (s *mirrorSetup) install(ctx context.Context, log klog.Logger) (changed bool, err error) {
	rt, err := s.rt.get()
	if err != nil {
		return false, err
	}
	checks := map[string]bool{}
	defer func() {
		s.mu.Lock()
		s.checks = checks
		s.mu.Unlock()
	}()
	certs := s.o.CertsDir
	if rt.Name() == cri.RuntimeContainerd {
		rc, err := rt.RegistryConfig(ctx)
		switch {
		case err != nil:
			log.Info("Could not read containerd's registry settings", "err", err.Error())
		case rc.Known:
			checks["keeps_layers"] = !rc.DiscardUnpackedLayers
			if rc.DiscardUnpackedLayers {
				log.Info("WARNING: containerd has discard_unpacked_layers = true: it deletes layers once unpacked, so this node cannot serve peers the images it holds; set it to false")
			}
			paths := filepath.SplitList(rc.ConfigPath)
			checks["config_path"] = len(paths) > 0
			if len(paths) == 0 {
				log.Info("WARNING: containerd has no registry config_path: it ignores hosts.toml, so pulls do not go through the agent; set [plugins.\"io.containerd.grpc.v1.cri\".registry] config_path = \"/etc/containerd/certs.d\"")
			} else if certs == "" {
				certs = filepath.Join(s.o.HostRoot, paths[0])
			}
		}
	}
	if certs == "" {
		return false, errors.New("no certs dir: containerd's config_path is unknown and --containerd-certs-dir is not set")
	}
	if _, err := os.Stat(certs); err != nil {
		return false, fmt.Errorf("certs dir %s (mount the host's certs dir there): %w", certs, err)
	}
	endpoint := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.o.MirrorPort))
	for _, m := range s.o.MirrorRegistries {
		c, err := mirror.Install(certs, mirror.Mirror{Registry: m.Host, Server: m.Server, Endpoint: endpoint})
		if err != nil {
			return changed, fmt.Errorf("install the mirror for %s: %w", m.Host, err)
		}
		if c {
			changed = true
			log.Info("Registry mirror installed", "registry", m.Host, "certsDir", certs, "endpoint", endpoint)
		}
	}
	checks["installed"] = true
	return changed, nil
}

// swarmWarmer adapts the node to the pull handler's Warmer.
type swarmWarmer struct{ n *node.Node }

// Warm implements work.Warmer.
func (w swarmWarmer) Warm(ctx context.Context, image string, auth *runtimeapi.AuthConfig) error {
	var a authn.Authenticator // nil: anonymous
	if auth != nil {
		a = cri.Authenticator(auth)
	}
	_, err := w.n.Warm(ctx, image, a)
	return err
}

// Settle implements work.Warmer: after the runtime committed an image,
// the store drops its own copies.
func (w swarmWarmer) Settle(ctx context.Context) { w.n.ReleaseHeldByRuntime(ctx) }
