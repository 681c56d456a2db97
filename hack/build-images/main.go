// Command build-images builds Shoal's container images without Docker:
// it cross-compiles shoal-agent, shoal-coordinator and kubectl-kruise for
// each platform, wraps every binary in a one-layer image built from scratch,
// gathers one program's images in an OCI image index and, with --push,
// pushes the index to <registry>/shoal/<program>:<tag> over plain HTTP.
//
//	go run ./hack/build-images --registry 127.0.0.1:5000 --tag dev --push --out .cache/images.txt
//
// It prints one line per program, "<program> <registry>/shoal/<program>:<tag>@<digest>",
// and writes the same lines to --out; hack/deploy.sh turns them into
// kustomize image overrides. Layers carry fixed timestamps and owners, so
// identical binaries give identical digests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/shoal-io/shoal/internal/ociimage"
)

// defaultPlatforms are the platforms Shoal ships for (the Makefile's
// PLATFORMS).
const defaultPlatforms = "linux/amd64,linux/arm64,linux/arm/v7"

// options are the command line of build-images.
type options struct {
	registry  string
	tag       string
	platforms []platform
	push      bool
	out       string
	version   string
	srcDir    string
	cacheDir  string
	programs  []program
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	var usage usageError
	if errors.As(err, &usage) {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ error }

// run parses args, builds every program for every platform and pushes (or
// only computes) the indexes, writing the result lines to stdout and --out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(ctx, args, stderr)
	if err != nil {
		return err
	}
	var lines []string
	for _, p := range opts.programs {
		ref := fmt.Sprintf("%s/shoal/%s:%s", opts.registry, p.name, opts.tag)
		var entries []indexEntry
		for _, pl := range opts.platforms {
			fmt.Fprintf(stderr, "build %s for %s\n", p.name, pl)
			bin, err := buildBinary(ctx, opts.srcDir, "./cmd/"+p.name, pl, opts.version, filepath.Join(opts.cacheDir, pl.dirName()))
			if err != nil {
				return err
			}
			data, err := os.ReadFile(bin)
			if err != nil {
				return fmt.Errorf("read binary of %s for %s: %w", p.name, pl, err)
			}
			img, err := newImage(p, pl, data)
			if err != nil {
				return fmt.Errorf("image of %s for %s: %w", p.name, pl, err)
			}
			entries = append(entries, indexEntry{platform: pl, image: img})
		}
		idx, err := newIndex(entries)
		if err != nil {
			return fmt.Errorf("index of %s: %w", p.name, err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return fmt.Errorf("digest of %s: %w", p.name, err)
		}
		if opts.push {
			fmt.Fprintf(stderr, "push %s\n", ref)
			if err := ociimage.Push(ctx, ref, idx); err != nil {
				return err
			}
		}
		line := fmt.Sprintf("%s %s@%s", p.name, ref, digest)
		fmt.Fprintln(stdout, line)
		lines = append(lines, line)
	}
	if opts.out != "" {
		if err := writeFileAtomic(opts.out, []byte(strings.Join(lines, "\n")+"\n")); err != nil {
			return fmt.Errorf("write %s: %w", opts.out, err)
		}
	}
	return nil
}

// parseFlags parses the command line into options.
func parseFlags(ctx context.Context, args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("build-images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts      options
		platforms string
		programs  string
	)
	fs.StringVar(&opts.registry, "registry", os.Getenv("SHOAL_REGISTRY"), "registry host:port to name (and push) the images in (default $SHOAL_REGISTRY)")
	fs.StringVar(&opts.tag, "tag", "dev", "tag of every image index")
	fs.StringVar(&platforms, "platforms", defaultPlatforms, "os/arch[/variant] list, separated by commas or spaces")
	fs.BoolVar(&opts.push, "push", false, "push the image indexes over plain HTTP (without it, only build and print the digests)")
	fs.StringVar(&opts.out, "out", "", "file to write the \"<program> <ref>@<digest>\" lines to")
	fs.StringVar(&opts.version, "version", "", "version stamped into main.version (default: git describe --always --dirty)")
	fs.StringVar(&opts.srcDir, "src", ".", "module directory holding cmd/<program>")
	fs.StringVar(&opts.cacheDir, "cache-dir", ".cache/build-images", "directory for the built binaries")
	fs.StringVar(&programs, "programs", strings.Join(programNames(), ","), "comma-separated programs to build (of "+strings.Join(programNames(), ", ")+")")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: build-images --registry HOST:PORT [--tag dev] [--platforms "+defaultPlatforms+"] [--push] [--out FILE]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if opts.registry == "" {
		return nil, usageError{errors.New("--registry is required (or set SHOAL_REGISTRY)")}
	}
	if opts.tag == "" {
		return nil, usageError{errors.New("--tag must not be empty")}
	}
	var err error
	if opts.platforms, err = parsePlatforms(platforms); err != nil {
		return nil, usageError{err}
	}
	if opts.programs, err = selectPrograms(programs); err != nil {
		return nil, usageError{err}
	}
	if opts.version == "" {
		if opts.version, err = gitVersion(ctx, opts.srcDir); err != nil {
			return nil, err
		}
	}
	if opts.cacheDir, err = filepath.Abs(opts.cacheDir); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	return &opts, nil
}

// gitVersion returns `git describe --always --dirty` of dir, or "unknown"
// when dir is not in a git work tree.
func gitVersion(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) || errors.Is(err, exec.ErrNotFound) {
			return "unknown", nil
		}
		return "", fmt.Errorf("git describe: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, creating the directory if needed.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
