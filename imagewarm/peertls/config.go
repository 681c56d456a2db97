package peertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// errNoCertificate fails the handshake of the peer listener before the
// first Install.
var errNoCertificate = errors.New("peer certificate not issued yet")

// nextProtos is the ALPN of the peer listener: the peers speak HTTP/1.1.
var nextProtos = []string{"http/1.1"}

// ServerConfig is the tls.Config of the peer listener: TLS 1.3 minimum, the
// current certificate through GetCertificate (an error before the first
// Install: the handshake fails), ClientAuth tls.RequestClientCert and
// NextProtos http/1.1.
//
// The client certificate is NOT verified by TLS: Guard verifies it at the
// HTTP layer, so that a refusal is an HTTP 401 or 403 with a message rather
// than a TLS alert, and so that it is checked against the bundle and the
// clock of each request rather than once per connection.
func (id *Identity) ServerConfig() *tls.Config {
	handshake := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: id.getCertificate,
		ClientAuth:     tls.RequestClientCert,
		NextProtos:     nextProtos,
	}
	c := handshake.Clone()
	// Every handshake uses handshake, whatever the server does to the
	// config it was given. Without SNI (peers are dialed by IP) crypto/tls
	// prefers Certificates[0] to GetCertificate, and httptest's StartTLS
	// adds its own certificate there; http.Server.ServeTLS adds "h2" to
	// NextProtos.
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return handshake, nil }
	return c
}

// getCertificate returns the current certificate; it fits
// tls.Config.GetCertificate.
func (id *Identity) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if st := id.cur.Load(); st != nil {
		return st.cert, nil
	}
	return nil, errNoCertificate
}

// ClientConfig is the tls.Config for dialing peers: TLS 1.3 minimum, the
// current certificate through GetClientCertificate (none before the first
// Install), and a check of the server's certificate by VerifyConnection:
// its chain must verify against the CURRENT bundle at the clock's now for
// ServerAuth, and its leaf must have O = Organization and a non-empty CN.
//
// InsecureSkipVerify only turns off crypto/tls's own check, which would
// also match the dialed host against the certificate's SANs. Peers are
// dialed by IP and peer certificates have no IP SANs on purpose: an agent
// proves that it is an agent, not which address it has, and that is all
// that matters here. Blobs are addressed by digest and the fetcher verifies
// every piece, so a peer cannot serve wrong content undetected; the
// certificate keeps everything that is not an agent (any pod on the
// network) out of the swarm, in both directions.
func (id *Identity) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetClientCertificate: id.getClientCertificate,
		InsecureSkipVerify:   true, //nolint:gosec // VerifyConnection verifies; see above.
		VerifyConnection:     id.verifyServer,
		NextProtos:           nextProtos,
	}
}

// getClientCertificate returns the current certificate, or an empty one
// (no certificate sent: the server answers 401) before the first Install.
func (id *Identity) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if st := id.cur.Load(); st != nil {
		return st.cert, nil
	}
	return &tls.Certificate{}, nil
}

// verifyServer is ClientConfig's VerifyConnection.
func (id *Identity) verifyServer(cs tls.ConnectionState) error {
	st := id.cur.Load()
	if st == nil {
		return errors.New("peer server certificate refused: this agent has no trust bundle yet")
	}
	if _, err := verifyPeer(cs.PeerCertificates, st.roots, id.clock.Now(), x509.ExtKeyUsageServerAuth); err != nil {
		return fmt.Errorf("peer server certificate refused: %w", err)
	}
	return nil
}
