package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/shoal-io/shoal/internal/ociimage"
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

// newImage returns the OCI image of program p for platform pl: one layer
// holding binary at /usr/local/bin/<name> plus /etc/passwd and /etc/group,
// with the binary as entrypoint.
func newImage(p program, pl platform, binary []byte) (v1.Image, error) {
	passwd, group := p.passwd()
	files := []ociimage.File{
		ociimage.Dir("etc", 0o755),
		ociimage.Regular("etc/group", 0o644, group),
		ociimage.Regular("etc/passwd", 0o644, passwd),
		ociimage.Dir("tmp", 0o1777),
		ociimage.Dir("usr", 0o755),
		ociimage.Dir("usr/local", 0o755),
		ociimage.Dir(binDir, 0o755),
		ociimage.Regular(binDir+"/"+p.name, 0o755, binary),
	}
	layer, err := ociimage.Layer(files)
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
