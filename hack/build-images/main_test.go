package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/internal/ociimage"
)

func TestParsePlatforms(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: defaultPlatforms, want: []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}},
		{in: " linux/amd64 , ,linux/arm/v6", want: []string{"linux/amd64", "linux/arm/v6"}},
		{in: "linux/amd64 linux/arm64\tlinux/arm/v7", want: []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}},
		{in: "linux/arm64/v8", want: []string{"linux/arm64/v8"}},
		{in: "", wantErr: "no platforms"},
		{in: "linux", wantErr: "want os/arch"},
		{in: "linux/amd64/v2/x", wantErr: "want os/arch"},
		{in: "windows/amd64", wantErr: "only linux"},
		{in: "linux/riscv64", wantErr: "unsupported architecture"},
		{in: "linux/arm", wantErr: "variant"},
		{in: "linux/amd64/v3", wantErr: "variant"},
		{in: "linux/amd64,linux/amd64", wantErr: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePlatforms(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, p := range got {
				names = append(names, p.String())
			}
			require.Equal(t, tt.want, names)
		})
	}
}

func TestPlatformGoEnv(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"linux/amd64", []string{"GOOS=linux", "GOARCH=amd64"}},
		{"linux/arm/v7", []string{"GOOS=linux", "GOARCH=arm", "GOARM=7"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ps, err := parsePlatforms(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, ps[0].goEnv())
		})
	}
}

