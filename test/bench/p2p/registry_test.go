//go:build bench && linux

package p2p

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/imagewarm/blobserver"
)

const (
	// registryChunk is the most bytes of a blob body written (and drawn
	// from the token bucket) at once.
	registryChunk = 32 << 10
	// registryBurst is the least burst of the token bucket: two chunks.
	// The burst is a tenth of a second at the rate when that is more, as
	// the agents' buckets have, so that two buckets in a row (the
	// registry's and a node's ingress) do not lose rate to each other.
	registryBurst = 64 << 10
	// registryStopTimeout bounds the graceful shutdown at cleanup before
	// the remaining connections are closed.
	registryStopTimeout = 5 * time.Second
	// layerMediaType is the media type of every layer: uncompressed, so a
	// layer's diff_id is its digest. The bytes are not a real tar; the
	// benchmark never unpacks them.
	layerMediaType = types.OCIUncompressedLayer
)

// registryOptions configure startRegistry.
type registryOptions struct {
	// Addr is the listen address; default "127.0.0.1:0".
	Addr string
	// BytesPerSecond is the aggregate egress of blob bodies: one token
	// bucket shared by every blob response of every client; 0 means
	// unthrottled. Manifests are never throttled.
	BytesPerSecond int64
}

// benchRegistry is a small in-memory OCI registry serving the read side of
// the distribution API (manifests and blobs, with ranges), throttled as a
// whole, with a switch that fails every request and counters of what it
// served. Images are put in with pushImage, not over HTTP.
type benchRegistry struct {
	host    string
	limiter *blobserver.Limiter // nil when unthrottled

	pushMu sync.Mutex // serializes pushImage

	mu         sync.RWMutex
	repos      map[string]*storedRepo
	failUntil  time.Time
	failStatus int

	statsMu sync.Mutex
	st      registryStats
	streams int // blob responses writing their body now
}

// storedRepo is one repository's content.
type storedRepo struct {
	manifests map[string]*storedManifest // by tag and by digest
	blobs     map[string]*storedBlob     // by digest
}

// storedManifest is a manifest's exact bytes.
type storedManifest struct {
	data      []byte
	digest    v1.Hash
	mediaType types.MediaType
}

// storedBlob is a blob's bytes, held once in memory.
type storedBlob struct {
	data   []byte
	digest v1.Hash
}

// layerSpec describes a layer: Size pseudo-random, incompressible bytes
// generated deterministically from Seed.
type layerSpec struct {
	Size int64
	Seed uint64
}

// benchImage is an image pushed to a benchRegistry.
type benchImage struct {
	Ref       string // host/repo:tag
	Repo, Tag string
	Manifest  v1.Descriptor // the manifest's digest, size and media type
	Config    v1.Descriptor
	Layers    []v1.Descriptor
}

// registryStats are the counters of a benchRegistry since it started or
// since resetStats.
type registryStats struct {
	// Requests counts every request, rejected ones included.
	Requests int64
	// BlobRequests and ManifestRequests count the requests for blobs and
	// manifests (GET and HEAD, whatever the answer, rejections included).
	BlobRequests     int64
	ManifestRequests int64
	// BlobBytes is the body bytes of blob responses actually written.
	BlobBytes int64
	// BytesByDigest splits BlobBytes by blob digest ("sha256:...").
	BytesByDigest map[string]int64
	// BytesByClient splits BlobBytes by client IP (RemoteAddr's host).
	BytesByClient map[string]int64
	// PeakStreams is the most blob responses writing a body at once.
	PeakStreams int
	// Rejected counts the requests answered by a fault (see failFor).
	Rejected int64
}

// startRegistry starts a benchRegistry serving over plain HTTP until t's
// cleanup, which stops it: requests in flight are cancelled, then the
// server shuts down within registryStopTimeout and is closed.
func startRegistry(t testing.TB, o registryOptions) *benchRegistry {
	t.Helper()
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	require.GreaterOrEqual(t, o.BytesPerSecond, int64(0), "registry rate")
	r := &benchRegistry{repos: map[string]*storedRepo{}}
	r.resetStats()
	if o.BytesPerSecond > 0 {
		r.limiter = blobserver.NewLimiter(o.BytesPerSecond, max(registryBurst, o.BytesPerSecond/10), nil)
	}
	ln, err := net.Listen("tcp", o.Addr)
	require.NoError(t, err, "registry: listen on %s", o.Addr)
	r.host = ln.Addr().String()

	baseCtx, cancel := context.WithCancelCause(context.Background())
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		cancel(errors.New("registry stopped"))
		ctx, done := context.WithTimeout(context.Background(), registryStopTimeout)
		defer done()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("registry: shut down: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("registry: close: %v", err)
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("registry: serve: %v", err)
		}
	})
	return r
}

