package certs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// caExpiryGauge returns the gauge's value and whether it was exposed.
func caExpiryGauge(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "shoal_coordinator_ca_expiry_seconds" {
			require.Len(t, mf.GetMetric(), 1)
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestManagerSync(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leader bool
	}{
		{name: "leader", leader: true},
		{name: "follower", leader: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			client := fake.NewClientset(
				validatingConfig(DefaultValidatingWebhook, "", ""),
				mutatingConfig(DefaultMutatingWebhook, ""),
			)
			clk := clocktesting.NewFakeClock(t0)
			reg := prometheus.NewRegistry()
			m, err := NewManager(newAuthority(client, clk), func() bool { return tc.leader }, reg)
			require.NoError(t, err)
			m.Clock = clk
			s := NewServing(DNSNames("shoal-coordinator", testNamespace), clk)
			require.NoError(t, m.Register(s))

			_, ok := caExpiryGauge(t, reg)
			require.False(t, ok, "no gauge before the CA is known")
			require.False(t, m.Ready())

			require.NoError(t, m.Sync(ctx))
			require.True(t, m.Ready())
			require.NoError(t, m.WaitReady(ctx))
			require.NotNil(t, s.Leaf())

			v, ok := caExpiryGauge(t, reg)
			require.True(t, ok)
			require.Equal(t, DefaultCAValidity.Seconds(), v)
			clk.Step(day)
			v, _ = caExpiryGauge(t, reg)
			require.Equal(t, (DefaultCAValidity - day).Seconds(), v)

			bundle := getBundleConfigMap(t, client)
			vwc, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, DefaultValidatingWebhook, metav1.GetOptions{})
			require.NoError(t, err)
			_, meshErr := client.CoreV1().Secrets(testNamespace).Get(ctx, MeshKeySecretName, metav1.GetOptions{})
			if tc.leader {
				for _, w := range vwc.Webhooks {
					require.Equal(t, bundle, string(w.ClientConfig.CABundle))
				}
				require.NoError(t, meshErr)
			} else {
				for _, w := range vwc.Webhooks {
					require.Empty(t, w.ClientConfig.CABundle)
				}
				require.True(t, apierrors.IsNotFound(meshErr))
			}

			// A Serving registered later gets its certificate at once.
			late := NewServing([]string{"late"}, clk)
			require.NoError(t, m.Register(late))
			require.NotNil(t, late.Leaf())
		})
	}
}

func TestManagerRotationFeedsServings(t *testing.T) {
	ctx := testContext(t)
	client := fake.NewClientset(validatingConfig(DefaultValidatingWebhook, ""))
	clk := clocktesting.NewFakeClock(t0)
	m, err := NewManager(newAuthority(client, clk), func() bool { return true }, nil)
	require.NoError(t, err)
	s := NewServing([]string{testServerName}, clk)
	require.NoError(t, m.Register(s))
	require.NoError(t, m.Sync(ctx))
	first := s.Leaf()

	clk.SetTime(t0.Add(DefaultCAValidity - DefaultRotateBefore + time.Minute))
	require.NoError(t, m.Sync(ctx))
	second := s.Leaf()
	require.False(t, second.Equal(first))
	b, err := newAuthority(client, clk).Ensure(ctx, false)
	require.NoError(t, err)
	require.Len(t, b.Certs, 2)
	require.NoError(t, second.CheckSignatureFrom(b.CACert))
	vwc, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, DefaultValidatingWebhook, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, b.BundlePEM, vwc.Webhooks[0].ClientConfig.CABundle)
}

func TestManagerRun(t *testing.T) {
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	client := fake.NewClientset()
	var gets atomic.Int32
	client.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == DefaultSecretName {
			gets.Add(1)
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(t0)
	m, err := NewManager(newAuthority(client, clk), nil, nil)
	require.NoError(t, err)
	m.Clock = clk
	m.Interval = 10 * time.Second
	s := NewServing([]string{testServerName}, clk)
	require.NoError(t, m.Register(s))

	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	require.NoError(t, m.WaitReady(waitCtx), "first check runs at once")
	require.NotNil(t, s.Leaf())

	// Each tick checks again.
	for i := int32(2); i <= 3; i++ {
		require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond)
		clk.Step(m.Interval)
		require.Eventually(t, func() bool { return gets.Load() >= i }, 10*time.Second, time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestManagerNotReadyOnError(t *testing.T) {
	ctx := testContext(t)
	client := fake.NewClientset()
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	clk := clocktesting.NewFakeClock(t0)
	m, err := NewManager(newAuthority(client, clk), nil, nil)
	require.NoError(t, err)
	require.Error(t, m.Sync(ctx))
	require.False(t, m.Ready())
	waitCtx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, m.WaitReady(waitCtx), context.Canceled)
}

func TestNewManagerDuplicateRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newAuthority(fake.NewClientset(), clocktesting.NewFakeClock(t0))
	_, err := NewManager(a, nil, reg)
	require.NoError(t, err)
	_, err = NewManager(a, nil, reg)
	require.Error(t, err)
}
