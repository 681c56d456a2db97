package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushIndex pushes idx and its images to ref (registry/repository:tag) over
// plain HTTP, without any proxy, unless ref already names an index of the
// same digest.
func pushIndex(ctx context.Context, idx v1.ImageIndex, ref string) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	want, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // a development registry: never through a proxy
	defer transport.CloseIdleConnections()
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(transport)}

	// Any error here means the index is to be pushed: a registry that
	// cannot be reached fails the push below with a clearer error.
	if desc, err := remote.Head(r, opts...); err == nil && desc.Digest == want {
		return nil
	}
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
