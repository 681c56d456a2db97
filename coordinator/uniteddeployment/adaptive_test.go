package uniteddeployment

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// adaptiveSubsets names subsets s0, s1, ... with the given minimums and
// maximums (-1: unset).
func adaptiveSubsets(mins, maxs []int) []v1alpha1.Subset {
	out := make([]v1alpha1.Subset, len(mins))
	for i := range mins {
		out[i].Name = fmt.Sprintf("s%d", i)
		if mins[i] >= 0 {
			out[i].MinReplicas = new(intstr.FromInt32(int32(mins[i])))
		}
		if maxs[i] >= 0 {
			out[i].MaxReplicas = new(intstr.FromInt32(int32(maxs[i])))
		}
	}
	return out
}

func allocList(subsets []v1alpha1.Subset, m map[string]int32) []int32 {
	out := make([]int32, len(subsets))
	for i, s := range subsets {
		out[i] = m[s.Name]
	}
	return out
}

func TestAllocateAdaptive(t *testing.T) {
	for _, tc := range []struct {
		name          string
		total         int32
		mins, maxs    []int
		ready         []int32
		unschedulable []bool
		want          []int32
	}{
		{name: "unschedulable subset keeps its ready pods, the rest moves on", total: 10, mins: []int{3, -1}, maxs: []int{5, -1},
			ready: []int32{3, 5}, unschedulable: []bool{true, false}, want: []int32{3, 7}},
		{name: "an unschedulable subset keeps its minReplicas", total: 3, mins: []int{1, -1}, maxs: []int{2, -1},
			ready: []int32{0, 3}, unschedulable: []bool{true, false}, want: []int32{1, 2}},
		{name: "without minReplicas it keeps nothing", total: 3, mins: []int{-1, -1}, maxs: []int{2, -1},
			ready: []int32{0, 3}, unschedulable: []bool{true, false}, want: []int32{0, 3}},
		{name: "ready pods are pinned, capped by maxReplicas", total: 4, mins: []int{-1, -1, -1, -1}, maxs: []int{2, -1, -1, -1},
			ready: []int32{2, 0, 0, 0}, unschedulable: []bool{false, true, false, false}, want: []int32{2, 0, 2, 0}},
		{name: "scale-in trims the last subsets", total: 3, mins: []int{-1, -1, -1}, maxs: []int{2, 2, -1},
			ready: []int32{2, 2, 2}, unschedulable: []bool{false, false, false}, want: []int32{2, 1, 0}},
		{name: "pods never ready are not pinned", total: 4, mins: []int{-1, -1, -1}, maxs: []int{2, 2, -1},
			ready: []int32{2, 0, 2}, unschedulable: []bool{false, false, false}, want: []int32{2, 0, 2}},
		{name: "scale-out fills in spec order", total: 5, mins: []int{-1, -1, -1}, maxs: []int{2, 2, -1},
			ready: []int32{2, 1, 0}, unschedulable: []bool{false, false, false}, want: []int32{2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subsets := adaptiveSubsets(tc.mins, tc.maxs)
			states := map[string]*subsetState{}
			for i, s := range subsets {
				states[s.Name] = &subsetState{exists: true, ready: tc.ready[i], unschedulable: tc.unschedulable[i]}
			}
			got, err := allocateAdaptive(tc.total, subsets, states)
			require.NoError(t, err)
			require.Equal(t, tc.want, allocList(subsets, got))
		})
	}
}

