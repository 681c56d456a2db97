package pki_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shoal-io/shoal/test/cluster/pki"
)

const apiServerURL = "https://172.31.250.1:6443"

var nodes = []string{"shoal-worker-1", "shoal-worker-2"}

func testOptions() pki.Options {
	return pki.Options{
		APIServerIPs:      []net.IP{net.ParseIP("172.31.250.1")},
		APIServerDNSNames: []string{"shoal-control-plane"},
		ServiceIP:         net.ParseIP("10.96.0.1"),
		Nodes:             slices.Clone(nodes),
		NodeIPs: map[string]net.IP{
			"shoal-worker-1": net.ParseIP("172.31.250.11"),
			"shoal-worker-2": net.ParseIP("172.31.250.12"),
			"shoal-worker-3": net.ParseIP("172.31.250.13"),
		},
		APIServerURL: apiServerURL,
		ClusterName:  "shoal",
	}
}

func generate(t *testing.T, dir string, opts pki.Options) *pki.Bundle {
	t.Helper()
	b, err := pki.Generate(dir, opts)
	require.NoError(t, err)
	return b
}

// leaf describes what a generated certificate must look like.
type leaf struct {
	cert, key, ca string
	usage         x509.ExtKeyUsage
	cn            string
	orgs          []string
	dnsNames      []string
	ips           []string
}

