package statefulset

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

var now = time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)

// testSet is a set "web" of n replicas with policy.
func testSet(n int32, policy appsv1.PodManagementPolicyType) *v1beta1.StatefulSet {
	return &v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid"},
		Spec: v1beta1.StatefulSetSpec{
			Replicas: ptr.To(n), PodManagementPolicy: policy,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			UpdateStrategy: v1beta1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
		},
	}
}

// pod is ordinal ord of "web" at revision rev; ready pods have been ready
// for a minute.
func pod(ord int, rev string, ready bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("web-%d", ord), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", ord)),
			Labels: map[string]string{"app": "web", wellknown.LabelControllerRevisionHash: rev},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
	}
	return p
}

// names are the pods' names.
func names[T any](items []T, name func(T) string) []string {
	out := []string{}
	for _, i := range items {
		out = append(out, name(i))
	}
	return out
}

func deleted(p *plan) []string {
	return names(p.deletes, func(d deletion) string { return d.pod.Name })
}
func created(p *plan) []string {
	return names(p.creates, func(c create) string { return fmt.Sprintf("web-%d@%s", c.ordinal, c.revision) })
}
func updated(p *plan) []string {
	return names(p.updates, func(u inPlaceUpdate) string { return u.pod.Name })
}

func TestWantedOrdinals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reserve []intstr.IntOrString
		start   int32
		want    []int
	}{
		{"plain", nil, 0, []int{0, 1, 2, 3}},
		{"reserved ints", []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(3)}, 0, []int{0, 2, 4, 5}},
		// OpenKruise's example: replicas 4, reserve 1 and 3, start 2.
		{"start and reserved", []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(3)}, 2, []int{2, 4, 5, 6}},
		{"range", []intstr.IntOrString{intstr.FromInt32(0), intstr.FromString("2-5")}, 0, []int{1, 6, 7, 8}},
		{"bad range skipped", []intstr.IntOrString{intstr.FromString("5-2"), intstr.FromString("x")}, 0, []int{0, 1, 2, 3}},
		{"huge range", []intstr.IntOrString{intstr.FromString("1-2147483646")}, 0, []int{0, 2147483647, 2147483648, 2147483649}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := testSet(4, "")
			set.Spec.ReserveOrdinals = tc.reserve
			if tc.start > 0 {
				set.Spec.Ordinals = &v1beta1.StatefulSetOrdinals{Start: tc.start}
			}
			require.Equal(t, tc.want, wantedOrdinals(set))
		})
	}
}

func TestOrdinalOf(t *testing.T) {
	for name, want := range map[string]int{"web-0": 0, "web-12": 12, "web-01": -1, "web-x": -1, "webx-1": -1, "web--1": -1, "web-a-1": -1} {
		require.Equal(t, want, ordinalOf("web", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}), name)
	}
}

func TestPlanScaling(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func() *v1beta1.StatefulSet
		pods    []*corev1.Pod
		creates []string
		deletes []string
	}{
		{"OrderedReady creates the first missing pod only", func() *v1beta1.StatefulSet { return testSet(3, "") },
			[]*corev1.Pod{pod(0, "r1", true)}, []string{"web-1@r1"}, []string{}},
		{"OrderedReady waits for an unready predecessor", func() *v1beta1.StatefulSet { return testSet(3, "") },
			[]*corev1.Pod{pod(0, "r1", false)}, []string{}, []string{}},
		{"Parallel creates all missing pods", func() *v1beta1.StatefulSet { return testSet(3, appsv1.ParallelPodManagement) },
			[]*corev1.Pod{pod(0, "r1", false)}, []string{"web-1@r1", "web-2@r1"}, []string{}},
		{"scaleStrategy.maxUnavailable bounds Parallel creates", func() *v1beta1.StatefulSet {
			s := testSet(5, appsv1.ParallelPodManagement)
			s.Spec.ScaleStrategy = &v1beta1.StatefulSetScaleStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
			return s
		}, []*corev1.Pod{pod(0, "r1", false)}, []string{"web-1@r1"}, []string{}},
		{"reserved ordinals are skipped and their pods condemned", func() *v1beta1.StatefulSet {
			s := testSet(3, appsv1.ParallelPodManagement)
			s.Spec.ReserveOrdinals = []intstr.IntOrString{intstr.FromInt32(1)}
			return s
		}, []*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true)}, []string{"web-2@r1", "web-3@r1"}, []string{"web-1"}},
		{"OrderedReady scales down from the highest ordinal, one at a time", func() *v1beta1.StatefulSet { return testSet(1, "") },
			[]*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true), pod(2, "r1", true)}, []string{}, []string{"web-2"}},
		{"OrderedReady halts scale-down at an unhealthy pod while a lower one is unhealthy", func() *v1beta1.StatefulSet { return testSet(1, "") },
			[]*corev1.Pod{pod(0, "r1", true), pod(1, "r1", false), pod(2, "r1", false)}, []string{}, []string{}},
		{"OrderedReady deletes the first unhealthy pod itself", func() *v1beta1.StatefulSet { return testSet(1, "") },
			[]*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true), pod(2, "r1", false)}, []string{}, []string{"web-2"}},
		{"Parallel scales down all at once", func() *v1beta1.StatefulSet { return testSet(1, appsv1.ParallelPodManagement) },
			[]*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true), pod(2, "r1", false)}, []string{}, []string{"web-2", "web-1"}},
		{"a failed pod is deleted to be recreated", func() *v1beta1.StatefulSet { return testSet(2, "") },
			func() []*corev1.Pod {
				p := pod(0, "r1", false)
				p.Status.Phase = corev1.PodFailed
				return []*corev1.Pod{p, pod(1, "r1", true)}
			}(),
			[]string{}, []string{"web-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(input{set: tc.set(), pods: tc.pods, current: "r1", update: "r1", now: now, updatesSeen: true})
			require.NoError(t, err)
			require.Equal(t, tc.creates, created(p))
			require.Equal(t, tc.deletes, deleted(p))
		})
	}
}

