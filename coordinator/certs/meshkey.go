package certs

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The mesh key Secret (docs/dev/backbone.md).
const (
	// MeshKeySecretName is the Secret that holds the agents' mesh key.
	MeshKeySecretName = "shoal-mesh-key"
	// MeshKeyKey is the mesh key Secret's key: raw random bytes.
	MeshKeyKey = "key"
	// MeshKeySize is the length of the mesh key in bytes.
	MeshKeySize = 32
)

// EnsureMeshKey creates the Secret namespace/name holding MeshKeySize
// random bytes under MeshKeyKey when it is missing. It never replaces an
// existing key; another writer creating the Secret first counts as
// success. A Secret that exists without the key gets one added.
func EnsureMeshKey(ctx context.Context, client kubernetes.Interface, namespace, name string) error {
	secrets := client.CoreV1().Secrets(namespace)
	sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		key, err := newMeshKey()
		if err != nil {
			return err
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: managedByLabel},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{MeshKeyKey: key},
		}
		_, err = secrets.Create(ctx, sec, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create mesh key Secret %s/%s: %w", namespace, name, err)
		}
		klog.FromContext(ctx).Info("Created mesh key", "secret", klog.KObj(sec))
		return nil
	case err != nil:
		return fmt.Errorf("get mesh key Secret %s/%s: %w", namespace, name, err)
	case len(sec.Data[MeshKeyKey]) > 0:
		return nil
	}
	// The Secret exists without a key: add one, and let a conflict (someone
	// else wrote it meanwhile) surface to be retried at the next call
	// rather than risk overwriting a key.
	key, err := newMeshKey()
	if err != nil {
		return err
	}
	sec = sec.DeepCopy()
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[MeshKeyKey] = key
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("add key to mesh key Secret %s/%s: %w", namespace, name, err)
	}
	klog.FromContext(ctx).Info("Added mesh key to existing Secret", "secret", klog.KObj(sec))
	return nil
}

func newMeshKey() ([]byte, error) {
	key := make([]byte, MeshKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate mesh key: %w", err)
	}
	return key, nil
}
