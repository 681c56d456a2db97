package spreadrank

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

var (
	t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

type opt func(*corev1.Pod)

// mk is a Running pod, Ready since t0 and created at t0, on node (""
// for unscheduled), whose UID is its name.
func mk(name, node string, opts ...opt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) opt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func notReady() opt {
	return func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
}
func readySince(t time.Time) opt {
	return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t) }
}
func created(t time.Time) opt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}
func cost(v string) opt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{wellknown.AnnotationPodDeletionCost: v} }
}
func restarts(counts ...int32) opt {
	return func(p *corev1.Pod) {
		for _, c := range counts {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{RestartCount: c})
		}
	}
}
func noUID() opt { return func(p *corev1.Pod) { p.UID = "" } }

const zone = corev1.LabelTopologyZone

// nodes: n1, n2 in zone a; n3 in zone b; n4 without a zone label.
var nodes = map[string]map[string]string{
	"n1": {zone: "a", corev1.LabelHostname: "n1"},
	"n2": {zone: "a", corev1.LabelHostname: "n2"},
	"n3": {zone: "b", corev1.LabelHostname: "n3"},
	"n4": {corev1.LabelHostname: "n4"},
}

func nodeLabels(name string) map[string]string { return nodes[name] }

func constraint(key string) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}
}

// rankOf returns each pod's rank by name.
func rankOf(r Ranker, pods []*corev1.Pod) map[string]float64 {
	out := map[string]float64{}
	for _, p := range pods {
		out[p.Name] = r.Rank(p)
	}
	return out
}

func requireRanks(t *testing.T, want, got map[string]float64) {
	t.Helper()
	require.Len(t, got, len(want))
	for name, w := range want {
		require.InDelta(t, w, got[name], 1e-9, "pod %s", name)
	}
}

func TestSameNode(t *testing.T) {
	cases := []struct {
		name string
		pods []*corev1.Pod
		want map[string]float64
	}{
		{
			name: "three on n1 and one on n2: the crowded node's pods rank higher",
			pods: []*corev1.Pod{mk("a", "n1"), mk("b", "n1"), mk("c", "n1"), mk("d", "n2")},
			want: map[string]float64{"a": 2, "b": 1, "c": 0, "d": 0},
		},
		{
			name: "on a node the pod least worth keeping ranks highest, the best one 0",
			pods: []*corev1.Pod{
				mk("old", "n1"),
				mk("unready", "n1", notReady()),
				mk("young", "n1", readySince(t1), created(t1)),
				mk("alone", "n2"),
			},
			want: map[string]float64{"unready": 2, "young": 1, "old": 0, "alone": 0},
		},
		{
			name: "unscheduled pods rank 0 and do not share a node",
			pods: []*corev1.Pod{mk("u1", "", phase(corev1.PodPending)), mk("u2", "", phase(corev1.PodPending)), mk("a", "n1"), mk("b", "n1")},
			want: map[string]float64{"u1": 0, "u2": 0, "a": 1, "b": 0},
		},
		{
			name: "pods without a UID are told apart by name",
			pods: []*corev1.Pod{mk("a", "n1", noUID()), mk("b", "n1", noUID()), mk("c", "n1", noUID())},
			want: map[string]float64{"a": 2, "b": 1, "c": 0},
		},
		{
			name: "no pods",
			want: map[string]float64{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireRanks(t, tc.want, rankOf(New(nil, tc.pods, nodeLabels), tc.pods))
		})
	}

	t.Run("a pod outside the set ranks 0", func(t *testing.T) {
		r := New(nil, []*corev1.Pod{mk("a", "n1"), mk("b", "n1")}, nil)
		require.Zero(t, r.Rank(mk("stranger", "n1")))
	})
	t.Run("the input order is kept", func(t *testing.T) {
		pods := []*corev1.Pod{mk("a", "n1"), mk("b", "n1", notReady()), mk("c", "n1", phase(corev1.PodPending))}
		New(nil, pods, nil)
		New([]corev1.TopologySpreadConstraint{constraint(zone)}, pods, nodeLabels)
		require.Equal(t, []string{"a", "b", "c"}, []string{pods[0].Name, pods[1].Name, pods[2].Name})
	})
}

