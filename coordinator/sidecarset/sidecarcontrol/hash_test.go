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
