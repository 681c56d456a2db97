package conversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// workloadSpreadFillFuncs fill the WorkloadSpread enums with the values
// each version's schema admits.
func workloadSpreadFillFuncs() []any {
	return []any{
		func(s *v1alpha1.WorkloadSpreadScheduleStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType, v1alpha1.FixedWorkloadSpreadScheduleStrategyType)
		},
		func(s *v1beta1.WorkloadSpreadScheduleStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.AdaptiveWorkloadSpreadScheduleStrategyType, v1beta1.FixedWorkloadSpreadScheduleStrategyType)
		},
		func(s *metav1.ConditionStatus, c randfill.Continue) {
			*s = pick(c, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown)
		},
	}
}

func TestWorkloadSpreadRoundTrip(t *testing.T) {
	roundTrip(t, "WorkloadSpread", workloadSpreadToV1beta1, workloadSpreadToV1alpha1, workloadSpreadFillFuncs()...)
}

func TestWorkloadSpreadMapping(t *testing.T) {
	ref := func() (*v1alpha1.TargetReference, *v1beta1.TargetReference) {
		return &v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: "shop"},
			&v1beta1.TargetReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: "shop"}
	}
	ra, rb := ref()
	zoneA := &corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}}
	spot := []corev1.PreferredSchedulingTerm{{Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: "node.kubernetes.io/capacity", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}}}}
	tol := []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	patch := runtime.RawExtension{Raw: []byte(`{"metadata":{"labels":{"zone":"a"}}}`)}
	three := intstr.FromInt32(3)
	changed := metav1.NewTime(metav1.Unix(1700000000, 0).UTC())
	tests := []struct {
		name  string
		alpha v1alpha1.WorkloadSpread
		beta  v1beta1.WorkloadSpread
	}{
		{
			name: "requiredNodeSelectorTerm and preferredNodeSelectorTerms are requiredNodeSelector and preferredNodeSelector",
			alpha: v1alpha1.WorkloadSpread{
				ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "web"},
				Spec: v1alpha1.WorkloadSpreadSpec{
					TargetReference: ra,
					Subsets: []v1alpha1.WorkloadSpreadSubset{
						{Name: "zone-a", RequiredNodeSelectorTerm: zoneA, MaxReplicas: &three, Patch: patch},
						{Name: "spot", PreferredNodeSelectorTerms: spot, Tolerations: tol},
					},
					ScheduleStrategy: v1alpha1.WorkloadSpreadScheduleStrategy{
						Type:     v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType,
						Adaptive: &v1alpha1.AdaptiveWorkloadSpreadStrategy{RescheduleCriticalSeconds: ptr.To[int32](30)},
					},
				},
			},
			beta: v1beta1.WorkloadSpread{
				ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "web"},
				Spec: v1beta1.WorkloadSpreadSpec{
					TargetReference: rb,
					Subsets: []v1beta1.WorkloadSpreadSubset{
						{Name: "zone-a", RequiredNodeSelector: zoneA, MaxReplicas: &three, Patch: patch},
						{Name: "spot", PreferredNodeSelector: spot, Tolerations: tol},
					},
					ScheduleStrategy: v1beta1.WorkloadSpreadScheduleStrategy{
						Type:     v1beta1.AdaptiveWorkloadSpreadScheduleStrategyType,
						Adaptive: &v1beta1.AdaptiveWorkloadSpreadStrategy{RescheduleCriticalSeconds: ptr.To[int32](30)},
					},
				},
			},
		},
		{
			name: "targetFilter is the same in v1beta1",
			alpha: v1alpha1.WorkloadSpread{
				ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
				Spec: v1alpha1.WorkloadSpreadSpec{
					TargetReference: &v1alpha1.TargetReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "mnist"},
					TargetFilter: &v1alpha1.TargetFilter{
						Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}},
						ReplicasPathList: []string{"spec.tfReplicaSpecs.Worker.replicas"},
					},
					Subsets: []v1alpha1.WorkloadSpreadSubset{{Name: "gpu", RequiredNodeSelectorTerm: zoneA}},
				},
			},
			beta: v1beta1.WorkloadSpread{
				ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
				Spec: v1beta1.WorkloadSpreadSpec{
					TargetReference: &v1beta1.TargetReference{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "mnist"},
					TargetFilter: &v1beta1.TargetFilter{
						Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}},
						ReplicasPathList: []string{"spec.tfReplicaSpecs.Worker.replicas"},
					},
					Subsets: []v1beta1.WorkloadSpreadSubset{{Name: "gpu", RequiredNodeSelector: zoneA}},
				},
			},
		},
		{
			name: "subset conditions are metav1.Conditions",
			alpha: v1alpha1.WorkloadSpread{
				ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "web"},
				Spec:       v1alpha1.WorkloadSpreadSpec{TargetReference: ra, Subsets: []v1alpha1.WorkloadSpreadSubset{{Name: "zone-a"}}},
				Status: v1alpha1.WorkloadSpreadStatus{ObservedGeneration: 2, SubsetStatuses: []v1alpha1.WorkloadSpreadSubsetStatus{{
					Name: "zone-a", Replicas: 3, MissingReplicas: 0,
					Conditions: []v1alpha1.WorkloadSpreadSubsetCondition{{Type: v1alpha1.SubsetSchedulable, Status: corev1.ConditionFalse,
						LastTransitionTime: changed, Reason: "Unschedulable", Message: "no node has room"}},
				}}},
			},
			beta: v1beta1.WorkloadSpread{
				ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "web"},
				Spec:       v1beta1.WorkloadSpreadSpec{TargetReference: rb, Subsets: []v1beta1.WorkloadSpreadSubset{{Name: "zone-a"}}},
				Status: v1beta1.WorkloadSpreadStatus{ObservedGeneration: 2, SubsetStatuses: []v1beta1.WorkloadSpreadSubsetStatus{{
					Name: "zone-a", Replicas: 3, MissingReplicas: 0,
					Conditions: []metav1.Condition{{Type: v1beta1.SubsetSchedulable, Status: metav1.ConditionFalse,
						LastTransitionTime: changed, Reason: "Unschedulable", Message: "no node has room"}},
				}}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.WorkloadSpread
			require.NoError(t, workloadSpreadToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)
			var alpha v1alpha1.WorkloadSpread
			require.NoError(t, workloadSpreadToV1alpha1(&beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}

	t.Run("a condition's observedGeneration has no v1alpha1 field and is stashed", func(t *testing.T) {
		beta := tests[2].beta
		ss := beta.Status.SubsetStatuses[0]
		ss.Conditions = []metav1.Condition{ss.Conditions[0]}
		ss.Conditions[0].ObservedGeneration = 2
		beta.Status.SubsetStatuses = []v1beta1.WorkloadSpreadSubsetStatus{ss}
		var alpha v1alpha1.WorkloadSpread
		require.NoError(t, workloadSpreadToV1alpha1(&beta, &alpha))
		require.Equal(t, tests[2].alpha.Status, alpha.Status)
		require.Equal(t, map[string]string{StashAnnotationPrefix + "v1beta1": `{"conditionGenerations":[[2]]}`}, alpha.Annotations)
		var back v1beta1.WorkloadSpread
		require.NoError(t, workloadSpreadToV1beta1(&alpha, &back))
		require.Equal(t, beta, back)
	})
}
