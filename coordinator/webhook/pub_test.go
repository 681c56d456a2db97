package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/podops"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
)

// fakeBudgets serves budgets by selector from a fixed list, as the
// controller's BudgetFor does for selector budgets.
type fakeBudgets struct {
	mu   sync.Mutex
	pubs []*policyv1alpha1.PodUnavailableBudget
	err  error
}

func (f *fakeBudgets) BudgetFor(pod *corev1.Pod) (*policyv1alpha1.PodUnavailableBudget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	for _, p := range f.pubs {
		sel, _ := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if p.Namespace == pod.Namespace && p.DeletionTimestamp == nil && sel.Matches(labels.Set(pod.Labels)) {
			return p, nil
		}
	}
	return nil, nil
}

func (f *fakeBudgets) Budgets(namespace string) ([]*policyv1alpha1.PodUnavailableBudget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*policyv1alpha1.PodUnavailableBudget
	for _, p := range f.pubs {
		if p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out, f.err
}

// testPub covers app=web in ns with maxUnavailable 1 and the given
// unavailableAllowed (current 3, desired 2 when allowed is 1).
func testPub(allowed int32, mutate ...func(*policyv1alpha1.PodUnavailableBudget)) *policyv1alpha1.PodUnavailableBudget {
	p := &policyv1alpha1.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pub", Namespace: "ns", UID: "pub-uid", ResourceVersion: "10", Generation: 1},
		Spec: policyv1alpha1.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
		Status: policyv1alpha1.PodUnavailableBudgetStatus{
			ObservedGeneration: 1, UnavailableAllowed: allowed, CurrentAvailable: 2 + allowed, DesiredAvailable: 2, TotalReplicas: 3,
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// readyPod is a running, ready pod labelled app=web in ns with the
// InPlaceUpdateReady readiness gate True.
func readyPod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionInPlaceUpdateReady}},
			Containers:     []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: wellknown.ConditionInPlaceUpdateReady, Status: corev1.ConditionTrue},
		}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// pubHarness is the admission over a fake clientset whose status updates
// check and bump resourceVersions like the apiserver.
type pubHarness struct {
	a       *PodUnavailableBudgetAdmission
	budgets *fakeBudgets
	shoal   *shoalfake.Clientset
	pods    map[string]*corev1.Pod
	// conflicts makes that many status updates fail with a conflict
	// (before the resourceVersion check).
	conflicts int
	writes    int
	mu        sync.Mutex
}

var pubResource = schema.GroupVersionResource{Group: "policy.kruise.io", Version: "v1alpha1", Resource: "podunavailablebudgets"}

func newPubHarness(t *testing.T, pubs ...*policyv1alpha1.PodUnavailableBudget) *pubHarness {
	t.Helper()
	h := &pubHarness{budgets: &fakeBudgets{}, shoal: shoalfake.NewSimpleClientset(), pods: map[string]*corev1.Pod{}}
	for _, p := range pubs {
		require.NoError(t, h.shoal.Tracker().Add(p.DeepCopy()))
		h.budgets.pubs = append(h.budgets.pubs, p)
	}
	h.shoal.PrependReactor("update", "podunavailablebudgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction)
		in := u.GetObject().(*policyv1alpha1.PodUnavailableBudget)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.conflicts > 0 {
			h.conflicts--
			return true, nil, apierrors.NewConflict(pubResource.GroupResource(), in.Name, nil)
		}
		cur, err := h.shoal.Tracker().Get(pubResource, in.Namespace, in.Name)
		if err != nil {
			return true, nil, err
		}
		out := cur.(*policyv1alpha1.PodUnavailableBudget).DeepCopy()
		if out.ResourceVersion != in.ResourceVersion {
			return true, nil, apierrors.NewConflict(pubResource.GroupResource(), in.Name, nil)
		}
		rv, _ := strconv.Atoi(out.ResourceVersion)
		out.ResourceVersion = strconv.Itoa(rv + 1)
		out.Status = in.Status
		h.writes++
		return true, out, h.shoal.Tracker().Update(pubResource, out, in.Namespace)
	})
	pods := PodGetterFunc(func(ns, name string) (*corev1.Pod, error) {
		if p, ok := h.pods[ns+"/"+name]; ok {
			return p, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	})
	h.a = NewPodUnavailableBudgetAdmission(h.budgets, pods, h.shoal, nil)
	h.a.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	return h
}

