package podunavailablebudget

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func budget(mutate ...func(*policyv1alpha1.PodUnavailableBudget)) *policyv1alpha1.PodUnavailableBudget {
	p := &policyv1alpha1.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pub", Namespace: "ns", Generation: 2, UID: "pub-uid"},
		Spec: policyv1alpha1.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func maxUnavailable(v intstr.IntOrString) func(*policyv1alpha1.PodUnavailableBudget) {
	return func(p *policyv1alpha1.PodUnavailableBudget) { p.Spec.MaxUnavailable, p.Spec.MinAvailable = &v, nil }
}

func minAvailable(v intstr.IntOrString) func(*policyv1alpha1.PodUnavailableBudget) {
	return func(p *policyv1alpha1.PodUnavailableBudget) { p.Spec.MaxUnavailable, p.Spec.MinAvailable = nil, &v }
}

func TestDesiredAvailable(t *testing.T) {
	tests := []struct {
		name  string
		pub   *policyv1alpha1.PodUnavailableBudget
		total int32
		want  int32
	}{
		{"maxUnavailable 1 of 3", budget(), 3, 2},
		// The seed's example: cloneset.replicas(5) * 60% = 3 unavailable.
		{"maxUnavailable 60% of 5 (the seed's example)", budget(maxUnavailable(intstr.FromString("60%"))), 5, 2},
		{"minAvailable 40% of 5 (the seed's example)", budget(minAvailable(intstr.FromString("40%"))), 5, 2},
		{"maxUnavailable rounds up: 25% of 2 is 1", budget(maxUnavailable(intstr.FromString("25%"))), 2, 1},
		{"maxUnavailable 25% of 10 is 3", budget(maxUnavailable(intstr.FromString("25%"))), 10, 7},
		{"maxUnavailable 20% of 5 is 1", budget(maxUnavailable(intstr.FromString("20%"))), 5, 4},
		{"maxUnavailable 0", budget(maxUnavailable(intstr.FromInt32(0))), 4, 4},
		{"maxUnavailable 100%", budget(maxUnavailable(intstr.FromString("100%"))), 4, 0},
		{"maxUnavailable above total", budget(maxUnavailable(intstr.FromInt32(9))), 4, 0},
		{"minAvailable rounds up: 50% of 3 is 2", budget(minAvailable(intstr.FromString("50%"))), 3, 2},
		{"minAvailable as an integer is taken as is", budget(minAvailable(intstr.FromInt32(5))), 3, 5},
		{"maxUnavailable wins over minAvailable", budget(func(p *policyv1alpha1.PodUnavailableBudget) {
			p.Spec.MinAvailable = ptr.To(intstr.FromInt32(3))
		}), 3, 2},
		{"no pods", budget(maxUnavailable(intstr.FromString("60%"))), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DesiredAvailable(tt.pub, tt.total)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	_, err := DesiredAvailable(budget(maxUnavailable(intstr.FromString("many"))), 3)
	require.ErrorContains(t, err, `spec.maxUnavailable "many"`)
}

func TestProtectedOperationsAndAnnotations(t *testing.T) {
	annotated := func(k, v string) *policyv1alpha1.PodUnavailableBudget {
		return budget(func(p *policyv1alpha1.PodUnavailableBudget) { p.Annotations = map[string]string{k: v} })
	}
	t.Run("operations", func(t *testing.T) {
		tests := []struct {
			name string
			pub  *policyv1alpha1.PodUnavailableBudget
			want []wellknown.PubOperation
		}{
			{"default", budget(), DefaultProtectedOperations},
			{"empty is the default", annotated(wellknown.AnnotationPubProtectOperations, " "), DefaultProtectedOperations},
			{"one", annotated(wellknown.AnnotationPubProtectOperations, "DELETE"), []wellknown.PubOperation{wellknown.PubOperationDelete}},
			{"blanks", annotated(wellknown.AnnotationPubProtectOperations, "EVICT, UPDATE"), []wellknown.PubOperation{wellknown.PubOperationEvict, wellknown.PubOperationUpdate}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				require.Equal(t, tt.want, ProtectedOperations(tt.pub))
			})
		}
		require.False(t, Protects(annotated(wellknown.AnnotationPubProtectOperations, "DELETE"), wellknown.PubOperationEvict))
		require.True(t, Protects(budget(), wellknown.PubOperationUpdate))
	})
	t.Run("total replicas", func(t *testing.T) {
		tests := []struct {
			name  string
			pub   *policyv1alpha1.PodUnavailableBudget
			total int32
			ok    bool
			err   bool
		}{
			{"absent", budget(), 0, false, false},
			{"set", annotated(wellknown.AnnotationPubProtectTotalReplicas, "10"), 10, true, false},
			{"zero", annotated(wellknown.AnnotationPubProtectTotalReplicas, "0"), 0, true, false},
			{"not a number", annotated(wellknown.AnnotationPubProtectTotalReplicas, "x"), 0, false, true},
			{"negative", annotated(wellknown.AnnotationPubProtectTotalReplicas, "-2"), 0, false, true},
			{"beyond int32", annotated(wellknown.AnnotationPubProtectTotalReplicas, "3000000000"), 0, false, true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				total, ok, err := TotalReplicasOverride(tt.pub)
				require.Equal(t, tt.err, err != nil, "%v", err)
				require.Equal(t, tt.ok, ok)
				require.Equal(t, tt.total, total)
			})
		}
	})
	t.Run("no-protect", func(t *testing.T) {
		for v, want := range map[string]bool{"true": true, "True": true, "1": true, "false": false, "": false, "yes": false} {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{wellknown.AnnotationPubNoProtect: v}}}
			require.Equal(t, want, NoProtect(p), "value %q", v)
		}
		require.False(t, NoProtect(&corev1.Pod{}))
	})
}

