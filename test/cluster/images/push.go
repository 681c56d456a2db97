package images

import (
	"context"
	"fmt"
	"net/http"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The repositories and tags BuildAndPushAll pushes, relative to the
// registry.
const (
	PauseRef      = "pause:3.10"
	BusyboxRef    = "busybox:latest"
	TestserverRef = "testserver:latest"
)

// Push pushes img to ref (registry/repository:tag) over plain HTTP, without
// any proxy, unless ref already names an image of the same digest.
func Push(ctx context.Context, img v1.Image, ref string) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	want, err := img.Digest()
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // the registry is always on this machine
	defer transport.CloseIdleConnections()
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(transport)}

	// Any error here means the image is to be pushed: a registry that
	// cannot be reached fails the push below with a clearer error.
	if desc, err := remote.Head(r, opts...); err == nil && desc.Digest == want {
		return nil
	}
	if err := remote.Write(r, img, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// BuildAndPushAll builds the pause, busybox and testserver images for this
// machine's architecture and pushes them to registry (host:port) as
// PauseRef, BusyboxRef and TestserverRef. The testserver binary is built
// into cacheDir (see BuildGoBinary; the working directory must be inside
// this module) and busybox is taken from DefaultBusyboxPath. Images already
// in the registry with the same digest are not pushed again.
func BuildAndPushAll(ctx context.Context, registry, cacheDir string) error {
	binary, err := BuildGoBinary(ctx, TestserverPackage, runtime.GOARCH, "", cacheDir)
	if err != nil {
		return err
	}
	builds := []struct {
		ref   string
		build func(string) (v1.Image, error)
		input string
	}{
		{PauseRef, Pause, binary},
		{BusyboxRef, Busybox, DefaultBusyboxPath},
		{TestserverRef, Testserver, binary},
	}
	for _, b := range builds {
		img, err := b.build(b.input)
		if err != nil {
			return err
		}
		if err := Push(ctx, img, registry+"/"+b.ref); err != nil {
			return err
		}
	}
	return nil
}
