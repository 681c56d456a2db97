package podreadiness

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func pod(name string, gate bool, conds ...corev1.PodCondition) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Status:     corev1.PodStatus{Conditions: conds},
	}
	if gate {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateKruisePodReady}}
	}
	return p
}

func TestNeedsCondition(t *testing.T) {
	deleting := pod("p", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"gate, no condition", pod("p", true), true},
		{"gate, other conditions only", pod("p", true, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}), true},
		{"gate, condition True", pod("p", true, corev1.PodCondition{Type: wellknown.ConditionKruisePodReady, Status: corev1.ConditionTrue}), false},
		{"gate, condition False (held by someone)", pod("p", true, corev1.PodCondition{Type: wellknown.ConditionKruisePodReady, Status: corev1.ConditionFalse}), false},
		{"no gate", pod("p", false), false},
		{"gate, being deleted", deleting, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, NeedsCondition(tc.pod))
		})
	}
}

func TestMissingConditionsOfBothGates(t *testing.T) {
	both := pod("p", true)
	both.Spec.ReadinessGates = append(both.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady})
	require.Equal(t, []corev1.PodConditionType{wellknown.ConditionKruisePodReady, wellknown.ConditionInPlaceUpdateReady}, MissingConditions(both))

	updating := both.DeepCopy()
	updating.Status.Conditions = []corev1.PodCondition{{Type: wellknown.ConditionInPlaceUpdateReady, Status: corev1.ConditionFalse}}
	require.Equal(t, []corev1.PodConditionType{wellknown.ConditionKruisePodReady}, MissingConditions(updating),
		"an in-place update's False condition is left alone")
}

func TestAddsBothConditionsInOnePatch(t *testing.T) {
	p := pod("cloneset-pod", true)
	p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady})
	h := start(t, true, p)
	h.waitCondition(t, "cloneset-pod", corev1.ConditionTrue)
	got, err := h.kube.CoreV1().Pods("ns").Get(context.Background(), "cloneset-pod", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, MissingConditions(got))
	require.EqualValues(t, 1, h.patches.Load())
}

type harness struct {
	kube    *kubefake.Clientset
	leader  atomic.Bool
	c       *Controller
	patches atomic.Int32
}

func start(t *testing.T, leader bool, pods ...*corev1.Pod) *harness {
	t.Helper()
	h := &harness{kube: kubefake.NewClientset()}
	for _, p := range pods {
		_, err := h.kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	h.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		h.patches.Add(1)
		return false, nil, nil
	})
	h.leader.Store(leader)
	ki := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	c, err := New(Options{Client: h.kube, Pods: ki.Core().V1().Pods().Informer(), IsLeader: h.leader.Load})
	require.NoError(t, err)
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ki.Start(ctx.Done())
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; ki.Shutdown() })
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced))
	return h
}

// condition returns the pod's KruisePodReady condition, or nil.
func (h *harness) condition(t *testing.T, name string) *corev1.PodCondition {
	t.Helper()
	p, err := h.kube.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == wellknown.ConditionKruisePodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func (h *harness) waitCondition(t *testing.T, name string, status corev1.ConditionStatus) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		c := h.condition(t, name)
		return c != nil && c.Status == status, nil
	})
	require.NoError(t, err, "pod %s: KruisePodReady never became %s", name, status)
}

func TestAddsConditionToGatedPods(t *testing.T) {
	held := corev1.PodCondition{Type: wellknown.ConditionKruisePodReady, Status: corev1.ConditionFalse, Message: `[{"userAgent":"ContainerRecreateRequest","key":"ns/crr"}]`}
	h := start(t, true, pod("gated", true), pod("plain", false), pod("held", true, held))

	h.waitCondition(t, "gated", corev1.ConditionTrue)
	require.False(t, h.condition(t, "gated").LastTransitionTime.IsZero(), "lastTransitionTime set")

	// A new pod with the gate gets it too.
	_, err := h.kube.CoreV1().Pods("ns").Create(context.Background(), pod("later", true), metav1.CreateOptions{})
	require.NoError(t, err)
	h.waitCondition(t, "later", corev1.ConditionTrue)

	require.Nil(t, h.condition(t, "plain"), "a pod without the gate is left alone")
	got := h.condition(t, "held")
	require.Equal(t, corev1.ConditionFalse, got.Status, "a condition someone holds False is never turned True")
	require.Equal(t, held.Message, got.Message)
	require.EqualValues(t, 2, h.patches.Load(), "one patch per pod that needed it")
}

func TestStandbyWritesNothingUntilItLeads(t *testing.T) {
	h := start(t, false, pod("gated", true))
	// Give the standby's queue time to drain: the pod was queued on the
	// informer's initial list and synced (as a no-op) by now.
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return h.c.queue.Len() == 0, nil
	}))
	require.Nil(t, h.condition(t, "gated"))
	require.Zero(t, h.patches.Load())

	h.leader.Store(true)
	h.c.Resync()
	h.waitCondition(t, "gated", corev1.ConditionTrue)
}
