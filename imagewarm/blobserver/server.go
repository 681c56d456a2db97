package blobserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/imagewarm/store"
)

// Role says who a listener serves; it decides the policy for partial
// blobs, the upload cap and the rate limit.
type Role int

const (
	// Peer is the listener other agents fetch pieces from (the node's
	// address). Partial blobs are served only by range and only where
	// every piece of the range is present; uploads are capped and paced.
	Peer Role = iota
	// Runtime is the listener the local runtime pulls through as a
	// registry mirror (bound on loopback, named in hosts.toml). A blob
	// still being fetched is streamed as its pieces land (cut-through);
	// no cap or pacing applies (the bytes do not leave the node).
	Runtime
)

// String returns "peer" or "runtime".
func (r Role) String() string {
	if r == Runtime {
		return "runtime"
	}
	return "peer"
}

// SourceBlob is a complete, verified blob opened for reading.
type SourceBlob interface {
	io.ReaderAt
	io.Closer
	// Size returns the blob's size in bytes.
	Size() int64
}

// BlobSource is a fallback for blobs the agent's store does not hold
// complete, typically the runtime's content store (containerd keeps
// committed layers under io.containerd.content.v1.content/blobs/sha256
// unless discard_unpacked_layers is set).
type BlobSource interface {
	// OpenBlob opens the blob d. It returns an error matching
	// fs.ErrNotExist when the source does not hold d.
	OpenBlob(ctx context.Context, d v1.Hash) (SourceBlob, error)
}

// Defaults for Options.
const (
	// DefaultRetryAfter is the Retry-After of a 429.
	DefaultRetryAfter = time.Second
	// DefaultPieceWait bounds the wait for each piece of a cut-through
	// stream; after it the response is cut and the runtime falls back to
	// the next host.
	DefaultPieceWait = 30 * time.Second
)

