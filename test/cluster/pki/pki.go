// Package pki generates the certificates, keys and kubeconfigs of Shoal's
// local multi-node cluster (docs/dev/local-cluster.md): one cluster CA, the
// apiserver serving cert, a client cert and kubeconfig per control-plane
// component and per node, a kubelet serving cert per node, the
// service-account key pair and the front-proxy CA and client used for
// aggregation.
//
// Generate is idempotent: files that are still valid for the options are
// left untouched, so a running cluster keeps working across repeated runs.
package pki

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Client identities with a cert, key and kubeconfig of their own; pass them
// to Bundle.Kubeconfig, Bundle.ClientCert and Bundle.ClientKey.
const (
	Admin             = "admin"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Proxy             = "kube-proxy"
)

// DefaultClusterName is the kubeconfig cluster name used when
// Options.ClusterName is empty.
const DefaultClusterName = "shoal"

const (
	// validity is how long a new certificate is valid.
	validity = 365 * 24 * time.Hour
	// renewBefore is how close to expiry a certificate gets recreated.
	renewBefore = 24 * time.Hour
)

// clientIdentities maps each component identity to its certificate subject.
var clientIdentities = map[string]subject{
	Admin:             {cn: "kubernetes-admin", orgs: []string{"system:masters"}},
	ControllerManager: {cn: "system:kube-controller-manager"},
	Scheduler:         {cn: "system:kube-scheduler"},
	Proxy:             {cn: "system:kube-proxy"},
}

// Options describes the cluster the PKI is for.
type Options struct {
	// APIServerIPs are the addresses the apiserver is reached at, e.g.
	// 172.31.250.1. 127.0.0.1 is always added.
	APIServerIPs []net.IP
	// APIServerDNSNames are extra DNS names for the apiserver serving cert,
	// on top of localhost and the in-cluster kubernetes service names.
	APIServerDNSNames []string
	// ServiceIP is the first IP of the service CIDR (10.96.0.1), the
	// address of the kubernetes service. Required.
	ServiceIP net.IP
	// Nodes are the node names; each gets a client cert, a kubeconfig and
	// a kubelet serving cert. Files of nodes no longer listed are removed.
	Nodes []string
	// NodeIPs holds the address of every node in Nodes, put in its kubelet
	// serving cert.
	NodeIPs map[string]net.IP
	// APIServerURL is the server in every kubeconfig, e.g.
	// https://172.31.250.1:6443. Required.
	APIServerURL string
	// ClusterName names the cluster in the kubeconfigs; DefaultClusterName
	// if empty.
	ClusterName string
}

// Bundle holds the paths of the generated files.
type Bundle struct {
	// Dir is the directory holding every file.
	Dir string

	// CACert and CAKey are the cluster CA (--client-ca-file, the
	// controller-manager's --cluster-signing-*-file).
	CACert, CAKey string
	// APIServerCert and APIServerKey are the apiserver serving pair.
	APIServerCert, APIServerKey string
	// APIServerKubeletClientCert and APIServerKubeletClientKey are the
	// apiserver's client pair for kubelets (--kubelet-client-*).
	APIServerKubeletClientCert, APIServerKubeletClientKey string
	// FrontProxyCACert and FrontProxyCAKey are the aggregation CA
	// (--requestheader-client-ca-file).
	FrontProxyCACert, FrontProxyCAKey string
	// FrontProxyClientCert and FrontProxyClientKey are the apiserver's
	// client pair for aggregated apiservers (--proxy-client-*-file).
	FrontProxyClientCert, FrontProxyClientKey string
	// ServiceAccountKey (RSA private key) and ServiceAccountPub (its public
	// key) sign and verify service-account tokens.
	ServiceAccountKey, ServiceAccountPub string
}

