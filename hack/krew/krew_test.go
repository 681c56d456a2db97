package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// fakeBinDir writes a fake kubectl-kruise, its content naming the
// platform, into bin/<os>-<arch>[-<variant>]/ of a temporary directory for
// each of platforms (as `make build` lays them out) and returns bin/.
func fakeBinDir(t *testing.T, platforms ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	for _, p := range platforms {
		dir := filepath.Join(bin, strings.ReplaceAll(p, "/", "-"))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, binName), []byte(fakeBinary(p)), 0o755))
	}
	return bin
}

// fakeBinary is the content of the fake kubectl-kruise for platform.
func fakeBinary(platform string) string {
	return "#!/bin/sh\necho kubectl-kruise for " + platform + "\n"
}

// archiveEntry is one entry of an archive as read back.
type archiveEntry struct {
	hdr  *tar.Header
	data string
}

// readArchive returns the entries of the tar.gz file, in archive order.
func readArchive(t *testing.T, file string) []archiveEntry {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out []archiveEntry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out = append(out, archiveEntry{hdr: hdr, data: string(data)})
	}
	return out
}

// readManifest parses kruise.yaml of dir strictly into a manifest.
func readManifest(t *testing.T, dir string) *manifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, manifestName))
	require.NoError(t, err)
	var m manifest
	require.NoError(t, yaml.UnmarshalStrict(raw, &m), "kruise.yaml:\n%s", raw)
	return &m
}

// install does what krew does with one platform's archive: it applies the
// files operations to the archive's entries and returns the installed
// files (path in the installation -> content).
func install(t *testing.T, archive string, p platformSpec) map[string]string {
	t.Helper()
	installed := map[string]string{}
	for _, e := range readArchive(t, archive) {
		for _, f := range p.Files {
			ok, err := path.Match(f.From, e.hdr.Name)
			require.NoError(t, err)
			if ok {
				installed[path.Join(f.To, path.Base(e.hdr.Name))] = e.data
			}
		}
	}
	return installed
}