// Host returns the registry's host:port, e.g. "127.0.0.1:41234".
func (r *benchRegistry) Host() string { return r.host }

// Blobs returns the image's config and layers, in that order.
func (i benchImage) Blobs() []v1.Descriptor {
	return append([]v1.Descriptor{i.Config}, i.Layers...)
}

// Size returns the sum of the sizes of the image's blobs.
func (i benchImage) Size() int64 {
	var n int64
	for _, d := range i.Blobs() {
		n += d.Size
	}
	return n
}

// generateLayer returns spec.Size bytes of ChaCha8 output seeded from
// spec.Seed: deterministic, incompressible and fast to make.
func generateLayer(spec layerSpec) []byte {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:8], spec.Seed)
	copy(seed[8:], "shoal bench p2p layer")
	b := make([]byte, spec.Size)
	_, _ = rand.NewChaCha8(seed).Read(b) // never fails
	return b
}

// newBlob wraps data with its sha256 digest.
func newBlob(data []byte) *storedBlob {
	return &storedBlob{data: data, digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(data))}}
}

// imageConfig is the part of an OCI image configuration the benchmark's
// images carry.
type imageConfig struct {
	Architecture string         `json:"architecture"`
	OS           string         `json:"os"`
	Config       struct{}       `json:"config"`
	RootFS       imageConfigFS  `json:"rootfs"`
	History      []imageHistory `json:"history,omitempty"`
}

