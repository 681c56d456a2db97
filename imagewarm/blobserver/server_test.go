package blobserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/imagewarm/store"
)

const testPiece = 1000

func randomBlob(seed uint64, size int) ([]byte, v1.Hash) {
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(seed, 42))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sum := sha256.Sum256(data)
	return data, v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

func piece(data []byte, i int) []byte {
	return data[i*testPiece : min(len(data), (i+1)*testPiece)]
}

// memSource is a BlobSource over blobs in memory (the runtime's store).
type memSource struct {
	mu    sync.Mutex
	blobs map[v1.Hash][]byte
	// block, if set, makes ReadAt past the first copy buffer wait until
	// it is closed: the response's headers and first bytes are out, the
	// rest waits.
	block chan struct{}
}

type memBlob struct {
	*bytes.Reader
	block chan struct{}
}

func (m memBlob) ReadAt(p []byte, off int64) (int, error) {
	if m.block != nil && off >= copyBuf {
		<-m.block
	}
	return m.Reader.ReadAt(p, off)
}
func (m memBlob) Close() error { return nil }

func (m *memSource) OpenBlob(_ context.Context, d v1.Hash) (SourceBlob, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.blobs[d]
	if !ok {
		return nil, fmt.Errorf("runtime blob %s: %w", d, fs.ErrNotExist)
	}
	return memBlob{bytes.NewReader(data), m.block}, nil
}

type harness struct {
	st      *store.Store
	srv     *Server
	reg     *prometheus.Registry
	runtime *memSource
	peer    *httptest.Server
	local   *httptest.Server
	// handlers tracks requests still inside the server: a client can
	// read a response's last byte before the handler has counted it.
	handlers sync.WaitGroup
}

func newHarness(t testing.TB, o Options) *harness {
	t.Helper()
	return newHarnessPieces(t, o, testPiece)
}

func newHarnessPieces(t testing.TB, o Options, pieceSize int64) *harness {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{PieceSize: pieceSize, Sync: store.SyncNone})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	h := &harness{st: st, reg: prometheus.NewRegistry(), runtime: &memSource{blobs: map[v1.Hash][]byte{}}}
	o.Store = st
	if o.Runtime == nil {
		o.Runtime = h.runtime
	}
	o.Registerer = h.reg
	h.srv, err = New(o)
	require.NoError(t, err)
	h.peer = httptest.NewServer(h.tracked(h.srv.Handler(Peer)))
	t.Cleanup(h.peer.Close)
	h.local = httptest.NewServer(h.tracked(h.srv.Handler(Runtime)))
	t.Cleanup(h.local.Close)
	return h
}

func (h *harness) tracked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.handlers.Add(1)
		defer h.handlers.Done()
		next.ServeHTTP(w, r)
	})
}

// count reads a server metric once every request made so far has left
// the handler, so that its bytes and outcome are counted.
func (h *harness) count(t testing.TB, c prometheus.Collector) float64 {
	t.Helper()
	done := make(chan struct{})
	go func() { h.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("blob server handlers still running after 10s")
	}
	return testutil.ToFloat64(c)
}

// put stores data as a verified blob.
func (h *harness) put(t testing.TB, data []byte, d v1.Hash) {
	t.Helper()
	b, err := h.st.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	ps := int(b.PieceSize())
	for i := range b.NumPieces() {
		require.NoError(t, b.WritePiece(i, data[i*ps:min(len(data), (i+1)*ps)]))
	}
	require.NoError(t, b.Commit())
}

type response struct {
	code int
	hdr  http.Header
	body []byte
}

func do(t testing.TB, method, url, rng string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	require.NoError(t, err)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{resp.StatusCode, resp.Header, body}
}

func blobURL(base string, d v1.Hash) string {
	return base + "/v2/library/some/app/blobs/" + d.String()
}

func TestPing(t *testing.T) {
	h := newHarness(t, Options{})
	for _, base := range []string{h.peer.URL, h.local.URL} {
		for _, path := range []string{"/v2/", "/v2"} {
			r := do(t, http.MethodGet, base+path, "")
			require.Equal(t, http.StatusOK, r.code)
			require.Equal(t, "registry/2.0", r.hdr.Get("Docker-Distribution-API-Version"))
			require.Equal(t, "{}", string(r.body))
			require.Equal(t, http.StatusOK, do(t, http.MethodHead, base+path, "").code)
		}
	}
}

