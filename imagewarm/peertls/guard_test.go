package peertls_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/peertls/peertlstest"
)

// layer is the peer handler of the tests: it answers with the content a
// refused client must never see, and the peer Guard verified.
var layer = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	node, _ := peertls.NodeFrom(r.Context())
	w.Header().Set("X-Peer", node)
	_, _ = io.WriteString(w, "layer-bytes")
})

// alive says every node is a live member but node-gone.
func alive(node string) bool { return node != "node-gone" }

// httpClient returns a client dialing with cfg.
func httpClient(t *testing.T, cfg *tls.Config) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// peerServer serves layer behind id's Guard over id's TLS.
func peerServer(t *testing.T, id *peertls.Identity) *httptest.Server {
	srv := httptest.NewUnstartedServer(id.Guard(layer, alive))
	srv.TLS = id.ServerConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestGuardOverTLS(t *testing.T) {
	ca := newCA(t, "cluster")
	otherCA := newCA(t, "not-the-cluster")
	reg := prometheus.NewRegistry()
	server := installed(t, ca, "node-a", peertls.Options{Registerer: reg})
	srv := peerServer(t, server)

	foreign, err := otherCA.ClientCert("node-b")
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		client     *tls.Config
		wantStatus int
		wantBody   string
		wantPeer   string
	}{
		{
			name:       "a peer of the same CA",
			client:     installed(t, ca, "node-b", peertls.Options{}).ClientConfig(),
			wantStatus: http.StatusOK, wantBody: "layer-bytes", wantPeer: "node-b",
		},
		{
			name:       "no client certificate",
			client:     &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, //nolint:gosec // the server is not what is tested
			wantStatus: http.StatusUnauthorized,
			wantBody:   "peer blobs and the tracker need a client certificate of a Shoal agent, issued by the coordinator's CA",
		},
		{
			name:       "a client certificate from another CA",
			client:     &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{foreign}}, //nolint:gosec // the server is not what is tested
			wantStatus: http.StatusForbidden,
			wantBody:   "client certificate refused: x509: certificate signed by unknown authority",
		},
		{
			name:       "a node that is not a live member",
			client:     installed(t, ca, "node-gone", peertls.Options{}).ClientConfig(),
			wantStatus: http.StatusForbidden,
			wantBody:   "node node-gone is not a live member of the agent mesh",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := httpClient(t, tc.client).Get(srv.URL + "/v2/app/blobs/sha256:0")
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, resp.Body.Close())
			require.NoError(t, err)
			require.Equal(t, tc.wantStatus, resp.StatusCode, "%s", body)
			require.Contains(t, string(body), tc.wantBody)
			require.Equal(t, tc.wantPeer, resp.Header.Get("X-Peer"))
			require.Empty(t, resp.Header.Get("WWW-Authenticate"))
			require.Equal(t, "HTTP/1.1", resp.Proto)
			if tc.wantStatus != http.StatusOK {
				require.NotContains(t, string(body), "layer-bytes")
			}
			// The server presented its own peer certificate, not
			// httptest's.
			require.Equal(t, server.Leaf().Raw, resp.TLS.PeerCertificates[0].Raw)
		})
	}

	for result, want := range map[string]float64{"allowed": 1, "no_certificate": 1, "bad_certificate": 1, "not_member": 1} {
		require.Equal(t, want, metricValue(t, reg, peertls.MetricRequests, result), result)
	}
}

