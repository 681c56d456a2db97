package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/test/cluster"
)

// RegistryRealm is the realm of the test registry's basic-auth challenge.
const RegistryRealm = "shoal-e2e"

// registryStopTimeout bounds Stop's wait for requests in flight (a
// throttled blob download) before it cuts their connections.
const registryStopTimeout = 2 * time.Second

// RegistryOptions configure StartRegistry.
type RegistryOptions struct {
	// Users are the accepted user names and passwords (basic auth, as an
	// htpasswd file). When set, every request without one of them gets 401
	// with a Basic challenge; empty means no authentication. Passwords are
	// kept as SHA-256 hashes and compared in constant time (bcrypt, as
	// htpasswd uses, is not among the module's dependencies).
	Users map[string]string
	// BytesPerSecond throttles the body of each blob download (every GET
	// of a blob on its own, so N nodes pulling at once each get this rate);
	// 0 leaves them unthrottled. Manifests are never throttled.
	BytesPerSecond int64
	// Addr is where to listen; default one of cluster.TestRegistries()
	// that no other test of this process serves: the ports every node of
	// the local cluster pulls from over plain HTTP.
	Addr string
}

// Registry is an OCI registry (go-containerregistry's pkg/registry, in
// memory) that a test serves itself, with basic auth, a throttle, a switch
// that fails every request, and counters of what it served.
type Registry struct {
	// Host is the registry's host:port, the first part of its references.
	Host string

	opts    RegistryOptions
	users   map[string][sha256.Size]byte
	inner   http.Handler
	srv     *http.Server
	failing atomic.Int32 // the status every request gets; 0: serve

	mu          sync.Mutex
	requests    int64
	challenges  int64
	rejections  []Rejection
	blobGets    []BlobGet
	blobBytes   map[string]int64
	inFlight    map[string]int // client host -> blob GETs in flight
	maxClients  int
	pushed      map[string]Pushed
	stopOnce    sync.Once
	servedError chan error
}

// Rejection is a request whose credentials the registry refused.
type Rejection struct {
	// Client is the requester's IP (a node's address for a node's pull).
	Client string
	// User is the user name it sent.
	User string
	Time time.Time
}

// BlobGet is one blob download the registry answered.
type BlobGet struct {
	// Client is the requester's IP.
	Client string
	// Repo and Digest name the blob.
	Repo, Digest string
	// Range is the request's Range header ("" for the whole blob).
	Range string
	// Status is the HTTP status answered (200, 206, ...).
	Status int
	// Bytes counts the body bytes written to the client.
	Bytes int64
	// Complete is false when the client went away (or the registry
	// stopped) before the body was sent in full.
	Complete bool
	// Start and End are when the request began and ended.
	Start, End time.Time
}

// Pushed describes an image Push put in the registry.
type Pushed struct {
	// Ref is the image's reference (host:port/repo:tag).
	Ref string
	// Digest is the manifest's digest.
	Digest string
	// Config is the config blob's digest.
	Config string
	// Layers are the layer blobs' digests, and LayerSizes their sizes in
	// bytes (compressed, as served).
	Layers     []string
	LayerSizes []int64
}

// Size is the sum of the image's layer sizes.
func (p Pushed) Size() int64 {
	var n int64
	for _, s := range p.LayerSizes {
		n += s
	}
	return n
}

// StartRegistry serves a registry for t on opts.Addr until Stop, which t's
// cleanup calls. Without opts.Addr it takes a test registry address that
// no other test of this process holds (waiting, bounded by
// registryWaitTimeout, while all are held) and gives it back after Stop.
// It fails t if the address cannot be bound: on the local cluster the
// bridge address exists, elsewhere tests should skip before (see test/e2e's
// requireImagePull).
func StartRegistry(t testing.TB, opts RegistryOptions) *Registry {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = takeRegistryAddr(t)
	}
	r := &Registry{
		Host:        opts.Addr,
		opts:        opts,
		users:       map[string][sha256.Size]byte{},
		blobBytes:   map[string]int64{},
		inFlight:    map[string]int{},
		pushed:      map[string]Pushed{},
		servedError: make(chan error, 1),
		// Quiet: go-containerregistry logs every request otherwise.
		inner: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))),
	}
	for u, p := range opts.Users {
		r.users[u] = sha256.Sum256([]byte(p))
	}
	l, err := net.Listen("tcp", opts.Addr)
	require.NoError(t, err, "test registry: listen on %s (the local cluster's bridge must be up; is another test registry running?)", opts.Addr)
	r.Host = l.Addr().String() // the port, when opts.Addr asked for any
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		err := r.srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		r.servedError <- err
	}()
	t.Cleanup(r.Stop)
	t.Logf("test registry on %s (users %d, %d bytes/s per blob download)", r.Host, len(opts.Users), opts.BytesPerSecond)
	return r
}

