package images

import (
	"context"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/shoal-io/shoal/internal/ociimage"
)

// The repositories and tags BuildAndPushAll pushes, relative to the
// registry.
const (
	PauseRef      = "pause:3.10"
	BusyboxRef    = "busybox:latest"
	TestserverRef = "testserver:latest"
	// TestserverV2Ref is TestserverV2: testserver under another digest.
	TestserverV2Ref = "testserver:v2"
)

// BuildAndPushAll builds the pause, busybox and testserver images for this
// machine's architecture and pushes them to registry (host:port) as
// PauseRef, BusyboxRef, TestserverRef and TestserverV2Ref. The testserver binary is built
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
		{TestserverV2Ref, TestserverV2, binary},
	}
	for _, b := range builds {
		img, err := b.build(b.input)
		if err != nil {
			return err
		}
		if err := ociimage.Push(ctx, registry+"/"+b.ref, img); err != nil {
			return err
		}
	}
	return nil
}