// Options configure a Server.
type Options struct {
	// Store is the agent's blob store. Required.
	Store *store.Store
	// Runtime, if set, serves blobs the store does not hold complete.
	Runtime BlobSource
	// MaxPeerUploads caps the GETs served to peers at once; beyond it a
	// peer gets 429 with Retry-After and asks another holder. 0 means no
	// cap.
	MaxPeerUploads int
	// RetryAfter is the Retry-After of a 429, rounded up to whole seconds;
	// 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	// EgressBytesPerSecond paces every response to peers through one token
	// bucket; 0 means unpaced.
	EgressBytesPerSecond int64
	// EgressBurst is the bucket's size; 0 lets NewLimiter choose.
	EgressBurst int64
	// PieceWait bounds the wait for each piece of a cut-through stream;
	// 0 means DefaultPieceWait.
	PieceWait time.Duration
	// PullThrough, if set, is asked for a blob a runtime request finds
	// nowhere on the node: it starts fetching the blob (name is the
	// repository of the request, query its query string, which carries
	// containerd's ns=<registry>) and returns the store's handle on it, from
	// which the response streams as pieces land. An error answers 404 at
	// once, so that the runtime falls back to the next host.
	PullThrough func(ctx context.Context, name string, d v1.Hash, query url.Values) (*store.Blob, error)
	// SpreadWindow, if positive, gives each piece of a blob still being
	// fetched to one peer per window: a second peer asking for it within
	// the window gets 404 and takes it from the first once that one has
	// announced it. The node's upload then carries distinct pieces, so a
	// piece that only this node has (as the upstream lease holder) leaves
	// it about once and the swarm, not the holder, spreads it
	// (BitTorrent's super-seeding). Complete blobs are served freely.
	SpreadWindow time.Duration
	// Clock drives the rate limiter; nil means the real clock.
	Clock clock.Clock
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Server serves blobs on the OCI distribution endpoint
// GET|HEAD /v2/<name>/blobs/<digest>, to the runtime and to peers alike.
type Server struct {
	o       Options
	uploads chan struct{} // a slot per peer upload; nil: no cap
	limiter *Limiter      // nil: unpaced
	m       *metrics
	bufs    sync.Pool

	// spreadMu guards given: when each piece of a partial blob was last
	// given to a peer (SpreadWindow).
	spreadMu sync.Mutex
	given    map[v1.Hash]map[int]time.Time
}

// copyBuf is the size of the buffer each response copies through.
const copyBuf = 256 << 10

// New returns a Server.
func New(o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("blob server: no store")
	}
	if o.MaxPeerUploads < 0 || o.EgressBytesPerSecond < 0 || o.RetryAfter < 0 || o.PieceWait < 0 {
		return nil, errors.New("blob server: negative option")
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	if o.PieceWait == 0 {
		o.PieceWait = DefaultPieceWait
	}
	s := &Server{o: o, m: newMetrics(), given: map[v1.Hash]map[int]time.Time{}}
	s.bufs.New = func() any { b := make([]byte, copyBuf); return &b }
	if o.MaxPeerUploads > 0 {
		s.uploads = make(chan struct{}, o.MaxPeerUploads)
	}
	if o.EgressBytesPerSecond > 0 {
		s.limiter = NewLimiter(o.EgressBytesPerSecond, o.EgressBurst, o.Clock)
	}
	if err := s.m.register(o.Registerer); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the handler for a listener of the given role. It answers
// the /v2/ ping and blob GET/HEAD; everything else (manifests included, for
// now) is 404 so that the runtime falls back to the next host.
func (s *Server) Handler(role Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &codeWriter{ResponseWriter: w}
		s.serve(cw, r, role)
		code := cw.code
		if code == 0 {
			code = http.StatusOK
		}
		s.m.requests.WithLabelValues(role.String(), strconv.Itoa(code)).Inc()
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, role Role) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		ociError(w, r, http.StatusMethodNotAllowed, "UNSUPPORTED", "only GET and HEAD are served")
		return
	}
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "2")
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, "{}")
		}
		return
	}
	repo, ref, ok := parseBlobPath(r.URL.Path)
	if !ok {
		ociError(w, r, http.StatusNotFound, "NAME_UNKNOWN", "only blobs are served")
		return
	}
	d, err := v1.NewHash(ref)
	if err != nil {
		ociError(w, r, http.StatusBadRequest, "DIGEST_INVALID", err.Error())
		return
	}

	src, source, err := s.open(r.Context(), d, r.Header.Get("Range"))
	if err != nil && role == Runtime && s.o.PullThrough != nil && isNotFound(err) {
		b, perr := s.o.PullThrough(r.Context(), repo, d, r.URL.Query())
		if perr == nil {
			src, source, err = b, sourcePartial, nil
			s.m.pullThrough.WithLabelValues("started").Inc()
		} else {
			s.m.pullThrough.WithLabelValues("refused").Inc()
			klog.FromContext(r.Context()).V(2).Info("No pull-through for a runtime request", "digest", d.String(), "err", perr.Error())
		}
	}
	if err != nil {
		if !isNotFound(err) {
			klog.FromContext(r.Context()).Error(err, "Opening blob", "digest", d.String())
		}
		ociError(w, r, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to this node")
		return
	}
	defer func() { _ = src.Close() }()
	size := src.Size()

	kind, start, length := parseRange(r.Header.Get("Range"), size)
	if kind == rangeUnsatisfiable {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		ociError(w, r, http.StatusRequestedRangeNotSatisfiable, "BLOB_UNKNOWN", "range not satisfiable")
		return
	}

	var body io.Reader
	var spreadCheck *store.Blob // a partial blob's range a peer is about to get
	if source == sourcePartial {
		b := src.(*store.Blob)
		covered := b.HasRange(start, length)
		switch {
		case role == Runtime && covered:
			body = io.NewSectionReader(b, start, length)
		case role == Runtime:
			body = b.NewReader(r.Context(), start, length, s.o.PieceWait)
		case kind == rangeOK && covered:
			body = io.NewSectionReader(b, start, length)
			spreadCheck = b
		default:
			// A peer gets a partial blob only by range, never as complete.
			ociError(w, r, http.StatusNotFound, "BLOB_UNKNOWN", "range not held yet")
			return
		}
	} else {
		body = io.NewSectionReader(src, start, length)
	}

	if role == Peer && r.Method == http.MethodGet {
		if s.uploads != nil {
			select {
			case s.uploads <- struct{}{}:
			default:
				secs := int(math.Ceil(s.o.RetryAfter.Seconds()))
				w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
				ociError(w, r, http.StatusTooManyRequests, "TOOMANYREQUESTS", "upload limit reached; ask another holder")
				return
			}
		}
		s.m.inFlight.Inc()
		defer func() {
			if s.uploads != nil {
				<-s.uploads
			}
			s.m.inFlight.Dec() // after the slot is free: 0 in flight means all slots are
		}()
		// Only a GET that is about to be served counts as giving the
		// pieces out (not a HEAD, not a 429).
		if spreadCheck != nil && !s.spread(d, spreadCheck, start, length) {
			ociError(w, r, http.StatusNotFound, "BLOB_UNKNOWN", "pieces just given to another peer; ask it")
			return
		}
	}

	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Docker-Content-Digest", d.String())
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	status := http.StatusOK
	if kind == rangeOK {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, size))
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead || length == 0 {
		return
	}

	var dst io.Writer = w
	if _, fromDisk := body.(*io.SectionReader); !fromDisk {
		// Cut-through: send the headers now (the runtime's response
		// header timeout runs while the first piece is awaited) and each
		// piece as it lands.
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		dst = &flushWriter{w: w, rc: rc}
	}
	if role == Peer && s.limiter != nil {
		dst = &pacedWriter{ctx: r.Context(), l: s.limiter, w: dst}
	}
	buf := s.bufs.Get().(*[]byte)
	n, err := io.CopyBuffer(onlyWriter{dst}, body, *buf)
	s.bufs.Put(buf)
	s.m.served.WithLabelValues(role.String(), source).Add(float64(n))
	if err != nil {
		// The status is out; a short body (Content-Length not reached)
		// makes the client see the failure and the server drop the
		// connection.
		s.m.aborted.WithLabelValues(role.String()).Inc()
		klog.FromContext(r.Context()).V(2).Info("Blob response cut short", "digest", d.String(), "role", role.String(),
			"sent", n, "of", length, "err", err)
	}
}

