package peertls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options configures an Identity.
type Options struct {
	// Node is this agent's node name (the CN it requests). Required.
	Node string
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger logs renewals and refusals; klog.Background() when zero.
	Logger klog.Logger
	// Clock is the time certificates are checked at and renewals are
	// scheduled by; nil means the real clock.
	Clock clock.WithTicker
	// StateFile, if set, keeps the identity (key, certificate chain and
	// trust bundle; mode 0600) across restarts: an agent that restarts
	// while the coordinator is away serves and reaches its peers with the
	// certificate it had, until that expires. Empty: memory only.
	StateFile string
}

// Identity is an agent's peer TLS identity: its current certificate and
// key, and the trust bundle peers are verified against. Safe for
// concurrent use.
type Identity struct {
	node      string
	stateFile string
	log       klog.Logger
	clock     clock.WithTicker
	m         *metrics

	// mu serialises NewRequest and Install, which share pending.
	mu sync.Mutex
	// pending is the key of the last NewRequest, until an Install for it.
	pending crypto.Signer

	// cur is the certificate and bundle in use; nil before the first
	// Install. One pointer, so that readers never see the certificate of
	// one Install with the bundle of another.
	cur atomic.Pointer[state]

	// Run's retry delays; tests shorten them and take the jitter out.
	backoffBase, backoffMax time.Duration
	jitter                  func(time.Duration) time.Duration
}

// state is what one Install makes current.
type state struct {
	cert  *tls.Certificate // leaf, intermediates and key, as TLS sends them
	roots *x509.CertPool   // the trust bundle

	// verified caches the client chains that verified against roots
	// (Guard), keyed by their SHA-256; nVerified counts its entries.
	verified  sync.Map
	nVerified atomic.Int64
}

// NewIdentity returns an Identity for o.Node. It holds no certificate until
// the first Install.
func NewIdentity(o Options) (*Identity, error) {
	if o.Node == "" {
		return nil, errors.New("peer TLS identity: no node name")
	}
	if o.Logger.GetSink() == nil {
		o.Logger = klog.Background()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	id := &Identity{
		node:        o.Node,
		stateFile:   o.StateFile,
		log:         o.Logger,
		clock:       o.Clock,
		m:           newMetrics(),
		backoffBase: defaultBackoffBase,
		backoffMax:  defaultBackoffMax,
		jitter:      jitter,
	}
	if err := id.m.register(o.Registerer); err != nil {
		return nil, err
	}
	if id.stateFile != "" {
		if err := id.load(); err != nil {
			id.log.Info("Not using the saved peer certificate; asking for a new one", "file", id.stateFile, "reason", err.Error())
		}
	}
	return id, nil
}

// NewRequest makes a fresh ECDSA P-256 key (kept pending until Install) and
// returns a DER CSR for it with CN = Node, O = Organization. A later
// NewRequest replaces the pending key, so one caller (Run) should drive the
// request-issue-install sequence.
func (id *Identity) NewRequest() (csrDER []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate peer key: %w", err)
	}
	tmpl := &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: id.node, Organization: []string{Organization}},
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("create peer certificate request: %w", err)
	}
	id.mu.Lock()
	id.pending = key
	id.mu.Unlock()
	return csr, nil
}

// Install takes a chain PEM (leaf first) issued for the pending key and the
// trust bundle PEM (one or more CA certificates). It checks that the leaf's
// public key is the pending key's, that its CN is the node and its O
// contains Organization, that it has ExtKeyUsage ClientAuth and ServerAuth,
// and that it verifies against the bundle (with the chain's other
// certificates as intermediates) at the clock's now. Then the certificate
// and the bundle become current at once and the pending key is cleared. On
// any error nothing changes.
func (id *Identity) Install(chainPEM, bundlePEM []byte) error {
	if err := id.install(chainPEM, bundlePEM); err != nil {
		return err
	}
	if id.stateFile != "" {
		if err := id.save(chainPEM, bundlePEM); err != nil {
			// Not fatal: the certificate works; only a restart without the
			// coordinator would miss it.
			id.log.Error(err, "Could not save the peer certificate", "file", id.stateFile)
		}
	}
	return nil
}

