package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// KubeBinaries are the Kubernetes programs the cluster runs.
var KubeBinaries = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"}

// buildEnv is the environment both builds add to the user's.
var buildEnv = []string{"CGO_ENABLED=0"}

// kubeLdflags are the linker flags of the Kubernetes build: stripped, with
// the version stamped in (without it the binaries report v0.0.0-master).
func kubeLdflags(cfg *Config) string {
	ldflags := []string{"-s", "-w"}
	minor := strings.SplitN(cfg.KubeVersion, ".", 3)[1]
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ldflags = append(ldflags,
			"-X", pkg+".gitVersion=v"+cfg.KubeVersion,
			"-X", pkg+".gitMajor=1",
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean")
	}
	return strings.Join(ldflags, " ")
}

// etcdLdflags are the linker flags of the etcd build.
const etcdLdflags = "-s -w"

// kubeBuildKey and etcdBuildKey name a build's cache directory together
// with the version: a change of flags, environment or binary list builds
// into a new directory instead of reusing binaries built another way.
func kubeBuildKey(cfg *Config) string {
	return buildKey(kubeLdflags(cfg), strings.Join(buildEnv, " "), strings.Join(KubeBinaries, " "))
}

func etcdBuildKey() string { return buildKey(etcdLdflags, strings.Join(buildEnv, " ")) }

func buildKey(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:4])
}

// EnsureBinaries builds the Kubernetes binaries and etcd from the Go module
// proxy unless the machine-level cache (MachineCacheDir) already holds them
// for the configured versions and flags, and installs kubectl at
// Config.Kubectl. Progress goes to log.
func EnsureBinaries(ctx context.Context, cfg *Config, log io.Writer) error {
	if !allExecutable(cfg.BinDir(), KubeBinaries) {
		_, _ = fmt.Fprintf(log, "building Kubernetes v%s into %s from the module proxy; the first build takes several minutes\n",
			cfg.KubeVersion, cfg.BinDir())
		if err := buildKube(ctx, cfg, log); err != nil {
			return err
		}
	}
	if !executable(cfg.EtcdBinary()) {
		_, _ = fmt.Fprintf(log, "building etcd v%s into %s from the module proxy\n", cfg.EtcdVersion, filepath.Dir(cfg.EtcdBinary()))
		if err := buildEtcd(ctx, cfg, log); err != nil {
			return err
		}
	}
	return installFile(filepath.Join(cfg.BinDir(), "kubectl"), cfg.Kubectl(), 0o755)
}

// buildKube builds k8s.io/kubernetes commands in a throwaway module. The
// kubernetes module replaces its staging modules with local paths, which
// the module proxy cannot serve; the throwaway module replaces each of them
// with its published v0.<minor>.<patch> instead.
func buildKube(ctx context.Context, cfg *Config, log io.Writer) error {
	dir := filepath.Join(MachineCacheDir(), "build", "k8s-v"+cfg.KubeVersion)
	kubeDir, err := moduleDir(ctx, dir, "k8s.io/kubernetes@v"+cfg.KubeVersion)
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(kubeDir, "go.mod"))
	if err != nil {
		return fmt.Errorf("read k8s.io/kubernetes go.mod: %w", err)
	}
	staging := regexp.MustCompile(`(?m)^\s+(k8s\.io/[a-z0-9-]+) => \./staging/`).FindAllSubmatch(gomod, -1)
	if len(staging) == 0 {
		return fmt.Errorf("k8s.io/kubernetes v%s go.mod replaces no staging modules: unexpected layout", cfg.KubeVersion)
	}
	libVersion := "v0." + strings.SplitN(cfg.KubeVersion, ".", 2)[1]
	var mod strings.Builder
	fmt.Fprintf(&mod, "module shoal.local/k8sbuild\n\ngo 1.26\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n", cfg.KubeVersion)
	for _, m := range staging {
		fmt.Fprintf(&mod, "\t%s => %s %s\n", m[1], m[1], libVersion)
	}
	mod.WriteString(")\n")
	var imports strings.Builder
	imports.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	var pkgs []string
	for _, c := range KubeBinaries {
		fmt.Fprintf(&imports, "\t_ %q\n", "k8s.io/kubernetes/cmd/"+c)
		pkgs = append(pkgs, "k8s.io/kubernetes/cmd/"+c)
	}
	imports.WriteString(")\n")
	if err := writeModule(dir, mod.String(), imports.String()); err != nil {
		return err
	}
	if err := goCmd(ctx, dir, log, nil, "mod", "tidy"); err != nil {
		return err
	}
	return buildInto(cfg.BinDir(), func(tmp string) error {
		args := append([]string{"build", "-trimpath", "-ldflags", kubeLdflags(cfg), "-o", tmp + "/"}, pkgs...)
		if err := goCmd(ctx, dir, log, buildEnv, args...); err != nil {
			return err
		}
		// The kube-* daemons answer --version.
		return checkVersion(ctx, filepath.Join(tmp, "kube-apiserver"), "v"+cfg.KubeVersion)
	})
}

