package peertls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Organization is the subject organization of every peer certificate.
const Organization = "shoal:agents"

// DefaultValidity is the lifetime of a peer certificate the coordinator
// issues.
const DefaultValidity = 12 * time.Hour

// backdate is how far before the signing time a certificate becomes valid,
// for peers whose clocks are a little behind the coordinator's.
const backdate = time.Minute

// SignRequest is what the coordinator signs: the CSR an agent sent and the
// node its token is bound to.
type SignRequest struct {
	// CSR is the agent's certificate request, DER PKCS#10.
	CSR []byte
	// Node is the node name from the agent's authenticated identity, NOT
	// from the CSR. Required.
	Node string
	// CACert and CAKey sign the certificate. Required.
	CACert *x509.Certificate
	CAKey  crypto.Signer
	// Chain is the intermediates to send after the leaf (may be nil).
	Chain []*x509.Certificate
	// Validity is the certificate's lifetime: DefaultValidity when 0,
	// capped at CACert.NotAfter.
	Validity time.Duration
	// Now is the signing time; zero means time.Now().
	Now time.Time
}

// Sign checks the CSR's signature and key type (ECDSA P-256 or Ed25519
// only) and issues a peer certificate for r.Node: subject CN = Node,
// O = [Organization], no DNS, IP or URI SANs (the CSR's subject and SANs
// are ignored), KeyUsage DigitalSignature, ExtKeyUsage ClientAuth and
// ServerAuth, valid from Now-1min to Now+Validity (capped at the CA's
// NotAfter), with a random 128-bit serial. It returns the PEM of the leaf
// followed by r.Chain.
func Sign(r SignRequest) (chainPEM []byte, err error) {
	der, err := sign(r)
	if err != nil {
		return nil, fmt.Errorf("peer certificate request: %w", err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, c := range r.Chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out, nil
}

// sign returns the DER of the leaf; its errors lack Sign's prefix.
func sign(r SignRequest) ([]byte, error) {
	if r.Node == "" {
		return nil, errors.New("node name is empty")
	}
	if r.CACert == nil || r.CAKey == nil {
		return nil, errors.New("no CA certificate or key")
	}
	csr, err := x509.ParseCertificateRequest(r.CSR)
	if err != nil {
		return nil, fmt.Errorf("parse CSR: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("CSR signature invalid: %w", err)
	}
	if err := checkKey(csr.PublicKey); err != nil {
		return nil, err
	}
	notBefore, notAfter, err := validity(r)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: r.Node, Organization: []string{Organization}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, r.CACert, csr.PublicKey, r.CAKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for node %q: %w", r.Node, err)
	}
	return der, nil
}

// checkKey accepts the keys every agent can make cheaply and every TLS 1.3
// peer handles: ECDSA P-256 and Ed25519. Anything else is refused rather
// than silently issued, RSA of any size included (agents never send it).
func checkKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("unsupported key: ECDSA %s, want ECDSA P-256 or Ed25519", k.Curve.Params().Name)
		}
		return nil
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < 2048 {
			return fmt.Errorf("unsupported key: RSA of %d bits is too weak; want ECDSA P-256 or Ed25519", bits)
		}
		return errors.New("unsupported key: RSA, want ECDSA P-256 or Ed25519")
	default:
		return fmt.Errorf("unsupported key: %T, want ECDSA P-256 or Ed25519", pub)
	}
}

// validity returns the certificate's validity period for r.
func validity(r SignRequest) (notBefore, notAfter time.Time, err error) {
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	d := r.Validity
	switch {
	case d < 0:
		return time.Time{}, time.Time{}, fmt.Errorf("negative validity %s", d)
	case d == 0:
		d = DefaultValidity
	}
	if !now.Before(r.CACert.NotAfter) {
		return time.Time{}, time.Time{}, fmt.Errorf("CA certificate expired at %s", r.CACert.NotAfter.UTC().Format(time.RFC3339))
	}
	notAfter = now.Add(d)
	// A certificate cannot outlive its issuer: chains are verified at one
	// time, so past the CA's expiry it would fail anyway.
	if r.CACert.NotAfter.Before(notAfter) {
		notAfter = r.CACert.NotAfter
	}
	return now.Add(-backdate), notAfter, nil
}

// randomSerial returns a random 128-bit, non-zero serial number.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("random serial number: %w", err)
	}
	if n.Sign() == 0 {
		n.SetInt64(1)
	}
	return n, nil
}