// TestOrder checks the keep-value order through the same-node ranker:
// of two pods on one node, the one less worth keeping ranks 1, the
// other 0, whatever their input order.
func TestOrder(t *testing.T) {
	cases := []struct {
		name          string
		first, second *corev1.Pod
	}{
		{"pending before running", mk("x", "n1", phase(corev1.PodPending)), mk("y", "n1")},
		{"pending before unknown", mk("x", "n1", phase(corev1.PodPending)), mk("y", "n1", phase(corev1.PodUnknown))},
		{"unknown before running", mk("x", "n1", phase(corev1.PodUnknown)), mk("y", "n1")},
		{"other phases count as pending", mk("x", "n1", phase(corev1.PodFailed)), mk("y", "n1", phase(corev1.PodUnknown))},
		{"not ready before ready", mk("x", "n1", notReady()), mk("y", "n1")},
		{"not ready before ready despite a lower cost", mk("x", "n1", notReady(), cost("50")), mk("y", "n1", cost("-50"))},
		{"lower deletion cost first", mk("x", "n1", cost("10")), mk("y", "n1", cost("100"))},
		{"negative cost before none", mk("x", "n1", cost("-5")), mk("y", "n1")},
		{"a cost with a plus sign counts as 0", mk("x", "n1", cost("+5")), mk("y", "n1", cost("1"))},
		{"a cost with a leading zero counts as 0", mk("x", "n1", cost("007")), mk("y", "n1", cost("1"))},
		{"a cost beyond int32 counts as 0", mk("x", "n1", cost("4294967296")), mk("y", "n1", cost("1"))},
		{"cost before ready time", mk("x", "n1", cost("1"), readySince(t0)), mk("y", "n1", cost("2"), readySince(t1))},
		{"ready later first", mk("x", "n1", readySince(t1)), mk("y", "n1", readySince(t0))},
		{"unset ready time first", mk("x", "n1", readySince(time.Time{})), mk("y", "n1", readySince(t1))},
		{"ready time before restarts", mk("x", "n1", readySince(t1)), mk("y", "n1", restarts(9))},
		{"more restarts of the busiest container first", mk("x", "n1", restarts(3)), mk("y", "n1", restarts(2, 2))},
		{"restarts before creation time", mk("x", "n1", restarts(1)), mk("y", "n1", created(t1))},
		{"newer first", mk("x", "n1", created(t1)), mk("y", "n1", created(t0))},
		{"unset creation time first", mk("x", "n1", created(time.Time{})), mk("y", "n1", created(t1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, pods := range [][]*corev1.Pod{{tc.first, tc.second}, {tc.second, tc.first}} {
				r := New(nil, pods, nil)
				require.Equal(t, 1.0, r.Rank(tc.first))
				require.Zero(t, r.Rank(tc.second))
			}
		})
	}
	t.Run("equal pods keep their input order", func(t *testing.T) {
		a, b := mk("a", "n1"), mk("b", "n1")
		require.Equal(t, 1.0, New(nil, []*corev1.Pod{a, b}, nil).Rank(a))
		require.Equal(t, 1.0, New(nil, []*corev1.Pod{b, a}, nil).Rank(b))
	})
}

func TestSpread(t *testing.T) {
	ln := math.Log
	withSelector := constraint(zone)
	withSelector.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}

	cases := []struct {
		name        string
		constraints []corev1.TopologySpreadConstraint
		pods        []*corev1.Pod
		nodeLabels  NodeLabels
		want        map[string]float64
	}{
		{
			// zone a holds 3 pods, zone b 1; two domains weigh ln(4).
			name:        "one zone constraint, two zones unbalanced",
			constraints: []corev1.TopologySpreadConstraint{constraint(zone)},
			pods:        []*corev1.Pod{mk("p1", "n1"), mk("p2", "n1"), mk("p3", "n2"), mk("p4", "n3")},
			nodeLabels:  nodeLabels,
			want:        map[string]float64{"p1": 3 * ln(4), "p2": 2 * ln(4), "p3": 1 * ln(4), "p4": 1 * ln(4)},
		},
		{
			// In zone a, y1 (same-node rank 1) goes before x and y2 (0),
			// which keep their input order.
			name:        "inside a zone the same-node rank orders equal pods",
			constraints: []corev1.TopologySpreadConstraint{constraint(zone)},
			pods:        []*corev1.Pod{mk("x", "n2"), mk("y1", "n1"), mk("y2", "n1"), mk("z", "n3")},
			nodeLabels:  nodeLabels,
			want:        map[string]float64{"y1": 3 * ln(4), "x": 2 * ln(4), "y2": 1 * ln(4), "z": 1 * ln(4)},
		},
		{
			name:        "inside a zone state comes before the same-node rank",
			constraints: []corev1.TopologySpreadConstraint{constraint(zone)},
			pods:        []*corev1.Pod{mk("y1", "n1"), mk("y2", "n1"), mk("x", "n2", notReady())},
			nodeLabels:  nodeLabels,
			want:        map[string]float64{"x": 3 * ln(3), "y1": 2 * ln(3), "y2": 1 * ln(3)},
		},
		{
			// zone: a = {p1, p2, p3}, b = {p4}, weight ln(4);
			// hostname: n1 = {p1, p2}, n2 = {p3}, n3 = {p4}, weight ln(5).
			name:        "zone and hostname constraints add up",
			constraints: []corev1.TopologySpreadConstraint{constraint(zone), constraint(corev1.LabelHostname)},
			pods:        []*corev1.Pod{mk("p1", "n1"), mk("p2", "n1"), mk("p3", "n2"), mk("p4", "n3")},
			nodeLabels:  nodeLabels,
			want: map[string]float64{
				"p1": 3*ln(4) + 2*ln(5),
				"p2": 2*ln(4) + 1*ln(5),
				"p3": 1*ln(4) + 1*ln(5),
				"p4": 1*ln(4) + 1*ln(5),
			},
		},
		{
			name:        "a constraint whose selector does not match the pods still counts",
			constraints: []corev1.TopologySpreadConstraint{withSelector},
			pods:        []*corev1.Pod{mk("p1", "n1"), mk("p2", "n1"), mk("p3", "n2"), mk("p4", "n3")},
			nodeLabels:  nodeLabels,
			want:        map[string]float64{"p1": 3 * ln(4), "p2": 2 * ln(4), "p3": 1 * ln(4), "p4": 1 * ln(4)},
		},
		{
			name:        "the same key twice counts twice",
			constraints: []corev1.TopologySpreadConstraint{constraint(zone), constraint(zone)},
			pods:        []*corev1.Pod{mk("p1", "n1"), mk("p2", "n3")},
			nodeLabels:  nodeLabels,
			want:        map[string]float64{"p1": 2 * ln(4), "p2": 2 * ln(4)},
		},
		{
			// Only p's zone is occupied: one domain weighs ln(3). The
			// two pods on the unknown node rank 0 although they share it.
			name:        "unscheduled pods and pods on unknown or unlabelled nodes rank 0",
			constraints: []corev1.TopologySpreadConstraint{constraint(zone)},
			pods: []*corev1.Pod{
				mk("u", "", phase(corev1.PodPending)),
				mk("g1", "ghost"), mk("g2", "ghost"),
				mk("nozone", "n4"),
				mk("p", "n1"),
			},
			nodeLabels: nodeLabels,
			want:       map[string]float64{"u": 0, "g1": 0, "g2": 0, "nozone": 0, "p": 1 * ln(3)},
		},
		{
			name:        "no node lookup: every pod ranks 0",
			constraints: []corev1.TopologySpreadConstraint{constraint(zone)},
			pods:        []*corev1.Pod{mk("p1", "n1"), mk("p2", "n1")},
			want:        map[string]float64{"p1": 0, "p2": 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireRanks(t, tc.want, rankOf(New(tc.constraints, tc.pods, tc.nodeLabels), tc.pods))
		})
	}

	t.Run("the crowded zone's pods outrank the sparse zone's", func(t *testing.T) {
		pods := []*corev1.Pod{mk("a1", "n1"), mk("a2", "n2"), mk("a3", "n1"), mk("b1", "n3")}
		r := New([]corev1.TopologySpreadConstraint{constraint(zone)}, pods, nodeLabels)
		// Zone a orders a1 (same-node rank 1), a3, a2.
		require.Greater(t, r.Rank(pods[0]), r.Rank(pods[3]))
		require.Greater(t, r.Rank(pods[2]), r.Rank(pods[3]))
		require.Equal(t, r.Rank(pods[1]), r.Rank(pods[3]), "the best pod of every zone ranks 1×weight")
	})
}