// registryWaitTimeout bounds how long StartRegistry waits for a free test
// registry address.
const registryWaitTimeout = 10 * time.Minute

// freeRegistryAddrs holds the test registry addresses no test of this
// process serves now.
var freeRegistryAddrs = func() chan string {
	addrs := cluster.TestRegistries()
	ch := make(chan string, len(addrs))
	for _, a := range addrs {
		ch <- a
	}
	return ch
}()

// takeRegistryAddr takes a free test registry address for t and registers
// a cleanup that gives it back. Cleanups run last-registered first, so the
// registry's Stop, registered after this, runs before the address is free.
func takeRegistryAddr(t testing.TB) string {
	t.Helper()
	timer := time.NewTimer(registryWaitTimeout)
	defer timer.Stop()
	select {
	case addr := <-freeRegistryAddrs:
		t.Cleanup(func() { freeRegistryAddrs <- addr })
		return addr
	case <-timer.C:
		t.Fatalf("test registry: all %d addresses were in use for %s", cap(freeRegistryAddrs), registryWaitTimeout)
	}
	return ""
}

// Stop stops serving: requests in flight get registryStopTimeout to end,
// then their connections are closed. It is idempotent.
func (r *Registry) Stop() {
	r.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), registryStopTimeout)
		defer cancel()
		if err := r.srv.Shutdown(ctx); err != nil {
			_ = r.srv.Close()
		}
		<-r.servedError
	})
}

// SetFailing makes the registry answer every request with 503 Service
// Unavailable (true) or serve normally again (false).
func (r *Registry) SetFailing(failing bool) {
	if failing {
		r.FailWith(http.StatusServiceUnavailable)
	} else {
		r.FailWith(0)
	}
}

// FailWith makes the registry answer every request with status (such as
// 500, 503 or 429, which comes with Retry-After: 1), or serve normally
// again (0).
func (r *Registry) FailWith(status int) { r.failing.Store(int32(status)) }

// Ref is the reference of repo:tag in this registry.
func (r *Registry) Ref(repo, tag string) string { return r.Host + "/" + repo + ":" + tag }

// Push puts a random image of layers layers, each of layerMiB MiB of
// random (incompressible) data, in the registry as repo:tag and returns its
// reference. Every call makes new contents, so no node has its blobs yet,
// and the tag gets a random suffix ("v1-3f9a0c1e"), so no node has the tag
// either (a node keeps images of earlier runs on the same cluster, and an
// IfNotPresent pull goes by the tag). The image is for linux on this machine's architecture. It is written to
// the registry's handler in process, not over the network, and is neither
// counted nor throttled.
func (r *Registry) Push(t testing.TB, repo, tag string, layerMiB, layers int) string {
	t.Helper()
	img, err := random.Image(int64(layerMiB)<<20, int64(layers))
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	img, err = mutate.ConfigFile(img, cf)
	require.NoError(t, err)

	ref := r.Ref(repo, tag+"-"+strings.ToLower(rand.Text()[:8]))
	tagRef, err := name.NewTag(ref, name.Insecure)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, remote.Write(tagRef, img, remote.WithContext(ctx), remote.WithTransport(inProcess{r.inner})), "push %s", ref)

	p := Pushed{Ref: ref}
	d, err := img.Digest()
	require.NoError(t, err)
	p.Digest = d.String()
	cd, err := img.ConfigName()
	require.NoError(t, err)
	p.Config = cd.String()
	ls, err := img.Layers()
	require.NoError(t, err)
	for _, l := range ls {
		ld, err := l.Digest()
		require.NoError(t, err)
		size, err := l.Size()
		require.NoError(t, err)
		p.Layers = append(p.Layers, ld.String())
		p.LayerSizes = append(p.LayerSizes, size)
	}
	r.mu.Lock()
	r.pushed[ref] = p
	r.mu.Unlock()
	t.Logf("pushed %s (%s): %d layers, %d bytes", ref, p.Digest, len(p.Layers), p.Size())
	return ref
}

