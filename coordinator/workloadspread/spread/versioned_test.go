package spread

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// revPod is a running pod of revision rev placed in subset.
func revPod(name, subset, rev string) *corev1.Pod {
	p := pod(name, subset)
	p.Labels = map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: rev}
	return p
}

func names(sts []v1alpha1.WorkloadSpreadSubsetStatus) map[string]int32 {
	out := map[string]int32{}
	for _, st := range sts {
		out[st.Name] = st.MissingReplicas
	}
	return out
}

func TestVersioned(t *testing.T) {
	ws := newWS()
	for _, tc := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"apps/v1", "Deployment", true}, {"apps/v1", "ReplicaSet", true},
		{"apps.kruise.io/v1alpha1", "CloneSet", false}, {"apps/v1", "StatefulSet", false}, {"batch/v1", "Job", false},
	} {
		ws.Spec.TargetReference = &v1alpha1.TargetReference{APIVersion: tc.apiVersion, Kind: tc.kind, Name: "w"}
		require.Equal(t, tc.want, Versioned(ws), tc.kind)
		want := ""
		if tc.want {
			want = "r1"
		}
		require.Equal(t, want, PodVersion(ws, revPod("p", "", "r1")), tc.kind)
	}
}

// TestRecordCreateVersion is OpenKruise's rolling-update case: zone-a
// (max 2) is full of the old revision's pods; the new revision's first
// two pods still go to zone-a, the third to zone-b, and the flat status
// records them all.
func TestRecordCreateVersion(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "zone-a", MaxReplicas: maxOf(intstr.FromInt32(2))}, v1alpha1.WorkloadSpreadSubset{Name: "zone-b"})
	old := []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "zone-a", Replicas: 2}, {Name: "zone-b", Replicas: 4, MissingReplicas: Unlimited}}
	ws.Status.SubsetStatuses = old
	ws.Status.VersionedSubsetStatuses = map[string][]v1alpha1.WorkloadSpreadSubsetStatus{"old": old}

	require.Equal(t, "zone-b", Choose(ws, 6), "zone-a is full when every pod counts")
	var got []string
	for _, id := range []string{"n1", "n2", "n3"} {
		s, changed := RecordCreateVersion(ws, "new", id, 6, t0)
		require.Equal(t, id != "n3", changed, "only limited subsets keep records")
		got = append(got, s)
	}
	require.Equal(t, []string{"zone-a", "zone-a", "zone-b"}, got)
	newSts := ws.Status.VersionedSubsetStatuses["new"]
	require.Equal(t, map[string]int32{"zone-a": 0, "zone-b": Unlimited}, names(newSts))
	require.Len(t, newSts[0].CreatingPods, 2)
	require.Len(t, ws.Status.SubsetStatuses[0].CreatingPods, 2, "the flat status records the new pods too")
	require.Equal(t, int32(0), ws.Status.SubsetStatuses[0].MissingReplicas)
	require.Equal(t, old, ws.Status.VersionedSubsetStatuses["old"], "the old revision is untouched")

	// Recording again is no change.
	s, changed := RecordCreateVersion(ws, "new", "n1", 6, t0)
	require.Equal(t, "zone-a", s)
	require.False(t, changed)

	// A subset marked unschedulable in the flat status is skipped by
	// every revision.
	ws.Status.SubsetStatuses[0].Conditions = []v1alpha1.WorkloadSpreadSubsetCondition{{Type: v1alpha1.SubsetSchedulable, Status: corev1.ConditionFalse}}
	s, _ = RecordCreateVersion(ws, "newer", "m1", 6, t0)
	require.Equal(t, "zone-b", s)
	for _, st := range ws.Status.VersionedSubsetStatuses["new"] {
		require.Empty(t, st.Conditions, "versioned statuses carry no conditions")
	}

	// Version "" is the flat path.
	flat := newWS(v1alpha1.WorkloadSpreadSubset{Name: "zone-a", MaxReplicas: maxOf(intstr.FromInt32(2))})
	s, changed = RecordCreateVersion(flat, "", "f1", 2, t0)
	require.Equal(t, "zone-a", s)
	require.True(t, changed)
	require.Nil(t, flat.Status.VersionedSubsetStatuses)
}

