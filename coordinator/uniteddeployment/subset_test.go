package uniteddeployment

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// stsUD is a UnitedDeployment "web" of a StatefulSet template whose pods
// already require zone a or b.
func stsUD() *v1alpha1.UnitedDeployment {
	labels := map[string]string{"app": "web"}
	return &v1alpha1.UnitedDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "ud-uid"},
		Spec: v1alpha1.UnitedDeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.SubsetTemplate{StatefulSetTemplate: &v1alpha1.StatefulSetTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: appsv1.StatefulSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
							Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
								NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}},
							}}},
						},
					},
				},
			}},
			UpdateStrategy: v1alpha1.UnitedDeploymentUpdateStrategy{ManualUpdate: &v1alpha1.ManualUpdate{Partitions: map[string]int32{"subset-a": 1}}},
		},
	}
}

func TestDesiredWorkload(t *testing.T) {
	ud := stsUD()
	s := &v1alpha1.Subset{
		Name:             "subset-a",
		NodeSelectorTerm: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}},
		Tolerations:      []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		Patch:            runtime.RawExtension{Raw: []byte(`{"metadata":{"labels":{"tier":"gold"}},"spec":{"containers":[{"name":"app","env":[{"name":"SUBSET","value":"a"}]}]}}`)},
	}
	u, err := desiredWorkload(ud, s, 2, 1, "web-rev", nil)
	require.NoError(t, err)
	require.Equal(t, "apps/v1", u.GetAPIVersion())
	require.Equal(t, "StatefulSet", u.GetKind())
	require.Equal(t, "web-subset-a", u.GetName())
	require.Equal(t, "subset-a", u.GetLabels()[wellknown.LabelSubsetName])
	require.Equal(t, "web-rev", u.GetAnnotations()[AnnotationSubsetRevision])
	require.EqualValues(t, "ud-uid", u.GetOwnerReferences()[0].UID)

	sts := &appsv1.StatefulSet{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sts))
	require.EqualValues(t, 2, *sts.Spec.Replicas)
	require.EqualValues(t, 1, *sts.Spec.UpdateStrategy.RollingUpdate.Partition)
	require.Equal(t, map[string]string{"app": "web", wellknown.LabelSubsetName: "subset-a"}, sts.Spec.Selector.MatchLabels)
	pod := sts.Spec.Template
	require.Equal(t, map[string]string{"app": "web", wellknown.LabelSubsetName: "subset-a", "tier": "gold"}, pod.Labels)
	require.Equal(t, []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
		{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}},
	}, pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions, "the subset's term joins every required term")
	require.Equal(t, s.Tolerations, pod.Spec.Tolerations)
	require.Equal(t, []corev1.EnvVar{{Name: "SUBSET", Value: "a"}}, pod.Spec.Containers[0].Env, "the patch merges into the container by name")
	require.Equal(t, "nginx", pod.Spec.Containers[0].Image)

	again, err := desiredWorkload(ud, s, 2, 1, "web-rev", nil)
	require.NoError(t, err)
	require.Equal(t, u.GetAnnotations()[AnnotationSubsetHash], again.GetAnnotations()[AnnotationSubsetHash], "the hash is stable")
	scaled, err := desiredWorkload(ud, s, 3, 1, "web-rev", nil)
	require.NoError(t, err)
	require.NotEqual(t, u.GetAnnotations()[AnnotationSubsetHash], scaled.GetAnnotations()[AnnotationSubsetHash], "other replicas, another hash")

	t.Run("CloneSet partition path", func(t *testing.T) {
		ud := stsUD()
		ud.Spec.Template = v1alpha1.SubsetTemplate{CloneSetTemplate: &v1alpha1.CloneSetTemplateSpec{Spec: v1alpha1.CloneSetSpec{Template: ud.Spec.Template.StatefulSetTemplate.Spec.Template}}}
		u, err := desiredWorkload(ud, &v1alpha1.Subset{Name: "subset-a"}, 2, 1, "r", nil)
		require.NoError(t, err)
		require.Equal(t, "apps.kruise.io/v1alpha1", u.GetAPIVersion())
		p, found, err := unstructured.NestedInt64(u.Object, "spec", "updateStrategy", "partition")
		require.NoError(t, err)
		require.True(t, found)
		require.EqualValues(t, 1, p)
	})
	t.Run("a bad patch names the subset", func(t *testing.T) {
		_, err := desiredWorkload(ud, &v1alpha1.Subset{Name: "subset-b", Patch: runtime.RawExtension{Raw: []byte(`{"spec":`)}}, 1, 0, "r", nil)
		require.ErrorContains(t, err, "spec.topology.subsets[subset-b].patch")
	})
	t.Run("no template", func(t *testing.T) {
		_, err := desiredWorkload(&v1alpha1.UnitedDeployment{}, s, 1, 0, "r", nil)
		require.ErrorContains(t, err, "spec.template: set one of")
	})
}
