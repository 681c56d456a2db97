package cloneset

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/rollout"
	"github.com/shoal-io/shoal/coordinator/workload/spreadrank"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// deletion is a pod to delete and why.
type deletion struct {
	pod *corev1.Pod
	why string
}

// update is a pod to move to revision to in place (or, when it cannot
// be, by recreating it).
type update struct {
	pod *corev1.Pod
	to  string
}

// planGates are the feature gates that change a plan's decisions.
type planGates struct {
	// preparingUpdateAsUpdate counts pods held in PreparingUpdate as
	// updated when choosing the revision of new pods and of scale-in
	// (PreparingUpdateAsUpdate).
	preparingUpdateAsUpdate bool
	// partitionRollback moves updated pods back to the current revision
	// when the partition rises (CloneSetPartitionRollback).
	partitionRollback bool
}

// plan is one pass's decisions about a CloneSet, from its pods as the
// informer shows them; it is pure (no API calls), so it is tested alone.
type plan struct {
	replicas, partition int32
	updateRev, current  string

	active                                   []*corev1.Pod
	updated, ready, available                int32
	updatedReady, updatedAvailable, oldCount int32

	deletes              []deletion
	createOld, createNew int
	// leaving are the pods in PreparingDelete: deleted when their hook
	// lets go, whatever else the pass does.
	leaving []*corev1.Pod
	// updates are pods to move to another revision in place (the
	// in-place policies): old pods to the update revision, or, in a
	// partition rollback, updated pods back to the current one. The
	// controller recreates those that cannot be.
	updates []update
	// updateBlocked says why old pods are not being updated, if that is
	// not the user's choice (paused, partition).
	updateBlocked string
	requeueAfter  time.Duration
	err           error
}

// scaling reports whether the plan creates or deletes for scale.
func (p *plan) scaling() bool { return p.createOld+p.createNew > 0 || len(p.deletes) > 0 }