// pod is a pod of the budget's namespace labelled app=web, ready unless
// mutated, created at t0 - 1h.
func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

func TestPodPredicates(t *testing.T) {
	digest := "sha256:0123"
	tests := []struct {
		name                      string
		pod                       *corev1.Pod
		active, ready, consistent bool
	}{
		{"ready", pod("a"), true, true, true},
		{"not ready", pod("a", notReady), true, false, true},
		{"pending", pod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), true, false, true},
		{"finished", pod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false, false, true},
		{"being deleted", pod("a", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), false, true, true},
		{"labelled unavailable", pod("a", func(p *corev1.Pod) { p.Labels[wellknown.LabelUnavailablePodPrefix+"x"] = "y" }), true, false, true},
		{"a readiness gate False", pod("a", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionInPlaceUpdateReady}}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: wellknown.ConditionInPlaceUpdateReady, Status: corev1.ConditionFalse})
		}), true, false, true},
		{"runs its digest", pod("a", func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "registry.example/app@" + digest
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ImageID: "registry.example/app@" + digest}}
		}), true, true, true},
		{"runs another digest", pod("a", func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "registry.example/app@" + digest
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ImageID: "registry.example/app@sha256:9999"}}
		}), true, true, false},
		{"an in-place update not applied yet", pod("a", func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.AnnotationInPlaceUpdateState: `{"revision":"r2","lastContainerStatuses":{"app":{"imageID":"old"}}}`}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "registry.example/app:v1", ImageID: "old"}}
			p.Spec.Containers[0].Image = "registry.example/app:v2"
		}), true, true, false},
		{"an in-place update done", pod("a", func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.AnnotationInPlaceUpdateState: `{"revision":"r2","lastContainerStatuses":{"app":{"imageID":"old"}}}`}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "registry.example/app:v2", ImageID: "new"}}
		}), true, true, true},
		{"an in-place update with a batch to go", pod("a", func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.AnnotationInPlaceUpdateState: `{"revision":"r2","nextContainerImages":{"side":"s:v2"}}`}
		}), true, true, false},
		{"a corrupt in-place update state", pod("a", func(p *corev1.Pod) {
			p.Annotations = map[string]string{wellknown.AnnotationInPlaceUpdateState: `{`}
		}), true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.active, Active(tt.pod), "active")
			require.Equal(t, tt.ready, PodReady(tt.pod), "ready")
			require.Equal(t, tt.consistent, PodConsistent(tt.pod), "consistent")
			require.Equal(t, tt.active && tt.ready && tt.consistent, Available(tt.pod), "available")
		})
	}
}

func TestRecord(t *testing.T) {
	p := budget(func(p *policyv1alpha1.PodUnavailableBudget) { p.Status.UnavailableAllowed = 2 })
	Record(p, "a", wellknown.PubOperationDelete, t0)
	Record(p, "b", wellknown.PubOperationEvict, t0)
	Record(p, "c", wellknown.PubOperationUpdate, t0)
	require.Equal(t, int32(-1), p.Status.UnavailableAllowed)
	require.Equal(t, map[string]metav1.Time{"a": metav1.NewTime(t0), "b": metav1.NewTime(t0)}, p.Status.DisruptedPods)
	require.Equal(t, map[string]metav1.Time{"c": metav1.NewTime(t0)}, p.Status.UnavailablePods)
	for _, name := range []string{"a", "b", "c"} {
		require.True(t, Recorded(p, name))
	}
	require.False(t, Recorded(p, "d"))
}

