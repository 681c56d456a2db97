package conversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// unitedDeploymentFillFuncs fill the UnitedDeployment enums with the values
// each version's schema admits, the CloneSet template like a CloneSet, and
// the v1alpha1 status maps sometimes as the subset statuses give them
// (random maps never agree with the statuses, so the rebuilding rule would
// go untried), with some unnamed subset statuses.
func unitedDeploymentFillFuncs() []any {
	return append(cloneSetFillFuncs(),
		func(s *v1alpha1.UpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.ManualUpdateStrategyType)
		},
		func(s *v1beta1.UpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.ManualUpdateStrategyType)
		},
		func(s *v1alpha1.UnitedDeploymentScheduleStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.AdaptiveUnitedDeploymentScheduleStrategyType, v1alpha1.FixedUnitedDeploymentScheduleStrategyType)
		},
		func(s *v1beta1.UnitedDeploymentScheduleStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.AdaptiveUnitedDeploymentScheduleStrategyType, v1beta1.FixedUnitedDeploymentScheduleStrategyType)
		},
		func(t *v1alpha1.CloneSetTemplateSpec, c randfill.Continue) {
			c.FillNoCustom(t)
			csFillMeta(&t.ObjectMeta, c)
		},
		func(t *v1beta1.CloneSetTemplateSpec, c randfill.Continue) {
			c.FillNoCustom(t)
			csFillMeta(&t.ObjectMeta, c)
		},
		func(s *v1alpha1.UnitedDeploymentSubsetStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			if c.Intn(5) == 0 {
				s.Name = ""
			}
		},
		func(s *v1beta1.UnitedDeploymentSubsetStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			if c.Intn(5) == 0 {
				s.Name = ""
			}
		},
		func(s *v1alpha1.UnitedDeploymentStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			if c.Bool() {
				return
			}
			replicas, partitions := map[string]int32{}, map[string]int32{}
			for _, st := range s.SubsetStatuses {
				if st.Name != "" {
					replicas[st.Name], partitions[st.Name] = st.Replicas, st.Partition
				}
			}
			s.SubsetReplicas = csNilIfEmpty(replicas)
			if s.UpdateStatus != nil {
				s.UpdateStatus.CurrentPartitions = csNilIfEmpty(partitions)
			}
		},
	)
}

func TestUnitedDeploymentRoundTrip(t *testing.T) {
	roundTrip(t, "UnitedDeployment", unitedDeploymentToV1beta1, unitedDeploymentToV1alpha1, unitedDeploymentFillFuncs()...)
}

