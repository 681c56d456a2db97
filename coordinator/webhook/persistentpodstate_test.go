package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/persistentpodstate"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

const (
	ppsZone = "topology.kubernetes.io/zone"
	ppsHost = "kubernetes.io/hostname"
	ppsIP   = "example.com/pod-ip"
)

// ppsLister serves a fixed list of PersistentPodStates.
func ppsLister(err error, states ...*v1alpha1.PersistentPodState) PersistentPodStateLister {
	return PersistentPodStateListerFunc(func(namespace string) ([]*v1alpha1.PersistentPodState, error) {
		var out []*v1alpha1.PersistentPodState
		for _, s := range states {
			if s.Namespace == namespace {
				out = append(out, s)
			}
		}
		return out, err
	})
}

// testPPS targets the Advanced StatefulSet web (at v1alpha1) with required
// zone, preferred hostname (weight 60) and the IP annotation, and has a
// record of web-0.
func testPPS(mutate ...func(*v1alpha1.PersistentPodState)) *v1alpha1.PersistentPodState {
	p := &v1alpha1.PersistentPodState{
		ObjectMeta: metav1.ObjectMeta{Name: "web-state", Namespace: "ns"},
		Spec: v1alpha1.PersistentPodStateSpec{
			TargetReference:             v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "StatefulSet", Name: "web"},
			RequiredPersistentTopology:  &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsZone, "missing"}},
			PreferredPersistentTopology: []v1alpha1.PreferredTopologyTerm{{Weight: 60, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsHost}}}},
			PersistentPodAnnotations:    []v1alpha1.PersistentPodAnnotation{{Key: ppsIP}},
		},
		Status: v1alpha1.PersistentPodStateStatus{PodStates: map[string]v1alpha1.PodState{
			"web-0": {NodeName: "n1", NodeTopologyLabels: map[string]string{ppsZone: "zone-a", ppsHost: "n1"}, Annotations: map[string]string{ppsIP: "10.0.0.7"}},
		}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// stsPod is pod web-0 controlled by the Advanced StatefulSet web at
// v1beta1.
func stsPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "web", UID: "u", Controller: ptr.To(true),
		}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

var (
	wantSelector  = map[string]string{ppsZone: "zone-a"}
	wantPreferred = corev1.PreferredSchedulingTerm{Weight: 60, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: ppsHost, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}},
	}}}
	wantAnnotations = map[string]string{ppsIP: "10.0.0.7", wellknown.AnnotationInjectedPersistentPodState: "web-state"}
)

