package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/test/cluster/pki"
)

func TestTestRegistryAddress(t *testing.T) {
	require.Equal(t, "172.31.250.1:5000", Registry())
	require.Equal(t, "172.31.250.1:5001", TestRegistry())
	require.NotEqual(t, RegistryPort, TestRegistryPort)
	require.Equal(t, []string{"172.31.250.1:5001", "172.31.250.1:5002", "172.31.250.1:5003",
		"172.31.250.1:5004", "172.31.250.1:5005", "172.31.250.1:5006"}, TestRegistries())
}

// TestWriteNodeConfigRegistryHosts: every node trusts the harness's
// registry and the test registries over plain HTTP, through containerd's
// certs.d, and its containerd reads certs.d.
func TestWriteNodeConfigRegistryHosts(t *testing.T) {
	cfg := &Config{Root: t.TempDir(), Nodes: 2}
	b := &pki.Bundle{Dir: filepath.Join(cfg.Root, "pki")}
	require.NoError(t, writeNodeConfig(cfg, b, 2))

	node := NodeName(2)
	for _, host := range []string{"172.31.250.1:5000", "172.31.250.1:5001", "172.31.250.1:5006"} {
		path := RegistryHostsFile(cfg, node, host)
		require.Equal(t, filepath.Join(cfg.NodeDir(node), "etc-containerd", "certs.d", host, "hosts.toml"), path)
		got, err := os.ReadFile(path)
		require.NoError(t, err, "hosts.toml of %s", host)
		require.Equal(t, "server = \"http://"+host+"\"\n\n[host.\"http://"+host+"\"]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n", string(got))
	}
	entries, err := os.ReadDir(filepath.Join(cfg.NodeDir(node), "etc-containerd", "certs.d"))
	require.NoError(t, err)
	require.Len(t, entries, 1+TestRegistryPorts, "exactly the harness's registry and the test registries")

	conf, err := os.ReadFile(filepath.Join(cfg.NodeDir(node), "etc-containerd", "config.toml"))
	require.NoError(t, err)
	require.Contains(t, string(conf), `config_path = "/etc/containerd/certs.d"`)
	require.Contains(t, string(conf), `sandbox_image = "172.31.250.1:5000/pause:3.10"`)
}

// TestWriteRegistryHostsRefreshesRunningNode: a node configured by an
// older harness, without the test registry's hosts.toml, gets it (and
// nothing else is touched).
func TestWriteRegistryHostsRefreshesRunningNode(t *testing.T) {
	cfg := &Config{Root: t.TempDir(), Nodes: 1}
	node := NodeName(1)
	kubelet := filepath.Join(cfg.NodeDir(node), "kubelet.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(kubelet), 0o755))
	require.NoError(t, os.WriteFile(kubelet, []byte("untouched"), 0o644))

	require.NoError(t, writeRegistryHosts(cfg, 1))
	for _, host := range append([]string{Registry()}, TestRegistries()...) {
		got, err := os.ReadFile(RegistryHostsFile(cfg, node, host))
		require.NoError(t, err)
		require.Contains(t, string(got), `server = "http://`+host+`"`)
	}
	got, err := os.ReadFile(kubelet)
	require.NoError(t, err)
	require.Equal(t, "untouched", string(got))
	// Idempotent.
	require.NoError(t, writeRegistryHosts(cfg, 1))
}

// TestHostNameserver: kubelet's clusterDNS is the host's first nameserver
// a pod can reach; none leaves the setting out.
func TestHostNameserver(t *testing.T) {
	for _, tc := range []struct {
		name, conf, want string
	}{
		{"first reachable", "# generated\nsearch example.org\nnameserver 10.255.255.53\nnameserver 10.0.0.2\n", "10.255.255.53"},
		{"loopback skipped", "nameserver 127.0.0.53\nnameserver 192.0.2.53\n", "192.0.2.53"},
		{"only loopback", "nameserver 127.0.0.53\n", ""},
		{"none", "search example.org\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resolv.conf")
			require.NoError(t, os.WriteFile(path, []byte(tc.conf), 0o644))
			require.Equal(t, tc.want, hostNameserver(path))
			if tc.want == "" {
				require.Empty(t, clusterDNS(hostNameserver(path)))
			} else {
				require.Equal(t, "clusterDNS: ["+tc.want+"]\n", clusterDNS(hostNameserver(path)))
			}
		})
	}
	require.Empty(t, hostNameserver(filepath.Join(t.TempDir(), "missing")))
}
