package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// platform is one os/arch[/variant] to build for.
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

// dirName returns the platform as one path element: os-arch[-variant].
func (p platform) dirName() string {
	return strings.ReplaceAll(p.String(), "/", "-")
}

// v1 returns the platform in go-containerregistry's form.
func (p platform) v1() v1.Platform {
	return v1.Platform{OS: p.os, Architecture: p.arch, Variant: p.variant}
}

// goEnv returns the GOOS, GOARCH and GOARM settings that build for p.
func (p platform) goEnv() []string {
	env := []string{"GOOS=" + p.os, "GOARCH=" + p.arch}
	if p.arch == "arm" {
		env = append(env, "GOARM="+strings.TrimPrefix(p.variant, "v"))
	}
	return env
}

// supportedArches are the architectures (and the variants each accepts) the
// images can be built for.
var supportedArches = map[string][]string{
	"amd64": {""},
	"arm64": {"", "v8"},
	"arm":   {"v6", "v7"},
}

// parsePlatforms parses a list of os/arch[/variant] separated by commas or
// white space (the Makefile's PLATFORMS). Only linux is supported; arm needs
// a variant (v6 or v7). Duplicates are an error.
func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	items := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	for _, item := range items {
		parts := strings.Split(item, "/")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("platform %q: want os/arch[/variant]", item)
		}
		p := platform{os: parts[0], arch: parts[1]}
		if len(parts) == 3 {
			p.variant = parts[2]
		}
		if p.os != "linux" {
			return nil, fmt.Errorf("platform %q: only linux is supported", item)
		}
		variants, ok := supportedArches[p.arch]
		if !ok {
			return nil, fmt.Errorf("platform %q: unsupported architecture %q", item, p.arch)
		}
		if !slices.Contains(variants, p.variant) {
			return nil, fmt.Errorf("platform %q: variant %q of %s is not one of %q", item, p.variant, p.arch, variants)
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("platform %q listed twice", item)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platforms in %q", s)
	}
	return out, nil
}

// buildBinary builds the main package pkg (relative to srcDir, which must be
// inside its module) as a static binary for p (CGO off, -trimpath, no VCS
// stamp, main.version set to version) into outDir and returns its path.
func buildBinary(ctx context.Context, srcDir, pkg string, p platform, version, outDir string) (string, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("build %s for %s: %w", pkg, p, err)
	}
	out := filepath.Join(outDir, path.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build",
		"-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -X main.version="+version,
		"-o", out, pkg)
	cmd.Dir = srcDir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), p.goEnv()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s for %s: %w: %s", pkg, p, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