func newBundle(dir string) *Bundle {
	p := func(name string) string { return filepath.Join(dir, name) }
	return &Bundle{
		Dir:                        dir,
		CACert:                     p("ca.crt"),
		CAKey:                      p("ca.key"),
		APIServerCert:              p("apiserver.crt"),
		APIServerKey:               p("apiserver.key"),
		APIServerKubeletClientCert: p("apiserver-kubelet-client.crt"),
		APIServerKubeletClientKey:  p("apiserver-kubelet-client.key"),
		FrontProxyCACert:           p("front-proxy-ca.crt"),
		FrontProxyCAKey:            p("front-proxy-ca.key"),
		FrontProxyClientCert:       p("front-proxy-client.crt"),
		FrontProxyClientKey:        p("front-proxy-client.key"),
		ServiceAccountKey:          p("sa.key"),
		ServiceAccountPub:          p("sa.pub"),
	}
}

// Kubeconfig returns the kubeconfig path of a client identity (Admin,
// ControllerManager, Scheduler, Proxy).
func (b *Bundle) Kubeconfig(identity string) string {
	return filepath.Join(b.Dir, identity+".kubeconfig")
}

// ClientCert returns the client cert path of a client identity.
func (b *Bundle) ClientCert(identity string) string {
	return filepath.Join(b.Dir, identity+".crt")
}

// ClientKey returns the client key path of a client identity.
func (b *Bundle) ClientKey(identity string) string {
	return filepath.Join(b.Dir, identity+".key")
}

// NodeKubeconfig returns the kubelet kubeconfig path of a node.
func (b *Bundle) NodeKubeconfig(node string) string {
	return filepath.Join(b.Dir, node+".kubeconfig")
}

// NodeClientCert returns the path of a node's client cert
// (CN system:node:<node>).
func (b *Bundle) NodeClientCert(node string) string {
	return filepath.Join(b.Dir, "node-"+node+"-client.crt")
}

// NodeClientKey returns the path of a node's client key.
func (b *Bundle) NodeClientKey(node string) string {
	return filepath.Join(b.Dir, "node-"+node+"-client.key")
}

// NodeServingCert returns the path of a node's kubelet serving cert
// (--tls-cert-file).
func (b *Bundle) NodeServingCert(node string) string {
	return filepath.Join(b.Dir, "node-"+node+"-serving.crt")
}

// NodeServingKey returns the path of a node's kubelet serving key
// (--tls-private-key-file).
func (b *Bundle) NodeServingKey(node string) string {
	return filepath.Join(b.Dir, "node-"+node+"-serving.key")
}