func TestComputeStatus(t *testing.T) {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	tests := []struct {
		name       string
		pub        *policyv1alpha1.PodUnavailableBudget
		pods       []*corev1.Pod
		total      int32
		want       policyv1alpha1.PodUnavailableBudgetStatus
		recheck    time.Time
		notDeleted []string
	}{
		{
			name:  "all available",
			pub:   budget(),
			pods:  []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			total: 3,
			want:  policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 1, CurrentAvailable: 3, DesiredAvailable: 2, TotalReplicas: 3},
		},
		{
			name:  "unavailable pods count nothing; allowed is never negative",
			pub:   budget(),
			pods:  []*corev1.Pod{pod("a"), pod("b", notReady), pod("c", notReady), pod("d", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(at(0)) })},
			total: 3,
			want:  policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 0, CurrentAvailable: 1, DesiredAvailable: 2, TotalReplicas: 3},
		},
		{
			name: "a disrupted pod still there is not counted until DeletionTimeout",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Status.DisruptedPods = map[string]metav1.Time{"a": at(-time.Minute)}
			}),
			pods:    []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			total:   3,
			want:    policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 0, CurrentAvailable: 2, DesiredAvailable: 2, TotalReplicas: 3, DisruptedPods: map[string]metav1.Time{"a": at(-time.Minute)}},
			recheck: t0.Add(time.Minute),
		},
		{
			name: "a disrupted pod still there after DeletionTimeout counts again, NotDeleted",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Status.DisruptedPods = map[string]metav1.Time{"a": at(-DeletionTimeout)}
			}),
			pods:       []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			total:      3,
			want:       policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 1, CurrentAvailable: 3, DesiredAvailable: 2, TotalReplicas: 3},
			notDeleted: []string{"a"},
		},
		{
			name: "records of pods gone, being deleted or replaced under the same name are dropped",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Status.DisruptedPods = map[string]metav1.Time{"gone": at(-time.Second), "b": at(-time.Second), "c": at(-2 * time.Hour)}
				p.Status.UnavailablePods = map[string]metav1.Time{"gone2": at(-time.Second)}
			}),
			pods: []*corev1.Pod{pod("a"), pod("b", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(at(0)) }),
				// c was recreated after its record (a StatefulSet pod).
				pod("c", func(p *corev1.Pod) { p.CreationTimestamp = at(-time.Hour) })},
			total: 3,
			want:  policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 0, CurrentAvailable: 2, DesiredAvailable: 2, TotalReplicas: 3},
		},
		{
			name: "an updated pod stays recorded for UpdateCheckDelay even if it looks ready",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Status.UnavailablePods = map[string]metav1.Time{"a": at(-time.Second)}
			}),
			pods:    []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			total:   3,
			want:    policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 0, CurrentAvailable: 2, DesiredAvailable: 2, TotalReplicas: 3, UnavailablePods: map[string]metav1.Time{"a": at(-time.Second)}},
			recheck: t0.Add(UpdateCheckDelay - time.Second),
		},
		{
			name: "an updated pod that is ready again after UpdateCheckDelay counts again",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Status.UnavailablePods = map[string]metav1.Time{"a": at(-UpdateCheckDelay)}
			}),
			pods:  []*corev1.Pod{pod("a"), pod("b"), pod("c")},
			total: 3,
			want:  policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 1, CurrentAvailable: 3, DesiredAvailable: 2, TotalReplicas: 3},
		},
		{
			name: "an updated pod not ready yet stays recorded, without a timed recheck",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Status.UnavailablePods = map[string]metav1.Time{"a": at(-time.Hour)}
			}),
			pods:  []*corev1.Pod{pod("a", notReady), pod("b"), pod("c")},
			total: 3,
			want:  policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: 0, CurrentAvailable: 2, DesiredAvailable: 2, TotalReplicas: 3, UnavailablePods: map[string]metav1.Time{"a": at(-time.Hour)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := computeStatus(tt.pub, tt.pods, tt.total, t0)
			require.NoError(t, err)
			require.Equal(t, tt.want, out.status)
			require.Equal(t, tt.recheck, out.recheck)
			require.Equal(t, tt.notDeleted, out.notDeleted)
		})
	}
}