// open finds the blob for a request with the given Range header: a
// verified copy in the store; else the store's partial one when it covers
// the range; else the runtime's; else the partial one.
func (s *Server) open(ctx context.Context, d v1.Hash, rangeHeader string) (SourceBlob, string, error) {
	b, err := s.o.Store.Get(d)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, "", err
	}
	if b != nil && b.Verified() {
		return b, sourceStore, nil
	}
	if b != nil {
		// A range the partial blob already covers (a peer's piece
		// request, the swarm's hot path) needs no runtime lookup.
		if kind, start, length := parseRange(rangeHeader, b.Size()); kind == rangeOK && b.HasRange(start, length) {
			return b, sourcePartial, nil
		}
	}
	if s.o.Runtime != nil {
		rb, rerr := s.o.Runtime.OpenBlob(ctx, d)
		if rerr == nil {
			if b != nil {
				_ = b.Close()
			}
			return rb, sourceRuntime, nil
		}
		if !errors.Is(rerr, fs.ErrNotExist) {
			klog.FromContext(ctx).Error(rerr, "Opening blob in the runtime's content store", "digest", d.String())
		}
	}
	if b != nil {
		return b, sourcePartial, nil
	}
	return nil, "", err
}

// spread reports whether a peer may have the range [start, start+length)
// of a partial blob now: not when every piece it touches was given to
// another peer within SpreadWindow. It records the pieces as given.
func (s *Server) spread(d v1.Hash, b *store.Blob, start, length int64) bool {
	if s.o.SpreadWindow <= 0 || length <= 0 {
		return true
	}
	ps := b.PieceSize()
	lo, hi := int(start/ps), int((start+length-1)/ps)
	now := time.Now()
	s.spreadMu.Lock()
	defer s.spreadMu.Unlock()
	g := s.given[d]
	if g == nil {
		if len(s.given) > 1024 { // forget blobs no longer partial
			clear(s.given)
		}
		g = map[int]time.Time{}
		s.given[d] = g
	}
	fresh := false
	for i := lo; i <= hi; i++ {
		if t, ok := g[i]; !ok || now.Sub(t) >= s.o.SpreadWindow {
			fresh = true
		}
	}
	if !fresh {
		s.m.spreadRefused.Inc()
		return false
	}
	for i := lo; i <= hi; i++ {
		g[i] = now
	}
	return true
}

// isNotFound reports whether err says a blob is absent.
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, store.ErrNotFound)
}

// parseBlobPath returns the name and digest of "/v2/<name>/blobs/<digest>".
func parseBlobPath(p string) (name, ref string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/blobs/")
	if i <= 0 { // the name must not be empty
		return "", "", false
	}
	ref = rest[i+len("/blobs/"):]
	return rest[:i], ref, ref != "" && !strings.Contains(ref, "/")
}

// ociError writes an error in the distribution spec's JSON form (no body
// for HEAD).
func ociError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	body, _ := json.Marshal(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// codeWriter records the status code for the requests metric.
type codeWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader implements http.ResponseWriter.
func (c *codeWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// flushWriter flushes after every write, so that a cut-through stream
// reaches the runtime as each piece lands.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

// Write implements io.Writer.
func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

// onlyWriter hides a writer's ReadFrom, so that io.CopyBuffer uses the
// pooled buffer instead of the response's own small one.
type onlyWriter struct{ io.Writer }
