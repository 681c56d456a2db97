package blobserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/imagewarm/store"
	"github.com/shoal-io/shoal/internal/metricstest"
)

// pullCall is one call of a PullThrough hook.
type pullCall struct {
	name  string
	d     v1.Hash
	query url.Values
}

// pullHook is a PullThrough hook that records its calls and answers with
// fn (set before any request).
type pullHook struct {
	mu    sync.Mutex
	calls []pullCall
	fn    func(d v1.Hash) (*store.Blob, error)
}

func (p *pullHook) pullThrough(_ context.Context, name string, d v1.Hash, q url.Values) (*store.Blob, error) {
	p.mu.Lock()
	p.calls = append(p.calls, pullCall{name, d, q})
	fn := p.fn
	p.mu.Unlock()
	return fn(d)
}

func (p *pullHook) set(fn func(d v1.Hash) (*store.Blob, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn = fn
}

func (p *pullHook) recorded() []pullCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pullCall(nil), p.calls...)
}

// ociCode returns the first error code of an OCI error body.
func ociCode(t *testing.T, body []byte) string {
	t.Helper()
	var e struct{ Errors []struct{ Code string } }
	require.NoError(t, json.Unmarshal(body, &e))
	require.NotEmpty(t, e.Errors)
	return e.Errors[0].Code
}

const testNS = "reg.example:5000"

// pullURL is a mirror request as containerd sends it: the repository
// path, then ns=<registry>.
func pullURL(base string, d v1.Hash) string {
	return blobURL(base, d) + "?ns=" + url.QueryEscape(testNS)
}

// TestPullThroughCutThrough shows that a runtime request for a blob absent
// from the node asks PullThrough (with the repository and the query), and
// that the handle it returns streams the blob as another goroutine writes
// its pieces: the headers come before any piece exists.
func TestPullThroughCutThrough(t *testing.T) {
	const size = 4*testPiece + 123
	hook := &pullHook{}
	h := newHarness(t, Options{PullThrough: hook.pullThrough})
	data, d := randomBlob(70, size)

	release := make(chan struct{})
	written := make(chan error, 1)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	hook.set(func(got v1.Hash) (*store.Blob, error) {
		b, err := h.st.Begin(got, size, 0)
		if err != nil {
			return nil, err
		}
		w, err := h.st.Begin(got, size, 0)
		if err != nil {
			_ = b.Close()
			return nil, err
		}
		go func() {
			defer func() { _ = w.Close() }()
			<-release
			for i := range w.NumPieces() {
				if err := w.WritePiece(i, piece(data, i)); err != nil {
					written <- err
					return
				}
			}
			written <- w.Commit()
		}()
		return b, nil
	})

	resp, err := http.Get(pullURL(h.local.URL, d))
	require.NoError(t, err, "headers come before any piece")
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int64(size), resp.ContentLength)
	require.Equal(t, d.String(), resp.Header.Get("Docker-Content-Digest"))
	close(release)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, data, body)
	require.NoError(t, <-written)

	calls := hook.recorded()
	require.Len(t, calls, 1)
	require.Equal(t, "library/some/app", calls[0].name, "the repository, slashes included")
	require.Equal(t, d, calls[0].d)
	require.Equal(t, testNS, calls[0].query.Get("ns"))
	require.Equal(t, 1.0, metricstest.Sum(t, h.reg, MetricPullThrough, map[string]string{"result": "started"}))
	require.Zero(t, metricstest.Sum(t, h.reg, MetricPullThrough, map[string]string{"result": "refused"}))

	// Once verified, the blob is served from the store without the hook.
	r := do(t, http.MethodGet, pullURL(h.local.URL, d), "")
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, data, r.body)
	require.Len(t, hook.recorded(), 1)
}

// TestPullThroughNotCalled shows when the hook is not asked or fails: a
// hook error answers 404 at once (counted as refused), a peer request never
// reaches the hook, and a blob the node holds needs no hook.
func TestPullThroughNotCalled(t *testing.T) {
	hookErr := errors.New("registry unknown")
	for _, tc := range []struct {
		name         string
		peer         bool
		held         bool // the runtime's content store has the blob
		wantCode     int
		wantCalls    int
		wantStarted  float64
		wantRefused  float64
		wantBodyData bool
	}{
		{name: "hook error is a fast 404", wantCode: http.StatusNotFound, wantCalls: 1, wantRefused: 1},
		{name: "peer request skips the hook", peer: true, wantCode: http.StatusNotFound},
		{name: "held blob skips the hook", held: true, wantCode: http.StatusOK, wantBodyData: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := &pullHook{}
			hook.set(func(v1.Hash) (*store.Blob, error) { return nil, hookErr })
			h := newHarness(t, Options{PullThrough: hook.pullThrough})
			data, d := randomBlob(71, 2*testPiece)
			if tc.held {
				h.runtime.mu.Lock()
				h.runtime.blobs[d] = data
				h.runtime.mu.Unlock()
			}
			base := h.local.URL
			if tc.peer {
				base = h.peer.URL
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			t.Cleanup(cancel)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, pullURL(base, d), nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			t.Cleanup(func() { _ = resp.Body.Close() })
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.wantCode, resp.StatusCode)
			if tc.wantBodyData {
				require.Equal(t, data, body)
			} else {
				require.Equal(t, "BLOB_UNKNOWN", ociCode(t, body))
			}
			require.Len(t, hook.recorded(), tc.wantCalls)
			require.Equal(t, tc.wantStarted, metricstest.Sum(t, h.reg, MetricPullThrough, map[string]string{"result": "started"}))
			require.Equal(t, tc.wantRefused, metricstest.Sum(t, h.reg, MetricPullThrough, map[string]string{"result": "refused"}))
		})
	}
}

