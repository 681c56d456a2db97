package spread

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func maxOf(v intstr.IntOrString) *intstr.IntOrString { return &v }

func zoneTerm(zone string) *corev1.NodeSelectorTerm {
	return &corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}
}

func newWS(subsets ...v1alpha1.WorkloadSpreadSubset) *v1alpha1.WorkloadSpread {
	return &v1alpha1.WorkloadSpread{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "ns", Generation: 3},
		Spec: v1alpha1.WorkloadSpreadSpec{
			TargetReference: &v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Subsets:         subsets,
		},
	}
}

func pod(name, subset string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if subset != "" {
		p.Annotations = map[string]string{wellknown.AnnotationMatchedWorkloadSpread: Injection{Name: "ws", Subset: subset}.Annotation()}
	}
	return p
}

func TestMaxReplicas(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      *intstr.IntOrString
		replicas int32
		want     int32
		limited  bool
		wantErr  bool
	}{
		{name: "unset is unlimited", replicas: 10},
		{name: "integer", max: maxOf(intstr.FromInt32(3)), replicas: 10, want: 3, limited: true},
		{name: "percent exact", max: maxOf(intstr.FromString("50%")), replicas: 10, want: 5, limited: true},
		{name: "percent rounds up", max: maxOf(intstr.FromString("30%")), replicas: 5, want: 2, limited: true},
		{name: "percent of zero", max: maxOf(intstr.FromString("30%")), replicas: 0, want: 0, limited: true},
		{name: "bad percent", max: maxOf(intstr.FromString("x%")), replicas: 5, limited: true, wantErr: true},
		{name: "negative", max: maxOf(intstr.FromInt32(-1)), replicas: 5, limited: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, limited, err := MaxReplicas(&v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: tc.max}, tc.replicas)
			require.Equal(t, tc.wantErr, err != nil, "error: %v", err)
			require.Equal(t, tc.limited, limited)
			if !tc.wantErr {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

func TestChooseAndRecord(t *testing.T) {
	unschedulable := []v1alpha1.WorkloadSpreadSubsetCondition{{Type: v1alpha1.SubsetSchedulable, Status: corev1.ConditionFalse}}
	for _, tc := range []struct {
		name     string
		statuses []v1alpha1.WorkloadSpreadSubsetStatus
		want     string
		changed  bool
	}{
		{name: "no status yet: initial from spec", want: "a", changed: true},
		{name: "first with room", statuses: []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a", MissingReplicas: 0}, {Name: "b", MissingReplicas: 1}},
			want: "b", changed: true},
		{name: "unschedulable skipped", statuses: []v1alpha1.WorkloadSpreadSubsetStatus{
			{Name: "a", MissingReplicas: 2, Conditions: unschedulable}, {Name: "b", MissingReplicas: 1}}, want: "b", changed: true},
		{name: "unlimited last: no record", statuses: []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a"}, {Name: "b"}, {Name: "c", MissingReplicas: -1}},
			want: "c"},
		{name: "already recorded", statuses: []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a", MissingReplicas: 1},
			{Name: "b", MissingReplicas: 1, CreatingPods: map[string]metav1.Time{"p": metav1.NewTime(t0)}}}, want: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: maxOf(intstr.FromInt32(2))},
				v1alpha1.WorkloadSpreadSubset{Name: "b", MaxReplicas: maxOf(intstr.FromInt32(2))}, v1alpha1.WorkloadSpreadSubset{Name: "c"})
			ws.Status.SubsetStatuses = tc.statuses
			before := ws.DeepCopy()
			got, changed := RecordCreate(ws, "p", 10, t0)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.changed, changed)
			if !changed {
				return
			}
			require.Len(t, ws.Status.SubsetStatuses, 3)
			st := SubsetStatus(&ws.Status, got)
			require.Contains(t, st.CreatingPods, "p")
			old := SubsetStatus(&before.Status, got)
			wantMissing := int32(1) // initial 2, one placed
			if old != nil {
				wantMissing = old.MissingReplicas - 1
			}
			require.Equal(t, wantMissing, st.MissingReplicas)
		})
	}
}

