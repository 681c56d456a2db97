package cri_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/imagewarm/mirror"
	"github.com/shoal-io/shoal/internal/containerdtest"
)

// fakeContent is containerd's content service as far as a ContentStore
// uses it (Info, Read and ListStatuses), served over gRPC on a unix
// socket, with containerd's Read semantics: the section [offset,
// offset+size) clamped to the blob, in chunks whose Offset counts from the
// requested offset.
type fakeContent struct {
	contentapi.UnimplementedContentServer

	mu         sync.Mutex
	committed  map[string]int64              // sizes of the committed blobs
	data       map[string][]byte             // of committed blobs that have data (manifests)
	ingests    map[string]*contentapi.Status // by ref
	infoErr    error                         // when set, Info and Read fail with it
	namespaces map[string]bool               // namespace header of the calls
}

const chunk = 7 // small, so reads span several messages

// startFakeContent serves a fakeContent at a socket in a directory of its
// own.
func startFakeContent(t *testing.T) (*fakeContent, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "shoal-content-") // short: the socket path is bounded
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "containerd.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	fc := &fakeContent{committed: map[string]int64{}, data: map[string][]byte{}, ingests: map[string]*contentapi.Status{}, namespaces: map[string]bool{}}
	srv := grpc.NewServer()
	contentapi.RegisterContentServer(srv, fc)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return fc, sock
}

// add commits data and returns its digest.
func (fc *fakeContent) add(data []byte) string {
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	fc.commitData(d, data)
	return d
}

// commitData commits a blob the fake can also read (a manifest).
func (fc *fakeContent) commitData(digest string, data []byte) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.committed[digest] = int64(len(data))
	fc.data[digest] = data
}

// commit commits a blob without data (a layer), ending its ingest.
func (fc *fakeContent) commit(digest string, size int64) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	delete(fc.ingests, "layer-"+digest)
	fc.committed[digest] = size
}

func (fc *fakeContent) ingest(ref string, offset, total int64) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.ingests[ref] = &contentapi.Status{Ref: ref, Offset: offset, Total: total}
}

func (fc *fakeContent) remove(d string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	delete(fc.committed, d)
	delete(fc.data, d)
}

// call records the namespace of a call and returns infoErr.
func (fc *fakeContent) call(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.namespaces[strings.Join(md.Get("containerd-namespace"), ",")] = true
	return fc.infoErr
}

func notFound(d string) error {
	return status.Errorf(codes.NotFound, "content digest %s: not found", d)
}

