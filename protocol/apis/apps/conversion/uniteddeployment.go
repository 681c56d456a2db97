package conversion

import (
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// UnitedDeployment: how the two versions differ and how each difference
// converts.
//
//   - spec.template.cloneSetTemplate.spec is a v1alpha1 CloneSet spec in
//     v1alpha1 and a v1beta1 one in v1beta1; it converts as a CloneSet does,
//     with the template's metadata in the place of the CloneSet's (so the
//     image pre-download annotations and the exclude-preparing-delete label
//     of the template are what become v1beta1 fields).
//   - topology.scheduleStrategy.adaptive.unschedulableLastSeconds is
//     unschedulableDuration in v1beta1.
//   - status.updateStatus.updatedRevision is status.updatedRevision in
//     v1beta1. v1alpha1's status.subsetReplicas and
//     status.updateStatus.currentPartitions, maps by subset name, are in
//     v1beta1 only the replicas and partition of each entry of
//     status.subsetStatuses (which v1alpha1 has too). Converting to v1alpha1
//     rebuilds the maps from those entries (entries without a name left
//     out; updateStatus set when there is a revision or a partition); where
//     a v1alpha1 object's maps or updateStatus differ from what that rule
//     gives, they are stashed.

func init() {
	register("UnitedDeployment", unitedDeploymentToV1beta1, unitedDeploymentToV1alpha1)
}

// unitedDeploymentAlphaFields is what a v1beta1 UnitedDeployment keeps of
// its v1alpha1 source.
type unitedDeploymentAlphaFields struct {
	// CloneSetTemplate is what the CloneSet template's conversion keeps.
	CloneSetTemplate *cloneSetAlphaFields `json:"cloneSetTemplate,omitempty"`
	// SubsetReplicas is status.subsetReplicas where it differs from the
	// replicas of status.subsetStatuses (an empty map stands for none).
	SubsetReplicas *map[string]int32 `json:"subsetReplicas,omitempty"`
	// CurrentPartitions is status.updateStatus.currentPartitions where it
	// differs from the partitions of status.subsetStatuses (an empty map
	// stands for none).
	CurrentPartitions *map[string]int32 `json:"currentPartitions,omitempty"`
	// UpdateStatus records whether status.updateStatus was set, where that
	// differs from the rule (set when there is a revision or a partition).
	UpdateStatus *bool `json:"updateStatus,omitempty"`
}

// unitedDeploymentBetaFields is what a v1alpha1 UnitedDeployment keeps of
// its v1beta1 source.
type unitedDeploymentBetaFields struct {
	// CloneSetTemplate is what the CloneSet template's conversion keeps.
	CloneSetTemplate *cloneSetBetaFields `json:"cloneSetTemplate,omitempty"`
}

// unitedDeploymentToV1beta1 converts a v1alpha1 UnitedDeployment to
// v1beta1.
func unitedDeploymentToV1beta1(in *v1alpha1.UnitedDeployment, out *v1beta1.UnitedDeployment) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var restore unitedDeploymentBetaFields
	if _, err := Unstash(&out.ObjectMeta, "v1beta1", &restore); err != nil {
		return err
	}
	var keep unitedDeploymentAlphaFields

	s := &in.Spec
	out.Spec = v1beta1.UnitedDeploymentSpec{
		Replicas: s.Replicas,
		Selector: s.Selector,
		Template: v1beta1.SubsetTemplate{
			StatefulSetTemplate:         (*v1beta1.StatefulSetTemplateSpec)(s.Template.StatefulSetTemplate),
			AdvancedStatefulSetTemplate: (*v1beta1.AdvancedStatefulSetTemplateSpec)(s.Template.AdvancedStatefulSetTemplate),
			DeploymentTemplate:          (*v1beta1.DeploymentTemplateSpec)(s.Template.DeploymentTemplate),
		},
		Topology: v1beta1.Topology{
			ScheduleStrategy: v1beta1.UnitedDeploymentScheduleStrategy{
				Type: v1beta1.UnitedDeploymentScheduleStrategyType(s.Topology.ScheduleStrategy.Type),
			},
		},
		UpdateStrategy: v1beta1.UnitedDeploymentUpdateStrategy{
			Type:         v1beta1.UpdateStrategyType(s.UpdateStrategy.Type),
			ManualUpdate: (*v1beta1.ManualUpdate)(s.UpdateStrategy.ManualUpdate),
		},
		RevisionHistoryLimit: s.RevisionHistoryLimit,
	}
	if t := s.Template.CloneSetTemplate; t != nil {
		ct := &v1beta1.CloneSetTemplateSpec{ObjectMeta: *t.ObjectMeta.DeepCopy()}
		restoreCS := restore.CloneSetTemplate
		if restoreCS == nil {
			restoreCS = &cloneSetBetaFields{}
		}
		keepCS := cloneSetSpecToV1beta1(&ct.ObjectMeta, &t.Spec, &ct.Spec, restoreCS)
		if !isZeroCloneSetAlphaFields(&keepCS) {
			keep.CloneSetTemplate = &keepCS
		}
		out.Spec.Template.CloneSetTemplate = ct
	}
	if s.Topology.Subsets != nil {
		out.Spec.Topology.Subsets = make([]v1beta1.Subset, len(s.Topology.Subsets))
		for i := range s.Topology.Subsets {
			out.Spec.Topology.Subsets[i] = v1beta1.Subset(s.Topology.Subsets[i])
		}
	}
	if a := s.Topology.ScheduleStrategy.Adaptive; a != nil {
		out.Spec.Topology.ScheduleStrategy.Adaptive = &v1beta1.AdaptiveUnitedDeploymentStrategy{
			RescheduleCriticalSeconds: a.RescheduleCriticalSeconds,
			UnschedulableDuration:     a.UnschedulableLastSeconds,
			ReserveUnschedulablePods:  a.ReserveUnschedulablePods,
		}
	}

	unitedDeploymentStatusToV1beta1(&in.Status, &out.Status, &keep)
	return Stash(&out.ObjectMeta, "v1alpha1", &keep)
}

