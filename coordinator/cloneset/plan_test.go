package cloneset

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

const (
	oldRev = "web-old"
	newRev = "web-new"
)

func cloneSet(replicas int32, mutate func(*v1beta1.CloneSet)) *v1beta1.CloneSet {
	cs := &v1beta1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 2},
		Spec: v1beta1.CloneSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
				Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{
					PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType,
					MaxUnavailable:  ptr.To(intstr.FromString("20%")),
				},
			},
		},
	}
	if mutate != nil {
		mutate(cs)
	}
	return cs
}

// podOpt adjusts a test pod.
type podOpt func(*corev1.Pod)

func notReady(p *corev1.Pod) { p.Status.Conditions = nil }
func unscheduled(p *corev1.Pod) {
	p.Spec.NodeName = ""
	p.Status.Phase = corev1.PodPending
	notReady(p)
}
func cost(n string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{wellknown.AnnotationPodDeletionCost: n} }
}
func labelled(k string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = "true" } }

// pod is a running, ready pod of revision rev created age ago.
func pod(name, rev string, age time.Duration, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Labels: map[string]string{"app": "web", wellknown.LabelControllerRevisionHash: rev}},
		Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-age / 2))},
		}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func names(ds []deletion) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.pod.Name)
	}
	return out
}

func podNames(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// updateNames names the pods of updates, each of which must go to rev.
func updateNames(us []update, rev string) []string {
	var out []string
	for _, u := range us {
		if u.to != rev {
			return append(out, u.pod.Name+" to "+u.to)
		}
		out = append(out, u.pod.Name)
	}
	return out
}

func pods(n int, rev string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("%s-%d", rev, i), rev, time.Duration(10+i)*time.Minute))
	}
	return out
}

func TestPlanScale(t *testing.T) {
	t.Run("a new CloneSet creates its replicas", func(t *testing.T) {
		p := newPlan(cloneSet(3, nil), nil, newRev, newRev, now, planGates{}, nil)
		require.Equal(t, 3, p.createNew)
		require.Zero(t, p.createOld)
	})
	t.Run("scale in: unscheduled, not ready, lower deletion cost, newer first", func(t *testing.T) {
		ps := []*corev1.Pod{
			pod("ready-old", newRev, time.Hour),
			pod("ready-new", newRev, time.Minute),
			pod("costly", newRev, 2*time.Minute, cost("100")),
			pod("cheap", newRev, 3*time.Hour, cost("-5")),
			pod("not-ready", newRev, time.Hour, notReady),
			pod("unscheduled", newRev, time.Hour, unscheduled),
		}
		p := newPlan(cloneSet(2, nil), ps, newRev, newRev, now, planGates{}, nil)
		require.Equal(t, []string{"unscheduled", "not-ready", "cheap", "ready-new"}, names(p.deletes))
	})
	t.Run("scale in takes old revisions beyond partition first", func(t *testing.T) {
		ps := append(pods(2, oldRev), pods(3, newRev)...)
		p := newPlan(cloneSet(3, func(cs *v1beta1.CloneSet) {
			cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromInt32(1))
		}), ps, newRev, oldRev, now, planGates{}, nil)
		require.Len(t, p.deletes, 2)
		require.Equal(t, oldRev, p.deletes[0].pod.Labels[wellknown.LabelControllerRevisionHash], "one old pod is beyond partition 1")
		require.Equal(t, newRev, p.deletes[1].pod.Labels[wellknown.LabelControllerRevisionHash])
	})
	t.Run("scale up keeps partition old pods at the current revision", func(t *testing.T) {
		p := newPlan(cloneSet(5, func(cs *v1beta1.CloneSet) {
			cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromInt32(3))
		}), pods(1, oldRev), newRev, oldRev, now, planGates{}, nil)
		require.Equal(t, 2, p.createOld)
		require.Equal(t, 2, p.createNew)
	})
	t.Run("scaleStrategy.maxUnavailable bounds a scale-up", func(t *testing.T) {
		ps := []*corev1.Pod{pod("starting", newRev, time.Second, notReady)}
		p := newPlan(cloneSet(10, func(cs *v1beta1.CloneSet) {
			cs.Spec.ScaleStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(3))
		}), ps, newRev, newRev, now, planGates{}, nil)
		require.Equal(t, 2, p.createNew, "3 may be unavailable, one already is")
	})
	t.Run("specified delete: label and podsToDelete", func(t *testing.T) {
		ps := []*corev1.Pod{pod("a", newRev, time.Hour), pod("b", newRev, time.Hour, labelled(wellknown.LabelSpecifiedDelete)), pod("c", newRev, time.Hour)}
		p := newPlan(cloneSet(3, func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.PodsToDelete = []string{"c"} }), ps, newRev, newRev, now, planGates{}, nil)
		require.Equal(t, []string{"b"}, names(p.deletes), "maxUnavailable 20% of 3 is 1: one ready pod at a time")
		require.Zero(t, p.createNew, "replacements come with the next pass")
		next := newPlan(cloneSet(3, func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.PodsToDelete = []string{"c"} }), slices.Delete(ps, 1, 2), newRev, newRev, now, planGates{}, nil)
		require.Equal(t, 1, next.createNew, "the replacement comes before the next specified pod goes")
		require.Empty(t, next.deletes)
	})
}