func TestUnitedDeploymentMapping(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "shop"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
	}
	meta := metav1.ObjectMeta{Name: "shop", Namespace: "retail"}
	subsets := []v1alpha1.Subset{
		{Name: "zone-a", Replicas: ptr.To(intstr.FromInt32(2)), NodeSelectorTerm: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}},
		}},
		{Name: "zone-b"},
	}
	betaSubsets := []v1beta1.Subset{v1beta1.Subset(subsets[0]), v1beta1.Subset(subsets[1])}

	tests := []struct {
		name  string
		alpha v1alpha1.UnitedDeployment
		beta  v1beta1.UnitedDeployment
	}{
		{
			name: "the CloneSet template converts as a CloneSet: type InPlaceIfPossible is rollingUpdate.podUpdatePolicy, the template's pre-download annotation is a field",
			alpha: v1alpha1.UnitedDeployment{
				ObjectMeta: meta,
				Spec: v1alpha1.UnitedDeploymentSpec{
					Replicas: ptr.To[int32](4), Selector: sel,
					Template: v1alpha1.SubsetTemplate{CloneSetTemplate: &v1alpha1.CloneSetTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{
							Labels:      map[string]string{"app": "shop"},
							Annotations: map[string]string{wellknown.AnnotationImagePreDownloadParallelism: "5"},
						},
						Spec: v1alpha1.CloneSetSpec{
							Selector: sel, Template: pod,
							UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{
								Type:           v1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType,
								MaxUnavailable: ptr.To(intstr.FromString("25%")),
							},
						},
					}},
					Topology:       v1alpha1.Topology{Subsets: subsets},
					UpdateStrategy: v1alpha1.UnitedDeploymentUpdateStrategy{Type: v1alpha1.ManualUpdateStrategyType},
				},
			},
			beta: v1beta1.UnitedDeployment{
				ObjectMeta: meta,
				Spec: v1beta1.UnitedDeploymentSpec{
					Replicas: ptr.To[int32](4), Selector: sel,
					Template: v1beta1.SubsetTemplate{CloneSetTemplate: &v1beta1.CloneSetTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "shop"}},
						Spec: v1beta1.CloneSetSpec{
							Selector: sel, Template: pod,
							ScaleStrategy: v1beta1.CloneSetScaleStrategy{EnablePVCReuse: true},
							UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
								Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
								RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{
									PodUpdatePolicy: v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType,
									MaxUnavailable:  ptr.To(intstr.FromString("25%")),
									InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{
										ImagePreDownloadParallelism: ptr.To(intstr.FromInt32(5)),
									},
								},
							},
						},
					}},
					Topology:       v1beta1.Topology{Subsets: betaSubsets},
					UpdateStrategy: v1beta1.UnitedDeploymentUpdateStrategy{Type: v1beta1.ManualUpdateStrategyType},
				},
			},
		},
		{
			name: "scheduleStrategy.adaptive.unschedulableLastSeconds is unschedulableDuration",
			alpha: v1alpha1.UnitedDeployment{
				ObjectMeta: meta,
				Spec: v1alpha1.UnitedDeploymentSpec{
					Selector: sel,
					Topology: v1alpha1.Topology{
						Subsets: subsets,
						ScheduleStrategy: v1alpha1.UnitedDeploymentScheduleStrategy{
							Type: v1alpha1.AdaptiveUnitedDeploymentScheduleStrategyType,
							Adaptive: &v1alpha1.AdaptiveUnitedDeploymentStrategy{
								RescheduleCriticalSeconds: ptr.To[int32](20),
								UnschedulableLastSeconds:  ptr.To[int32](600),
								ReserveUnschedulablePods:  true,
							},
						},
					},
				},
			},
			beta: v1beta1.UnitedDeployment{
				ObjectMeta: meta,
				Spec: v1beta1.UnitedDeploymentSpec{
					Selector: sel,
					Topology: v1beta1.Topology{
						Subsets: betaSubsets,
						ScheduleStrategy: v1beta1.UnitedDeploymentScheduleStrategy{
							Type: v1beta1.AdaptiveUnitedDeploymentScheduleStrategyType,
							Adaptive: &v1beta1.AdaptiveUnitedDeploymentStrategy{
								RescheduleCriticalSeconds: ptr.To[int32](20),
								UnschedulableDuration:     ptr.To[int32](600),
								ReserveUnschedulablePods:  true,
							},
						},
					},
				},
			},
		},
		{
			name: "status.updateStatus.updatedRevision is status.updatedRevision; subsetReplicas and currentPartitions are the subset statuses' replicas and partition",
			alpha: v1alpha1.UnitedDeployment{
				ObjectMeta: meta,
				Status: v1alpha1.UnitedDeploymentStatus{
					Replicas: 4, ReadyReplicas: 4, UpdatedReplicas: 1, CurrentRevision: "shop-5d8f7", LabelSelector: "app=shop",
					SubsetReplicas: map[string]int32{"zone-a": 2, "zone-b": 2},
					SubsetStatuses: []v1alpha1.UnitedDeploymentSubsetStatus{
						{Name: "zone-a", Replicas: 2, ReadyReplicas: 2, Partition: 1},
						{Name: "zone-b", Replicas: 2, ReadyReplicas: 2, Partition: 2},
					},
					UpdateStatus: &v1alpha1.UpdateStatus{
						UpdatedRevision:   "shop-7c9b4",
						CurrentPartitions: map[string]int32{"zone-a": 1, "zone-b": 2},
					},
				},
			},
			beta: v1beta1.UnitedDeployment{
				ObjectMeta: meta,
				Status: v1beta1.UnitedDeploymentStatus{
					Replicas: 4, ReadyReplicas: 4, UpdatedReplicas: 1, CurrentRevision: "shop-5d8f7", LabelSelector: "app=shop",
					UpdatedRevision: "shop-7c9b4",
					SubsetStatuses: []v1beta1.UnitedDeploymentSubsetStatus{
						{Name: "zone-a", Replicas: 2, ReadyReplicas: 2, Partition: 1},
						{Name: "zone-b", Replicas: 2, ReadyReplicas: 2, Partition: 2},
					},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.UnitedDeployment
			require.NoError(t, unitedDeploymentToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)

			var alpha v1alpha1.UnitedDeployment
			require.NoError(t, unitedDeploymentToV1alpha1(&tc.beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}
}

// TestUnitedDeploymentStatusMapsStashed checks that v1alpha1 status maps
// that disagree with the subset statuses are kept.
func TestUnitedDeploymentStatusMapsStashed(t *testing.T) {
	alpha := v1alpha1.UnitedDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Status: v1alpha1.UnitedDeploymentStatus{
			CurrentRevision: "shop-1",
			SubsetReplicas:  map[string]int32{"zone-a": 3},
			SubsetStatuses:  []v1alpha1.UnitedDeploymentSubsetStatus{{Name: "zone-a", Replicas: 2}},
			UpdateStatus:    &v1alpha1.UpdateStatus{},
		},
	}
	var beta v1beta1.UnitedDeployment
	require.NoError(t, unitedDeploymentToV1beta1(&alpha, &beta))
	require.JSONEq(t, `{"subsetReplicas":{"zone-a":3},"currentPartitions":{},"updateStatus":true}`,
		beta.Annotations[StashAnnotationPrefix+"v1alpha1"])

	var back v1alpha1.UnitedDeployment
	require.NoError(t, unitedDeploymentToV1alpha1(&beta, &back))
	require.Equal(t, alpha, back)
}
