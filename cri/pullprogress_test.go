package cri_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/cri"
)

// namedRuntime is the fake runtime service under another runtime name.
type namedRuntime struct {
	*apitest.FakeRuntimeService
	name string
}

// Version implements the runtime service with the runtime's name.
func (n namedRuntime) Version(ctx context.Context, v string) (*runtimeapi.VersionResponse, error) {
	resp, err := n.FakeRuntimeService.Version(ctx, v)
	if err != nil {
		return nil, err
	}
	resp.RuntimeName = n.name
	return resp, nil
}

// runtimeAt is a Runtime named name whose endpoint is the socket sock.
func runtimeAt(t *testing.T, name, sock string) *cri.Runtime {
	t.Helper()
	rt, err := cri.NewRuntime(context.Background(), cri.Endpoint{Name: name, Address: "unix://" + sock},
		namedRuntime{FakeRuntimeService: apitest.NewFakeRuntimeService(), name: name}, apitest.NewFakeImageService())
	require.NoError(t, err)
	return rt
}

// testRegistry is an in-process registry on 127.0.0.1, optionally behind
// basic auth.
type testRegistry struct {
	host string

	mu       sync.Mutex
	users    []string // the usernames of the requests past the ping, "" for anonymous
	requests []string // "<method> <path>" of every request
}

func startRegistry(t *testing.T, user, password string) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	reg := registry.New(registry.Logger(discardLogger()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, ok := req.BasicAuth()
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.Path)
		if req.URL.Path != "/v2/" { // clients ping anonymously first
			r.users = append(r.users, u)
		}
		r.mu.Unlock()
		if user != "" && (!ok || u != user || p != password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// manifestGETs counts the GET requests for manifests.
func (r *testRegistry) manifestGETs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, req := range r.requests {
		if strings.HasPrefix(req, "GET ") && strings.Contains(req, "/manifests/") {
			n++
		}
	}
	return n
}

func (r *testRegistry) usersSeen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.users...)
}

// push writes img to the registry as repo:tag, as user (if any), and
// returns the reference.
func (r *testRegistry) push(t *testing.T, repo string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	ref, err := name.ParseReference(r.host + "/" + repo)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, opts...))
	return ref.String()
}

// imageBlobs is what a pull of img fetches: its manifest, config and
// layers, with their sizes.
func imageBlobs(t *testing.T, img v1.Image) (total int64, sizes map[string]int64) {
	t.Helper()
	sizes = map[string]int64{}
	d, err := img.Digest()
	require.NoError(t, err)
	s, err := img.Size()
	require.NoError(t, err)
	sizes[d.String()] = s
	m, err := img.Manifest()
	require.NoError(t, err)
	sizes[m.Config.Digest.String()] = m.Config.Size
	for _, l := range m.Layers {
		sizes[l.Digest.String()] = l.Size
	}
	for _, v := range sizes {
		total += v
	}
	return total, sizes
}

func randomImage(t *testing.T, layerBytes, layers int64) v1.Image {
	t.Helper()
	img, err := random.Image(layerBytes, layers)
	require.NoError(t, err)
	return img
}

func TestContentMeterMeasuresContainerdPull(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	reg := startRegistry(t, "", "")
	img := randomImage(t, 4096, 3)
	ref := reg.push(t, "team/app:1", img)
	total, sizes := imageBlobs(t, img)
	m, err := img.Manifest()
	require.NoError(t, err)
	layer0, layer1 := m.Layers[0].Digest.String(), m.Layers[1].Digest.String()

	fc, sock := startFakeContent(t)
	w := cri.NewContentMeter().Watch(ctx, runtimeAt(t, cri.RuntimeContainerd, sock), ref, nil)
	defer w.Close()
	// containerd fetches the manifest first; the meter reads it from there.
	raw, err := img.RawManifest()
	require.NoError(t, err)
	mdigest, err := img.Digest()
	require.NoError(t, err)
	fc.commitData(mdigest.String(), raw)
	cri.WaitResolved(w)
	require.Zero(t, reg.manifestGETs(), "the registry is only asked with a HEAD")
	msize := int64(len(raw))

	steps := []struct {
		name   string
		change func()
		want   int64
	}{
		{"only the manifest", func() {}, msize},
		{"config committed, a layer being written", func() {
			fc.commit(m.Config.Digest.String(), m.Config.Size)
			fc.ingest("layer-"+layer0, 1000, sizes[layer0])
		}, msize + m.Config.Size + 1000},
		{"an ingest unrelated to the image", func() {
			fc.ingest("layer-sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", 5000, 9000)
		}, msize + m.Config.Size + 1000},
		{"first layer committed, second written", func() {
			fc.commit(layer0, sizes[layer0])
			fc.ingest("layer-"+layer1, 2000, sizes[layer1])
		}, msize + m.Config.Size + sizes[layer0] + 2000},
		{"everything committed", func() {
			for d, s := range sizes {
				fc.commit(d, s)
			}
		}, total},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.change()
			require.Equal(t, cri.PullBytes{Done: step.want, Total: total}, w.Sample(ctx))
		})
	}
	require.Equal(t, []string{cri.ContainerdNamespace}, fc.namespacesSeen(),
		"every content call is in containerd's k8s.io namespace")
}

