package cri

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Defaults of a ContentMeter.
const (
	// ContainerdNamespace is the containerd namespace of the CRI plugin,
	// where the kubelet's (and the agent's) pulls land.
	ContainerdNamespace = "k8s.io"
	// defaultResolveTimeout bounds resolving the image's blobs from the
	// registry.
	defaultResolveTimeout = 30 * time.Second
	// defaultSampleTimeout bounds one Sample's calls to the content store.
	defaultSampleTimeout = 5 * time.Second
	// defaultContentWait bounds the wait for containerd to have fetched a
	// manifest the meter wants to read.
	defaultContentWait = 20 * time.Second
	// contentPoll is how often the content store is asked for a manifest
	// while the meter waits for it.
	contentPoll = 100 * time.Millisecond
	// maxManifestBytes bounds a manifest read (registries limit them to
	// 4 MiB).
	maxManifestBytes = 4 << 20
)

// PullBytes is how far an image pull has come, in bytes of the image's
// blobs as the registry serves them (compressed layers, config and
// manifests).
type PullBytes struct {
	// Done counts the bytes already in the runtime's content store, whole
	// blobs and the written part of blobs being downloaded.
	Done int64
	// Total is the size of every blob of the image for the node's
	// platform; 0 while unknown.
	Total int64
}

// PullMeter measures image pulls while they run. ContentMeter is the real
// one; tests of pull handlers give them a fake.
type PullMeter interface {
	// Watch starts measuring a pull of image through rt. auths are the
	// credentials the pull may use, in order (none: anonymous). Measuring
	// never fails a pull: what cannot be measured reads as 0. The caller
	// must Close the watch when the pull has ended.
	Watch(ctx context.Context, rt *Runtime, image string, auths []*runtimeapi.AuthConfig) PullWatch
}

// PullWatch measures one pull.
type PullWatch interface {
	// Sample returns the pull's progress now. It may ask the runtime and
	// is meant to be called at most about once a second.
	Sample(ctx context.Context) PullBytes
	// Close stops measuring and releases the watch's connections.
	Close()
}

// ContentMeter measures pulls from two sides. The total comes from the
// image's manifests, resolved with go-containerregistry for the node's
// platform (index, manifest, config and layer sizes), with the pull's
// credentials, over plain HTTP for loopback and RFC 1918 registries: the
// reference is resolved with a HEAD, and the manifests themselves are read
// from containerd's content store once containerd has fetched them, so the
// meter costs no manifest GET (Docker Hub counts those against its pull
// limits); only without containerd, or when a manifest does not show up
// there, are they fetched from the registry. What is done comes from
// containerd's content store, reached over the CRI socket (containerd
// serves its own API there, namespace "k8s.io"): a blob the store has
// counts whole, a blob being written counts its written offset. When the
// registry cannot be reached (a mirror-only registry, say) the total stays
// 0; when the runtime is not containerd, done stays 0.
type ContentMeter struct {
	platform       v1.Platform
	transport      http.RoundTripper
	resolveTimeout time.Duration
	sampleTimeout  time.Duration
	contentWait    time.Duration
}

// ContentMeterOption configures a ContentMeter.
type ContentMeterOption func(*ContentMeter)

// WithPlatform sets the platform whose manifest is resolved from an image
// index (default: the agent binary's GOOS and GOARCH, no variant).
func WithPlatform(p v1.Platform) ContentMeterOption {
	return func(m *ContentMeter) { m.platform = p }
}

// WithRegistryTransport sets the HTTP transport used to reach registries
// (default: go-containerregistry's remote.DefaultTransport).
func WithRegistryTransport(t http.RoundTripper) ContentMeterOption {
	return func(m *ContentMeter) { m.transport = t }
}

// WithResolveTimeout bounds resolving an image's blobs from its registry
// (default 30 s).
func WithResolveTimeout(d time.Duration) ContentMeterOption {
	return func(m *ContentMeter) {
		if d > 0 {
			m.resolveTimeout = d
		}
	}
}

// WithContentWait bounds the wait for containerd to have fetched a
// manifest before the registry is asked for it instead (default 20 s).
func WithContentWait(d time.Duration) ContentMeterOption {
	return func(m *ContentMeter) {
		if d > 0 {
			m.contentWait = d
		}
	}
}

