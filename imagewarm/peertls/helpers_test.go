package peertls_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/peertls/peertlstest"
)

func newCA(t *testing.T, name string) *peertlstest.CA {
	t.Helper()
	ca, err := peertlstest.NewCA(name)
	require.NoError(t, err)
	return ca
}

// installed returns an Identity for node holding a certificate from ca.
func installed(t *testing.T, ca *peertlstest.CA, node string, o peertls.Options) *peertls.Identity {
	t.Helper()
	o.Node = node
	if o.Logger.GetSink() == nil {
		o.Logger = ktesting.NewLogger(t, ktesting.NewConfig())
	}
	id, err := peertls.NewIdentity(o)
	require.NoError(t, err)
	csr, err := id.NewRequest()
	require.NoError(t, err)
	chain, bundle, err := ca.Issuer(node, 0)(t.Context(), csr)
	require.NoError(t, err)
	require.NoError(t, id.Install(chain, bundle))
	return id
}

// peerTemplate is a template of a valid peer certificate for node; tests
// spoil one field of it.
func peerTemplate(node string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: node, Organization: []string{peertls.Organization}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
}

// issueRaw signs tmpl with ca directly (not through Sign), for a fresh key.
func issueRaw(t *testing.T, ca *peertlstest.CA, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c
}

// metricValue returns the value of the metric name whose result label is
// result ("" for a metric without labels).
func metricValue(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					got = l.GetValue()
				}
			}
			if got != result {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	require.Failf(t, "metric not found", "%s{result=%q}", name, result)
	return 0
}