// unitedDeploymentToV1alpha1 converts a v1beta1 UnitedDeployment to
// v1alpha1.
func unitedDeploymentToV1alpha1(in *v1beta1.UnitedDeployment, out *v1alpha1.UnitedDeployment) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var restore unitedDeploymentAlphaFields
	if _, err := Unstash(&out.ObjectMeta, "v1alpha1", &restore); err != nil {
		return err
	}
	var keep unitedDeploymentBetaFields

	s := &in.Spec
	out.Spec = v1alpha1.UnitedDeploymentSpec{
		Replicas: s.Replicas,
		Selector: s.Selector,
		Template: v1alpha1.SubsetTemplate{
			StatefulSetTemplate:         (*v1alpha1.StatefulSetTemplateSpec)(s.Template.StatefulSetTemplate),
			AdvancedStatefulSetTemplate: (*v1alpha1.AdvancedStatefulSetTemplateSpec)(s.Template.AdvancedStatefulSetTemplate),
			DeploymentTemplate:          (*v1alpha1.DeploymentTemplateSpec)(s.Template.DeploymentTemplate),
		},
		Topology: v1alpha1.Topology{
			ScheduleStrategy: v1alpha1.UnitedDeploymentScheduleStrategy{
				Type: v1alpha1.UnitedDeploymentScheduleStrategyType(s.Topology.ScheduleStrategy.Type),
			},
		},
		UpdateStrategy: v1alpha1.UnitedDeploymentUpdateStrategy{
			Type:         v1alpha1.UpdateStrategyType(s.UpdateStrategy.Type),
			ManualUpdate: (*v1alpha1.ManualUpdate)(s.UpdateStrategy.ManualUpdate),
		},
		RevisionHistoryLimit: s.RevisionHistoryLimit,
	}
	if t := s.Template.CloneSetTemplate; t != nil {
		ct := &v1alpha1.CloneSetTemplateSpec{ObjectMeta: *t.ObjectMeta.DeepCopy()}
		restoreCS := restore.CloneSetTemplate
		if restoreCS == nil {
			restoreCS = &cloneSetAlphaFields{}
		}
		keepCS := cloneSetSpecToV1alpha1(&ct.ObjectMeta, &t.Spec, &ct.Spec, restoreCS)
		if !isZeroCloneSetBetaFields(&keepCS) {
			keep.CloneSetTemplate = &keepCS
		}
		out.Spec.Template.CloneSetTemplate = ct
	}
	if s.Topology.Subsets != nil {
		out.Spec.Topology.Subsets = make([]v1alpha1.Subset, len(s.Topology.Subsets))
		for i := range s.Topology.Subsets {
			out.Spec.Topology.Subsets[i] = v1alpha1.Subset(s.Topology.Subsets[i])
		}
	}
	if a := s.Topology.ScheduleStrategy.Adaptive; a != nil {
		out.Spec.Topology.ScheduleStrategy.Adaptive = &v1alpha1.AdaptiveUnitedDeploymentStrategy{
			RescheduleCriticalSeconds: a.RescheduleCriticalSeconds,
			UnschedulableLastSeconds:  a.UnschedulableDuration,
			ReserveUnschedulablePods:  a.ReserveUnschedulablePods,
		}
	}

	unitedDeploymentStatusToV1alpha1(&in.Status, &out.Status, &restore)
	return Stash(&out.ObjectMeta, "v1beta1", &keep)
}

