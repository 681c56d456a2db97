package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
)

// get makes a GET to the registry with optional basic auth and headers.
func regGet(t *testing.T, url, user, pass string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

func TestRegistryAuthPushPullAndCounters(t *testing.T) {
	r := StartRegistry(t, RegistryOptions{Addr: "127.0.0.1:0", Users: map[string]string{"alice": "s3cret"}})
	require.NotEqual(t, "127.0.0.1:0", r.Host, "Host has the port bound")
	ref := r.Push(t, "e2e/app", "v1", 1, 2)
	require.Regexp(t, `^`+regexp.QuoteMeta(r.Host+"/e2e/app:v1-")+`[a-z2-7]{8}$`, ref, "the tag gets a random suffix")
	require.NotEqual(t, ref, r.Push(t, "e2e/app", "v1", 1, 1), "a second push gets another tag")
	p, ok := r.Pushed(ref)
	require.True(t, ok)
	require.Len(t, p.Layers, 2)
	require.Greater(t, p.Size(), int64(2<<20))
	require.Zero(t, r.Requests(), "Push is in process, not counted")

	base := "http://" + r.Host
	resp, _ := regGet(t, base+"/v2/", "", "", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, `Basic realm="shoal-e2e"`, resp.Header.Get("WWW-Authenticate"))
	resp, _ = regGet(t, base+"/v2/", "alice", "wrong", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = regGet(t, base+"/v2/", "alice", "s3cret", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int64(1), r.Challenges())
	require.Len(t, r.Rejections(), 1)
	require.Equal(t, "alice", r.Rejections()[0].User)
	require.Equal(t, "127.0.0.1", r.Rejections()[0].Client)

	// A client with credentials pulls the whole image.
	tag, err := name.NewTag(ref, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(tag, remote.WithAuth(&authn.Basic{Username: "alice", Password: "s3cret"}))
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		rc, err := l.Compressed()
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
	}
	got := r.BlobBytes()
	for i, d := range p.Layers {
		require.Equal(t, p.LayerSizes[i], got[d], "layer %d served once, whole", i)
	}
	require.Equal(t, p.Size(), r.BytesTo(p.Layers...)["127.0.0.1"])

	// Resuming with an open-ended range, as containerd does.
	resp, body := regGet(t, fmt.Sprintf("%s/v2/e2e/app/blobs/%s", base, p.Layers[0]), "alice", "s3cret", map[string]string{"Range": "bytes=100-"})
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	require.Equal(t, fmt.Sprintf("bytes 100-%d/%d", p.LayerSizes[0]-1, p.LayerSizes[0]), resp.Header.Get("Content-Range"))
	require.Len(t, body, int(p.LayerSizes[0]-100))
	gets := r.BlobGets()
	last := gets[len(gets)-1]
	require.Equal(t, "bytes=100-", last.Range)
	require.Equal(t, http.StatusPartialContent, last.Status)
	require.True(t, last.Complete)
	require.Contains(t, r.DownloadLog(p.Layers[0]), "bytes=100-")

	resp, _ = regGet(t, base+"/v2/e2e/app/blobs/sha256:"+strings.Repeat("0", 64), "alice", "s3cret", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	r.SetFailing(true)
	resp, _ = regGet(t, base+"/v2/", "alice", "s3cret", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	r.FailWith(http.StatusTooManyRequests)
	resp, _ = regGet(t, base+"/v2/", "alice", "s3cret", nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	r.SetFailing(false)
	resp, _ = regGet(t, base+"/v2/", "alice", "s3cret", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestRegistryThrottle(t *testing.T) {
	r := StartRegistry(t, RegistryOptions{Addr: "127.0.0.1:0", BytesPerSecond: 1 << 20})
	ref := r.Push(t, "slow", "v1", 1, 1)
	p, _ := r.Pushed(ref)
	start := time.Now()
	resp, body := regGet(t, fmt.Sprintf("http://%s/v2/slow/blobs/%s", r.Host, p.Layers[0]), "", "", nil)
	took := time.Since(start)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, body, int(p.LayerSizes[0]))
	// ~1 MiB at 1 MiB/s.
	require.Greater(t, took, 800*time.Millisecond)
	require.Less(t, took, 3*time.Second)

	// A client that goes away mid-download is recorded as cut off.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/v2/slow/blobs/%s", r.Host, p.Layers[0]), nil)
	require.NoError(t, err)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	require.Eventually(t, func() bool {
		gets := r.BlobGets()
		g := gets[len(gets)-1]
		return len(gets) == 2 && !g.End.IsZero() && !g.Complete && g.Bytes < p.LayerSizes[0]
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, r.MaxConcurrentClients())
}