func expectedLeaves(b *pki.Bundle, opts pki.Options) map[string]leaf {
	server, client := x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth
	leaves := map[string]leaf{
		"apiserver": {cert: b.APIServerCert, key: b.APIServerKey, ca: b.CACert, usage: server, cn: "kube-apiserver",
			dnsNames: append([]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"}, opts.APIServerDNSNames...),
			ips: append(ipStrings(opts.APIServerIPs), "10.96.0.1", "127.0.0.1")},
		"apiserver-kubelet-client": {cert: b.APIServerKubeletClientCert, key: b.APIServerKubeletClientKey,
			ca: b.CACert, usage: client, cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		"front-proxy-client": {cert: b.FrontProxyClientCert, key: b.FrontProxyClientKey, ca: b.FrontProxyCACert,
			usage: client, cn: "front-proxy-client"},
		"admin": {cert: b.ClientCert(pki.Admin), key: b.ClientKey(pki.Admin), ca: b.CACert, usage: client,
			cn: "kubernetes-admin", orgs: []string{"system:masters"}},
		"kube-controller-manager": {cert: b.ClientCert(pki.ControllerManager), key: b.ClientKey(pki.ControllerManager),
			ca: b.CACert, usage: client, cn: "system:kube-controller-manager"},
		"kube-scheduler": {cert: b.ClientCert(pki.Scheduler), key: b.ClientKey(pki.Scheduler), ca: b.CACert,
			usage: client, cn: "system:kube-scheduler"},
		"kube-proxy": {cert: b.ClientCert(pki.Proxy), key: b.ClientKey(pki.Proxy), ca: b.CACert, usage: client,
			cn: "system:kube-proxy"},
	}
	for _, node := range opts.Nodes {
		leaves[node+" client"] = leaf{cert: b.NodeClientCert(node), key: b.NodeClientKey(node), ca: b.CACert,
			usage: client, cn: "system:node:" + node, orgs: []string{"system:nodes"}}
		leaves[node+" serving"] = leaf{cert: b.NodeServingCert(node), key: b.NodeServingKey(node), ca: b.CACert,
			usage: server, cn: node, dnsNames: []string{node}, ips: []string{opts.NodeIPs[node].String()}}
	}
	return leaves
}

// requireValidBundle checks every certificate and kubeconfig in b.
func requireValidBundle(t *testing.T, b *pki.Bundle, opts pki.Options) {
	t.Helper()
	for name, want := range expectedLeaves(b, opts) {
		pair, err := tls.LoadX509KeyPair(want.cert, want.key) // also checks that they match
		require.NoError(t, err, name)
		cert := pair.Leaf
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool(t, want.ca), KeyUsages: []x509.ExtKeyUsage{want.usage}})
		require.NoError(t, err, name)
		require.Equal(t, want.cn, cert.Subject.CommonName, name)
		require.ElementsMatch(t, want.orgs, cert.Subject.Organization, name)
		require.ElementsMatch(t, want.dnsNames, cert.DNSNames, name)
		require.ElementsMatch(t, want.ips, ipStrings(cert.IPAddresses), name)
		for _, host := range append(want.dnsNames, want.ips...) {
			_, err := cert.Verify(x509.VerifyOptions{Roots: pool(t, want.ca), DNSName: host,
				KeyUsages: []x509.ExtKeyUsage{want.usage}})
			require.NoError(t, err, "%s for %s", name, host)
		}
		require.WithinDuration(t, time.Now().Add(365*24*time.Hour), cert.NotAfter, 2*time.Hour, name)
	}

	for _, ca := range []string{b.CACert, b.FrontProxyCACert} {
		cert := readCert(t, ca)
		require.True(t, cert.IsCA, ca)
		require.Equal(t, x509.KeyUsageCertSign, cert.KeyUsage&x509.KeyUsageCertSign, ca)
	}
	require.NotEqual(t, readCert(t, b.CACert).Raw, readCert(t, b.FrontProxyCACert).Raw)

	saKey, err := os.ReadFile(b.ServiceAccountKey)
	require.NoError(t, err)
	block, _ := pem.Decode(saKey)
	require.NotNil(t, block)
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	require.NoError(t, err)
	require.Equal(t, 2048, key.N.BitLen())
	saPub, err := os.ReadFile(b.ServiceAccountPub)
	require.NoError(t, err)
	block, _ = pem.Decode(saPub)
	require.NotNil(t, block)
	require.Equal(t, "PUBLIC KEY", block.Type)
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	require.NoError(t, err)
	require.True(t, key.PublicKey.Equal(pub.(*rsa.PublicKey)), "sa.pub does not match sa.key")

	kubeconfigs := map[string]leaf{
		b.Kubeconfig(pki.Admin):             {cn: "kubernetes-admin", orgs: []string{"system:masters"}},
		b.Kubeconfig(pki.ControllerManager): {cn: "system:kube-controller-manager"},
		b.Kubeconfig(pki.Scheduler):         {cn: "system:kube-scheduler"},
		b.Kubeconfig(pki.Proxy):             {cn: "system:kube-proxy"},
	}
	for _, node := range opts.Nodes {
		kubeconfigs[b.NodeKubeconfig(node)] = leaf{cn: "system:node:" + node, orgs: []string{"system:nodes"}}
	}
	caPEM, err := os.ReadFile(b.CACert)
	require.NoError(t, err)
	for path, want := range kubeconfigs {
		cfg, err := clientcmd.LoadFromFile(path)
		require.NoError(t, err, path)
		ctx := cfg.Contexts[cfg.CurrentContext]
		require.NotNil(t, ctx, path)
		cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
		require.NotNil(t, cluster, path)
		require.NotNil(t, user, path)
		require.Equal(t, opts.APIServerURL, cluster.Server, path)
		require.Equal(t, caPEM, cluster.CertificateAuthorityData, path)
		pair, err := tls.X509KeyPair(user.ClientCertificateData, user.ClientKeyData)
		require.NoError(t, err, path)
		require.Equal(t, want.cn, pair.Leaf.Subject.CommonName, path)
		require.ElementsMatch(t, want.orgs, pair.Leaf.Subject.Organization, path)
		_, err = pair.Leaf.Verify(x509.VerifyOptions{Roots: pool(t, b.CACert),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err, path)
	}
}

func TestGenerate(t *testing.T) {
	opts := testOptions()
	b := generate(t, t.TempDir(), opts)
	requireValidBundle(t, b, opts)
}

func TestGenerateFileModes(t *testing.T) {
	b := generate(t, t.TempDir(), testOptions())
	files, err := os.ReadDir(b.Dir)
	require.NoError(t, err)
	var secrets int
	for _, f := range files {
		info, err := f.Info()
		require.NoError(t, err)
		want := fs.FileMode(0o644)
		if ext := filepath.Ext(f.Name()); ext == ".key" || ext == ".kubeconfig" {
			want = 0o600
			secrets++
		}
		require.Equal(t, want, info.Mode().Perm(), f.Name())
	}
	// 10 keys of their own + 2 per node, 4 kubeconfigs + 1 per node.
	require.Equal(t, 10+2*len(nodes)+4+len(nodes), secrets)
}

func TestGenerateReusesValidFiles(t *testing.T) {
	dir := t.TempDir()
	generate(t, dir, testOptions())
	before := snapshot(t, dir)
	generate(t, dir, testOptions())
	require.Equal(t, before, snapshot(t, dir))
}

// TestGenerateRecreates changes the options or the files and checks that
// exactly the affected files are rewritten and the result is valid again.
func TestGenerateRecreates(t *testing.T) {
	everythingFromCA := []string{"ca.*", "apiserver.*", "apiserver-kubelet-client.*", "admin.*",
		"kube-controller-manager.*", "kube-scheduler.*", "kube-proxy.*", "node-*", "*.kubeconfig"}
	tests := []struct {
		name   string
		change func(t *testing.T, b *pki.Bundle, opts *pki.Options)
		// changed are glob patterns, each matching at least one file, of
		// exactly the files that must be created, rewritten or removed.
		changed []string
	}{{
		name: "node added",
		change: func(_ *testing.T, _ *pki.Bundle, opts *pki.Options) {
			opts.Nodes = append(opts.Nodes, "shoal-worker-3")
		},
		changed: []string{"node-shoal-worker-3-*", "shoal-worker-3.kubeconfig"},
	}, {
		name:    "node removed",
		change:  func(_ *testing.T, _ *pki.Bundle, opts *pki.Options) { opts.Nodes = opts.Nodes[:1] },
		changed: []string{"node-shoal-worker-2-*", "shoal-worker-2.kubeconfig"},
	}, {
		name: "node IP changed",
		change: func(_ *testing.T, _ *pki.Bundle, opts *pki.Options) {
			opts.NodeIPs["shoal-worker-1"] = net.ParseIP("172.31.250.21")
		},
		changed: []string{"node-shoal-worker-1-serving.*"},
	}, {
		name: "apiserver DNS name added",
		change: func(_ *testing.T, _ *pki.Bundle, opts *pki.Options) {
			opts.APIServerDNSNames = append(opts.APIServerDNSNames, "api.shoal.test")
		},
		changed: []string{"apiserver.*"},
	}, {
		name: "apiserver IP added",
		change: func(_ *testing.T, _ *pki.Bundle, opts *pki.Options) {
			opts.APIServerIPs = append(opts.APIServerIPs, net.ParseIP("192.168.0.10"))
		},
		changed: []string{"apiserver.*"},
	}, {
		name:    "apiserver URL changed",
		change:  func(_ *testing.T, _ *pki.Bundle, opts *pki.Options) { opts.APIServerURL = "https://127.0.0.1:6443" },
		changed: []string{"*.kubeconfig"},
	}, {
		name:    "cluster renamed",
		change:  func(_ *testing.T, _ *pki.Bundle, opts *pki.Options) { opts.ClusterName = "other" },
		changed: []string{"*.kubeconfig"},
	}, {
		name:    "apiserver cert expiring within 24h",
		change:  func(t *testing.T, b *pki.Bundle, _ *pki.Options) { resign(t, b, time.Now().Add(time.Hour)) },
		changed: []string{"apiserver.*"},
	}, {
		name: "client cert corrupt",
		change: func(t *testing.T, b *pki.Bundle, _ *pki.Options) {
			require.NoError(t, os.WriteFile(b.ClientCert(pki.Admin), []byte("garbage"), 0o644))
		},
		changed: []string{"admin.*"},
	}, {
		name: "client key of another cert",
		change: func(t *testing.T, b *pki.Bundle, _ *pki.Options) {
			copyFile(t, b.ClientKey(pki.Scheduler), b.ClientKey(pki.Proxy))
		},
		changed: []string{"kube-proxy.*"},
	}, {
		name:    "CA key missing",
		change:  func(t *testing.T, b *pki.Bundle, _ *pki.Options) { require.NoError(t, os.Remove(b.CAKey)) },
		changed: everythingFromCA,
	}, {
		name: "CA is the front-proxy CA",
		change: func(t *testing.T, b *pki.Bundle, _ *pki.Options) {
			copyFile(t, b.FrontProxyCACert, b.CACert)
			copyFile(t, b.FrontProxyCAKey, b.CAKey)
		},
		changed: everythingFromCA,
	}, {
		// A valid CA is kept, but nothing it did not sign.
		name: "CA replaced by another valid one",
		change: func(t *testing.T, b *pki.Bundle, opts *pki.Options) {
			other := generate(t, t.TempDir(), *opts)
			copyFile(t, other.CACert, b.CACert)
			copyFile(t, other.CAKey, b.CAKey)
		},
		changed: slices.DeleteFunc(slices.Clone(everythingFromCA), func(p string) bool { return p == "ca.*" }),
	}, {
		name:    "front-proxy CA missing",
		change:  func(t *testing.T, b *pki.Bundle, _ *pki.Options) { require.NoError(t, os.Remove(b.FrontProxyCACert)) },
		changed: []string{"front-proxy-*"},
	}, {
		name:    "service-account public key missing",
		change:  func(t *testing.T, b *pki.Bundle, _ *pki.Options) { require.NoError(t, os.Remove(b.ServiceAccountPub)) },
		changed: []string{"sa.pub"},
	}, {
		name: "service-account key corrupt",
		change: func(t *testing.T, b *pki.Bundle, _ *pki.Options) {
			require.NoError(t, os.WriteFile(b.ServiceAccountKey, []byte("garbage"), 0o600))
		},
		changed: []string{"sa.*"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions()
			b := generate(t, dir, opts)
			tt.change(t, b, &opts)
			before := snapshot(t, dir)

			b = generate(t, dir, opts)
			after := snapshot(t, dir)

			var changed, want []string
			for name := range union(before, after) {
				if before[name] != after[name] {
					changed = append(changed, name)
				}
				if matchesAny(t, name, tt.changed) {
					want = append(want, name)
				}
			}
			require.ElementsMatch(t, want, changed)
			for _, pattern := range tt.changed {
				require.True(t, slices.ContainsFunc(changed, func(name string) bool { return matchesAny(t, name, []string{pattern}) }),
					"nothing changed matches %s", pattern)
			}
			requireValidBundle(t, b, opts)
		})
	}
}

func TestGenerateRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		change  func(opts *pki.Options)
		wantErr string
	}{
		{"URL not https", func(o *pki.Options) { o.APIServerURL = "http://172.31.250.1:6443" }, "APIServerURL"},
		{"URL missing", func(o *pki.Options) { o.APIServerURL = "" }, "APIServerURL"},
		{"service IP missing", func(o *pki.Options) { o.ServiceIP = nil }, "ServiceIP"},
		{"node IP missing", func(o *pki.Options) { delete(o.NodeIPs, "shoal-worker-2") }, `"shoal-worker-2" has no entry in NodeIPs`},
		{"node listed twice", func(o *pki.Options) { o.Nodes = append(o.Nodes, "shoal-worker-1") }, "listed twice"},
		{"node name invalid", func(o *pki.Options) { o.Nodes = []string{"../etc"} }, `node name "../etc"`},
		{"node name of a component", func(o *pki.Options) {
			o.Nodes = []string{pki.Admin}
			o.NodeIPs[pki.Admin] = net.ParseIP("172.31.250.11")
		}, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions()
			tt.change(&opts)
			dir := filepath.Join(t.TempDir(), "pki")
			_, err := pki.Generate(dir, opts)
			require.ErrorContains(t, err, tt.wantErr)
			require.NoDirExists(t, dir)
		})
	}
}