// stored is the budget as the API has it.
func (h *pubHarness) stored(t *testing.T) *policyv1alpha1.PodUnavailableBudget {
	t.Helper()
	got, err := h.shoal.PolicyV1alpha1().PodUnavailableBudgets("ns").Get(context.Background(), "web-pub", metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

func rawPod(t *testing.T, p *corev1.Pod) runtime.RawExtension {
	t.Helper()
	if p == nil {
		return runtime.RawExtension{}
	}
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	return runtime.RawExtension{Raw: raw}
}

func podRequest(t *testing.T, op admissionv1.Operation, sub string, old, obj *corev1.Pod) *admissionv1.AdmissionRequest {
	t.Helper()
	name := ""
	if old != nil {
		name = old.Name
	} else if obj != nil {
		name = obj.Name
	}
	return &admissionv1.AdmissionRequest{
		Operation: op, SubResource: sub, Namespace: "ns", Name: name,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: rawPod(t, obj), OldObject: rawPod(t, old),
	}
}

func evictionRequest(t *testing.T, pod string, dryRun bool) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "ns"}})
	require.NoError(t, err)
	return &admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, SubResource: "eviction", Namespace: "ns", Name: pod, DryRun: ptr.To(dryRun),
		Kind:   metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Object: runtime.RawExtension{Raw: raw},
	}
}

func withImage(image string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Image = image }
}

func withCondition(t corev1.PodConditionType, status corev1.ConditionStatus, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = status, reason
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason})
	}
}

