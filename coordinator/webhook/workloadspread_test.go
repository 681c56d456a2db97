package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workloadspread/spread"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
)

// fakeSpreads serves one namespace's WorkloadSpreads; SpreadFor matches
// any pod with a controller to the first.
type fakeSpreads struct {
	mu       sync.Mutex
	items    []*v1alpha1.WorkloadSpread
	replicas int32
}

func (f *fakeSpreads) SpreadFor(context.Context, *corev1.Pod) (*v1alpha1.WorkloadSpread, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.items) == 0 {
		return nil, nil
	}
	return f.items[0], nil
}

func (f *fakeSpreads) Spread(_, name string) (*v1alpha1.WorkloadSpread, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ws := range f.items {
		if ws.Name == name {
			return ws, nil
		}
	}
	return nil, nil
}

func (f *fakeSpreads) Spreads(string) ([]*v1alpha1.WorkloadSpread, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.items, nil
}

func (f *fakeSpreads) Replicas(context.Context, *v1alpha1.WorkloadSpread) (int32, error) {
	return f.replicas, nil
}

var wsT0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func wsMax(v intstr.IntOrString) *intstr.IntOrString { return &v }

func wsSpread() *v1alpha1.WorkloadSpread {
	return &v1alpha1.WorkloadSpread{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "ns", UID: "ws-uid", ResourceVersion: "1"},
		Spec: v1alpha1.WorkloadSpreadSpec{
			TargetReference: &v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Subsets: []v1alpha1.WorkloadSpreadSubset{
				{Name: "a", MaxReplicas: wsMax(intstr.FromString("50%")), RequiredNodeSelectorTerm: &corev1.NodeSelectorTerm{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}},
					Patch: runtime.RawExtension{Raw: []byte(`{"metadata":{"labels":{"subset":"a"}}}`)}},
				{Name: "b", Tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}},
			},
		},
		Status: v1alpha1.WorkloadSpreadStatus{SubsetStatuses: []v1alpha1.WorkloadSpreadSubsetStatus{
			{Name: "a", MissingReplicas: 1}, {Name: "b", MissingReplicas: -1}}},
	}
}

type wsHarness struct {
	a       *WorkloadSpreadAdmission
	shoal   *shoalfake.Clientset
	spreads *fakeSpreads
	pods    map[string]*corev1.Pod
}

func newWSHarness(t *testing.T, ws *v1alpha1.WorkloadSpread) *wsHarness {
	t.Helper()
	h := &wsHarness{shoal: shoalfake.NewSimpleClientset(ws.DeepCopy()), spreads: &fakeSpreads{items: []*v1alpha1.WorkloadSpread{ws}, replicas: 2},
		pods: map[string]*corev1.Pod{}}
	h.a = NewWorkloadSpreadAdmission(h.spreads, PodGetterFunc(func(ns, name string) (*corev1.Pod, error) {
		if p, ok := h.pods[ns+"/"+name]; ok {
			return p, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}), h.shoal)
	h.a.now = func() time.Time { return wsT0 }
	h.a.newUID = func() string { return "gen-uid" }
	// The fake tracker neither checks nor bumps resourceVersions: do as the
	// apiserver does.
	gvr := v1alpha1.SchemeGroupVersion.WithResource("workloadspreads")
	h.shoal.PrependReactor("update", "workloadspreads", func(a clienttesting.Action) (bool, runtime.Object, error) {
		next := a.(clienttesting.UpdateAction).GetObject().(*v1alpha1.WorkloadSpread).DeepCopy()
		cur, err := h.shoal.Tracker().Get(gvr, next.Namespace, next.Name)
		if err != nil {
			return true, nil, err
		}
		rv := cur.(*v1alpha1.WorkloadSpread).ResourceVersion
		if next.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), next.Name, errors.New("the object has been modified"))
		}
		n, _ := strconv.Atoi(rv)
		next.ResourceVersion = strconv.Itoa(n + 1)
		return true, next, h.shoal.Tracker().Update(gvr, next, next.Namespace)
	})
	return h
}

func (h *wsHarness) stored(t *testing.T) *v1alpha1.WorkloadSpread {
	t.Helper()
	ws, err := h.shoal.AppsV1alpha1().WorkloadSpreads("ns").Get(context.Background(), "ws", metav1.GetOptions{})
	require.NoError(t, err)
	return ws
}

func wsPodRaw(t *testing.T, name string, mutate ...func(*corev1.Pod)) []byte {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: "web-", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return b
}

func wsCreate(raw []byte) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "ns", Object: runtime.RawExtension{Raw: raw},
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}}
}