func TestPlanRollingUpdate(t *testing.T) {
	inPlace := func(*corev1.Pod) (*inplace.Spec, error) { return &inplace.Spec{}, nil }
	notInPlace := func(*corev1.Pod) (*inplace.Spec, error) { return nil, errors.New("resources changed") }
	old3 := func() []*corev1.Pod { return []*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true), pod(2, "r1", true)} }
	for _, tc := range []struct {
		name    string
		change  func(*v1beta1.StatefulSet)
		pods    []*corev1.Pod
		inPlace func(*corev1.Pod) (*inplace.Spec, error)
		deletes []string
		updates []string
		creates []string
		failed  bool
	}{
		{name: "recreates the highest ordinal first", pods: old3(), deletes: []string{"web-2"}},
		{name: "waits for the updated pod to be ready", pods: []*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true), pod(2, "r2", false)}},
		{name: "goes on once it is", pods: []*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true), pod(2, "r2", true)}, deletes: []string{"web-1"}},
		{name: "a recreated pod comes back at the update revision", pods: []*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true)}, creates: []string{"web-2@r2"}},
		{name: "partition keeps the lowest ordinals", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
		}, pods: []*corev1.Pod{pod(0, "r1", true), pod(1, "r1", true), pod(2, "r2", true)}},
		{name: "a missing pod below the partition comes back at the current revision", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
		}, pods: []*corev1.Pod{pod(0, "r1", true), pod(2, "r2", true)}, creates: []string{"web-1@r1"}},
		{name: "Parallel with maxUnavailable 2 updates two at once", change: func(s *v1beta1.StatefulSet) {
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
		}, pods: old3(), deletes: []string{"web-2", "web-1"}},
		{name: "a spent scale budget stops creates, not the update of unhealthy pods", change: func(s *v1beta1.StatefulSet) {
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			s.Spec.ScaleStrategy = &v1beta1.StatefulSetScaleStrategy{MaxUnavailable: ptr.To(intstr.FromString("100%"))}
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromString("100%"))}
		}, pods: []*corev1.Pod{pod(0, "r1", false), pod(1, "r1", false), pod(2, "r1", false)}, deletes: []string{"web-2", "web-1", "web-0"}},
		{name: "OrderedReady ignores maxUnavailable", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
		}, pods: old3(), deletes: []string{"web-2"}},
		{name: "maxUnavailable 50% of 3 rounds down to 1", change: func(s *v1beta1.StatefulSet) {
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromString("50%"))}
		}, pods: old3(), deletes: []string{"web-2"}},
		{name: "in place when possible", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{PodUpdatePolicy: v1beta1.InPlaceIfPossiblePodUpdateStrategyType}
		}, pods: old3(), inPlace: inPlace, updates: []string{"web-2"}},
		{name: "InPlaceIfPossible recreates what cannot be in place", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{PodUpdatePolicy: v1beta1.InPlaceIfPossiblePodUpdateStrategyType}
		}, pods: old3(), inPlace: notInPlace, deletes: []string{"web-2"}},
		{name: "InPlaceOnly stops with a condition", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{PodUpdatePolicy: v1beta1.InPlaceOnlyPodUpdateStrategyType}
		}, pods: old3(), inPlace: notInPlace, failed: true},
		{name: "a specified delete goes first and takes the one unavailable slot", pods: func() []*corev1.Pod {
			p := pod(1, "r1", true)
			p.Labels[wellknown.LabelSpecifiedDelete] = "true"
			return []*corev1.Pod{pod(0, "r1", true), p, pod(2, "r1", true)}
		}(), deletes: []string{"web-1"}},
		{name: "a specified delete waits for maxUnavailable", pods: func() []*corev1.Pod {
			p := pod(0, "r2", true)
			p.Labels[wellknown.LabelSpecifiedDelete] = "true"
			return []*corev1.Pod{p, pod(1, "r2", true), pod(2, "r2", false)}
		}()},
		{name: "an unavailable specified delete goes at once, paused or not", change: func(s *v1beta1.StatefulSet) {
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Paused: true}
		}, pods: func() []*corev1.Pod {
			p := pod(0, "r1", false)
			p.Labels[wellknown.LabelSpecifiedDelete] = "true"
			return []*corev1.Pod{p, pod(1, "r1", true), pod(2, "r1", true)}
		}(), deletes: []string{"web-0"}},
		{name: "paused", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Paused: true}
		}, pods: old3()},
		{name: "OnDelete", change: func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy = v1beta1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}, pods: old3()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := testSet(3, "")
			if tc.change != nil {
				tc.change(set)
			}
			p, err := newPlan(input{set: set, pods: tc.pods, current: "r1", update: "r2", now: now, updatesSeen: true, inPlace: tc.inPlace})
			require.NoError(t, err)
			require.Equal(t, append([]string{}, tc.deletes...), deleted(p), "deletes")
			require.Equal(t, append([]string{}, tc.updates...), updated(p), "in-place updates")
			require.Equal(t, append([]string{}, tc.creates...), created(p), "creates")
			require.Equal(t, tc.failed, p.failedUpdate != "", p.failedUpdate)
		})
	}
}