func TestErrors(t *testing.T) {
	h := newHarness(t, Options{})
	_, d := randomBlob(1, 10)
	for _, tc := range []struct {
		name, method, path string
		code               int
		ociCode            string
	}{
		{"unknown blob", http.MethodGet, "/v2/a/blobs/" + d.String(), 404, "BLOB_UNKNOWN"},
		{"bad digest", http.MethodGet, "/v2/a/blobs/sha256:xyz", 400, "DIGEST_INVALID"},
		{"manifest", http.MethodGet, "/v2/a/manifests/latest", 404, "NAME_UNKNOWN"},
		{"empty name", http.MethodGet, "/v2/blobs/" + d.String(), 404, "NAME_UNKNOWN"},
		{"upload", http.MethodPost, "/v2/a/blobs/uploads/", 405, "UNSUPPORTED"},
		{"not the registry API", http.MethodGet, "/metrics", 404, "NAME_UNKNOWN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, tc.method, h.peer.URL+tc.path, "")
			require.Equal(t, tc.code, r.code)
			var body struct{ Errors []struct{ Code string } }
			require.NoError(t, json.Unmarshal(r.body, &body))
			require.Equal(t, tc.ociCode, body.Errors[0].Code)
		})
	}
}

// TestRanges checks every Range form against a complete blob served from
// the store and from the runtime fallback, for GET and HEAD.
func TestRanges(t *testing.T) {
	const size = 5*testPiece + 7
	h := newHarness(t, Options{})
	data, dStore := randomBlob(2, size)
	h.put(t, data, dStore)
	rdata, dRuntime := randomBlob(3, size)
	h.runtime.blobs[dRuntime] = rdata

	cases := []struct {
		rng        string
		code       int
		start, end int64 // served bytes [start, end)
	}{
		{"", 200, 0, size},
		{"bytes=0-", 206, 0, size},
		{"bytes=10-19", 206, 10, 20},
		{"bytes=4990-", 206, 4990, size},
		{"bytes=100-99999999", 206, 100, size},
		{"bytes=-5", 206, size - 5, size},
		{"bytes=-100000", 206, 0, size},
		{"bytes=" + strconv.Itoa(size-1) + "-" + strconv.Itoa(size-1), 206, size - 1, size},
		{"bytes=" + strconv.Itoa(size) + "-", 416, 0, 0},
		{"bytes=-0", 416, 0, 0},
		{"bytes=5-3", 200, 0, size},                   // invalid: ignored
		{"bytes=0-1,5-6", 200, 0, size},               // several ranges: ignored
		{"items=0-1", 200, 0, size},                   // another unit: ignored
		{"bytes=x-", 200, 0, size},                    // bad syntax: ignored
		{" BYTES = 1-2", 206, 1, 3},                   // unit is case-insensitive
		{"bytes=99999999999999999999-", 200, 0, size}, // overflow: ignored
	}
	for _, src := range []struct {
		name string
		data []byte
		d    v1.Hash
	}{{"store", data, dStore}, {"runtime", rdata, dRuntime}} {
		for _, tc := range cases {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				t.Run(src.name+"/"+method+"/"+tc.rng, func(t *testing.T) {
					r := do(t, method, blobURL(h.peer.URL, src.d), tc.rng)
					require.Equal(t, tc.code, r.code)
					if tc.code == 416 {
						require.Equal(t, "bytes */"+strconv.Itoa(size), r.hdr.Get("Content-Range"))
						return
					}
					require.Equal(t, src.d.String(), r.hdr.Get("Docker-Content-Digest"))
					require.Equal(t, strconv.FormatInt(tc.end-tc.start, 10), r.hdr.Get("Content-Length"))
					require.Equal(t, "bytes", r.hdr.Get("Accept-Ranges"))
					if tc.code == 206 {
						require.Equal(t, fmt.Sprintf("bytes %d-%d/%d", tc.start, tc.end-1, size), r.hdr.Get("Content-Range"))
					} else {
						require.Empty(t, r.hdr.Get("Content-Range"))
					}
					if method == http.MethodHead {
						require.Empty(t, r.body)
					} else {
						require.Equal(t, src.data[tc.start:tc.end], r.body)
					}
				})
			}
		}
	}
	var want float64
	for _, tc := range cases {
		want += float64(tc.end - tc.start)
	}
	require.Equal(t, want, h.count(t, h.srv.m.served.WithLabelValues("peer", sourceStore)))
	require.Equal(t, want, h.count(t, h.srv.m.served.WithLabelValues("peer", sourceRuntime)))
	require.Equal(t, 8.0, h.count(t, h.srv.m.requests.WithLabelValues("peer", "416")), "2 cases, GET and HEAD, 2 sources")
}

