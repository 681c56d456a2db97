package persistentpodstate

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

const (
	zoneKey = "topology.kubernetes.io/zone"
	hostKey = "kubernetes.io/hostname"
	ipKey   = "example.com/ip"
)

func TestTargetKind(t *testing.T) {
	widget := schema.GroupKind{Group: "example.io", Kind: "Widget"}
	custom := WhiteList{{Group: "example.io", Version: "v1", Kind: "Widget"}}
	for _, tc := range []struct {
		apiVersion, kind string
		custom           WhiteList
		want             schema.GroupKind
		ok               bool
	}{
		{"apps/v1", "StatefulSet", nil, AppsStatefulSet, true},
		{"apps.kruise.io/v1beta1", "StatefulSet", nil, KruiseStatefulSet, true},
		{"apps.kruise.io/v1alpha1", "StatefulSet", nil, KruiseStatefulSet, true},
		{"apps/v1", "Deployment", custom, schema.GroupKind{Group: "apps", Kind: "Deployment"}, false},
		{"example.com/v1", "StatefulSet", custom, schema.GroupKind{Group: "example.com", Kind: "StatefulSet"}, false},
		{"a/b/c", "StatefulSet", nil, schema.GroupKind{}, false},
		{"example.io/v1", "Widget", nil, widget, false},
		{"example.io/v1", "Widget", custom, widget, true},
		{"example.io/v2", "Widget", custom, widget, true}, // the version does not matter, as in OpenKruise
		{"example.io/v1", "Gadget", custom, schema.GroupKind{Group: "example.io", Kind: "Gadget"}, false},
	} {
		t.Run(tc.apiVersion+" "+tc.kind, func(t *testing.T) {
			got, ok := TargetKind(tc.apiVersion, tc.kind, tc.custom)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseWhiteList(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       WhiteList
		err        string
	}{
		{"empty", "", nil, ""},
		{"as OpenKruise's e2e writes it", `{"workloads":[{"Group":"apps.kruise.io","Version":"v1beta1","Kind":"StatefulSetLikeTest"}]}`,
			WhiteList{{Group: "apps.kruise.io", Version: "v1beta1", Kind: "StatefulSetLikeTest"}}, ""},
		{"lowercase keys", `{"workloads":[{"group":"example.io","version":"v1","kind":"Widget"}]}`,
			WhiteList{{Group: "example.io", Version: "v1", Kind: "Widget"}}, ""},
		{"a kind twice is followed once", `{"workloads":[{"Group":"g","Version":"v1","Kind":"K"},{"Group":"g","Version":"v2","Kind":"K"}]}`,
			WhiteList{{Group: "g", Version: "v1", Kind: "K"}}, ""},
		{"not JSON", `{`, nil, "decode PPS_Watch_Custom_Workload_WhiteList"},
		{"no version", `{"workloads":[{"Group":"g","Kind":"K"}]}`, nil, "workloads[0] needs Group, Version and Kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseWhiteList(tc.data)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestFromCustom(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns", "uid": "w-uid", "annotations": map[string]any{"a": "b"}},
		"spec":     map[string]any{"replicas": int64(3)},
	}}
	gk := schema.GroupKind{Group: "example.io", Kind: "Widget"}
	w := fromCustom(gk, u)
	require.Equal(t, &statefulSet{kind: gk, apiVersion: "example.io/v1", namespace: "ns", name: "w", uid: "w-uid",
		annotations: map[string]string{"a": "b"}, replicas: 3}, w)
	require.True(t, w.wantsOrdinal(2))
	require.False(t, w.wantsOrdinal(3))
	unstructured.RemoveNestedField(u.Object, "spec", "replicas")
	require.Zero(t, fromCustom(gk, u).replicas, "no spec.replicas is 0, as OpenKruise reads it")
	require.Equal(t, metav1.OwnerReference{APIVersion: "example.io/v1", Kind: "Widget", Name: "w", UID: "w-uid", Controller: ptr.To(true)}, w.controllerRef())
}

func TestWantsOrdinal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		start    int
		reserve  []intstr.IntOrString
		want     []int // ordinals 0..9 that are replicas
	}{
		{name: "three from zero", replicas: 3, want: []int{0, 1, 2}},
		{name: "none", replicas: 0},
		{name: "start 5", replicas: 2, start: 5, want: []int{5, 6}},
		{name: "reserved 1", replicas: 3, reserve: []intstr.IntOrString{intstr.FromInt32(1)}, want: []int{0, 2, 3}},
		{name: "reserved range", replicas: 3, reserve: []intstr.IntOrString{intstr.FromString("1-3")}, want: []int{0, 4, 5}},
		{name: "reserved and start", replicas: 2, start: 2, reserve: []intstr.IntOrString{intstr.FromInt32(2), intstr.FromString("bad")}, want: []int{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1beta1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
				Spec:       v1beta1.StatefulSetSpec{Replicas: ptr.To(int32(tc.replicas)), ReserveOrdinals: tc.reserve},
			}
			if tc.start > 0 {
				s.Spec.Ordinals = &v1beta1.StatefulSetOrdinals{Start: int32(tc.start)}
			}
			w := fromAdvanced(s)
			var got []int
			for ord := range 10 {
				if w.wantsOrdinal(ord) {
					got = append(got, ord)
				}
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestOrdinalOf(t *testing.T) {
	for pod, want := range map[string]int{"web-0": 0, "web-12": 12, "web-01": -1, "web-x": -1, "other-1": -1, "web-sub-1": -1, "web--1": -1} {
		t.Run(pod, func(t *testing.T) { require.Equal(t, want, ordinalOf("web", pod)) })
	}
}

// pod is a pod of the StatefulSet web of group with uid "set-uid".
func pod(name, node string, ready bool, mutate ...func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "web", UID: "set-uid", Controller: ptr.To(true),
		}}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status},
		}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestRecordable(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"ready on a node", pod("web-0", "n1", true), true},
		{"not ready", pod("web-0", "n1", false), false},
		{"unscheduled", pod("web-0", "", true), false},
		{"pending", pod("web-0", "n1", true, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), false},
		{"terminating", pod("web-0", "n1", true, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }), false},
		{"no ready condition", pod("web-0", "n1", true, func(p *corev1.Pod) { p.Status.Conditions = nil }), false},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, recordable(tc.pod)) })
	}
}