func TestAllocateReserved(t *testing.T) {
	// reserved -1: the subset was unschedulable and has no reserved pods
	// now (it just recovered).
	for _, tc := range []struct {
		name               string
		total              int32
		mins               []int
		replicas, reserved []int32
		waiting            []bool
		want               []int32
	}{
		{name: "first subset reserved: temporary pods in the next", total: 2, mins: []int{-1, -1, -1},
			replicas: []int32{2, 0, 0}, reserved: []int32{2, 0, 0}, want: []int32{2, 2, 0}},
		{name: "two subsets reserved", total: 2, mins: []int{-1, -1, -1},
			replicas: []int32{2, 2, 0}, reserved: []int32{2, 2, 0}, want: []int32{2, 2, 2}},
		{name: "scale out while reserved", total: 4, mins: []int{-1, -1, -1},
			replicas: []int32{2, 2, 2}, reserved: []int32{2, 2, 0}, want: []int32{2, 2, 4}},
		{name: "reserved pods ready: temporary pods go", total: 2, mins: []int{-1, -1, -1},
			replicas: []int32{2, 2, 1}, reserved: []int32{0, 1, 0}, want: []int32{2, 0, 0}},
		{name: "recovered subset grows", total: 4, mins: []int{-1, -1, -1},
			replicas: []int32{2, 2, 4}, reserved: []int32{-1, 2, 0}, want: []int32{4, 2, 2}},
		{name: "minReplicas first", total: 2, mins: []int{1, 1, -1},
			replicas: []int32{0, 0, 0}, reserved: []int32{0, 0, 0}, want: []int32{1, 1, 0}},
		{name: "minReplicas reserved", total: 2, mins: []int{1, 1, -1},
			replicas: []int32{1, 1, 0}, reserved: []int32{1, 1, 0}, want: []int32{1, 1, 2}},
		{name: "minReplicas, first recovered", total: 2, mins: []int{1, 1, -1},
			replicas: []int32{1, 1, 2}, reserved: []int32{-1, 1, 0}, want: []int32{2, 1, 1}},
		{name: "minReplicas, all recovered", total: 2, mins: []int{1, 1, -1},
			replicas: []int32{2, 1, 0}, reserved: []int32{0, -1, 0}, want: []int32{1, 1, 0}},
		{name: "the first subset timed out, the second is waiting: it does not grow", total: 2, mins: []int{1, 1, -1},
			replicas: []int32{1, 1, 0}, reserved: []int32{1, 0, 0}, waiting: []bool{false, true, false}, want: []int32{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxs := make([]int, len(tc.mins))
			for i := range maxs {
				maxs[i] = -1
			}
			subsets := adaptiveSubsets(tc.mins, maxs)
			states := map[string]*subsetState{}
			for i, s := range subsets {
				st := &subsetState{exists: true, replicas: tc.replicas[i], waiting: tc.waiting != nil && tc.waiting[i]}
				switch r := tc.reserved[i]; {
				case r < 0:
					st.wasUnschedulable = true
				case r > 0:
					st.reserved, st.unschedulable, st.wasUnschedulable = r, true, true
				}
				states[s.Name] = st
			}
			got, err := allocateReserved(tc.total, subsets, states)
			require.NoError(t, err)
			require.Equal(t, tc.want, allocList(subsets, got))
		})
	}
}

var t0 = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)

// pendingPod is an unscheduled pod created at created; unschedulable
// adds the scheduler's PodScheduled=False condition.
func pendingPod(name string, created time.Time, unschedulable bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if unschedulable {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	}
	return p
}

// readyPod is a running pod, ready since readySince.
func readyPod(name string, readySince time.Time, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readySince)}}}}
}

