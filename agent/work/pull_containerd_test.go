package work

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
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
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/internal/containerdtest"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Integration test: the pull handler against a real containerd (its CRI
// plugin), pulling from an in-process registry over plain HTTP.

const (
	itLayers     = 3
	itLayerBytes = 8 << 20
	// itRate throttles each blob download (containerd fetches the layers
	// side by side) so that a pull takes a few seconds and reports progress
	// more than once.
	itRate = 3 << 20 // bytes per second
)

// blobRegistry is an in-process registry on 127.0.0.1: go-containerregistry's
// registry for manifests and pushes, and its own serving of the blobs it
// was given, throttled, with Range requests ("bytes=N-") as real
// registries serve them, counting the body bytes it sends.
type blobRegistry struct {
	host   string
	rate   atomic.Int64 // bytes per second; 0: as fast as possible
	sent   atomic.Int64
	active atomic.Int64 // blob responses under way
	mu     sync.Mutex
	blobs  map[string][]byte
	seen   []string // "GET <digest> <range>" of blob requests
	gets   int      // manifest GETs
}

func startBlobRegistry(t *testing.T) *blobRegistry {
	t.Helper()
	b := &blobRegistry{blobs: map[string][]byte{}}
	reg := registry.New(registry.Logger(discardLog()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
			b.mu.Lock()
			b.gets++
			b.mu.Unlock()
		}
		if i := strings.LastIndex(req.URL.Path, "/blobs/"); i >= 0 && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
			digest := req.URL.Path[i+len("/blobs/"):]
			b.mu.Lock()
			data, ok := b.blobs[digest]
			if ok && req.Method == http.MethodGet {
				b.seen = append(b.seen, fmt.Sprintf("GET %s range=%q", digest[:19], req.Header.Get("Range")))
			}
			b.mu.Unlock()
			if ok {
				w.Header().Set("Docker-Content-Digest", digest)
				w.Header().Set("Content-Type", "application/octet-stream")
				b.active.Add(1)
				defer b.active.Add(-1)
				http.ServeContent(&throttledWriter{ResponseWriter: w, b: b}, req, "", time.Time{}, bytes.NewReader(data))
				return
			}
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	b.host = strings.TrimPrefix(srv.URL, "http://")
	return b
}

// push writes img as repo:tag and serves its config and layers itself. It
// returns the reference and the bytes a pull fetches (manifest, config,
// layers).
func (b *blobRegistry) push(t *testing.T, repoTag string, img v1.Image) (string, int64) {
	t.Helper()
	ref, err := name.ParseReference(b.host + "/" + repoTag)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img))
	m, err := img.Manifest()
	require.NoError(t, err)
	msize, err := img.Size()
	require.NoError(t, err)
	cfg, err := img.RawConfigFile()
	require.NoError(t, err)
	total := msize + int64(len(cfg))
	b.mu.Lock()
	defer b.mu.Unlock()
	b.blobs[m.Config.Digest.String()] = cfg
	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		d, err := l.Digest()
		require.NoError(t, err)
		rc, err := l.Compressed()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		b.blobs[d.String()] = data
		total += int64(len(data))
	}
	return ref.String(), total
}

func (b *blobRegistry) manifestGETs() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gets
}

func (b *blobRegistry) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen)
}

// throttledWriter writes a response body at the registry's rate.
type throttledWriter struct {
	http.ResponseWriter
	b *blobRegistry
}

