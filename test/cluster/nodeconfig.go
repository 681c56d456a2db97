package cluster

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/shoal-io/shoal/test/cluster/pki"
)

// Inside a node, these host directories (under NodeDir) are mounted over
// the standard paths, so containerd and kubelet run with their defaults:
// the node's socket is /run/containerd/containerd.sock, as on any node.
var nodeMounts = []struct{ hostSubdir, path string }{
	{"var-lib", "/var/lib"},
	{"var-log", "/var/log"},
	{"etc-containerd", "/etc/containerd"},
	{"etc-cni", "/etc/cni"},
}

// ContainerdSocket is the runtime socket inside every node.
const ContainerdSocket = "/run/containerd/containerd.sock"

// writeNodeConfig writes the files node i needs before it starts:
// containerd's config and registry mirror, the CNI network, and the
// kubelet and kube-proxy configurations.
func writeNodeConfig(cfg *Config, b *pki.Bundle, i int) error {
	node := NodeName(i)
	dir := cfg.NodeDir(node)
	for _, m := range nodeMounts {
		if err := os.MkdirAll(filepath.Join(dir, m.hostSubdir), 0o755); err != nil {
			return fmt.Errorf("create %s dirs: %w", node, err)
		}
	}
	files := map[string]string{
		"etc-containerd/config.toml":      containerdConfig(),
		"etc-cni/net.d/10-shoal.conflist": cniConfig(i),
		"kubelet.yaml":                    kubeletConfig(b, node, i),
		"kube-proxy.yaml":                 kubeProxyConfig(b, node),
	}
	maps.Copy(files, registryHostFiles())
	return writeNodeFiles(dir, node, files)
}

// writeRegistryHosts (re)writes node i's containerd hosts.toml files, one
// per registry the nodes trust. containerd reads them at every pull, so
// this also updates a node that is already running.
func writeRegistryHosts(cfg *Config, i int) error {
	node := NodeName(i)
	return writeNodeFiles(cfg.NodeDir(node), node, registryHostFiles())
}

// RegistryHostsFile is the host path of node's containerd hosts.toml for
// registry host (host:port), e.g. RegistryHostsFile(cfg, node, TestRegistry()).
func RegistryHostsFile(cfg *Config, node, host string) string {
	return filepath.Join(cfg.NodeDir(node), "etc-containerd", "certs.d", host, "hosts.toml")
}

// registryHostFiles are containerd's hosts.toml files (paths relative to
// the node dir): plain HTTP for the harness's registry and for the test
// registries that e2e tests serve themselves.
func registryHostFiles() map[string]string {
	out := map[string]string{}
	for _, host := range append([]string{Registry()}, TestRegistries()...) {
		out[filepath.Join("etc-containerd", "certs.d", host, "hosts.toml")] = fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n", host)
	}
	return out
}

// writeNodeFiles writes files (paths relative to dir) for node.
func writeNodeFiles(dir, node string, files map[string]string) error {
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write %s config: %w", node, err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s config: %w", node, err)
		}
	}
	return nil
}

func containerdConfig() string {
	// restrict_oom_score_adj: this machine cannot lower oom_score_adj, and
	// without it every sandbox fails to start.
	return fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%s/pause:3.10"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
`, ContainerdSocket, Registry(), CNIBinDir)
}

func cniConfig(i int) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "shoal",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, PodCIDR(i))
}

func kubeletConfig(b *pki.Bundle, node string, i int) string {
	// failCgroupV1: kubelet 1.36 refuses cgroup v1 hosts by default.
	// cgroupRoot: two kubelets on one machine must not share one.
	// clusterDNS: see hostNameserver.
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
# Renew the node lease every 4s: with the controller-manager's 20s grace
# period a node survives a few late renewals on a busy 2-core machine.
nodeLeaseDurationSeconds: 16
clusterDomain: cluster.local
podCIDR: %s
%s`, NodeIP(i), b.NodeServingCert(node), b.NodeServingKey(node), b.CACert, ContainerdSocket, node, PodCIDR(i), clusterDNS(hostNameserver("/etc/resolv.conf")))
}

// clusterDNS is the kubelet setting for nameserver ns ("" leaves it out).
func clusterDNS(ns string) string {
	if ns == "" {
		return ""
	}
	return fmt.Sprintf("clusterDNS: [%s]\n", ns)
}

// hostNameserver returns the first nameserver of the resolv.conf at path
// that a node's pods can reach (not a loopback address), or "".
//
// The cluster runs no DNS service. Without clusterDNS, kubelet sends pods
// of the default dnsPolicy (ClusterFirst) to the host's resolv.conf
// anyway, but records a MissingClusterDNS Event on every pod sync: on a
// busy e2e run those Event writes were the apiserver's largest single
// load. Naming the host's nameserver keeps pods' DNS where it was, without
// the Events.
func hostNameserver(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if ip := net.ParseIP(f[1]); ip != nil && !ip.IsLoopback() {
			return ip.String()
		}
	}
	return ""
}

func kubeProxyConfig(b *pki.Bundle, node string) string {
	// conntrack.maxPerCore 0 leaves the host's conntrack table alone.
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
`, b.Kubeconfig(pki.Proxy), node, ClusterCIDR)
}

// nodeLabels are set by kubelet at registration: kind's plus a zone, under
// both its current key and the deprecated failure-domain.beta one that
// older manifests (OpenKruise's PersistentPodState example among them)
// still name, as cloud providers' nodes carry both.
func nodeLabels(i int) string {
	return strings.Join([]string{
		"topology.kubernetes.io/zone=" + Zone(i),
		"failure-domain.beta.kubernetes.io/zone=" + Zone(i),
		"shoal.io/test-cluster=true",
	}, ",")
}