// TestPlanSpecifiedDeleteWithSurge walks seed 000's three cases of
// maxUnavailable and maxSurge applied to specified deletes, with pod-a
// unavailable.
func TestPlanSpecifiedDeleteWithSurge(t *testing.T) {
	strategy := func(maxUnavailable int32) *v1beta1.CloneSet {
		return cloneSet(3, func(cs *v1beta1.CloneSet) {
			cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(maxUnavailable))
			cs.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
		})
	}
	state := func(specified string) []*corev1.Pod {
		ps := []*corev1.Pod{pod("pod-a", newRev, time.Hour, notReady), pod("pod-b", newRev, time.Hour), pod("pod-c", newRev, time.Hour)}
		for _, p := range ps {
			if p.Name == specified {
				p.Labels[wellknown.LabelSpecifiedDelete] = "true"
			}
		}
		return ps
	}
	t.Run("maxUnavailable 2, pod-b specified: deleted at once, then replaced", func(t *testing.T) {
		p := newPlan(strategy(2), state("pod-b"), newRev, newRev, now, planGates{}, nil)
		require.Equal(t, []string{"pod-b"}, names(p.deletes))
		require.Zero(t, p.createNew)
	})
	t.Run("maxUnavailable 1, pod-b specified: a new pod first, pod-b once it is available", func(t *testing.T) {
		ps := state("pod-b")
		p := newPlan(strategy(1), ps, newRev, newRev, now, planGates{}, nil)
		require.Empty(t, p.deletes)
		require.Equal(t, 1, p.createNew)
		starting := append(ps, pod("surge", newRev, time.Second, notReady))
		p = newPlan(strategy(1), starting, newRev, newRev, now, planGates{}, nil)
		require.Empty(t, p.deletes, "the surge pod is not available yet")
		require.Zero(t, p.createNew)
		ready := append(ps, pod("surge", newRev, time.Hour))
		p = newPlan(strategy(1), ready, newRev, newRev, now, planGates{}, nil)
		require.Equal(t, []string{"pod-b"}, names(p.deletes))
	})
	t.Run("maxUnavailable 1, pod-a (unavailable) specified: deleted at once", func(t *testing.T) {
		p := newPlan(strategy(1), state("pod-a"), newRev, newRev, now, planGates{}, nil)
		require.Equal(t, []string{"pod-a"}, names(p.deletes))
		require.Zero(t, p.createNew)
	})
}

func TestPlanRecreateUpdate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		replicas  int32
		pods      []*corev1.Pod
		mutate    func(*v1beta1.RollingUpdateCloneSetStrategy)
		deletes   int
		blocked   string
		expectedU int32
	}{
		{"partition 99% of 4 updates exactly one (seed 000, v1.2)", 4, pods(4, oldRev),
			func(r *v1beta1.RollingUpdateCloneSetStrategy) {
				r.Partition = ptr.To(intstr.FromString("99%"))
				r.MaxUnavailable = ptr.To(intstr.FromInt32(4))
			}, 1, "", 1},
		{"maxUnavailable 20% of 10 recreates two at a time", 10, pods(10, oldRev), nil, 2, "", 10},
		{"a pod already unavailable uses the budget", 5, append(pods(4, oldRev), pod("starting", newRev, time.Second, notReady)),
			func(r *v1beta1.RollingUpdateCloneSetStrategy) { r.MaxUnavailable = ptr.To(intstr.FromInt32(1)) }, 0, "", 5},
		{"paused", 4, pods(4, oldRev), func(r *v1beta1.RollingUpdateCloneSetStrategy) { r.Paused = true }, 0, "", 4},
		{"partition 4 of 4 updates none", 4, pods(4, oldRev), func(r *v1beta1.RollingUpdateCloneSetStrategy) { r.Partition = ptr.To(intstr.FromInt32(4)) }, 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := cloneSet(tc.replicas, func(cs *v1beta1.CloneSet) {
				if tc.mutate != nil {
					tc.mutate(cs.Spec.UpdateStrategy.RollingUpdate)
				}
			})
			p := newPlan(cs, tc.pods, newRev, oldRev, now, planGates{}, nil)
			require.Len(t, p.deletes, tc.deletes)
			for _, d := range p.deletes {
				require.Equal(t, oldRev, d.pod.Labels[wellknown.LabelControllerRevisionHash])
			}
			if tc.blocked != "" {
				require.Contains(t, p.updateBlocked, tc.blocked)
			}
			st := p.status(cs)
			require.Equal(t, tc.expectedU, st.ExpectedUpdatedReplicas)
		})
	}
}