// isZeroCloneSetAlphaFields reports whether f keeps nothing.
func isZeroCloneSetAlphaFields(f *cloneSetAlphaFields) bool {
	return len(f.PreDownloadInSpec) == 0 && f.EmptyInPlaceUpdateStrategy == nil
}

// isZeroCloneSetBetaFields reports whether f keeps nothing.
func isZeroCloneSetBetaFields(f *cloneSetBetaFields) bool {
	return f.UpdateStrategyType == nil && f.Paused == nil && f.EmptyRollingUpdate == nil &&
		f.ExcludePreparingDeleteLabel == nil && len(f.RawPreDownloadAnnotations) == 0
}

// unitedDeploymentStatusToV1beta1 converts a v1alpha1 status, recording in
// keep the maps and updateStatus that the way back would not rebuild.
func unitedDeploymentStatusToV1beta1(in *v1alpha1.UnitedDeploymentStatus, out *v1beta1.UnitedDeploymentStatus, keep *unitedDeploymentAlphaFields) {
	*out = v1beta1.UnitedDeploymentStatus{
		ObservedGeneration:   in.ObservedGeneration,
		ReadyReplicas:        in.ReadyReplicas,
		Replicas:             in.Replicas,
		UpdatedReplicas:      in.UpdatedReplicas,
		ReservedPods:         in.ReservedPods,
		UpdatedReadyReplicas: in.UpdatedReadyReplicas,
		CollisionCount:       in.CollisionCount,
		CurrentRevision:      in.CurrentRevision,
		LabelSelector:        in.LabelSelector,
	}
	if in.UpdateStatus != nil {
		out.UpdatedRevision = in.UpdateStatus.UpdatedRevision
	}
	if in.SubsetStatuses != nil {
		out.SubsetStatuses = make([]v1beta1.UnitedDeploymentSubsetStatus, len(in.SubsetStatuses))
		for i, st := range in.SubsetStatuses {
			o := v1beta1.UnitedDeploymentSubsetStatus{
				Name:          st.Name,
				Replicas:      st.Replicas,
				ReadyReplicas: st.ReadyReplicas,
				Partition:     st.Partition,
				ReservedPods:  st.ReservedPods,
			}
			if st.Conditions != nil {
				o.Conditions = make([]v1beta1.UnitedDeploymentSubsetCondition, len(st.Conditions))
				for j, c := range st.Conditions {
					o.Conditions[j] = v1beta1.UnitedDeploymentSubsetCondition{
						Type:               v1beta1.UnitedDeploymentSubsetConditionType(c.Type),
						Status:             c.Status,
						LastTransitionTime: c.LastTransitionTime,
						Reason:             c.Reason,
						Message:            c.Message,
					}
				}
			}
			out.SubsetStatuses[i] = o
		}
	}
	if in.Conditions != nil {
		out.Conditions = make([]v1beta1.UnitedDeploymentCondition, len(in.Conditions))
		for i, c := range in.Conditions {
			out.Conditions[i] = v1beta1.UnitedDeploymentCondition{
				Type:               v1beta1.UnitedDeploymentConditionType(c.Type),
				Status:             c.Status,
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}

	replicas, partitions := udSubsetMaps(out.SubsetStatuses)
	if !udMapsEqual(in.SubsetReplicas, replicas) {
		keep.SubsetReplicas = csPtr(udNonNil(in.SubsetReplicas))
	}
	var inPartitions map[string]int32
	if in.UpdateStatus != nil {
		inPartitions = in.UpdateStatus.CurrentPartitions
		if !udMapsEqual(inPartitions, partitions) {
			keep.CurrentPartitions = csPtr(udNonNil(inPartitions))
			partitions = inPartitions
		}
	}
	if (in.UpdateStatus != nil) != udHasUpdateStatus(out.UpdatedRevision, partitions) {
		keep.UpdateStatus = csPtr(in.UpdateStatus != nil)
	}
}

// unitedDeploymentStatusToV1alpha1 converts a v1beta1 status, rebuilding
// the v1alpha1 maps and updateStatus from the subset statuses, or taking
// them from restore.
func unitedDeploymentStatusToV1alpha1(in *v1beta1.UnitedDeploymentStatus, out *v1alpha1.UnitedDeploymentStatus, restore *unitedDeploymentAlphaFields) {
	*out = v1alpha1.UnitedDeploymentStatus{
		ObservedGeneration:   in.ObservedGeneration,
		ReadyReplicas:        in.ReadyReplicas,
		Replicas:             in.Replicas,
		UpdatedReplicas:      in.UpdatedReplicas,
		ReservedPods:         in.ReservedPods,
		UpdatedReadyReplicas: in.UpdatedReadyReplicas,
		CollisionCount:       in.CollisionCount,
		CurrentRevision:      in.CurrentRevision,
		LabelSelector:        in.LabelSelector,
	}
	if in.SubsetStatuses != nil {
		out.SubsetStatuses = make([]v1alpha1.UnitedDeploymentSubsetStatus, len(in.SubsetStatuses))
		for i, st := range in.SubsetStatuses {
			o := v1alpha1.UnitedDeploymentSubsetStatus{
				Name:          st.Name,
				Replicas:      st.Replicas,
				ReadyReplicas: st.ReadyReplicas,
				Partition:     st.Partition,
				ReservedPods:  st.ReservedPods,
			}
			if st.Conditions != nil {
				o.Conditions = make([]v1alpha1.UnitedDeploymentSubsetCondition, len(st.Conditions))
				for j, c := range st.Conditions {
					o.Conditions[j] = v1alpha1.UnitedDeploymentSubsetCondition{
						Type:               v1alpha1.UnitedDeploymentSubsetConditionType(c.Type),
						Status:             c.Status,
						LastTransitionTime: c.LastTransitionTime,
						Reason:             c.Reason,
						Message:            c.Message,
					}
				}
			}
			out.SubsetStatuses[i] = o
		}
	}
	if in.Conditions != nil {
		out.Conditions = make([]v1alpha1.UnitedDeploymentCondition, len(in.Conditions))
		for i, c := range in.Conditions {
			out.Conditions[i] = v1alpha1.UnitedDeploymentCondition{
				Type:               v1alpha1.UnitedDeploymentConditionType(c.Type),
				Status:             c.Status,
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}

	replicas, partitions := udSubsetMaps(in.SubsetStatuses)
	if restore.SubsetReplicas != nil {
		replicas = *restore.SubsetReplicas
	}
	out.SubsetReplicas = csNilIfEmpty(replicas)
	if restore.CurrentPartitions != nil {
		partitions = *restore.CurrentPartitions
	}
	present := udHasUpdateStatus(in.UpdatedRevision, partitions)
	if restore.UpdateStatus != nil {
		present = *restore.UpdateStatus
	}
	if present {
		out.UpdateStatus = &v1alpha1.UpdateStatus{
			UpdatedRevision:   in.UpdatedRevision,
			CurrentPartitions: csNilIfEmpty(partitions),
		}
	}
}

// udSubsetMaps returns the replicas and the partition of each named subset
// status (a later entry wins over an earlier one of the same name), or nil
// maps when no status has a name.
func udSubsetMaps(statuses []v1beta1.UnitedDeploymentSubsetStatus) (replicas, partitions map[string]int32) {
	for _, st := range statuses {
		if st.Name == "" {
			continue
		}
		if replicas == nil {
			replicas, partitions = map[string]int32{}, map[string]int32{}
		}
		replicas[st.Name] = st.Replicas
		partitions[st.Name] = st.Partition
	}
	return replicas, partitions
}

// udHasUpdateStatus is the rule for when v1alpha1's status.updateStatus is
// set: when there is an updated revision or a partition to report.
func udHasUpdateStatus(revision string, partitions map[string]int32) bool {
	return revision != "" || len(partitions) > 0
}

// udMapsEqual compares two maps, nil and empty being equal.
func udMapsEqual(a, b map[string]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// udNonNil returns m, or an empty map for nil (a stashed empty map stands
// for none).
func udNonNil(m map[string]int32) map[string]int32 {
	if m == nil {
		return map[string]int32{}
	}
	return m
}
