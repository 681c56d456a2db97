// Package framework is Shoal's end-to-end test framework: clients for a
// running cluster, a namespace per test that is deleted afterwards, bounded
// wait helpers, exec and logs, and artifact collection when a test fails.
//
// It talks to whatever cluster KUBECONFIG names (the local cluster of
// test/cluster, kind, or any other), so the suites built on it run unchanged
// everywhere.
package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables read by Load.
const (
	// EnvKubeconfig names the kubeconfig of the cluster under test.
	EnvKubeconfig = "KUBECONFIG"
	// EnvRegistry is the host:port of a registry the cluster's nodes pull
	// from, holding pause:3.10, busybox:latest and testserver:latest.
	EnvRegistry = "SHOAL_REGISTRY"
	// EnvArtifacts is the directory that receives the artifacts of failed
	// tests.
	EnvArtifacts = "SHOAL_E2E_ARTIFACTS"
	// EnvClusterLogs optionally names a directory of component log files
	// (etcd, apiserver, kubelets, ...) copied into a failed test's artifacts.
	EnvClusterLogs = "SHOAL_CLUSTER_LOGS"
)

// ErrNotConfigured is wrapped by Load's error when a required variable is
// unset: the suite has no cluster to run against and should be skipped.
var ErrNotConfigured = errors.New("e2e cluster not configured")

// Config is the e2e suite's configuration, read from the environment.
type Config struct {
	// Kubeconfig is the path of the cluster's kubeconfig (or a list of paths,
	// as kubectl accepts).
	Kubeconfig string
	// Registry is the registry host:port that test images are pulled from.
	Registry string
	// ArtifactsDir receives one directory of artifacts per failed test.
	ArtifactsDir string
	// ClusterLogsDir, when set, holds component logs to copy on failure.
	ClusterLogsDir string
}

// Load reads the Config from the environment. A missing required variable
// is an error wrapping ErrNotConfigured that names the variable and how to
// set it; a variable that is set but wrong (a kubeconfig that does not
// exist) is a plain error.
func Load() (*Config, error) {
	cfg := &Config{
		Kubeconfig:     os.Getenv(EnvKubeconfig),
		Registry:       os.Getenv(EnvRegistry),
		ArtifactsDir:   os.Getenv(EnvArtifacts),
		ClusterLogsDir: os.Getenv(EnvClusterLogs),
	}
	var missing []string
	if cfg.Kubeconfig == "" {
		missing = append(missing, EnvKubeconfig+" is not set: point it at the cluster's kubeconfig")
	}
	if cfg.Registry == "" {
		missing = append(missing, EnvRegistry+" is not set: the registry host:port holding pause:3.10, busybox:latest and testserver:latest")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf(`%w: %s (for the local cluster run: eval "$(make -s cluster-env)")`,
			ErrNotConfigured, strings.Join(missing, "; "))
	}
	for _, path := range filepath.SplitList(cfg.Kubeconfig) {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s: %w (is the cluster up? make cluster-up)", EnvKubeconfig, err)
		}
	}
	if cfg.ArtifactsDir == "" {
		cfg.ArtifactsDir = filepath.Join(os.TempDir(), "shoal-e2e-artifacts")
	}
	return cfg, nil
}

// Image returns the reference of a test image in the configured registry,
// e.g. Image("busybox:latest").
func (c *Config) Image(nameAndTag string) string {
	return c.Registry + "/" + nameAndTag
}