// Info implements contentapi.ContentServer.
func (fc *fakeContent) Info(ctx context.Context, req *contentapi.InfoRequest) (*contentapi.InfoResponse, error) {
	if err := fc.call(ctx); err != nil {
		return nil, err
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	size, ok := fc.committed[req.GetDigest()]
	if !ok {
		return nil, notFound(req.GetDigest())
	}
	return &contentapi.InfoResponse{Info: &contentapi.Info{Digest: req.GetDigest(), Size: size}}, nil
}

// Read implements contentapi.ContentServer for blobs committed with data.
func (fc *fakeContent) Read(req *contentapi.ReadContentRequest, srv contentapi.Content_ReadServer) error {
	if err := fc.call(srv.Context()); err != nil {
		return err
	}
	fc.mu.Lock()
	data, ok := fc.data[req.GetDigest()]
	fc.mu.Unlock()
	if !ok {
		return notFound(req.GetDigest())
	}
	off, size := max(req.GetOffset(), 0), req.GetSize()
	if off > int64(len(data)) {
		return status.Errorf(codes.OutOfRange, "read past object length %d bytes", len(data))
	}
	if size <= 0 || off+size > int64(len(data)) {
		size = int64(len(data)) - off
	}
	section := data[off : off+size]
	for i := 0; i < len(section); i += chunk {
		if err := srv.Send(&contentapi.ReadContentResponse{Offset: int64(i), Data: section[i:min(i+chunk, len(section))]}); err != nil {
			return err
		}
	}
	return nil
}

// ListStatuses implements contentapi.ContentServer.
func (fc *fakeContent) ListStatuses(ctx context.Context, _ *contentapi.ListStatusesRequest) (*contentapi.ListStatusesResponse, error) {
	_ = fc.call(ctx)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	resp := &contentapi.ListStatusesResponse{}
	for _, st := range fc.ingests {
		resp.Statuses = append(resp.Statuses, &contentapi.Status{Ref: st.GetRef(), Offset: st.GetOffset(), Total: st.GetTotal()})
	}
	return resp, nil
}

// namespacesSeen lists the namespaces of the calls, sorted.
func (fc *fakeContent) namespacesSeen() []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []string
	for ns := range fc.namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

func newContentStore(t *testing.T, sock, namespace string) *cri.ContentStore {
	t.Helper()
	cs, err := cri.NewContentStore(sock, namespace)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func sha256Digest(t *testing.T, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	_, err := io.Copy(h, r)
	require.NoError(t, err)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func TestContentStoreReadAt(t *testing.T) {
	ctx := context.Background()
	bc, sock := startFakeContent(t)
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyz") // 36 bytes
	d := bc.add(data)
	cs := newContentStore(t, sock, "")

	blob, err := cs.Open(ctx, d)
	require.NoError(t, err)
	t.Cleanup(func() { _ = blob.Close() })
	require.Equal(t, int64(len(data)), blob.Size())
	require.Equal(t, d, blob.Digest())

	for _, tc := range []struct {
		name    string
		off     int64
		n       int
		want    string
		wantEOF bool
	}{
		{name: "whole blob", off: 0, n: 36, want: string(data)},
		{name: "middle, several chunks", off: 5, n: 20, want: string(data[5:25])},
		{name: "one byte", off: 35, n: 1, want: "z"},
		{name: "up to the end exactly", off: 30, n: 6, want: string(data[30:])},
		{name: "past the end: short with EOF", off: 30, n: 10, want: string(data[30:]), wantEOF: true},
		{name: "at the end", off: 36, n: 4, wantEOF: true},
		{name: "beyond the end", off: 100, n: 4, wantEOF: true},
		{name: "empty buffer", off: 3, n: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.n)
			n, err := blob.ReadAt(p, tc.off)
			if tc.wantEOF {
				require.ErrorIs(t, err, io.EOF)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, string(p[:n]))
		})
	}
	t.Run("negative offset", func(t *testing.T) {
		_, err := blob.ReadAt(make([]byte, 1), -1)
		require.ErrorContains(t, err, "negative offset")
	})
	t.Run("as a section reader", func(t *testing.T) {
		require.Equal(t, d, sha256Digest(t, io.NewSectionReader(blob, 0, blob.Size())))
	})
	t.Run("blob gone from the store", func(t *testing.T) {
		gone := bc.add([]byte("short-lived"))
		b, err := cs.Open(ctx, gone)
		require.NoError(t, err)
		bc.remove(gone)
		_, err = b.ReadAt(make([]byte, 4), 0)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("closed", func(t *testing.T) {
		b, err := cs.Open(ctx, d)
		require.NoError(t, err)
		require.NoError(t, b.Close())
		_, err = b.ReadAt(make([]byte, 4), 0)
		require.ErrorIs(t, err, fs.ErrClosed)
	})
	t.Run("context of Open ended", func(t *testing.T) {
		octx, cancel := context.WithCancel(ctx)
		b, err := cs.Open(octx, d)
		require.NoError(t, err)
		cancel()
		_, err = b.ReadAt(make([]byte, 4), 0)
		require.Equal(t, codes.Canceled, status.Code(err), "%v", err)
	})
	require.Equal(t, []string{cri.ContainerdNamespace}, bc.namespacesSeen())
}

func TestContentStoreOpenAndHas(t *testing.T) {
	ctx := context.Background()
	bc, sock := startFakeContent(t)
	present := bc.add([]byte("present"))
	const absent = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

	for _, tc := range []struct {
		name      string
		namespace string
		infoErr   error
		digest    string
		has       bool
		notExist  bool
		errSubstr string
	}{
		{name: "present", digest: present, has: true},
		{name: "absent", digest: absent, notExist: true},
		{name: "other namespace is sent", namespace: "moby", digest: present, has: true},
		{name: "containerd failing is not absence", infoErr: status.Error(codes.Unavailable, "shutting down"), digest: present, errSubstr: "shutting down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bc.mu.Lock()
			bc.infoErr = tc.infoErr
			bc.namespaces = map[string]bool{}
			bc.mu.Unlock()
			cs := newContentStore(t, "unix://"+sock, tc.namespace)

			has, err := cs.Has(ctx, tc.digest)
			blob, openErr := cs.Open(ctx, tc.digest)
			switch {
			case tc.errSubstr != "":
				require.ErrorContains(t, err, tc.errSubstr)
				require.ErrorContains(t, openErr, tc.errSubstr)
				require.NotErrorIs(t, openErr, fs.ErrNotExist)
			case tc.notExist:
				require.NoError(t, err)
				require.False(t, has)
				require.ErrorIs(t, openErr, fs.ErrNotExist)
				require.ErrorContains(t, openErr, tc.digest)
			default:
				require.NoError(t, err)
				require.Equal(t, tc.has, has)
				require.NoError(t, openErr)
				require.NoError(t, blob.Close())
			}
			want := tc.namespace
			if want == "" {
				want = cri.ContainerdNamespace
			}
			require.Equal(t, []string{want}, bc.namespacesSeen())
		})
	}
	t.Run("no socket path", func(t *testing.T) {
		_, err := cri.NewContentStore("", "")
		require.Error(t, err)
	})
}

// statusRuntime is the fake runtime service under a runtime name, whose
// Status returns info (or err).
type statusRuntime struct {
	namedRuntime
	info    map[string]string
	err     error
	verbose []bool
}

// Status implements the runtime service.
func (s *statusRuntime) Status(_ context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	s.verbose = append(s.verbose, verbose)
	if s.err != nil {
		return nil, s.err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}, Info: s.info}, nil
}

// criConfig16 is the "config" of a containerd 1.6's verbose CRI Status,
// shortened (the fields around the two the agent reads are kept).
const criConfig16 = `{"containerd":{"snapshotter":"overlayfs","defaultRuntimeName":"runc","defaultRuntime":{"runtimeType":"","runtimePath":"","runtimeEngine":"","PodAnnotations":null,"ContainerAnnotations":null,"runtimeRoot":"","options":null,"privileged_without_host_devices":false,"baseRuntimeSpec":"","cniConfDir":"","cniMaxConfNum":0},"runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"SystemdCgroup":true}}},"noPivot":false,"disableSnapshotAnnotations":true,"discardUnpackedLayers":%t,"ignoreRdtNotEnabledErrors":false},"cni":{"binDir":"/opt/cni/bin","confDir":"/etc/cni/net.d","maxConfNum":1,"confTemplate":"","ipPref":""},"registry":{"configPath":%q,"mirrors":null,"configs":null,"auths":null,"headers":null},"imageDecryption":{"keyModel":"node"},"disableTCPService":true,"streamServerAddress":"127.0.0.1","streamServerPort":"0","sandboxImage":"registry.k8s.io/pause:3.6","maxConcurrentDownloads":3,"containerdRootDir":"/var/lib/containerd","containerdEndpoint":"/run/containerd/containerd.sock","rootDir":"/var/lib/containerd/io.containerd.grpc.v1.cri","stateDir":"/run/containerd/io.containerd.grpc.v1.cri"}`

func TestRegistryConfig(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		runtime   string
		info      map[string]string
		err       error
		want      cri.RegistryConfig
		errSubstr string
		noCall    bool
	}{
		{
			name:    "containerd 1.6",
			runtime: cri.RuntimeContainerd,
			info:    map[string]string{"config": fmt.Sprintf(criConfig16, false, "/etc/containerd/certs.d"), "golang": `"go1.19.9"`},
			want:    cri.RegistryConfig{ConfigPath: "/etc/containerd/certs.d", Known: true},
		},
		{
			name:    "discard_unpacked_layers on, no config_path",
			runtime: cri.RuntimeContainerd,
			info:    map[string]string{"config": fmt.Sprintf(criConfig16, true, "")},
			want:    cri.RegistryConfig{DiscardUnpackedLayers: true, Known: true},
		},
		{
			name:    "several config paths",
			runtime: cri.RuntimeContainerd,
			info:    map[string]string{"config": fmt.Sprintf(criConfig16, false, "/etc/containerd/certs.d:/etc/docker/certs.d")},
			want:    cri.RegistryConfig{ConfigPath: "/etc/containerd/certs.d:/etc/docker/certs.d", Known: true},
		},
		{
			name:    "no config in the info",
			runtime: cri.RuntimeContainerd,
			info:    map[string]string{"golang": `"go1.22"`},
		},
		{
			name:    "no info at all",
			runtime: cri.RuntimeContainerd,
		},
		{
			name:    "config without the registry settings (containerd 2.x)",
			runtime: cri.RuntimeContainerd,
			info:    map[string]string{"config": `{"containerd":{"defaultRuntimeName":"runc"},"cni":{},"containerdRootDir":"/var/lib/containerd"}`},
		},
		{
			name:    "registry without containerd section",
			runtime: cri.RuntimeContainerd,
			info:    map[string]string{"config": `{"registry":{"configPath":"/etc/containerd/certs.d"}}`},
		},
		{
			name:    "not containerd: not asked",
			runtime: "cri-o",
			info:    map[string]string{"config": fmt.Sprintf(criConfig16, false, "/x")},
			noCall:  true,
		},
		{
			name:      "malformed config",
			runtime:   cri.RuntimeContainerd,
			info:      map[string]string{"config": `{"registry":`},
			errSubstr: "parse the CRI config",
		},
		{
			name:      "Status fails",
			runtime:   cri.RuntimeContainerd,
			err:       errors.New("rpc error: unavailable"),
			errSubstr: "unavailable",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &statusRuntime{namedRuntime: namedRuntime{FakeRuntimeService: apitest.NewFakeRuntimeService(), name: tc.runtime}, info: tc.info, err: tc.err}
			rt, err := cri.NewRuntime(ctx, cri.Endpoint{Name: tc.runtime, Address: "unix:///run/test.sock"}, rs, apitest.NewFakeImageService())
			require.NoError(t, err)
			got, err := rt.RegistryConfig(ctx)
			if tc.errSubstr != "" {
				require.ErrorContains(t, err, tc.errSubstr)
				require.ErrorContains(t, err, "unix:///run/test.sock")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			if tc.noCall {
				require.Empty(t, rs.verbose)
			} else {
				require.Equal(t, []bool{true}, rs.verbose, "one verbose Status")
			}
		})
	}
}