func TestPodUnavailableBudgetValidatePod(t *testing.T) {
	gateKruise := func(p *corev1.Pod) {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ConditionKruisePodReady})
		withCondition(wellknown.ConditionKruisePodReady, corev1.ConditionTrue, "")(p)
	}
	tests := []struct {
		name string
		pub  *policyv1alpha1.PodUnavailableBudget
		// cached is the pod an eviction reads.
		cached *corev1.Pod
		req    func(t *testing.T) *admissionv1.AdmissionRequest
		// denied: the code and message parts of a refusal; nil allows.
		deniedCode int32
		denied     []string
		// disrupted and unavailable are the pods recorded after the
		// request, with unavailableAllowed.
		disrupted, unavailable []string
		allowedAfter           int32
		terminating            bool
	}{
		{
			name: "delete within the budget is recorded in disruptedPods",
			pub:  testPub(1),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil)
			},
			disrupted: []string{"web-0"}, allowedAfter: 0,
		},
		{
			name: "delete beyond the budget is refused with the budget and its numbers",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil)
			},
			deniedCode: http.StatusForbidden,
			denied: []string{"PodUnavailableBudget ns/web-pub does not allow deleting pod web-0", "unavailableAllowed is 0",
				"currentAvailable 2, desiredAvailable 2, totalReplicas 3", "pub.kruise.io/no-protect=true"},
		},
		{
			name:       "eviction beyond the budget is refused with 429, as a PodDisruptionBudget refuses",
			pub:        testPub(0),
			cached:     readyPod("web-0"),
			req:        func(t *testing.T) *admissionv1.AdmissionRequest { return evictionRequest(t, "web-0", false) },
			deniedCode: http.StatusTooManyRequests,
			denied:     []string{"does not allow evicting pod web-0"},
		},
		{
			name:      "eviction within the budget is recorded in disruptedPods",
			pub:       testPub(2),
			cached:    readyPod("web-0"),
			req:       func(t *testing.T) *admissionv1.AdmissionRequest { return evictionRequest(t, "web-0", false) },
			disrupted: []string{"web-0"}, allowedAfter: 1,
		},
		{
			name:         "a dry-run eviction is checked but records nothing",
			pub:          testPub(1),
			cached:       readyPod("web-0"),
			req:          func(t *testing.T) *admissionv1.AdmissionRequest { return evictionRequest(t, "web-0", true) },
			allowedAfter: 1,
		},
		{
			name:       "a dry-run eviction beyond the budget is refused",
			pub:        testPub(0),
			cached:     readyPod("web-0"),
			req:        func(t *testing.T) *admissionv1.AdmissionRequest { return evictionRequest(t, "web-0", true) },
			deniedCode: http.StatusTooManyRequests,
			denied:     []string{"unavailableAllowed is 0"},
		},
		{
			name: "eviction of an unknown pod is let through",
			pub:  testPub(0),
			req:  func(t *testing.T) *admissionv1.AdmissionRequest { return evictionRequest(t, "gone", false) },
		},
		{
			name: "a pod annotated no-protect true is exempt",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0", func(p *corev1.Pod) {
					p.Annotations = map[string]string{wellknown.AnnotationPubNoProtect: "true"}
				}), nil)
			},
		},
		{
			name: "no-protect false protects",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0", func(p *corev1.Pod) {
					p.Annotations = map[string]string{wellknown.AnnotationPubNoProtect: "false"}
				}), nil)
			},
			deniedCode: http.StatusForbidden, denied: []string{"does not allow deleting"},
		},
		{
			name: "a pod that is not ready counts for nothing",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0", withCondition(corev1.PodReady, corev1.ConditionFalse, "")), nil)
			},
		},
		{
			name: "a pod labelled unavailable counts for nothing",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0", func(p *corev1.Pod) {
					p.Labels[wellknown.LabelUnavailablePodPrefix+"maintenance"] = "true"
				}), nil)
			},
		},
		{
			name: "a pod not running its digest (inconsistent) counts for nothing",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0", withImage("registry.example/app@sha256:aaaa"), func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ImageID: "registry.example/app@sha256:bbbb"}}
				}), nil)
			},
		},
		{
			name: "a pod already being deleted is let through",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }), nil)
			},
		},
		{
			name: "a pod no budget covers is let through",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("db-0", func(p *corev1.Pod) { p.Labels["app"] = "db" }), nil)
			},
		},
		{
			name: "a pod already recorded is let through without another record",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Status.DisruptedPods = map[string]metav1.Time{"web-0": metav1.Now()}
			}),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil)
			},
			disrupted: []string{"web-0"},
		},
		{
			name: "desiredAvailable 0 lets everything through",
			pub:  testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) { p.Status.DesiredAvailable = 0 }),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil)
			},
		},
		{
			name: "an operation left out of pub-protect-operations is let through",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectOperations: "DELETE"}
			}),
			cached: readyPod("web-0"),
			req:    func(t *testing.T) *admissionv1.AdmissionRequest { return evictionRequest(t, "web-0", false) },
		},
		{
			name: "an operation listed in pub-protect-operations is guarded",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectOperations: "DELETE, EVICT"}
			}),
			cached:     readyPod("web-0"),
			req:        func(t *testing.T) *admissionv1.AdmissionRequest { return evictionRequest(t, "web-0", false) },
			deniedCode: http.StatusTooManyRequests, denied: []string{"evicting"},
		},
		{
			name: "an image update within the budget is recorded in unavailablePods",
			pub:  testPub(1),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "", readyPod("web-0"), readyPod("web-0", withImage("registry.example/app:v2")))
			},
			unavailable: []string{"web-0"}, allowedAfter: 0,
		},
		{
			name: "an image update beyond the budget is refused",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "", readyPod("web-0"), readyPod("web-0", withImage("registry.example/app:v2")))
			},
			deniedCode: http.StatusForbidden, denied: []string{"does not allow updating pod web-0"},
		},
		{
			name: "an image update is let through when UPDATE is not guarded",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectOperations: "DELETE,EVICT"}
			}),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "", readyPod("web-0"), readyPod("web-0", withImage("registry.example/app:v2")))
			},
		},
		{
			name: "adding an unavailable-pod label beyond the budget is refused",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "", readyPod("web-0"), readyPod("web-0", func(p *corev1.Pod) {
					p.Labels[wellknown.LabelUnavailablePodPrefix+"data"] = "true"
				}))
			},
			deniedCode: http.StatusForbidden, denied: []string{"updating"},
		},
		{
			name: "a metadata-only update is let through",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "", readyPod("web-0"), readyPod("web-0", func(p *corev1.Pod) { p.Labels["tier"] = "x" }))
			},
		},
		{
			name: "an in-place update's InPlaceUpdateReady False beyond the budget is refused",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "status", readyPod("web-0"),
					readyPod("web-0", withCondition(wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, "StartInPlaceUpdate")))
			},
			deniedCode: http.StatusForbidden, denied: []string{"does not allow updating pod web-0"},
		},
		{
			name: "an in-place update's InPlaceUpdateReady False within the budget is recorded in unavailablePods",
			pub:  testPub(1),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "status", readyPod("web-0"),
					readyPod("web-0", withCondition(wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, "StartInPlaceUpdate")))
			},
			unavailable: []string{"web-0"}, allowedAfter: 0,
		},
		{
			name: "the inPlaceUpdate hook's KruisePodReady False is an in-place update",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "status", readyPod("web-0", gateKruise),
					readyPod("web-0", gateKruise, withCondition(wellknown.ConditionKruisePodReady, corev1.ConditionFalse, podops.ReasonPreparingUpdate)))
			},
			deniedCode: http.StatusForbidden, denied: []string{"updating"},
		},
		{
			name: "KruisePodReady False for another reason (a CRR, the preDelete hook) is not",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "status", readyPod("web-0", gateKruise),
					readyPod("web-0", gateKruise, withCondition(wellknown.ConditionKruisePodReady, corev1.ConditionFalse, "PreparingDelete")))
			},
		},
		{
			name: "a condition without a readiness gate changes no readiness",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				noGate := func(p *corev1.Pod) { p.Spec.ReadinessGates = nil }
				return podRequest(t, admissionv1.Update, "status", readyPod("web-0", noGate),
					readyPod("web-0", noGate, withCondition(wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, "")))
			},
		},
		{
			name: "a status write that sets a gate True is let through",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "status",
					readyPod("web-0", withCondition(wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, "")), readyPod("web-0"))
			},
		},
		{
			name: "pods of a terminating namespace are let through",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil)
			},
			terminating: true,
		},
		{
			name: "other subresources are let through",
			pub:  testPub(0),
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Delete, "ephemeralcontainers", readyPod("web-0"), nil)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newPubHarness(t, tt.pub)
			if tt.cached != nil {
				h.pods["ns/"+tt.cached.Name] = tt.cached
			}
			h.a.WithNamespaces(func(string) bool { return tt.terminating })
			resp := h.a.ValidatePod(context.Background(), tt.req(t))
			if tt.denied != nil {
				require.NotNil(t, resp)
				require.False(t, resp.Allowed)
				require.Equal(t, tt.deniedCode, resp.Result.Code)
				for _, part := range tt.denied {
					require.Contains(t, resp.Result.Message, part)
				}
				require.Zero(t, h.writes, "a refusal writes nothing")
				return
			}
			require.True(t, resp == nil || resp.Allowed, "allowed: %+v", resp)
			got := h.stored(t)
			require.ElementsMatch(t, tt.disrupted, keysOf(got.Status.DisruptedPods))
			require.ElementsMatch(t, tt.unavailable, keysOf(got.Status.UnavailablePods))
			if len(tt.disrupted)+len(tt.unavailable) > 0 && !podunavailableRecordedBefore(tt.pub) {
				require.Equal(t, tt.allowedAfter, got.Status.UnavailableAllowed)
				require.Equal(t, 1, h.writes)
			} else {
				require.Zero(t, h.writes, "nothing to record")
			}
		})
	}
}