func TestSelectPrograms(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "kubectl-kruise,shoal-agent", want: []string{"shoal-agent", "kubectl-kruise"}},
		{in: strings.Join(programNames(), ","), want: programNames()},
		{in: " , ", wantErr: "no programs"},
		{in: "shoal-agent,kruise-manager", wantErr: `unknown program "kruise-manager"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := selectPrograms(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, p := range got {
				names = append(names, p.name)
			}
			require.Equal(t, tt.want, names)
		})
	}
}

// layerEntry is what the tests check of one tar entry.
type layerEntry struct {
	mode     int64
	uid, gid int
	data     string
}

// readLayer returns the entries of img's only layer by name.
func readLayer(t *testing.T, img v1.Image) map[string]layerEntry {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	mt, err := layers[0].MediaType()
	require.NoError(t, err)
	require.Equal(t, types.OCILayer, mt)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	out := map[string]layerEntry{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.True(t, hdr.ModTime.Equal(time.Unix(0, 0)), "mtime of %s", hdr.Name)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[hdr.Name] = layerEntry{mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, data: string(data)}
	}
	return out
}

func TestNewImage(t *testing.T) {
	arm := platform{os: "linux", arch: "arm", variant: "v7"}
	amd := platform{os: "linux", arch: "amd64"}
	tests := []struct {
		program      program
		platform     platform
		wantUser     string
		wantNonroot  bool
		wantVariant  string
		wantArchName string
	}{
		{program: program{name: "shoal-agent", root: true}, platform: amd, wantUser: "0:0", wantArchName: "amd64"},
		{program: program{name: "shoal-coordinator"}, platform: arm, wantUser: "65532:65532", wantNonroot: true, wantVariant: "v7", wantArchName: "arm"},
		{program: program{name: "kubectl-kruise"}, platform: amd, wantUser: "65532:65532", wantNonroot: true, wantArchName: "amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.program.name+"/"+tt.platform.dirName(), func(t *testing.T) {
			binary := []byte("\x7fELF fake " + tt.program.name)
			img, err := newImage(tt.program, tt.platform, binary)
			require.NoError(t, err)

			mt, err := img.MediaType()
			require.NoError(t, err)
			require.Equal(t, types.OCIManifestSchema1, mt)
			cf, err := img.ConfigFile()
			require.NoError(t, err)
			require.Equal(t, "linux", cf.OS)
			require.Equal(t, tt.wantArchName, cf.Architecture)
			require.Equal(t, tt.wantVariant, cf.Variant)
			require.Equal(t, []string{"/usr/local/bin/" + tt.program.name}, cf.Config.Entrypoint)
			require.Equal(t, tt.wantUser, cf.Config.User)
			require.True(t, cf.Created.Equal(time.Unix(0, 0)))

			files := readLayer(t, img)
			bin, ok := files["usr/local/bin/"+tt.program.name]
			require.True(t, ok, "binary in layer")
			require.Equal(t, string(binary), bin.data)
			require.Equal(t, int64(0o755), bin.mode)
			require.Zero(t, bin.uid)
			require.Zero(t, bin.gid)
			passwd := files["etc/passwd"].data
			require.Contains(t, passwd, "root:x:0:0:")
			require.Equal(t, tt.wantNonroot, strings.Contains(passwd, "nonroot:x:65532:65532:"))
			require.Contains(t, files, "etc/group")

			// Reproducible: the same inputs give the same digest, another
			// binary another.
			again, err := newImage(tt.program, tt.platform, binary)
			require.NoError(t, err)
			requireSameDigest(t, img, again)
			other, err := newImage(tt.program, tt.platform, append(binary, 'x'))
			require.NoError(t, err)
			d1, err := img.Digest()
			require.NoError(t, err)
			d2, err := other.Digest()
			require.NoError(t, err)
			require.NotEqual(t, d1, d2)
		})
	}
}

func requireSameDigest(t *testing.T, a, b interface{ Digest() (v1.Hash, error) }) {
	t.Helper()
	da, err := a.Digest()
	require.NoError(t, err)
	db, err := b.Digest()
	require.NoError(t, err)
	require.Equal(t, da, db)
}

// startRegistry serves an in-process registry on loopback until the test
// ends and returns its host:port and a count of manifest PUTs.
func startRegistry(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	var puts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			puts.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &puts
}

// requireIndex fetches ref and checks that it is an OCI index of one image
// per platform in want, each of that platform.
func requireIndex(t *testing.T, ref string, want []platform) v1.Hash {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	idx, err := remote.Index(r, remote.WithContext(t.Context()))
	require.NoError(t, err)
	mt, err := idx.MediaType()
	require.NoError(t, err)
	require.Equal(t, types.OCIImageIndex, mt)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, len(want))
	for i, d := range im.Manifests {
		require.NotNil(t, d.Platform)
		require.Equal(t, want[i].v1(), *d.Platform)
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, want[i].arch, cf.Architecture)
		require.Equal(t, want[i].variant, cf.Variant)
	}
	d, err := idx.Digest()
	require.NoError(t, err)
	return d
}

func TestPushIndex(t *testing.T) {
	reg, puts := startRegistry(t)
	pls, err := parsePlatforms(defaultPlatforms)
	require.NoError(t, err)
	var entries []indexEntry
	for _, pl := range pls {
		img, err := newImage(programs[1], pl, []byte("binary for "+pl.String()))
		require.NoError(t, err)
		entries = append(entries, indexEntry{platform: pl, image: img})
	}
	idx, err := newIndex(entries)
	require.NoError(t, err)
	ref := reg + "/shoal/shoal-coordinator:dev"

	require.NoError(t, ociimage.Push(t.Context(), ref, idx))
	got := requireIndex(t, ref, pls)
	want, err := idx.Digest()
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.EqualValues(t, len(pls)+1, puts.Load(), "one manifest per platform plus the index")

	// The same index again: nothing is pushed.
	require.NoError(t, ociimage.Push(t.Context(), ref, idx))
	require.EqualValues(t, len(pls)+1, puts.Load())

	_, err = newIndex(nil)
	require.Error(t, err)
}

// writeModule writes a throwaway module with a main package per program
// that prints main.version.
func writeModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/throwaway\n\ngo 1.22\n"), 0o644))
	for _, n := range programNames() {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "cmd", n), 0o755))
		src := "package main\n\nimport \"fmt\"\n\nvar version = \"unset\"\n\nfunc main() { fmt.Println(\"" + n + "\", version) }\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cmd", n, "main.go"), []byte(src), 0o644))
	}
	return dir
}

func TestRun(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("runs the built binary: needs linux/amd64 or linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	reg, _ := startRegistry(t)
	src := writeModule(t)
	cache := t.TempDir()
	out := filepath.Join(t.TempDir(), "sub", "images.txt")
	host := platform{os: "linux", arch: runtime.GOARCH}

	tests := []struct {
		name    string
		args    []string
		wantErr string
		usage   bool
	}{
		{name: "no registry", args: []string{"--registry="}, wantErr: "--registry is required", usage: true},
		{name: "bad platform", args: []string{"--registry", reg, "--platforms", "linux/mips"}, wantErr: "unsupported architecture", usage: true},
		{name: "bad program", args: []string{"--registry", reg, "--programs", "nope"}, wantErr: "unknown program", usage: true},
		{name: "stray argument", args: []string{"--registry", reg, "extra"}, wantErr: "unexpected arguments", usage: true},
		{name: "missing package", args: []string{"--registry", reg, "--src", t.TempDir(), "--version", "v1", "--platforms", host.String()}, wantErr: "build ./cmd/shoal-agent for " + host.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, &stdout, &stderr)
			require.ErrorContains(t, err, tt.wantErr)
			var u usageError
			require.Equal(t, tt.usage, errors.As(err, &u))
		})
	}

	t.Run("build and push", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		args := []string{"--registry", reg, "--tag", "t1", "--platforms", host.String(), "--push",
			"--out", out, "--src", src, "--cache-dir", cache, "--version", "v0.0.0-test"}
		require.NoError(t, run(ctx, args, &stdout, &stderr), stderr.String())

		data, err := os.ReadFile(out)
		require.NoError(t, err)
		require.Equal(t, stdout.String(), string(data))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		require.Len(t, lines, len(programs))
		for i, line := range lines {
			fields := strings.Fields(line)
			require.Len(t, fields, 2)
			require.Equal(t, programs[i].name, fields[0])
			ref, digest, ok := strings.Cut(fields[1], "@")
			require.True(t, ok, line)
			require.Equal(t, reg+"/shoal/"+programs[i].name+":t1", ref)
			require.Equal(t, digest, requireIndex(t, ref, []platform{host}).String())

			// The binary carries the version.
			got, err := exec.CommandContext(ctx, filepath.Join(cache, host.dirName(), programs[i].name)).Output()
			require.NoError(t, err)
			require.Equal(t, programs[i].name+" v0.0.0-test\n", string(got))
		}

		// A rebuild of the same sources gives the same digests.
		var again bytes.Buffer
		require.NoError(t, run(ctx, args, &again, io.Discard))
		require.Equal(t, stdout.String(), again.String())
	})
}
