package cloneset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func preparingUpdateHeld(p *corev1.Pod) {
	p.Labels[wellknown.LabelLifecycleState] = string(wellknown.LifecycleStatePreparingUpdate)
}

// TestPlanPreparingUpdateAsUpdate follows OpenKruise's e2e "regard
// preparing-update pod as update when scaling": partition 99% of 2 keeps
// one old pod; the other, held by the inPlaceUpdate hook in
// PreparingUpdate, counts as updated, so the pod that replaces a deleted
// one, and the pod a scale-up adds, take the current revision.
func TestPlanPreparingUpdateAsUpdate(t *testing.T) {
	on, off := planGates{preparingUpdateAsUpdate: true}, planGates{}
	partition := func(replicas int32) *v1beta1.CloneSet {
		return cloneSet(replicas, func(cs *v1beta1.CloneSet) {
			cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType
			cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromString("99%"))
		})
	}
	held := pod("held", oldRev, time.Hour, preparingUpdateHeld)
	for _, tc := range []struct {
		name               string
		cs                 *v1beta1.CloneSet
		gates              planGates
		createOld, created int
	}{
		{"rebuilt pod at the current revision", partition(2), on, 1, 1},
		{"without the gate the held pod counts as old: the rebuilt pod takes the update revision", partition(2), off, 0, 1},
		{"scale-up to 3: 99% keeps 2 old, the held pod is the updated one", partition(3), on, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlan(tc.cs, []*corev1.Pod{held}, newRev, oldRev, now, tc.gates, nil)
			require.Equal(t, tc.created, p.createOld+p.createNew)
			require.Equal(t, tc.createOld, p.createOld)
		})
	}
	t.Run("the update step still goes on with the held pod", func(t *testing.T) {
		p := newPlan(partition(3), []*corev1.Pod{held, pod("a", oldRev, time.Hour), pod("b", oldRev, time.Hour)}, newRev, oldRev, now, on, nil)
		require.Equal(t, []string{"held"}, updateNames(p.updates, newRev))
	})
}

// TestPlanPartitionRollback: with CloneSetPartitionRollback, raising the
// partition moves updated pods back to the current revision, within
// maxUnavailable; without it, nothing moves.
func TestPlanPartitionRollback(t *testing.T) {
	cs := cloneSet(4, func(cs *v1beta1.CloneSet) {
		cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType
		cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromInt32(3))
		cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	})
	state := []*corev1.Pod{pod("a", newRev, time.Hour), pod("b", newRev, time.Hour), pod("c", newRev, time.Hour), pod("d", oldRev, time.Hour)}

	p := newPlan(cs, state, newRev, oldRev, now, planGates{}, nil)
	require.Empty(t, p.updates, "without the gate a raised partition only stops the update")
	require.Empty(t, p.deletes)

	p = newPlan(cs, state, newRev, oldRev, now, planGates{partitionRollback: true}, nil)
	require.Len(t, p.updates, 1, "maxUnavailable 1: one pod at a time")
	require.Equal(t, oldRev, p.updates[0].to, "back to the current revision")

	recreate := cs.DeepCopy()
	recreate.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.RecreateCloneSetPodUpdateStrategyType
	p = newPlan(recreate, state, newRev, oldRev, now, planGates{partitionRollback: true}, nil)
	require.Len(t, p.deletes, 1, "ReCreate: the pod is deleted, its replacement comes at the current revision")
	after := newPlan(recreate, state[1:], newRev, oldRev, now, planGates{partitionRollback: true}, nil)
	require.Equal(t, 1, after.createOld)

	same := newPlan(cs, state, newRev, newRev, now, planGates{partitionRollback: true}, nil)
	require.Empty(t, same.updates, "no rollback once the revisions are equal")
}

// TestPlanUpdateOrder: priorityStrategy decides which old pods update
// first, and PreparingUpdate pods stay ahead of it.
func TestPlanUpdateOrder(t *testing.T) {
	weight := func(w int32, v string) pub.UpdatePriorityWeightTerm {
		return pub.UpdatePriorityWeightTerm{Weight: w, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": v}}}
	}
	cs := cloneSet(3, func(cs *v1beta1.CloneSet) {
		cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		cs.Spec.UpdateStrategy.RollingUpdate.PriorityStrategy = &pub.UpdatePriorityStrategy{
			WeightPriority: []pub.UpdatePriorityWeightTerm{weight(50, "canary"), weight(10, "edge")},
		}
	})
	tier := func(v string) podOpt { return func(p *corev1.Pod) { p.Labels["tier"] = v } }
	state := []*corev1.Pod{pod("a", oldRev, time.Hour), pod("b", oldRev, time.Hour, tier("edge")), pod("c", oldRev, time.Hour, tier("canary"))}
	p := newPlan(cs, state, newRev, oldRev, now, planGates{}, nil)
	require.Equal(t, []string{"c"}, names(p.deletes), "the heaviest weight first")
}

// TestPlanScaleInSpread: without spread constraints, a scale-in takes a
// pod from the most crowded node first (the same-node rank); with a zone
// constraint, from the most crowded zone.
func TestPlanScaleInSpread(t *testing.T) {
	on := func(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
	state := []*corev1.Pod{
		pod("a1", newRev, time.Hour, on("a")), pod("b1", newRev, time.Hour, on("b")),
		pod("b2", newRev, time.Hour, on("b")), pod("c1", newRev, time.Hour, on("c")),
	}
	p := newPlan(cloneSet(3, nil), state, newRev, newRev, now, planGates{}, nil)
	require.Len(t, p.deletes, 1)
	require.Contains(t, []string{"b1", "b2"}, p.deletes[0].pod.Name, "node b holds two pods")

	zones := map[string]string{"a": "z1", "b": "z2", "c": "z1"}
	nodeLabels := func(n string) map[string]string { return map[string]string{"zone": zones[n]} }
	spread := cloneSet(2, func(cs *v1beta1.CloneSet) {
		cs.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{TopologyKey: "zone", MaxSkew: 1}}
	})
	state = append(state, pod("c2", newRev, time.Hour, on("c")))
	p = newPlan(spread, state, newRev, newRev, now, planGates{}, nodeLabels)
	require.Len(t, p.deletes, 3)
	var fromZ1 int
	for _, d := range p.deletes {
		if zones[d.pod.Spec.NodeName] == "z1" {
			fromZ1++
		}
	}
	require.Equal(t, 2, fromZ1, "zone z1 holds 3 of 5 pods: scale-in to 2 leaves one per zone")
}
