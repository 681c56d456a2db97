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
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/shoal-io/shoal/internal/ociimage"
)

// DefaultBusyboxPath is where Debian's busybox-static installs busybox.
const DefaultBusyboxPath = "/bin/busybox"

// DefaultPath is the PATH of every image.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TestserverPort is the port the testserver image serves HTTP on.
const TestserverPort = "8080"

// Pause returns the pod sandbox image: the testserver binary at /pause,
// which pauses when invoked under that name, as its entrypoint. The same
// binary is at /testserver too, so that the image also serves as the
// empty image of a SidecarSet hot upgrade whose sidecar has a lifecycle
// hook running /testserver (the empty container gets the sidecar's
// hooks).
func Pause(binary string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	files := []ociimage.File{ociimage.Regular("pause", 0o755, data), ociimage.Regular("testserver", 0o755, data)}
	return newImage(binary, files, v1.Config{
		Entrypoint: []string{"/pause"},
		Env:        []string{DefaultPath},
		WorkingDir: "/",
	})
}

// Testserver returns the e2e test server image: the testserver binary at
// /testserver, serving HTTP on TestserverPort by default.
func Testserver(binary string) (v1.Image, error) {
	return testserver(binary)
}

// TestserverV2 is Testserver with one more env var (TESTSERVER_IMAGE=v2)
// in its config: the same program under another digest, for tests of image
// updates (in-place updates restart the container with it).
func TestserverV2(binary string) (v1.Image, error) {
	return testserver(binary, "TESTSERVER_IMAGE=v2")
}

func testserver(binary string, env ...string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("testserver image: %w", err)
	}
	return newImage(binary, []ociimage.File{ociimage.Regular("testserver", 0o755, data)}, v1.Config{
		Entrypoint:   []string{"/testserver"},
		Cmd:          []string{"serve", "--port", TestserverPort},
		Env:          append([]string{DefaultPath}, env...),
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

	files := []ociimage.File{
		ociimage.Dir("bin", 0o755),
		ociimage.Regular("bin/busybox", 0o755, data),
	}
	for _, a := range slices.Compact(applets) {
		if a != "busybox" {
			files = append(files, ociimage.Symlink("bin/"+a, "busybox"))
		}
	}
	files = append(files,
		ociimage.Dir("etc", 0o755),
		ociimage.Regular("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")),
		ociimage.Regular("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n")),
		ociimage.Dir("root", 0o700),
		ociimage.Dir("tmp", 0o1777),
	)
	return newImage(busyboxPath, files, v1.Config{
		Cmd:        []string{"sh"},
		Env:        []string{DefaultPath},
		WorkingDir: "/",
	})
}

// newImage returns an OCI image of one layer holding files, with cfg as its
// runtime config and the platform of the ELF binary at platformOf.
func newImage(platformOf string, files []ociimage.File, cfg v1.Config) (v1.Image, error) {
	platform, err := elfPlatform(platformOf)
	if err != nil {
		return nil, err
	}
	layer, err := ociimage.Layer(files)
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
