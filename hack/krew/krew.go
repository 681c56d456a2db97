package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

const (
	// pluginName is the plugin's name in krew: `kubectl krew install kruise`.
	pluginName = "kruise"
	// binName is the plugin's executable, the one file every archive holds.
	binName = "kubectl-kruise"
	// manifestName is the manifest's file name in the output directory:
	// krew wants it named after the plugin.
	manifestName = pluginName + ".yaml"
	// krewAPIVersion and krewKind are the manifest's type, the only one krew
	// accepts.
	krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	krewKind       = "Plugin"

	shortDescription = "Manage OpenKruise workloads served by Shoal"
	description      = "kubectl kruise works with the OpenKruise API (apps.kruise.io, policy.kruise.io)\n" +
		"as served by Shoal: watch, pause, resume, restart and undo the rollout of\n" +
		"CloneSets, Advanced StatefulSets and Advanced DaemonSets; set their images and\n" +
		"env; scale a CloneSet down by pod name; migrate Deployments, StatefulSets and\n" +
		"DaemonSets to the Kruise kinds; create ContainerRecreateRequests and image pull\n" +
		"jobs; and show ImagePullJobs, PodProbeMarkers, ResourceDistributions and\n" +
		"SidecarSets with what Shoal's coordinator knows about them.\n" +
		"`kubectl kruise --help` lists every command with an example.\n"
)

