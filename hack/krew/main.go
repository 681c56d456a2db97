// Command krew packs the kubectl-kruise binaries `make build` left in
// bin/<os>-<arch>[-<variant>]/ into one release archive per platform,
// kubectl-kruise_<version>_<os>_<arch>[<variant>].tar.gz, and writes the
// krew plugin manifest naming them (kruise.yaml, with each archive's sha256)
// next to them:
//
//	go run ./hack/krew --version v0.1.0 \
//	  --uri-base https://github.com/shoal-io/shoal/releases/download/v0.1.0 \
//	  --platforms "linux/amd64 linux/arm64 linux/arm/v7" --file LICENSE
//
// The archives are deterministic: the same binaries and files give the same
// bytes, so the manifest's sha256 values change only when they do.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// defaultPlatforms are the Makefile's PLATFORMS.
const defaultPlatforms = "linux/amd64 linux/arm64 linux/arm/v7"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "krew:", err)
		}
		os.Exit(1)
	}
}

// run parses args, builds the archives and the manifest, and prints what it
// wrote to stdout.
func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	m, err := build(*cfg)
	if err != nil {
		return err
	}
	for _, p := range m.Spec.Platforms {
		fmt.Fprintf(stdout, "%s  %s\n", p.Sha256, p.URI)
	}
	fmt.Fprintf(stdout, "manifest %s/%s (version %s)\n", cfg.outDir, manifestName, m.Spec.Version)
	return nil
}

// parseFlags parses the command line into a config.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("krew", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg       config
		platforms string
		files     stringList
	)
	fs.StringVar(&cfg.version, "version", "", "the plugin's version, as stamped into its binaries (required)")
	fs.StringVar(&cfg.uriBase, "uri-base", "", "URL the archives are downloaded from, without the file name (required)")
	fs.StringVar(&cfg.homepage, "homepage", "https://github.com/shoal-io/shoal", "the manifest's homepage")
	fs.StringVar(&cfg.binDir, "bin-dir", "bin", "directory holding <os>-<arch>[-<variant>]/"+binName)
	fs.StringVar(&cfg.outDir, "out", "bin/krew", "directory to write the archives and "+manifestName+" to")
	fs.StringVar(&platforms, "platforms", defaultPlatforms, "os/arch[/variant] list, separated by commas or spaces")
	fs.Var(&files, "file", "a file to pack next to the binary, as a LICENSE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.version == "" || cfg.uriBase == "" {
		return nil, errors.New("--version and --uri-base are required")
	}
	var err error
	if cfg.platforms, err = parsePlatforms(platforms); err != nil {
		return nil, err
	}
	cfg.files = files
	return &cfg, nil
}

// stringList is a repeatable string flag.
type stringList []string

// String returns the values joined by commas.
func (l *stringList) String() string { return fmt.Sprint([]string(*l)) }

// Set appends a value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