// newPlan decides what to do with cs's pods at now: specified deletes
// first, then scaling, else an update (recreate or in place) within
// partition and maxUnavailable.
func newPlan(cs *v1beta1.CloneSet, pods []*corev1.Pod, updateRev, current string, now time.Time, gates planGates, nodeLabels spreadrank.NodeLabels) *plan {
	p := &plan{replicas: ptr.Deref(cs.Spec.Replicas, 1), updateRev: updateRev, current: current}
	minReady := time.Duration(cs.Spec.MinReadySeconds) * time.Second
	ru := cs.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		ru = &v1beta1.RollingUpdateCloneSetStrategy{}
	}
	var err error
	if p.partition, err = rollout.Partition(ru.Partition, p.replicas); err != nil {
		p.err = err
	}
	limits, err := rollout.UpdateLimits(ru.MaxUnavailable, ru.MaxSurge, p.replicas)
	if err != nil {
		p.err = err
	}

	toDelete := map[string]bool{}
	for _, n := range cs.Spec.ScaleStrategy.PodsToDelete {
		toDelete[n] = true
	}
	var specified, oldPods, newPods, notAvailable []*corev1.Pod
	// oldForScale counts the old pods when deciding the revision of new
	// pods and which revision a scale-in takes: with
	// PreparingUpdateAsUpdate, a pod a hook holds before its update counts
	// as updated already.
	var oldForScale int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		p.active = append(p.active, pod)
		isUpdated := revisionOf(pod, cs.Name) == updateRev
		if isUpdated {
			p.updated++
			newPods = append(newPods, pod)
		} else {
			p.oldCount++
			oldPods = append(oldPods, pod)
			if !gates.preparingUpdateAsUpdate || !preparingUpdate(pod) {
				oldForScale++
			}
		}
		if podReady(pod) {
			p.ready++
			if isUpdated {
				p.updatedReady++
			}
		}
		if podAvailable(pod, minReady, now) {
			p.available++
			if isUpdated {
				p.updatedAvailable++
			}
		} else {
			notAvailable = append(notAvailable, pod)
			if since := readySince(pod); since != nil && inService(pod) {
				// Ready, available once minReadySeconds have passed.
				if d := since.Add(minReady).Sub(now); d > 0 && (p.requeueAfter == 0 || d < p.requeueAfter) {
					p.requeueAfter = d + 100*time.Millisecond
				}
			}
		}
		switch {
		case preparingDelete(pod):
			// On its way out: looked at every pass, deleted once its
			// preDelete hook lets go.
			p.leaving = append(p.leaving, pod)
		case specifiedDelete(pod, toDelete):
			specified = append(specified, pod)
		}
	}
	active := int32(len(p.active))
	exclude := excludePreparingDelete(cs)
	if exclude {
		// Pods on their way out do not count, so a scale-up replaces them
		// at once.
		active -= int32(len(p.leaving))
	}

	// 1. The user's specified deletes, within maxUnavailable (seed 000's
	// three cases): a pod that is unavailable anyway goes at once; a ready
	// one only while fewer than maxUnavailable pods are unavailable. With
	// maxSurge, when deleting would exceed maxUnavailable, a replacement is
	// created first and the pod goes once it is available.
	if len(specified) > 0 {
		var unavailableOther int32
		for _, pod := range notAvailable {
			if !slices.Contains(specified, pod) && !slices.Contains(p.leaving, pod) {
				unavailableOther++
			}
		}
		target := p.replicas
		if limits.MaxSurge > 0 {
			need := unavailableOther + int32(len(specified)) + int32(len(p.leaving)) - limits.MaxUnavailable
			target += min(max(need, 0), int32(len(specified)), limits.MaxSurge)
		}
		if active < target {
			p.createNew = int(target - active)
			if updateRev != current {
				p.createOld = int(min(target-active, max(p.partition-oldForScale, 0)))
				p.createNew -= p.createOld
			}
			return p
		}
		readyLimit := limits.MaxUnavailable + (active - p.replicas) - int32(len(notAvailable))
		for _, pod := range specified {
			switch {
			case slices.Contains(notAvailable, pod):
				p.deletes = append(p.deletes, deletion{pod, "specified for deletion"})
			case readyLimit > 0:
				p.deletes = append(p.deletes, deletion{pod, "specified for deletion"})
				readyLimit--
			}
		}
		return p
	}

	// 2. Scale, to replicas plus the update's surge: while old pods beyond
	// partition remain and the update may run, up to maxSurge extra pods
	// at the update revision (the update step then deletes old ones).
	updating := oldForScale > p.partition && p.err == nil && !ru.Paused &&
		cs.Spec.UpdateStrategy.Type != v1beta1.OnDeleteCloneSetUpdateStrategyType &&
		ru.PodUpdatePolicy != v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType
	target := p.replicas
	if updating {
		target += min(limits.MaxSurge, oldForScale-p.partition)
	}
	switch {
	case active < target:
		n := target - active
		if limit, err := rollout.ScaleUpLimit(cs.Spec.ScaleStrategy.MaxUnavailable, p.replicas); err == nil && limit >= 0 {
			n = min(n, max(limit-int32(len(notAvailable)), 0))
		}
		// Old pods stay at partition: the first new pods take the current
		// revision while fewer than partition old pods exist.
		if updateRev != current {
			p.createOld = int(min(n, max(p.partition-oldForScale, 0)))
		}
		p.createNew = int(n) - p.createOld
		return p
	case active > target:
		n := int(active - target)
		// Old revisions go first while more old pods exist than partition
		// keeps; then OpenKruise's order.
		// Pods already leaving are not picked again when they do not count.
		counted := func(pod *corev1.Pod) bool {
			return !exclude || !slices.Contains(p.leaving, pod)
		}
		candidates := make([]*corev1.Pod, 0, len(p.active))
		surplusOld := max(oldForScale-p.partition, 0)
		var old []*corev1.Pod
		for _, pod := range oldPods {
			if counted(pod) && (!gates.preparingUpdateAsUpdate || !preparingUpdate(pod)) {
				old = append(old, pod)
			}
		}
		rank := spreadrank.New(cs.Spec.Template.Spec.TopologySpreadConstraints, p.active, nodeLabels)
		sortForDeletion(old, rank)
		candidates = append(candidates, old[:min(int(surplusOld), len(old))]...)
		rest := make([]*corev1.Pod, 0, len(p.active))
		for _, pod := range p.active {
			if counted(pod) && !slices.Contains(candidates, pod) {
				rest = append(rest, pod)
			}
		}
		sortForDeletion(rest, rank)
		candidates = append(candidates, rest...)
		for _, pod := range candidates[:n] {
			p.deletes = append(p.deletes, deletion{pod, fmt.Sprintf("scale in from %d to %d", active, target)})
		}
		return p
	}

	// 3. Update: recreate old pods beyond partition, within maxUnavailable
	// (plus the surge pods above replicas, which stand in for them).
	if p.err != nil {
		p.updateBlocked = p.err.Error()
		return p
	}
	switch {
	case p.oldCount == 0 && !gates.partitionRollback:
		return p
	case cs.Spec.UpdateStrategy.Type == v1beta1.OnDeleteCloneSetUpdateStrategyType:
		return p // pods move when the user deletes them
	case ru.Paused:
		return p
	}
	// Pods a hook holds in PreparingUpdate were picked before: they go on.
	// An old pod that is unavailable anyway is updated without using the
	// budget (updating it makes nothing less available); an available one
	// uses one unit of it.
	want, from, to := p.oldCount-p.partition, oldPods, updateRev
	if gates.partitionRollback && updateRev != current && p.updated > rollout.ExpectedUpdated(p.replicas, p.partition) {
		// The partition rose: updated pods beyond it go back.
		want, from, to = p.updated-rollout.ExpectedUpdated(p.replicas, p.partition), newPods, current
	}
	if want <= 0 {
		return p
	}
	budget := limits.MaxUnavailable + (active - p.replicas) - int32(len(notAvailable))
	sortForUpdate(from, ru.PriorityStrategy, ru.ScatterStrategy)
	var picks []*corev1.Pod
	for _, pod := range from {
		switch {
		case int32(len(picks)) >= want:
		case preparingUpdate(pod), slices.Contains(notAvailable, pod):
			picks = append(picks, pod)
		case budget > 0:
			picks = append(picks, pod)
			budget--
		}
	}
	if ru.PodUpdatePolicy == v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType || ru.PodUpdatePolicy == v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType {
		for _, pod := range picks {
			p.updates = append(p.updates, update{pod, to})
		}
		return p
	}
	for _, pod := range picks {
		p.deletes = append(p.deletes, deletion{pod, "recreated at revision " + to})
	}
	return p
}

