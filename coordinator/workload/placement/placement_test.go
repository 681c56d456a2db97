package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEligible(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}
	tainted := node.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	preferNo := node.DeepCopy()
	preferNo.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
	tolerate := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		node *corev1.Node
		want bool
	}{
		{"no constraints", corev1.PodSpec{}, node, true},
		{"nodeName of another node", corev1.PodSpec{NodeName: "n2"}, node, false},
		{"nodeSelector matches", corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"}}, node, true},
		{"nodeSelector does not", corev1.PodSpec{NodeSelector: map[string]string{"zone": "b"}}, node, false},
		{"untolerated NoSchedule", corev1.PodSpec{}, tainted, false},
		{"tolerated", corev1.PodSpec{Tolerations: tolerate}, tainted, true},
		{"PreferNoSchedule does not count", corev1.PodSpec{}, preferNo, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Eligible(&tc.spec, tc.node))
		})
	}
}

func TestPinToNode(t *testing.T) {
	spec := &corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"other"}}}},
		}},
	}}}
	PinToNode(spec, "n1")
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 2)
	for _, term := range terms {
		require.Equal(t, []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}, term.MatchFields)
	}
	require.Len(t, terms[0].MatchExpressions, 1, "the template's other requirements stay")
	require.Equal(t, "n1", TargetNode(&corev1.Pod{Spec: *spec}))

	empty := &corev1.PodSpec{}
	PinToNode(empty, "n2")
	require.Equal(t, "n2", TargetNode(&corev1.Pod{Spec: *empty}))
	require.Equal(t, "n3", TargetNode(&corev1.Pod{Spec: corev1.PodSpec{NodeName: "n3"}}), "bound: its nodeName")
}