// Pushed returns what Push put in the registry as ref.
func (r *Registry) Pushed(ref string) (Pushed, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pushed[ref]
	return p, ok
}

// Requests counts every request the registry received (over the network;
// Push is not counted).
func (r *Registry) Requests() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Challenges counts requests without credentials answered with 401.
func (r *Registry) Challenges() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.challenges
}

// Rejections lists the requests whose credentials were wrong.
func (r *Registry) Rejections() []Rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rejection(nil), r.rejections...)
}

// BlobGets lists the blob downloads answered so far (including those
// still in flight, with End zero).
func (r *Registry) BlobGets() []BlobGet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]BlobGet(nil), r.blobGets...)
}

// BlobBytes returns the blob body bytes served, by digest.
func (r *Registry) BlobBytes() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.blobBytes))
	for k, v := range r.blobBytes {
		out[k] = v
	}
	return out
}

// BytesTo returns the body bytes of blobs of digests (all blobs if none
// given) served, by client IP.
func (r *Registry) BytesTo(digests ...string) map[string]int64 {
	want := map[string]bool{}
	for _, d := range digests {
		want[d] = true
	}
	out := map[string]int64{}
	for _, g := range r.BlobGets() {
		if len(want) == 0 || want[g.Digest] {
			out[g.Client] += g.Bytes
		}
	}
	return out
}

// MaxConcurrentClients is the largest number of distinct clients that had
// a blob download in flight at the same time since the start or the last
// ResetMaxConcurrentClients.
func (r *Registry) MaxConcurrentClients() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxClients
}

// ResetMaxConcurrentClients starts MaxConcurrentClients over from the
// clients downloading now.
func (r *Registry) ResetMaxConcurrentClients() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxClients = len(r.inFlight)
}

// blobPath matches /v2/<repo>/blobs/<digest> (not uploads).
var blobPath = regexp.MustCompile(`^/v2/(.+)/blobs/(sha256:[a-f0-9]{64})$`)

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	client, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		client = req.RemoteAddr
	}
	r.mu.Lock()
	r.requests++
	r.mu.Unlock()

	if status := int(r.failing.Load()); status != 0 {
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, "test registry: failing on purpose", status)
		return
	}
	if !r.authorized(w, req, client) {
		return
	}
	if m := blobPath.FindStringSubmatch(req.URL.Path); m != nil && req.Method == http.MethodGet {
		r.serveBlob(w, req, client, m[1], m[2])
		return
	}
	r.inner.ServeHTTP(w, req)
}

// authorized answers 401 and returns false unless the request carries the
// credentials of one of the users (or there are no users).
func (r *Registry) authorized(w http.ResponseWriter, req *http.Request, client string) bool {
	if len(r.users) == 0 {
		return true
	}
	user, pass, ok := req.BasicAuth()
	if ok {
		want, known := r.users[user]
		got := sha256.Sum256([]byte(pass))
		if subtle.ConstantTimeCompare(want[:], got[:]) == 1 && known {
			return true
		}
	}
	r.mu.Lock()
	if ok {
		r.rejections = append(r.rejections, Rejection{Client: client, User: user, Time: time.Now()})
	} else {
		r.challenges++
	}
	r.mu.Unlock()
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", RegistryRealm))
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
	return false
}

