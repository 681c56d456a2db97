//go:build bench && linux

package p2p

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

// testClient returns an HTTP client whose connections come from localIP
// (any local address when empty), closed at t's cleanup.
func testClient(t *testing.T, localIP string) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if localIP != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(localIP)}, Timeout: 5 * time.Second}
		tr.DialContext = d.DialContext
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// response is what fetch got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// fetch makes one request and reads the whole answer.
func fetch(t *testing.T, c *http.Client, method, url string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer func() { require.NoError(t, resp.Body.Close()) }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "%s %s: read body", method, url)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// digestOf returns the sha256 digest of b.
func digestOf(b []byte) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// errorCode returns the first code of an OCI JSON error body.
func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var e registryErrors
	require.NoError(t, json.Unmarshal(body, &e), "error body %q", body)
	require.NotEmpty(t, e.Errors, "error body %q", body)
	return e.Errors[0].Code
}

func TestRegistryServesImage(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, registryOptions{})
	specs := []layerSpec{{Size: 100_000, Seed: 1}, {Size: 1<<20 + 3, Seed: 2}}
	img := reg.pushImage(t, "bench/app/x", "v1", specs)
	small := generateLayer(specs[0])
	big := generateLayer(specs[1])

	require.Equal(t, reg.Host()+"/bench/app/x:v1", img.Ref)
	require.Len(t, img.Layers, 2)
	require.Equal(t, digestOf(small), img.Layers[0].Digest.String())
	require.Equal(t, digestOf(big), img.Layers[1].Digest.String())
	require.Equal(t, types.OCIUncompressedLayer, img.Layers[0].MediaType)
	require.Equal(t, []v1.Descriptor{img.Config, img.Layers[0], img.Layers[1]}, img.Blobs())
	require.Equal(t, img.Config.Size+int64(len(small))+int64(len(big)), img.Size())

	// The same layer spec in another image is the same blob.
	other := reg.pushImage(t, "other", "latest", specs[:1])
	require.Equal(t, img.Layers[0], other.Layers[0])
	require.NotEqual(t, generateLayer(layerSpec{Size: 64, Seed: 1}), generateLayer(layerSpec{Size: 64, Seed: 3}))

	base := "http://" + reg.Host() + "/v2/bench/app/x"
	bigURL := base + "/blobs/" + img.Layers[1].Digest.String()
	size := strconv.Itoa(len(big))
	unknown := digestOf([]byte("nothing"))
	client := testClient(t, "")
	tests := []struct {
		name       string
		method     string
		url        string
		header     map[string]string
		wantStatus int
		wantBody   []byte // checked when not nil
		wantHeader map[string]string
		wantCode   string // OCI error code, when an error
	}{
		{name: "ping", method: http.MethodGet, url: "http://" + reg.Host() + "/v2/", wantStatus: 200, wantBody: []byte("{}")},
		{name: "manifest by tag", method: http.MethodGet, url: base + "/manifests/v1", wantStatus: 200,
			wantHeader: map[string]string{"Content-Type": string(types.OCIManifestSchema1), "Docker-Content-Digest": img.Manifest.Digest.String(), "Content-Length": strconv.FormatInt(img.Manifest.Size, 10)}},
		{name: "manifest by digest", method: http.MethodGet, url: base + "/manifests/" + img.Manifest.Digest.String(), wantStatus: 200,
			wantHeader: map[string]string{"Docker-Content-Digest": img.Manifest.Digest.String()}},
		{name: "manifest HEAD", method: http.MethodHead, url: base + "/manifests/v1", wantStatus: 200, wantBody: []byte{},
			wantHeader: map[string]string{"Docker-Content-Digest": img.Manifest.Digest.String(), "Content-Length": strconv.FormatInt(img.Manifest.Size, 10)}},
		{name: "blob whole", method: http.MethodGet, url: bigURL, wantStatus: 200, wantBody: big,
			wantHeader: map[string]string{"Content-Length": size, "Accept-Ranges": "bytes", "Docker-Content-Digest": img.Layers[1].Digest.String()}},
		{name: "config blob", method: http.MethodGet, url: base + "/blobs/" + img.Config.Digest.String(), wantStatus: 200},
		{name: "range a-b", method: http.MethodGet, url: bigURL, header: map[string]string{"Range": "bytes=10-99"}, wantStatus: 206, wantBody: big[10:100],
			wantHeader: map[string]string{"Content-Range": "bytes 10-99/" + size, "Content-Length": "90"}},
		{name: "range a-", method: http.MethodGet, url: bigURL, header: map[string]string{"Range": "bytes=1000-"}, wantStatus: 206, wantBody: big[1000:],
			wantHeader: map[string]string{"Content-Range": fmt.Sprintf("bytes 1000-%d/%s", len(big)-1, size)}},
		{name: "range suffix", method: http.MethodGet, url: bigURL, header: map[string]string{"Range": "bytes=-5"}, wantStatus: 206, wantBody: big[len(big)-5:]},
		{name: "range past the end is clamped", method: http.MethodGet, url: bigURL, header: map[string]string{"Range": "bytes=0-999999999"}, wantStatus: 206, wantBody: big},
		{name: "malformed range ignored", method: http.MethodGet, url: bigURL, header: map[string]string{"Range": "bytes=9-3"}, wantStatus: 200, wantBody: big},
		{name: "range unsatisfiable", method: http.MethodGet, url: bigURL, header: map[string]string{"Range": "bytes=" + size + "-"}, wantStatus: 416,
			wantHeader: map[string]string{"Content-Range": "bytes */" + size}, wantCode: "SIZE_INVALID"},
		{name: "blob HEAD", method: http.MethodHead, url: bigURL, wantStatus: 200, wantBody: []byte{},
			wantHeader: map[string]string{"Content-Length": size, "Docker-Content-Digest": img.Layers[1].Digest.String()}},
		{name: "unknown blob", method: http.MethodGet, url: base + "/blobs/" + unknown, wantStatus: 404, wantCode: "BLOB_UNKNOWN"},
		{name: "blob of another repo", method: http.MethodGet, url: "http://" + reg.Host() + "/v2/other/blobs/" + img.Layers[1].Digest.String(), wantStatus: 404, wantCode: "BLOB_UNKNOWN"},
		{name: "unknown manifest", method: http.MethodGet, url: base + "/manifests/v2", wantStatus: 404, wantCode: "MANIFEST_UNKNOWN"},
		{name: "unknown repository", method: http.MethodGet, url: "http://" + reg.Host() + "/v2/nope/manifests/v1", wantStatus: 404, wantCode: "NAME_UNKNOWN"},
		{name: "invalid digest", method: http.MethodGet, url: base + "/blobs/sha256:xyz", wantStatus: 400, wantCode: "DIGEST_INVALID"},
		{name: "unknown path", method: http.MethodGet, url: "http://" + reg.Host() + "/v2/bench/app/x/tags/list", wantStatus: 404, wantCode: "UNSUPPORTED"},
		{name: "push refused", method: http.MethodPost, url: base + "/blobs/uploads/", wantStatus: 405, wantCode: "UNSUPPORTED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fetch(t, client, tc.method, tc.url, tc.header)
			require.Equal(t, tc.wantStatus, got.status, "body %q", got.body)
			if tc.wantBody != nil {
				require.True(t, bytes.Equal(tc.wantBody, got.body), "body: %d bytes, want %d", len(got.body), len(tc.wantBody))
			}
			for k, v := range tc.wantHeader {
				require.Equal(t, v, got.header.Get(k), "header %s", k)
			}
			if tc.wantCode != "" {
				require.Equal(t, tc.wantCode, errorCode(t, got.body))
			}
			if d := got.header.Get("Docker-Content-Digest"); d != "" && tc.method == http.MethodGet && got.status == 200 {
				require.Equal(t, d, digestOf(got.body), "body digest")
			}
		})
	}

	t.Run("manifest content", func(t *testing.T) {
		got := fetch(t, client, http.MethodGet, base+"/manifests/v1", nil)
		m, err := v1.ParseManifest(bytes.NewReader(got.body))
		require.NoError(t, err)
		require.Equal(t, int64(2), m.SchemaVersion)
		require.Equal(t, types.OCIManifestSchema1, m.MediaType)
		require.Equal(t, img.Config, m.Config)
		require.Equal(t, img.Layers, m.Layers)

		cfg := fetch(t, client, http.MethodGet, base+"/blobs/"+img.Config.Digest.String(), nil)
		cf, err := v1.ParseConfigFile(bytes.NewReader(cfg.body))
		require.NoError(t, err)
		require.Equal(t, runtime.GOARCH, cf.Architecture)
		require.Equal(t, "linux", cf.OS)
		require.Equal(t, []v1.Hash{img.Layers[0].Digest, img.Layers[1].Digest}, cf.RootFS.DiffIDs)
	})
}

