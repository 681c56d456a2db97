// Package images builds the local cluster's container images from scratch,
// without Docker or base images, and pushes them to its registry: pause
// (the pod sandbox image), busybox and testserver (the e2e test server).
//
// Images are OCI images of one layer whose platform is taken from the ELF
// header of the binary they carry, so a binary built for another GOARCH
// makes an image for that architecture. Layers are reproducible (fixed
// timestamps and owners), so the same inputs give the same digest.
package images

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultBusyboxPath is where Debian's busybox-static installs busybox.
const DefaultBusyboxPath = "/bin/busybox"

// DefaultPath is the PATH of every image.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TestserverPort is the port the testserver image serves HTTP on.
const TestserverPort = "8080"

// Pause returns the pod sandbox image: the testserver binary at /pause,
// which pauses when invoked under that name, as its entrypoint.
func Pause(binary string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	return newImage(binary, []file{regular("pause", 0o755, data)}, v1.Config{
		Entrypoint: []string{"/pause"},
		Env:        []string{DefaultPath},
		WorkingDir: "/",
	})
}

// Testserver returns the e2e test server image: the testserver binary at
// /testserver, serving HTTP on TestserverPort by default.
func Testserver(binary string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("testserver image: %w", err)
	}
	return newImage(binary, []file{regular("testserver", 0o755, data)}, v1.Config{
		Entrypoint:   []string{"/testserver"},
		Cmd:          []string{"serve", "--port", TestserverPort},
		Env:          []string{DefaultPath},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{TestserverPort + "/tcp": {}},
	})
}

// Busybox returns a busybox image: the static busybox at busyboxPath as
// /bin/busybox with a symlink in /bin for each of its applets (listed by
// running it, so it must run on this machine), /etc/passwd and /etc/group
// with root and nobody, /root and a world-writable /tmp. Its command is sh.
func Busybox(busyboxPath string) (v1.Image, error) {
	data, err := os.ReadFile(busyboxPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("busybox image: %w (install Debian's busybox-static: apt-get install busybox-static)", err)
	} else if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	list, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox image: %s --list: %w", busyboxPath, err)
	}
	applets := strings.Fields(string(list))
	if !slices.Contains(applets, "sh") {
		applets = append(applets, "sh")
	}
	slices.Sort(applets)

	files := []file{
		dir("bin", 0o755),
		regular("bin/busybox", 0o755, data),
	}
	for _, a := range slices.Compact(applets) {
		if a != "busybox" {
			files = append(files, symlink("bin/"+a, "busybox"))
		}
	}
	files = append(files,
		dir("etc", 0o755),
		regular("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")),
		regular("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n")),
		dir("root", 0o700),
		dir("tmp", 0o1777),
	)
	return newImage(busyboxPath, files, v1.Config{
		Cmd:        []string{"sh"},
		Env:        []string{DefaultPath},
		WorkingDir: "/",
	})
}

// file is one entry of an image layer.
type file struct {
	name     string // path in the image, without a leading slash
	typeflag byte
	mode     int64
	linkname string
	data     []byte
}

func regular(name string, mode int64, data []byte) file {
	return file{name: name, typeflag: tar.TypeReg, mode: mode, data: data}
}

func dir(name string, mode int64) file {
	return file{name: name + "/", typeflag: tar.TypeDir, mode: mode}
}

func symlink(name, target string) file {
	return file{name: name, typeflag: tar.TypeSymlink, mode: 0o777, linkname: target}
}

// newImage returns an OCI image of one layer holding files, with cfg as its
// runtime config and the platform of the ELF binary at platformOf.
func newImage(platformOf string, files []file, cfg v1.Config) (v1.Image, error) {
	platform, err := elfPlatform(platformOf)
	if err != nil {
		return nil, err
	}
	layer, err := newLayer(files)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

// newLayer returns a gzip-compressed layer of files, built in memory.
func newLayer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name:     f.name,
			Typeflag: f.typeflag,
			Mode:     f.mode,
			Linkname: f.linkname,
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

// elfArch maps ELF machines to GOARCH names.
var elfArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_ARM:     "arm",
}

// elfPlatform returns the linux platform the ELF binary at path runs on. The
// arm variant comes from the GOARM a Go binary was built with.
func elfPlatform(path string) (v1.Platform, error) {
	f, err := elf.Open(path)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("platform of %s: %w", path, err)
	}
	defer f.Close()
	arch, ok := elfArch[f.Machine]
	if !ok {
		return v1.Platform{}, fmt.Errorf("platform of %s: unsupported ELF machine %s", path, f.Machine)
	}
	p := v1.Platform{OS: "linux", Architecture: arch}
	if arch == "arm" {
		if info, err := buildinfo.ReadFile(path); err == nil {
			for _, s := range info.Settings {
				if s.Key == "GOARM" {
					p.Variant = "v" + strings.SplitN(s.Value, ",", 2)[0]
				}
			}
		}
	}
	return p, nil
}