func TestPersistentPodStateMutatePod(t *testing.T) {
	otherTerm := corev1.PreferredSchedulingTerm{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}},
	}}}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		states    []*v1alpha1.PersistentPodState
		listErr   error
		op        admissionv1.Operation
		unchanged bool
		// What the patched pod must show; nil: as the want* defaults.
		selector    map[string]string
		annotations map[string]string
		affinity    *corev1.Affinity
		custom      persistentpodstate.WhiteList
	}{
		{name: "a new pod gets the recorded state", pod: stsPod(), states: []*v1alpha1.PersistentPodState{testPPS()}},
		{
			name: "a white-listed StatefulSet-like workload's pod",
			pod: stsPod(func(p *corev1.Pod) {
				p.OwnerReferences[0].APIVersion, p.OwnerReferences[0].Kind = "example.io/v1", "Widget"
			}),
			states: []*v1alpha1.PersistentPodState{testPPS(func(s *v1alpha1.PersistentPodState) {
				s.Spec.TargetReference.APIVersion, s.Spec.TargetReference.Kind = "example.io/v2", "Widget"
			})},
			custom: persistentpodstate.WhiteList{{Group: "example.io", Version: "v1", Kind: "Widget"}},
		},
		{
			name: "the same kind, not white-listed",
			pod: stsPod(func(p *corev1.Pod) {
				p.OwnerReferences[0].APIVersion, p.OwnerReferences[0].Kind = "example.io/v1", "Widget"
			}),
			states: []*v1alpha1.PersistentPodState{testPPS(func(s *v1alpha1.PersistentPodState) {
				s.Spec.TargetReference.APIVersion, s.Spec.TargetReference.Kind = "example.io/v1", "Widget"
			})},
			unchanged: true,
		},
		{
			name: "existing selector, affinity and annotations are kept or extended",
			pod: stsPod(func(p *corev1.Pod) {
				p.Annotations = map[string]string{ppsIP: "10.9.9.9", "a/b~c": "x"}
				p.Spec.NodeSelector = map[string]string{"disk": "ssd", ppsZone: "zone-z"}
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{otherTerm}}}
			}),
			states:      []*v1alpha1.PersistentPodState{testPPS()},
			selector:    map[string]string{"disk": "ssd", ppsZone: "zone-a"},
			annotations: map[string]string{ppsIP: "10.9.9.9", "a/b~c": "x", wellknown.AnnotationInjectedPersistentPodState: "web-state"},
			affinity:    &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{otherTerm, wantPreferred}}},
		},
		{
			name: "pod anti-affinity only: node affinity added next to it",
			pod: stsPod(func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
			}),
			states:   []*v1alpha1.PersistentPodState{testPPS()},
			affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}, NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{wantPreferred}}},
		},
		{
			name: "upstream StatefulSet",
			pod:  stsPod(func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "apps/v1" }),
			states: []*v1alpha1.PersistentPodState{testPPS(func(s *v1alpha1.PersistentPodState) {
				s.Spec.TargetReference.APIVersion = "apps/v1"
			})},
		},
		{
			name: "annotations only",
			pod:  stsPod(),
			states: []*v1alpha1.PersistentPodState{testPPS(func(s *v1alpha1.PersistentPodState) {
				s.Spec.RequiredPersistentTopology, s.Spec.PreferredPersistentTopology = nil, nil
			})},
			selector: map[string]string{},
		},
		{name: "already as recorded", pod: stsPod(func(p *corev1.Pod) {
			p.Annotations = maps.Clone(wantAnnotations)
			p.Spec.NodeSelector = maps.Clone(wantSelector)
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{wantPreferred}}}
		}), states: []*v1alpha1.PersistentPodState{testPPS()}, unchanged: true},
		{name: "no record of this pod", pod: stsPod(func(p *corev1.Pod) { p.Name = "web-1" }), states: []*v1alpha1.PersistentPodState{testPPS()}, unchanged: true},
		{name: "no PersistentPodState", pod: stsPod(), unchanged: true},
		{name: "another namespace's", pod: stsPod(func(p *corev1.Pod) { p.Namespace = "other" }), states: []*v1alpha1.PersistentPodState{testPPS()}, unchanged: true},
		{name: "being deleted", pod: stsPod(), states: []*v1alpha1.PersistentPodState{testPPS(func(s *v1alpha1.PersistentPodState) { s.DeletionTimestamp = &metav1.Time{} })}, unchanged: true},
		{name: "the other kind's StatefulSet", pod: stsPod(func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "apps/v1" }), states: []*v1alpha1.PersistentPodState{testPPS()}, unchanged: true},
		{name: "not a StatefulSet's pod", pod: stsPod(func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "CloneSet" }), states: []*v1alpha1.PersistentPodState{testPPS()}, unchanged: true},
		{name: "no controller", pod: stsPod(func(p *corev1.Pod) { p.OwnerReferences = nil }), states: []*v1alpha1.PersistentPodState{testPPS()}, unchanged: true},
		{name: "update", pod: stsPod(), states: []*v1alpha1.PersistentPodState{testPPS()}, op: admissionv1.Update, unchanged: true},
		{name: "lister error", pod: stsPod(), states: []*v1alpha1.PersistentPodState{testPPS()}, listErr: errors.New("boom"), unchanged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pod)
			require.NoError(t, err)
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			a := NewPersistentPodStateAdmission(ppsLister(tc.listErr, tc.states...)).
				WithCustomWorkloads(func() persistentpodstate.WhiteList { return tc.custom })
			resp := a.MutatePod(context.Background(), &admissionv1.AdmissionRequest{Operation: op, Namespace: tc.pod.Namespace, Object: runtime.RawExtension{Raw: raw}})
			require.True(t, resp.Allowed)
			if tc.unchanged {
				require.Empty(t, resp.Patch)
				return
			}
			require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
			// The fake clientset applies the JSON patch as the apiserver would.
			client := kubefake.NewClientset(tc.pod)
			got, err := client.CoreV1().Pods(tc.pod.Namespace).Patch(context.Background(), tc.pod.Name, types.JSONPatchType, resp.Patch, metav1.PatchOptions{})
			require.NoError(t, err, "patch %s", resp.Patch)
			want := func(v, def map[string]string) map[string]string {
				if v == nil {
					return def
				}
				if len(v) == 0 {
					return nil
				}
				return v
			}
			require.Equal(t, want(tc.selector, wantSelector), got.Spec.NodeSelector)
			require.Equal(t, want(tc.annotations, wantAnnotations), got.Annotations)
			wantAffinity := tc.affinity
			if wantAffinity == nil && tc.selector == nil {
				wantAffinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{wantPreferred}}}
			}
			require.Equal(t, wantAffinity, got.Spec.Affinity)
		})
	}
}

