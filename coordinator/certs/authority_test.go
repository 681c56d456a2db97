package certs

import (
	"context"
	"crypto"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var secretsResource = schema.GroupResource{Resource: "secrets"}

func TestEnsureCreatesCA(t *testing.T) {
	for _, mayRotate := range []bool{false, true} {
		t.Run(map[bool]string{false: "follower", true: "leader"}[mayRotate], func(t *testing.T) {
			ctx := testContext(t)
			client := fake.NewClientset()
			clk := clocktesting.NewFakeClock(t0)

			b, err := newAuthority(client, clk).Ensure(ctx, mayRotate)
			require.NoError(t, err)

			require.Equal(t, CACommonName, b.CACert.Subject.CommonName)
			require.True(t, b.CACert.IsCA)
			require.Equal(t, x509.ECDSA, b.CACert.PublicKeyAlgorithm)
			require.NoError(t, b.CACert.CheckSignatureFrom(b.CACert), "self-signed")
			require.Equal(t, t0.Add(DefaultCAValidity), b.CACert.NotAfter)
			require.Len(t, b.Certs, 1)
			require.Empty(t, b.Chain)

			sec := getSecret(t, client, DefaultSecretName)
			require.Equal(t, b.BundlePEM, sec.Data[SecretBundleKey])
			require.True(t, mustParseCerts(t, sec.Data[SecretCertKey])[0].Equal(b.CACert))
			key, err := parseKey(sec.Data[SecretKeyKey])
			require.NoError(t, err)
			require.True(t, key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(b.CACert.PublicKey))
			require.Equal(t, string(b.BundlePEM), getBundleConfigMap(t, client))

			// A second call changes nothing.
			client.ClearActions()
			again, err := newAuthority(client, clk).Ensure(ctx, mayRotate)
			require.NoError(t, err)
			require.True(t, again.CACert.Equal(b.CACert))
			for _, a := range client.Actions() {
				require.Equal(t, "get", a.GetVerb(), "unexpected write %v", a)
			}
		})
	}
}

func TestEnsureRace(t *testing.T) {
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(t0)

	t.Run("second replica adopts the existing CA", func(t *testing.T) {
		client := fake.NewClientset()
		first, err := newAuthority(client, clk).Ensure(ctx, true)
		require.NoError(t, err)
		second, err := newAuthority(client, clk).Ensure(ctx, false)
		require.NoError(t, err)
		require.True(t, second.CACert.Equal(first.CACert))
		require.Equal(t, first.BundlePEM, second.BundlePEM)
	})

	t.Run("loser of the create race uses the winner's CA", func(t *testing.T) {
		// The winner creates its CA in a cluster of its own; the loser's
		// create then finds the winner's Secret already there.
		winnerClient := fake.NewClientset()
		winner, err := newAuthority(winnerClient, clk).Ensure(ctx, false)
		require.NoError(t, err)
		winnerSecret := getSecret(t, winnerClient, DefaultSecretName)

		client := fake.NewClientset()
		creates := 0
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			creates++
			require.NoError(t, client.Tracker().Add(winnerSecret))
			return true, nil, apierrors.NewAlreadyExists(secretsResource, DefaultSecretName)
		})
		loser, err := newAuthority(client, clk).Ensure(ctx, false)
		require.NoError(t, err)
		require.Equal(t, 1, creates)
		require.True(t, loser.CACert.Equal(winner.CACert))
		require.Equal(t, string(winner.BundlePEM), getBundleConfigMap(t, client))
	})

	t.Run("loser of the rotation race uses the winner's CA", func(t *testing.T) {
		client := fake.NewClientset()
		old, err := newAuthority(client, clk).Ensure(ctx, true)
		require.NoError(t, err)
		rotateAt := clocktesting.NewFakeClock(t0.Add(DefaultCAValidity - DefaultRotateBefore + time.Hour))

		// The winner rotates from the same Secret in a copy of the cluster.
		winnerClient := newFakeClient(getSecret(t, client, DefaultSecretName))
		winner, err := newAuthority(winnerClient, rotateAt).Ensure(ctx, true)
		require.NoError(t, err)
		require.False(t, winner.CACert.Equal(old.CACert))
		winnerSecret := getSecret(t, winnerClient, DefaultSecretName)

		updates := 0
		client.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			updates++
			if updates > 1 {
				return false, nil, nil
			}
			require.NoError(t, client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), winnerSecret, testNamespace))
			return true, nil, apierrors.NewConflict(secretsResource, DefaultSecretName, nil)
		})
		loser, err := newAuthority(client, rotateAt).Ensure(ctx, true)
		require.NoError(t, err)
		require.Equal(t, 1, updates, "the re-read finds a fresh CA and writes nothing")
		require.True(t, loser.CACert.Equal(winner.CACert))
		require.Equal(t, winner.BundlePEM, loser.BundlePEM)
	})
}