// buildEtcd builds etcd's server module (its main package is the etcd
// binary) in a throwaway module.
func buildEtcd(ctx context.Context, cfg *Config, log io.Writer) error {
	dir := filepath.Join(MachineCacheDir(), "build", "etcd-v"+cfg.EtcdVersion)
	mod := fmt.Sprintf("module shoal.local/etcdbuild\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n", cfg.EtcdVersion)
	imports := "//go:build tools\n\npackage tools\n\nimport _ \"go.etcd.io/etcd/server/v3\"\n"
	if err := writeModule(dir, mod, imports); err != nil {
		return err
	}
	if err := goCmd(ctx, dir, log, nil, "mod", "tidy"); err != nil {
		return err
	}
	return buildInto(filepath.Dir(cfg.EtcdBinary()), func(tmp string) error {
		return goCmd(ctx, dir, log, buildEnv, "build", "-trimpath", "-ldflags", etcdLdflags,
			"-o", filepath.Join(tmp, "etcd"), "go.etcd.io/etcd/server/v3")
	})
}

// buildInto fills the directory final atomically: build writes into a
// fresh temporary directory next to it, which is renamed to final only
// when build succeeded. An interrupted or failed build never leaves a
// half-filled final directory; when another build finished first, its
// result is kept and this one dropped.
func buildInto(final string, build func(tmp string) error) error {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(final), err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), filepath.Base(final)+".tmp-")
	if err != nil {
		return fmt.Errorf("build into %s: %w", final, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("build into %s: %w", final, err)
	}
	if err := build(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return nil // another build got there first
		}
		return fmt.Errorf("install %s: %w", final, err)
	}
	return nil
}

func allExecutable(dir string, names []string) bool {
	for _, n := range names {
		if !executable(filepath.Join(dir, n)) {
			return false
		}
	}
	return true
}

func writeModule(dir, gomod, tools string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create build module: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return fmt.Errorf("write build module: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(tools), 0o644); err != nil {
		return fmt.Errorf("write build module: %w", err)
	}
	return nil
}

// moduleDir downloads module@version and returns its directory in the
// module cache.
func moduleDir(ctx context.Context, dir, moduleAtVersion string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", moduleAtVersion, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s %v", moduleAtVersion, info.Error, err)
	}
	return info.Dir, nil
}

func goCmd(ctx context.Context, dir string, log io.Writer, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w", strings.Join(args[:1], " "), dir, err)
	}
	return nil
}

// checkVersion makes sure the version ldflags took effect: without them
// the binaries report v0.0.0-master.
func checkVersion(ctx context.Context, bin, want string) error {
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w: %s", bin, err, out)
	}
	if !bytes.Contains(out, []byte(want)) {
		return fmt.Errorf("%s reports %q, want %s: version ldflags did not apply", bin, bytes.TrimSpace(out), want)
	}
	return nil
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

func installFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return os.Rename(tmp, dst)
}