func TestEmptyBlob(t *testing.T) {
	h := newHarness(t, Options{})
	data, d := randomBlob(4, 0)
	h.put(t, data, d)
	r := do(t, http.MethodGet, blobURL(h.peer.URL, d), "")
	require.Equal(t, 200, r.code)
	require.Equal(t, "0", r.hdr.Get("Content-Length"))
	require.Equal(t, 416, do(t, http.MethodGet, blobURL(h.peer.URL, d), "bytes=0-").code)
}

// TestPartialCoverage checks what a blob being fetched answers: peers get
// only ranges whose pieces are all present; the runtime gets covered
// ranges at once.
func TestPartialCoverage(t *testing.T) {
	const size = 5*testPiece + 7
	h := newHarness(t, Options{})
	data, d := randomBlob(5, size)
	b, err := h.st.Begin(d, size, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	require.NoError(t, b.WritePiece(1, piece(data, 1)))
	require.NoError(t, b.WritePiece(2, piece(data, 2)))
	require.NoError(t, b.WritePiece(5, piece(data, 5)))

	for _, tc := range []struct {
		name, method, rng string
		code              int
		start, end        int64
	}{
		{"range in a present piece", "GET", "bytes=1100-1199", 206, 1100, 1200},
		{"range over two present pieces", "GET", "bytes=1000-2999", 206, 1000, 3000},
		{"range of the short last piece", "GET", "bytes=-7", 206, size - 7, size},
		{"range touching a missing piece", "GET", "bytes=2500-3500", 404, 0, 0},
		{"open range over a missing piece", "GET", "bytes=1000-", 404, 0, 0},
		{"whole blob", "GET", "", 404, 0, 0},
		{"HEAD of the whole blob", "HEAD", "", 404, 0, 0},
		{"HEAD of a covered range", "HEAD", "bytes=1000-1999", 206, 1000, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, tc.method, blobURL(h.peer.URL, d), tc.rng)
			require.Equal(t, tc.code, r.code)
			if tc.code == 206 && tc.method == "GET" {
				require.Equal(t, data[tc.start:tc.end], r.body)
			}
		})
	}
	t.Run("runtime gets a covered range", func(t *testing.T) {
		r := do(t, "GET", blobURL(h.local.URL, d), "bytes=1000-2999")
		require.Equal(t, 206, r.code)
		require.Equal(t, data[1000:3000], r.body)
	})
	t.Run("complete but unverified is still partial to peers", func(t *testing.T) {
		for _, i := range []int{0, 3, 4} {
			require.NoError(t, b.WritePiece(i, piece(data, i)))
		}
		require.Equal(t, 404, do(t, "GET", blobURL(h.peer.URL, d), "").code)
		r := do(t, "GET", blobURL(h.peer.URL, d), "bytes=0-")
		require.Equal(t, 206, r.code)
		require.Equal(t, data, r.body)
	})
	t.Run("the runtime's complete copy wins over a partial", func(t *testing.T) {
		h.runtime.mu.Lock()
		h.runtime.blobs[d] = data
		h.runtime.mu.Unlock()
		before := h.count(t, h.srv.m.served.WithLabelValues("peer", sourceRuntime))
		r := do(t, "GET", blobURL(h.peer.URL, d), "")
		require.Equal(t, 200, r.code)
		require.Equal(t, data, r.body)
		require.Equal(t, before+size, h.count(t, h.srv.m.served.WithLabelValues("peer", sourceRuntime)))
	})
	require.Equal(t, float64(100+2000+7+size), h.count(t, h.srv.m.served.WithLabelValues("peer", sourcePartial)))
	require.Equal(t, 2000.0, h.count(t, h.srv.m.served.WithLabelValues("runtime", sourcePartial)))
}

// TestCutThrough streams a blob to the runtime while its pieces are
// written: each piece must reach the client before the next is written.
func TestCutThrough(t *testing.T) {
	const size = 8*testPiece + 300
	h := newHarness(t, Options{})
	for seed, tc := range []struct {
		name, rng  string
		code       int
		start, end int64
	}{
		{"whole blob", "", 200, 0, size},
		{"range", "bytes=1500-", 206, 1500, size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, d := randomBlob(60+uint64(seed), size)
			w, err := h.st.Begin(d, size, 0)
			require.NoError(t, err)
			defer func() { require.NoError(t, w.Close()) }()

			req, err := http.NewRequestWithContext(t.Context(), "GET", blobURL(h.local.URL, d), nil)
			require.NoError(t, err)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err, "headers come before any piece")
			defer func() { _ = resp.Body.Close() }()
			require.Equal(t, tc.code, resp.StatusCode)
			require.Equal(t, tc.end-tc.start, resp.ContentLength)
			got := int64(0)
			for i := range w.NumPieces() {
				require.NoError(t, w.WritePiece(i, piece(data, i)))
				// Everything up to the end of piece i is readable now,
				// before the next piece is written.
				upto := min(int64(i+1)*testPiece, size)
				if upto <= tc.start {
					continue
				}
				buf := make([]byte, upto-tc.start-got)
				_, err := io.ReadFull(resp.Body, buf)
				require.NoError(t, err, "piece %d", i)
				require.Equal(t, data[tc.start+got:upto], buf)
				got += int64(len(buf))
			}
			rest, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Empty(t, rest)
		})
	}
	require.Equal(t, float64(size+size-1500), h.count(t, h.srv.m.served.WithLabelValues("runtime", sourcePartial)))
}