func nodes(ns ...*corev1.Node) func(string) *corev1.Node {
	return func(name string) *corev1.Node {
		for _, n := range ns {
			if n.Name == name {
				return n
			}
		}
		return nil
	}
}

func node(name, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostKey: name, zoneKey: zone, "other": "x"}}}
}

// pps is a PersistentPodState of web (Advanced) with required zone and
// preferred hostname, recording ipKey.
func pps(states map[string]v1alpha1.PodState, mutate ...func(*v1alpha1.PersistentPodState)) *v1alpha1.PersistentPodState {
	p := &v1alpha1.PersistentPodState{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 3},
		Spec: v1alpha1.PersistentPodStateSpec{
			TargetReference:             v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "web"},
			RequiredPersistentTopology:  &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{zoneKey}},
			PreferredPersistentTopology: []v1alpha1.PreferredTopologyTerm{{Weight: 50, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{hostKey, zoneKey}}}},
			PersistentPodAnnotations:    []v1alpha1.PersistentPodAnnotation{{Key: ipKey}},
		},
		Status: v1alpha1.PersistentPodStateStatus{ObservedGeneration: 2, PodStates: states},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func state(node, zone string, ann map[string]string) v1alpha1.PodState {
	return v1alpha1.PodState{NodeName: node, NodeTopologyLabels: map[string]string{hostKey: node, zoneKey: zone}, Annotations: ann}
}

func advanced(replicas int32) *statefulSet {
	return fromAdvanced(&v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid"},
		Spec:       v1beta1.StatefulSetSpec{Replicas: ptr.To(replicas)},
	})
}

