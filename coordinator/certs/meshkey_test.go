package certs

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestEnsureMeshKey(t *testing.T) {
	t.Run("created once, never overwritten", func(t *testing.T) {
		ctx := testContext(t)
		client := fake.NewClientset()
		require.NoError(t, EnsureMeshKey(ctx, client, testNamespace, MeshKeySecretName))
		key := getSecret(t, client, MeshKeySecretName).Data[MeshKeyKey]
		require.Len(t, key, MeshKeySize)
		require.False(t, bytes.Equal(key, make([]byte, MeshKeySize)))

		client.ClearActions()
		for range 3 {
			require.NoError(t, EnsureMeshKey(ctx, client, testNamespace, MeshKeySecretName))
		}
		require.Equal(t, key, getSecret(t, client, MeshKeySecretName).Data[MeshKeyKey])
		for _, a := range client.Actions() {
			require.Equal(t, "get", a.GetVerb())
		}
	})

	t.Run("existing key of another size is kept", func(t *testing.T) {
		ctx := testContext(t)
		existing := []byte("operator-provided")
		client := newFakeClient(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: MeshKeySecretName, Namespace: testNamespace},
			Data:       map[string][]byte{MeshKeyKey: existing},
		})
		require.NoError(t, EnsureMeshKey(ctx, client, testNamespace, MeshKeySecretName))
		require.Equal(t, existing, getSecret(t, client, MeshKeySecretName).Data[MeshKeyKey])
	})

	t.Run("created by another replica first", func(t *testing.T) {
		ctx := testContext(t)
		winner := []byte("0123456789abcdef0123456789abcdef")
		client := fake.NewClientset()
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			require.NoError(t, client.Tracker().Add(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: MeshKeySecretName, Namespace: testNamespace},
				Data:       map[string][]byte{MeshKeyKey: winner},
			}))
			return true, nil, apierrors.NewAlreadyExists(secretsResource, MeshKeySecretName)
		})
		require.NoError(t, EnsureMeshKey(ctx, client, testNamespace, MeshKeySecretName))
		require.Equal(t, winner, getSecret(t, client, MeshKeySecretName).Data[MeshKeyKey])
	})

	t.Run("secret without a key gets one", func(t *testing.T) {
		ctx := testContext(t)
		client := newFakeClient(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: MeshKeySecretName, Namespace: testNamespace},
			Data:       map[string][]byte{"other": []byte("x")},
		})
		require.NoError(t, EnsureMeshKey(ctx, client, testNamespace, MeshKeySecretName))
		sec := getSecret(t, client, MeshKeySecretName)
		require.Len(t, sec.Data[MeshKeyKey], MeshKeySize)
		require.Equal(t, []byte("x"), sec.Data["other"])
	})
}
