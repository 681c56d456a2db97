package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// program is one binary of cmd/ shipped as an image.
type program struct {
	// name is the directory under cmd/, the binary's name and the image's
	// repository under shoal/.
	name string
	// root makes the image run as root; otherwise it runs as nonroot
	// (nonrootUID).
	root bool
}

// programs are the images build-images makes. The agent runs as root: it
// talks to the container runtime's socket on the host.
var programs = []program{
	{name: "shoal-agent", root: true},
	{name: "shoal-coordinator"},
	{name: "kubectl-kruise"},
}

// nonrootUID is the user and group of the images that do not run as root
// (the deploy/ manifests pin the same id).
const nonrootUID = 65532

// binDir is where an image holds its binary.
const binDir = "usr/local/bin"

// defaultPath is the PATH of every image.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// programNames returns the names of all programs.
func programNames() []string {
	names := make([]string, len(programs))
	for i, p := range programs {
		names[i] = p.name
	}
	return names
}

// selectPrograms returns the programs named in the comma-separated list s,
// in the order of programs.
func selectPrograms(s string) ([]program, error) {
	var want []string
	for n := range strings.SplitSeq(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want = append(want, n)
		}
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("no programs in %q", s)
	}
	for _, n := range want {
		if !slices.Contains(programNames(), n) {
			return nil, fmt.Errorf("unknown program %q (known: %s)", n, strings.Join(programNames(), ", "))
		}
	}
	var out []program
	for _, p := range programs {
		if slices.Contains(want, p.name) {
			out = append(out, p)
		}
	}
	return out, nil
}

// passwd returns /etc/passwd and /etc/group for p's image.
func (p program) passwd() (passwd, group []byte) {
	passwd = []byte("root:x:0:0:root:/root:/sbin/nologin\n")
	group = []byte("root:x:0:\n")
	if !p.root {
		passwd = fmt.Appendf(passwd, "nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonrootUID, nonrootUID)
		group = fmt.Appendf(group, "nonroot:x:%d:\n", nonrootUID)
	}
	return passwd, group
}

// user returns the config User of p's image.
func (p program) user() string {
	if p.root {
		return "0:0"
	}
	return fmt.Sprintf("%d:%d", nonrootUID, nonrootUID)
}

// layerFile is one entry of an image layer.
type layerFile struct {
	name     string // path in the image, without a leading slash
	typeflag byte
	mode     int64
	data     []byte
}

// newImage returns the OCI image of program p for platform pl: one layer
// holding binary at /usr/local/bin/<name> plus /etc/passwd and /etc/group,
// with the binary as entrypoint.
func newImage(p program, pl platform, binary []byte) (v1.Image, error) {
	passwd, group := p.passwd()
	files := []layerFile{
		{name: "etc/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "etc/group", typeflag: tar.TypeReg, mode: 0o644, data: group},
		{name: "etc/passwd", typeflag: tar.TypeReg, mode: 0o644, data: passwd},
		{name: "tmp/", typeflag: tar.TypeDir, mode: 0o1777},
		{name: "usr/", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/local/", typeflag: tar.TypeDir, mode: 0o755},
		{name: binDir + "/", typeflag: tar.TypeDir, mode: 0o755},
		{name: binDir + "/" + p.name, typeflag: tar.TypeReg, mode: 0o755, data: binary},
	}
	layer, err := newLayer(files)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "build-images " + p.name, Created: v1.Time{Time: time.Unix(0, 0).UTC()}},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = pl.os, pl.arch, pl.variant
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + binDir + "/" + p.name},
		Env:        []string{defaultPath},
		User:       p.user(),
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":  p.name,
			"org.opencontainers.image.source": "https://github.com/shoal-io/shoal",
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

// newLayer returns a gzip-compressed layer of files with fixed timestamps
// and root ownership, built in memory: the same files give the same digest.
func newLayer(files []layerFile) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name:     f.name,
			Typeflag: f.typeflag,
			Mode:     f.mode,
			Size:     int64(len(f.data)),
			ModTime:  time.Unix(0, 0),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer: write %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("layer: write %s: %w", f.name, err)
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

// indexEntry is one platform's image of an index.
type indexEntry struct {
	platform platform
	image    v1.Image
}

// newIndex returns an OCI image index of entries, each descriptor carrying
// its platform.
func newIndex(entries []indexEntry) (v1.ImageIndex, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("no images")
	}
	adds := make([]mutate.IndexAddendum, 0, len(entries))
	for _, e := range entries {
		pl := e.platform.v1()
		adds = append(adds, mutate.IndexAddendum{
			Add:        e.image,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &pl},
		})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...), nil
}
