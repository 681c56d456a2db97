package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// ServingValidity is the lifetime of a serving certificate.
const ServingValidity = 30 * 24 * time.Hour

// ErrNoCertificate is returned by GetCertificate before the first
// successful Update.
var ErrNoCertificate = errors.New("serving certificate not issued yet")

// Serving holds the serving certificate of one or more TLS servers, issued
// by the coordinator's CA for a fixed set of DNS names. Update and
// GetCertificate may be called concurrently.
type Serving struct {
	dnsNames []string
	clock    clock.PassiveClock

	// mu serialises Update.
	mu sync.Mutex
	// issuer is the CA certificate that signed the current leaf.
	issuer *x509.Certificate
	// chain is the intermediates sent with the current leaf.
	chain []*x509.Certificate

	cert atomic.Pointer[tls.Certificate]
}

// NewServing returns a Serving for dnsNames (the certificate's SANs; the
// first is also its common name). A nil clk selects the real clock. It
// holds no certificate until the first Update.
func NewServing(dnsNames []string, clk clock.PassiveClock) *Serving {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Serving{dnsNames: slices.Clone(dnsNames), clock: clk}
}

// DNSNames returns the in-cluster names of a Service: svc, svc.ns,
// svc.ns.svc and svc.ns.svc.cluster.local.
func DNSNames(service, namespace string) []string {
	return []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
}

// Update issues a fresh certificate from b's CA when there is none yet,
// when b's CA is not the one that issued the current certificate, or when
// less than a third of the current certificate's validity remains.
// Otherwise it keeps the certificate, refreshing only the intermediates it
// is sent with.
func (s *Serving) Update(b *Bundle) error {
	if b == nil || b.CACert == nil || b.CAKey == nil {
		return errors.New("update serving certificate: no CA")
	}
	if len(s.dnsNames) == 0 {
		return errors.New("update serving certificate: no DNS names")
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	now := s.clock.Now()
	var chain []*x509.Certificate
	for _, c := range b.Chain {
		if now.Before(c.NotAfter) {
			chain = append(chain, c)
		}
	}
	cur := s.cert.Load()
	if cur != nil && !s.needsRenewal(cur.Leaf, b.CACert, now) {
		if !slices.EqualFunc(chain, s.chain, (*x509.Certificate).Equal) {
			s.store(cur.Leaf, cur.PrivateKey, chain)
		}
		return nil
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	notAfter := now.Add(ServingValidity)
	if b.CACert.NotAfter.Before(notAfter) {
		notAfter = b.CACert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: s.dnsNames[0]},
		DNSNames:              s.dnsNames,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.CACert, key.Public(), b.CAKey)
	if err != nil {
		return fmt.Errorf("issue serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("parse serving certificate: %w", err)
	}
	s.issuer = b.CACert
	s.store(leaf, key, chain)
	return nil
}

// needsRenewal tells whether leaf must be replaced by one from ca.
func (s *Serving) needsRenewal(leaf, ca *x509.Certificate, now time.Time) bool {
	if s.issuer == nil || !s.issuer.Equal(ca) {
		return true
	}
	validity := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotAfter.Sub(now) < validity/3
}

// store publishes leaf with its intermediates. Callers hold s.mu.
func (s *Serving) store(leaf *x509.Certificate, key any, chain []*x509.Certificate) {
	c := &tls.Certificate{
		Certificate: [][]byte{leaf.Raw},
		PrivateKey:  key,
		Leaf:        leaf,
	}
	for _, ic := range chain {
		c.Certificate = append(c.Certificate, ic.Raw)
	}
	s.chain = chain
	s.cert.Store(c)
}

// GetCertificate returns the current certificate; it fits
// tls.Config.GetCertificate. It fails with ErrNoCertificate before the
// first successful Update.
func (s *Serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := s.cert.Load()
	if c == nil {
		return nil, ErrNoCertificate
	}
	return c, nil
}

// Leaf returns the current certificate, or nil before the first
// successful Update.
func (s *Serving) Leaf() *x509.Certificate {
	if c := s.cert.Load(); c != nil {
		return c.Leaf
	}
	return nil
}
