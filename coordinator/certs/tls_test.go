package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// handshake serves one TLS handshake with s on a loopback listener and
// dials it with a client that trusts roots and expects serverName.
func handshake(t *testing.T, s *Serving, roots *x509.CertPool, serverName string, now time.Time) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clockFn := func() time.Time { return now }

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		GetCertificate: s.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		Time:           clockFn,
	})
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()

	serverErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer func() { _ = conn.Close() }()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		serverErr <- conn.(*tls.Conn).HandshakeContext(ctx)
	}()

	dialer := &tls.Dialer{Config: &tls.Config{
		RootCAs:    roots,
		ServerName: serverName,
		MinVersion: tls.VersionTLS12,
		Time:       clockFn,
	}}
	conn, err := dialer.DialContext(ctx, "tcp", ln.Addr().String())
	if err == nil {
		_ = conn.Close()
	}
	// The server side fails too when the client rejects it; wait for it
	// so no goroutine outlives the test.
	<-serverErr
	return err
}

func TestTLSHandshake(t *testing.T) {
	ctx := testContext(t)
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	a := newAuthority(client, clk)
	first, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	// Clients load the bundle as agents do: from the ConfigMap.
	firstPool := poolOf(mustParseCerts(t, []byte(getBundleConfigMap(t, client)))...)

	oldServer := NewServing(DNSNames("shoal-coordinator", testNamespace), clk)
	require.NoError(t, oldServer.Update(first))

	t.Run("trusted, right name", func(t *testing.T) {
		require.NoError(t, handshake(t, oldServer, firstPool, testServerName, clk.Now()))
	})
	t.Run("wrong name", func(t *testing.T) {
		require.ErrorContains(t, handshake(t, oldServer, firstPool, "shoal-webhook.shoal-system.svc", clk.Now()), "certificate")
	})
	t.Run("untrusted CA", func(t *testing.T) {
		other, err := newGeneration(clk.Now(), day, nil, nil)
		require.NoError(t, err)
		require.ErrorContains(t, handshake(t, oldServer, other.Pool(), testServerName, clk.Now()), "unknown authority")
	})

	// Rotate: a server with a new leaf and one still on its old leaf must
	// both be accepted by clients holding either bundle.
	clk.SetTime(first.CACert.NotAfter.Add(-DefaultRotateBefore + time.Hour))
	require.NoError(t, oldServer.Update(first), "renew the expired leaf from the first CA")
	require.NoError(t, oldServer.Leaf().CheckSignatureFrom(first.CACert))
	second, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	secondPool := poolOf(mustParseCerts(t, []byte(getBundleConfigMap(t, client)))...)
	newServer := NewServing(DNSNames("shoal-coordinator", testNamespace), clk)
	require.NoError(t, newServer.Update(second))

	for _, tc := range []struct {
		name   string
		server *Serving
		roots  *x509.CertPool
	}{
		{name: "old leaf, new bundle", server: oldServer, roots: secondPool},
		{name: "new leaf, new bundle", server: newServer, roots: secondPool},
		{name: "new leaf, old bundle", server: newServer, roots: firstPool},
		{name: "old leaf, old bundle", server: oldServer, roots: firstPool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, handshake(t, tc.server, tc.roots, testServerName, clk.Now()))
		})
	}
}