func keysOf(m map[string]metav1.Time) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func podunavailableRecordedBefore(p *policyv1alpha1.PodUnavailableBudget) bool {
	return len(p.Status.DisruptedPods)+len(p.Status.UnavailablePods) > 0
}

func TestPodUnavailableBudgetConflicts(t *testing.T) {
	t.Run("a conflict is retried on a fresh read", func(t *testing.T) {
		h := newPubHarness(t, testPub(1))
		h.conflicts = 1
		resp := h.a.ValidatePod(context.Background(), podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil))
		require.True(t, resp == nil || resp.Allowed)
		require.Contains(t, h.stored(t).Status.DisruptedPods, "web-0")
	})
	t.Run("a fresh read that spent the budget refuses", func(t *testing.T) {
		h := newPubHarness(t, testPub(1))
		// Another replica spent it: the informer's copy is stale.
		spent := testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
			p.ResourceVersion = "11"
			p.Status.DisruptedPods = map[string]metav1.Time{"web-1": metav1.Now()}
		})
		require.NoError(t, h.shoal.Tracker().Update(pubResource, spent, "ns"))
		resp := h.a.ValidatePod(context.Background(), podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil))
		require.NotNil(t, resp)
		require.False(t, resp.Allowed)
		require.Contains(t, resp.Result.Message, "unavailableAllowed is 0")
	})
	t.Run("conflicts beyond the attempts refuse, naming the retry", func(t *testing.T) {
		h := newPubHarness(t, testPub(1))
		h.conflicts = pubWriteAttempts
		resp := h.a.ValidatePod(context.Background(), podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil))
		require.NotNil(t, resp)
		require.False(t, resp.Allowed)
		require.Contains(t, resp.Result.Message, "could not record the disruption of pod web-0 in PodUnavailableBudget ns/web-pub")
	})
	t.Run("a budget gone meanwhile lets the pod through", func(t *testing.T) {
		h := newPubHarness(t, testPub(1))
		require.NoError(t, h.shoal.Tracker().Delete(pubResource, "ns", "web-pub"))
		resp := h.a.ValidatePod(context.Background(), podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil))
		require.True(t, resp == nil || resp.Allowed)
	})
	t.Run("a stale cache is not trusted over this replica's own write", func(t *testing.T) {
		h := newPubHarness(t, testPub(1))
		resp := h.a.ValidatePod(context.Background(), podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil))
		require.True(t, resp == nil || resp.Allowed)
		// The informer still shows unavailableAllowed 1: the written copy
		// wins, and the second delete is refused without a write.
		resp = h.a.ValidatePod(context.Background(), podRequest(t, admissionv1.Delete, "", readyPod("web-1"), nil))
		require.NotNil(t, resp)
		require.False(t, resp.Allowed)
		require.Equal(t, 1, h.writes)
	})
	t.Run("a check that cannot get the budget's lock in time refuses", func(t *testing.T) {
		h := newPubHarness(t, testPub(2))
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		h.shoal.PrependReactor("update", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			once.Do(func() { close(entered) })
			<-release
			return false, nil, nil
		})
		first := make(chan *admissionv1.AdmissionResponse, 1)
		go func() {
			first <- h.a.ValidatePod(context.Background(), podRequest(t, admissionv1.Delete, "", readyPod("web-0"), nil))
		}()
		<-entered // web-0's check holds the lock, writing the status
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		resp := h.a.ValidatePod(ctx, podRequest(t, admissionv1.Delete, "", readyPod("web-1"), nil))
		require.NotNil(t, resp)
		require.False(t, resp.Allowed)
		require.Contains(t, resp.Result.Message, "PodUnavailableBudget ns/web-pub could not check deleting pod web-1 in time")
		require.Contains(t, resp.Result.Message, "retry")
		close(release)
		resp = <-first
		require.True(t, resp == nil || resp.Allowed)
		require.Equal(t, []string{"web-0"}, keysOf(h.stored(t).Status.DisruptedPods))
	})
	t.Run("concurrent disruptions spend the budget once each", func(t *testing.T) {
		h := newPubHarness(t, testPub(2))
		var wg sync.WaitGroup
		allowed := make(chan string, 5)
		for _, name := range []string{"web-0", "web-1", "web-2", "web-3", "web-4"} {
			req := podRequest(t, admissionv1.Delete, "", readyPod(name), nil)
			wg.Go(func() {
				if resp := h.a.ValidatePod(context.Background(), req); resp == nil || resp.Allowed {
					allowed <- name
				}
			})
		}
		wg.Wait()
		close(allowed)
		var names []string
		for n := range allowed {
			names = append(names, n)
		}
		require.Len(t, names, 2)
		got := h.stored(t)
		require.ElementsMatch(t, names, keysOf(got.Status.DisruptedPods))
		require.Zero(t, got.Status.UnavailableAllowed)
	})
}

