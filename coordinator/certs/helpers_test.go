package certs

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testNamespace  = "shoal-system"
	testServerName = "shoal-coordinator.shoal-system.svc"
	day            = 24 * time.Hour
)

// t0 is the fake clocks' start.
var t0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

func newAuthority(client kubernetes.Interface, clk *clocktesting.FakeClock) *Authority {
	return &Authority{Client: client, Namespace: testNamespace, Clock: clk}
}

func getSecret(t *testing.T, client kubernetes.Interface, name string) *corev1.Secret {
	t.Helper()
	sec, err := client.CoreV1().Secrets(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return sec
}

func getBundleConfigMap(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(testNamespace).Get(context.Background(), DefaultConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	return cm.Data[ConfigMapBundleKey]
}

func mustParseCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	certs, err := parseCerts(data)
	require.NoError(t, err)
	return certs
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// verifyLeaf checks the serving certificate chain certDER (leaf first)
// against roots at time now for testServerName.
func verifyLeaf(t *testing.T, certDER [][]byte, roots *x509.CertPool, now time.Time) error {
	t.Helper()
	leaf, err := x509.ParseCertificate(certDER[0])
	require.NoError(t, err)
	inter := x509.NewCertPool()
	for _, der := range certDER[1:] {
		c, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		inter.AddCert(c)
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		DNSName:       testServerName,
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// issue returns a fresh serving certificate chain from b at clk's time.
func issue(t *testing.T, b *Bundle, clk *clocktesting.FakeClock) [][]byte {
	t.Helper()
	s := NewServing(DNSNames("shoal-coordinator", testNamespace), clk)
	require.NoError(t, s.Update(b))
	c, err := s.GetCertificate(nil)
	require.NoError(t, err)
	return c.Certificate
}

func newFakeClient(objs ...*corev1.Secret) *fake.Clientset {
	client := fake.NewClientset()
	for _, o := range objs {
		if err := client.Tracker().Add(o); err != nil {
			panic(err)
		}
	}
	return client
}
