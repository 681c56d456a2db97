package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/imagewarm/blobserver"
	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/peertls/peertlstest"
	"github.com/shoal-io/shoal/imagewarm/placement"
	"github.com/shoal-io/shoal/imagewarm/store"
	"github.com/shoal-io/shoal/imagewarm/swarm"
	"github.com/shoal-io/shoal/imagewarm/tracker"
	"github.com/shoal-io/shoal/internal/metricstest"
)

// testRegistry is an in-memory OCI registry on plain HTTP that counts the
// blob bytes it sends.
type testRegistry struct {
	host      string
	blobBytes atomic.Int64 // body bytes of GET .../blobs/...
	manifests atomic.Int64 // GET and HEAD .../manifests/...
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case strings.Contains(req.URL.Path, "/manifests/"):
			r.manifests.Add(1)
		case req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") &&
			!strings.Contains(req.URL.Path, "/blobs/uploads"):
			w = &countingWriter{ResponseWriter: w, n: &r.blobBytes}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// countingWriter counts the body bytes written.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// testImage is an image pushed to the test registry.
type testImage struct {
	ref      string
	digest   v1.Hash
	config   v1.Descriptor
	layers   []v1.Descriptor
	contents map[v1.Hash][]byte // compressed layers and the raw config
}

// layerBytes is the layers' total size.
func (i testImage) layerBytes() int64 {
	var n int64
	for _, l := range i.layers {
		n += l.Size
	}
	return n
}

// push writes a random image of layers layers of about size bytes each to
// repo:tag and resets the registry's counters.
func (r *testRegistry) push(t *testing.T, repoTag string, size, layers int64) testImage {
	t.Helper()
	img, err := random.Image(size, layers)
	require.NoError(t, err)
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, remote.WithContext(t.Context())))
	m, err := img.Manifest()
	require.NoError(t, err)
	d, err := img.Digest()
	require.NoError(t, err)
	out := testImage{ref: r.host + "/" + repoTag, digest: d, config: m.Config, layers: m.Layers, contents: map[v1.Hash][]byte{}}
	cfg, err := img.RawConfigFile()
	require.NoError(t, err)
	out.contents[m.Config.Digest] = cfg
	for _, l := range m.Layers {
		layer, err := img.LayerByDigest(l.Digest)
		require.NoError(t, err)
		rc, err := layer.Compressed()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		out.contents[l.Digest] = data
	}
	r.blobBytes.Store(0)
	r.manifests.Store(0)
	return out
}

// fakeRuntime is the runtime's content store, in memory.
type fakeRuntime struct {
	mu    sync.Mutex
	blobs map[v1.Hash][]byte
}

type memBlob struct{ *bytes.Reader }

func (memBlob) Close() error { return nil }

func (f *fakeRuntime) OpenBlob(_ context.Context, d v1.Hash) (blobserver.SourceBlob, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.blobs[d]
	if !ok {
		return nil, fmt.Errorf("runtime blob %s: %w", d, fs.ErrNotExist)
	}
	return memBlob{bytes.NewReader(data)}, nil
}

func (f *fakeRuntime) Has(_ context.Context, d v1.Hash) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.blobs[d]
	return ok, nil
}

func (f *fakeRuntime) set(d v1.Hash, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if data == nil {
		delete(f.blobs, d)
		return
	}
	f.blobs[d] = data
}

// testNode is a running Node and its addresses.
type testNode struct {
	*Node
	name        string
	addr        string // peers and trackers
	runtimeAddr string // the runtime's mirror, if any
	metrics     *prometheus.Registry
	peerGets    atomic.Int64
}

// counter sums the samples of a metric whose labels include labels.
func (tn *testNode) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.Sum(t, tn.metrics, name, labels)
}