func TestClientConfigRefusesServers(t *testing.T) {
	ca := newCA(t, "cluster")
	otherCA := newCA(t, "not-the-cluster")
	client := installed(t, ca, "node-b", peertls.Options{})
	notYet, err := peertls.NewIdentity(peertls.Options{Node: "node-c"})
	require.NoError(t, err)

	httptestTLS := httptest.NewTLSServer(layer)
	t.Cleanup(httptestTLS.Close)
	for _, tc := range []struct {
		name    string
		url     string
		client  *peertls.Identity
		wantErr string
	}{
		{
			name:    "a server of another CA",
			url:     peerServer(t, installed(t, otherCA, "node-x", peertls.Options{})).URL,
			client:  client,
			wantErr: "peer server certificate refused: x509: certificate signed by unknown authority",
		},
		{
			name:    "a server without a peer certificate",
			url:     httptestTLS.URL,
			client:  client,
			wantErr: "peer server certificate refused: certificate is a CA certificate", // httptest's own
		},
		{
			name:    "a client without a bundle yet",
			url:     peerServer(t, installed(t, ca, "node-a", peertls.Options{})).URL,
			client:  notYet,
			wantErr: "peer server certificate refused: this agent has no trust bundle yet",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := httpClient(t, tc.client.ClientConfig()).Get(tc.url + "/v2/app/blobs/sha256:0")
			if resp != nil {
				_ = resp.Body.Close()
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// TestGuardRefusesCertificates checks the reasons a certificate is refused,
// on requests whose TLS state the test makes up.
func TestGuardRefusesCertificates(t *testing.T) {
	ca := newCA(t, "cluster")
	reg := prometheus.NewRegistry()
	server := installed(t, ca, "node-a", peertls.Options{Registerer: reg})
	h := server.Guard(layer, nil) // no membership check

	now := time.Now()
	spoilt := func(spoil func(c *x509.Certificate)) []*x509.Certificate {
		tmpl := peerTemplate("node-b")
		spoil(tmpl)
		return []*x509.Certificate{issueRaw(t, ca, tmpl)}
	}
	for _, tc := range []struct {
		name       string
		tls        *tls.ConnectionState
		wantStatus int
		wantBody   string
	}{
		{name: "no TLS", wantStatus: http.StatusUnauthorized, wantBody: "need a client certificate"},
		{name: "no client certificate", tls: &tls.ConnectionState{}, wantStatus: http.StatusUnauthorized, wantBody: "need a client certificate"},
		{
			name:       "expired",
			tls:        &tls.ConnectionState{PeerCertificates: spoilt(func(c *x509.Certificate) { c.NotAfter = now.Add(-time.Second) })},
			wantStatus: http.StatusForbidden, wantBody: "client certificate refused: x509: certificate has expired or is not yet valid",
		},
		{
			name:       "no ClientAuth usage",
			tls:        &tls.ConnectionState{PeerCertificates: spoilt(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} })},
			wantStatus: http.StatusForbidden, wantBody: "client certificate refused: certificate is not for client authentication",
		},
		{
			name:       "no extended key usage at all",
			tls:        &tls.ConnectionState{PeerCertificates: spoilt(func(c *x509.Certificate) { c.ExtKeyUsage = nil })},
			wantStatus: http.StatusForbidden, wantBody: "client certificate refused: certificate is not for client authentication",
		},
		{
			name:       "organization missing",
			tls:        &tls.ConnectionState{PeerCertificates: spoilt(func(c *x509.Certificate) { c.Subject.Organization = []string{"system:nodes"} })},
			wantStatus: http.StatusForbidden, wantBody: `client certificate refused: certificate's organization ["system:nodes"] does not include "shoal:agents"`,
		},
		{
			name:       "no node name",
			tls:        &tls.ConnectionState{PeerCertificates: spoilt(func(c *x509.Certificate) { c.Subject.CommonName = "" })},
			wantStatus: http.StatusForbidden, wantBody: "client certificate refused: certificate names no node",
		},
		{
			name: "a CA certificate",
			tls: &tls.ConnectionState{PeerCertificates: spoilt(func(c *x509.Certificate) {
				c.IsCA, c.BasicConstraintsValid = true, true
				c.KeyUsage |= x509.KeyUsageCertSign
			})},
			wantStatus: http.StatusForbidden, wantBody: "client certificate refused: certificate is a CA certificate",
		},
		{
			name:       "valid",
			tls:        &tls.ConnectionState{PeerCertificates: spoilt(func(*x509.Certificate) {})},
			wantStatus: http.StatusOK, wantBody: "layer-bytes",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v2/app/blobs/sha256:0", nil)
			r.TLS = tc.tls
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tc.wantStatus, w.Code, w.Body.String())
			require.Contains(t, w.Body.String(), tc.wantBody)
			if tc.wantStatus != http.StatusOK {
				require.NotContains(t, w.Body.String(), "layer-bytes")
				require.Empty(t, w.Header().Get("X-Peer"))
			}
		})
	}
	for result, want := range map[string]float64{"allowed": 1, "no_certificate": 2, "bad_certificate": 6, "not_member": 0} {
		require.Equal(t, want, metricValue(t, reg, peertls.MetricRequests, result), result)
	}
}

func TestNodeFrom(t *testing.T) {
	_, ok := peertls.NodeFrom(t.Context())
	require.False(t, ok)
}

// BenchmarkGuard is the cost Guard adds to each peer request: verifying the
// client's chain against the bundle.
func BenchmarkGuard(b *testing.B) {
	ca, err := peertlstest.NewCA("cluster")
	require.NoError(b, err)
	server, err := peertls.NewIdentity(peertls.Options{Node: "node-a"})
	require.NoError(b, err)
	csr, err := server.NewRequest()
	require.NoError(b, err)
	chain, bundle, err := ca.Issuer("node-a", 0)(b.Context(), csr)
	require.NoError(b, err)
	require.NoError(b, server.Install(chain, bundle))
	client, err := ca.ClientCert("node-b")
	require.NoError(b, err)
	h := server.Guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), alive)
	r := httptest.NewRequest(http.MethodGet, "/v2/app/blobs/sha256:0", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{client.Leaf}}
	w := httptest.NewRecorder()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
	require.Equal(b, http.StatusOK, w.Code)
}
