// Package podstatus reads and sets the pod conditions the workload
// controllers own (KruisePodReady, InPlaceUpdateReady), on pod copies the
// caller then writes to the status subresource.
package podstatus

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition returns the pod's condition of type t, or nil.
func Condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// SetCondition sets the pod's condition of type t, reporting whether it
// changed. The transition time moves only when the status does.
func SetCondition(pod *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) bool {
	if c := Condition(pod, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message = status, reason, message
		return true
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: t, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(now),
	})
	return true
}

// ContainerReady reports whether the pod's container name runs and is
// ready.
func ContainerReady(pod *corev1.Pod, name string) bool {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s.Ready && s.State.Running != nil
		}
	}
	return false
}

// ReadySince is when the pod became ready, nil if it is not. A pod whose
// readiness gate's condition is False (an in-place update that just
// started) is not ready, even before the kubelet turns Ready False.
func ReadySince(p *corev1.Pod) *time.Time {
	for _, g := range p.Spec.ReadinessGates {
		if c := Condition(p, g.ConditionType); c != nil && c.Status == corev1.ConditionFalse {
			return nil
		}
	}
	if c := Condition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		t := c.LastTransitionTime.Time
		return &t
	}
	return nil
}

// Available reports whether the pod has been ready for minReady at now.
func Available(p *corev1.Pod, minReady time.Duration, now time.Time) bool {
	since := ReadySince(p)
	return since != nil && (minReady == 0 || !since.Add(minReady).After(now))
}