func TestBuild(t *testing.T) {
	const base = "https://github.com/shoal-io/shoal/releases/download/"
	license := filepath.Join(t.TempDir(), "LICENSE")
	require.NoError(t, os.WriteFile(license, []byte("Apache License 2.0\n"), 0o600))
	makeBuild := []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}

	tests := []struct {
		name      string
		version   string
		platforms string
		built     []string // the platforms with a binary in bin/
		files     []string
		// want
		wantVersion  string
		wantArchives []string
		wantArches   []string // each platform's selector arch
		wantErr      string
	}{{
		name: "make build's three platforms, release tag", version: "v0.3.0",
		platforms: defaultPlatforms, built: makeBuild, files: []string{license},
		wantVersion: "v0.3.0",
		wantArchives: []string{
			"kubectl-kruise_v0.3.0_linux_amd64.tar.gz",
			"kubectl-kruise_v0.3.0_linux_arm64.tar.gz",
			"kubectl-kruise_v0.3.0_linux_armv7.tar.gz",
		},
		wantArches: []string{"amd64", "arm64", "arm"},
	}, {
		name: "untagged commit", version: "d12a816-dirty",
		platforms: "linux/arm/v7,linux/amd64", built: makeBuild,
		wantVersion: "v0.0.0-dev+d12a816-dirty",
		wantArchives: []string{
			"kubectl-kruise_d12a816-dirty_linux_armv7.tar.gz",
			"kubectl-kruise_d12a816-dirty_linux_amd64.tar.gz",
		},
		wantArches: []string{"arm", "amd64"},
	}, {
		name: "git describe past a tag", version: "v0.3.0-4-gd12a816",
		platforms: "linux/arm64", built: []string{"linux/arm64"}, files: []string{license},
		wantVersion:  "v0.3.0-4-gd12a816",
		wantArchives: []string{"kubectl-kruise_v0.3.0-4-gd12a816_linux_arm64.tar.gz"},
		wantArches:   []string{"arm64"},
	}, {
		name: "a platform not built", version: "v0.3.0",
		platforms: defaultPlatforms, built: []string{"linux/amd64"},
		wantErr: "archive for linux/arm64",
	}, {
		name: "a file named like the binary", version: "v0.3.0",
		platforms: "linux/amd64", built: makeBuild,
		files:   []string{filepath.Join(fakeBinDir(t, "linux/amd64"), "linux-amd64", binName)},
		wantErr: `two entries named "kubectl-kruise"`,
	}, {
		name: "a version that is no file name", version: "v1/2",
		platforms: "linux/amd64", built: makeBuild,
		wantErr: `version "v1/2"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			platforms, err := parsePlatforms(tt.platforms)
			require.NoError(t, err)
			cfg := config{
				version: tt.version, uriBase: base + tt.version + "/", homepage: "https://github.com/shoal-io/shoal",
				binDir: fakeBinDir(t, tt.built...), outDir: filepath.Join(t.TempDir(), "krew"),
				platforms: platforms, files: tt.files,
			}
			m, err := build(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)

			// Deterministic: a second run elsewhere writes the same bytes.
			again := cfg
			again.outDir = filepath.Join(t.TempDir(), "krew")
			m2, err := build(again)
			require.NoError(t, err)
			require.Equal(t, m, m2)
			for _, name := range append(slices.Clone(tt.wantArchives), manifestName) {
				a, err := os.ReadFile(filepath.Join(cfg.outDir, name))
				require.NoError(t, err)
				b, err := os.ReadFile(filepath.Join(again.outDir, name))
				require.NoError(t, err)
				require.True(t, bytes.Equal(a, b), "%s differs between two runs", name)
			}
			written, err := os.ReadDir(cfg.outDir)
			require.NoError(t, err)
			var names []string
			for _, e := range written {
				names = append(names, e.Name())
			}
			require.ElementsMatch(t, append(slices.Clone(tt.wantArchives), manifestName), names)

			// The manifest on disk is the one returned, with the right fields.
			got := readManifest(t, cfg.outDir)
			require.Equal(t, m, got)
			require.Equal(t, krewAPIVersion, got.APIVersion)
			require.Equal(t, "Plugin", got.Kind)
			require.Equal(t, "kruise", got.Metadata.Name)
			require.Equal(t, tt.wantVersion, got.Spec.Version)
			require.Equal(t, "https://github.com/shoal-io/shoal", got.Spec.Homepage)
			require.NotEmpty(t, got.Spec.ShortDescription)
			require.Len(t, got.Spec.Platforms, len(tt.wantArchives))

			for i, p := range got.Spec.Platforms {
				archive := filepath.Join(cfg.outDir, tt.wantArchives[i])
				require.Equal(t, base+tt.version+"/"+tt.wantArchives[i], p.URI)
				require.Equal(t, map[string]string{"os": "linux", "arch": tt.wantArches[i]}, p.Selector.MatchLabels)

				raw, err := os.ReadFile(archive)
				require.NoError(t, err)
				sum := sha256.Sum256(raw)
				require.Equal(t, hex.EncodeToString(sum[:]), p.Sha256, "sha256 of %s", archive)

				// Entries sorted, owned by root, at the fixed time; the
				// binary executable, the rest not.
				entries := readArchive(t, archive)
				wantNames := []string{binName}
				for _, f := range tt.files {
					wantNames = append(wantNames, filepath.Base(f))
				}
				slices.Sort(wantNames)
				var gotNames []string
				for _, e := range entries {
					gotNames = append(gotNames, e.hdr.Name)
					require.Equal(t, byte(tar.TypeReg), e.hdr.Typeflag, e.hdr.Name)
					require.Zero(t, e.hdr.Uid, e.hdr.Name)
					require.Zero(t, e.hdr.Gid, e.hdr.Name)
					require.True(t, e.hdr.ModTime.Equal(archiveMtime), "%s mtime %v", e.hdr.Name, e.hdr.ModTime)
					wantMode := int64(0o644)
					if e.hdr.Name == binName {
						wantMode = 0o755
					}
					require.Equal(t, wantMode, e.hdr.Mode, e.hdr.Name)
				}
				require.Equal(t, wantNames, gotNames)

				// Installing as krew does puts this platform's binary at bin.
				files := install(t, archive, p)
				plat := platforms[i].String()
				require.Equal(t, fakeBinary(plat), files[p.Bin], "%s installed from %s", p.Bin, archive)
				for _, f := range tt.files {
					require.Contains(t, files, filepath.Base(f))
				}
			}
		})
	}
}

func TestRemovesOldArchives(t *testing.T) {
	out := filepath.Join(t.TempDir(), "krew")
	cfg := config{
		version: "v0.1.0", uriBase: "file:///tmp", binDir: fakeBinDir(t, "linux/amd64"), outDir: out,
		platforms: []platform{{os: "linux", arch: "amd64"}},
	}
	_, err := build(cfg)
	require.NoError(t, err)
	cfg.version = "v0.2.0"
	_, err = build(cfg)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(out, "kubectl-kruise_v0.1.0_linux_amd64.tar.gz"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(out, "kubectl-kruise_v0.2.0_linux_amd64.tar.gz"))
	require.NoError(t, err)
}

// goPlatforms are the GOOS and GOARCH values krew can select on: it matches
// a selector against its own runtime.GOOS and runtime.GOARCH.
var (
	goOS   = []string{"linux", "darwin", "windows", "freebsd"}
	goArch = []string{"amd64", "arm64", "arm", "386", "ppc64le", "s390x", "riscv64"}
)

// TestManifestValidatesForKrew checks the manifest `make build` writes
// against krew's rules, and that the validation refuses what krew refuses.
func TestManifestValidatesForKrew(t *testing.T) {
	platforms, err := parsePlatforms(defaultPlatforms)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "krew")
	_, err = build(config{
		version: "v0.3.0", uriBase: "https://github.com/shoal-io/shoal/releases/download/v0.3.0",
		binDir: fakeBinDir(t, "linux/amd64", "linux/arm64", "linux/arm/v7"), outDir: out, platforms: platforms,
	})
	require.NoError(t, err)
	m := readManifest(t, out)
	require.NoError(t, validateManifest(m))

	// krew takes the plugin's name from the manifest's file name too.
	require.Equal(t, strings.TrimSuffix(manifestName, ".yaml"), m.Metadata.Name)
	var selected []string
	for _, p := range m.Spec.Platforms {
		require.Len(t, p.Selector.MatchLabels, 2)
		require.Contains(t, goOS, p.Selector.MatchLabels["os"])
		require.Contains(t, goArch, p.Selector.MatchLabels["arch"])
		selected = append(selected, p.Selector.MatchLabels["os"]+"/"+p.Selector.MatchLabels["arch"])
		var installs []string
		for _, f := range p.Files {
			installs = append(installs, path.Join(f.To, path.Base(f.From)))
		}
		require.Contains(t, installs, p.Bin, "bin must be among the files installed")
	}
	require.Equal(t, []string{"linux/amd64", "linux/arm64", "linux/arm"}, selected)

	broken := []struct {
		name    string
		change  func(m *manifest)
		wantErr string
	}{
		{"apiVersion", func(m *manifest) { m.APIVersion = "krew.googlecontainertools.github.com/v1alpha1" }, "apiVersion"},
		{"kind", func(m *manifest) { m.Kind = "Plugins" }, "kind"},
		{"name", func(m *manifest) { m.Metadata.Name = "kubectl kruise" }, "plugin name"},
		{"short description", func(m *manifest) { m.Spec.ShortDescription = "" }, "short description"},
		{"version without v", func(m *manifest) { m.Spec.Version = "0.3.0" }, "does not start with v"},
		{"version not semantic", func(m *manifest) { m.Spec.Version = "vd12a816" }, "version"},
		{"no platforms", func(m *manifest) { m.Spec.Platforms = nil }, "no platforms"},
		{"uri", func(m *manifest) { m.Spec.Platforms[0].URI = "" }, "no uri"},
		{"sha256", func(m *manifest) { m.Spec.Platforms[1].Sha256 = strings.ToUpper(m.Spec.Platforms[1].Sha256) }, "sha256"},
		{"bin", func(m *manifest) { m.Spec.Platforms[0].Bin = "" }, "no bin"},
		{"bin not installed", func(m *manifest) { m.Spec.Platforms[2].Bin = "kubectl-kruise.exe" }, "not among the files"},
		{"files", func(m *manifest) { m.Spec.Platforms[0].Files = nil }, "no files"},
		{"selector key", func(m *manifest) { m.Spec.Platforms[2].Selector.MatchLabels["variant"] = "v7" }, "selector key"},
		{"empty selector", func(m *manifest) { m.Spec.Platforms[0].Selector.MatchLabels = nil }, "empty selector"},
		{"same selector twice", func(m *manifest) { m.Spec.Platforms[1].Selector = m.Spec.Platforms[0].Selector }, "second platform"},
	}
	for _, tt := range broken {
		t.Run(tt.name, func(t *testing.T) {
			m := readManifest(t, out)
			tt.change(m)
			require.ErrorContains(t, validateManifest(m), tt.wantErr)
		})
	}
}

func TestParsePlatforms(t *testing.T) {
	tests := []struct {
		in      string
		want    []platform
		wantErr string
	}{
		{in: defaultPlatforms, want: []platform{{"linux", "amd64", ""}, {"linux", "arm64", ""}, {"linux", "arm", "v7"}}},
		{in: "linux/amd64,darwin/arm64", want: []platform{{"linux", "amd64", ""}, {"darwin", "arm64", ""}}},
		{in: "linux/arm/v6 linux/arm/v7", wantErr: "krew selects by os and arch only"},
		{in: "linux", wantErr: "want os/arch"},
		{in: "linux//v7", wantErr: "want os/arch"},
		{in: " ", wantErr: "no platforms"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePlatforms(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestKrewVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v0.3.0":            "v0.3.0",
		"v1.2.3-rc.1":       "v1.2.3-rc.1",
		"v0.3.0-4-gd12a816": "v0.3.0-4-gd12a816",
		"d12a816":           "v0.0.0-dev+d12a816",
		"0123456-dirty":     "v0.0.0-dev+0123456-dirty",
		"0.3.0":             "v0.0.0-dev+0.3.0",
		"unknown":           "v0.0.0-dev+unknown",
		"v1_2+x":            "v0.0.0-dev+v1-2-x",
	} {
		got := krewVersion(in)
		require.Equal(t, want, got, in)
		require.NoError(t, validateManifest(&manifest{
			APIVersion: krewAPIVersion, Kind: krewKind, Metadata: metadata{Name: pluginName},
			Spec: spec{Version: got, ShortDescription: "x", Platforms: []platformSpec{{
				Selector: selector{MatchLabels: map[string]string{"os": "linux", "arch": "amd64"}},
				URI:      "file:///x", Sha256: strings.Repeat("0", 64), Bin: binName,
				Files: []fileSpec{{From: binName, To: "."}},
			}}},
		}), "krew refuses version %q", got)
	}
}

func TestRun(t *testing.T) {
	bin := fakeBinDir(t, "linux/amd64", "linux/arm64", "linux/arm/v7")
	out := filepath.Join(t.TempDir(), "krew")
	var stdout, stderr bytes.Buffer
	err := run([]string{"--version", "v0.3.0", "--uri-base", "file:///srv/krew", "--bin-dir", bin, "--out", out}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	require.Contains(t, stdout.String(), "file:///srv/krew/kubectl-kruise_v0.3.0_linux_armv7.tar.gz")
	require.Contains(t, stdout.String(), "kruise.yaml (version v0.3.0)")

	require.ErrorContains(t, run([]string{"--version", "v0.3.0"}, &stdout, &stderr), "--uri-base are required")
	require.ErrorContains(t, run([]string{"--version", "v0.3.0", "--uri-base", "x", "--platforms", "linux"}, &stdout, &stderr), "want os/arch")
}