// wsApply applies the response's JSON patch to raw and decodes the pod.
func wsApply(t *testing.T, raw []byte, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	out := raw
	if resp != nil {
		require.True(t, resp.Allowed)
		if len(resp.Patch) > 0 {
			require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
			p, err := jsonpatch.DecodePatch(resp.Patch)
			require.NoError(t, err)
			out, err = p.Apply(raw)
			require.NoError(t, err)
		}
	}
	pod := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(out, pod))
	return pod
}

func TestWorkloadSpreadPodCreate(t *testing.T) {
	h := newWSHarness(t, wsSpread())
	raw := wsPodRaw(t, "web-1")
	pod := wsApply(t, raw, h.a.Pod(context.Background(), wsCreate(raw)))
	require.Equal(t, `{"name":"ws","subset":"a"}`, pod.Annotations[wellknown.AnnotationMatchedWorkloadSpread])
	require.Equal(t, "a", pod.Labels["subset"])
	require.Equal(t, "zone", pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key)
	st := h.stored(t).Status.SubsetStatuses[0]
	require.Equal(t, int32(0), st.MissingReplicas)
	require.Equal(t, map[string]metav1.Time{"web-1": metav1.NewTime(wsT0)}, st.CreatingPods)

	// a is full now (the informer lags: the webhook uses what it wrote),
	// so a pod without a name goes to b, unrecorded (unlimited).
	raw = wsPodRaw(t, "")
	pod = wsApply(t, raw, h.a.Pod(context.Background(), wsCreate(raw)))
	require.Equal(t, `{"name":"ws","subset":"b"}`, pod.Annotations[wellknown.AnnotationMatchedWorkloadSpread])
	require.Equal(t, "spot", pod.Spec.Tolerations[0].Key)

	// The same pod again (reinvocation) is left alone.
	raw = wsPodRaw(t, "web-1", func(p *corev1.Pod) { p.Annotations = pod.Annotations })
	require.Nil(t, h.a.Pod(context.Background(), wsCreate(raw)))
}

func TestWorkloadSpreadPodCreateGeneratedName(t *testing.T) {
	ws := wsSpread()
	ws.Status.SubsetStatuses[0].MissingReplicas = 2
	h := newWSHarness(t, ws)
	raw := wsPodRaw(t, "")
	pod := wsApply(t, raw, h.a.Pod(context.Background(), wsCreate(raw)))
	require.Equal(t, `{"name":"ws","subset":"a","uid":"gen-uid"}`, pod.Annotations[wellknown.AnnotationMatchedWorkloadSpread])
	require.Contains(t, h.stored(t).Status.SubsetStatuses[0].CreatingPods, "gen-uid")
}

