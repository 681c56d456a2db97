package registry

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
)

// startRegistry runs ServeListeners on n loopback listeners until stop is
// called or the test ends. It returns their addresses and the remote options
// to reach them; stop closes the client's connections first, so the registry
// stops at once.
func startRegistry(t *testing.T, dir string, n int) (addrs []string, opts []remote.Option, stop func()) {
	t.Helper()
	var listeners []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		listeners = append(listeners, l)
		addrs = append(addrs, l.Addr().String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListeners(ctx, listeners, dir) }()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	stop = sync.OnceFunc(func() {
		transport.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
	})
	t.Cleanup(stop)
	return addrs, []remote.Option{remote.WithContext(t.Context()), remote.WithTransport(transport)}, stop
}

func TestPushPull(t *testing.T) {
	dir := t.TempDir()
	addrs, opts, _ := startRegistry(t, dir, 2)

	img, err := random.Image(1024, 2)
	require.NoError(t, err)
	want, err := img.Digest()
	require.NoError(t, err)

	pushRef, err := name.ParseReference(addrs[0]+"/test/random:v1", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(pushRef, img, opts...))

	// Both listeners serve the same registry.
	for _, addr := range addrs {
		ref, err := name.ParseReference(addr+"/test/random:v1", name.Insecure)
		require.NoError(t, err)
		got, err := remote.Image(ref, opts...)
		require.NoError(t, err)
		gotDigest, err := got.Digest()
		require.NoError(t, err)
		require.Equal(t, want, gotDigest)
		layers, err := got.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 2)
	}

	// Every layer is a file on disk.
	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		d, err := l.Digest()
		require.NoError(t, err)
		require.FileExists(t, filepath.Join(dir, d.Algorithm, d.Hex))
	}
}

func TestBlobsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	img, err := random.Image(512, 1)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	digest, err := layers[0].Digest()
	require.NoError(t, err)

	first, opts, stop := startRegistry(t, dir, 1)
	ref, err := name.ParseReference(first[0]+"/test/restart:v1", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, opts...))
	stop()

	second, _, _ := startRegistry(t, dir, 1)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	tests := []struct {
		name string
		path string
		want int
	}{
		{"blob kept on disk", "/v2/test/restart/blobs/" + digest.String(), http.StatusOK},
		{"manifest kept in memory only", "/v2/test/restart/manifests/v1", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, "http://"+second[0]+tt.path, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, tt.want, resp.StatusCode)
		})
	}
}

func TestServe(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })

	tests := []struct {
		name    string
		addrs   []string
		wantErr string
	}{
		{"stops when the context is done", []string{"127.0.0.1:0", "127.0.0.1:0"}, ""},
		{"address in use", []string{"127.0.0.1:0", busy.Addr().String()}, "registry listen on " + busy.Addr().String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "blobs")
			ctx, cancel := context.WithCancel(t.Context())
			if tt.wantErr == "" {
				cancel()
			}
			defer cancel()
			err := Serve(ctx, tt.addrs, dir)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.DirExists(t, dir)
		})
	}
}