func TestRecordCreateRescalesPercentages(t *testing.T) {
	// The status was computed when the workload had 0 replicas; it now
	// has 5: 20% and 80% are 1 and 4 again.
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: maxOf(intstr.FromString("20%"))},
		v1alpha1.WorkloadSpreadSubset{Name: "b", MaxReplicas: maxOf(intstr.FromString("80%"))})
	ws.Status.SubsetStatuses = []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a"}, {Name: "b"}}
	for i, want := range []string{"a", "b", "b", "b", "b", ""} {
		got, changed := RecordCreate(ws, fmt.Sprintf("p%d", i), 5, t0)
		require.Equal(t, want, got, "pod %d", i)
		require.Equal(t, want != "", changed, "pod %d", i)
	}
	require.Equal(t, []int32{0, 0}, []int32{ws.Status.SubsetStatuses[0].MissingReplicas, ws.Status.SubsetStatuses[1].MissingReplicas})

	// Placed pods, pods being created and pods being deleted all count.
	ws.Status.SubsetStatuses = []v1alpha1.WorkloadSpreadSubsetStatus{
		{Name: "a", Replicas: 1, DeletingPods: map[string]metav1.Time{"old": metav1.NewTime(t0)}},
		{Name: "b", Replicas: 2, CreatingPods: map[string]metav1.Time{"new": metav1.NewTime(t0)}},
	}
	Rescale(ws, 5)
	require.Equal(t, int32(1), ws.Status.SubsetStatuses[0].MissingReplicas, "1 of 1 placed, 1 leaving")
	require.Equal(t, int32(1), ws.Status.SubsetStatuses[1].MissingReplicas, "2 placed and 1 coming of 4")
}

func TestRecordDelete(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: maxOf(intstr.FromInt32(2))}, v1alpha1.WorkloadSpreadSubset{Name: "b"})
	ws.Status.SubsetStatuses = []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a", MissingReplicas: 0}, {Name: "b", MissingReplicas: -1}}
	require.True(t, RecordDelete(ws, "p", "a", t0))
	require.Equal(t, int32(1), ws.Status.SubsetStatuses[0].MissingReplicas)
	require.Contains(t, ws.Status.SubsetStatuses[0].DeletingPods, "p")
	require.False(t, RecordDelete(ws, "p", "a", t0), "recorded twice")
	require.False(t, RecordDelete(ws, "q", "b", t0), "unlimited subset")
	require.False(t, RecordDelete(ws, "q", "gone", t0), "unknown subset")
}

func TestChooseByOrdinal(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: maxOf(intstr.FromInt32(2))},
		v1alpha1.WorkloadSpreadSubset{Name: "b", MaxReplicas: maxOf(intstr.FromInt32(1))}, v1alpha1.WorkloadSpreadSubset{Name: "c"})
	for name, want := range map[string]string{"web-0": "a", "web-1": "a", "web-2": "b", "web-3": "c", "web-99": "c"} {
		require.Equal(t, want, ChooseByOrdinal(ws, name), name)
	}
	ws.Status.SubsetStatuses = []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a",
		Conditions: []v1alpha1.WorkloadSpreadSubsetCondition{{Type: v1alpha1.SubsetSchedulable, Status: corev1.ConditionFalse}}}}
	require.Equal(t, "b", ChooseByOrdinal(ws, "web-0"), "subset a unschedulable: b takes ordinal 0")
}

