package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"
)

// warmParallelism is how many blobs of one image are fetched at once.
const warmParallelism = 4

// resolveAttempts bounds the tries of a manifest resolve that fails with a
// transient error (429, 5xx, a connection error): about 20 s in all.
const resolveAttempts = 6

// transient reports whether a registry error is worth retrying: a 429 or
// 5xx status, or no HTTP answer at all.
func transient(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Image is an image Warm resolved and fetched.
type Image struct {
	// Digest is the manifest's digest for the node's platform.
	Digest v1.Hash
	// Blobs are its config and layers, each present and verified in the
	// store (or the runtime's content store) when Warm returns.
	Blobs []v1.Descriptor
}

// Size is the sum of the image's blob sizes.
func (i Image) Size() int64 {
	var n int64
	for _, b := range i.Blobs {
		n += b.Size
	}
	return n
}

// Resolve resolves image upstream with auth (nil: anonymous): tags and
// manifests only ever come from the registry, so content is trusted by
// the digests the registry named. It picks the node's platform in an
// index.
func (n *Node) Resolve(ctx context.Context, image string, auth authn.Authenticator) (Image, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return Image{}, fmt.Errorf("parse image reference %q: %w", image, err)
	}
	if n.insecure(ref.Context().RegistryStr()) {
		if ref, err = name.ParseReference(image, name.Insecure); err != nil {
			return Image{}, fmt.Errorf("parse image reference %q: %w", image, err)
		}
	}
	if auth == nil {
		auth = authn.Anonymous
	}
	tr := n.cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	var img v1.Image
	for attempt := 1; ; attempt++ {
		img, err = remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(tr),
			remote.WithPlatform(n.cfg.Platform))
		if err == nil {
			break
		}
		if attempt >= resolveAttempts || !transient(err) {
			return Image{}, fmt.Errorf("resolve %s: %w", image, err)
		}
		wait := time.Duration(1<<min(attempt-1, 3)) * 500 * time.Millisecond
		n.log.V(2).Info("Resolving failed; retrying", "image", image, "attempt", attempt, "after", wait, "err", err.Error())
		select {
		case <-ctx.Done():
			return Image{}, fmt.Errorf("resolve %s: %w", image, ctx.Err())
		case <-time.After(wait):
		}
	}
	m, err := img.Manifest()
	if err != nil {
		return Image{}, fmt.Errorf("resolve %s: manifest: %w", image, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Image{}, fmt.Errorf("resolve %s: digest: %w", image, err)
	}
	out := Image{Digest: d, Blobs: append([]v1.Descriptor{m.Config}, m.Layers...)}
	return out, nil
}

// Warm resolves image upstream (see Resolve) and fetches all its blobs
// into the store through the swarm, remembering auth for the runtime's own
// requests of the same repository while it pulls.
func (n *Node) Warm(ctx context.Context, image string, auth authn.Authenticator) (Image, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return Image{}, fmt.Errorf("parse image reference %q: %w", image, err)
	}
	// Remembered first: the runtime's own requests for the blobs may
	// reach the mirror before the manifest is resolved.
	o := n.origin(ref.Context().RegistryStr(), ref.Context().RepositoryStr())
	if auth != nil {
		o.Auth = auth
		n.remember(o)
	}
	img, err := n.Resolve(ctx, image, auth)
	if err != nil {
		return Image{}, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(warmParallelism)
	for _, b := range img.Blobs {
		if n.cfg.Runtime != nil {
			if has, err := n.cfg.Runtime.Has(ctx, b.Digest); err == nil && has {
				continue
			}
		}
		g.Go(func() error { return n.fetcher.Fetch(gctx, b, o) })
	}
	if err := g.Wait(); err != nil {
		return img, fmt.Errorf("warm %s: %w", image, err)
	}
	return img, nil
}