// TestTLSHandshake serves with the apiserver cert, requires client certs
// from the CA, and connects with each kubeconfig the way client-go does.
func TestTLSHandshake(t *testing.T) {
	b := generate(t, t.TempDir(), testOptions())

	serving, err := tls.LoadX509KeyPair(b.APIServerCert, b.APIServerKey)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := r.TLS.PeerCertificates[0].Subject
		fmt.Fprintf(w, "%s %s", peer.CommonName, strings.Join(peer.Organization, ","))
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{serving},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool(t, b.CACert),
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	tests := []struct {
		kubeconfig string
		want       string
	}{
		{b.Kubeconfig(pki.Admin), "kubernetes-admin system:masters"},
		{b.Kubeconfig(pki.ControllerManager), "system:kube-controller-manager "},
		{b.Kubeconfig(pki.Scheduler), "system:kube-scheduler "},
		{b.Kubeconfig(pki.Proxy), "system:kube-proxy "},
		{b.NodeKubeconfig("shoal-worker-1"), "system:node:shoal-worker-1 system:nodes"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.kubeconfig), func(t *testing.T) {
			// The kubeconfig names 172.31.250.1; the test server listens on
			// 127.0.0.1, which the apiserver cert also covers.
			cfg, err := clientcmd.BuildConfigFromFlags(srv.URL, tt.kubeconfig)
			require.NoError(t, err)
			tlsConfig, err := rest.TLSConfigFor(cfg)
			require.NoError(t, err)
			transport := &http.Transport{TLSClientConfig: tlsConfig}
			t.Cleanup(transport.CloseIdleConnections)

			resp, err := (&http.Client{Transport: transport}).Get(srv.URL)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, tt.want, string(body))
		})
	}
}

