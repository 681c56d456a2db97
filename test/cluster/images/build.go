package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// TestserverPackage is the Go package of the testserver and pause binary.
const TestserverPackage = "github.com/shoal-io/shoal/test/images/testserver"

// BuildGoBinary builds the main package pkg (an import path or a pattern
// relative to the working directory, which must be inside pkg's module) as
// a static linux/goarch binary (CGO off, -trimpath; goarm is GOARM for
// goarch arm, empty for the default) into cacheDir and returns its path. It
// builds only when no binary of the same sources is cached: the file name
// carries a hash of the package's .go files and its module's go.mod and
// go.sum. Binaries of older sources of the same package and platform are
// removed.
func BuildGoBinary(ctx context.Context, pkg, goarch, goarm, cacheDir string) (string, error) {
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM="+goarm)
	info, err := listPackage(ctx, env, pkg)
	if err != nil {
		return "", err
	}
	if info.Name != "main" {
		return "", fmt.Errorf("build %s: package %s is not a main package", pkg, info.ImportPath)
	}
	sum, err := info.sourceHash(goarch, goarm)
	if err != nil {
		return "", err
	}
	variant := ""
	if goarch == "arm" && goarm != "" {
		variant = "v" + goarm
	}
	prefix := fmt.Sprintf("%s-linux-%s%s-", path.Base(info.ImportPath), goarch, variant)
	binary := filepath.Join(cacheDir, prefix+sum[:16])
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}

	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	tmp, err := os.CreateTemp(cacheDir, prefix+"*.tmp")
	if err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	_ = tmp.Close()
	defer os.Remove(tmp.Name())
	if _, err := goCmd(ctx, env, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", tmp.Name(), pkg); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), binary); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}

	stale, err := filepath.Glob(filepath.Join(cacheDir, prefix+"*"))
	if err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	for _, s := range stale {
		if s != binary && !strings.HasSuffix(s, ".tmp") {
			_ = os.Remove(s)
		}
	}
	return binary, nil
}

// goPackage is what BuildGoBinary needs to know of a package.
type goPackage struct {
	Name       string
	ImportPath string
	Dir        string
	GoFiles    []string
	Module     *struct{ GoMod string }
}

// listPackage describes pkg for the platform in env.
func listPackage(ctx context.Context, env []string, pkg string) (*goPackage, error) {
	out, err := goCmd(ctx, env, "list", "-json", pkg)
	if err != nil {
		return nil, err
	}
	var p goPackage
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("go list %s: %w", pkg, err)
	}
	return &p, nil
}

// sourceHash returns a hex SHA-256 of the platform, the package's .go files
// and its module's go.mod and go.sum.
func (p *goPackage) sourceHash(goarch, goarm string) (string, error) {
	files := make([]string, 0, len(p.GoFiles)+2)
	for _, f := range p.GoFiles {
		files = append(files, filepath.Join(p.Dir, f))
	}
	if p.Module != nil && p.Module.GoMod != "" {
		files = append(files, p.Module.GoMod, filepath.Join(filepath.Dir(p.Module.GoMod), "go.sum"))
	}

	h := sha256.New()
	fmt.Fprintf(h, "%s linux/%s %s\n", p.ImportPath, goarch, goarm)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) && filepath.Base(f) == "go.sum" {
			continue // a module without dependencies has no go.sum
		} else if err != nil {
			return "", fmt.Errorf("hash sources of %s: %w", p.ImportPath, err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// goCmd runs the go command with env and returns its standard output.
func goCmd(ctx context.Context, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