func TestInject(t *testing.T) {
	base := `{"metadata":{"name":"p","namespace":"ns","annotations":{"x":"y"}},"spec":{"futureField":{"k":1},"priorityClassName":"low","priority":5,` +
		`"containers":[{"name":"app","image":"nginx"}],"tolerations":[{"key":"t","operator":"Exists"}],` +
		`"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"arch","operator":"In","values":["amd64"]}]},{"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]}]}}}}}`
	ws := newWS(v1alpha1.WorkloadSpreadSubset{
		Name:                     "a",
		RequiredNodeSelectorTerm: zoneTerm("z1"),
		PreferredNodeSelectorTerms: []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "spot", Operator: corev1.NodeSelectorOpExists}}}}},
		Tolerations: []corev1.Toleration{{Key: "zone", Operator: corev1.TolerationOpEqual, Value: "z1", Effect: corev1.TaintEffectNoSchedule}},
		Patch: runtime.RawExtension{Raw: []byte(`{"metadata":{"labels":{"subset":"a"}},"spec":{"priorityClassName":"high",` +
			`"containers":[{"name":"app","resources":{"limits":{"cpu":"2"}}}]}}`)},
	})
	out, err := Inject([]byte(base), ws, "a", "")
	require.NoError(t, err)

	var raw map[string]any
	require.NoError(t, json.Unmarshal(out, &raw))
	require.Equal(t, map[string]any{"k": float64(1)}, raw["spec"].(map[string]any)["futureField"], "unknown fields are kept")
	_, hasPriority := raw["spec"].(map[string]any)["priority"]
	require.False(t, hasPriority, "priority cleared when the patch changes priorityClassName")

	p := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(out, p))
	require.Equal(t, `{"name":"ws","subset":"a"}`, p.Annotations[wellknown.AnnotationMatchedWorkloadSpread])
	require.Equal(t, "y", p.Annotations["x"])
	require.Equal(t, "a", p.Labels["subset"])
	require.Equal(t, "high", p.Spec.PriorityClassName)
	require.Equal(t, "nginx", p.Spec.Containers[0].Image)
	require.Equal(t, "2", p.Spec.Containers[0].Resources.Limits.Cpu().String())
	require.Len(t, p.Spec.Tolerations, 2)
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 2)
	require.Equal(t, []corev1.NodeSelectorRequirement{{Key: "arch", Operator: "In", Values: []string{"amd64"}},
		{Key: "zone", Operator: "In", Values: []string{"z1"}}}, terms[0].MatchExpressions)
	require.Equal(t, []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"z1"}}}, terms[1].MatchExpressions)
	require.Len(t, p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)

	out, err = Inject([]byte(`{"metadata":{"generateName":"p-"},"spec":{"containers":[{"name":"app"}]}}`), ws, "a", "uid-1")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, p))
	require.Equal(t, `{"name":"ws","subset":"a","uid":"uid-1"}`, p.Annotations[wellknown.AnnotationMatchedWorkloadSpread])
	require.Equal(t, []corev1.NodeSelectorTerm{*zoneTerm("z1")}, p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)

	_, err = Inject([]byte(base), ws, "missing", "")
	require.Error(t, err)
}

