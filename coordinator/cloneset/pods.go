package cloneset

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/coordinator/workload/spreadrank"
	"github.com/shoal-io/shoal/coordinator/workload/updatesort"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	return readySince(p) != nil
}

// readySince is when the pod became ready (podstatus.ReadySince).
func readySince(p *corev1.Pod) *time.Time { return podstatus.ReadySince(p) }

// podAvailable reports whether the pod is in service and has been ready
// for minReady at now. Only a Normal pod (or one from before the lifecycle
// label) is in service: one a hook holds, or one being updated in place,
// is not.
func podAvailable(p *corev1.Pod, minReady time.Duration, now time.Time) bool {
	if !inService(p) {
		return false
	}
	return podstatus.Available(p, minReady, now)
}

// sortForDeletion orders pods the way a scale-in picks them, first to be
// deleted first: pods already PreparingDelete (a hook holds them on their
// way out), then OpenKruise's order (spreadrank.Sort: unscheduled,
// pending, not ready, lower pod-deletion-cost, higher spread rank, ready
// for less time, more restarts, newer first) with rank r.
func sortForDeletion(pods []*corev1.Pod, r spreadrank.Ranker) {
	spreadrank.Sort(pods, r)
	sort.SliceStable(pods, func(i, j int) bool { return preparingDelete(pods[i]) && !preparingDelete(pods[j]) })
}

// specifiedDelete reports whether the user asked for the pod to go: the
// apps.kruise.io/specified-delete label, or its name in podsToDelete.
func specifiedDelete(p *corev1.Pod, podsToDelete map[string]bool) bool {
	_, labelled := p.Labels[wellknown.LabelSpecifiedDelete]
	return labelled || podsToDelete[p.Name]
}

// revisionOf is the revision (ControllerRevision name) the pod was built
// from, accepting the short form (hash only).
func revisionOf(p *corev1.Pod, csName string) string {
	h := p.Labels[wellknown.LabelControllerRevisionHash]
	if h != "" && len(h) <= 10 && !strings.HasPrefix(h, csName+"-") {
		return csName + "-" + h
	}
	return h
}

// preparingDelete reports whether the pod waits in PreparingDelete.
func preparingDelete(p *corev1.Pod) bool {
	return p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingDelete)
}

// preparingUpdate reports whether the pod waits in PreparingUpdate.
func preparingUpdate(p *corev1.Pod) bool {
	return p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingUpdate)
}

// sortForUpdate orders pods the way an update picks them: those a hook
// holds in PreparingUpdate first (picked before), then by
// priorityStrategy and scatterStrategy, and within those the scale-in
// order (not ready and cheap pods first).
func sortForUpdate(pods []*corev1.Pod, priority *pub.UpdatePriorityStrategy, scatter pub.UpdateScatterStrategy) {
	spreadrank.Sort(pods, nil)
	updatesort.Sort(pods, priority, scatter)
	sort.SliceStable(pods, func(i, j int) bool { return preparingUpdate(pods[i]) && !preparingUpdate(pods[j]) })
}

// inService reports whether the pod's lifecycle state lets it serve:
// Normal, or no state (a pod from before the label).
func inService(p *corev1.Pod) bool {
	s := p.Labels[wellknown.LabelLifecycleState]
	return s == "" || s == string(wellknown.LifecycleStateNormal)
}