func TestPlanStatus(t *testing.T) {
	set := testSet(3, "")
	set.Generation = 4
	set.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{MinReadySeconds: ptr.To[int32](120)}
	p, err := newPlan(input{set: set, pods: []*corev1.Pod{pod(0, "r1", true), pod(1, "r1", false), pod(2, "r2", true)},
		current: "r1", update: "r2", now: now, updatesSeen: true})
	require.NoError(t, err)
	require.Equal(t, v1beta1.StatefulSetStatus{
		ObservedGeneration: 4, Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 0, CurrentReplicas: 2, UpdatedReplicas: 1,
		UpdatedReadyReplicas: 1, CurrentRevision: "r1", UpdateRevision: "r2", LabelSelector: "app=web",
	}, p.status)
	require.Equal(t, time.Minute, p.requeueAfter, "web-0 becomes available after 120 s of readiness")

	all := []*corev1.Pod{pod(0, "r2", true), pod(1, "r2", true), pod(2, "r2", true)}
	set.Spec.UpdateStrategy.RollingUpdate = nil
	p, err = newPlan(input{set: set, pods: all, current: "r1", update: "r2", now: now, updatesSeen: true})
	require.NoError(t, err)
	require.Equal(t, "r2", p.status.CurrentRevision, "a finished rolling update makes the update revision current")
	require.Equal(t, int32(3), p.status.CurrentReplicas)
}

func TestClaimOwners(t *testing.T) {
	other := metav1.OwnerReference{Kind: "Other", UID: "other"}
	p := pod(3, "r1", true)
	for _, tc := range []struct {
		name                    string
		whenDeleted, whenScaled v1beta1.PersistentVolumeClaimRetentionPolicyType
		condemned               bool
		want                    []string
	}{
		{"retain both", "", "", false, []string{"other"}},
		{"whenDeleted Delete", v1beta1.DeletePersistentVolumeClaimRetentionPolicyType, "", false, []string{"other", "set-uid"}},
		{"whenScaled Delete, replica", v1beta1.DeletePersistentVolumeClaimRetentionPolicyType, v1beta1.DeletePersistentVolumeClaimRetentionPolicyType, false, []string{"other", "set-uid"}},
		{"whenScaled Delete, condemned: the pod alone", v1beta1.DeletePersistentVolumeClaimRetentionPolicyType, v1beta1.DeletePersistentVolumeClaimRetentionPolicyType, true, []string{"other", "uid-3"}},
		{"whenScaled Retain, condemned", v1beta1.DeletePersistentVolumeClaimRetentionPolicyType, "", true, []string{"other", "set-uid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := testSet(3, "")
			set.Spec.PersistentVolumeClaimRetentionPolicy = &v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: tc.whenDeleted, WhenScaled: tc.whenScaled}
			got := wantOwners([]metav1.OwnerReference{other, {UID: "set-uid"}, {UID: "uid-3"}}, set, p, tc.condemned)
			require.Equal(t, tc.want, names(got, func(r metav1.OwnerReference) string { return string(r.UID) }))
		})
	}
}