// fileState is what a test compares to see whether a file was rewritten.
type fileState struct {
	data    string
	modTime time.Time
}

func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string]fileState{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		info, err := e.Info()
		require.NoError(t, err)
		files[e.Name()] = fileState{data: string(data), modTime: info.ModTime()}
	}
	return files
}

func union(a, b map[string]fileState) map[string]bool {
	names := map[string]bool{}
	for name := range a {
		names[name] = true
	}
	for name := range b {
		names[name] = true
	}
	return names
}

func matchesAny(t *testing.T, name string, patterns []string) bool {
	t.Helper()
	for _, pattern := range patterns {
		ok, err := filepath.Match(pattern, name)
		require.NoError(t, err)
		if ok {
			return true
		}
	}
	return false
}

// resign replaces the apiserver cert by one with the same key and SANs that
// expires at notAfter.
func resign(t *testing.T, b *pki.Bundle, notAfter time.Time) {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(b.CACert, b.CAKey)
	require.NoError(t, err)
	cert := readCert(t, b.APIServerCert)
	template := *cert
	template.NotAfter = notAfter
	der, err := x509.CreateCertificate(rand.Reader, &template, ca.Leaf, cert.PublicKey, ca.PrivateKey)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.APIServerCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block, path)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err, path)
	return cert
}

func pool(t *testing.T, caPath string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(readCert(t, caPath))
	return p
}

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o600))
}