func TestEnsureRotation(t *testing.T) {
	ctx := testContext(t)
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	a := newAuthority(client, clk)

	first, err := a.Ensure(ctx, true)
	require.NoError(t, err)

	// Just outside the rotation window nothing changes, and a follower
	// never rotates.
	clk.SetTime(first.CACert.NotAfter.Add(-DefaultRotateBefore))
	b, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	require.True(t, b.CACert.Equal(first.CACert))
	clk.Step(time.Second)
	b, err = a.Ensure(ctx, false)
	require.NoError(t, err)
	require.True(t, b.CACert.Equal(first.CACert))

	// A leaf issued by the first CA just before the rotation.
	firstLeaf := issue(t, first, clk)

	// Inside the window the leader rotates.
	second, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	require.False(t, second.CACert.Equal(first.CACert))
	require.Equal(t, clk.Now().Add(DefaultCAValidity), second.CACert.NotAfter)
	require.Len(t, second.Certs, 2)
	require.True(t, second.Certs[0].Equal(second.CACert), "new CA first")
	require.True(t, second.Certs[1].Equal(first.CACert), "old CA kept")
	require.Len(t, second.Chain, 1)
	require.Equal(t, first.CACert.NotAfter, second.Chain[0].NotAfter, "cross-signed CA ends with the old one")
	require.Equal(t, string(second.BundlePEM), getBundleConfigMap(t, client))
	sec := getSecret(t, client, DefaultSecretName)
	require.Equal(t, second.BundlePEM, sec.Data[SecretBundleKey])
	require.Len(t, mustParseCerts(t, sec.Data[SecretCertKey]), 2, "CA and its cross-signed copy")

	// A follower reads the rotated CA.
	follower, err := newAuthority(client, clk).Ensure(ctx, false)
	require.NoError(t, err)
	require.True(t, follower.CACert.Equal(second.CACert))
	require.Equal(t, second.BundlePEM, follower.BundlePEM)
	require.Len(t, follower.Chain, 1)

	secondLeaf := issue(t, second, clk)
	now := clk.Now()
	t.Run("new leaf verifies against the new bundle", func(t *testing.T) {
		require.NoError(t, verifyLeaf(t, secondLeaf, second.Pool(), now))
	})
	t.Run("old leaf verifies against the new bundle", func(t *testing.T) {
		require.NoError(t, verifyLeaf(t, firstLeaf, second.Pool(), now))
	})
	t.Run("new leaf verifies against the old bundle through the cross-signed CA", func(t *testing.T) {
		require.NoError(t, verifyLeaf(t, secondLeaf, first.Pool(), now))
	})
	t.Run("new leaf without its chain does not verify against the old bundle", func(t *testing.T) {
		require.Error(t, verifyLeaf(t, secondLeaf[:1], first.Pool(), now))
	})

	// Once the first CA expires, the leader drops it and its cross-signed
	// copy without rotating.
	clk.SetTime(first.CACert.NotAfter.Add(time.Second))
	pruned, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	require.True(t, pruned.CACert.Equal(second.CACert))
	require.Len(t, pruned.Certs, 1)
	require.Empty(t, pruned.Chain)
	sec = getSecret(t, client, DefaultSecretName)
	require.Len(t, mustParseCerts(t, sec.Data[SecretBundleKey]), 1)
	require.Len(t, mustParseCerts(t, sec.Data[SecretCertKey]), 1)
	require.Equal(t, string(pruned.BundlePEM), getBundleConfigMap(t, client))

	// The next rotation keeps only the second CA.
	clk.SetTime(second.CACert.NotAfter.Add(-DefaultRotateBefore + time.Second))
	third, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	require.Len(t, third.Certs, 2)
	require.True(t, third.Certs[0].Equal(third.CACert))
	require.True(t, third.Certs[1].Equal(second.CACert))
	for _, c := range third.Certs {
		require.False(t, c.Equal(first.CACert), "expired CA dropped")
	}
}

func TestEnsureDropsExpiredOnRotation(t *testing.T) {
	// A rotation long after expiry (no leader for a while): the old CA
	// has expired, so it is neither kept nor used to cross-sign.
	ctx := testContext(t)
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	first, err := newAuthority(client, clk).Ensure(ctx, false)
	require.NoError(t, err)

	clk.SetTime(first.CACert.NotAfter.Add(time.Hour))
	b, err := newAuthority(client, clk).Ensure(ctx, true)
	require.NoError(t, err)
	require.False(t, b.CACert.Equal(first.CACert))
	require.Len(t, b.Certs, 1)
	require.Empty(t, b.Chain)
}