// NewContentMeter returns a ContentMeter.
func NewContentMeter(opts ...ContentMeterOption) *ContentMeter {
	m := &ContentMeter{
		platform:       v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH},
		transport:      remote.DefaultTransport,
		resolveTimeout: defaultResolveTimeout,
		sampleTimeout:  defaultSampleTimeout,
		contentWait:    defaultContentWait,
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// blob is one blob of an image.
type blob struct {
	digest string
	size   int64
}

// contentWatch is one pull measured by a ContentMeter.
type contentWatch struct {
	m      *ContentMeter
	cancel context.CancelFunc
	done   chan struct{} // closed when resolving has ended

	store *ContentStore // nil: done is not measured

	mu        sync.Mutex
	blobs     []blob // nil until resolved
	total     int64
	committed map[string]bool
	last      int64 // the last done measured
}

// Watch implements PullMeter.
func (m *ContentMeter) Watch(ctx context.Context, rt *Runtime, image string, auths []*runtimeapi.AuthConfig) PullWatch {
	log := klog.FromContext(ctx).WithValues("image", image)
	ctx, cancel := context.WithCancel(ctx)
	w := &contentWatch{m: m, cancel: cancel, done: make(chan struct{}), committed: map[string]bool{}}
	if rt != nil && rt.Name() == RuntimeContainerd {
		store, err := NewContentStore(rt.Endpoint().Path(), "")
		if err != nil {
			log.V(2).Info("Pull progress: cannot reach containerd's content store", "err", err.Error())
		} else {
			w.store = store
		}
	}
	store := w.store // the resolver's own copy: Sample may drop w.store
	go func() {
		defer close(w.done)
		rctx, rcancel := context.WithTimeout(ctx, m.resolveTimeout)
		defer rcancel()
		blobs, err := m.resolve(rctx, store, image, auths)
		if err != nil {
			log.V(2).Info("Pull progress: image size unknown", "err", err.Error())
			return
		}
		var total int64
		for _, b := range blobs {
			total += b.size
		}
		w.mu.Lock()
		w.blobs, w.total = blobs, total
		w.mu.Unlock()
		log.V(4).Info("Pull progress: image resolved", "blobs", len(blobs), "bytes", total)
	}()
	return w
}

// Sample implements PullWatch.
func (w *contentWatch) Sample(ctx context.Context) PullBytes {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.blobs == nil {
		return PullBytes{}
	}
	if w.store == nil {
		return PullBytes{Total: w.total}
	}
	ctx, cancel := context.WithTimeout(ctx, w.m.sampleTimeout)
	defer cancel()
	done, err := w.measure(ctx)
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Pull progress: content store not readable", "err", err.Error())
		if code := status.Code(err); code == codes.Unimplemented || code == codes.PermissionDenied {
			// Not a content store this agent can read: stop asking.
			_ = w.store.Close()
			w.store = nil
			return PullBytes{Total: w.total}
		}
		done = w.last
	}
	w.last = done
	return PullBytes{Done: done, Total: w.total}
}

// measure sums the committed blobs and the written part of those being
// written. Callers hold w.mu.
func (w *contentWatch) measure(ctx context.Context) (int64, error) {
	var done int64
	var pending []blob
	for _, b := range w.blobs {
		if w.committed[b.digest] {
			done += b.size
			continue
		}
		has, err := w.store.Has(ctx, b.digest)
		switch {
		case err != nil:
			return 0, err
		case has:
			w.committed[b.digest] = true
			done += b.size
		default:
			pending = append(pending, b)
		}
	}
	if len(pending) == 0 {
		return done, nil
	}
	ingests, err := w.store.Ingests(ctx)
	if err != nil {
		return 0, err
	}
	for _, b := range pending {
		var best int64
		for _, in := range ingests {
			// containerd's ingest refs name the blob, e.g.
			// "layer-sha256:<hex>".
			if strings.Contains(in.Ref, b.digest) {
				best = max(best, min(in.Offset, b.size))
			}
		}
		done += best
	}
	return done, nil
}

// Close implements PullWatch.
func (w *contentWatch) Close() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.store != nil {
		_ = w.store.Close()
		w.store = nil
	}
}

// Authenticator turns a CRI credential into a registry client's: what the
// runtime would send the registry, for the agent's own registry calls.
func Authenticator(a *runtimeapi.AuthConfig) authn.Authenticator {
	return authn.FromConfig(authn.AuthConfig{
		Username: a.GetUsername(), Password: a.GetPassword(), Auth: a.GetAuth(),
		IdentityToken: a.GetIdentityToken(), RegistryToken: a.GetRegistryToken(),
	})
}