// install is Install without saving.
func (id *Identity) install(chainPEM, bundlePEM []byte) error {
	chain, err := parseCertificates(chainPEM)
	if err != nil {
		return fmt.Errorf("install peer certificate: chain: %w", err)
	}
	bundle, err := parseCertificates(bundlePEM)
	if err != nil {
		return fmt.Errorf("install peer certificate: trust bundle: %w", err)
	}
	roots := x509.NewCertPool()
	for _, c := range bundle {
		roots.AddCert(c)
	}

	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.checkOwn(chain, roots); err != nil {
		return fmt.Errorf("install peer certificate: %w", err)
	}
	cert := &tls.Certificate{PrivateKey: id.pending, Leaf: chain[0]}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	id.cur.Store(&state{cert: cert, roots: roots})
	id.pending = nil
	id.m.expiry.Set(float64(chain[0].NotAfter.Unix()))
	id.log.Info("Installed the peer certificate", "node", id.node,
		"serial", chain[0].SerialNumber.Text(16), "notAfter", chain[0].NotAfter, "bundleSize", len(bundle))
	return nil
}

// checkOwn checks a chain issued for this agent: for the pending key, for
// this node, and one its peers will accept both as a client and as a
// server. Callers hold id.mu.
func (id *Identity) checkOwn(chain []*x509.Certificate, roots *x509.CertPool) error {
	if id.pending == nil {
		return errors.New("no pending key (NewRequest first)")
	}
	leaf := chain[0]
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(id.pending.Public()) {
		return errors.New("certificate is not for the pending key")
	}
	if cn := leaf.Subject.CommonName; cn != id.node {
		return fmt.Errorf("certificate is for node %q, not %q", cn, id.node)
	}
	now := id.clock.Now()
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if _, err := verifyPeer(chain, roots, now, usage); err != nil {
			return err
		}
	}
	return nil
}

// Leaf returns the current certificate, nil before the first Install.
func (id *Identity) Leaf() *x509.Certificate {
	if st := id.cur.Load(); st != nil {
		return st.cert.Leaf
	}
	return nil
}

// usageNames names the usages verifyPeer is asked for, in its errors.
var usageNames = map[x509.ExtKeyUsage]string{
	x509.ExtKeyUsageClientAuth: "client authentication",
	x509.ExtKeyUsageServerAuth: "server authentication",
}

// verifyPeer checks that chain (leaf first, as a peer sent it) is a peer
// certificate: it verifies against roots at now for usage, the leaf lists
// usage explicitly, is no CA, has O = Organization and names a node. It
// returns the node name.
func verifyPeer(chain []*x509.Certificate, roots *x509.CertPool, now time.Time, usage x509.ExtKeyUsage) (string, error) {
	if len(chain) == 0 {
		return "", errors.New("no certificate")
	}
	leaf := chain[0]
	// x509 treats a leaf without the extension as good for any usage; Sign
	// always sets it, so its absence means the certificate is not Sign's.
	if !slices.Contains(leaf.ExtKeyUsage, usage) {
		return "", fmt.Errorf("certificate is not for %s", usageNames[usage])
	}
	if leaf.IsCA {
		return "", errors.New("certificate is a CA certificate")
	}
	if !slices.Contains(leaf.Subject.Organization, Organization) {
		return "", fmt.Errorf("certificate's organization %q does not include %q", leaf.Subject.Organization, Organization)
	}
	if leaf.Subject.CommonName == "" {
		return "", errors.New("certificate names no node (empty common name)")
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return "", err
	}
	return leaf.Subject.CommonName, nil
}

// parseCertificates parses the CERTIFICATE blocks of a PEM text; it fails
// on any other block and when there is none.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("unexpected PEM block %q", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}