func TestGroup(t *testing.T) {
	ws := newWS(
		v1alpha1.WorkloadSpreadSubset{Name: "a", RequiredNodeSelectorTerm: zoneTerm("z1"), MaxReplicas: maxOf(intstr.FromInt32(1))},
		v1alpha1.WorkloadSpreadSubset{Name: "b", RequiredNodeSelectorTerm: zoneTerm("z1"),
			PreferredNodeSelectorTerms: []corev1.PreferredSchedulingTerm{{Weight: 5, Preference: *zoneTerm("z1")}}},
		v1alpha1.WorkloadSpreadSubset{Name: "c", Tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}},
	)
	nodes := map[string]*corev1.Node{
		"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "z1"}}},
		"n2": {ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"zone": "z2"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectNoSchedule}}}},
		"n3": {ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{"zone": "z3"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}}},
	}
	on := func(p *corev1.Pod, node string) *corev1.Pod { p.Spec.NodeName = node; return p }
	pods := []*corev1.Pod{
		pod("annotated", "a"),
		pod("stale-subset", "gone"),
		on(pod("old-z1", ""), "n1"),   // a and b match; b's preference wins
		on(pod("old-spot", ""), "n2"), // only c tolerates the taint
		on(pod("old-gpu", ""), "n3"),  // nothing tolerates it
		pod("old-unscheduled", ""),
	}
	g := Group(ws, pods, 10, func(name string) *corev1.Node { return nodes[name] })
	names := func(ps []*corev1.Pod) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	require.Equal(t, []string{"annotated"}, names(g.BySubset["a"]))
	require.Equal(t, []string{"old-z1"}, names(g.BySubset["b"]))
	require.Equal(t, []string{"old-spot"}, names(g.BySubset["c"]))
	require.Equal(t, []string{"stale-subset", "old-gpu", "old-unscheduled"}, names(g.Unmatched))
	require.Equal(t, map[string]string{"old-z1": "b", "old-spot": "c"}, g.Assigned)

	// Without preferences, room breaks the tie: a is full (annotated), so b.
	ws.Spec.Subsets[1].PreferredNodeSelectorTerms = nil
	g = Group(ws, pods, 10, func(name string) *corev1.Node { return nodes[name] })
	require.Equal(t, "b", g.Assigned["old-z1"])
	ws.Spec.Subsets[0].MaxReplicas = maxOf(intstr.FromInt32(5))
	g = Group(ws, pods, 10, func(name string) *corev1.Node { return nodes[name] })
	require.Equal(t, "a", g.Assigned["old-z1"], "equal scores: the first subset")
}

func TestExistingPodPatch(t *testing.T) {
	s := v1alpha1.WorkloadSpreadSubset{Name: "a", Patch: runtime.RawExtension{Raw: []byte(
		`{"metadata":{"labels":{"l":"v"},"annotations":{"k":"v"}},"spec":{"priorityClassName":"x"}}`)}}
	ws := newWS(s)
	b, err := ExistingPodPatch(ws, &s)
	require.NoError(t, err)
	require.JSONEq(t, `{"metadata":{"labels":{"l":"v"},"annotations":{"k":"v","apps.kruise.io/matched-workloadspread":"{\"name\":\"ws\",\"subset\":\"a\"}"}}}`, string(b))
	ws.Annotations = map[string]string{wellknown.AnnotationWorkloadSpreadIgnorePatchExistingPods: "True"}
	b, err = ExistingPodPatch(ws, &s)
	require.NoError(t, err)
	require.JSONEq(t, `{"metadata":{"annotations":{"apps.kruise.io/matched-workloadspread":"{\"name\":\"ws\",\"subset\":\"a\"}"}}}`, string(b))
}

