package cloneset

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func TestUnusedClaimIDs(t *testing.T) {
	claim := func(name, id string, deleting bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.LabelCloneSetInstanceID: id}}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return c
	}
	withID := func(id string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{wellknown.LabelCloneSetInstanceID: id}}}
	}
	terminating := withID("term")
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	claims := []*corev1.PersistentVolumeClaim{
		claim("data-web-aaaaa", "aaaaa", false), claim("logs-web-aaaaa", "aaaaa", false), // used
		claim("data-web-bbbbb", "bbbbb", false), claim("logs-web-bbbbb", "bbbbb", false), // unused: one ID
		claim("data-web-term", "term", false), // its pod is still terminating
		claim("data-web-gone", "gone", true),  // already being deleted
		claim("data-web-ccccc", "ccccc", false),
	}
	require.Equal(t, []string{"bbbbb", "ccccc"}, unusedClaimIDs(claims, []*corev1.Pod{withID("aaaaa"), terminating}))
}

func TestWithClaims(t *testing.T) {
	cs := &v1beta1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	cs.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}, {ObjectMeta: metav1.ObjectMeta{Name: "logs"}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}}
	withClaims(pod, cs, "x7k2p")
	require.Len(t, pod.Spec.Volumes, 3)
	require.Equal(t, "data-web-x7k2p", pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName, "a template volume of the same name is replaced")
	require.NotNil(t, pod.Spec.Volumes[1].EmptyDir)
	require.Equal(t, "logs-web-x7k2p", pod.Spec.Volumes[2].PersistentVolumeClaim.ClaimName)
}

func TestSetRevisionLabels(t *testing.T) {
	cs := &v1beta1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	for _, tc := range []struct {
		short bool
		want  string
	}{{false, "web-6d8f7b9c4"}, {true, "6d8f7b9c4"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		setRevisionLabels(pod, cs, "web-6d8f7b9c4", tc.short)
		require.Equal(t, tc.want, pod.Labels[wellknown.LabelControllerRevisionHash])
		require.Equal(t, "6d8f7b9c4", pod.Labels[wellknown.LabelPodTemplateHash])
		require.Equal(t, "web-6d8f7b9c4", revisionOf(pod, "web"), "both forms read back as the revision")
	}
}

func TestStillToDelete(t *testing.T) {
	pods := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "web-b"}}}
	keep, changed := stillToDelete([]string{"web-a", "web-gone", "web-b"}, pods)
	require.True(t, changed)
	require.Equal(t, []string{"web-a", "web-b"}, keep)
	_, changed = stillToDelete([]string{"web-b"}, pods)
	require.False(t, changed)
}
