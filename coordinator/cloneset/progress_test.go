package cloneset

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestSetProgressing(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	withDeadline := func(mutate func(*v1beta1.CloneSet)) *v1beta1.CloneSet {
		return cloneSet(4, func(cs *v1beta1.CloneSet) {
			cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
			if mutate != nil {
				mutate(cs)
			}
		})
	}
	rolling := v1beta1.CloneSetStatus{Replicas: 4, AvailableReplicas: 4, UpdatedReplicas: 1, UpdatedAvailableReplicas: 1,
		ExpectedUpdatedReplicas: 4, UpdateRevision: "web-2", CurrentRevision: "web-1"}
	done := v1beta1.CloneSetStatus{Replicas: 4, AvailableReplicas: 4, UpdatedReplicas: 4, UpdatedAvailableReplicas: 4,
		ExpectedUpdatedReplicas: 4, UpdateRevision: "web-2", CurrentRevision: "web-2"}
	partitioned := rolling
	partitioned.ExpectedUpdatedReplicas = 1
	updatedSince := func(at time.Time) []v1beta1.CloneSetCondition {
		return []v1beta1.CloneSetCondition{{Type: v1beta1.CloneSetConditionTypeProgressing, Status: corev1.ConditionTrue,
			Reason: string(v1beta1.CloneSetProgressUpdated), LastUpdateTime: metav1.NewTime(at), LastTransitionTime: metav1.NewTime(at)}}
	}
	for _, tc := range []struct {
		name       string
		cs         *v1beta1.CloneSet
		st         v1beta1.CloneSetStatus
		conds      []v1beta1.CloneSetCondition
		now        time.Time
		wantStatus corev1.ConditionStatus
		wantReason v1beta1.CloneSetConditionReason
		wantAfter  time.Duration
	}{
		{"a rollout starts", withDeadline(nil), rolling, nil, t0, corev1.ConditionTrue, v1beta1.CloneSetProgressUpdated, 61 * time.Second},
		{"within the deadline", withDeadline(nil), rolling, updatedSince(t0), t0.Add(30 * time.Second), corev1.ConditionTrue, v1beta1.CloneSetProgressUpdated, 31 * time.Second},
		{"past the deadline", withDeadline(nil), rolling, updatedSince(t0), t0.Add(time.Minute), corev1.ConditionFalse, v1beta1.CloneSetProgressDeadlineExceeded, 0},
		{"every pod updated and available", withDeadline(nil), done, updatedSince(t0), t0.Add(time.Hour), corev1.ConditionTrue, v1beta1.CloneSetAvailable, 0},
		{"paused", withDeadline(func(cs *v1beta1.CloneSet) { cs.Spec.UpdateStrategy.RollingUpdate.Paused = true }), rolling, nil, t0,
			corev1.ConditionTrue, v1beta1.CloneSetProgressPaused, 0},
		{"partition reached", withDeadline(nil), partitioned, updatedSince(t0), t0.Add(time.Hour), corev1.ConditionTrue, v1beta1.CloneSetProgressPartitionAvailable, 0},
		{"a pod more than replicas (one leaving) is not available yet", withDeadline(nil),
			func() v1beta1.CloneSetStatus { s := done; s.Replicas = 5; return s }(), updatedSince(t0), t0.Add(10 * time.Second),
			corev1.ConditionTrue, v1beta1.CloneSetProgressUpdated, 51 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			st.Conditions = tc.conds
			after := setProgressing(tc.cs, &st, tc.now)
			c := condition(&st, v1beta1.CloneSetConditionTypeProgressing)
			require.NotNil(t, c)
			require.Equal(t, tc.wantStatus, c.Status)
			require.Equal(t, string(tc.wantReason), c.Reason)
			require.Equal(t, tc.wantAfter, after)
		})
	}

	t.Run("no deadline, no condition", func(t *testing.T) {
		for _, cs := range []*v1beta1.CloneSet{cloneSet(4, nil), withDeadline(func(cs *v1beta1.CloneSet) { cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](math.MaxInt32) })} {
			st := rolling
			st.Conditions = updatedSince(t0)
			require.Zero(t, setProgressing(cs, &st, t0))
			require.Nil(t, condition(&st, v1beta1.CloneSetConditionTypeProgressing))
		}
	})
	t.Run("the deadline counts from the rollout's start, not each pass", func(t *testing.T) {
		st := rolling
		st.Conditions = updatedSince(t0)
		setProgressing(withDeadline(nil), &st, t0.Add(10*time.Second))
		require.Equal(t, t0, condition(&st, v1beta1.CloneSetConditionTypeProgressing).LastUpdateTime.Time)
	})
	t.Run("exceeded stays until the rollout gets somewhere", func(t *testing.T) {
		st := rolling
		st.Conditions = updatedSince(t0)
		setProgressing(withDeadline(nil), &st, t0.Add(time.Minute))
		setProgressing(withDeadline(nil), &st, t0.Add(2*time.Minute))
		c := condition(&st, v1beta1.CloneSetConditionTypeProgressing)
		require.Equal(t, string(v1beta1.CloneSetProgressDeadlineExceeded), c.Reason)
		require.Equal(t, "CloneSet revision web-2 has timed out progressing", c.Message)
		st.UpdateRevision, st.CurrentRevision, st.UpdatedReplicas, st.UpdatedAvailableReplicas = "web-2", "web-2", 4, 4
		setProgressing(withDeadline(nil), &st, t0.Add(3*time.Minute))
		require.Equal(t, string(v1beta1.CloneSetAvailable), condition(&st, v1beta1.CloneSetConditionTypeProgressing).Reason)
	})
}