// resolve lists the blobs a pull of image fetches on m's platform, trying
// the credentials in order (anonymous when there are none). store, when
// not nil, is containerd's content store.
func (m *ContentMeter) resolve(ctx context.Context, store *ContentStore, image string, auths []*runtimeapi.AuthConfig) ([]blob, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("parse image reference %q: %w", image, err)
	}
	authenticators := []authn.Authenticator{authn.Anonymous}
	if len(auths) > 0 {
		authenticators = authenticators[:0]
		for _, a := range auths {
			authenticators = append(authenticators, Authenticator(a))
		}
	}
	var errs []error
	for _, a := range authenticators {
		opts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(a), remote.WithTransport(m.transport)}
		// A HEAD: registries such as Docker Hub count manifest GETs, not
		// HEADs, against their pull limits.
		top, err := remote.Head(ref, opts...)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		blobs, err := m.blobsOf(ctx, store, ref.Context(), *top, opts)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", image, err)
		}
		return blobs, nil
	}
	return nil, fmt.Errorf("resolve %s: %w", image, errors.Join(errs...))
}

// blobsOf lists the blobs of the image top describes: the index (if top
// is one), the platform's manifest, its config and its distributable
// layers, each digest once.
func (m *ContentMeter) blobsOf(ctx context.Context, store *ContentStore, repo name.Repository, top v1.Descriptor, opts []remote.Option) ([]blob, error) {
	var out []blob
	seen := map[string]bool{}
	add := func(d v1.Hash, size int64) {
		if !seen[d.String()] {
			seen[d.String()] = true
			out = append(out, blob{digest: d.String(), size: size})
		}
	}
	add(top.Digest, top.Size)
	raw, err := m.manifest(ctx, store, repo, top.Digest, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case top.MediaType.IsIndex():
		idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("parse index %s: %w", top.Digest, err)
		}
		child, ok := m.pick(idx.Manifests)
		if !ok {
			return nil, fmt.Errorf("index %s has no image for %s", top.Digest, m.platform)
		}
		add(child.Digest, child.Size)
		if raw, err = m.manifest(ctx, store, repo, child.Digest, opts); err != nil {
			return nil, err
		}
	case top.MediaType.IsImage():
	default:
		return nil, fmt.Errorf("unsupported manifest media type %q", top.MediaType)
	}
	mf, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	add(mf.Config.Digest, mf.Config.Size)
	for _, l := range mf.Layers {
		if l.MediaType.IsDistributable() {
			add(l.Digest, l.Size)
		}
	}
	return out, nil
}

// pick returns the first image of an index for m's platform (a child
// without a platform counts as linux/amd64).
func (m *ContentMeter) pick(children []v1.Descriptor) (v1.Descriptor, bool) {
	for _, c := range children {
		p := v1.Platform{OS: "linux", Architecture: "amd64"}
		if c.Platform != nil {
			p = *c.Platform
		}
		if c.MediaType.IsImage() && p.Satisfies(m.platform) {
			return c, true
		}
	}
	return v1.Descriptor{}, false
}

// manifest returns the manifest (or index) d. containerd fetches manifests
// first thing in a pull, so with its content store they are read from
// there, waiting for them a little, rather than fetched from the registry
// once more; the registry is the fallback.
func (m *ContentMeter) manifest(ctx context.Context, store *ContentStore, repo name.Repository, d v1.Hash, opts []remote.Option) ([]byte, error) {
	if store != nil {
		raw, err := m.readContent(ctx, store, d.String())
		if err == nil {
			return raw, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		klog.FromContext(ctx).V(4).Info("Pull progress: manifest not in the content store; asking the registry", "digest", d.String(), "err", err.Error())
	}
	desc, err := remote.Get(repo.Digest(d.String()), opts...)
	if err != nil {
		return nil, err
	}
	return desc.Manifest, nil
}

// readContent reads blob digest from containerd's content store, waiting
// up to m.contentWait for it to be there.
func (m *ContentMeter) readContent(ctx context.Context, store *ContentStore, digest string) ([]byte, error) {
	wait := time.NewTimer(m.contentWait)
	defer wait.Stop()
	for {
		blob, err := store.Open(ctx, digest)
		if err == nil {
			defer func() { _ = blob.Close() }()
			if size := blob.Size(); size > maxManifestBytes {
				return nil, fmt.Errorf("manifest %s of %d bytes is too large", digest, size)
			}
			// The whole blob in one ReadAt: one Read call of the content
			// service.
			raw := make([]byte, blob.Size())
			if _, err := blob.ReadAt(raw, 0); err != nil {
				return nil, err
			}
			return raw, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		poll := time.NewTimer(contentPoll)
		select {
		case <-ctx.Done():
			poll.Stop()
			return nil, ctx.Err()
		case <-wait.C:
			poll.Stop()
			return nil, fmt.Errorf("%s did not reach the content store within %s", digest, m.contentWait)
		case <-poll.C:
		}
	}
}
