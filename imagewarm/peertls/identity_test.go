package peertls_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/imagewarm/peertls"
)

func TestNewIdentity(t *testing.T) {
	_, err := peertls.NewIdentity(peertls.Options{})
	require.ErrorContains(t, err, "no node name")

	reg := prometheus.NewRegistry()
	id, err := peertls.NewIdentity(peertls.Options{Node: "node-a", Registerer: reg})
	require.NoError(t, err)
	require.Nil(t, id.Leaf())
	require.Zero(t, metricValue(t, reg, peertls.MetricCertificateExpiry, ""))
	_, err = peertls.NewIdentity(peertls.Options{Node: "node-a", Registerer: reg})
	require.ErrorContains(t, err, "registering peer TLS metrics")

	// Before the first Install the listener cannot handshake and the
	// client has no certificate to show.
	_, err = id.ServerConfig().GetCertificate(&tls.ClientHelloInfo{})
	require.Error(t, err)
	c, err := id.ClientConfig().GetClientCertificate(&tls.CertificateRequestInfo{})
	require.NoError(t, err)
	require.Empty(t, c.Certificate)
}

func TestNewRequest(t *testing.T) {
	id, err := peertls.NewIdentity(peertls.Options{Node: "node-a"})
	require.NoError(t, err)
	der, err := id.NewRequest()
	require.NoError(t, err)
	csr, err := x509.ParseCertificateRequest(der)
	require.NoError(t, err)
	require.NoError(t, csr.CheckSignature())
	require.Equal(t, "node-a", csr.Subject.CommonName)
	require.Equal(t, []string{peertls.Organization}, csr.Subject.Organization)
	require.Equal(t, "ECDSA", csr.PublicKeyAlgorithm.String())
}

func TestInstall(t *testing.T) {
	ca := newCA(t, "cluster")
	otherCA := newCA(t, "other")
	// sign issues the pending key's CSR from ca (or another) for node.
	sign := func(t *testing.T, id *peertls.Identity, signer interface {
		Issuer(string, time.Duration) peertls.Issuer
	}, node string) ([]byte, []byte) {
		t.Helper()
		csr, err := id.NewRequest()
		require.NoError(t, err)
		chain, bundle, err := signer.Issuer(node, 0)(t.Context(), csr)
		require.NoError(t, err)
		return chain, bundle
	}

	t.Run("accepts its own chain", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		id, err := peertls.NewIdentity(peertls.Options{Node: "node-a", Registerer: reg})
		require.NoError(t, err)
		chain, bundle := sign(t, id, ca, "node-a")
		require.NoError(t, id.Install(chain, bundle))
		leaf := id.Leaf()
		require.NotNil(t, leaf)
		require.Equal(t, "node-a", leaf.Subject.CommonName)
		require.Equal(t, float64(leaf.NotAfter.Unix()), metricValue(t, reg, peertls.MetricCertificateExpiry, ""))
		c, err := id.ServerConfig().GetCertificate(&tls.ClientHelloInfo{})
		require.NoError(t, err)
		require.Equal(t, leaf.Raw, c.Certificate[0])
		// The key is no longer pending: the same chain cannot be installed
		// twice.
		require.ErrorContains(t, id.Install(chain, bundle), "no pending key")
	})

	for _, tc := range []struct {
		name string
		// bad returns what to Install after a good Install.
		bad     func(t *testing.T, id *peertls.Identity) (chain, bundle []byte)
		wantErr string
	}{
		{
			name: "no pending key",
			bad: func(t *testing.T, id *peertls.Identity) ([]byte, []byte) {
				other, err := peertls.NewIdentity(peertls.Options{Node: "node-a"})
				require.NoError(t, err)
				return sign(t, other, ca, "node-a")
			},
			wantErr: "no pending key",
		},
		{
			name: "a chain for a different key",
			bad: func(t *testing.T, id *peertls.Identity) ([]byte, []byte) {
				_, err := id.NewRequest()
				require.NoError(t, err)
				other, err := peertls.NewIdentity(peertls.Options{Node: "node-a"})
				require.NoError(t, err)
				return sign(t, other, ca, "node-a")
			},
			wantErr: "certificate is not for the pending key",
		},
		{
			name: "a chain from another CA",
			bad: func(t *testing.T, id *peertls.Identity) ([]byte, []byte) {
				chain, _ := sign(t, id, otherCA, "node-a")
				return chain, ca.BundlePEM
			},
			wantErr: "certificate signed by unknown authority",
		},
		{
			name: "a chain for another node",
			bad: func(t *testing.T, id *peertls.Identity) ([]byte, []byte) {
				return sign(t, id, ca, "node-b")
			},
			wantErr: `certificate is for node "node-b", not "node-a"`,
		},
		{
			name: "an empty bundle",
			bad: func(t *testing.T, id *peertls.Identity) ([]byte, []byte) {
				chain, _ := sign(t, id, ca, "node-a")
				return chain, nil
			},
			wantErr: "trust bundle: no PEM certificate",
		},
		{
			name: "a key instead of a chain",
			bad: func(t *testing.T, id *peertls.Identity) ([]byte, []byte) {
				_, bundle := sign(t, id, ca, "node-a")
				return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), bundle
			},
			wantErr: `chain: unexpected PEM block "PRIVATE KEY"`,
		},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			id := installed(t, ca, "node-a", peertls.Options{Registerer: reg})
			before := id.Leaf()
			expiry := metricValue(t, reg, peertls.MetricCertificateExpiry, "")

			chain, bundle := tc.bad(t, id)
			err := id.Install(chain, bundle)
			require.ErrorContains(t, err, tc.wantErr)
			require.ErrorContains(t, err, "install peer certificate: ")

			require.Same(t, before, id.Leaf(), "a failed Install changed the certificate")
			require.Equal(t, expiry, metricValue(t, reg, peertls.MetricCertificateExpiry, ""))
			c, err := id.ServerConfig().GetCertificate(&tls.ClientHelloInfo{})
			require.NoError(t, err)
			require.Equal(t, before.Raw, c.Certificate[0])
		})
	}

	t.Run("a failed Install keeps the pending key", func(t *testing.T) {
		id := installed(t, ca, "node-a", peertls.Options{})
		csr, err := id.NewRequest()
		require.NoError(t, err)
		wrong, _, err := otherCA.Issuer("node-a", 0)(t.Context(), csr)
		require.NoError(t, err)
		require.Error(t, id.Install(wrong, ca.BundlePEM))
		right, bundle, err := ca.Issuer("node-a", 0)(t.Context(), csr)
		require.NoError(t, err)
		require.NoError(t, id.Install(right, bundle))
	})

	t.Run("refuses a chain not valid at the clock's now", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now().Add(2 * peertls.DefaultValidity)) // past its expiry
		id, err := peertls.NewIdentity(peertls.Options{Node: "node-a", Clock: clk})
		require.NoError(t, err)
		chain, bundle := sign(t, id, ca, "node-a")
		require.ErrorContains(t, id.Install(chain, bundle), "certificate has expired or is not yet valid")
		require.Nil(t, id.Leaf())
	})
}