// archiveMtime is the modification time of every archive entry: a fixed
// instant, so that the same inputs give the same bytes.
var archiveMtime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// safeVersion is what a version may hold: it becomes part of file names and
// URIs.
var safeVersion = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._+-]*$`)

// platform is one os/arch[/variant] the plugin is built for, as the
// Makefile's PLATFORMS names it.
type platform struct {
	os, arch, variant string
}

// String returns the platform as os/arch[/variant].
func (p platform) String() string {
	if p.variant != "" {
		return p.os + "/" + p.arch + "/" + p.variant
	}
	return p.os + "/" + p.arch
}

// binDir returns the directory `make build` puts the platform's binaries in,
// relative to bin/: os-arch[-variant].
func (p platform) binDir() string {
	return strings.ReplaceAll(p.String(), "/", "-")
}

// archiveSuffix returns the platform as it ends an archive's name:
// os_arch[variant], as in linux_armv7.
func (p platform) archiveSuffix() string {
	return p.os + "_" + p.arch + p.variant
}

// parsePlatforms parses a list of os/arch[/variant] separated by commas or
// white space (the Makefile's PLATFORMS). Two platforms krew cannot tell
// apart (it selects by os and arch only, so linux/arm/v6 and linux/arm/v7)
// are an error.
func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	items := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	for _, item := range items {
		parts := strings.Split(item, "/")
		if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
			return nil, fmt.Errorf("platform %q: want os/arch[/variant]", item)
		}
		p := platform{os: parts[0], arch: parts[1]}
		if len(parts) == 3 {
			p.variant = parts[2]
		}
		for _, q := range out {
			if q.os == p.os && q.arch == p.arch {
				return nil, fmt.Errorf("platform %q: krew selects by os and arch only, and %q has them too", item, q)
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platforms in %q", s)
	}
	return out, nil
}

// krewVersion returns version as krew accepts it, a semantic version with a
// leading v: version itself when it is one (a release tag), else
// v0.0.0-dev+VERSION (a `git describe` of an untagged commit).
func krewVersion(version string) string {
	if strings.HasPrefix(version, "v") {
		if _, err := utilversion.ParseSemantic(version); err == nil {
			return version
		}
	}
	return "v0.0.0-dev+" + strings.NewReplacer("_", "-", "+", "-").Replace(version)
}

// config is what the archives and the manifest are made from.
type config struct {
	version   string     // the plugin's version, as stamped into its binaries
	uriBase   string     // the URL the archives are downloaded from, without the file name
	homepage  string     // the manifest's spec.homepage
	binDir    string     // holds <os>-<arch>[-<variant>]/kubectl-kruise, as `make build` leaves them
	outDir    string     // where the archives and kruise.yaml are written
	platforms []platform // one archive each
	files     []string   // packed next to the binary in every archive (a LICENSE)
}

// manifest is a krew plugin manifest (krew's index.Plugin, with the fields
// this plugin uses).
type manifest struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metadata `json:"metadata"`
	Spec       spec     `json:"spec"`
}

// metadata is the manifest's object metadata: only the plugin's name.
type metadata struct {
	Name string `json:"name"`
}

// spec is the plugin's description and its archive per platform.
type spec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Platforms        []platformSpec `json:"platforms"`
}

// platformSpec is where krew downloads the plugin for one os and arch, and
// how it installs the archive's files.
type platformSpec struct {
	Selector selector   `json:"selector"`
	URI      string     `json:"uri"`
	Sha256   string     `json:"sha256"`
	Bin      string     `json:"bin"`
	Files    []fileSpec `json:"files"`
}

// selector picks a platformSpec by the os and arch labels krew sets from
// the machine it runs on (Go's GOOS and GOARCH).
type selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// fileSpec copies the archive entries matching From into the directory To
// of the plugin's installation.
type fileSpec struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// build writes one archive per platform and the manifest naming them into
// cfg.outDir, removing archives an earlier run left there, and returns the
// manifest.
func build(cfg config) (*manifest, error) {
	if !safeVersion.MatchString(cfg.version) {
		return nil, fmt.Errorf("version %q: want letters, digits and . _ + - only", cfg.version)
	}
	if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	stale, err := filepath.Glob(filepath.Join(cfg.outDir, binName+"_*.tar.gz"))
	if err != nil {
		return nil, fmt.Errorf("old archives: %w", err)
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return nil, fmt.Errorf("remove old archive: %w", err)
		}
	}
	m := &manifest{
		APIVersion: krewAPIVersion,
		Kind:       krewKind,
		Metadata:   metadata{Name: pluginName},
		Spec: spec{
			Version:          krewVersion(cfg.version),
			Homepage:         cfg.homepage,
			ShortDescription: shortDescription,
			Description:      description,
		},
	}
	for _, p := range cfg.platforms {
		entries := []entry{{name: binName, path: filepath.Join(cfg.binDir, p.binDir(), binName), mode: 0o755}}
		files := []fileSpec{{From: binName, To: "."}}
		for _, f := range cfg.files {
			entries = append(entries, entry{name: filepath.Base(f), path: f, mode: 0o644})
			files = append(files, fileSpec{From: filepath.Base(f), To: "."})
		}
		name := fmt.Sprintf("%s_%s_%s.tar.gz", binName, cfg.version, p.archiveSuffix())
		sum, err := writeArchiveFile(filepath.Join(cfg.outDir, name), entries)
		if err != nil {
			return nil, fmt.Errorf("archive for %s: %w", p, err)
		}
		m.Spec.Platforms = append(m.Spec.Platforms, platformSpec{
			Selector: selector{MatchLabels: map[string]string{"os": p.os, "arch": p.arch}},
			URI:      strings.TrimSuffix(cfg.uriBase, "/") + "/" + name,
			Sha256:   sum,
			Bin:      binName,
			Files:    files,
		})
	}
	if err := validateManifest(m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.outDir, manifestName), out, 0o644); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	return m, nil
}

// entry is one file of an archive: the file at path, stored as name with
// mode.
type entry struct {
	name, path string
	mode       int64
}

// writeArchiveFile writes the tar.gz archive of entries to file and returns
// its sha256 in hex.
func writeArchiveFile(file string, entries []entry) (sum string, err error) {
	f, err := os.Create(file)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(file)
		}
	}()
	h := sha256.New()
	if err := writeArchive(io.MultiWriter(f, h), entries); err != nil {
		return "", fmt.Errorf("write %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeArchive writes the tar.gz archive of entries to w. The bytes depend
// only on the entries' names, modes and contents: entries sorted by name,
// owned by uid and gid 0, modified at archiveMtime, and no gzip name or time.
func writeArchive(w io.Writer, entries []entry) error {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(entries); i++ {
		if entries[i].name == entries[i-1].name {
			return fmt.Errorf("two entries named %q", entries[i].name)
		}
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := addFile(tw, e); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("finish gzip: %w", err)
	}
	return nil
}

// addFile appends the regular file e to tw.
func addFile(tw *tar.Writer, e entry) error {
	f, err := os.Open(e.path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", e.path)
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     e.name,
		Mode:     e.mode,
		Size:     info.Size(),
		ModTime:  archiveMtime,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	if n, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	} else if n != info.Size() {
		return fmt.Errorf("%s: changed while archived", e.path)
	}
	return nil
}

// krewSelectorKeys are the labels krew sets on the machine it runs on; a
// selector may use no others.
var krewSelectorKeys = []string{"os", "arch"}

// validSHA256 and safePluginName are krew's patterns for a platform's
// sha256 and a plugin's name.
var (
	validSHA256    = regexp.MustCompile(`^[a-f0-9]{64}$`)
	safePluginName = regexp.MustCompile(`^[\w-]+$`)
)

// validateManifest checks m as krew's index validation does (apiVersion,
// kind, name, short description, semantic version, and per platform the
// uri, sha256, bin, files and selector), and that each platform's bin is one
// of the files it installs and no two platforms share a selector.
func validateManifest(m *manifest) error {
	if m.APIVersion != krewAPIVersion {
		return fmt.Errorf("apiVersion %q, krew wants %q", m.APIVersion, krewAPIVersion)
	}
	if m.Kind != krewKind {
		return fmt.Errorf("kind %q, krew wants %q", m.Kind, krewKind)
	}
	if !safePluginName.MatchString(m.Metadata.Name) {
		return fmt.Errorf("plugin name %q must match %s", m.Metadata.Name, safePluginName)
	}
	if m.Spec.ShortDescription == "" {
		return errors.New("no short description")
	}
	if !strings.HasPrefix(m.Spec.Version, "v") {
		return fmt.Errorf("version %q does not start with v", m.Spec.Version)
	}
	if _, err := utilversion.ParseSemantic(m.Spec.Version); err != nil {
		return fmt.Errorf("version %q: %w", m.Spec.Version, err)
	}
	if len(m.Spec.Platforms) == 0 {
		return errors.New("no platforms")
	}
	seen := map[string]bool{}
	for i, p := range m.Spec.Platforms {
		if err := validatePlatform(p); err != nil {
			return fmt.Errorf("platform %d: %w", i, err)
		}
		key := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		if seen[key] {
			return fmt.Errorf("platform %d: a second platform selecting %s", i, key)
		}
		seen[key] = true
	}
	return nil
}

// validatePlatform checks one platform of a manifest.
func validatePlatform(p platformSpec) error {
	if p.URI == "" {
		return errors.New("no uri")
	}
	if !validSHA256.MatchString(p.Sha256) {
		return fmt.Errorf("sha256 %q must match %s", p.Sha256, validSHA256)
	}
	if p.Bin == "" {
		return errors.New("no bin")
	}
	if len(p.Files) == 0 {
		return errors.New("no files")
	}
	if len(p.Selector.MatchLabels) == 0 {
		return errors.New("empty selector")
	}
	for k, v := range p.Selector.MatchLabels {
		if !slices.Contains(krewSelectorKeys, k) {
			return fmt.Errorf("selector key %q: krew knows only %q", k, krewSelectorKeys)
		}
		if v == "" {
			return fmt.Errorf("selector %s is empty", k)
		}
	}
	installed := false
	for _, f := range p.Files {
		if f.From == "" || f.To == "" {
			return fmt.Errorf("file %+v: from and to must be set", f)
		}
		if path.Join(f.To, path.Base(f.From)) == path.Clean(p.Bin) {
			installed = true
		}
	}
	if !installed {
		return fmt.Errorf("bin %q is not among the files installed", p.Bin)
	}
	return nil
}
