package peertls_test

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
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/imagewarm/peertls"
)

// csrFor returns a CSR for key that asks for far more than Sign grants.
func csrFor(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "kube-apiserver", Organization: []string{"system:masters"}},
		DNSNames:    []string{"shoal-coordinator.kube-system.svc"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
		URIs:        []*url.URL{{Scheme: "spiffe", Host: "cluster", Path: "/admin"}},
	}, key)
	require.NoError(t, err)
	return csr
}

// parseChain parses a chain PEM.
func parseChain(t *testing.T, chainPEM []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, chainPEM = pem.Decode(chainPEM)
		if b == nil {
			break
		}
		require.Equal(t, "CERTIFICATE", b.Type)
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		certs = append(certs, c)
	}
	require.Empty(t, chainPEM, "trailing bytes after the chain")
	return certs
}

func TestSignIssuesPeerCertificate(t *testing.T) {
	ca := newCA(t, "cluster")
	intermediate := newCA(t, "intermediate").Cert // only sent along
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	now := time.Now().Truncate(time.Second) // certificates keep whole seconds

	for _, tc := range []struct {
		name         string
		key          crypto.Signer
		validity     time.Duration
		chain        []*x509.Certificate
		wantNotAfter time.Time
	}{
		{name: "ECDSA P-256, default validity", key: ecKey, wantNotAfter: now.Add(peertls.DefaultValidity)},
		{name: "Ed25519, one hour", key: edKey, validity: time.Hour, wantNotAfter: now.Add(time.Hour)},
		{name: "with intermediates", key: ecKey, chain: []*x509.Certificate{intermediate}, wantNotAfter: now.Add(peertls.DefaultValidity)},
		{name: "capped at the CA's expiry", key: ecKey, validity: 1000 * time.Hour, wantNotAfter: ca.Cert.NotAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chainPEM, err := peertls.Sign(peertls.SignRequest{
				CSR: csrFor(t, tc.key), Node: "node-a", CACert: ca.Cert, CAKey: ca.Key,
				Chain: tc.chain, Validity: tc.validity, Now: now,
			})
			require.NoError(t, err)
			certs := parseChain(t, chainPEM)
			require.Len(t, certs, 1+len(tc.chain))
			for i, c := range tc.chain {
				require.True(t, c.Equal(certs[1+i]), "intermediate %d", i)
			}
			leaf := certs[0]

			require.NoError(t, leaf.CheckSignatureFrom(ca.Cert))
			require.Equal(t, tc.key.Public(), leaf.PublicKey)
			require.Equal(t, "node-a", leaf.Subject.CommonName)
			require.Equal(t, []string{peertls.Organization}, leaf.Subject.Organization)
			require.Empty(t, leaf.DNSNames)
			require.Empty(t, leaf.IPAddresses)
			require.Empty(t, leaf.URIs)
			require.Empty(t, leaf.EmailAddresses)
			require.Equal(t, x509.KeyUsageDigitalSignature, leaf.KeyUsage)
			require.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}, leaf.ExtKeyUsage)
			require.False(t, leaf.IsCA)
			require.True(t, now.Add(-time.Minute).Equal(leaf.NotBefore), "NotBefore %s, want a minute before %s", leaf.NotBefore, now)
			require.True(t, tc.wantNotAfter.Equal(leaf.NotAfter), "NotAfter %s, want %s", leaf.NotAfter, tc.wantNotAfter)
			require.Positive(t, leaf.SerialNumber.Sign())
			require.LessOrEqual(t, leaf.SerialNumber.BitLen(), 129)
		})
	}
}

func TestSignRandomSerials(t *testing.T) {
	ca := newCA(t, "cluster")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	seen := map[string]bool{}
	for range 8 {
		chainPEM, err := peertls.Sign(peertls.SignRequest{CSR: csrFor(t, key), Node: "node-a", CACert: ca.Cert, CAKey: ca.Key, Now: time.Now()})
		require.NoError(t, err)
		serial := parseChain(t, chainPEM)[0].SerialNumber.String()
		require.False(t, seen[serial], "serial %s issued twice", serial)
		seen[serial] = true
	}
}

func TestSignRefuses(t *testing.T) {
	ca := newCA(t, "cluster")
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	rsa2048, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	good := csrFor(t, ecKey)
	badSig := append([]byte(nil), good...)
	badSig[len(badSig)-1] ^= 0xff // the last byte of the signature's s

	for _, tc := range []struct {
		name    string
		req     func(r *peertls.SignRequest)
		wantErr string
	}{
		{name: "empty node", req: func(r *peertls.SignRequest) { r.Node = "" }, wantErr: "peer certificate request: node name is empty"},
		{name: "bad signature", req: func(r *peertls.SignRequest) { r.CSR = badSig }, wantErr: "peer certificate request: CSR signature invalid: "},
		{name: "not a CSR", req: func(r *peertls.SignRequest) { r.CSR = []byte("hello") }, wantErr: "peer certificate request: parse CSR: "},
		{name: "ECDSA P-384", req: func(r *peertls.SignRequest) { r.CSR = csrFor(t, p384) }, wantErr: "unsupported key: ECDSA P-384, want ECDSA P-256 or Ed25519"},
		{name: "RSA 1024", req: func(r *peertls.SignRequest) { r.CSR = csrFor(t, rsa1024) }, wantErr: "unsupported key: RSA of 1024 bits is too weak"},
		{name: "RSA 2048", req: func(r *peertls.SignRequest) { r.CSR = csrFor(t, rsa2048) }, wantErr: "unsupported key: RSA, want ECDSA P-256 or Ed25519"},
		{name: "no CA", req: func(r *peertls.SignRequest) { r.CAKey = nil }, wantErr: "no CA certificate or key"},
		{name: "expired CA", req: func(r *peertls.SignRequest) { r.Now = ca.Cert.NotAfter.Add(time.Second) }, wantErr: "CA certificate expired at"},
		{name: "negative validity", req: func(r *peertls.SignRequest) { r.Validity = -time.Hour }, wantErr: "negative validity"},
		{name: "CA key not the CA certificate's", req: func(r *peertls.SignRequest) { r.CAKey = ecKey }, wantErr: `sign certificate for node "node-a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := peertls.SignRequest{CSR: good, Node: "node-a", CACert: ca.Cert, CAKey: ca.Key, Now: time.Now()}
			tc.req(&r)
			chainPEM, err := peertls.Sign(r)
			require.ErrorContains(t, err, tc.wantErr)
			require.Contains(t, err.Error(), "peer certificate request: ")
			require.Nil(t, chainPEM)
		})
	}
}
