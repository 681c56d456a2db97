// Package lifecycle is the lifecycle-hook state machine of CloneSet,
// Advanced StatefulSet and Advanced DaemonSet pods: the
// lifecycle.apps.kruise.io/state label and its timestamp, and when a hook
// (labels or finalizers another controller puts on the pod) holds a pod
// before it becomes Normal, before it is deleted, or around an in-place
// update. Controllers call these pure decisions and write the result.
//
//	created ──► PreparingNormal ──(scheduled; preNormal all hooked)──► Normal
//	Normal ──(delete; preDelete hooked)──► PreparingDelete ──(hook released)──► deleted
//	Normal ──(update; inPlaceUpdate hooked)──► PreparingUpdate ──(hook released)──► Updating
//	Normal ──(update; no inPlaceUpdate hook)──► Normal
//	Updating ──(update done)──► Updated ──(inPlaceUpdate all hooked again)──► Normal
package lifecycle

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// State returns the pod's lifecycle state ("" for a pod from before the
// label, which counts as Normal).
func State(pod *corev1.Pod) wellknown.LifecycleState {
	return wellknown.LifecycleState(pod.Labels[wellknown.LabelLifecycleState])
}

// SetState moves pod (a copy the caller owns) to state at now: the label
// and the RFC 3339 timestamp annotation.
func SetState(pod *corev1.Pod, state wellknown.LifecycleState, now time.Time) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Labels[wellknown.LabelLifecycleState] = string(state)
	pod.Annotations[wellknown.AnnotationLifecycleTimestamp] = now.UTC().Format(time.RFC3339)
}

// Hooked reports whether any of hook's labels (with their values) or
// finalizers is on the pod: the hook holds it.
func Hooked(hook *pub.LifecycleHook, pod *corev1.Pod) bool {
	if hook == nil {
		return false
	}
	for k, v := range hook.LabelsHandler {
		if got, ok := pod.Labels[k]; ok && got == v {
			return true
		}
	}
	for _, f := range hook.FinalizersHandler {
		if slices.Contains(pod.Finalizers, f) {
			return true
		}
	}
	return false
}

// AllHooked reports whether every label and finalizer of hook is on the
// pod (true for a hook that names none, or no hook).
func AllHooked(hook *pub.LifecycleHook, pod *corev1.Pod) bool {
	if hook == nil {
		return true
	}
	for k, v := range hook.LabelsHandler {
		if got, ok := pod.Labels[k]; !ok || got != v {
			return false
		}
	}
	for _, f := range hook.FinalizersHandler {
		if !slices.Contains(pod.Finalizers, f) {
			return false
		}
	}
	return true
}

// Initial is the state every new pod is created in, PreparingNormal (as
// OpenKruise does): it becomes Normal once it is scheduled and the
// preNormal hook, if any, is all hooked (MayBecomeNormal). Only Normal
// pods count as available.
func Initial() wellknown.LifecycleState {
	return wellknown.LifecycleStatePreparingNormal
}

// MayBecomeNormal reports whether a PreparingNormal pod moves to Normal:
// it is scheduled and the preNormal hook (if any) is all hooked.
func MayBecomeNormal(lc *pub.Lifecycle, pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	return lc == nil || AllHooked(lc.PreNormal, pod)
}

// Step is a decision about a pod the workload wants to delete or update.
type Step struct {
	// State is the state to move the pod to ("" to leave it).
	State wellknown.LifecycleState
	// Proceed is true when the workload may go on (delete the pod, or
	// update it) now.
	Proceed bool
	// MarkNotReady is true when the pod's KruisePodReady condition must be
	// False first (the hook's markPodNotReady).
	MarkNotReady bool
}

// BeforeDelete decides for a pod the workload wants to delete: a pod the
// preDelete hook holds goes to PreparingDelete and waits there until the
// hook lets go; any other is deleted at once.
func BeforeDelete(lc *pub.Lifecycle, pod *corev1.Pod) Step {
	var hook *pub.LifecycleHook
	if lc != nil {
		hook = lc.PreDelete
	}
	mark := hook != nil && hook.MarkPodNotReady
	switch {
	case State(pod) == wellknown.LifecycleStatePreparingDelete:
		return Step{Proceed: !Hooked(hook, pod), MarkNotReady: mark}
	case Hooked(hook, pod):
		return Step{State: wellknown.LifecycleStatePreparingDelete, MarkNotReady: mark}
	default:
		return Step{Proceed: true}
	}
}

// BeforeInPlaceUpdate decides for a pod the workload wants to update in
// place: a pod the inPlaceUpdate hook holds goes to PreparingUpdate and
// waits until the hook lets go; then (or at once) it goes to Updating.
// Without an inPlaceUpdate hook nobody waits on those states, and the pod
// stays Normal (one write less per updated pod).
func BeforeInPlaceUpdate(lc *pub.Lifecycle, pod *corev1.Pod) Step {
	var hook *pub.LifecycleHook
	if lc != nil {
		hook = lc.InPlaceUpdate
	}
	mark := hook != nil && hook.MarkPodNotReady
	switch {
	case hook == nil && State(pod) != wellknown.LifecycleStatePreparingUpdate:
		return Step{Proceed: true}
	case State(pod) == wellknown.LifecycleStatePreparingUpdate && Hooked(hook, pod):
		return Step{MarkNotReady: mark}
	case State(pod) != wellknown.LifecycleStatePreparingUpdate && Hooked(hook, pod):
		return Step{State: wellknown.LifecycleStatePreparingUpdate, MarkNotReady: mark}
	default:
		return Step{State: wellknown.LifecycleStateUpdating, Proceed: true, MarkNotReady: mark}
	}
}

// AfterInPlaceUpdate is the state of a pod whose in-place update is done:
// Updated until the inPlaceUpdate hook is all hooked again, then Normal.
func AfterInPlaceUpdate(lc *pub.Lifecycle, pod *corev1.Pod) wellknown.LifecycleState {
	if lc != nil && lc.InPlaceUpdate != nil && !AllHooked(lc.InPlaceUpdate, pod) {
		return wellknown.LifecycleStateUpdated
	}
	return wellknown.LifecycleStateNormal
}

// SetKruisePodReady sets the pod's KruisePodReady condition (on a copy the
// caller owns and writes to the status subresource), reporting whether it
// changed. The transition time moves only when the status does.
func SetKruisePodReady(pod *corev1.Pod, status corev1.ConditionStatus, reason, message string, now time.Time) bool {
	return podstatus.SetCondition(pod, wellknown.ConditionKruisePodReady, status, reason, message, now)
}