func TestContentMeterPicksThePlatformOfAnIndex(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	reg := startRegistry(t, "", "")
	amd, arm := randomImage(t, 1000, 1), randomImage(t, 3000, 2)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	)
	ref, err := name.ParseReference(reg.host + "/multi:1")
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(ref, idx))
	idxSize, err := idx.Size()
	require.NoError(t, err)

	for _, tc := range []struct {
		arch string
		img  v1.Image
	}{{"amd64", amd}, {"arm64", arm}} {
		t.Run(tc.arch, func(t *testing.T) {
			want, _ := imageBlobs(t, tc.img)
			meter := cri.NewContentMeter(cri.WithPlatform(v1.Platform{OS: "linux", Architecture: tc.arch}))
			w := meter.Watch(ctx, nil, ref.String(), nil)
			defer w.Close()
			cri.WaitResolved(w)
			require.Equal(t, cri.PullBytes{Total: idxSize + want}, w.Sample(ctx), "not containerd: nothing done until the end")
		})
	}
}

func TestContentMeterCredentials(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	reg := startRegistry(t, "alice", "s3cret")
	img := randomImage(t, 2048, 2)
	ref := reg.push(t, "private/app:1", img, remote.WithAuth(basicAuth("alice", "s3cret")))
	total, _ := imageBlobs(t, img)

	for _, tc := range []struct {
		name      string
		auths     []*runtimeapi.AuthConfig
		wantTotal int64
		wantUsers []string // the credentials tried, in order
	}{
		{"anonymous", nil, 0, []string{""}},
		{"wrong only", []*runtimeapi.AuthConfig{{Username: "bob", Password: "x"}}, 0, []string{"bob"}},
		{"wrong then right", []*runtimeapi.AuthConfig{{Username: "bob", Password: "x"}, {Username: "alice", Password: "s3cret"}}, total, []string{"bob", "alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(reg.usersSeen())
			w := cri.NewContentMeter().Watch(ctx, nil, ref, tc.auths)
			defer w.Close()
			cri.WaitResolved(w)
			require.Equal(t, cri.PullBytes{Total: tc.wantTotal}, w.Sample(ctx))
			var tried []string
			for _, u := range reg.usersSeen()[before:] {
				if len(tried) == 0 || tried[len(tried)-1] != u {
					tried = append(tried, u)
				}
			}
			require.Equal(t, tc.wantUsers, tried)
		})
	}
}

func TestContentMeterNeverFails(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		name  string
		image string
	}{
		{"unreachable registry", "127.0.0.1:1/nobody/home:1"},
		{"reference that does not parse", "Not A Reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sock := startFakeContent(t)
			w := cri.NewContentMeter(cri.WithResolveTimeout(10*time.Second)).Watch(ctx, runtimeAt(t, cri.RuntimeContainerd, sock), tc.image, nil)
			cri.WaitResolved(w)
			require.Equal(t, cri.PullBytes{}, w.Sample(ctx))
			w.Close()
		})
	}
	t.Run("content store gone", func(t *testing.T) {
		reg := startRegistry(t, "", "")
		img := randomImage(t, 1024, 1)
		ref := reg.push(t, "app:1", img)
		total, _ := imageBlobs(t, img)
		dir := t.TempDir()
		w := cri.NewContentMeter().Watch(ctx, runtimeAt(t, cri.RuntimeContainerd, filepath.Join(dir, "missing.sock")), ref, nil)
		defer w.Close()
		cri.WaitResolved(w)
		require.Equal(t, cri.PullBytes{Total: total}, w.Sample(ctx))
	})
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func basicAuth(user, password string) authn.Authenticator {
	return authn.FromConfig(authn.AuthConfig{Username: user, Password: password})
}

func TestContentMeterFallsBackToTheRegistry(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	reg := startRegistry(t, "", "")
	img := randomImage(t, 1024, 2)
	ref := reg.push(t, "app:1", img)
	total, _ := imageBlobs(t, img)
	_, sock := startFakeContent(t)
	// containerd never gets the manifest (its pull failed early, say).
	w := cri.NewContentMeter(cri.WithContentWait(50*time.Millisecond)).Watch(ctx, runtimeAt(t, cri.RuntimeContainerd, sock), ref, nil)
	defer w.Close()
	cri.WaitResolved(w)
	require.Equal(t, cri.PullBytes{Total: total}, w.Sample(ctx))
	require.Equal(t, 1, reg.manifestGETs())
}
