package certs

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/imagewarm/peertls"
)

func TestPeerSigner(t *testing.T) {
	ctx := testContext(t)
	client := fake.NewClientset(validatingConfig(DefaultValidatingWebhook, ""))
	clk := clocktesting.NewFakeClock(t0)
	m, err := NewManager(newAuthority(client, clk), func() bool { return true }, nil)
	require.NoError(t, err)
	signer := &PeerSigner{Manager: m, Validity: time.Hour, Clock: clk}
	id, err := peertls.NewIdentity(peertls.Options{Node: "node-1", Clock: clk})
	require.NoError(t, err)
	csr, err := id.NewRequest()
	require.NoError(t, err)

	_, _, err = signer.SignPeer(ctx, csr, "node-1")
	require.ErrorContains(t, err, "has not loaded its CA yet")
	require.NotErrorIs(t, err, dispatch.ErrBadCertificateRequest, "not the agent's fault")

	require.NoError(t, m.Sync(ctx))
	chain, bundle, err := signer.SignPeer(ctx, csr, "node-1")
	require.NoError(t, err)
	require.Equal(t, m.Bundle().BundlePEM, bundle)
	require.NoError(t, id.Install(chain, bundle))
	leaf := id.Leaf()
	require.Equal(t, "node-1", leaf.Subject.CommonName)
	require.Equal(t, clk.Now().Add(time.Hour).Unix(), leaf.NotAfter.Unix())
	// The coordinator's own serving certificates come from the same CA;
	// a peer certificate carries no name a client of the coordinator
	// would accept.
	require.Empty(t, leaf.DNSNames)
	require.Error(t, leaf.VerifyHostname(testServerName))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: m.Bundle().Pool(), CurrentTime: clk.Now(),
		DNSName: testServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err)

	_, _, err = signer.SignPeer(ctx, []byte("not a CSR"), "node-1")
	require.ErrorIs(t, err, dispatch.ErrBadCertificateRequest)
}