// startNodes builds count nodes that know each other (a static
// membership) and runs them until the test ends; tune adjusts each
// node's Config.
func startNodes(t *testing.T, reg *testRegistry, count int, tune func(i int, c *Config)) []*testNode {
	t.Helper()
	nodes := make([]*testNode, count)
	members := make([]placement.Member, count)
	listeners := make([]net.Listener, count)
	for i := range nodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		listeners[i] = l
		nodes[i] = &testNode{name: fmt.Sprintf("node-%c", 'a'+i), addr: l.Addr().String(), metrics: prometheus.NewRegistry()}
		members[i] = placement.Member{Name: nodes[i].name, Endpoint: nodes[i].addr}
	}
	mf := tracker.MembersFunc(func() []placement.Member { return members })
	for i, tn := range nodes {
		cfg := Config{
			Name: tn.name, Listener: listeners[i], StoreDir: t.TempDir(), Members: mf,
			Upstreams: []Upstream{{Registry: reg.host, Insecure: true}},
			WrapPeer: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					tn.peerGets.Add(1)
					h.ServeHTTP(w, r)
				})
			},
			Fetch:      swarm.Config{Poll: 50 * time.Millisecond, AnnounceInterval: 50 * time.Millisecond},
			Registerer: tn.metrics,
			Logger:     klog.Background(),
		}
		if tune != nil {
			tune(i, &cfg)
		}
		if cfg.RuntimeListener != nil {
			tn.runtimeAddr = cfg.RuntimeListener.Addr().String()
		}
		n, err := New(cfg)
		if err != nil {
			for _, l := range listeners[i:] {
				_ = l.Close()
			}
			require.NoError(t, err)
		}
		tn.Node = n
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err, tn.name)
			case <-time.After(10 * time.Second):
				t.Errorf("%s: Run did not return", tn.name)
			}
		})
	}
	return nodes
}

// requireHolds checks that n's store holds every blob of img, verified.
func requireHolds(t *testing.T, n *testNode, img testImage) {
	t.Helper()
	for _, d := range append([]v1.Descriptor{img.config}, img.layers...) {
		b, err := n.Store().Get(d.Digest)
		require.NoError(t, err, "%s %s", n.name, d.Digest)
		require.True(t, b.Verified(), "%s %s", n.name, d.Digest)
		require.Equal(t, d.Size, b.Size())
		require.NoError(t, b.Close())
	}
}

// holders returns the nodes n's tracker lists as complete holders of d.
func holders(t *testing.T, n *testNode, d v1.Hash) []string {
	t.Helper()
	res, err := n.Tracker().Lookup(tracker.LookupRequest{Digest: d.String()})
	require.NoError(t, err)
	var out []string
	for _, h := range res.Holders {
		if h.Complete {
			out = append(out, h.Node)
		}
	}
	return out
}

func sha(data []byte) v1.Hash {
	sum := sha256.Sum256(data)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// TestWarmConcurrently shows three nodes warming one image at once: each
// ends with every blob verified, Warm returns the manifest's config and
// layers, and the registry sends about one copy of the image (the swarm
// spreads it, one upstream lease per blob).
func TestWarmConcurrently(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(t *testing.T) func(i int, c *Config)
	}{
		{"plain HTTP", func(*testing.T) func(int, *Config) { return nil }},
		{"peer TLS", withPeerTLS},
	} {
		t.Run(tc.name, func(t *testing.T) { testWarmConcurrently(t, tc.tune(t)) })
	}
}

// withPeerTLS gives every node a peer TLS identity from one test CA.
func withPeerTLS(t *testing.T) func(i int, c *Config) {
	ca, err := peertlstest.NewCA("node-test")
	require.NoError(t, err)
	return func(_ int, c *Config) {
		id, err := peertls.NewIdentity(peertls.Options{Node: c.Name})
		require.NoError(t, err)
		csr, err := id.NewRequest()
		require.NoError(t, err)
		chain, bundle, err := ca.Issuer(c.Name, time.Hour)(t.Context(), csr)
		require.NoError(t, err)
		require.NoError(t, id.Install(chain, bundle))
		c.PeerTLS = id
	}
}