// imageConfigFS is an image configuration's rootfs.
type imageConfigFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// imageHistory is one entry of an image configuration's history.
type imageHistory struct {
	CreatedBy string `json:"created_by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// generated holds every layer generated so far, shared between images
// and registries (each run of the benchmark has its own registry).
var generated struct {
	sync.Mutex
	layers map[layerSpec]*storedBlob
}

// layerBlob returns the layer of spec, generating it the first time.
func layerBlob(spec layerSpec) *storedBlob {
	generated.Lock()
	defer generated.Unlock()
	if b, ok := generated.layers[spec]; ok {
		return b
	}
	if generated.layers == nil {
		generated.layers = map[layerSpec]*storedBlob{}
	}
	b := newBlob(generateLayer(spec))
	generated.layers[spec] = b
	return b
}

// pushImage stores an image of the given layers (generated once per
// distinct layerSpec and shared between images and registries) under repo:tag and
// returns its descriptors. repo may contain slashes.
func (r *benchRegistry) pushImage(t testing.TB, repo, tag string, layers []layerSpec) benchImage {
	t.Helper()
	require.NotEmpty(t, repo, "pushImage: repository")
	require.NotEmpty(t, tag, "pushImage: tag")
	require.NotContains(t, tag, "/", "pushImage: tag")

	r.pushMu.Lock()
	defer r.pushMu.Unlock()

	img := benchImage{Ref: r.host + "/" + repo + ":" + tag, Repo: repo, Tag: tag}
	blobs := map[string]*storedBlob{}
	cfg := imageConfig{Architecture: runtime.GOARCH, OS: "linux", RootFS: imageConfigFS{Type: "layers", DiffIDs: []string{}}}
	for i, spec := range layers {
		require.GreaterOrEqual(t, spec.Size, int64(0), "pushImage: layer %d size", i)
		b := layerBlob(spec)
		blobs[b.digest.String()] = b
		img.Layers = append(img.Layers, v1.Descriptor{MediaType: layerMediaType, Size: int64(len(b.data)), Digest: b.digest})
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, b.digest.String())
		cfg.History = append(cfg.History, imageHistory{CreatedBy: fmt.Sprintf("bench layer size=%d seed=%d", spec.Size, spec.Seed)})
	}
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err, "pushImage: encode config")
	cb := newBlob(cfgJSON)
	blobs[cb.digest.String()] = cb
	img.Config = v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(cfgJSON)), Digest: cb.digest}

	man := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: img.Config, Layers: img.Layers}
	if man.Layers == nil {
		man.Layers = []v1.Descriptor{}
	}
	manJSON, err := json.Marshal(man)
	require.NoError(t, err, "pushImage: encode manifest")
	mb := newBlob(manJSON)
	sm := &storedManifest{data: manJSON, digest: mb.digest, mediaType: types.OCIManifestSchema1}
	img.Manifest = v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: int64(len(manJSON)), Digest: mb.digest}

	r.mu.Lock()
	defer r.mu.Unlock()
	rp := r.repos[repo]
	if rp == nil {
		rp = &storedRepo{manifests: map[string]*storedManifest{}, blobs: map[string]*storedBlob{}}
		r.repos[repo] = rp
	}
	for d, b := range blobs {
		rp.blobs[d] = b
	}
	rp.manifests[tag] = sm
	rp.manifests[sm.digest.String()] = sm
	return img
}

// stats returns a copy of the counters.
func (r *benchRegistry) stats() registryStats {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	s := r.st
	s.BytesByDigest = make(map[string]int64, len(r.st.BytesByDigest))
	for k, v := range r.st.BytesByDigest {
		s.BytesByDigest[k] = v
	}
	s.BytesByClient = make(map[string]int64, len(r.st.BytesByClient))
	for k, v := range r.st.BytesByClient {
		s.BytesByClient[k] = v
	}
	return s
}

// resetStats zeroes the counters. PeakStreams restarts from the blob
// responses in flight now.
func (r *benchRegistry) resetStats() {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	r.st = registryStats{
		BytesByDigest: map[string]int64{},
		BytesByClient: map[string]int64{},
		PeakStreams:   r.streams,
	}
}

// failFor makes every request (ping, manifest and blob) get status —
// meant for 429 or 503 — with Retry-After: 1 and an OCI JSON error body,
// until d has passed. Responses already writing their body go on.
func (r *benchRegistry) failFor(d time.Duration, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failUntil = time.Now().Add(d)
	r.failStatus = status
}

// fault returns the status to fail a request with, or 0.
func (r *benchRegistry) fault() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.failStatus != 0 && time.Now().Before(r.failUntil) {
		return r.failStatus
	}
	return 0
}

// requestKind classifies a request for the counters.
type requestKind int

const (
	kindOther requestKind = iota
	kindManifest
	kindBlob
)

// route splits a /v2/<name>/{manifests,blobs}/<ref> path; ok is false for
// any other path.
func route(path string) (kind requestKind, repo, ref string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v2/")
	if !found {
		return kindOther, "", "", false
	}
	for _, k := range []struct {
		sep  string
		kind requestKind
	}{{"/manifests/", kindManifest}, {"/blobs/", kindBlob}} {
		i := strings.LastIndex(rest, k.sep)
		if i <= 0 {
			continue
		}
		repo, ref = rest[:i], rest[i+len(k.sep):]
		if ref == "" || strings.Contains(ref, "/") {
			continue
		}
		return k.kind, repo, ref, true
	}
	return kindOther, "", "", false
}

// ServeHTTP implements http.Handler.
func (r *benchRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	kind, repo, ref, routed := route(req.URL.Path)
	r.count(kind)
	if status := r.fault(); status != 0 {
		r.statsMu.Lock()
		r.st.Rejected++
		r.statsMu.Unlock()
		code := "UNAVAILABLE"
		if status == http.StatusTooManyRequests {
			code = "TOOMANYREQUESTS"
		}
		w.Header().Set("Retry-After", "1")
		writeRegistryError(w, status, code, "injected fault: "+http.StatusText(status))
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeRegistryError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "only GET and HEAD are served")
		return
	}
	switch {
	case req.URL.Path == "/v2/" || req.URL.Path == "/v2":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		_, _ = io.WriteString(w, "{}")
	case !routed:
		writeRegistryError(w, http.StatusNotFound, "UNSUPPORTED", "unknown path "+req.URL.Path)
	case kind == kindManifest:
		r.serveManifest(w, req, repo, ref)
	default:
		r.serveBlob(w, req, repo, ref)
	}
}

// count counts one request of kind.
func (r *benchRegistry) count(kind requestKind) {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	r.st.Requests++
	switch kind {
	case kindManifest:
		r.st.ManifestRequests++
	case kindBlob:
		r.st.BlobRequests++
	}
}

// lookupRepo returns repo's content, or nil.
func (r *benchRegistry) lookupRepo(repo string) *storedRepo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.repos[repo]
}

// serveManifest answers GET and HEAD of a manifest by tag or digest.
func (r *benchRegistry) serveManifest(w http.ResponseWriter, req *http.Request, repo, ref string) {
	rp := r.lookupRepo(repo)
	if rp == nil {
		writeRegistryError(w, http.StatusNotFound, "NAME_UNKNOWN", "repository "+repo+" not known")
		return
	}
	r.mu.RLock()
	m := rp.manifests[ref]
	r.mu.RUnlock()
	if m == nil {
		writeRegistryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest "+repo+":"+ref+" not known")
		return
	}
	h := w.Header()
	h.Set("Content-Type", string(m.mediaType))
	h.Set("Docker-Content-Digest", m.digest.String())
	h.Set("Content-Length", strconv.Itoa(len(m.data)))
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodGet {
		_, _ = w.Write(m.data)
	}
}

// serveBlob answers GET and HEAD of a blob, whole or one byte range, its
// body paced by the shared token bucket.
func (r *benchRegistry) serveBlob(w http.ResponseWriter, req *http.Request, repo, ref string) {
	if _, err := v1.NewHash(ref); err != nil {
		writeRegistryError(w, http.StatusBadRequest, "DIGEST_INVALID", fmt.Sprintf("digest %q: %v", ref, err))
		return
	}
	rp := r.lookupRepo(repo)
	if rp == nil {
		writeRegistryError(w, http.StatusNotFound, "NAME_UNKNOWN", "repository "+repo+" not known")
		return
	}
	r.mu.RLock()
	b := rp.blobs[ref]
	r.mu.RUnlock()
	if b == nil {
		writeRegistryError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob "+ref+" not known in "+repo)
		return
	}
	size := int64(len(b.data))
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Docker-Content-Digest", b.digest.String())
	h.Set("Accept-Ranges", "bytes")
	start, end, status := int64(0), size, http.StatusOK
	if spec := req.Header.Get("Range"); spec != "" {
		s, e, ok, satisfiable := parseRange(spec, size)
		switch {
		case ok && !satisfiable:
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			writeRegistryError(w, http.StatusRequestedRangeNotSatisfiable, "SIZE_INVALID",
				fmt.Sprintf("range %q not satisfiable for %d bytes", spec, size))
			return
		case ok:
			start, end, status = s, e, http.StatusPartialContent
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, size))
		}
	}
	h.Set("Content-Length", strconv.FormatInt(end-start, 10))
	w.WriteHeader(status)
	if req.Method != http.MethodGet {
		return
	}
	client, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		client = req.RemoteAddr
	}
	r.streamStarted()
	defer r.streamEnded()
	r.writeBody(req.Context(), w, b.data[start:end], b.digest.String(), client)
}

// parseRange parses a single "bytes=a-b", "bytes=a-" or "bytes=-n" range
// against size. ok is false when the header should be ignored (malformed
// or several ranges, per RFC 9110); satisfiable is false when the range
// starts beyond the blob. end is exclusive.
func parseRange(spec string, size int64) (start, end int64, ok, satisfiable bool) {
	rs, found := strings.CutPrefix(strings.TrimSpace(spec), "bytes=")
	if !found || strings.Contains(rs, ",") {
		return 0, 0, false, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(rs), "-")
	if !found {
		return 0, 0, false, false
	}
	if first == "" { // suffix: the last n bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, false, false
		}
		if n == 0 || size == 0 {
			return 0, 0, true, false
		}
		return max(0, size-n), size, true, true
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil || a < 0 {
		return 0, 0, false, false
	}
	end = size
	if last != "" {
		b, err := strconv.ParseInt(last, 10, 64)
		if err != nil || b < a {
			return 0, 0, false, false
		}
		end = min(b+1, size)
	}
	if a >= size {
		return 0, 0, true, false
	}
	return a, end, true, true
}

// writeBody writes data in chunks of at most registryChunk, each drawn
// from the shared token bucket first, counting what was written, until
// done, a write fails or ctx ends.
func (r *benchRegistry) writeBody(ctx context.Context, w io.Writer, data []byte, digest, client string) {
	for len(data) > 0 {
		if ctx.Err() != nil {
			return
		}
		n := min(len(data), registryChunk)
		if r.limiter != nil {
			if err := r.limiter.WaitN(ctx, int64(n)); err != nil {
				return
			}
		}
		// Count before writing, so that a client that has read everything
		// finds it counted; take back what a failed write did not send.
		r.addBytes(digest, client, int64(n))
		k, err := w.Write(data[:n])
		if k < n {
			r.addBytes(digest, client, int64(k-n))
		}
		if err != nil {
			return
		}
		data = data[n:]
	}
}

// addBytes counts n (negative to take back) blob body bytes of digest
// written to client.
func (r *benchRegistry) addBytes(digest, client string, n int64) {
	if n == 0 {
		return
	}
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	r.st.BlobBytes += n
	r.st.BytesByDigest[digest] += n
	r.st.BytesByClient[client] += n
}

// streamStarted counts a blob response starting its body.
func (r *benchRegistry) streamStarted() {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	r.streams++
	r.st.PeakStreams = max(r.st.PeakStreams, r.streams)
}

// streamEnded counts a blob response done with its body.
func (r *benchRegistry) streamEnded() {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	r.streams--
}

// registryError is one entry of an OCI error response.
type registryError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// registryErrors is an OCI error response body.
type registryErrors struct {
	Errors []registryError `json:"errors"`
}

// writeRegistryError answers with status and an OCI JSON error body.
func writeRegistryError(w http.ResponseWriter, status int, code, msg string) {
	body, err := json.Marshal(registryErrors{Errors: []registryError{{Code: code, Message: msg}}})
	if err != nil { // cannot happen with strings
		body = []byte(`{"errors":[]}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
