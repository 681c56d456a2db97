// Package peertlstest provides a throwaway CA for tests, the end-to-end
// suite and benchmarks of peer TLS (package imagewarm/peertls).
package peertlstest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"github.com/shoal-io/shoal/imagewarm/peertls"
)

// validity is the lifetime of a CA.
const validity = 24 * time.Hour

// CA is a throwaway CA for tests and benchmarks (ECDSA P-256, self-signed,
// valid 24 h from its creation, backdated a minute).
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// Key is the CA's private key.
	Key crypto.Signer
	// BundlePEM is the PEM of Cert: the trust bundle of peers of this CA.
	BundlePEM []byte
}

// NewCA returns a new CA with the common name name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("random serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{
		Cert:      cert,
		Key:       key,
		BundlePEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// Issuer returns a peertls.Issuer that signs with this CA for node (via
// peertls.Sign, at the real time) and returns ca.BundlePEM. A validity of 0
// means peertls.DefaultValidity.
func (ca *CA) Issuer(node string, validity time.Duration) peertls.Issuer {
	return func(_ context.Context, csrDER []byte) ([]byte, []byte, error) {
		chain, err := ca.sign(csrDER, node, validity)
		if err != nil {
			return nil, nil, err
		}
		return chain, ca.BundlePEM, nil
	}
}

// ClientCert issues a certificate for node straight from this CA (a fresh
// key), as a tls.Certificate: for tests that play a client, e.g. one
// holding a certificate from a different CA.
func (ca *CA) ClientCert(node string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create certificate request: %w", err)
	}
	chainPEM, err := ca.sign(csr, node, 0)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("marshal key: %w", err)
	}
	// X509KeyPair also fills Leaf.
	return tls.X509KeyPair(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// sign signs csrDER for node with this CA, now.
func (ca *CA) sign(csrDER []byte, node string, validity time.Duration) ([]byte, error) {
	return peertls.Sign(peertls.SignRequest{
		CSR: csrDER, Node: node, CACert: ca.Cert, CAKey: ca.Key, Validity: validity, Now: time.Now(),
	})
}