// TestSpreadWindow shows super-seeding: a present piece of a partial blob
// goes to one peer per window (a second request within it gets 404 and is
// counted), other pieces and the runtime are not held back, the piece is
// served again after the window, and a verified blob is never refused.
func TestSpreadWindow(t *testing.T) {
	// Long enough that back-to-back requests on a loaded machine stay
	// within it, short enough to wait out.
	const window = 250 * time.Millisecond
	const size = 5*testPiece + 7
	h := newHarness(t, Options{SpreadWindow: window})
	data, d := randomBlob(72, size)
	b, err := h.st.Begin(d, size, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, b.WritePiece(i, piece(data, i)))
	}

	get := func(t *testing.T, base, rng string) int {
		t.Helper()
		r := do(t, http.MethodGet, blobURL(base, d), rng)
		if r.code == http.StatusPartialContent {
			start, _, _ := parseSpan(t, r.hdr.Get("Content-Range"))
			require.Equal(t, data[start:start+int64(len(r.body))], r.body)
		}
		return r.code
	}
	refused := 0
	for _, step := range []struct {
		name, rng string
		runtime   bool
		code      int
		refusal   bool
	}{
		{name: "first peer gets piece 0", rng: "bytes=0-999", code: 206},
		{name: "second peer is refused piece 0", rng: "bytes=100-199", code: 404, refusal: true},
		{name: "another present piece is served", rng: "bytes=1000-1999", code: 206},
		{name: "a range of given pieces only is refused", rng: "bytes=500-1500", code: 404, refusal: true},
		{name: "a range with a fresh piece is served", rng: "bytes=1000-2999", code: 206},
		{name: "piece 2 is now given too", rng: "bytes=2000-2999", code: 404, refusal: true},
		{name: "the runtime is never held back", rng: "bytes=0-999", runtime: true, code: 206},
		{name: "a missing piece is 404 but no refusal", rng: "bytes=3000-3999", code: 404},
		{name: "no range is 404 but no refusal", code: 404},
	} {
		base := h.peer.URL
		if step.runtime {
			base = h.local.URL
		}
		require.Equal(t, step.code, get(t, base, step.rng), step.name)
		if step.refusal {
			refused++
		}
	}
	require.Equal(t, float64(refused), metricstest.Sum(t, h.reg, MetricSpreadRefused, nil))

	// After the window the piece is given again.
	require.Eventually(t, func() bool {
		code := get(t, h.peer.URL, "bytes=0-999")
		if code == http.StatusNotFound {
			refused++
		}
		return code == http.StatusPartialContent
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, float64(refused), metricstest.Sum(t, h.reg, MetricSpreadRefused, nil))

	t.Run("verified blobs are never refused", func(t *testing.T) {
		for _, i := range []int{3, 4, 5} {
			require.NoError(t, b.WritePiece(i, piece(data, i)))
		}
		require.NoError(t, b.Commit())
		other, od := randomBlob(73, 3*testPiece)
		h.put(t, other, od)
		for range 3 {
			require.Equal(t, http.StatusPartialContent, get(t, h.peer.URL, "bytes=0-999"))
			require.Equal(t, http.StatusOK, get(t, h.peer.URL, ""))
			r := do(t, http.MethodGet, blobURL(h.peer.URL, od), "bytes=0-999")
			require.Equal(t, http.StatusPartialContent, r.code)
			require.Equal(t, other[:1000], r.body)
		}
		require.Equal(t, float64(refused), metricstest.Sum(t, h.reg, MetricSpreadRefused, nil))
	})
}

// parseSpan parses "bytes start-end/size".
func parseSpan(t *testing.T, cr string) (start, end, size int64) {
	t.Helper()
	var err error
	rest, ok := strings.CutPrefix(cr, "bytes ")
	require.True(t, ok, cr)
	s, rest, ok := strings.Cut(rest, "-")
	require.True(t, ok, cr)
	e, z, ok := strings.Cut(rest, "/")
	require.True(t, ok, cr)
	start, err = strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	end, err = strconv.ParseInt(e, 10, 64)
	require.NoError(t, err)
	size, err = strconv.ParseInt(z, 10, 64)
	require.NoError(t, err)
	return start, end, size
}
