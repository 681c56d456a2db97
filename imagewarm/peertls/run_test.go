package peertls_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/peertls/peertlstest"
)

// Bounds of the waits for Run's goroutine.
const (
	waitFor = 10 * time.Second
	tick    = time.Millisecond
)

// fakeCoordinator issues certificates from a CA at a fake clock's time, or
// fails while told to.
type fakeCoordinator struct {
	ca       *peertlstest.CA
	clk      *clocktesting.FakeClock
	validity time.Duration
	failing  atomic.Bool
	calls    atomic.Int32
}

func (c *fakeCoordinator) issue(_ context.Context, csr []byte) ([]byte, []byte, error) {
	c.calls.Add(1)
	if c.failing.Load() {
		return nil, nil, errors.New("coordinator unreachable")
	}
	chain, err := peertls.Sign(peertls.SignRequest{
		CSR: csr, Node: "node-a", CACert: c.ca.Cert, CAKey: c.ca.Key, Validity: c.validity, Now: c.clk.Now(),
	})
	return chain, c.ca.BundlePEM, err
}

// renewal is when two thirds of leaf's validity have passed.
func renewal(leaf *x509.Certificate) time.Time {
	return leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
}

func TestRun(t *testing.T) {
	const validity = 30 * time.Minute
	clk := clocktesting.NewFakeClock(time.Now())
	coord := &fakeCoordinator{ca: newCA(t, "cluster"), clk: clk, validity: validity}
	reg := prometheus.NewRegistry()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	logged := func(msg string) bool {
		return strings.Contains(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), msg)
	}
	id, err := peertls.NewIdentity(peertls.Options{Node: "node-a", Registerer: reg, Clock: clk, Logger: logger})
	require.NoError(t, err)
	peertls.SetBackoff(id, time.Second, 4*time.Second)
	renewals := func(result string) float64 { return metricValue(t, reg, peertls.MetricRenewals, result) }
	waitTimer := func() {
		t.Helper()
		require.Eventually(t, clk.HasWaiters, waitFor, tick, "Run waits on the clock")
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- id.Run(ctx, coord.issue) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitFor):
			t.Fatal("Run did not return after its context ended")
		}
	}()

	// The first certificate is installed at once, without the clock moving.
	require.Eventually(t, func() bool { return id.Leaf() != nil }, waitFor, tick)
	first := id.Leaf()
	require.Equal(t, "node-a", first.Subject.CommonName)
	require.Equal(t, float64(first.NotAfter.Unix()), metricValue(t, reg, peertls.MetricCertificateExpiry, ""))
	waitTimer()
	require.Equal(t, 1.0, renewals("ok"))

	// Not renewed before two thirds of its validity.
	due := renewal(first)
	clk.SetTime(due.Add(-time.Second))
	require.True(t, clk.HasWaiters(), "the renewal timer fired early")
	require.Equal(t, int32(1), coord.calls.Load())

	// Renewed at two thirds.
	clk.SetTime(due)
	require.Eventually(t, func() bool { return id.Leaf() != first }, waitFor, tick, "renewed at two thirds")
	second := id.Leaf()
	require.NotEqual(t, first.SerialNumber, second.SerialNumber)
	require.True(t, second.NotAfter.After(first.NotAfter))
	waitTimer()
	require.Equal(t, 2.0, renewals("ok"))
	require.Equal(t, float64(second.NotAfter.Unix()), metricValue(t, reg, peertls.MetricCertificateExpiry, ""))

	// A failing renewal keeps the current certificate and is retried
	// with backoff: 1 s, 2 s, then capped at 4 s.
	coord.failing.Store(true)
	clk.SetTime(renewal(second))
	for i, retryIn := range []time.Duration{time.Second, 2 * time.Second} {
		require.Eventually(t, func() bool { return renewals("error") == float64(i+1) }, waitFor, tick)
		waitTimer()
		require.Same(t, second, id.Leaf())
		clk.Step(retryIn)
	}
	require.Eventually(t, func() bool { return renewals("error") == 3 }, waitFor, tick)
	require.True(t, logged("Cannot renew the peer certificate; serving the current one until it expires"))
	require.False(t, logged("Peer certificate expired"))

	// Past its expiry the certificate stays (there is no other) and the
	// agent says that peers refuse it.
	waitTimer()
	clk.SetTime(second.NotAfter.Add(time.Second))
	require.Eventually(t, func() bool { return renewals("error") == 4 }, waitFor, tick)
	require.Same(t, second, id.Leaf())
	require.Eventually(t, func() bool {
		return logged("Peer certificate expired; peers refuse this agent until a renewal succeeds")
	}, waitFor, tick)

	// Once the coordinator answers again, the next retry (4 s: capped)
	// installs a new certificate.
	coord.failing.Store(false)
	waitTimer()
	clk.Step(3 * time.Second)
	require.True(t, clk.HasWaiters(), "retried before the capped backoff")
	clk.Step(time.Second)
	require.Eventually(t, func() bool { return id.Leaf() != second }, waitFor, tick, "renewed after recovery")
	// Run counts the renewal once Install has returned.
	require.Eventually(t, func() bool { return renewals("ok") == 3 }, waitFor, tick)
	require.Equal(t, 4.0, renewals("error"))
	waitTimer()
}

// TestRunFirstAttemptFails: an agent that cannot get its first certificate
// says so, retries, and installs one as soon as the coordinator answers.
func TestRunFirstAttemptFails(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	coord := &fakeCoordinator{ca: newCA(t, "cluster"), clk: clk}
	coord.failing.Store(true)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	id, err := peertls.NewIdentity(peertls.Options{Node: "node-a", Clock: clk, Logger: logger})
	require.NoError(t, err)
	peertls.SetBackoff(id, time.Second, time.Minute)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- id.Run(ctx, coord.issue) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitFor):
			t.Fatal("Run did not return after its context ended")
		}
	}()

	require.Eventually(t, clk.HasWaiters, waitFor, tick)
	require.Equal(t, int32(1), coord.calls.Load())
	require.Nil(t, id.Leaf())
	require.Contains(t, logger.GetSink().(ktesting.Underlier).GetBuffer().String(),
		"Cannot get a peer certificate; peers refuse this agent until one is issued")
	coord.failing.Store(false)
	clk.Step(time.Second)
	require.Eventually(t, func() bool { return id.Leaf() != nil }, waitFor, tick)
}

func TestRunNeedsIssuer(t *testing.T) {
	id, err := peertls.NewIdentity(peertls.Options{Node: "node-a"})
	require.NoError(t, err)
	require.ErrorContains(t, id.Run(t.Context(), nil), "no issuer")
}
