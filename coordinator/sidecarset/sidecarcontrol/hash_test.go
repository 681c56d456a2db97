package sidecarcontrol

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestHashes(t *testing.T) {
	base := func() *appsv1beta1.SidecarSet {
		s := newSet("log", sidecar("logger", "logger:1"))
		s.Spec.InitContainers = []appsv1beta1.SidecarContainer{sidecar("setup", "setup:1")}
		return s
	}
	h0, hw0, err := Hashes(base())
	require.NoError(t, err)
	require.NotEmpty(t, h0)
	require.NotEqual(t, h0, hw0)

	for _, tc := range []struct {
		name                  string
		change                func(*appsv1beta1.SidecarSet)
		sameHash, sameNoImage bool
	}{
		{"unchanged", func(*appsv1beta1.SidecarSet) {}, true, true},
		{"image only", func(s *appsv1beta1.SidecarSet) { s.Spec.Containers[0].Image = "logger:2" }, false, true},
		{"env", func(s *appsv1beta1.SidecarSet) {
			s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
		}, false, false},
		{"patchPodMetadata is not covered", func(s *appsv1beta1.SidecarSet) {
			s.Spec.PatchPodMetadata = []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": "b"}}}
		}, true, true},
		{"volumes are not covered", func(s *appsv1beta1.SidecarSet) {
			s.Spec.Volumes = []corev1.Volume{{Name: "v"}}
		}, true, true},
		{"plain init containers are not covered", func(s *appsv1beta1.SidecarSet) { s.Spec.InitContainers[0].Image = "setup:2" }, true, true},
		{"a native sidecar init container brings all init containers in", func(s *appsv1beta1.SidecarSet) {
			s.Spec.InitContainers = append(s.Spec.InitContainers, sidecar("proxy", "proxy:1"))
			s.Spec.InitContainers[1].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.change(s)
			h, hw, err := Hashes(s)
			require.NoError(t, err)
			require.Equal(t, tc.sameHash, h == h0, "hash")
			require.Equal(t, tc.sameNoImage, hw == hw0, "hashWithoutImage")
			h2, hw2, err := Hashes(s)
			require.NoError(t, err)
			require.Equal(t, h, h2, "deterministic")
			require.Equal(t, hw, hw2, "deterministic")
		})
	}

	t.Run("native sidecar image change keeps hashWithoutImage", func(t *testing.T) {
		s := base()
		s.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		h1, hw1, err := Hashes(s)
		require.NoError(t, err)
		s.Spec.InitContainers[0].Image = "setup:2"
		h2, hw2, err := Hashes(s)
		require.NoError(t, err)
		require.NotEqual(t, h1, h2)
		require.Equal(t, hw1, hw2)
	})

	t.Run("nil", func(t *testing.T) {
		_, _, err := Hashes(nil)
		require.Error(t, err)
	})
}

// TestHashesMatchOpenKruise: for the same SidecarSet, Shoal's hashes are
// OpenKruise's, so the pods OpenKruise's webhook injected (their
// kruise.io/sidecarset-hash annotations) count as up to date once Shoal
// takes over. The expected values are the ones OpenKruise pins for these
// specs in its own unit tests (pkg/control/sidecarcontrol/hash_test.go,
// kruise commit 19cace71).
func TestHashesMatchOpenKruise(t *testing.T) {
	container := func(restart *corev1.ContainerRestartPolicy) appsv1beta1.SidecarContainer {
		return appsv1beta1.SidecarContainer{Container: corev1.Container{Name: "container1", Image: "test-image", RestartPolicy: restart}}
	}
	for _, tc := range []struct {
		name                   string
		init                   []appsv1beta1.SidecarContainer
		hash, hashWithoutImage string
	}{
		{name: "containers", hash: "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78"},
		{name: "a plain init container is not hashed", init: []appsv1beta1.SidecarContainer{container(nil)},
			hash:             "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78",
			hashWithoutImage: "8wzddb4dvv9c6x8zdc77z4z75987424f457dfv6724ddw6zbdx467wz5x24fc759"},
		{name: "a native sidecar init container is", init: []appsv1beta1.SidecarContainer{container(ptr.To(corev1.ContainerRestartPolicyAlways))},
			hash:             "4xwx4d4844vd4v9x79wb4xbxf4xb29475cc4446v8cz2c2f2f5c5bw448vd42z8w",
			hashWithoutImage: "5725fw8bwbx249bw57v5892c847dzf48bww9zb7c86xb95264fdz26654847b2c8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := &appsv1beta1.SidecarSet{}
			set.Name = "test-sidecar-set"
			set.Spec.Containers = []appsv1beta1.SidecarContainer{container(nil)}
			set.Spec.InitContainers = tc.init
			hash, hashWithoutImage, err := Hashes(set)
			require.NoError(t, err)
			require.Equal(t, tc.hash, hash)
			if tc.hashWithoutImage != "" {
				require.Equal(t, tc.hashWithoutImage, hashWithoutImage)
			}
		})
	}
}
