package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// subject is the identity a certificate carries.
type subject struct {
	cn   string
	orgs []string
}

// authority is a loaded CA.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// leafSpec describes a certificate signed by a CA.
type leafSpec struct {
	certPath, keyPath string
	issuer            *authority
	subject           subject
	server            bool // serving cert; a client cert otherwise
	dnsNames          []string
	ips               []net.IP
}

func (s leafSpec) usage() x509.ExtKeyUsage {
	if s.server {
		return x509.ExtKeyUsageServerAuth
	}
	return x509.ExtKeyUsageClientAuth
}

// matches reports whether cert can be kept for s at now.
func (s leafSpec) matches(cert *x509.Certificate, now time.Time) bool {
	roots := x509.NewCertPool()
	roots.AddCert(s.issuer.cert)
	_, err := cert.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now.Add(renewBefore),
		KeyUsages:   []x509.ExtKeyUsage{s.usage()},
	})
	return err == nil &&
		cert.Subject.CommonName == s.subject.cn &&
		slices.Equal(normalize(cert.Subject.Organization), normalize(s.subject.orgs)) &&
		slices.Equal(normalize(cert.DNSNames), normalize(s.dnsNames)) &&
		slices.Equal(normalize(ipStrings(cert.IPAddresses)), normalize(ipStrings(s.ips)))
}

// ensureCA loads the CA at certPath/keyPath, or creates a new one if it is
// missing, broken or expires within renewBefore.
func ensureCA(certPath, keyPath, cn string, now time.Time) (*authority, error) {
	cert, key, certPEM, _, err := loadPair(certPath, keyPath)
	if err == nil && cert.IsCA && cert.KeyUsage&x509.KeyUsageCertSign != 0 &&
		cert.Subject.CommonName == cn && now.Add(renewBefore).Before(cert.NotAfter) {
		return &authority{cert: cert, key: key, certPEM: certPEM}, nil
	}
	newKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", certPath, err)
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	cert, certPEM, _, err = writePair(certPath, keyPath, template, template, newKey, newKey)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: newKey, certPEM: certPEM}, nil
}

// ensureLeaf keeps the pair at s.certPath/s.keyPath if it still matches s,
// or creates a new one, and returns the PEM of both.
func ensureLeaf(s leafSpec, now time.Time) (certPEM, keyPEM []byte, err error) {
	cert, _, certPEM, keyPEM, err := loadPair(s.certPath, s.keyPath)
	if err == nil && s.matches(cert, now) {
		return certPEM, keyPEM, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", s.certPath, err)
	}
	notAfter := now.Add(validity)
	if s.issuer.cert.NotAfter.Before(notAfter) {
		notAfter = s.issuer.cert.NotAfter // never outlive the CA
	}
	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: s.subject.cn, Organization: s.subject.orgs},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{s.usage()},
		DNSNames:    s.dnsNames,
		IPAddresses: s.ips,
	}
	_, certPEM, keyPEM, err = writePair(s.certPath, s.keyPath, template, s.issuer.cert, key, s.issuer.key)
	return certPEM, keyPEM, err
}

// loadPair reads a cert and its key and checks that they belong together.
func loadPair(certPath, keyPath string) (cert *x509.Certificate, key crypto.Signer, certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(certPath); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("read %s: %w", certPath, err)
	}
	if keyPEM, err = os.ReadFile(keyPath); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("read %s: %w", keyPath, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("load %s: %w", certPath, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, nil, nil, fmt.Errorf("load %s: key is a %T, not a signer", keyPath, pair.PrivateKey)
	}
	return pair.Leaf, key, certPEM, keyPEM, nil
}

// writePair signs template with parentKey, writes key then cert, and returns
// the parsed cert and the PEM of both.
func writePair(certPath, keyPath string, template, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (
	cert *x509.Certificate, certPEM, keyPEM []byte, err error) {
	// A nil template.SerialNumber makes CreateCertificate pick a random one.
	der, err := x509.CreateCertificate(rand.Reader, template, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sign %s: %w", certPath, err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, fmt.Errorf("parse %s: %w", certPath, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("marshal %s: %w", keyPath, err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFile(certPath, certPEM, 0o644); err != nil {
		return nil, nil, nil, err
	}
	return cert, certPEM, keyPEM, nil
}

// ensureServiceAccountKey keeps a valid RSA key at keyPath (creating one if
// needed) and makes pubPath hold its public key.
func ensureServiceAccountKey(keyPath, pubPath string) error {
	key, err := loadRSAKey(keyPath)
	if err != nil {
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return fmt.Errorf("generate %s: %w", keyPath, err)
		}
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
			return err
		}
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("marshal %s: %w", pubPath, err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return writeIfChanged(pubPath, pubPEM, 0o644)
}

// loadRSAKey reads a PKCS#1 RSA private key of at least 2048 bits.
func loadRSAKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "RSA PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no RSA PRIVATE KEY block", path)
	}
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if key.N.BitLen() < 2048 {
		return nil, fmt.Errorf("%s: %d-bit key is too small", path, key.N.BitLen())
	}
	return key, nil
}

// ensureKubeconfig writes a kubeconfig for user, unless path already holds
// exactly that content.
func ensureKubeconfig(path string, opts Options, caPEM []byte, user string, certPEM, keyPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[opts.ClusterName] = &clientcmdapi.Cluster{Server: opts.APIServerURL, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	context := user + "@" + opts.ClusterName
	cfg.Contexts[context] = &clientcmdapi.Context{Cluster: opts.ClusterName, AuthInfo: user}
	cfg.CurrentContext = context
	// clientcmd.Write plus writeFile rather than clientcmd.WriteToFile: the
	// content is compared first, and the write is atomic.
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeIfChanged(path, data, 0o600)
}

// writeIfChanged writes data to path unless path already holds it.
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return writeFile(path, data, mode)
}

// writeFile replaces path atomically with data and the given mode.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// normalize returns ss sorted and without duplicates.
func normalize(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}