func TestRegistryWithGGCR(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, registryOptions{})
	img := reg.pushImage(t, "ggcr/check", "v1", []layerSpec{{Size: 200_000, Seed: 7}, {Size: 10, Seed: 8}})
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)

	for _, ref := range []string{img.Ref, reg.Host() + "/" + img.Repo + "@" + img.Manifest.Digest.String()} {
		t.Run(ref, func(t *testing.T) {
			r, err := name.ParseReference(ref, name.Insecure)
			require.NoError(t, err)
			ri, err := remote.Image(r, remote.WithTransport(http.DefaultTransport), remote.WithContext(t.Context()))
			require.NoError(t, err)
			d, err := ri.Digest()
			require.NoError(t, err)
			require.Equal(t, img.Manifest.Digest, d)
			cn, err := ri.ConfigName()
			require.NoError(t, err)
			require.Equal(t, img.Config.Digest, cn)
			layers, err := ri.Layers()
			require.NoError(t, err)
			require.Len(t, layers, len(img.Layers))
			for i, l := range layers {
				rc, err := l.Compressed()
				require.NoError(t, err)
				b, err := io.ReadAll(rc)
				require.NoError(t, err)
				require.NoError(t, rc.Close())
				require.Equal(t, img.Layers[i].Digest.String(), digestOf(b))
				require.Equal(t, img.Layers[i].Size, int64(len(b)))
			}
		})
	}
}