func TestNextStatus(t *testing.T) {
	n1, n2 := node("n1", "a"), node("n2", "b")
	withIP := func(ip string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{ipKey: ip, "unrelated": "y"} }
	}
	for _, tc := range []struct {
		name         string
		pps          *v1alpha1.PersistentPodState
		target       *statefulSet
		pods         []*corev1.Pod
		want         map[string]v1alpha1.PodState
		recorded     []string
		dropped      []string
		observedOnly bool
	}{
		{
			name:   "records ready pods with node labels and annotations",
			pps:    pps(nil),
			target: advanced(3),
			pods:   []*corev1.Pod{pod("web-0", "n1", true, withIP("10.0.0.1")), pod("web-1", "n2", true), pod("web-2", "n1", false)},
			want: map[string]v1alpha1.PodState{
				"web-0": state("n1", "a", map[string]string{ipKey: "10.0.0.1"}),
				"web-1": state("n2", "b", nil),
			},
			recorded: []string{"web-0", "web-1"},
		},
		{
			name:   "unchanged records are kept as they are",
			pps:    pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)}),
			target: advanced(1),
			pods:   []*corev1.Pod{pod("web-0", "n1", true)},
			want:   map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)},
		},
		{
			name:     "a pod recreated on another node is recorded again",
			pps:      pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)}),
			target:   advanced(1),
			pods:     []*corev1.Pod{pod("web-0", "n2", true)},
			want:     map[string]v1alpha1.PodState{"web-0": state("n2", "b", nil)},
			recorded: []string{"web-0"},
		},
		{
			name:   "a deleted pod of a replica keeps its record",
			pps:    pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil), "web-1": state("n2", "b", nil)}),
			target: advanced(2),
			pods:   []*corev1.Pod{pod("web-0", "n1", true), pod("web-1", "n2", true, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })},
			want:   map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil), "web-1": state("n2", "b", nil)},
		},
		{
			name:   "an unknown node leaves the record alone",
			pps:    pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)}),
			target: advanced(1),
			pods:   []*corev1.Pod{pod("web-0", "n9", true)},
			want:   map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)},
		},
		{
			name:    "scaled down: records of gone pods past replicas are dropped",
			pps:     pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil), "web-1": state("n2", "b", nil), "web-2": state("n1", "a", nil)}),
			target:  advanced(1),
			pods:    []*corev1.Pod{pod("web-0", "n1", true), pod("web-1", "n2", false, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })},
			want:    map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil), "web-1": state("n2", "b", nil)},
			dropped: []string{"web-2"},
		},
		{
			name: "WhenDeleted keeps records past replicas",
			pps: pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil), "web-2": state("n1", "a", nil)}, func(p *v1alpha1.PersistentPodState) {
				p.Spec.PersistentPodStateRetentionPolicy = v1alpha1.PersistentPodStateRetentionPolicyWhenDeleted
			}),
			target: advanced(1),
			pods:   []*corev1.Pod{pod("web-0", "n1", true)},
			want:   map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil), "web-2": state("n1", "a", nil)},
		},
		{
			name:   "records of other names are kept",
			pps:    pps(map[string]v1alpha1.PodState{"other-7": state("n1", "a", nil)}),
			target: advanced(0),
			want:   map[string]v1alpha1.PodState{"other-7": state("n1", "a", nil)},
		},
		{
			name:    "target gone: records cleared",
			pps:     pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)}),
			dropped: []string{"web-0"},
		},
		{
			name:         "no records, no pods",
			pps:          pps(nil),
			target:       advanced(2),
			observedOnly: true,
		},
		{
			name: "only the keys asked for",
			pps: pps(nil, func(p *v1alpha1.PersistentPodState) {
				p.Spec.PreferredPersistentTopology = nil
				p.Spec.PersistentPodAnnotations = nil
			}),
			target:   advanced(1),
			pods:     []*corev1.Pod{pod("web-0", "n1", true, withIP("10.0.0.1"))},
			want:     map[string]v1alpha1.PodState{"web-0": {NodeName: "n1", NodeTopologyLabels: map[string]string{zoneKey: "a"}}},
			recorded: []string{"web-0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ch := nextStatus(tc.pps, tc.target, tc.pods, nodes(n1, n2))
			require.Equal(t, int64(3), st.ObservedGeneration)
			require.Equal(t, tc.want, st.PodStates)
			require.Equal(t, tc.recorded, ch.recorded)
			require.Equal(t, tc.dropped, ch.dropped)
			if tc.observedOnly {
				require.Nil(t, st.PodStates)
			}
		})
	}
}

func upstream(annotations map[string]string) *statefulSet {
	return fromStatefulSet(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "db-uid", Annotations: annotations}})
}

