package sidecarcontrol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func TestRevisionRoundTrip(t *testing.T) {
	set := newSet("log", sidecar("logger", "logger:1"))
	set.Labels = map[string]string{"team": "infra", wellknown.LabelSidecarSetCustomVersion: "stale"}
	set.Annotations = map[string]string{"kubernetes.io/change-cause": "bump", corev1.LastAppliedConfigAnnotation: "{...}"}
	set.Spec.CustomVersion = "v1"
	set.Spec.InitContainers = []appsv1beta1.SidecarContainer{sidecar("setup", "setup:1")}
	set.Spec.Volumes = []corev1.Volume{{Name: "logs"}}
	set.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "cred"}}
	set.Spec.PatchPodMetadata = []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": "b"}}}
	set.Spec.RevisionHistoryLimit = ptr.To[int32](5)

	rev, err := NewRevision(set, "shoal-system", 3, nil)
	require.NoError(t, err)
	hash, hashWithoutImage, err := Hashes(set)
	require.NoError(t, err)

	require.True(t, strings.HasPrefix(rev.Name, "log-"), rev.Name)
	require.Equal(t, "shoal-system", rev.Namespace)
	require.Equal(t, int64(3), rev.Revision)
	require.Equal(t, map[string]string{"team": "infra", wellknown.LabelSidecarSetCustomVersion: "v1", wellknown.LabelSidecarSetName: "log"}, rev.Labels)
	require.Equal(t, map[string]string{
		"kubernetes.io/change-cause":                   "bump",
		wellknown.AnnotationSidecarSetHash:             hash,
		wellknown.AnnotationSidecarSetHashWithoutImage: hashWithoutImage,
	}, rev.Annotations)
	require.Len(t, rev.OwnerReferences, 1)
	require.Equal(t, "SidecarSet", rev.OwnerReferences[0].Kind)
	require.Equal(t, appsv1beta1.SchemeGroupVersion.String(), rev.OwnerReferences[0].APIVersion)
	require.Equal(t, set.UID, rev.OwnerReferences[0].UID)
	require.True(t, *rev.OwnerReferences[0].Controller)

	var data map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rev.Data.Raw, &data))
	keys := []string{}
	for k := range data["spec"] {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{"$patch", "containers", "initContainers", "volumes", "imagePullSecrets", "patchPodMetadata"}, keys,
		"only what injection uses is recorded")

	t.Run("deterministic, and the collision count changes the name", func(t *testing.T) {
		again, err := NewRevision(set.DeepCopy(), "shoal-system", 3, nil)
		require.NoError(t, err)
		require.Equal(t, rev.Name, again.Name)
		require.Equal(t, rev.Data.Raw, again.Data.Raw)
		bumped, err := NewRevision(set, "shoal-system", 3, ptr.To[int32](1))
		require.NoError(t, err)
		require.NotEqual(t, rev.Name, bumped.Name)
		other := set.DeepCopy()
		other.Spec.Containers[0].Image = "logger:2"
		changed, err := NewRevision(other, "shoal-system", 4, nil)
		require.NoError(t, err)
		require.NotEqual(t, rev.Name, changed.Name)
		long := set.DeepCopy()
		long.Name = strings.Repeat("x", 253)
		named, err := NewRevision(long, "shoal-system", 1, nil)
		require.NoError(t, err)
		require.LessOrEqual(t, len(named.Name), 253)
	})

	t.Run("apply restores the recorded parts and keeps the rest", func(t *testing.T) {
		now := set.DeepCopy()
		now.Spec.Containers = []appsv1beta1.SidecarContainer{sidecar("logger", "logger:9"), sidecar("extra", "extra:1")}
		now.Spec.InitContainers = nil
		now.Spec.Volumes = nil
		now.Spec.ImagePullSecrets = nil
		now.Spec.PatchPodMetadata = nil
		now.Spec.RevisionHistoryLimit = ptr.To[int32](7)
		now.Status.LatestRevision = "log-now"

		got, err := ApplyRevision(now, rev)
		require.NoError(t, err)
		require.Equal(t, set.Spec.Containers, got.Spec.Containers)
		require.Equal(t, set.Spec.InitContainers, got.Spec.InitContainers)
		require.Equal(t, set.Spec.Volumes, got.Spec.Volumes)
		require.Equal(t, set.Spec.ImagePullSecrets, got.Spec.ImagePullSecrets)
		require.Equal(t, set.Spec.PatchPodMetadata, got.Spec.PatchPodMetadata)
		require.Equal(t, int32(7), *got.Spec.RevisionHistoryLimit, "the rest of the spec is the current one")
		require.Equal(t, now.Spec.Selector, got.Spec.Selector)
		require.Equal(t, hash, got.Annotations[wellknown.AnnotationSidecarSetHash])
		require.Equal(t, hashWithoutImage, got.Annotations[wellknown.AnnotationSidecarSetHashWithoutImage])
		require.Equal(t, rev.Name, got.Status.LatestRevision)
		require.Equal(t, "logger:9", now.Spec.Containers[0].Image, "the input is not changed")

		bare := rev.DeepCopy()
		bare.Annotations = nil
		got, err = ApplyRevision(now, bare)
		require.NoError(t, err)
		require.Equal(t, hash, got.Annotations[wellknown.AnnotationSidecarSetHash], "computed when the revision lacks it")
		require.Equal(t, hashWithoutImage, got.Annotations[wellknown.AnnotationSidecarSetHashWithoutImage])
	})

	t.Run("an empty spec round-trips", func(t *testing.T) {
		empty := newSet("e")
		r, err := NewRevision(empty, "ns", 1, nil)
		require.NoError(t, err)
		require.JSONEq(t, `{"spec":{"$patch":"replace","containers":null,"imagePullSecrets":null,"initContainers":null,"patchPodMetadata":null,"volumes":null}}`, string(r.Data.Raw))
		got, err := ApplyRevision(empty, r)
		require.NoError(t, err)
		require.Equal(t, empty.Spec, got.Spec)
	})

	t.Run("bad data", func(t *testing.T) {
		bad := rev.DeepCopy()
		bad.Data.Raw = []byte("{")
		_, err := ApplyRevision(set, bad)
		require.ErrorContains(t, err, rev.Name)
	})

	t.Run("custom version from the v1alpha1 label", func(t *testing.T) {
		s := newSet("s")
		s.Labels = map[string]string{wellknown.LabelSidecarSetCustomVersion: "old-style"}
		r, err := NewRevision(s, "ns", 1, nil)
		require.NoError(t, err)
		require.Equal(t, "old-style", r.Labels[wellknown.LabelSidecarSetCustomVersion])
	})
}