func TestObserveDefault(t *testing.T) {
	a := adaptiveSettings{on: true, critical: 10 * time.Second, last: 30 * time.Second}
	ss := &v1alpha1.UnitedDeploymentSubsetStatus{Name: "s0"}

	// A pod pending for 3 s: look again in 7 s.
	s := &subsetState{exists: true, pods: []*corev1.Pod{pendingPod("p", t0, true)}}
	var requeue soonest
	observeDefault(ss, s, a, t0.Add(3*time.Second), &requeue)
	require.False(t, s.unschedulable)
	require.Equal(t, 7*time.Second, time.Duration(requeue))
	require.Nil(t, schedulable(ss))

	// Pending for 11 s: the subset is unschedulable for 30 s.
	requeue = 0
	observeDefault(ss, s, a, t0.Add(11*time.Second), &requeue)
	require.True(t, s.unschedulable)
	c := schedulable(ss)
	require.Equal(t, corev1.ConditionFalse, c.Status)
	require.Equal(t, t0.Add(11*time.Second), c.LastTransitionTime.Time)
	require.Equal(t, 30*time.Second, time.Duration(requeue))

	// The pod went; 20 s later it is still unschedulable (10 s left),
	// and the window did not move.
	requeue = 0
	s = &subsetState{exists: true}
	observeDefault(ss, s, a, t0.Add(31*time.Second), &requeue)
	require.True(t, s.unschedulable)
	require.Equal(t, 10*time.Second, time.Duration(requeue))
	require.Equal(t, t0.Add(11*time.Second), schedulable(ss).LastTransitionTime.Time)

	// After the window it is tried again.
	requeue = 0
	s = &subsetState{exists: true}
	observeDefault(ss, s, a, t0.Add(42*time.Second), &requeue)
	require.False(t, s.unschedulable)
	require.Equal(t, corev1.ConditionTrue, schedulable(ss).Status)

	// A pod the scheduler has not looked at yet: look again in a second.
	_, after := pendingTimeout(pendingPod("q", t0, false), a.critical, t0.Add(time.Minute))
	require.Equal(t, time.Second, after)
}

func TestObserveReserve(t *testing.T) {
	a := adaptiveSettings{on: true, reserve: true, critical: 10 * time.Second, last: 30 * time.Second}
	reserved := map[string]string{wellknown.LabelUnitedDeploymentReservedPod: "true"}
	for _, tc := range []struct {
		name          string
		wasFalse      bool
		pod, more     *corev1.Pod
		wantReserved  int32
		wantLabel     map[string]bool
		wantRequeue   time.Duration
		unschedulable bool
	}{
		{name: "pending 1 s: not yet, labelled false", pod: pendingPod("p", t0.Add(-time.Second), true),
			wantLabel: map[string]bool{"p": false}, wantRequeue: 9 * time.Second},
		{name: "pending 13 s: reserved", pod: pendingPod("p", t0.Add(-13*time.Second), true),
			wantReserved: 1, wantLabel: map[string]bool{"p": true}, wantRequeue: 30 * time.Second, unschedulable: true},
		{name: "reserved, ready 10 s: still reserved", pod: readyPod("p", t0.Add(-10*time.Second), reserved),
			wantReserved: 1, wantLabel: map[string]bool{}, wantRequeue: 20 * time.Second, unschedulable: true},
		{name: "reserved, ready 35 s: released", pod: readyPod("p", t0.Add(-35*time.Second), reserved),
			wantLabel: map[string]bool{"p": false}},
		{name: "new pod of an unschedulable subset: reserved at once", wasFalse: true, pod: readyPod("p", t0, nil),
			wantReserved: 1, wantLabel: map[string]bool{"p": true}, wantRequeue: 30 * time.Second, unschedulable: true},
		{name: "one pod timed out: the subset's other unschedulable pods are reserved with it",
			pod: pendingPod("p", t0.Add(-13*time.Second), true), more: pendingPod("q", t0.Add(-5*time.Second), true),
			wantReserved: 2, wantLabel: map[string]bool{"p": true, "q": true}, wantRequeue: 30 * time.Second, unschedulable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := &v1alpha1.UnitedDeploymentSubsetStatus{Name: "s0"}
			if tc.wasFalse {
				setSchedulable(ss, corev1.ConditionFalse, "Reschedule", "", t0.Add(-time.Minute))
			}
			s := &subsetState{exists: true, pods: []*corev1.Pod{tc.pod}}
			if tc.more != nil {
				s.pods = append(s.pods, tc.more)
			}
			var requeue soonest
			label := observeReserve(ss, s, a, t0, &requeue)
			require.Equal(t, tc.wantReserved, s.reserved)
			require.Equal(t, tc.wantLabel, label)
			require.Equal(t, tc.wantRequeue, time.Duration(requeue))
			require.Equal(t, tc.unschedulable, s.unschedulable)
			want := corev1.ConditionTrue
			if tc.unschedulable {
				want = corev1.ConditionFalse
			}
			require.Equal(t, want, schedulable(ss).Status)
		})
	}
}