func TestPodUnavailableBudgetValidate(t *testing.T) {
	other := func(mutate func(*policyv1alpha1.PodUnavailableBudget)) *policyv1alpha1.PodUnavailableBudget {
		p := testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) { p.Name = "other" })
		mutate(p)
		return p
	}
	target := func(apiVersion, kind, name string) func(*policyv1alpha1.PodUnavailableBudget) {
		return func(p *policyv1alpha1.PodUnavailableBudget) {
			p.Spec.Selector = nil
			p.Spec.TargetReference = &policyv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: name}
		}
	}
	tests := []struct {
		name   string
		pub    *policyv1alpha1.PodUnavailableBudget
		others []*policyv1alpha1.PodUnavailableBudget
		denied []string
	}{
		{name: "a plain budget", pub: testPub(0)},
		{
			name: "known operations, blanks allowed",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectOperations: "DELETE, EVICT,UPDATE,RESIZE"}
			}),
		},
		{
			name: "an unknown operation",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectOperations: "DELETE,DRAIN"}
			}),
			denied: []string{`metadata.annotations[kruise.io/pub-protect-operations]`, `"DRAIN" is not an operation`, "DELETE, EVICT, UPDATE and RESIZE"},
		},
		{
			name: "an empty item",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectOperations: "DELETE,"}
			}),
			denied: []string{`"" is not an operation`},
		},
		{
			name: "total replicas not a number",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectTotalReplicas: "ten"}
			}),
			denied: []string{`metadata.annotations[pub.kruise.io/protect-total-replicas]`, "use a replica count from 0 to 2147483647"},
		},
		{
			name: "total replicas negative",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectTotalReplicas: "-1"}
			}),
			denied: []string{"protect-total-replicas"},
		},
		{
			name: "total replicas",
			pub: testPub(0, func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectTotalReplicas: "10"}
			}),
		},
		{
			name:   "the same workload at another version",
			pub:    testPub(0, target("apps.kruise.io/v1beta1", "CloneSet", "web")),
			others: []*policyv1alpha1.PodUnavailableBudget{other(target("apps.kruise.io/v1alpha1", "CloneSet", "web"))},
			denied: []string{"spec.targetRef", "PodUnavailableBudget other already targets this workload"},
		},
		{
			name:   "another workload",
			pub:    testPub(0, target("apps/v1", "Deployment", "web")),
			others: []*policyv1alpha1.PodUnavailableBudget{other(target("apps/v1", "Deployment", "api")), other(target("apps/v1", "StatefulSet", "web"))},
		},
		{
			name:   "an overlapping selector",
			pub:    testPub(0),
			others: []*policyv1alpha1.PodUnavailableBudget{other(func(*policyv1alpha1.PodUnavailableBudget) {})},
			denied: []string{"spec.selector", "overlaps the selector of PodUnavailableBudget other (app=web)"},
		},
		{
			name: "an overlapping selector of a budget being deleted",
			pub:  testPub(0),
			others: []*policyv1alpha1.PodUnavailableBudget{other(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.DeletionTimestamp = ptr.To(metav1.Now())
			})},
		},
		{
			name:   "its own older copy",
			pub:    testPub(0),
			others: []*policyv1alpha1.PodUnavailableBudget{testPub(0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budgets := &fakeBudgets{pubs: tt.others}
			a := NewPodUnavailableBudgetAdmission(budgets, nil, nil, nil)
			raw, err := json.Marshal(tt.pub)
			require.NoError(t, err)
			resp := a.Validate(context.Background(), &admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: "ns", Name: tt.pub.Name, Object: runtime.RawExtension{Raw: raw},
			})
			if tt.denied == nil {
				require.Nil(t, resp)
				return
			}
			require.NotNil(t, resp)
			require.False(t, resp.Allowed)
			for _, part := range tt.denied {
				require.Contains(t, resp.Result.Message, part)
			}
		})
	}
}