func TestPlanInPlaceUpdate(t *testing.T) {
	inPlace := func(policy v1beta1.CloneSetPodUpdateStrategyType, maxUnavailable int32) func(*v1beta1.CloneSet) {
		return func(cs *v1beta1.CloneSet) {
			cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = policy
			cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(maxUnavailable))
		}
	}
	held := func(p *corev1.Pod) {
		p.Labels[wellknown.LabelLifecycleState] = string(wellknown.LifecycleStatePreparingUpdate)
		notReady(p) // the hook's markPodNotReady
	}
	for _, tc := range []struct {
		name    string
		cs      *v1beta1.CloneSet
		pods    []*corev1.Pod
		updates []string
	}{
		{"InPlaceIfPossible updates within maxUnavailable, deletes none",
			cloneSet(4, inPlace(v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType, 2)), pods(4, oldRev), []string{"web-old-0", "web-old-1"}},
		{"InPlaceOnly picks the same way",
			cloneSet(4, inPlace(v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType, 1)), pods(4, oldRev), []string{"web-old-0"}},
		{"a pod updating in place (not ready) uses the budget",
			cloneSet(3, inPlace(v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType, 1)),
			append(pods(2, oldRev), pod("updating", newRev, time.Minute, notReady)), nil},
		{"an old pod that is unavailable anyway is updated outside the budget (OpenKruise's limitUpdateIndexes)",
			cloneSet(3, inPlace(v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType, 1)),
			append(pods(2, oldRev), pod("pending", oldRev, time.Minute, notReady)), []string{"pending"}},
		{"a pod the hook holds in PreparingUpdate goes on, outside the budget",
			cloneSet(3, inPlace(v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType, 1)),
			append(pods(2, oldRev), pod("held", oldRev, time.Minute, held)), []string{"held"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlan(tc.cs, tc.pods, newRev, oldRev, now, planGates{}, nil)
			require.Empty(t, p.deletes)
			require.Empty(t, p.updateBlocked)
			require.Equal(t, tc.updates, updateNames(p.updates, newRev))
		})
	}
}

func TestPlanStatus(t *testing.T) {
	cs := cloneSet(3, func(cs *v1beta1.CloneSet) { cs.Spec.MinReadySeconds = 60 })
	ps := []*corev1.Pod{
		pod("a", newRev, time.Hour),
		pod("b", newRev, 30*time.Second), // ready 15 s ago: not available yet
		pod("c", oldRev, time.Hour),
	}
	p := newPlan(cs, ps, newRev, oldRev, now, planGates{}, nil)
	st := p.status(cs)
	require.EqualValues(t, 3, st.Replicas)
	require.EqualValues(t, 3, st.ReadyReplicas)
	require.EqualValues(t, 2, st.AvailableReplicas)
	require.EqualValues(t, 2, st.UpdatedReplicas)
	require.EqualValues(t, 2, st.UpdatedReadyReplicas)
	require.EqualValues(t, 1, st.UpdatedAvailableReplicas)
	require.Equal(t, oldRev, st.CurrentRevision, "not every pod is updated")
	require.Equal(t, newRev, st.UpdateRevision)
	require.EqualValues(t, 2, st.ObservedGeneration)
	require.Equal(t, "app=web", st.LabelSelector)
	require.InDelta(t, (45 * time.Second).Seconds(), p.requeueAfter.Seconds(), 1, "come back when b becomes available")

	all := newPlan(cs, []*corev1.Pod{pod("a", newRev, time.Hour), pod("b", newRev, time.Hour), pod("d", newRev, time.Hour)}, newRev, oldRev, now, planGates{}, nil)
	require.Equal(t, newRev, all.status(cs).CurrentRevision, "every pod updated: current moves")
}