func TestRegistryThrottleAndStats(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("needs 127.0.0.2 and 127.0.0.3 on loopback (Linux)")
	}
	const rate = 8 << 20
	const blobSize = 4 << 20
	reg := startRegistry(t, registryOptions{BytesPerSecond: rate})
	img := reg.pushImage(t, "throttle", "v1", []layerSpec{{Size: blobSize, Seed: 11}, {Size: blobSize, Seed: 12}})
	// A manifest fetch is neither throttled nor counted in blob bytes.
	got := fetch(t, testClient(t, ""), http.MethodGet, "http://"+reg.Host()+"/v2/throttle/manifests/v1", nil)
	require.Equal(t, http.StatusOK, got.status)
	reg.resetStats()

	clients := []string{"127.0.0.2", "127.0.0.3"}
	type result struct {
		n      int64
		digest string
		err    error
	}
	results := make([]result, len(clients))
	var wg sync.WaitGroup
	done := make(chan struct{})
	start := time.Now()
	for i, ip := range clients {
		c := testClient(t, ip)
		url := "http://" + reg.Host() + "/v2/throttle/blobs/" + img.Layers[i].Digest.String()
		wg.Go(func() {
			res := &results[i]
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			if err != nil {
				res.err = fmt.Errorf("new request: %w", err)
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				res.err = fmt.Errorf("get %s: %w", url, err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			h := sha256.New()
			res.n, res.err = io.Copy(h, resp.Body)
			res.digest = fmt.Sprintf("sha256:%x", h.Sum(nil))
		})
	}
	go func() { wg.Wait(); close(done) }()

	// The bytes written so far never exceed what the bucket allows since
	// start (it was at most full then). The stats are read before the
	// elapsed time, so the bound is conservative.
	allowed := func(elapsed time.Duration) int64 {
		return int64(rate*elapsed.Seconds()) + reg.limiter.Burst() + 64<<10
	}
	ticker := time.NewTicker(20 * time.Millisecond)
	t.Cleanup(ticker.Stop)
	deadline := time.After(30 * time.Second)
	samples := 0
poll:
	for {
		select {
		case <-done:
			break poll
		case <-deadline:
			require.FailNow(t, "the throttled downloads did not finish within 30s")
		case <-ticker.C:
			s := reg.stats()
			el := time.Since(start)
			require.LessOrEqual(t, s.BlobBytes, allowed(el), "after %v", el)
			samples++
		}
	}
	elapsed := time.Since(start)
	for i, r := range results {
		require.NoError(t, r.err, "client %s", clients[i])
		require.Equal(t, int64(blobSize), r.n, "client %s", clients[i])
		require.Equal(t, img.Layers[i].Digest.String(), r.digest, "client %s", clients[i])
	}
	require.LessOrEqual(t, int64(2*blobSize), allowed(elapsed), "%d bytes in %v at %d B/s", 2*blobSize, elapsed, rate)
	require.Positive(t, samples)

	s := reg.stats()
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"requests", s.Requests, int64(2)},
		{"blob requests", s.BlobRequests, int64(2)},
		{"manifest requests", s.ManifestRequests, int64(0)},
		{"blob bytes", s.BlobBytes, int64(2 * blobSize)},
		{"bytes by digest", s.BytesByDigest, map[string]int64{img.Layers[0].Digest.String(): blobSize, img.Layers[1].Digest.String(): blobSize}},
		{"bytes by client", s.BytesByClient, map[string]int64{clients[0]: blobSize, clients[1]: blobSize}},
		{"peak streams", s.PeakStreams >= 2, true},
		{"rejected", s.Rejected, int64(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.got)
		})
	}

	t.Run("reset", func(t *testing.T) {
		// A response may still be returning from its handler after its
		// client read the last byte; PeakStreams restarts from those.
		want := registryStats{BytesByDigest: map[string]int64{}, BytesByClient: map[string]int64{}}
		require.Eventually(t, func() bool {
			reg.resetStats()
			return reg.stats().PeakStreams == 0
		}, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, want, reg.stats())
	})
}

func TestRegistryFailFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		wantCode string
	}{
		{"unavailable", http.StatusServiceUnavailable, "UNAVAILABLE"},
		{"too many requests", http.StatusTooManyRequests, "TOOMANYREQUESTS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := startRegistry(t, registryOptions{})
			img := reg.pushImage(t, "faulty", "v1", []layerSpec{{Size: 1000, Seed: 1}})
			client := testClient(t, "")
			manifest := "http://" + reg.Host() + "/v2/faulty/manifests/v1"
			blob := "http://" + reg.Host() + "/v2/faulty/blobs/" + img.Layers[0].Digest.String()

			reg.failFor(time.Second, tc.status)
			for _, url := range []string{manifest, blob} {
				got := fetch(t, client, http.MethodGet, url, nil)
				require.Equal(t, tc.status, got.status, url)
				require.Equal(t, "1", got.header.Get("Retry-After"), url)
				require.Equal(t, tc.wantCode, errorCode(t, got.body), url)
			}
			s := reg.stats()
			require.Equal(t, int64(2), s.Rejected)
			require.Equal(t, int64(1), s.ManifestRequests)
			require.Equal(t, int64(1), s.BlobRequests)
			require.Zero(t, s.BlobBytes)

			require.Eventually(t, func() bool {
				return fetch(t, client, http.MethodGet, manifest, nil).status == http.StatusOK
			}, 10*time.Second, 25*time.Millisecond, "the registry should recover")
			got := fetch(t, client, http.MethodGet, blob, nil)
			require.Equal(t, http.StatusOK, got.status)
			require.Equal(t, img.Layers[0].Digest.String(), digestOf(got.body))
		})
	}
}

func TestRegistryStopsWithSlowDownloadInFlight(t *testing.T) {
	t.Parallel()
	// A download that would take ~100 s must not hold up the registry's
	// cleanup (which runs when the inner test returns, before the client
	// lets go): stopping cancels it at once, well within the graceful
	// shutdown's bound, and the client sees the body cut short.
	const size = 6 << 20
	var resp *http.Response
	t.Cleanup(func() {
		if resp != nil {
			_ = resp.Body.Close()
		}
	})
	start := time.Now()
	t.Run("inner", func(t *testing.T) {
		c := testClient(t, "")
		reg := startRegistry(t, registryOptions{BytesPerSecond: 64 << 10})
		img := reg.pushImage(t, "slow", "v1", []layerSpec{{Size: size, Seed: 5}})
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+reg.Host()+"/v2/slow/blobs/"+img.Layers[0].Digest.String(), nil)
		require.NoError(t, err)
		resp, err = c.Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Eventually(t, func() bool { return reg.stats().BlobBytes > 0 }, 10*time.Second, 10*time.Millisecond)
	})
	require.Less(t, time.Since(start), registryStopTimeout, "the registry's cleanup waited for the download")
	n, err := io.Copy(io.Discard, resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Less(t, n, int64(size))
}

func TestParseRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec            string
		size            int64
		start, end      int64
		ok, satisfiable bool
	}{
		{"bytes=0-9", 100, 0, 10, true, true},
		{"bytes=90-", 100, 90, 100, true, true},
		{"bytes=90-200", 100, 90, 100, true, true},
		{"bytes=-10", 100, 90, 100, true, true},
		{"bytes=-1000", 100, 0, 100, true, true},
		{"bytes=100-", 100, 0, 0, true, false},
		{"bytes=-0", 100, 0, 0, true, false},
		{"bytes=0-", 0, 0, 0, true, false},
		{"bytes=5-4", 100, 0, 0, false, false},
		{"bytes=0-1,5-6", 100, 0, 0, false, false},
		{"items=0-1", 100, 0, 0, false, false},
		{"bytes=x-1", 100, 0, 0, false, false},
		{"bytes=1", 100, 0, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s of %d", tc.spec, tc.size), func(t *testing.T) {
			s, e, ok, sat := parseRange(tc.spec, tc.size)
			require.Equal(t, tc.ok, ok, "ok")
			require.Equal(t, tc.satisfiable, sat, "satisfiable")
			if ok && sat {
				require.Equal(t, []int64{tc.start, tc.end}, []int64{s, e})
			}
		})
	}
}

func TestWriteCDFPNG(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		series []cdfSeries
	}{
		{"three series", []cdfSeries{
			{Name: "registry only", Values: []float64{12.5, 3.1, 7.7, 9.9, 14.2, 5.5}},
			{Name: "p2p (8 agents)", Values: []float64{2.1, 2.5, 3.0, 2.2, 4.8}},
			{Name: "p2p_warm: 100%", Values: []float64{1.0, 1.1, 0.9}},
		}},
		{"single value and an empty series", []cdfSeries{
			{Name: "one", Values: []float64{42}},
			{Name: "none"},
			{Name: "same", Values: []float64{3, 3, 3}},
		}},
		{"odd values", []cdfSeries{
			{Name: "a", Values: []float64{-1, math.NaN(), 0.001, math.Inf(1)}},
			{Name: "b", Values: []float64{0.0005, 0.002}},
			{Name: "c", Values: []float64{0.0001}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cdf.png")
			require.NoError(t, writeCDFPNG(path, "Pull time CDF: "+tc.name, "seconds", tc.series))
			f, err := os.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, f.Close()) })
			img, err := png.Decode(f)
			require.NoError(t, err)
			require.Equal(t, plotWidth, img.Bounds().Dx())
			require.Equal(t, plotHeight, img.Bounds().Dy())
			rgba := image.NewRGBA(img.Bounds())
			draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
			colours := map[color.RGBA]bool{}
			for i := 0; i+3 < len(rgba.Pix); i += 4 {
				c := color.RGBA{R: rgba.Pix[i], G: rgba.Pix[i+1], B: rgba.Pix[i+2], A: rgba.Pix[i+3]}
				if c != plotBackground {
					colours[c] = true
				}
			}
			require.GreaterOrEqual(t, len(colours), 3, "distinct non-white colours")
			for i := range tc.series {
				require.True(t, colours[plotPalette[i]], "series %d's colour", i)
			}
			entries, err := os.ReadDir(filepath.Dir(path))
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file left")
		})
	}

	t.Run("errors", func(t *testing.T) {
		dir := t.TempDir()
		require.ErrorContains(t, writeCDFPNG(filepath.Join(dir, "x.png"), "t", "s", nil), "no series")
		one := []cdfSeries{{Name: "a", Values: []float64{1}}}
		require.Error(t, writeCDFPNG(filepath.Join(dir, "missing", "x.png"), "t", "s", one))
		// Renaming over a non-empty directory fails; the temporary file goes.
		target := filepath.Join(dir, "taken")
		require.NoError(t, os.MkdirAll(filepath.Join(target, "sub"), 0o755))
		require.ErrorContains(t, writeCDFPNG(target, "t", "s", one), "rename")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "only the directory is left")
	})
}