func TestSelectorsOverlap(t *testing.T) {
	req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	exprs := func(rs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: rs}
	}
	matchLabels := func(kv ...string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	tests := []struct {
		name string
		a, b *metav1.LabelSelector
		want bool
	}{
		{"same labels", matchLabels("app", "web"), matchLabels("app", "web"), true},
		{"other values", matchLabels("app", "web"), matchLabels("app", "db"), false},
		{"other keys (loose: not an overlap)", matchLabels("app", "web"), matchLabels("tier", "front"), false},
		{"a key more (loose: not an overlap)", matchLabels("app", "web"), matchLabels("app", "web", "tier", "front"), false},
		{"In meets Exists", matchLabels("app", "web"), exprs(req("app", metav1.LabelSelectorOpExists)), true},
		{"In meets In sharing a value", exprs(req("app", metav1.LabelSelectorOpIn, "a", "b")), exprs(req("app", metav1.LabelSelectorOpIn, "b", "c")), true},
		{"In misses In", exprs(req("app", metav1.LabelSelectorOpIn, "a")), exprs(req("app", metav1.LabelSelectorOpIn, "b")), false},
		{"In meets NotIn of another value", exprs(req("app", metav1.LabelSelectorOpIn, "a", "b")), exprs(req("app", metav1.LabelSelectorOpNotIn, "a")), true},
		{"In misses NotIn of all its values", exprs(req("app", metav1.LabelSelectorOpIn, "a", "b")), exprs(req("app", metav1.LabelSelectorOpNotIn, "a", "b", "c")), false},
		{"Exists meets NotIn", exprs(req("app", metav1.LabelSelectorOpExists)), exprs(req("app", metav1.LabelSelectorOpNotIn, "a")), true},
		{"Exists misses DoesNotExist", exprs(req("app", metav1.LabelSelectorOpExists)), exprs(req("app", metav1.LabelSelectorOpDoesNotExist)), false},
		{"NotIn meets DoesNotExist", exprs(req("app", metav1.LabelSelectorOpNotIn, "a")), exprs(req("app", metav1.LabelSelectorOpDoesNotExist)), true},
		{"DoesNotExist meets DoesNotExist", exprs(req("app", metav1.LabelSelectorOpDoesNotExist)), exprs(req("app", metav1.LabelSelectorOpDoesNotExist)), true},
		{"DoesNotExist misses In", exprs(req("app", metav1.LabelSelectorOpDoesNotExist)), matchLabels("app", "web"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, selectorsOverlap(tt.a, tt.b))
			require.Equal(t, tt.want, selectorsOverlap(tt.b, tt.a), "symmetric")
		})
	}
}

