package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// hook is a hook on label hold=true and finalizer example.io/hold.
func hook(markNotReady bool) *pub.LifecycleHook {
	return &pub.LifecycleHook{LabelsHandler: map[string]string{"hold": "true"}, FinalizersHandler: []string{"example.io/hold"}, MarkPodNotReady: markNotReady}
}

func pod(state wellknown.LifecycleState, labels map[string]string, finalizers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: labels, Finalizers: finalizers}, Spec: corev1.PodSpec{NodeName: "n1"}}
	if state != "" {
		SetState(p, state, time.Unix(1_700_000_000, 0))
	}
	return p
}

func TestHooked(t *testing.T) {
	h := hook(false)
	require.False(t, Hooked(h, pod("", nil)))
	require.True(t, Hooked(h, pod("", map[string]string{"hold": "true"})))
	require.False(t, Hooked(h, pod("", map[string]string{"hold": "false"})), "the label's value must match")
	require.True(t, Hooked(h, pod("", nil, "example.io/hold")))
	require.False(t, AllHooked(h, pod("", map[string]string{"hold": "true"})))
	require.True(t, AllHooked(h, pod("", map[string]string{"hold": "true"}, "example.io/hold")))
	require.True(t, AllHooked(nil, pod("", nil)))
	require.False(t, Hooked(nil, pod("", nil)))
}

func TestPreNormal(t *testing.T) {
	lc := &pub.Lifecycle{PreNormal: hook(false)}
	require.Equal(t, wellknown.LifecycleStatePreparingNormal, Initial(), "with or without a preNormal hook")
	p := pod(wellknown.LifecycleStatePreparingNormal, map[string]string{"hold": "true"})
	require.False(t, MayBecomeNormal(lc, p), "only the label: not all hooked")
	p.Finalizers = []string{"example.io/hold"}
	require.True(t, MayBecomeNormal(lc, p))
	p.Spec.NodeName = ""
	require.False(t, MayBecomeNormal(nil, p), "not scheduled yet")
}

func TestBeforeDelete(t *testing.T) {
	lc := &pub.Lifecycle{PreDelete: hook(true)}
	for _, tc := range []struct {
		name string
		lc   *pub.Lifecycle
		pod  *corev1.Pod
		want Step
	}{
		{"no hook: delete at once", nil, pod(wellknown.LifecycleStateNormal, nil), Step{Proceed: true}},
		{"hook not on the pod: delete at once", lc, pod(wellknown.LifecycleStateNormal, nil), Step{Proceed: true}},
		{"hooked: PreparingDelete, not ready", lc, pod(wellknown.LifecycleStateNormal, map[string]string{"hold": "true"}),
			Step{State: wellknown.LifecycleStatePreparingDelete, MarkNotReady: true}},
		{"still hooked: wait", lc, pod(wellknown.LifecycleStatePreparingDelete, nil, "example.io/hold"), Step{MarkNotReady: true}},
		{"released: delete", lc, pod(wellknown.LifecycleStatePreparingDelete, nil), Step{Proceed: true, MarkNotReady: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, BeforeDelete(tc.lc, tc.pod))
		})
	}
}

func TestInPlaceUpdateHooks(t *testing.T) {
	lc := &pub.Lifecycle{InPlaceUpdate: hook(false)}
	held := map[string]string{"hold": "true"}
	p := pod(wellknown.LifecycleStateNormal, held)
	require.Equal(t, Step{State: wellknown.LifecycleStatePreparingUpdate}, BeforeInPlaceUpdate(lc, p))
	p = pod(wellknown.LifecycleStatePreparingUpdate, held)
	require.Equal(t, Step{}, BeforeInPlaceUpdate(lc, p), "waits while hooked")
	p = pod(wellknown.LifecycleStatePreparingUpdate, nil)
	require.Equal(t, Step{State: wellknown.LifecycleStateUpdating, Proceed: true}, BeforeInPlaceUpdate(lc, p))
	require.Equal(t, Step{Proceed: true}, BeforeInPlaceUpdate(nil, pod(wellknown.LifecycleStateNormal, nil)), "no hook: the pod stays Normal")

	require.Equal(t, wellknown.LifecycleStateUpdated, AfterInPlaceUpdate(lc, pod(wellknown.LifecycleStateUpdating, nil)))
	require.Equal(t, wellknown.LifecycleStateNormal, AfterInPlaceUpdate(lc, pod(wellknown.LifecycleStateUpdated, held, "example.io/hold")))
	require.Equal(t, wellknown.LifecycleStateNormal, AfterInPlaceUpdate(nil, pod(wellknown.LifecycleStateUpdating, nil)))
}

func TestSetKruisePodReady(t *testing.T) {
	p := pod("", nil)
	t0 := time.Unix(1_700_000_000, 0)
	require.True(t, SetKruisePodReady(p, corev1.ConditionFalse, "PreparingDelete", "held by a preDelete hook", t0))
	require.False(t, SetKruisePodReady(p, corev1.ConditionFalse, "PreparingDelete", "held by a preDelete hook", t0.Add(time.Second)), "no change")
	require.True(t, SetKruisePodReady(p, corev1.ConditionTrue, "", "", t0.Add(2*time.Second)))
	require.Len(t, p.Status.Conditions, 1)
	require.Equal(t, t0.Add(2*time.Second).Unix(), p.Status.Conditions[0].LastTransitionTime.Unix())
	require.Equal(t, "2023-11-14T22:13:20Z", pod(wellknown.LifecycleStateNormal, nil).Annotations[wellknown.AnnotationLifecycleTimestamp])
}