func testWarmConcurrently(t *testing.T, tune func(i int, c *Config)) {
	reg := newTestRegistry(t)
	img := reg.push(t, "test/app:v1", 3<<20, 2)
	nodes := startNodes(t, reg, 3, tune)

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	got := make([]Image, len(nodes))
	g, gctx := errgroup.WithContext(ctx)
	for i, n := range nodes {
		g.Go(func() error {
			var err error
			got[i], err = n.Warm(gctx, img.ref, nil)
			return err
		})
	}
	require.NoError(t, g.Wait())

	want := append([]v1.Descriptor{img.config}, img.layers...)
	for i, n := range nodes {
		require.Equal(t, img.digest, got[i].Digest, n.name)
		require.Equal(t, want, got[i].Blobs, n.name)
		require.Equal(t, img.layerBytes()+img.config.Size, got[i].Size())
		requireHolds(t, n, img)
	}
	sent := reg.blobBytes.Load()
	t.Logf("registry sent %d blob bytes for an image of %d (layers %d)", sent, got[0].Size(), img.layerBytes())
	require.GreaterOrEqual(t, sent, img.layerBytes()+img.config.Size, "every blob came from upstream once")
	require.LessOrEqual(t, float64(sent), 1.5*float64(img.layerBytes()), "about one copy upstream")
	var peerGets int64
	for _, n := range nodes {
		peerGets += n.peerGets.Load()
	}
	require.Positive(t, peerGets, "no node served a peer")
}

// TestPeerTLSRefusesOutsiders: a node with peer TLS serves a blob it
// holds only to a client with a certificate of a member; plain HTTP, TLS
// without a certificate and a certificate from another CA get 400, 401
// and 403, and none of them a byte of the blob.
func TestPeerTLSRefusesOutsiders(t *testing.T) {
	reg := newTestRegistry(t)
	img := reg.push(t, "test/app:v1", 1<<20, 1)
	nodes := startNodes(t, reg, 1, withPeerTLS(t))
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	_, err := nodes[0].Warm(ctx, img.ref, nil)
	require.NoError(t, err)
	path := "/v2/test/app/blobs/" + img.layers[0].Digest.String()

	other, err := peertlstest.NewCA("other")
	require.NoError(t, err)
	foreign, err := other.ClientCert("node-a")
	require.NoError(t, err)
	tlsClient := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, Certificates: certs, MinVersion: tls.VersionTLS13, //nolint:gosec // the server's check is under test
		}}}
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		scheme string
		status int
	}{
		{"plain HTTP", http.DefaultClient, "http", http.StatusBadRequest},
		{"no client certificate", tlsClient(), "https", http.StatusUnauthorized},
		{"a certificate from another CA", tlsClient(foreign), "https", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, tc.scheme+"://"+nodes[0].addr+path, nil)
			require.NoError(t, err)
			resp, err := tc.client.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, tc.status, resp.StatusCode, "%s", body)
			require.Less(t, int64(len(body)), img.layers[0].Size)
		})
	}
	require.Zero(t, nodes[0].peerGets.Load(), "a refused request reached the blob handler")
}