func TestGenerated(t *testing.T) {
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "db-uid", Controller: ptr.To(true)}}
	target := v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        *v1alpha1.PersistentPodStateSpec // nil: none
	}{
		{name: "no annotation"},
		{name: "not true", annotations: map[string]string{wellknown.AnnotationAutoGeneratePersistentPodState: "yes", wellknown.AnnotationRequiredPersistentTopology: zoneKey}},
		{name: "no topology", annotations: map[string]string{wellknown.AnnotationAutoGeneratePersistentPodState: "true", wellknown.AnnotationPersistentPodAnnotations: ipKey}},
		{
			name:        "required only",
			annotations: map[string]string{wellknown.AnnotationAutoGeneratePersistentPodState: "true", wellknown.AnnotationRequiredPersistentTopology: zoneKey + ", " + hostKey},
			want:        &v1alpha1.PersistentPodStateSpec{TargetReference: target, RequiredPersistentTopology: &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{zoneKey, hostKey}}},
		},
		{
			name: "all three",
			annotations: map[string]string{wellknown.AnnotationAutoGeneratePersistentPodState: "true", wellknown.AnnotationRequiredPersistentTopology: zoneKey,
				wellknown.AnnotationPreferredPersistentTopology: hostKey + ",", wellknown.AnnotationPersistentPodAnnotations: ipKey + ",b"},
			want: &v1alpha1.PersistentPodStateSpec{
				TargetReference:             target,
				RequiredPersistentTopology:  &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{zoneKey}},
				PreferredPersistentTopology: []v1alpha1.PreferredTopologyTerm{{Weight: 100, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{hostKey}}}},
				PersistentPodAnnotations:    []v1alpha1.PersistentPodAnnotation{{Key: ipKey}, {Key: "b"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := generated(upstream(tc.annotations))
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, "db", got.Name)
			require.Equal(t, "ns", got.Namespace)
			require.Equal(t, owner, got.OwnerReferences)
			require.Equal(t, *tc.want, got.Spec)
		})
	}
	t.Run("advanced targets apps.kruise.io/v1beta1", func(t *testing.T) {
		w := advanced(1)
		w.annotations = map[string]string{wellknown.AnnotationAutoGeneratePersistentPodState: "true", wellknown.AnnotationPreferredPersistentTopology: hostKey}
		got := generated(w)
		require.Equal(t, v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "web"}, got.Spec.TargetReference)
		require.Equal(t, types.UID("set-uid"), got.OwnerReferences[0].UID)
	})
}

func TestDecideGeneration(t *testing.T) {
	on := map[string]string{wellknown.AnnotationAutoGeneratePersistentPodState: "true", wellknown.AnnotationRequiredPersistentTopology: zoneKey}
	w := upstream(on)
	desired := generated(w)
	edited := desired.DeepCopy()
	edited.Spec.RequiredPersistentTopology.NodeTopologyKeys = []string{hostKey}
	staleOwner := desired.DeepCopy()
	staleOwner.OwnerReferences[0].UID = "old-uid"
	users := desired.DeepCopy()
	users.OwnerReferences = nil
	otherKind := desired.DeepCopy()
	otherKind.OwnerReferences[0].APIVersion = "apps.kruise.io/v1beta1"
	otherKind.Spec.TargetReference.APIVersion = "apps.kruise.io/v1beta1"
	unowned := otherKind.DeepCopy()
	unowned.OwnerReferences = nil
	deleting := desired.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		existing    *v1alpha1.PersistentPodState
		want        generation
	}{
		{name: "wanted, none", annotations: on, want: create},
		{name: "wanted, same", annotations: on, existing: desired, want: keep},
		{name: "wanted, edited", annotations: on, existing: edited, want: update},
		{name: "wanted, stale owner", annotations: on, existing: staleOwner, want: update},
		{name: "wanted, the user's for this target", annotations: on, existing: users, want: update},
		{name: "wanted, the other kind's", annotations: on, existing: otherKind, want: conflict},
		{name: "wanted, unowned for the other kind", annotations: on, existing: unowned, want: conflict},
		{name: "wanted, being deleted", annotations: on, existing: deleting, want: keep},
		{name: "not wanted, generated", existing: desired, want: remove},
		{name: "not wanted, the user's", existing: users, want: keep},
		{name: "not wanted, stale owner", existing: staleOwner, want: keep},
		{name: "not wanted, none", want: keep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := upstream(tc.annotations)
			got := decideGeneration(w, generated(w), tc.existing)
			require.Equal(t, tc.want.String(), got.String())
			if got == update {
				out := adopt(tc.existing, desired)
				require.Equal(t, desired.Spec, out.Spec)
				require.Equal(t, desired.OwnerReferences, out.OwnerReferences)
			}
		})
	}
	t.Run("adopt keeps other owners", func(t *testing.T) {
		existing := staleOwner.DeepCopy()
		cm := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm"}
		existing.OwnerReferences = append([]metav1.OwnerReference{cm}, existing.OwnerReferences...)
		out := adopt(existing, desired)
		require.Equal(t, append([]metav1.OwnerReference{cm}, desired.OwnerReferences...), out.OwnerReferences)
		require.Equal(t, types.UID("old-uid"), existing.OwnerReferences[1].UID, "the cached object is not changed")
	})
}