func TestXAxis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		lo, hi      float64
		start, step float64
		n           int
		decimals    int
	}{
		{"from zero", 0.4, 10, 0, 2, 5, 0},
		{"no data", math.Inf(1), math.Inf(-1), 0, 0.2, 5, 1},
		{"one value", 5, 5, 0, 1, 8, 0},
		{"all zero", 0, 0, 0, 0.2, 5, 1},
		{"far from zero", 100, 110, 100, 2, 5, 0},
		{"negative", -3, 3, -3, 1, 6, 0},
		{"quarter steps", 0, 2, 0, 0.25, 8, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start, step, n := xAxis(tc.lo, tc.hi)
			require.InDelta(t, tc.start, start, 1e-9, "start")
			require.InDelta(t, tc.step, step, 1e-9, "step")
			require.Equal(t, tc.n, n, "intervals")
			require.Equal(t, tc.decimals, tickDecimals(step), "decimals")
		})
	}
}

func TestPlotFont(t *testing.T) {
	t.Parallel()
	for _, r := range "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ .-=/()_:%" {
		t.Run(string(r), func(t *testing.T) {
			g, ok := plotFont[r]
			require.True(t, ok, "glyph missing")
			for _, row := range g {
				require.Regexp(t, `^[.#]{5}$`, row)
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	t.Parallel()
	const status = "Name:\tshoal\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t9\n"
	tests := []struct {
		name    string
		stat    string
		status  string
		want    procSample
		wantErr string
	}{
		{name: "plain",
			stat:   "1234 (agent) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 100 1000000 200 18446744073709551615\n",
			status: status, want: procSample{CPUSeconds: 3, PeakRSSBytes: 2 << 20, RSSBytes: 1 << 20}},
		{name: "name with spaces and parentheses",
			stat:   "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 1 1\n",
			status: status, want: procSample{CPUSeconds: 0.03, PeakRSSBytes: 2 << 20, RSSBytes: 1 << 20}},
		{name: "short stat", stat: "7 (a) R 1 2 3\n", status: status, wantErr: "fields after the command name"},
		{name: "no name", stat: "7 a R 1 2 3\n", status: status, wantErr: "no command name"},
		{name: "bad utime", stat: "7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 2 0\n", status: status, wantErr: "field 14"},
		{name: "no VmHWM", stat: "7 (a) R 1 7 7 0 -1 0 0 0 0 0 1 2 0\n", status: "VmRSS:\t 1 kB\n", wantErr: "no VmHWM"},
		{name: "bad unit", stat: "7 (a) R 1 7 7 0 -1 0 0 0 0 0 1 2 0\n", status: "VmHWM:\t 1 MB\nVmRSS:\t 1 kB\n", wantErr: "not a size in kB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProc([]byte(tc.stat), []byte(tc.status))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, tc.want.CPUSeconds, got.CPUSeconds, 1e-9)
			require.Equal(t, tc.want.PeakRSSBytes, got.PeakRSSBytes)
			require.Equal(t, tc.want.RSSBytes, got.RSSBytes)
		})
	}
}

func TestReadProc(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	t.Run("self", func(t *testing.T) {
		// Burn CPU until at least one clock tick shows, within a bound.
		buf := make([]byte, 1<<20)
		deadline := time.Now().Add(10 * time.Second)
		var s procSample
		for {
			var err error
			s, err = readProcSelf()
			require.NoError(t, err)
			if s.CPUSeconds > 0 || time.Now().After(deadline) {
				break
			}
			for range 16 {
				buf[0]++
				_ = sha256.Sum256(buf)
			}
		}
		require.Positive(t, s.CPUSeconds)
		require.Positive(t, s.RSSBytes)
		require.GreaterOrEqual(t, s.PeakRSSBytes, s.RSSBytes)
	})
	t.Run("by pid", func(t *testing.T) {
		s, err := readProc(os.Getpid())
		require.NoError(t, err)
		require.Positive(t, s.RSSBytes)
	})
	t.Run("no such process", func(t *testing.T) {
		_, err := readProc(-1)
		require.ErrorContains(t, err, "sample process -1")
	})
}