func TestUnavailableChangeAndInPlaceUpdateStarts(t *testing.T) {
	tests := []struct {
		name        string
		old, pod    *corev1.Pod
		change      bool
		inPlaceFlip bool
	}{
		{"nothing", readyPod("p"), readyPod("p"), false, false},
		{"an image", readyPod("p"), readyPod("p", withImage("x:v2")), true, false},
		{"activeDeadlineSeconds", readyPod("p"), readyPod("p", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) }), true, false},
		{"an unavailable label added", readyPod("p"), readyPod("p", func(p *corev1.Pod) { p.Labels[wellknown.LabelUnavailablePodPrefix+"x"] = "1" }), true, false},
		{"an unavailable label removed", readyPod("p", func(p *corev1.Pod) { p.Labels[wellknown.LabelUnavailablePodPrefix+"x"] = "1" }), readyPod("p"), false, false},
		{"InPlaceUpdateReady goes False", readyPod("p"), readyPod("p", withCondition(wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, "")), false, true},
		{"InPlaceUpdateReady stays False", readyPod("p", withCondition(wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, "")),
			readyPod("p", withCondition(wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, "")), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.change, UnavailableChange(tt.old, tt.pod))
			require.Equal(t, tt.inPlaceFlip, InPlaceUpdateStarts(tt.old, tt.pod))
		})
	}
}
