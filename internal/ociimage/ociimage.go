// Package ociimage holds what Shoal's two image builders share — the local
// cluster's test images (test/cluster/images) and the release images
// (hack/build-images): reproducible single-layer contents and pushing to a
// plain-HTTP development registry.
package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of an image layer.
type File struct {
	// Name is the path in the image, without a leading slash; directories
	// end in a slash.
	Name string
	// Typeflag is the tar entry type (tar.TypeReg, TypeDir, TypeSymlink).
	Typeflag byte
	// Mode is the permission bits.
	Mode int64
	// Linkname is a symlink's target.
	Linkname string
	// Data is a regular file's content.
	Data []byte
}

// Regular is a regular file.
func Regular(name string, mode int64, data []byte) File {
	return File{Name: name, Typeflag: tar.TypeReg, Mode: mode, Data: data}
}

// Dir is a directory (name without the trailing slash).
func Dir(name string, mode int64) File {
	return File{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode}
}

// Symlink is a symbolic link to target.
func Symlink(name, target string) File {
	return File{Name: name, Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: target}
}

// Layer returns a gzip-compressed OCI layer of files, built in memory with
// fixed timestamps and root ownership: the same files give the same digest.
func Layer(files []File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name:     f.Name,
			Typeflag: f.Typeflag,
			Mode:     f.Mode,
			Linkname: f.Linkname,
			Size:     int64(len(f.Data)),
			ModTime:  time.Unix(0, 0),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer: write %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("layer: write %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return layer, nil
}

// Push pushes an image (v1.Image) or an index (v1.ImageIndex) to ref
// (registry/repository:tag) over plain HTTP and never through a proxy (a
// development registry), unless ref already names content of the same
// digest.
func Push(ctx context.Context, ref string, content interface{ Digest() (v1.Hash, error) }) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	want, err := content.Digest()
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	defer transport.CloseIdleConnections()
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(transport)}

	// Any error here means the content is to be pushed: a registry that
	// cannot be reached fails the push below with a clearer error.
	if desc, err := remote.Head(r, opts...); err == nil && desc.Digest == want {
		return nil
	}
	switch c := content.(type) {
	case v1.ImageIndex:
		err = remote.WriteIndex(r, c, opts...)
	case v1.Image:
		err = remote.Write(r, c, opts...)
	default:
		err = fmt.Errorf("cannot push a %T", content)
	}
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