func TestStatus(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: maxOf(intstr.FromString("50%"))}, v1alpha1.WorkloadSpreadSubset{Name: "b"})
	ws.Status.SubsetStatuses = []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a",
		CreatingPods: map[string]metav1.Time{"seen": metav1.NewTime(t0), "uid-1": metav1.NewTime(t0), "pending": metav1.NewTime(t0.Add(-10 * time.Second)),
			"lost": metav1.NewTime(t0.Add(-31 * time.Second))},
		DeletingPods: map[string]metav1.Time{"going": metav1.NewTime(t0.Add(-5 * time.Second)), "stuck": metav1.NewTime(t0.Add(-16 * time.Second)),
			"gone": metav1.NewTime(t0)}}}
	generated := pod("generated-abc", "")
	generated.Annotations = map[string]string{wellknown.AnnotationMatchedWorkloadSpread: Injection{Name: "ws", Subset: "a", UID: "uid-1"}.Annotation()}
	done := pod("done", "a")
	done.Status.Phase = corev1.PodSucceeded
	g := Groups{BySubset: map[string][]*corev1.Pod{
		"a": {pod("seen", "a"), generated, pod("going", "a"), pod("stuck", "a"), done},
		"b": {pod("b1", "b")},
	}}
	out, err := Status(ws, g, 10, t0)
	require.NoError(t, err)
	a, b := out.Status.SubsetStatuses[0], out.Status.SubsetStatuses[1]
	require.Equal(t, int64(3), out.Status.ObservedGeneration)
	require.Equal(t, int32(4), a.Replicas)
	// max 5; 4 active -> 1; "going" still deleting -> 2; "pending" creating -> 1.
	require.Equal(t, int32(1), a.MissingReplicas)
	require.Equal(t, map[string]metav1.Time{"pending": metav1.NewTime(t0.Add(-10 * time.Second))}, a.CreatingPods)
	require.Equal(t, map[string]metav1.Time{"going": metav1.NewTime(t0.Add(-5 * time.Second))}, a.DeletingPods)
	require.Equal(t, []string{"lost"}, out.CreateExpired)
	require.Equal(t, []string{"stuck"}, out.DeleteExpired)
	require.Equal(t, t0.Add(10*time.Second), out.Recheck, "the deleting record of going expires first")
	require.Equal(t, int32(1), b.Replicas)
	require.Equal(t, Unlimited, b.MissingReplicas)
	require.Empty(t, b.Conditions)
}

func TestStatusAdaptive(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: maxOf(intstr.FromInt32(3))}, v1alpha1.WorkloadSpreadSubset{Name: "b"})
	ws.Spec.ScheduleStrategy = v1alpha1.WorkloadSpreadScheduleStrategy{Type: v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType,
		Adaptive: &v1alpha1.AdaptiveWorkloadSpreadStrategy{RescheduleCriticalSeconds: ptr.To[int32](30)}}
	stuck := pod("stuck", "a")
	stuck.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	g := Groups{BySubset: map[string][]*corev1.Pod{"a": {stuck}, "b": {}}}

	out, err := Status(ws, g, 3, t0.Add(10*time.Second))
	require.NoError(t, err)
	require.Empty(t, out.Reschedule)
	require.Equal(t, corev1.ConditionTrue, out.Status.SubsetStatuses[0].Conditions[0].Status)
	require.Equal(t, t0.Add(30*time.Second), out.Recheck)

	now := t0.Add(31 * time.Second)
	out, err = Status(ws, g, 3, now)
	require.NoError(t, err)
	require.Equal(t, []*corev1.Pod{stuck}, out.Reschedule)
	require.Equal(t, v1alpha1.WorkloadSpreadSubsetCondition{Type: v1alpha1.SubsetSchedulable, Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(now)}, out.Status.SubsetStatuses[0].Conditions[0])
	require.Equal(t, corev1.ConditionTrue, out.Status.SubsetStatuses[1].Conditions[0].Status, "the last subset stays schedulable")

	// Once the pod is gone, the subset stays unschedulable for 5 minutes.
	ws.Status = out.Status
	g = Groups{BySubset: map[string][]*corev1.Pod{"a": {}, "b": {}}}
	out, err = Status(ws, g, 3, now.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, Unschedulable(&out.Status.SubsetStatuses[0]))
	require.Equal(t, now.Add(MaxScheduledFailedDuration), out.Recheck)
	out, err = Status(ws, g, 3, now.Add(MaxScheduledFailedDuration+time.Second))
	require.NoError(t, err)
	require.False(t, Unschedulable(&out.Status.SubsetStatuses[0]))
	require.Equal(t, []string{"a"}, out.Recovered)

	// Fixed drops the condition.
	ws.Spec.ScheduleStrategy = v1alpha1.WorkloadSpreadScheduleStrategy{}
	out, err = Status(ws, g, 3, now)
	require.NoError(t, err)
	require.Empty(t, out.Status.SubsetStatuses[0].Conditions)
}