func TestWorkloadSpreadPodCreateConflict(t *testing.T) {
	h := newWSHarness(t, wsSpread())
	// Another replica placed a pod in a first: the informer's copy is stale.
	other := wsSpread()
	other.Status.SubsetStatuses[0].MissingReplicas = 0
	other.Status.SubsetStatuses[0].CreatingPods = map[string]metav1.Time{"web-0": metav1.NewTime(wsT0)}
	_, err := h.shoal.AppsV1alpha1().WorkloadSpreads("ns").UpdateStatus(context.Background(), other, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "2", h.stored(t).ResourceVersion)
	gets := 0
	h.shoal.PrependReactor("get", "workloadspreads", func(clienttesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	raw := wsPodRaw(t, "web-1")
	pod := wsApply(t, raw, h.a.Pod(context.Background(), wsCreate(raw)))
	require.Equal(t, 1, gets, "one conflict, one fresh read")
	require.Equal(t, `{"name":"ws","subset":"b"}`, pod.Annotations[wellknown.AnnotationMatchedWorkloadSpread], "re-read: a is full")
}

func TestWorkloadSpreadPodCreateUnplacedIsRetried(t *testing.T) {
	h := newWSHarness(t, wsSpread())
	h.shoal.PrependReactor("update", "workloadspreads", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd down")
	})
	raw := wsPodRaw(t, "web-1")
	resp := h.a.Pod(context.Background(), wsCreate(raw))
	require.NotNil(t, resp)
	require.False(t, resp.Allowed, "a pod created unplaced would stay outside the subsets; its workload retries instead")
	require.Equal(t, int32(http.StatusTooManyRequests), resp.Result.Code, "not a 500: the create surely did not happen")
	require.Equal(t, int32(1), resp.Result.Details.RetryAfterSeconds)
	require.Contains(t, resp.Result.Message, "WorkloadSpread ns/ws could not place the pod in a subset in time")
	require.Contains(t, resp.Result.Message, "etcd down")
	require.Contains(t, resp.Result.Message, "retry")

	// A dry run writes nothing but places the pod.
	h2 := newWSHarness(t, wsSpread())
	req := wsCreate(raw)
	req.DryRun = ptr.To(true)
	pod := wsApply(t, raw, h2.a.Pod(context.Background(), req))
	require.Equal(t, `{"name":"ws","subset":"a"}`, pod.Annotations[wellknown.AnnotationMatchedWorkloadSpread])
	require.Empty(t, h2.stored(t).Status.SubsetStatuses[0].CreatingPods)
}

func TestWorkloadSpreadPodCreateStatefulSetAndSingle(t *testing.T) {
	ws := wsSpread()
	ws.Spec.TargetReference = &v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	ws.Spec.Subsets[0].MaxReplicas = wsMax(intstr.FromInt32(1))
	h := newWSHarness(t, ws)
	for name, want := range map[string]string{"db-0": "a", "db-1": "b"} {
		raw := wsPodRaw(t, name)
		pod := wsApply(t, raw, h.a.Pod(context.Background(), wsCreate(raw)))
		require.Equal(t, `{"name":"ws","subset":"`+want+`"}`, pod.Annotations[wellknown.AnnotationMatchedWorkloadSpread], name)
	}
	require.Empty(t, h.stored(t).Status.SubsetStatuses[0].CreatingPods, "StatefulSet pods are placed by ordinal, unrecorded")
}

func TestWorkloadSpreadPodDelete(t *testing.T) {
	h := newWSHarness(t, wsSpread())
	placed := func(p *corev1.Pod) {
		p.Annotations = map[string]string{wellknown.AnnotationMatchedWorkloadSpread: `{"name":"ws","subset":"a"}`}
	}
	raw := wsPodRaw(t, "web-1", placed)
	require.Nil(t, h.a.Pod(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Namespace: "ns", Name: "web-1",
		OldObject: runtime.RawExtension{Raw: raw}}))
	st := h.stored(t).Status.SubsetStatuses[0]
	require.Equal(t, int32(2), st.MissingReplicas)
	require.Equal(t, map[string]metav1.Time{"web-1": metav1.NewTime(wsT0)}, st.DeletingPods)

	// An eviction reads the pod from the cache.
	p := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(wsPodRaw(t, "web-2", placed), p))
	h.pods["ns/web-2"] = p
	require.Nil(t, h.a.Pod(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, SubResource: "eviction",
		Namespace: "ns", Name: "web-2"}))
	require.Contains(t, h.stored(t).Status.SubsetStatuses[0].DeletingPods, "web-2")

	// A pod of subset b (unlimited), or without the annotation, is not recorded.
	raw = wsPodRaw(t, "web-3", func(p *corev1.Pod) {
		p.Annotations = map[string]string{wellknown.AnnotationMatchedWorkloadSpread: `{"name":"ws","subset":"b"}`}
	})
	h.a.Pod(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Namespace: "ns", Name: "web-3",
		OldObject: runtime.RawExtension{Raw: raw}})
	require.Empty(t, h.stored(t).Status.SubsetStatuses[1].DeletingPods)
}

func TestWorkloadSpreadJSONPatch(t *testing.T) {
	orig := []byte(`{"a":{"b":1,"c":[1,2],"d~/e":"x","gone":true},"keep":"k"}`)
	next := []byte(`{"a":{"b":2,"c":[1,2,3],"d~/e":"y","new":{"n":1}},"keep":"k"}`)
	ops, err := wsJSONPatch(orig, next)
	require.NoError(t, err)
	b, err := json.Marshal(ops)
	require.NoError(t, err)
	p, err := jsonpatch.DecodePatch(b)
	require.NoError(t, err)
	out, err := p.Apply(orig)
	require.NoError(t, err)
	require.JSONEq(t, string(next), string(out))
}