// Integration test: a private containerd (internal/containerdtest) pulls
// an image from an in-process registry; the agent's mirror entry is
// installed ahead of the registry's own hosts.toml entry, and the blobs
// containerd committed are then read back through a ContentStore.

// recordingProxy forwards to the registry at host and records the paths
// and ns parameters of the requests it gets: a stand-in for the agent's
// mirror endpoint.
type recordingProxy struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func startRecordingProxy(t *testing.T, host string) *recordingProxy {
	t.Helper()
	p := &recordingProxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, req.Method+" "+req.URL.Path+" ns="+req.URL.Query().Get("ns"))
		p.mu.Unlock()
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *recordingProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

func TestContentStoreWithContainerd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a containerd")
	}
	_, ctx := ktesting.NewTestContext(t)
	reg := startRegistry(t, "", "")
	// The cluster's own config for the plain-HTTP registry, then the
	// agent's entry put ahead of it.
	c := containerdtest.Start(t, containerdtest.Options{PlainHTTPRegistries: []string{reg.host}})
	regHosts := filepath.Join(c.CertsDir, reg.host, mirror.FileName)
	proxy := startRecordingProxy(t, reg.host)
	changed, err := mirror.Install(c.CertsDir, mirror.Mirror{Registry: reg.host, Endpoint: proxy.url})
	require.NoError(t, err)
	require.True(t, changed)

	rt := c.Connect(ctx, t)
	require.Equal(t, cri.RuntimeContainerd, rt.Name())
	t.Logf("containerd %s, registry %s, mirror %s", rt.Version(), reg.host, proxy.url)

	img := randomImage(t, 300<<10, 2)
	ref := reg.push(t, "shoal/content:1", img)
	_, err = rt.PullImage(ctx, ref, nil, nil)
	require.NoError(t, err)
	m, err := img.Manifest()
	require.NoError(t, err)

	blobGETs := func(from int) []string {
		var out []string
		for _, r := range proxy.requests()[from:] {
			if strings.HasPrefix(r, "GET ") && strings.Contains(r, "/blobs/") {
				out = append(out, r)
			}
		}
		return out
	}
	t.Run("the agent's host is tried first", func(t *testing.T) {
		// Pull-only: the tag is resolved at the registry's own host, the
		// blobs come through the mirror, with the registry as ns.
		gets := blobGETs(0)
		require.Len(t, gets, 1+len(m.Layers), "config and layers through the mirror: %v", proxy.requests())
		for _, r := range gets {
			require.True(t, strings.HasSuffix(r, " ns="+reg.host), r)
		}
	})
	t.Run("control: a host table after the registry's is not tried", func(t *testing.T) {
		// Same block, below the registry's own host: containerd goes by
		// the tables' order, so the registry's host serves everything.
		data, err := os.ReadFile(regHosts)
		require.NoError(t, err)
		i, j := strings.Index(string(data), mirror.BeginMarker), strings.Index(string(data), mirror.EndMarker)
		block := string(data[i : j+len(mirror.EndMarker)+1])
		require.NoError(t, os.WriteFile(regHosts, []byte(strings.Replace(string(data), block, "", 1)+block), 0o644))
		t.Cleanup(func() { require.NoError(t, os.WriteFile(regHosts, data, 0o644)) })
		from := len(proxy.requests())
		_, err = rt.PullImage(ctx, reg.push(t, "shoal/content:2", randomImage(t, 10<<10, 1)), nil, nil)
		require.NoError(t, err)
		require.Empty(t, blobGETs(from))
	})

	t.Run("committed layers read back", func(t *testing.T) {
		cs := newContentStore(t, c.Socket, "")
		for _, l := range m.Layers {
			has, err := cs.Has(ctx, l.Digest.String())
			require.NoError(t, err)
			require.True(t, has)
			blob, err := cs.Open(ctx, l.Digest.String())
			require.NoError(t, err)
			require.Equal(t, l.Size, blob.Size())
			whole := make([]byte, blob.Size())
			n, err := blob.ReadAt(whole, 0)
			require.NoError(t, err)
			require.Equal(t, len(whole), n)
			sum := sha256.Sum256(whole)
			require.Equal(t, l.Digest.String(), "sha256:"+hex.EncodeToString(sum[:]))
			// In odd-sized pieces too, and a read past the end.
			require.Equal(t, l.Digest.String(), sha256Digest(t, bufio.NewReaderSize(io.NewSectionReader(blob, 0, blob.Size()), 100_003)))
			tail := make([]byte, 64)
			n, err = blob.ReadAt(tail, blob.Size()-10)
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, whole[len(whole)-10:], tail[:n])
			require.NoError(t, blob.Close())
		}
		const absent = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
		_, err := cs.Open(ctx, absent)
		require.ErrorIs(t, err, fs.ErrNotExist)
		has, err := cs.Has(ctx, absent)
		require.NoError(t, err)
		require.False(t, has)
		_, err = newContentStore(t, c.Socket, "no-such-namespace").Open(ctx, m.Layers[0].Digest.String())
		require.ErrorIs(t, err, fs.ErrNotExist, "blobs are per namespace")
	})

	t.Run("registry config", func(t *testing.T) {
		rc, err := rt.RegistryConfig(ctx)
		require.NoError(t, err)
		require.Equal(t, cri.RegistryConfig{ConfigPath: c.CertsDir, Known: true}, rc)
	})
}
