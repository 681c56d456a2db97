package cloneset

import (
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	return readySince(p) != nil
}

// readySince is when the pod became ready, nil if it is not. A pod whose
// readiness gate's condition is False (an in-place update that just
// started) is not ready, even before the kubelet turns Ready False.
func readySince(p *corev1.Pod) *time.Time {
	for _, g := range p.Spec.ReadinessGates {
		if c := podstatus.Condition(p, g.ConditionType); c != nil && c.Status == corev1.ConditionFalse {
			return nil
		}
	}
	if c := podstatus.Condition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		t := c.LastTransitionTime.Time
		return &t
	}
	return nil
}

// podAvailable reports whether the pod is in service and has been ready
// for minReady at now. Only a Normal pod (or one from before the lifecycle
// label) is in service: one a hook holds, or one being updated in place,
// is not.
func podAvailable(p *corev1.Pod, minReady time.Duration, now time.Time) bool {
	if !inService(p) {
		return false
	}
	since := readySince(p)
	return since != nil && (minReady == 0 || !since.Add(minReady).After(now))
}

// deletionCost is the pod's controller.kubernetes.io/pod-deletion-cost (0
// when absent or not a number).
func deletionCost(p *corev1.Pod) int64 {
	n, _ := strconv.ParseInt(p.Annotations[wellknown.AnnotationPodDeletionCost], 10, 32)
	return n
}

// phaseRank orders phases for scale-in: Pending, Unknown, then Running.
func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	default:
		return 3
	}
}

// restarts sums the pod's container restarts.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// sortForDeletion orders pods the way a scale-in picks them, first to be
// deleted first: pods already PreparingDelete (a hook holds them on their
// way out); unscheduled before scheduled; Pending, Unknown, then
// Running; not ready before ready; lower pod-deletion-cost first; ready
// for less time first; more restarts first; newer first.
func sortForDeletion(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if pa, pb := preparingDelete(a), preparingDelete(b); pa != pb {
			return pa
		}
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if ra, rb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); ra != rb {
			return ra < rb
		}
		if podReady(a) != podReady(b) {
			return !podReady(a)
		}
		if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
			return ca < cb
		}
		if sa, sb := readySince(a), readySince(b); sa != nil && sb != nil && !sa.Equal(*sb) {
			return sa.After(*sb)
		}
		if ra, rb := restarts(a), restarts(b); ra != rb {
			return ra > rb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})
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

// sortForUpdate orders old pods the way an update picks them: those a
// hook holds in PreparingUpdate first (picked before), then the scale-in
// order (not ready and cheap pods first).
func sortForUpdate(pods []*corev1.Pod) {
	sortForDeletion(pods)
	sort.SliceStable(pods, func(i, j int) bool { return preparingUpdate(pods[i]) && !preparingUpdate(pods[j]) })
}

// inService reports whether the pod's lifecycle state lets it serve:
// Normal, or no state (a pod from before the label).
func inService(p *corev1.Pod) bool {
	s := p.Labels[wellknown.LabelLifecycleState]
	return s == "" || s == string(wellknown.LifecycleStateNormal)
}
