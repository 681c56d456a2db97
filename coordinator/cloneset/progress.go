package cloneset

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// setProgressing sets st's Progressing condition as OpenKruise does, for a
// CloneSet with spec.progressDeadlineSeconds (and removes it without, or
// with 2147483647, which OpenKruise reads as no deadline):
// True CloneSetAvailable when there are exactly replicas pods, every one
// updated and available; True CloneSetPaused while the rollout is paused;
// True ProgressPartitionAvailable when a partition holds pods back and the
// pods it lets through are updated and available; False ProgressDeadlineExceeded once the rollout
// has been CloneSetUpdated for longer than the deadline; else True
// CloneSetUpdated. The condition's times move only when its status or
// reason does, so the deadline counts from the start of the rollout. It
// returns when to look again for the deadline (0: no need).
func setProgressing(cs *v1beta1.CloneSet, st *v1beta1.CloneSetStatus, now time.Time) time.Duration {
	if cs.Spec.ProgressDeadlineSeconds == nil || *cs.Spec.ProgressDeadlineSeconds == math.MaxInt32 {
		removeCondition(st, v1beta1.CloneSetConditionTypeProgressing)
		return 0
	}
	deadline := time.Duration(*cs.Spec.ProgressDeadlineSeconds) * time.Second
	replicas := ptr.Deref(cs.Spec.Replicas, 1)
	ru := cs.Spec.UpdateStrategy.RollingUpdate
	cur := condition(st, v1beta1.CloneSetConditionTypeProgressing)
	status, reason, message := corev1.ConditionTrue, v1beta1.CloneSetProgressUpdated, "CloneSet is progressing"
	switch {
	case st.UpdateRevision == st.CurrentRevision && st.Replicas == replicas &&
		st.UpdatedAvailableReplicas >= replicas && st.AvailableReplicas >= replicas:
		reason, message = v1beta1.CloneSetAvailable, "CloneSet is available"
	case ru != nil && ru.Paused:
		reason, message = v1beta1.CloneSetProgressPaused, "CloneSet is paused"
	case st.ExpectedUpdatedReplicas < replicas && st.UpdatedAvailableReplicas >= st.ExpectedUpdatedReplicas:
		reason, message = v1beta1.CloneSetProgressPartitionAvailable, "CloneSet has been paused due to partition ready"
	case cur != nil && cur.Reason == string(v1beta1.CloneSetProgressDeadlineExceeded):
		return 0 // stays exceeded until the rollout gets somewhere
	case cur != nil && cur.Reason == string(v1beta1.CloneSetProgressUpdated) && !now.Before(cur.LastUpdateTime.Add(deadline)):
		status, reason = corev1.ConditionFalse, v1beta1.CloneSetProgressDeadlineExceeded
		message = fmt.Sprintf("CloneSet revision %s has timed out progressing", st.UpdateRevision)
	}
	if cur == nil || cur.Status != status || cur.Reason != string(reason) {
		c := v1beta1.CloneSetCondition{
			Type: v1beta1.CloneSetConditionTypeProgressing, Status: status, Reason: string(reason), Message: message,
			LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
		}
		if cur != nil && cur.Status == status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		removeCondition(st, v1beta1.CloneSetConditionTypeProgressing)
		st.Conditions = append(st.Conditions, c)
		cur = &st.Conditions[len(st.Conditions)-1]
	}
	if cur.Reason != string(v1beta1.CloneSetProgressUpdated) {
		return 0
	}
	return max(cur.LastUpdateTime.Add(deadline).Sub(now), 0) + time.Second
}

// condition returns st's condition of type t, or nil.
func condition(st *v1beta1.CloneSetStatus, t v1beta1.CloneSetConditionType) *v1beta1.CloneSetCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// removeCondition drops st's condition of type t.
func removeCondition(st *v1beta1.CloneSetStatus, t v1beta1.CloneSetConditionType) {
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