func TestEnsureUnusableSecret(t *testing.T) {
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(t0)
	good, err := newAuthority(fake.NewClientset(), clk).Ensure(ctx, false)
	require.NoError(t, err)
	otherKey, err := newGeneration(t0, day, nil, nil)
	require.NoError(t, err)
	otherKeyData, err := otherKey.secretData()
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		data map[string][]byte
	}{
		{name: "empty", data: nil},
		{name: "garbage certificate", data: map[string][]byte{SecretCertKey: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}},
		{name: "key of another CA", data: map[string][]byte{
			SecretCertKey:   encodeCerts([]*x509.Certificate{good.CACert}),
			SecretKeyKey:    otherKeyData[SecretKeyKey],
			SecretBundleKey: good.BundlePEM,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: DefaultSecretName, Namespace: testNamespace},
				Data:       tc.data,
			}
			client := newFakeClient(sec)

			_, err := newAuthority(client, clk).Ensure(ctx, false)
			require.ErrorContains(t, err, "no usable CA")

			b, err := newAuthority(client, clk).Ensure(ctx, true)
			require.NoError(t, err)
			require.False(t, b.CACert.Equal(good.CACert))
			if tc.data[SecretBundleKey] != nil {
				require.Len(t, b.Certs, 2, "readable earlier CAs stay trusted")
			}
			follower, err := newAuthority(client, clk).Ensure(ctx, false)
			require.NoError(t, err)
			require.True(t, follower.CACert.Equal(b.CACert))
		})
	}
}

func TestEnsureConfigMap(t *testing.T) {
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(t0)
	client := fake.NewClientset()
	a := newAuthority(client, clk)
	first, err := a.Ensure(ctx, true)
	require.NoError(t, err)
	staleSecret := getSecret(t, client, DefaultSecretName)

	clk.SetTime(first.CACert.NotAfter.Add(-DefaultRotateBefore + time.Second))
	second, err := a.Ensure(ctx, true)
	require.NoError(t, err)

	setConfigMap := func(t *testing.T, data string) {
		t.Helper()
		cm, err := client.CoreV1().ConfigMaps(testNamespace).Get(ctx, DefaultConfigMapName, metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data[ConfigMapBundleKey] = data
		_, err = client.CoreV1().ConfigMaps(testNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	t.Run("follower with a stale Secret does not put the old bundle back", func(t *testing.T) {
		stale := newFakeClient(staleSecret)
		_, err := stale.CoreV1().ConfigMaps(testNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: DefaultConfigMapName, Namespace: testNamespace},
			Data:       map[string]string{ConfigMapBundleKey: string(second.BundlePEM)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		b, err := newAuthority(stale, clk).Ensure(ctx, false)
		require.NoError(t, err)
		require.True(t, b.CACert.Equal(first.CACert))
		require.Equal(t, string(second.BundlePEM), getBundleConfigMap(t, stale))
	})
	t.Run("follower repairs a bundle that lacks its CA", func(t *testing.T) {
		setConfigMap(t, string(first.BundlePEM))
		_, err := newAuthority(client, clk).Ensure(ctx, false)
		require.NoError(t, err)
		require.Equal(t, string(second.BundlePEM), getBundleConfigMap(t, client))
	})
	t.Run("leader repairs any difference", func(t *testing.T) {
		setConfigMap(t, string(second.BundlePEM)+string(second.BundlePEM))
		_, err := newAuthority(client, clk).Ensure(ctx, false)
		require.NoError(t, err)
		require.NotEqual(t, string(second.BundlePEM), getBundleConfigMap(t, client))
		_, err = newAuthority(client, clk).Ensure(ctx, true)
		require.NoError(t, err)
		require.Equal(t, string(second.BundlePEM), getBundleConfigMap(t, client))
	})
}

func TestAuthorityConfig(t *testing.T) {
	client := fake.NewClientset()
	for _, tc := range []struct {
		name string
		a    Authority
	}{
		{name: "no client", a: Authority{Namespace: testNamespace}},
		{name: "no namespace", a: Authority{Client: client}},
		{name: "rotate before longer than validity", a: Authority{Client: client, Namespace: testNamespace, CAValidity: day, RotateBefore: 2 * day}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.a.Ensure(context.Background(), true)
			require.Error(t, err)
		})
	}
}