func (w *throttledWriter) Write(p []byte) (int, error) {
	const chunk = 64 << 10
	written := 0
	for len(p) > 0 {
		n := min(len(p), chunk)
		m, err := w.ResponseWriter.Write(p[:n])
		written += m
		w.b.sent.Add(int64(m))
		if err != nil {
			return written, err
		}
		p = p[n:]
		if rate := w.b.rate.Load(); rate > 0 {
			time.Sleep(time.Duration(int64(n) * int64(time.Second) / rate)) // the network's pace, not a wait for the test
		}
	}
	return written, nil
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// ingests lists c's active ingests in the k8s.io namespace.
func ingests(t *testing.T, c *containerdtest.Containerd) []cri.ContentIngest {
	t.Helper()
	cs, err := cri.NewContentStore(c.Socket, cri.ContainerdNamespace)
	require.NoError(t, err)
	defer func() { _ = cs.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := cs.Ingests(ctx)
	require.NoError(t, err)
	return in
}

// observe polls the item's report until it ends, and returns every
// distinct report seen (reports change at most about once a second, the
// polling is much faster).
func observe(t *testing.T, r *Runner, id string, until time.Duration) []*nodeworkv1.WorkReport {
	t.Helper()
	var seen []*nodeworkv1.WorkReport
	deadline := time.Now().Add(until)
	for time.Now().Before(deadline) {
		rep, ok := r.Report(id)
		if ok && (len(seen) == 0 || seen[len(seen)-1] != rep) {
			seen = append(seen, rep)
			if terminal(rep.GetPhase()) {
				return seen
			}
		}
		timer := time.NewTimer(5 * time.Millisecond)
		<-timer.C
	}
	t.Fatalf("pull of %s did not end within %s; last report %v", id, until, seen[len(seen)-1])
	return nil
}

func TestPullWithContainerd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a containerd")
	}
	_, ctx := ktesting.NewTestContext(t)
	reg := startBlobRegistry(t)
	ctrd := containerdtest.Start(t, containerdtest.Options{PlainHTTPRegistries: []string{reg.host}})
	rt := ctrd.Connect(ctx, t)
	require.Equal(t, cri.RuntimeContainerd, rt.Name())
	t.Logf("containerd %s, registry %s", rt.Version(), reg.host)

	stateDir := t.TempDir()
	p := NewPull(func() (*cri.Runtime, error) { return rt, nil }, NewPullSlots(2))
	t.Cleanup(p.waitFlights)
	r := start(t, stateDir, map[string]Handler{nodework.KindPull: p})

	t.Run("pull with progress", func(t *testing.T) {
		img, err := random.Image(itLayerBytes, itLayers)
		require.NoError(t, err)
		ref, total := reg.push(t, "shoal/random:1", img)
		reg.rate.Store(itRate)
		reg.sent.Store(0)
		gets := reg.manifestGETs()
		spec := &nodeworkv1.PullSpec{Image: ref, TimeoutSeconds: 120}
		r.Upsert(pullItem("it", spec))
		reports := observe(t, r, pullID("it"), 2*time.Minute)
		last := reports[len(reports)-1]
		require.Equal(t, nodeworkv1.Phase_PHASE_SUCCEEDED, last.GetPhase(), "%v", last)

		var progress []string
		midway := 0
		for _, rep := range reports {
			st := rep.GetPull()
			progress = append(progress, fmt.Sprintf("%s %d/%d", strings.TrimPrefix(rep.GetPhase().String(), "PHASE_"), st.GetBytesDone(), st.GetBytesTotal()))
			if st.GetBytesTotal() != 0 {
				require.Equal(t, total, st.GetBytesTotal(), "the total is the manifest's sum")
			}
			require.LessOrEqual(t, st.GetBytesDone(), total)
			if rep.GetPhase() == nodeworkv1.Phase_PHASE_RUNNING && st.GetBytesDone() > 0 && st.GetBytesDone() < total {
				midway++
			}
		}
		t.Logf("reports: %s", strings.Join(progress, ", "))
		t.Logf("pulled %d bytes in %d ms (registry sent %d bytes of blobs, %d manifest GETs in all); image id %s",
			total, last.GetPull().GetPullMillis(), reg.sent.Load(), reg.manifestGETs()-gets, last.GetPull().GetImageId())
		require.Positive(t, midway, "progress was reported while the pull ran")
		require.Equal(t, total, last.GetPull().GetBytesDone())
		require.Equal(t, total, last.GetPull().GetBytesTotal())

		id, present, err := rt.ImagePresent(ctx, ref)
		require.NoError(t, err)
		require.True(t, present)
		require.Equal(t, last.GetPull().GetImageId(), id)
		require.True(t, strings.HasPrefix(id, "sha256:"), id)

		// IfNotPresent: now present, no pull.
		sent := reg.sent.Load()
		r.Upsert(pullItem("again", spec))
		rep := waitPhase(t, r, pullID("again"), nodeworkv1.Phase_PHASE_SUCCEEDED)
		require.True(t, rep.GetPull().GetPresent())
		require.Equal(t, id, rep.GetPull().GetImageId())
		require.Equal(t, sent, reg.sent.Load())
	})

	t.Run("an interrupted pull pulled again", func(t *testing.T) {
		img, err := random.Image(itLayerBytes, itLayers)
		require.NoError(t, err)
		ref, total := reg.push(t, "shoal/random:2", img)
		reg.rate.Store(itRate)
		reg.sent.Store(0)
		spec := &nodeworkv1.PullSpec{Image: ref, TimeoutSeconds: 120}
		r.Upsert(pullItem("cut", spec))
		require.Eventually(t, func() bool { return reg.sent.Load() >= total/2 }, time.Minute, 5*time.Millisecond)
		r.Remove(pullID("cut")) // cancels the CRI pull
		// containerd hangs up; the registry notices when it writes next.
		require.Eventually(t, func() bool { return reg.active.Load() == 0 }, 30*time.Second, 10*time.Millisecond)
		first := reg.sent.Load()
		var left []string
		var leftBytes int64
		for _, st := range ingests(t, ctrd) {
			left = append(left, fmt.Sprintf("%s at %d/%d", st.Ref, st.Offset, st.Total))
			leftBytes += st.Offset
		}
		t.Logf("interrupted after the registry sent %d of %d bytes; containerd keeps %d ingests (%d bytes): %v",
			first, total, len(left), leftBytes, left)

		before := len(reg.requests())
		reg.rate.Store(0)
		reg.sent.Store(0)
		r.Upsert(pullItem("cut", spec))
		rep := waitPhase(t, r, pullID("cut"), nodeworkv1.Phase_PHASE_SUCCEEDED)
		second := reg.sent.Load()
		var ranged []string
		for _, req := range reg.requests()[before:] {
			if !strings.HasSuffix(req, `range=""`) {
				ranged = append(ranged, req)
			}
		}
		t.Logf("pulled again: the registry sent %d of %d bytes (%.0f%%); range requests: %v; attempts %d",
			second, total, 100*float64(second)/float64(total), ranged, rep.GetPull().GetAttempts())
		require.Equal(t, total, rep.GetPull().GetBytesDone())
	})
}
