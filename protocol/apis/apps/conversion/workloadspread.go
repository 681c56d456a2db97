package conversion

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// WorkloadSpread differs between the versions in two places:
//
//   - a subset's requiredNodeSelectorTerm and preferredNodeSelectorTerms
//     are requiredNodeSelector and preferredNodeSelector in v1beta1;
//   - subset status conditions are metav1.Conditions in v1beta1. Their
//     observedGeneration has no v1alpha1 field and is stashed, by position
//     (subset status, then condition).
//
// The target reference, filter, schedule strategy and the rest of the
// status map field for field.

func init() { register("WorkloadSpread", workloadSpreadToV1beta1, workloadSpreadToV1alpha1) }

// workloadSpreadBetaFields are the v1beta1 facts a v1alpha1 WorkloadSpread
// cannot hold, stashed on the v1alpha1 object.
type workloadSpreadBetaFields struct {
	// ConditionGenerations holds, per status.subsetStatuses entry and per
	// condition, the condition's observedGeneration; nil when all are 0.
	ConditionGenerations [][]int64 `json:"conditionGenerations,omitempty"`
	// VersionedConditionGenerations is ConditionGenerations for each
	// revision of status.versionedSubsetStatuses.
	VersionedConditionGenerations map[string][][]int64 `json:"versionedConditionGenerations,omitempty"`
}

// workloadSpreadToV1beta1 converts a v1alpha1 WorkloadSpread to v1beta1.
func workloadSpreadToV1beta1(in *v1alpha1.WorkloadSpread, out *v1beta1.WorkloadSpread) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var beta workloadSpreadBetaFields
	if _, err := Unstash(&out.ObjectMeta, "v1beta1", &beta); err != nil {
		return err
	}

	s := &in.Spec
	out.Spec = v1beta1.WorkloadSpreadSpec{
		ScheduleStrategy: v1beta1.WorkloadSpreadScheduleStrategy{
			Type: v1beta1.WorkloadSpreadScheduleStrategyType(s.ScheduleStrategy.Type),
		},
	}
	if r := s.TargetReference; r != nil {
		out.Spec.TargetReference = &v1beta1.TargetReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
	}
	if f := s.TargetFilter; f != nil {
		out.Spec.TargetFilter = &v1beta1.TargetFilter{Selector: f.Selector, ReplicasPathList: f.ReplicasPathList}
	}
	if a := s.ScheduleStrategy.Adaptive; a != nil {
		out.Spec.ScheduleStrategy.Adaptive = &v1beta1.AdaptiveWorkloadSpreadStrategy{
			DisableSimulationSchedule: a.DisableSimulationSchedule,
			RescheduleCriticalSeconds: a.RescheduleCriticalSeconds,
		}
	}
	if s.Subsets != nil {
		out.Spec.Subsets = make([]v1beta1.WorkloadSpreadSubset, len(s.Subsets))
		for i, sub := range s.Subsets {
			out.Spec.Subsets[i] = v1beta1.WorkloadSpreadSubset{
				Name:                  sub.Name,
				RequiredNodeSelector:  sub.RequiredNodeSelectorTerm,
				PreferredNodeSelector: sub.PreferredNodeSelectorTerms,
				Tolerations:           sub.Tolerations,
				MaxReplicas:           sub.MaxReplicas,
				Patch:                 sub.Patch,
			}
		}
	}

	st := &in.Status
	out.Status = v1beta1.WorkloadSpreadStatus{
		ObservedGeneration: st.ObservedGeneration,
		SubsetStatuses:     wsSubsetStatusesToV1beta1(st.SubsetStatuses, beta.ConditionGenerations),
	}
	if st.VersionedSubsetStatuses != nil {
		out.Status.VersionedSubsetStatuses = make(map[string][]v1beta1.WorkloadSpreadSubsetStatus, len(st.VersionedSubsetStatuses))
		for rev, ss := range st.VersionedSubsetStatuses {
			out.Status.VersionedSubsetStatuses[rev] = wsSubsetStatusesToV1beta1(ss, beta.VersionedConditionGenerations[rev])
		}
	}
	return nil
}