func TestValidateWorkloadSpread(t *testing.T) {
	custom := []spread.CustomWorkload{{GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}}}
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.WorkloadSpread)
		field  string // "" for valid
	}{
		{name: "valid", mutate: func(*v1alpha1.WorkloadSpread) {}},
		{name: "valid custom kind", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.TargetReference = &v1alpha1.TargetReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}
		}},
		{name: "valid percentages to 100", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[1].MaxReplicas = wsMax(intstr.FromString("50%"))
		}},
		{name: "no targetRef", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.TargetReference = nil }, field: "spec.targetRef"},
		{name: "empty name", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.TargetReference.Name = "" }, field: "spec.targetRef.name"},
		{name: "bad apiVersion", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.TargetReference.APIVersion = "a/b/c" }, field: "spec.targetRef.apiVersion"},
		{name: "unsupported kind", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.TargetReference.Kind = "DaemonSet" }, field: "spec.targetRef.kind"},
		{name: "built-in kind in another group", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.TargetReference.APIVersion = "apps.kruise.io/v1alpha1"
		}, field: "spec.targetRef.kind"},
		{name: "bad selector", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.TargetFilter = &v1alpha1.TargetFilter{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a b": "c"}}}
		}, field: "spec.targetFilter.selector"},
		{name: "empty replicas path", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.TargetFilter = &v1alpha1.TargetFilter{ReplicasPathList: []string{""}}
		}, field: "spec.targetFilter.replicasPathList[0]"},
		{name: "no subsets", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets = nil }, field: "spec.subsets"},
		{name: "subset without name", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[1].Name = "" }, field: "spec.subsets[1].name"},
		{name: "duplicate name", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[1].Name = "a" }, field: "spec.subsets[1].name"},
		{name: "bad required operator", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].RequiredNodeSelectorTerm.MatchExpressions[0].Operator = "Near"
		}, field: "spec.subsets[0].requiredNodeSelectorTerm.matchExpressions[0].operator"},
		{name: "In without values", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].RequiredNodeSelectorTerm.MatchExpressions[0].Values = nil
		}, field: "spec.subsets[0].requiredNodeSelectorTerm.matchExpressions[0].values"},
		{name: "bad key", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].RequiredNodeSelectorTerm.MatchExpressions[0].Key = "bad key"
		}, field: "spec.subsets[0].requiredNodeSelectorTerm.matchExpressions[0].key"},
		{name: "bad match field", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].RequiredNodeSelectorTerm.MatchFields = []corev1.NodeSelectorRequirement{{Key: "spec.x", Operator: "In", Values: []string{"n"}}}
		}, field: "spec.subsets[0].requiredNodeSelectorTerm.matchFields[0].key"},
		{name: "preferred weight", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].PreferredNodeSelectorTerms = []corev1.PreferredSchedulingTerm{{Weight: 0}}
		}, field: "spec.subsets[0].preferredNodeSelectorTerms[0].weight"},
		{name: "Gt not an integer", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].PreferredNodeSelectorTerms = []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cpu", Operator: "Gt", Values: []string{"x"}}}}}}
		}, field: "spec.subsets[0].preferredNodeSelectorTerms[0].preference.matchExpressions[0].values[0]"},
		{name: "toleration without key", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[1].Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpEqual, Value: "x"}}
		}, field: "spec.subsets[1].tolerations[0].operator"},
		{name: "toleration Exists with value", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[1].Tolerations[0].Value = "x"
		}, field: "spec.subsets[1].tolerations[0].value"},
		{name: "toleration seconds without NoExecute", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[1].Tolerations[0].TolerationSeconds = ptr.To[int64](5)
		}, field: "spec.subsets[1].tolerations[0].effect"},
		{name: "toleration effect", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[1].Tolerations[0].Effect = "Never" },
			field: "spec.subsets[1].tolerations[0].effect"},
		{name: "patch not JSON", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[0].Patch.Raw = []byte(`[1]`) },
			field: "spec.subsets[0].patch"},
		{name: "patch not a pod", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].Patch.Raw = []byte(`{"spec":{"containers":"x"}}`)
		}, field: "spec.subsets[0].patch"},
		{name: "mixed maxReplicas", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[1].MaxReplicas = wsMax(intstr.FromInt32(3)) },
			field: "spec.subsets[1].maxReplicas"},
		{name: "negative maxReplicas", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[0].MaxReplicas = wsMax(intstr.FromInt32(-1)) },
			field: "spec.subsets[0].maxReplicas"},
		{name: "percent over 100", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[0].MaxReplicas = wsMax(intstr.FromString("101%")) },
			field: "spec.subsets[0].maxReplicas"},
		{name: "percent not a number", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets[0].MaxReplicas = wsMax(intstr.FromString("half")) },
			field: "spec.subsets[0].maxReplicas"},
		{name: "percent sum over 100", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[1].MaxReplicas = wsMax(intstr.FromString("60%"))
		}, field: "spec.subsets[1].maxReplicas"},
		{name: "percent sum under 100 with a limited last subset", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[1].MaxReplicas = wsMax(intstr.FromString("20%"))
		}, field: "spec.subsets[0].maxReplicas"},
		{name: "StatefulSet percent", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.TargetReference = &v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "db"}
		}, field: "spec.subsets[0].maxReplicas"},
		{name: "unknown strategy", mutate: func(ws *v1alpha1.WorkloadSpread) { ws.Spec.ScheduleStrategy.Type = "Random" },
			field: "spec.scheduleStrategy.type"},
		{name: "adaptive without type", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.ScheduleStrategy.Adaptive = &v1alpha1.AdaptiveWorkloadSpreadStrategy{}
		}, field: "spec.scheduleStrategy.type"},
		{name: "adaptive with a limited last subset", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.ScheduleStrategy = v1alpha1.WorkloadSpreadScheduleStrategy{Type: "Adaptive", Adaptive: &v1alpha1.AdaptiveWorkloadSpreadStrategy{}}
			ws.Spec.Subsets[1].MaxReplicas = wsMax(intstr.FromString("50%"))
		}, field: "spec.subsets[1].maxReplicas"},
		{name: "rescheduleCriticalSeconds too long", mutate: func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.ScheduleStrategy = v1alpha1.WorkloadSpreadScheduleStrategy{Type: "Adaptive",
				Adaptive: &v1alpha1.AdaptiveWorkloadSpreadStrategy{RescheduleCriticalSeconds: ptr.To[int32](296)}}
		}, field: "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := wsSpread()
			tc.mutate(ws)
			errs := ValidateWorkloadSpread(ws, custom)
			if tc.field == "" {
				require.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			require.Equal(t, tc.field, errs[0].Field, "%v", errs)
		})
	}
}