// status is the CloneSet status the plan observed (conditions kept).
func (p *plan) status(cs *v1beta1.CloneSet) *v1beta1.CloneSetStatus {
	st := cs.Status.DeepCopy()
	st.ObservedGeneration = cs.Generation
	st.Replicas = int32(len(p.active))
	st.ReadyReplicas, st.AvailableReplicas = p.ready, p.available
	st.UpdatedReplicas, st.UpdatedReadyReplicas, st.UpdatedAvailableReplicas = p.updated, p.updatedReady, p.updatedAvailable
	st.ExpectedUpdatedReplicas = rollout.ExpectedUpdated(p.replicas, p.partition)
	st.UpdateRevision = p.updateRev
	st.CurrentRevision = p.current
	if p.updated == p.replicas && int32(len(p.active)) == p.replicas {
		st.CurrentRevision = p.updateRev
	}
	st.LabelSelector = selectorString(cs)
	return st
}

// excludePreparingDelete reports whether PreparingDelete pods are left out
// of the replica count: scaleStrategy.excludePreparingDelete, or the
// v1alpha1 label apps.kruise.io/cloneset-scaling-exclude-preparing-delete
// "true" on the CloneSet.
func excludePreparingDelete(cs *v1beta1.CloneSet) bool {
	return cs.Spec.ScaleStrategy.ExcludePreparingDelete || cs.Labels[wellknown.LabelCloneSetScalingExcludePreparingDelete] == "true"
}
