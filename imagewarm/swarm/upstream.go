package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Origin says where a blob comes from upstream.
type Origin struct {
	// Registry is the registry's host[:port] as in image references.
	Registry string
	// Repository is the repository within the registry.
	Repository string
	// Insecure reaches the registry over plain HTTP.
	Insecure bool
	// Auth authenticates to the registry; nil means anonymous.
	Auth authn.Authenticator
}

// String returns registry/repository.
func (o Origin) String() string { return o.Registry + "/" + o.Repository }

// Errors an Upstream returns (wrapped).
var (
	// ErrUnauthorized is a registry that refused the credentials (or their
	// absence): a mirror request answers it with a fast 404 so that the
	// runtime goes upstream with its own.
	ErrUnauthorized = errors.New("upstream refused the credentials")
	// ErrUpstreamNotFound is a blob the registry does not have.
	ErrUpstreamNotFound = errors.New("blob not found upstream")
)

// RetryError is an upstream answer worth retrying after a while (429, 5xx).
type RetryError struct {
	// Status is the HTTP status.
	Status int
	// After is the registry's Retry-After, or 0.
	After time.Duration
}

// Error implements error.
func (e *RetryError) Error() string {
	return fmt.Sprintf("upstream answered %d %s (retry after %s)", e.Status, http.StatusText(e.Status), e.After)
}

// Upstream reads blobs from their registry.
type Upstream interface {
	// Open returns the bytes of blob d from offset off to its end.
	Open(ctx context.Context, o Origin, d v1.Hash, off int64) (io.ReadCloser, error)
	// Size returns blob d's size in bytes (a HEAD).
	Size(ctx context.Context, o Origin, d v1.Hash) (int64, error)
}

// Registry is the Upstream that talks to OCI registries with
// go-containerregistry's transport (token and basic auth, pinging once per
// registry and repository). It is safe for concurrent use.
type Registry struct {
	// Transport is the base transport; nil means http.DefaultTransport.
	Transport http.RoundTripper

	mu    sync.Mutex
	trans map[transportKey]http.RoundTripper
}

// transportKey identifies an authenticated transport: one per origin and
// credential.
type transportKey struct {
	registry, repository string
	insecure             bool
	auth                 authn.Authenticator
}

// maxCachedTransports bounds the cache of authenticated transports.
const maxCachedTransports = 256

// roundTripper returns the authenticated transport for o, creating it (a
// registry ping and, for token auth, a token request) on first use.
func (r *Registry) roundTripper(ctx context.Context, o Origin) (http.RoundTripper, error) {
	key := keyOf(o)
	auth := key.auth
	r.mu.Lock()
	t, ok := r.trans[key]
	r.mu.Unlock()
	if ok {
		return t, nil
	}
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(o.Registry+"/"+o.Repository, opts...)
	if err != nil {
		return nil, fmt.Errorf("upstream repository %q: %w", o.String(), err)
	}
	base := r.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t, err = transport.NewWithContext(ctx, repo.Registry, auth, base, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, classify(fmt.Errorf("reach registry %s: %w", o.Registry, err))
	}
	r.mu.Lock()
	if r.trans == nil || len(r.trans) >= maxCachedTransports {
		r.trans = map[transportKey]http.RoundTripper{}
	}
	r.trans[key] = t
	r.mu.Unlock()
	return t, nil
}

// forget drops o's cached transport (after a 401: the token may have
// expired).
func (r *Registry) forget(o Origin) {
	r.mu.Lock()
	delete(r.trans, keyOf(o))
	r.mu.Unlock()
}

// keyOf returns o's transport key (anonymous when o has no credentials).
func keyOf(o Origin) transportKey {
	auth := o.Auth
	if auth == nil {
		auth = authn.Anonymous
	}
	return transportKey{o.Registry, o.Repository, o.Insecure, auth}
}

// blobURL returns o's URL for blob d.
func blobURL(o Origin, d v1.Hash) string {
	scheme := "https"
	if o.Insecure {
		scheme = "http"
	}
	return fmt.Sprintf("%s://%s/v2/%s/blobs/%s", scheme, o.Registry, o.Repository, d)
}

// do sends a request for blob d and checks the status.
func (r *Registry) do(ctx context.Context, method string, o Origin, d v1.Hash, off int64) (*http.Response, error) {
	t, err := r.roundTripper(ctx, o)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, blobURL(o, d), nil)
	if err != nil {
		return nil, fmt.Errorf("upstream request for %s: %w", d, err)
	}
	if off > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
	}
	resp, err := (&http.Client{Transport: t}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("upstream %s %s: %w", method, blobURL(o, d), err)
	}
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent:
		return resp, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		r.forget(o)
		err = fmt.Errorf("upstream %s %s: %d: %w", method, blobURL(o, d), resp.StatusCode, ErrUnauthorized)
	case resp.StatusCode == http.StatusNotFound:
		err = fmt.Errorf("upstream %s %s: %w", method, blobURL(o, d), ErrUpstreamNotFound)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		err = fmt.Errorf("upstream %s %s: %w", method, blobURL(o, d),
			&RetryError{Status: resp.StatusCode, After: time.Duration(secs) * time.Second})
	default:
		err = fmt.Errorf("upstream %s %s: unexpected status %d", method, blobURL(o, d), resp.StatusCode)
	}
	_ = resp.Body.Close()
	return nil, err
}

// Open implements Upstream. A registry that ignores Range is handled by
// skipping the first off bytes.
func (r *Registry) Open(ctx context.Context, o Origin, d v1.Hash, off int64) (io.ReadCloser, error) {
	resp, err := r.do(ctx, http.MethodGet, o, d, off)
	if err != nil {
		return nil, err
	}
	if off > 0 && resp.StatusCode == http.StatusOK {
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("upstream %s: skip to offset %d: %w", d, off, err)
		}
	}
	return resp.Body, nil
}

// Size implements Upstream.
func (r *Registry) Size(ctx context.Context, o Origin, d v1.Hash) (int64, error) {
	resp, err := r.do(ctx, http.MethodHead, o, d, 0)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	if resp.ContentLength < 0 {
		return 0, fmt.Errorf("upstream HEAD %s: no Content-Length", blobURL(o, d))
	}
	return resp.ContentLength, nil
}

// classify maps a transport error's status to this package's errors.
func classify(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%w: %w", ErrUnauthorized, err)
		case te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500:
			return fmt.Errorf("%w: %w", &RetryError{Status: te.StatusCode, After: time.Second}, err)
		}
	}
	return err
}