func TestCutThroughStall(t *testing.T) {
	h := newHarness(t, Options{PieceWait: time.Millisecond})
	data, d := randomBlob(7, 3*testPiece)
	w, err := h.st.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Close()) }()
	require.NoError(t, w.WritePiece(0, piece(data, 0)))

	resp, err := http.Get(blobURL(h.local.URL, d))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, 200, resp.StatusCode)
	got, err := io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "a piece that never comes cuts the response short")
	require.Equal(t, data[:testPiece], got)
	h.local.Close() // waits for the handler to return
	require.Equal(t, 1.0, h.count(t, h.srv.m.aborted.WithLabelValues("runtime")))
}

// TestUploadCap holds MaxPeerUploads uploads open (their reads block) and
// checks that further peer GETs get 429 with Retry-After while HEADs and
// the runtime are served.
func TestUploadCap(t *testing.T) {
	for _, tc := range []struct {
		retryAfter time.Duration
		want       string
	}{
		{300 * time.Millisecond, "1"},
		{2500 * time.Millisecond, "3"},
	} {
		t.Run("retry-after="+tc.retryAfter.String(), func(t *testing.T) {
			block := make(chan struct{})
			rt := &memSource{blobs: map[v1.Hash][]byte{}, block: block}
			h := newHarness(t, Options{MaxPeerUploads: 2, RetryAfter: tc.retryAfter, Runtime: rt})
			data, d := randomBlob(8, copyBuf+1000)
			rt.blobs[d] = data

			var held []*http.Response
			for range 2 {
				resp, err := http.Get(blobURL(h.peer.URL, d)) // headers sent, body blocked
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode)
				held = append(held, resp)
			}
			require.Equal(t, 2.0, testutil.ToFloat64(h.srv.m.inFlight))

			// A sample of concurrent peers: every one is turned away.
			var wg sync.WaitGroup
			codes := make([]int, 8)
			retry := make([]string, 8)
			for i := range codes {
				wg.Go(func() {
					resp, err := http.Get(blobURL(h.peer.URL, d))
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					codes[i], retry[i] = resp.StatusCode, resp.Header.Get("Retry-After")
				})
			}
			wg.Wait()
			for i := range codes {
				require.Equal(t, http.StatusTooManyRequests, codes[i])
				require.Equal(t, tc.want, retry[i])
			}
			require.Equal(t, 200, do(t, http.MethodHead, blobURL(h.peer.URL, d), "").code, "HEAD takes no slot")

			close(block)
			require.Equal(t, data, do(t, http.MethodGet, blobURL(h.local.URL, d), "").body, "runtime is not capped")
			for _, resp := range held {
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, data, body)
				require.NoError(t, resp.Body.Close())
			}
			require.Eventually(t, func() bool { return testutil.ToFloat64(h.srv.m.inFlight) == 0 }, 10*time.Second, time.Millisecond)
			require.Equal(t, 200, do(t, http.MethodGet, blobURL(h.peer.URL, d), "").code, "slots are given back")
			require.Equal(t, 8.0, h.count(t, h.srv.m.requests.WithLabelValues("peer", "429")))
		})
	}
}

// TestGGCRFetchesBlob checks that go-containerregistry's client, pinging
// /v2/ first as any registry client does, fetches a blob by digest.
func TestGGCRFetchesBlob(t *testing.T) {
	h := newHarness(t, Options{})
	data, d := randomBlob(9, 3*testPiece+1)
	h.put(t, data, d)
	for _, srv := range []*httptest.Server{h.peer, h.local} {
		host := strings.TrimPrefix(srv.URL, "http://")
		ref, err := name.NewDigest(host+"/library/app@"+d.String(), name.Insecure)
		require.NoError(t, err)
		l, err := remote.Layer(ref, remote.WithContext(t.Context()))
		require.NoError(t, err)
		rc, err := l.Compressed()
		require.NoError(t, err)
		got, err := io.ReadAll(rc) // ggcr checks the digest while reading
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		require.Equal(t, data, got)
	}
}
