// Package cluster runs a real multi-node Kubernetes cluster on one machine
// without Docker: etcd and the control plane in the root network
// namespace, and every node in its own network and mount namespace with
// its own containerd, kubelet and kube-proxy. docs/dev/local-cluster.md
// describes the layout; cmd/shoal-cluster is its command line.
package cluster

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Network layout. One bridge in the root namespace; node N is at
// NodeIP(N) and owns the pod subnet PodCIDR(N).
const (
	BridgeName    = "shoal0"
	BridgeCIDR    = "172.31.250.1/24"
	ServiceCIDR   = "10.96.0.0/16"
	ClusterCIDR   = "10.244.0.0/16"
	APIServerPort = 6443
	RegistryPort  = 5000
	// TestRegistryPort is the first of TestRegistryPorts registry ports on
	// the bridge that every node's containerd trusts (plain HTTP) but that
	// the harness does not serve: an e2e test serves its own registry on
	// one of them when it needs one (authentication, throttling, failures,
	// counters), so that several such tests can run at once.
	TestRegistryPort = 5001
	// TestRegistryPorts is the number of test registry ports, from
	// TestRegistryPort on.
	TestRegistryPorts = 6
	// NodePrefix names the nodes: shoal-worker-1, shoal-worker-2, ...
	NodePrefix = "shoal-worker-"
)

var (
	// BridgeIP is where the apiserver and the registry listen.
	BridgeIP = net.IPv4(172, 31, 250, 1)
	// ServiceIP is the ClusterIP of the kubernetes Service.
	ServiceIP = net.IPv4(10, 96, 0, 1)
)

// Config says where the cluster lives and how big it is.
type Config struct {
	// Root is the repository root; the cluster's state is under Root/.cache,
	// the binaries it runs under MachineCacheDir.
	Root string
	// Nodes is the number of worker nodes.
	Nodes int
	// KubeVersion and EtcdVersion come from versions.env.
	KubeVersion, EtcdVersion string
}

// LoadConfig reads versions.env under root and returns a config for n
// nodes.
func LoadConfig(root string, nodes int) (*Config, error) {
	if nodes < 1 || nodes > 200 {
		return nil, fmt.Errorf("nodes: %d is out of range, use 1 to 200", nodes)
	}
	vars, err := readEnvFile(filepath.Join(root, "versions.env"))
	if err != nil {
		return nil, err
	}
	cfg := &Config{Root: root, Nodes: nodes, KubeVersion: vars["KUBE_VERSION"], EtcdVersion: vars["ETCD_VERSION"]}
	if cfg.KubeVersion == "" || cfg.EtcdVersion == "" {
		return nil, fmt.Errorf("versions.env: KUBE_VERSION and ETCD_VERSION must both be set")
	}
	return cfg, nil
}

// FindRoot walks up from dir to the directory holding versions.env.
func FindRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "versions.env")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no versions.env in %s or its parents: run from the Shoal repository", dir)
		}
	}
}

// CacheDir holds everything the cluster builds and runs (ignored by git).
func (c *Config) CacheDir() string { return filepath.Join(c.Root, ".cache") }

// MachineCacheDir holds what is built once per machine and shared by every
// checkout: the Kubernetes and etcd binaries. It is $SHOAL_CACHE_DIR if
// set, else $XDG_CACHE_HOME/shoal, else ~/.cache/shoal. `make clean-cache`
// removes it.
func MachineCacheDir() string {
	if d := os.Getenv("SHOAL_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "shoal")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "shoal")
	}
	return filepath.Join(os.TempDir(), "shoal-cache")
}

// BinDir holds the Kubernetes binaries of KubeVersion, in the machine-level
// cache, keyed by the version and the build flags (kubeBuildKey).
func (c *Config) BinDir() string {
	return filepath.Join(MachineCacheDir(), "kube-v"+c.KubeVersion+"-"+kubeBuildKey(c))
}

// EtcdBinary is the etcd binary of EtcdVersion, in the machine-level cache,
// keyed by the version and the build flags (etcdBuildKey).
func (c *Config) EtcdBinary() string {
	return filepath.Join(MachineCacheDir(), "etcd-v"+c.EtcdVersion+"-"+etcdBuildKey(), "etcd")
}

// StateDir holds the running cluster: PKI, etcd data, node dirs, logs.
func (c *Config) StateDir() string { return filepath.Join(c.CacheDir(), "cluster", "state") }

// LogDir holds one log file per component. It is outside the state dir so
// that the logs of a failed run survive the teardown that follows; a fresh
// Up starts it empty.
func (c *Config) LogDir() string { return filepath.Join(c.CacheDir(), "cluster", "logs") }

// PKIDir holds certificates, keys and per-identity kubeconfigs.
func (c *Config) PKIDir() string { return filepath.Join(c.StateDir(), "pki") }

// Kubeconfig is the admin kubeconfig users and tests read.
func (c *Config) Kubeconfig() string { return filepath.Join(c.CacheDir(), "cluster", "kubeconfig") }

// Kubectl is the kubectl users run.
func (c *Config) Kubectl() string { return filepath.Join(c.CacheDir(), "bin", "kubectl") }

// NodeDir is the host directory backing node's /var/lib, /etc and logs.
func (c *Config) NodeDir(node string) string { return filepath.Join(c.StateDir(), "nodes", node) }

// NodeNames lists the worker names.
func (c *Config) NodeNames() []string {
	names := make([]string, c.Nodes)
	for i := range names {
		names[i] = NodeName(i + 1)
	}
	return names
}

// NodeName is the name of node i (1-based).
func NodeName(i int) string { return fmt.Sprintf("%s%d", NodePrefix, i) }

// NodeIndex is the inverse of NodeName.
func NodeIndex(node string) (int, error) {
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(node, NodePrefix), "%d", &i); err != nil || !strings.HasPrefix(node, NodePrefix) || i < 1 {
		return 0, fmt.Errorf("node %q: names are %s<N>, N from 1", node, NodePrefix)
	}
	return i, nil
}

// NodeIP is the address of node i on the bridge.
func NodeIP(i int) net.IP { return net.IPv4(172, 31, 250, byte(10+i)) }

// PodCIDR is the pod subnet of node i.
func PodCIDR(i int) string { return fmt.Sprintf("10.244.%d.0/24", i) }

// VethName is the root-namespace end of node i's link.
func VethName(i int) string { return fmt.Sprintf("shoal-w%d", i) }

// Zone is the topology zone label of node i: zone-a, zone-b, zone-c, ...
func Zone(i int) string { return "zone-" + string(rune('a'+(i-1)%3)) }

// Registry is the registry address every node, pod and the host resolve.
func Registry() string { return fmt.Sprintf("%s:%d", BridgeIP, RegistryPort) }

// TestRegistry is the address of the first registry tests serve
// themselves (TestRegistryPort on the bridge). Nodes pull from it over
// plain HTTP; nothing listens there unless a test does.
func TestRegistry() string { return fmt.Sprintf("%s:%d", BridgeIP, TestRegistryPort) }

// TestRegistries are the addresses of all the test registry ports
// (TestRegistryPorts of them, from TestRegistry() on).
func TestRegistries() []string {
	out := make([]string, TestRegistryPorts)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", BridgeIP, TestRegistryPort+i)
	}
	return out
}

// APIServerURL is the apiserver's URL on the bridge.
func APIServerURL() string { return fmt.Sprintf("https://%s:%d", BridgeIP, APIServerPort) }

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	defer func() { _ = f.Close() }()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return vars, nil
}