// Generate makes sure dir holds a complete, valid PKI for opts and returns
// its paths. A file is kept when it is still valid: signed by the current
// CA, with the wanted subject and SANs, and not expiring within 24 hours;
// otherwise it is recreated (a new CA recreates everything it signed).
// Generate is not safe to run concurrently on the same dir.
func Generate(dir string, opts Options) (*Bundle, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, fmt.Errorf("pki options: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	b := newBundle(dir)
	now := time.Now()

	ca, err := ensureCA(b.CACert, b.CAKey, "kubernetes-ca", now)
	if err != nil {
		return nil, err
	}
	frontProxyCA, err := ensureCA(b.FrontProxyCACert, b.FrontProxyCAKey, "front-proxy-ca", now)
	if err != nil {
		return nil, err
	}

	serverIPs := append([]net.IP{opts.ServiceIP, net.IPv4(127, 0, 0, 1)}, opts.APIServerIPs...)
	serverNames := append([]string{"localhost", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, opts.APIServerDNSNames...)
	leaves := []leafSpec{
		{certPath: b.APIServerCert, keyPath: b.APIServerKey, issuer: ca, server: true,
			subject: subject{cn: "kube-apiserver"}, dnsNames: serverNames, ips: serverIPs},
		{certPath: b.APIServerKubeletClientCert, keyPath: b.APIServerKubeletClientKey, issuer: ca,
			subject: subject{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}}},
		{certPath: b.FrontProxyClientCert, keyPath: b.FrontProxyClientKey, issuer: frontProxyCA,
			subject: subject{cn: "front-proxy-client"}},
	}
	for _, node := range opts.Nodes {
		leaves = append(leaves, leafSpec{certPath: b.NodeServingCert(node), keyPath: b.NodeServingKey(node),
			issuer: ca, server: true, subject: subject{cn: node},
			dnsNames: []string{node}, ips: []net.IP{opts.NodeIPs[node]}})
	}
	for _, leaf := range leaves {
		if _, _, err := ensureLeaf(leaf, now); err != nil {
			return nil, err
		}
	}

	clients := map[string]leafSpec{} // kubeconfig path -> client cert
	for identity, subj := range clientIdentities {
		clients[b.Kubeconfig(identity)] = leafSpec{certPath: b.ClientCert(identity),
			keyPath: b.ClientKey(identity), issuer: ca, subject: subj}
	}
	for _, node := range opts.Nodes {
		clients[b.NodeKubeconfig(node)] = leafSpec{certPath: b.NodeClientCert(node),
			keyPath: b.NodeClientKey(node), issuer: ca,
			subject: subject{cn: "system:node:" + node, orgs: []string{"system:nodes"}}}
	}
	for path, client := range clients {
		certPEM, keyPEM, err := ensureLeaf(client, now)
		if err != nil {
			return nil, err
		}
		if err := ensureKubeconfig(path, opts, ca.certPEM, client.subject.cn, certPEM, keyPEM); err != nil {
			return nil, err
		}
	}

	if err := ensureServiceAccountKey(b.ServiceAccountKey, b.ServiceAccountPub); err != nil {
		return nil, err
	}
	if err := removeStaleNodes(b, opts.Nodes); err != nil {
		return nil, err
	}
	return b, nil
}

// normalize returns opts with defaults applied, or why they are unusable.
func (opts Options) normalize() (Options, error) {
	if opts.ClusterName == "" {
		opts.ClusterName = DefaultClusterName
	}
	u, err := url.Parse(opts.APIServerURL)
	if err != nil {
		return opts, fmt.Errorf("APIServerURL: %w", err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return opts, fmt.Errorf("APIServerURL %q: want https://host:port", opts.APIServerURL)
	}
	if opts.ServiceIP == nil {
		return opts, errors.New("ServiceIP is required")
	}
	for i, node := range opts.Nodes {
		if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
			return opts, fmt.Errorf("node name %q: %s", node, strings.Join(errs, "; "))
		}
		if _, ok := clientIdentities[node]; ok {
			return opts, fmt.Errorf("node name %q is reserved for a component", node)
		}
		if slices.Contains(opts.Nodes[:i], node) {
			return opts, fmt.Errorf("node %q listed twice", node)
		}
		if opts.NodeIPs[node] == nil {
			return opts, fmt.Errorf("node %q has no entry in NodeIPs", node)
		}
	}
	return opts, nil
}

// removeStaleNodes deletes the files of nodes that are not in nodes.
func removeStaleNodes(b *Bundle, nodes []string) error {
	keep := map[string]bool{}
	for identity := range clientIdentities {
		keep[b.Kubeconfig(identity)] = true
	}
	for _, node := range nodes {
		for _, path := range []string{b.NodeKubeconfig(node), b.NodeClientCert(node), b.NodeClientKey(node),
			b.NodeServingCert(node), b.NodeServingKey(node)} {
			keep[path] = true
		}
	}
	for _, pattern := range []string{"node-*", "*.kubeconfig"} {
		paths, err := filepath.Glob(filepath.Join(b.Dir, pattern))
		if err != nil {
			return fmt.Errorf("list %s: %w", pattern, err)
		}
		for _, path := range paths {
			if keep[path] {
				continue
			}
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("remove stale %s: %w", path, err)
			}
		}
	}
	return nil
}