func TestPersistentPodStateValidate(t *testing.T) {
	existing := testPPS(func(s *v1alpha1.PersistentPodState) { s.Name = "taken" })
	for _, tc := range []struct {
		name    string
		pps     *v1alpha1.PersistentPodState
		op      admissionv1.Operation
		version string
		want    []string // message parts; none: allowed
	}{
		{name: "a white-listed kind, any version", pps: testPPS(func(s *v1alpha1.PersistentPodState) {
			s.Spec.TargetReference = v1alpha1.TargetReference{APIVersion: "example.io/v2", Kind: "Widget", Name: "web"}
		})},
		{name: "a kind not on the white list", pps: testPPS(func(s *v1alpha1.PersistentPodState) {
			s.Spec.TargetReference = v1alpha1.TargetReference{APIVersion: "example.io/v1", Kind: "Gadget", Name: "web"}
		}), want: []string{"spec.targetRef: example.io/v1 Gadget is not supported", "add the kind to PPS_Watch_Custom_Workload_WhiteList of ConfigMap kruise-configuration"}},
		{name: "valid, no other", pps: testPPS(func(s *v1alpha1.PersistentPodState) { s.Spec.TargetReference.Name = "db" })},
		{name: "valid upstream", pps: testPPS(func(s *v1alpha1.PersistentPodState) {
			s.Spec.TargetReference = v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web"}
		})},
		{name: "a Deployment", pps: testPPS(func(s *v1alpha1.PersistentPodState) {
			s.Spec.TargetReference = v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
		}), want: []string{"spec.targetRef: apps/v1 Deployment is not supported", "set kind StatefulSet and apiVersion apps/v1"}},
		{name: "an old apps version", pps: testPPS(func(s *v1alpha1.PersistentPodState) { s.Spec.TargetReference.APIVersion = "apps/v1beta2" }),
			want: []string{"spec.targetRef: apps/v1beta2 StatefulSet is not supported"}},
		{name: "bad name", pps: testPPS(func(s *v1alpha1.PersistentPodState) { s.Spec.TargetReference.Name = "Web_1" }),
			want: []string{`spec.targetRef.name: "Web_1" is not a StatefulSet name`}},
		{name: "empty required keys", pps: testPPS(func(s *v1alpha1.PersistentPodState) { s.Spec.RequiredPersistentTopology.NodeTopologyKeys = nil }),
			want: []string{"spec.requiredPersistentTopology.nodeTopologyKeys: empty; list at least one node label key"}},
		{name: "empty required keys at v1beta1", version: "v1beta1", pps: testPPS(func(s *v1alpha1.PersistentPodState) { s.Spec.RequiredPersistentTopology.NodeTopologyKeys = nil }),
			want: []string{"spec.requiredPersistentTopology.keys: empty"}},
		{name: "bad preferred key", pps: testPPS(func(s *v1alpha1.PersistentPodState) {
			s.Spec.PreferredPersistentTopology[0].Preference.NodeTopologyKeys = []string{ppsHost, ""}
		}), want: []string{`spec.preferredPersistentTopology[0].preference.nodeTopologyKeys[1]: "" is not a node label key`}},
		{name: "bad annotation key", pps: testPPS(func(s *v1alpha1.PersistentPodState) {
			s.Spec.PersistentPodAnnotations = []v1alpha1.PersistentPodAnnotation{{Key: "no spaces"}}
		}), want: []string{`spec.persistentPodAnnotations[0].key: "no spaces" is not an annotation key`}},
		{name: "target taken", pps: testPPS(), want: []string{"spec.targetRef: apps.kruise.io StatefulSet web is already the target of PersistentPodState taken", "edit taken or delete it first"}},
		{name: "target taken, other version", pps: testPPS(func(s *v1alpha1.PersistentPodState) { s.Spec.TargetReference.APIVersion = "apps.kruise.io/v1beta1" }),
			want: []string{"already the target of PersistentPodState taken"}},
		{name: "update of the one holding the target", pps: testPPS(), op: admissionv1.Update},
		{name: "status", pps: testPPS(func(s *v1alpha1.PersistentPodState) { s.Spec.TargetReference.Kind = "Deployment" }), op: admissionv1.Update, version: "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pps)
			require.NoError(t, err)
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			req := &admissionv1.AdmissionRequest{Operation: op, Namespace: "ns", Object: runtime.RawExtension{Raw: raw},
				RequestKind: &metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "PersistentPodState"}}
			switch tc.version {
			case "v1beta1":
				req.RequestKind.Version = "v1beta1"
			case "status":
				req.SubResource = "status"
			}
			resp := NewPersistentPodStateAdmission(ppsLister(nil, existing)).
				WithCustomWorkloads(func() persistentpodstate.WhiteList {
					return persistentpodstate.WhiteList{{Group: "example.io", Version: "v1", Kind: "Widget"}}
				}).Validate(context.Background(), req)
			if len(tc.want) == 0 {
				require.True(t, resp.Allowed, "%+v", resp.Result)
				return
			}
			require.False(t, resp.Allowed)
			for _, w := range tc.want {
				require.Contains(t, resp.Result.Message, w)
			}
		})
	}
}