func TestRecordDeleteVersion(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "zone-a", MaxReplicas: maxOf(intstr.FromInt32(2))})
	full := []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "zone-a", Replicas: 2}}
	ws.Status.SubsetStatuses = full
	ws.Status.VersionedSubsetStatuses = map[string][]v1alpha1.WorkloadSpreadSubsetStatus{"r1": full}
	require.True(t, RecordDeleteVersion(ws, "r1", "p1", "zone-a", 2, t0))
	require.Equal(t, int32(1), ws.Status.SubsetStatuses[0].MissingReplicas)
	require.Equal(t, int32(1), ws.Status.VersionedSubsetStatuses["r1"][0].MissingReplicas)
	require.Contains(t, ws.Status.VersionedSubsetStatuses["r1"][0].DeletingPods, "p1")
	require.False(t, RecordDeleteVersion(ws, "r1", "p1", "zone-a", 2, t0), "recorded already")

	// A revision without statuses gets none from a delete.
	require.True(t, RecordDeleteVersion(ws, "r0", "p2", "zone-a", 2, t0))
	require.NotContains(t, ws.Status.VersionedSubsetStatuses, "r0")
}

func TestVersionedStatus(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "zone-a", MaxReplicas: maxOf(intstr.FromInt32(2))}, v1alpha1.WorkloadSpreadSubset{Name: "zone-b"})
	ws.Spec.ScheduleStrategy = v1alpha1.WorkloadSpreadScheduleStrategy{Type: v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType,
		Adaptive: &v1alpha1.AdaptiveWorkloadSpreadStrategy{RescheduleCriticalSeconds: new(int32(30))}}
	ws.Status.VersionedSubsetStatuses = map[string][]v1alpha1.WorkloadSpreadSubsetStatus{
		// A revision whose pods are gone but one of whose creations is
		// still expected, and one with nothing left.
		"pending": {{Name: "zone-a", MissingReplicas: 1, CreatingPods: map[string]metav1.Time{"x": metav1.NewTime(t0)}}, {Name: "zone-b", MissingReplicas: Unlimited}},
		"gone":    {{Name: "zone-a", MissingReplicas: 2}, {Name: "zone-b", MissingReplicas: Unlimited}},
	}
	g := Groups{BySubset: map[string][]*corev1.Pod{
		"zone-a": {revPod("o1", "zone-a", "old"), revPod("o2", "zone-a", "old"), revPod("n1", "zone-a", "new")},
		"zone-b": {revPod("o3", "zone-b", "old"), revPod("n2", "zone-b", "new")},
	}}
	out := Outcome{}
	got, err := VersionedStatus(ws, g, 4, t0.Add(time.Second), &out)
	require.NoError(t, err)
	require.Equal(t, []string{"new", "old", "pending"}, sortedKeys(got))
	require.Equal(t, int32(0), got["old"][0].MissingReplicas)
	require.Equal(t, int32(2), got["old"][0].Replicas)
	require.Equal(t, int32(1), got["new"][0].MissingReplicas)
	require.Equal(t, int32(1), got["new"][1].Replicas)
	require.Equal(t, int32(1), got["pending"][0].MissingReplicas)
	require.Equal(t, t0.Add(CreatePodTimeout), out.Recheck)
	for _, sts := range got {
		for _, st := range sts {
			require.Empty(t, st.Conditions)
		}
	}

	ws.Spec.TargetReference.Kind = "CloneSet"
	ws.Spec.TargetReference.APIVersion = "apps.kruise.io/v1alpha1"
	got, err = VersionedStatus(ws, g, 4, t0, &out)
	require.NoError(t, err)
	require.Nil(t, got, "only Deployments and ReplicaSets keep versioned statuses")
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestDeletionCostsVersioned: the current revision's pods are costed with
// the subsets in order, an older revision's in reverse, so a rollout
// removes old pods from zone-a first.
func TestDeletionCostsVersioned(t *testing.T) {
	ws := newWS(v1alpha1.WorkloadSpreadSubset{Name: "zone-a", MaxReplicas: maxOf(intstr.FromInt32(2))}, v1alpha1.WorkloadSpreadSubset{Name: "zone-b"})
	g := Groups{BySubset: map[string][]*corev1.Pod{
		"zone-a": {revPod("o1", "zone-a", "old"), revPod("n1", "zone-a", "new")},
		"zone-b": {revPod("o2", "zone-b", "old"), revPod("n2", "zone-b", "new")},
	}, Unmatched: []*corev1.Pod{revPod("stray", "", "old")}}
	require.Equal(t, map[string]string{"n1": "200", "n2": "100", "o1": "100", "o2": "200", "stray": "-300"}, DeletionCosts(ws, g, 4, "new"))
	require.Equal(t, map[string]string{"n1": "200", "n2": "100", "o1": "200", "o2": "100", "stray": "-300"}, DeletionCosts(ws, g, 4, ""),
		"without a known current revision all pods count as one")
}

func TestLatestVersion(t *testing.T) {
	rs := func(rev, hash string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{deploymentRevisionAnnotation: rev},
			Labels:      map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}}}
	}
	require.Equal(t, "h10", LatestVersion([]*appsv1.ReplicaSet{rs("2", "h2"), rs("10", "h10"), rs("9", "h9"), rs("x", "hx")}))
	require.Equal(t, "", LatestVersion(nil))
}