// TestResolveNeverAsksPeers shows that tags are resolved upstream only:
// warming a tag the registry lacks fails naming it, although peers are up,
// and no peer is asked anything.
func TestResolveNeverAsksPeers(t *testing.T) {
	reg := newTestRegistry(t)
	img := reg.push(t, "test/app:v1", 1<<10, 1)
	nodes := startNodes(t, reg, 2, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	_, err := nodes[0].Warm(ctx, img.ref, nil)
	require.NoError(t, err)
	before := nodes[0].peerGets.Load() + nodes[1].peerGets.Load()

	missing := reg.host + "/test/app:nope"
	_, err = nodes[1].Warm(ctx, missing, nil)
	require.Error(t, err)
	require.ErrorContains(t, err, missing)
	require.ErrorContains(t, err, "MANIFEST_UNKNOWN")
	require.Positive(t, reg.manifests.Load(), "the registry was asked")
	require.Equal(t, before, nodes[0].peerGets.Load()+nodes[1].peerGets.Load(), "no peer was asked")
}

// TestRuntimeMirrorPullThrough shows the runtime's mirror on a node that
// holds nothing: a layer another node warmed streams from that peer with
// its exact bytes and no further upstream traffic, and a blob nobody (not
// even upstream) has is a quick 404 so that the runtime moves on.
func TestRuntimeMirrorPullThrough(t *testing.T) {
	reg := newTestRegistry(t)
	img := reg.push(t, "test/app:v1", 2<<20, 2)
	nodes := startNodes(t, reg, 2, func(i int, c *Config) {
		if i == 1 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			c.RuntimeListener = l
		}
	})
	warm, fresh := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	_, err := warm.Warm(ctx, img.ref, nil)
	require.NoError(t, err)
	upstream := reg.blobBytes.Load()

	_, absent := randomDigest(t)
	for _, tc := range []struct {
		name string
		d    v1.Hash
		code int
	}{
		{"layer a peer holds", img.layers[0].Digest, http.StatusOK},
		{"other layer a peer holds", img.layers[1].Digest, http.StatusOK},
		{"blob nobody has", absent, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			t.Cleanup(cancel)
			u := fmt.Sprintf("http://%s/v2/test/app/blobs/%s?ns=%s", fresh.runtimeAddr, tc.d, reg.host)
			req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			t.Cleanup(func() { _ = resp.Body.Close() })
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.code, resp.StatusCode, string(body))
			if tc.code != http.StatusOK {
				return
			}
			require.Equal(t, tc.d, sha(body))
			require.Equal(t, img.contents[tc.d], body)
			require.Eventually(t, func() bool {
				b, err := fresh.Store().Get(tc.d)
				if err != nil {
					return false
				}
				defer func() { _ = b.Close() }()
				return b.Verified()
			}, 10*time.Second, 10*time.Millisecond, "the pull-through fetch ends verified")
		})
	}
	require.Equal(t, upstream, reg.blobBytes.Load(), "the layers came from the peer")
	require.Equal(t, 2.0, fresh.counter(t, blobserver.MetricPullThrough, map[string]string{"result": "started"}))
	require.Equal(t, 1.0, fresh.counter(t, blobserver.MetricPullThrough, map[string]string{"result": "refused"}))
}

// randomDigest returns random bytes and their digest.
func randomDigest(t *testing.T) ([]byte, v1.Hash) {
	t.Helper()
	data := []byte(fmt.Sprintf("%s %d", t.Name(), time.Now().UnixNano()))
	return data, sha(data)
}

// TestReleaseHeldByRuntime shows a node dropping a verified blob the
// runtime holds: the store lets it go, the node keeps announcing it
// complete (re-announcements include it) and serves peers from the
// runtime; once the runtime drops it too, the node withdraws it.
func TestReleaseHeldByRuntime(t *testing.T) {
	reg := newTestRegistry(t)
	img := reg.push(t, "test/app:v1", 1<<20, 2)
	rt := &fakeRuntime{blobs: map[v1.Hash][]byte{}}
	nodes := startNodes(t, reg, 1, func(_ int, c *Config) { c.Runtime = rt })
	n := nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	_, err := n.Warm(ctx, img.ref, nil)
	require.NoError(t, err)
	requireHolds(t, n, img)
	layer := img.layers[0].Digest
	require.Equal(t, []string{n.name}, holders(t, n, layer))

	require.Zero(t, n.ReleaseHeldByRuntime(ctx), "the runtime holds nothing yet")
	rt.set(layer, img.contents[layer])
	require.Equal(t, 1, n.ReleaseHeldByRuntime(ctx))
	_, err = n.Store().Get(layer)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Zero(t, n.ReleaseHeldByRuntime(ctx), "nothing more to release")

	// A re-announcement (after the trackers forgot) still lists the node.
	require.NoError(t, n.client.Withdraw(ctx, layer.String()))
	require.Empty(t, holders(t, n, layer))
	require.NoError(t, n.client.AnnounceAll(ctx))
	require.Equal(t, []string{n.name}, holders(t, n, layer))

	// Peers are served from the runtime's copy.
	resp, err := http.Get(fmt.Sprintf("http://%s/v2/test/app/blobs/%s", n.addr, layer))
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, img.contents[layer], body)

	// The runtime drops it: the node withdraws it, for good.
	rt.set(layer, nil)
	require.Zero(t, n.ReleaseHeldByRuntime(ctx))
	require.Empty(t, holders(t, n, layer))
	require.NoError(t, n.client.AnnounceAll(ctx))
	require.Empty(t, holders(t, n, layer))
	require.Equal(t, []string{n.name}, holders(t, n, img.layers[1].Digest), "other blobs stay announced")
}
