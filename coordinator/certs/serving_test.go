package certs

import (
	"crypto/x509"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestDNSNames(t *testing.T) {
	require.Equal(t, []string{
		"shoal-webhook",
		"shoal-webhook.shoal-system",
		"shoal-webhook.shoal-system.svc",
		"shoal-webhook.shoal-system.svc.cluster.local",
	}, DNSNames("shoal-webhook", "shoal-system"))
}

func TestServingRenewal(t *testing.T) {
	ctx := testContext(t)
	mkBundle := func(t *testing.T, at time.Time) *Bundle {
		t.Helper()
		b, err := newAuthority(fake.NewClientset(), clocktesting.NewFakeClock(at)).Ensure(ctx, true)
		require.NoError(t, err)
		return b
	}
	caA := mkBundle(t, t0)
	caB := mkBundle(t, t0)
	// The point where exactly a third of the leaf's validity remains.
	third := t0.Add(-backdate).Add((ServingValidity + backdate) * 2 / 3)

	for _, tc := range []struct {
		name    string
		advance time.Time
		next    *Bundle
		renewed bool
	}{
		{name: "same CA, fresh", advance: t0.Add(time.Hour), next: caA, renewed: false},
		{name: "same CA, just over a third left", advance: third.Add(-time.Minute), next: caA, renewed: false},
		{name: "same CA, under a third left", advance: third.Add(time.Minute), next: caA, renewed: true},
		{name: "same CA, expired", advance: t0.Add(ServingValidity + time.Hour), next: caA, renewed: true},
		{name: "CA changed", advance: t0.Add(time.Hour), next: caB, renewed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			s := NewServing(DNSNames("shoal-coordinator", testNamespace), clk)
			_, err := s.GetCertificate(nil)
			require.ErrorIs(t, err, ErrNoCertificate)

			require.NoError(t, s.Update(caA))
			first := s.Leaf()
			require.NotNil(t, first)
			require.Equal(t, t0.Add(ServingValidity), first.NotAfter)
			require.Equal(t, DNSNames("shoal-coordinator", testNamespace), first.DNSNames)
			require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, first.ExtKeyUsage)
			require.Equal(t, x509.ECDSA, first.PublicKeyAlgorithm)
			require.NoError(t, first.CheckSignatureFrom(caA.CACert))

			clk.SetTime(tc.advance)
			require.NoError(t, s.Update(tc.next))
			got := s.Leaf()
			require.Equal(t, tc.renewed, !got.Equal(first))
			require.NoError(t, got.CheckSignatureFrom(tc.next.CACert))
			c, err := s.GetCertificate(nil)
			require.NoError(t, err)
			require.Equal(t, got.Raw, c.Certificate[0])
		})
	}
}

func TestServingChain(t *testing.T) {
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(t0)
	a := newAuthority(fake.NewClientset(), clk)
	first, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	clk.SetTime(first.CACert.NotAfter.Add(-DefaultRotateBefore + time.Second))
	second, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	require.Len(t, second.Chain, 1)

	clk.SetTime(first.CACert.NotAfter.Add(-day))
	s := NewServing([]string{testServerName}, clk)
	require.NoError(t, s.Update(second))
	c, err := s.GetCertificate(nil)
	require.NoError(t, err)
	require.Len(t, c.Certificate, 2, "leaf and cross-signed CA")
	leaf := s.Leaf()

	// When the cross-signed CA expires, the leaf stays and the chain
	// shrinks.
	clk.SetTime(first.CACert.NotAfter.Add(time.Second))
	require.NoError(t, s.Update(second))
	c, err = s.GetCertificate(nil)
	require.NoError(t, err)
	require.Len(t, c.Certificate, 1)
	require.True(t, s.Leaf().Equal(leaf))
}

func TestServingConcurrent(t *testing.T) {
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(t0)
	a := newAuthority(fake.NewClientset(), clk)
	b1, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	b2, err := newAuthority(fake.NewClientset(), clk).Ensure(ctx, true)
	require.NoError(t, err)

	s := NewServing([]string{testServerName}, clk)
	require.NoError(t, s.Update(b1))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 20 {
				if (i+j)%2 == 0 {
					require.NoError(t, s.Update(b1))
				} else {
					require.NoError(t, s.Update(b2))
				}
				c, err := s.GetCertificate(nil)
				require.NoError(t, err)
				require.NotNil(t, c.Leaf)
			}
		})
	}
	wg.Wait()
}

func TestServingUpdateErrors(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	require.Error(t, NewServing([]string{testServerName}, clk).Update(nil))
	require.Error(t, NewServing([]string{testServerName}, clk).Update(&Bundle{}))
	b, err := newGeneration(t0, day, nil, nil)
	require.NoError(t, err)
	require.Error(t, NewServing(nil, clk).Update(b))
}
