package images

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/test/cluster/registry"

	"github.com/shoal-io/shoal/internal/ociimage"
)

// cacheDir holds the testserver binary, built once for all tests.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shoal-images-test-")
	if err != nil {
		log.Fatal(err)
	}
	cacheDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var buildTestserver = sync.OnceValues(func() (string, error) {
	return BuildGoBinary(context.Background(), TestserverPackage, runtime.GOARCH, "", cacheDir)
})

// testserverBinary returns the testserver binary for this machine.
func testserverBinary(t *testing.T) string {
	t.Helper()
	binary, err := buildTestserver()
	require.NoError(t, err)
	return binary
}

// requireBusybox skips the test when busybox-static is not installed.
func requireBusybox(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(DefaultBusyboxPath); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is missing: install Debian's busybox-static (apt-get install -y busybox-static)", DefaultBusyboxPath)
	}
}

// startRegistry serves an in-process registry on loopback until the test
// ends. It returns its host:port and a count of the manifests pushed to it.
func startRegistry(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	h, err := registry.NewHandler(t.TempDir(), ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	require.NoError(t, err)
	var manifestPuts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			manifestPuts.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &manifestPuts
}

// pull fetches ref from the plain-HTTP registry.
func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(r, remote.WithContext(t.Context()))
	require.NoError(t, err)
	return img
}

// entry is what a test expects of one file in an image.
type entry struct {
	typeflag byte
	mode     int64
	linkname string
}

// entries returns the tar headers of img's flattened file system by name.
func entries(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	got := map[string]*tar.Header{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return got
		}
		require.NoError(t, err)
		got[strings.TrimSuffix(hdr.Name, "/")] = hdr
	}
}

func TestImages(t *testing.T) {
	host, _ := startRegistry(t)
	tests := []struct {
		name        string
		needBusybox bool
		build       func(t *testing.T) (v1.Image, error)
		wantConfig  v1.Config
		wantFiles   map[string]entry
	}{
		{
			name:  "pause",
			build: func(t *testing.T) (v1.Image, error) { return Pause(testserverBinary(t)) },
			wantConfig: v1.Config{
				Entrypoint: []string{"/pause"},
				Env:        []string{DefaultPath},
				WorkingDir: "/",
			},
			wantFiles: map[string]entry{"pause": {tar.TypeReg, 0o755, ""}},
		},
		{
			name:  "testserver",
			build: func(t *testing.T) (v1.Image, error) { return Testserver(testserverBinary(t)) },
			wantConfig: v1.Config{
				Entrypoint:   []string{"/testserver"},
				Cmd:          []string{"serve", "--port", "8080"},
				Env:          []string{DefaultPath},
				WorkingDir:   "/",
				ExposedPorts: map[string]struct{}{"8080/tcp": {}},
			},
			wantFiles: map[string]entry{"testserver": {tar.TypeReg, 0o755, ""}},
		},
		{
			name:        "busybox",
			needBusybox: true,
			build:       func(*testing.T) (v1.Image, error) { return Busybox(DefaultBusyboxPath) },
			wantConfig: v1.Config{
				Cmd:        []string{"sh"},
				Env:        []string{DefaultPath},
				WorkingDir: "/",
			},
			wantFiles: map[string]entry{
				"bin":         {tar.TypeDir, 0o755, ""},
				"bin/busybox": {tar.TypeReg, 0o755, ""},
				"bin/sh":      {tar.TypeSymlink, 0o777, "busybox"},
				"bin/ls":      {tar.TypeSymlink, 0o777, "busybox"},
				"bin/wget":    {tar.TypeSymlink, 0o777, "busybox"},
				"etc/passwd":  {tar.TypeReg, 0o644, ""},
				"etc/group":   {tar.TypeReg, 0o644, ""},
				"root":        {tar.TypeDir, 0o700, ""},
				"tmp":         {tar.TypeDir, 0o1777, ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needBusybox {
				requireBusybox(t)
			}
			img, err := tt.build(t)
			require.NoError(t, err)
			ref := host + "/" + tt.name + ":test"
			require.NoError(t, ociimage.Push(t.Context(), ref, img))

			got := pull(t, ref)
			wantDigest, err := img.Digest()
			require.NoError(t, err)
			gotDigest, err := got.Digest()
			require.NoError(t, err)
			require.Equal(t, wantDigest, gotDigest)

			mt, err := got.MediaType()
			require.NoError(t, err)
			require.Equal(t, types.OCIManifestSchema1, mt)
			cf, err := got.ConfigFile()
			require.NoError(t, err)
			require.Equal(t, "linux", cf.OS)
			require.Equal(t, runtime.GOARCH, cf.Architecture)
			require.Equal(t, tt.wantConfig, cf.Config)

			files := entries(t, got)
			for name, want := range tt.wantFiles {
				hdr, ok := files[name]
				require.True(t, ok, "missing %s", name)
				require.Equal(t, want, entry{hdr.Typeflag, hdr.Mode, hdr.Linkname}, name)
				require.Zero(t, hdr.Uid, name)
				require.Zero(t, hdr.Gid, name)
			}
		})
	}
}

func TestBusyboxApplets(t *testing.T) {
	requireBusybox(t)
	img, err := Busybox(DefaultBusyboxPath)
	require.NoError(t, err)
	files := entries(t, img)
	var links int
	for name, hdr := range files {
		if strings.HasPrefix(name, "bin/") && hdr.Typeflag == tar.TypeSymlink {
			require.Equal(t, "busybox", hdr.Linkname, name)
			links++
		}
	}
	// Debian's busybox-static has a few hundred applets.
	require.Greater(t, links, 100)
}

func TestBusyboxMissing(t *testing.T) {
	_, err := Busybox(filepath.Join(t.TempDir(), "busybox"))
	require.ErrorContains(t, err, "busybox-static")
}

func TestImagesAreReproducible(t *testing.T) {
	binary := testserverBinary(t)
	first, err := Testserver(binary)
	require.NoError(t, err)
	second, err := Testserver(binary)
	require.NoError(t, err)
	d1, err := first.Digest()
	require.NoError(t, err)
	d2, err := second.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2)
	v2, err := TestserverV2(binary)
	require.NoError(t, err)
	d3, err := v2.Digest()
	require.NoError(t, err)
	require.NotEqual(t, d1, d3, "v2 is another digest of the same program")
}

func TestBuildAndPushAll(t *testing.T) {
	requireBusybox(t)
	host, manifestPuts := startRegistry(t)

	tests := []struct {
		name             string
		wantManifestPuts int32
	}{
		{"first run pushes every image", 4},
		{"second run pushes nothing", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifestPuts.Store(0)
			require.NoError(t, BuildAndPushAll(t.Context(), host, cacheDir))
			require.Equal(t, tt.wantManifestPuts, manifestPuts.Load())
			for _, ref := range []string{PauseRef, BusyboxRef, TestserverRef, TestserverV2Ref} {
				cf, err := pull(t, host+"/"+ref).ConfigFile()
				require.NoError(t, err)
				require.Equal(t, runtime.GOARCH, cf.Architecture, ref)
			}
		})
	}
}