// serveBlob answers a blob GET itself, so that it can throttle and count
// the body and honour every form of Range (containerd resumes a download
// with "bytes=N-", which go-containerregistry's handler refuses).
func (r *Registry) serveBlob(w http.ResponseWriter, req *http.Request, client, repo, digest string) {
	// The blob from the inner handler, whole and in memory (test images are
	// small).
	inReq := req.Clone(req.Context())
	inReq.Header = http.Header{}
	rec := httptest.NewRecorder()
	r.inner.ServeHTTP(rec, inReq)
	if rec.Code != http.StatusOK {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}

	r.mu.Lock()
	idx := len(r.blobGets)
	r.blobGets = append(r.blobGets, BlobGet{Client: client, Repo: repo, Digest: digest, Range: req.Header.Get("Range"), Start: time.Now()})
	r.inFlight[client]++
	r.maxClients = max(r.maxClients, len(r.inFlight))
	r.mu.Unlock()

	tw := &throttledWriter{ResponseWriter: w, ctx: req.Context(), rate: r.opts.BytesPerSecond, start: time.Now(),
		progress: func(written int64) {
			// BytesTo sees a download's bytes while it runs, not only
			// at its end.
			r.mu.Lock()
			r.blobGets[idx].Bytes = written
			r.mu.Unlock()
		}}
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(tw, req, "", time.Time{}, bytes.NewReader(rec.Body.Bytes()))

	r.mu.Lock()
	g := &r.blobGets[idx]
	g.Status, g.Bytes, g.End = tw.status, tw.written, time.Now()
	g.Complete = tw.err == nil && req.Context().Err() == nil
	if g.Status == 0 {
		g.Status = http.StatusOK
	}
	r.blobBytes[digest] += tw.written
	if r.inFlight[client]--; r.inFlight[client] <= 0 {
		delete(r.inFlight, client)
	}
	r.mu.Unlock()
}

// throttledWriter writes a body at no more than rate bytes per second
// (0: as fast as it goes), in small chunks flushed one by one, and counts
// what it wrote. It gives up when ctx ends (the client went away).
type throttledWriter struct {
	http.ResponseWriter
	ctx     context.Context
	rate    int64
	start   time.Time
	status  int
	written int64
	err     error
	// progress, if set, is told the bytes written after each write.
	progress func(written int64)
}

const throttleChunk = 32 << 10

func (tw *throttledWriter) WriteHeader(code int) {
	tw.status = code
	tw.ResponseWriter.WriteHeader(code)
}

func (tw *throttledWriter) Write(p []byte) (int, error) {
	if tw.rate <= 0 {
		n, err := tw.ResponseWriter.Write(p)
		tw.written += int64(n)
		tw.report()
		if err != nil {
			tw.err = err
		}
		return n, err
	}
	total := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), throttleChunk)]
		// Wait until sending the chunk keeps within the rate.
		due := tw.start.Add(time.Duration(float64(tw.written+int64(len(chunk))) / float64(tw.rate) * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-tw.ctx.Done():
				timer.Stop()
				tw.err = tw.ctx.Err()
				return total, tw.err
			case <-timer.C:
			}
		}
		n, err := tw.ResponseWriter.Write(chunk)
		tw.written += int64(n)
		tw.report()
		total += n
		if err != nil {
			tw.err = err
			return total, err
		}
		if f, ok := tw.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		p = p[len(chunk):]
	}
	return total, nil
}

func (tw *throttledWriter) report() {
	if tw.progress != nil {
		tw.progress(tw.written)
	}
}

// inProcess is an http.RoundTripper that hands requests to a handler in
// this process.
type inProcess struct{ h http.Handler }

func (ip inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	if req.Body == nil {
		req.Body = http.NoBody
	}
	ip.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// DownloadLog is a compact description of the blob downloads of digests
// (all if none), one line per download, for a test's log.
func (r *Registry) DownloadLog(digests ...string) string {
	want := map[string]bool{}
	for _, d := range digests {
		want[d] = true
	}
	var lines []string
	for _, g := range r.BlobGets() {
		if len(want) > 0 && !want[g.Digest] {
			continue
		}
		rng := g.Range
		if rng == "" {
			rng = "whole"
		}
		end := "in flight"
		if !g.End.IsZero() {
			end = fmt.Sprintf("%.1fs", g.End.Sub(g.Start).Seconds())
			if !g.Complete {
				end += ", cut off"
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s: %d %d bytes (%s)", g.Start.Format("15:04:05.000"), g.Client, shortDigest(g.Digest), rng, g.Status, g.Bytes, end))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