func TestWorkloadSpreadValidateRequest(t *testing.T) {
	other := wsSpread()
	other.Name = "other"
	h := newWSHarness(t, wsSpread())
	h.spreads.items = []*v1alpha1.WorkloadSpread{other}
	req := func(op admissionv1.Operation, ws, old *v1alpha1.WorkloadSpread) *admissionv1.AdmissionRequest {
		r := &admissionv1.AdmissionRequest{Operation: op, Namespace: "ns", Name: ws.Name}
		r.Object.Raw, _ = json.Marshal(ws)
		if old != nil {
			r.OldObject.Raw, _ = json.Marshal(old)
		}
		return r
	}
	resp := h.a.Validate(context.Background(), req(admissionv1.Create, wsSpread(), nil))
	require.False(t, resp.Allowed)
	require.Contains(t, resp.Result.Message, "spec.targetRef")
	require.Contains(t, resp.Result.Message, "WorkloadSpread other already spreads")

	h.spreads.items = nil
	require.Nil(t, h.a.Validate(context.Background(), req(admissionv1.Create, wsSpread(), nil)))
	moved := wsSpread()
	moved.Spec.TargetReference.Name = "api"
	resp = h.a.Validate(context.Background(), req(admissionv1.Update, moved, wsSpread()))
	require.False(t, resp.Allowed)
	require.True(t, strings.Contains(resp.Result.Message, "spec.targetRef") && strings.Contains(resp.Result.Message, "cannot change"), resp.Result.Message)
	bumped := wsSpread()
	bumped.Spec.TargetReference.APIVersion = "apps/v2"
	require.Nil(t, h.a.Validate(context.Background(), req(admissionv1.Update, bumped, wsSpread())), "only the version changes")
}

// TestWorkloadSpreadPodCreateConcurrent places pods through two admission
// handlers (two coordinator replicas) over one API: the status write
// serializes them, so subset a (one missing replica) takes exactly one.
func TestWorkloadSpreadPodCreateConcurrent(t *testing.T) {
	h := newWSHarness(t, wsSpread())
	second := NewWorkloadSpreadAdmission(h.spreads, nil, h.shoal)
	second.now = h.a.now
	var wg sync.WaitGroup
	subsets := make([]string, 6)
	for i := range subsets {
		wg.Go(func() {
			a := h.a
			if i%2 == 1 {
				a = second
			}
			raw := wsPodRaw(t, "web-"+strconv.Itoa(i))
			resp := a.Pod(context.Background(), wsCreate(raw))
			if resp == nil || len(resp.Patch) == 0 {
				return
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				return
			}
			out, err := p.Apply(raw)
			if err != nil {
				return
			}
			pod := &corev1.Pod{}
			if json.Unmarshal(out, pod) == nil {
				subsets[i] = spread.InjectionOf(pod).Subset
			}
		})
	}
	wg.Wait()
	count := map[string]int{}
	for _, s := range subsets {
		count[s]++
	}
	require.Equal(t, map[string]int{"a": 1, "b": 5}, count)
	st := h.stored(t).Status.SubsetStatuses[0]
	require.Len(t, st.CreatingPods, 1)
	require.Equal(t, int32(0), st.MissingReplicas)
}