// workloadSpreadToV1alpha1 converts a v1beta1 WorkloadSpread to v1alpha1.
func workloadSpreadToV1alpha1(in *v1beta1.WorkloadSpread, out *v1alpha1.WorkloadSpread) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var beta workloadSpreadBetaFields

	s := &in.Spec
	out.Spec = v1alpha1.WorkloadSpreadSpec{
		ScheduleStrategy: v1alpha1.WorkloadSpreadScheduleStrategy{
			Type: v1alpha1.WorkloadSpreadScheduleStrategyType(s.ScheduleStrategy.Type),
		},
	}
	if r := s.TargetReference; r != nil {
		out.Spec.TargetReference = &v1alpha1.TargetReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
	}
	if f := s.TargetFilter; f != nil {
		out.Spec.TargetFilter = &v1alpha1.TargetFilter{Selector: f.Selector, ReplicasPathList: f.ReplicasPathList}
	}
	if a := s.ScheduleStrategy.Adaptive; a != nil {
		out.Spec.ScheduleStrategy.Adaptive = &v1alpha1.AdaptiveWorkloadSpreadStrategy{
			DisableSimulationSchedule: a.DisableSimulationSchedule,
			RescheduleCriticalSeconds: a.RescheduleCriticalSeconds,
		}
	}
	if s.Subsets != nil {
		out.Spec.Subsets = make([]v1alpha1.WorkloadSpreadSubset, len(s.Subsets))
		for i, sub := range s.Subsets {
			out.Spec.Subsets[i] = v1alpha1.WorkloadSpreadSubset{
				Name:                       sub.Name,
				RequiredNodeSelectorTerm:   sub.RequiredNodeSelector,
				PreferredNodeSelectorTerms: sub.PreferredNodeSelector,
				Tolerations:                sub.Tolerations,
				MaxReplicas:                sub.MaxReplicas,
				Patch:                      sub.Patch,
			}
		}
	}

	st := &in.Status
	out.Status = v1alpha1.WorkloadSpreadStatus{ObservedGeneration: st.ObservedGeneration}
	out.Status.SubsetStatuses, beta.ConditionGenerations = wsSubsetStatusesToV1alpha1(st.SubsetStatuses)
	if st.VersionedSubsetStatuses != nil {
		out.Status.VersionedSubsetStatuses = make(map[string][]v1alpha1.WorkloadSpreadSubsetStatus, len(st.VersionedSubsetStatuses))
		for rev, ss := range st.VersionedSubsetStatuses {
			var gens [][]int64
			out.Status.VersionedSubsetStatuses[rev], gens = wsSubsetStatusesToV1alpha1(ss)
			if gens != nil {
				if beta.VersionedConditionGenerations == nil {
					beta.VersionedConditionGenerations = map[string][][]int64{}
				}
				beta.VersionedConditionGenerations[rev] = gens
			}
		}
	}
	return Stash(&out.ObjectMeta, "v1beta1", &beta)
}

// wsSubsetStatusesToV1beta1 converts subset statuses, giving each condition
// the observedGeneration gens holds for its position (0 when gens has
// none).
func wsSubsetStatusesToV1beta1(in []v1alpha1.WorkloadSpreadSubsetStatus, gens [][]int64) []v1beta1.WorkloadSpreadSubsetStatus {
	if in == nil {
		return nil
	}
	out := make([]v1beta1.WorkloadSpreadSubsetStatus, len(in))
	for i, ss := range in {
		out[i] = v1beta1.WorkloadSpreadSubsetStatus{
			Name:            ss.Name,
			Replicas:        ss.Replicas,
			MissingReplicas: ss.MissingReplicas,
			CreatingPods:    ss.CreatingPods,
			DeletingPods:    ss.DeletingPods,
		}
		if ss.Conditions == nil {
			continue
		}
		out[i].Conditions = make([]metav1.Condition, len(ss.Conditions))
		for j, c := range ss.Conditions {
			out[i].Conditions[j] = metav1.Condition{
				Type:               string(c.Type),
				Status:             metav1.ConditionStatus(c.Status),
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
			if i < len(gens) && j < len(gens[i]) {
				out[i].Conditions[j].ObservedGeneration = gens[i][j]
			}
		}
	}
	return out
}

// wsSubsetStatusesToV1alpha1 converts subset statuses and returns the
// conditions' observedGenerations by position, or nil when all are 0.
func wsSubsetStatusesToV1alpha1(in []v1beta1.WorkloadSpreadSubsetStatus) ([]v1alpha1.WorkloadSpreadSubsetStatus, [][]int64) {
	if in == nil {
		return nil, nil
	}
	out := make([]v1alpha1.WorkloadSpreadSubsetStatus, len(in))
	gens := make([][]int64, len(in))
	nonzero := false
	for i, ss := range in {
		out[i] = v1alpha1.WorkloadSpreadSubsetStatus{
			Name:            ss.Name,
			Replicas:        ss.Replicas,
			MissingReplicas: ss.MissingReplicas,
			CreatingPods:    ss.CreatingPods,
			DeletingPods:    ss.DeletingPods,
		}
		if ss.Conditions == nil {
			continue
		}
		out[i].Conditions = make([]v1alpha1.WorkloadSpreadSubsetCondition, len(ss.Conditions))
		gens[i] = make([]int64, len(ss.Conditions))
		for j, c := range ss.Conditions {
			out[i].Conditions[j] = v1alpha1.WorkloadSpreadSubsetCondition{
				Type:               v1alpha1.WorkloadSpreadSubsetConditionType(c.Type),
				Status:             corev1.ConditionStatus(c.Status),
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
			gens[i][j] = c.ObservedGeneration
			if c.ObservedGeneration != 0 {
				nonzero = true
			}
		}
	}
	if !nonzero {
		gens = nil
	}
	return out, gens
}
