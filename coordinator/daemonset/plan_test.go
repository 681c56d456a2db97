package daemonset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/placement"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

const (
	oldHash = "old"
	newHash = "new"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

var nodes = []*corev1.Node{node("n1", map[string]string{"pool": "a"}), node("n2", map[string]string{"pool": "a"}), node("n3", map[string]string{"pool": "b"})}

type podOpt func(*corev1.Pod)

func notReady(p *corev1.Pod) { p.Status.Conditions = nil }

// dsPod is a ready pod of revision hash on node, created age ago.
func dsPod(name, nodeName, hash string, age time.Duration, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Labels: map[string]string{wellknown.LabelControllerRevisionHash: hash}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-age / 2))},
		}},
	}
	placement.PinToNode(&p.Spec, nodeName)
	p.Spec.NodeName = nodeName
	for _, o := range opts {
		o(p)
	}
	return p
}

func daemonSet(mutate func(*v1beta1.DaemonSet)) *v1beta1.DaemonSet {
	ds := &v1beta1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "ns", Generation: 3}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
	if mutate != nil {
		mutate(ds)
	}
	return ds
}

func oldPods() []*corev1.Pod {
	return []*corev1.Pod{dsPod("p1", "n1", oldHash, time.Hour), dsPod("p2", "n2", oldHash, time.Hour), dsPod("p3", "n3", oldHash, time.Hour)}
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

func rolling(mutate func(*v1beta1.RollingUpdateDaemonSet)) func(*v1beta1.DaemonSet) {
	return func(ds *v1beta1.DaemonSet) {
		ds.Spec.UpdateStrategy = v1beta1.DaemonSetUpdateStrategy{Type: v1beta1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &v1beta1.RollingUpdateDaemonSet{}}
		mutate(ds.Spec.UpdateStrategy.RollingUpdate)
	}
}

func TestPlanPlacement(t *testing.T) {
	noSchedule := corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name         string
		ds           *v1beta1.DaemonSet
		nodes        []*corev1.Node
		pods         []*corev1.Pod
		create       []string
		deletes      []string
		desired      int32
		misscheduled int32
		backoff      map[string]time.Time
	}{
		{name: "a pod on every node", ds: daemonSet(nil), nodes: nodes, create: []string{"n1", "n2", "n3"}, desired: 3},
		{name: "nodeSelector", ds: daemonSet(func(ds *v1beta1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "b"} }),
			nodes: nodes, create: []string{"n3"}, desired: 1},
		{name: "a pod on a node that no longer matches goes", ds: daemonSet(func(ds *v1beta1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "b"} }),
			nodes: nodes, pods: []*corev1.Pod{dsPod("p1", "n1", newHash, time.Hour), dsPod("p3", "n3", newHash, time.Hour)},
			deletes: []string{"p1"}, desired: 1, misscheduled: 1},
		{name: "an untolerated NoSchedule taint: no new pod, the old one stays", ds: daemonSet(nil),
			nodes: []*corev1.Node{node("n1", nil, noSchedule), node("n2", nil, noSchedule)}, pods: []*corev1.Pod{dsPod("p1", "n1", newHash, time.Hour)}, desired: 1},
		{name: "a cordoned node keeps its daemon (the unschedulable toleration)", ds: daemonSet(nil),
			nodes: []*corev1.Node{node("n1", nil, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})}, create: []string{"n1"}, desired: 1},
		{name: "a failed pod is replaced", ds: daemonSet(nil), nodes: nodes[:1],
			pods:   []*corev1.Pod{dsPod("p1", "n1", newHash, time.Hour, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
			create: []string{"n1"}, deletes: []string{"p1"}, desired: 1},
		{name: "a pod whose node is gone", ds: daemonSet(nil), nodes: nodes[:1],
			pods: []*corev1.Pod{dsPod("p1", "n1", newHash, time.Hour), dsPod("p9", "n9", newHash, time.Hour)}, deletes: []string{"p9"}, desired: 1},
		{name: "a second pod of the update revision goes", ds: daemonSet(nil), nodes: nodes[:1],
			pods: []*corev1.Pod{dsPod("p1", "n1", newHash, time.Hour), dsPod("p1b", "n1", newHash, time.Minute)}, deletes: []string{"p1b"}, desired: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(tc.ds, tc.nodes, tc.pods, newHash, now, tc.backoff)
			require.NoError(t, err)
			require.Equal(t, tc.create, p.create)
			require.Equal(t, tc.deletes, names(p.deletes))
			require.Equal(t, tc.desired, p.status.DesiredNumberScheduled)
			require.Equal(t, tc.misscheduled, p.status.NumberMisscheduled)
			require.Equal(t, newHash, p.status.UpdateRevision)
			require.EqualValues(t, 3, p.status.ObservedGeneration)
		})
	}
}

func TestPlanRollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ds      *v1beta1.DaemonSet
		pods    []*corev1.Pod
		create  []string
		deletes []string
		updates []string
	}{
		{name: "Standard, maxUnavailable defaults to 1; the last node first", ds: daemonSet(nil), pods: oldPods(), deletes: []string{"p3"}},
		{name: "maxUnavailable 2", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) { r.MaxUnavailable = ptr.To(intstr.FromInt32(2)) })),
			pods: oldPods(), deletes: []string{"p3", "p2"}},
		{name: "an unavailable old pod goes first, outside the budget", ds: daemonSet(nil),
			pods:    []*corev1.Pod{dsPod("p1", "n1", oldHash, time.Hour), dsPod("p2", "n2", oldHash, time.Hour), dsPod("p3", "n3", oldHash, time.Hour, notReady)},
			deletes: []string{"p3"}},
		{name: "InPlaceIfPossible updates within maxUnavailable", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) {
			r.Type, r.MaxUnavailable = v1beta1.InplaceRollingUpdateType, ptr.To(intstr.FromInt32(5))
		})), pods: oldPods(), updates: []string{"p3", "p2", "p1"}},
		{name: "partition 2 keeps the first two nodes", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) {
			r.MaxUnavailable, r.Partition = ptr.To(intstr.FromInt32(3)), ptr.To(intstr.FromInt32(2))
		})), pods: oldPods(), deletes: []string{"p3"}},
		{name: "partition counts nodes with pods: a new node does not let an old pod go", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) {
			r.MaxUnavailable, r.Partition = ptr.To(intstr.FromInt32(3)), ptr.To(intstr.FromInt32(2))
		})), pods: oldPods()[1:], create: []string{"n1"}},
		{name: "selector: only pool b", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) {
			r.MaxUnavailable, r.Selector = ptr.To(intstr.FromInt32(3)), &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
		})), pods: oldPods(), deletes: []string{"p3"}},
		{name: "paused", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) { r.Paused = ptr.To(true) })), pods: oldPods()},
		{name: "OnDelete", ds: daemonSet(func(ds *v1beta1.DaemonSet) { ds.Spec.UpdateStrategy.Type = v1beta1.OnDeleteDaemonSetStrategyType }), pods: oldPods()},
		{name: "maxSurge 100%: a new pod next to each old one", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) {
			r.MaxSurge, r.MaxUnavailable = ptr.To(intstr.FromString("100%")), ptr.To(intstr.FromInt32(0))
		})), pods: oldPods(), create: []string{"n3", "n2", "n1"}},
		{name: "maxSurge: the old pod goes once the new one is available", ds: daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) {
			r.MaxSurge, r.MaxUnavailable = ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(0))
		})), pods: append(oldPods(), dsPod("q1", "n1", newHash, time.Minute), dsPod("q2", "n2", newHash, time.Second, notReady)),
			deletes: []string{"p1"}},
		{name: "a pod in PreparingDelete counts as unavailable", ds: daemonSet(nil),
			pods: []*corev1.Pod{dsPod("p1", "n1", oldHash, time.Hour, func(p *corev1.Pod) {
				p.Labels[wellknown.LabelLifecycleState] = string(wellknown.LifecycleStatePreparingDelete)
			}), dsPod("p2", "n2", oldHash, time.Hour), dsPod("p3", "n3", oldHash, time.Hour)},
			deletes: []string{"p1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(tc.ds, nodes, tc.pods, newHash, now, nil)
			require.NoError(t, err)
			require.Equal(t, tc.create, p.create)
			require.Equal(t, tc.deletes, names(p.deletes))
			require.Equal(t, tc.updates, podNames(p.updates))
		})
	}
}

func TestPlanStatus(t *testing.T) {
	ds := daemonSet(func(ds *v1beta1.DaemonSet) { ds.Spec.MinReadySeconds = 60 })
	pods := []*corev1.Pod{dsPod("p1", "n1", newHash, time.Hour), dsPod("p2", "n2", oldHash, time.Minute), dsPod("p3", "n3", oldHash, time.Hour, notReady)}
	p, err := newPlan(ds, nodes, pods, newHash, now, nil)
	require.NoError(t, err)
	st := p.status
	require.EqualValues(t, 3, st.DesiredNumberScheduled)
	require.EqualValues(t, 3, st.CurrentNumberScheduled)
	require.EqualValues(t, 2, st.NumberReady)
	require.EqualValues(t, 1, st.NumberAvailable, "p2 has been ready 30 s of its 60")
	require.EqualValues(t, 2, st.NumberUnavailable)
	require.EqualValues(t, 1, st.UpdatedNumberScheduled)
	require.InDelta(t, 30, p.requeueAfter.Seconds(), 1, "come back when p2 becomes available")

	// A surge pod ready 5 s next to an available old one: come back when
	// it is available, to delete the old one.
	surging := daemonSet(rolling(func(r *v1beta1.RollingUpdateDaemonSet) {
		r.MaxSurge, r.MaxUnavailable = ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(0))
	}))
	surging.Spec.MinReadySeconds = 10
	p, err = newPlan(surging, nodes[:1], []*corev1.Pod{dsPod("p1", "n1", oldHash, time.Hour), dsPod("q1", "n1", newHash, 10*time.Second)}, newHash, now, nil)
	require.NoError(t, err)
	require.Empty(t, p.deletes, "the surge pod is not available yet")
	require.InDelta(t, 5, p.requeueAfter.Seconds(), 1)
}