func TestDeletionCosts(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", MaxReplicas: maxOf(intstr.FromInt32(1))},
		v1alpha1.WorkloadSpreadSubset{Name: "b", MaxReplicas: maxOf(intstr.FromInt32(5))}, v1alpha1.WorkloadSpreadSubset{Name: "c"})
	older, newer := pod("a-old", "a"), pod("a-new", "a")
	newer.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	pending := pod("a-pending", "a")
	pending.Status.Phase = corev1.PodPending
	done := pod("a-done", "a")
	done.Status.Phase = corev1.PodFailed
	g := Groups{BySubset: map[string][]*corev1.Pod{"a": {older, newer, pending, done}, "b": {pod("b1", "b")}, "c": {pod("c1", "c")}},
		Unmatched: []*corev1.Pod{pod("stray", "")}}
	require.Equal(t, map[string]string{
		"a-old": "300", "a-new": "-100", "a-pending": "-100", // a keeps its oldest running pod
		"b1": "200", "c1": "100", "stray": "-400",
	}, DeletionCosts(ws, g, 10, ""))
	ws.Spec.TargetReference.Kind = "Job"
	require.False(t, DeletionCostKind(ws))
}

func TestSortForDeletion(t *testing.T) {
	ready := func(name string, since time.Time) *corev1.Pod {
		p := pod(name, "")
		p.Spec.NodeName = "n"
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}
		return p
	}
	unassigned := pod("unassigned", "")
	unassigned.Status.Phase = corev1.PodPending
	notReady := pod("not-ready", "")
	notReady.Spec.NodeName = "n"
	longReady, shortReady := ready("long-ready", t0), ready("short-ready", t0.Add(time.Hour))
	restarted := ready("restarted", t0)
	restarted.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 3}}
	pods := []*corev1.Pod{longReady, restarted, shortReady, notReady, unassigned}
	SortForDeletion(pods)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	require.Equal(t, []string{"unassigned", "not-ready", "short-ready", "restarted", "long-ready"}, got)
}

func TestWhiteList(t *testing.T) {
	wl, err := ParseWhiteList(`{"workloads":[{"Group":"example.com","Kind":"Widget","replicasPath":"spec.size"}]}`)
	require.NoError(t, err)
	require.Equal(t, "spec.size", wl[0].ReplicasPath)
	for _, tc := range []struct {
		group, kind string
		want        bool
	}{
		{"apps", "Deployment", true}, {"apps.kruise.io", "CloneSet", true}, {"apps.kruise.io", "StatefulSet", true},
		{"batch", "Job", true}, {"example.com", "Widget", true}, {"example.com", "Gadget", false}, {"apps", "CloneSet", false},
	} {
		require.Equal(t, tc.want, TargetAllowed(Target(&v1alpha1.TargetReference{APIVersion: tc.group + "/v1", Kind: tc.kind}), wl), tc.kind)
	}
	_, err = ParseWhiteList(`{`)
	require.Error(t, err)
}

// TestGroupLeavesLaterPodsOut: a pod created after the WorkloadSpread
// without its annotation found every subset full when the webhook saw it;
// it stays outside the subsets even on a node a subset matches.
func TestGroupLeavesLaterPodsOut(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "a", RequiredNodeSelectorTerm: zoneTerm("z1"), MaxReplicas: maxOf(intstr.FromInt32(5))})
	ws.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "z1"}}}
	before, after := pod("before", ""), pod("after", "")
	before.Spec.NodeName, after.Spec.NodeName = "n1", "n1"
	after.CreationTimestamp = metav1.NewTime(t0.Add(2 * time.Minute))
	g := Group(ws, []*corev1.Pod{before, after}, 5, func(string) *corev1.Node { return node })
	require.Equal(t, []*corev1.Pod{before}, g.BySubset["a"], "the pod from before the WorkloadSpread is placed by its node")
	require.Equal(t, []*corev1.Pod{after}, g.Unmatched)
}