// TestPlanSurge walks a ReCreate update with maxSurge 1 and maxUnavailable
// 0 of 3 pods: a new pod first, an old one deleted once it is available,
// and never fewer than 3 available pods.
func TestPlanSurge(t *testing.T) {
	cs := cloneSet(3, func(cs *v1beta1.CloneSet) {
		cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		cs.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
	})
	state := pods(3, oldRev)
	for step := 0; step < 12; step++ {
		p := newPlan(cs, state, newRev, oldRev, now, planGates{}, nil)
		require.GreaterOrEqual(t, p.available, int32(3), "step %d: availability dropped", step)
		switch {
		case p.createNew > 0:
			require.Equal(t, 1, p.createNew, "step %d: one surge pod at a time", step)
			require.Empty(t, p.deletes)
			// The new pod starts, then becomes ready.
			state = append(state, pod(fmt.Sprintf("new-%d", step), newRev, time.Hour))
		case len(p.deletes) > 0:
			require.Len(t, p.deletes, 1, "step %d", step)
			require.Equal(t, oldRev, p.deletes[0].pod.Labels[wellknown.LabelControllerRevisionHash])
			state = slices.DeleteFunc(state, func(x *corev1.Pod) bool { return x == p.deletes[0].pod })
		default:
			require.EqualValues(t, 3, p.updated, "step %d: done", step)
			require.Len(t, state, 3)
			return
		}
	}
	t.Fatal("the update did not finish in 12 steps")
}

func TestPlanSurgeWaitsForAvailability(t *testing.T) {
	cs := cloneSet(3, func(cs *v1beta1.CloneSet) {
		cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		cs.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
	})
	state := append(pods(3, oldRev), pod("starting", newRev, time.Second, notReady))
	p := newPlan(cs, state, newRev, oldRev, now, planGates{}, nil)
	require.Empty(t, p.deletes, "the surge pod is not available yet")
	require.Zero(t, p.createNew, "one surge pod at a time")
}

func TestPlanScaleInPrefersPreparingDelete(t *testing.T) {
	held := pod("held", newRev, time.Hour)
	held.Labels[wellknown.LabelLifecycleState] = string(wellknown.LifecycleStatePreparingDelete)
	ps := []*corev1.Pod{pod("a", newRev, time.Hour, notReady), held, pod("b", newRev, time.Minute)}
	p := newPlan(cloneSet(2, nil), ps, newRev, newRev, now, planGates{}, nil)
	require.Equal(t, []string{"held"}, names(p.deletes), "the pod already on its way out goes first")
}

func TestPlanPreparingDeleteAndScaling(t *testing.T) {
	held := func() *corev1.Pod {
		p := pod("held", newRev, time.Hour)
		p.Labels[wellknown.LabelLifecycleState] = string(wellknown.LifecycleStatePreparingDelete)
		p.Labels[wellknown.LabelSpecifiedDelete] = "true"
		return p
	}
	exclude := func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.ExcludePreparingDelete = true }
	for _, tc := range []struct {
		name       string
		cs         *v1beta1.CloneSet
		wantCreate int
	}{
		// OpenKruise's "specific delete a Pod, when
		// scalingExcludePreparingDelete is disabled": no scale-up while
		// the specified pod waits in PreparingDelete.
		{"counted: no replacement while it waits", cloneSet(3, nil), 0},
		// "... when scalingExcludePreparingDelete is enabled": the waiting
		// pod does not count, so replicas 3 means a fourth pod.
		{"excluded: replaced at once", cloneSet(3, exclude), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := []*corev1.Pod{pod("a", newRev, time.Hour), pod("b", newRev, time.Hour), held()}
			p := newPlan(tc.cs, ps, newRev, newRev, now, planGates{}, nil)
			require.Equal(t, tc.wantCreate, p.createNew)
			require.Empty(t, p.deletes, "a specified pod already leaving is not specified again")
			require.Equal(t, []string{"held"}, podNames(p.leaving), "looked at every pass until its hook lets go")
			require.EqualValues(t, 3, p.status(tc.cs).Replicas, "status counts it either way")
		})
	}
	t.Run("excluded: scale-in picks another pod", func(t *testing.T) {
		ps := []*corev1.Pod{pod("a", newRev, time.Hour), pod("b", newRev, time.Minute), held()}
		p := newPlan(cloneSet(1, exclude), ps, newRev, newRev, now, planGates{}, nil)
		require.Equal(t, []string{"b"}, names(p.deletes))
	})
}

func TestPlanBadPartitionSaysSo(t *testing.T) {
	cs := cloneSet(4, func(cs *v1beta1.CloneSet) {
		cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromString("half"))
	})
	p := newPlan(cs, pods(4, oldRev), newRev, oldRev, now, planGates{}, nil)
	require.Empty(t, p.deletes, "no update on a partition that does not parse")
	require.Contains(t, p.updateBlocked, `partition "half"`)
}
