package recreate

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

type harness struct {
	kube     *kubefake.Clientset
	shoal    *shoalfake.Clientset
	store    *dispatch.Store
	recorder *events.FakeRecorder
	leader   bool
	mu       sync.Mutex
}

// start runs a controller over fake clients holding objs until the test ends.
func start(t *testing.T, leader bool, pod *corev1.Pod, crrs ...*v1alpha1.ContainerRecreateRequest) *harness {
	t.Helper()
	h := &harness{kube: kubefake.NewClientset(pod), store: dispatch.NewStore(), recorder: events.NewFakeRecorder(100), leader: leader}
	h.shoal = shoalfake.NewSimpleClientset()
	// Like the apiserver, an update of the status subresource changes the
	// status only (the fake would replace the whole object).
	h.shoal.PrependReactor("update", "containerrecreaterequests", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(clienttesting.UpdateAction)
		if !ok || u.GetSubresource() != "status" {
			return false, nil, nil
		}
		in := u.GetObject().(*v1alpha1.ContainerRecreateRequest)
		cur, err := h.shoal.Tracker().Get(a.GetResource(), a.GetNamespace(), in.Name)
		if err != nil {
			return true, nil, err
		}
		out := cur.(*v1alpha1.ContainerRecreateRequest).DeepCopy()
		out.Status = in.Status
		return true, out, h.shoal.Tracker().Update(a.GetResource(), out, a.GetNamespace())
	})
	for _, c := range crrs {
		_, err := h.shoal.AppsV1alpha1().ContainerRecreateRequests(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// The real writer, fast: it retries writes that lose a race with the
	// informer (conflicts), as in the coordinator.
	writer, err := statuswriter.New(statuswriter.Options{MinInterval: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	require.NoError(t, err)
	ki := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	si := shoalinformers.NewSharedInformerFactory(h.shoal, 0)
	c, err := New(Options{
		Client: h.kube, Shoal: h.shoal,
		Requests: si.Apps().V1alpha1().ContainerRecreateRequests().Informer(), Pods: ki.Core().V1().Pods().Informer(),
		Store: h.store, Writer: writer, Recorder: h.recorder,
		IsLeader: func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.leader },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	ki.Start(ctx.Done())
	si.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced))
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); _ = writer.Run(ctx) }()
	go func() { defer close(done); _ = c.Run(ctx); <-writerDone }()
	return h
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 10*time.Millisecond, append([]any{msg}, args...)...)
}

func (h *harness) crr(t *testing.T, name string) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	c, err := h.shoal.AppsV1alpha1().ContainerRecreateRequests("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return c
}

func (h *harness) report(name string, phase nodeworkv1.Phase, states ...*nodeworkv1.RecreateContainerState) {
	id := nodework.RecreateID("default", name)
	item, _ := h.store.Item("node-1", id)
	h.store.Report("node-1", &nodeworkv1.WorkReport{Id: id, ObservedGeneration: item.GetGeneration(), Kind: nodework.KindRecreate, Phase: phase,
		Status: &nodeworkv1.WorkReport_Recreate{Recreate: &nodeworkv1.RecreateStatus{Containers: states}}})
}

func (h *harness) holds(name string) bool {
	it, _ := h.store.Item("node-1", nodework.RecreateID("default", name))
	return it != nil
}

func liveCRR(name string, created time.Time) *v1alpha1.ContainerRecreateRequest {
	c := testCRR(name, created)
	c.Labels[wellknown.LabelCRRActive] = "true"
	return c
}

func succeeded(name string) *nodeworkv1.RecreateContainerState {
	return &nodeworkv1.RecreateContainerState{Name: name, Phase: nodeworkv1.RecreatePhase_RECREATE_PHASE_SUCCEEDED, IsKilled: true}
}

func TestControllerRecreatesAndCleansUp(t *testing.T) {
	crr := liveCRR("crr", time.Now())
	crr.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	h := start(t, true, testPod(), crr)

	eventually(t, func() bool { return h.holds("crr") }, "node-1 holds the recreate work")
	item, _ := h.store.Item("node-1", nodework.RecreateID("default", "crr"))
	require.Equal(t, "uid-1", item.GetRecreate().GetPodUid())
	eventually(t, func() bool { return h.crr(t, "crr").Status.Phase == v1alpha1.ContainerRecreateRequestPending }, "status Pending")

	h.report("crr", nodeworkv1.Phase_PHASE_RUNNING, succeeded("app"),
		&nodeworkv1.RecreateContainerState{Name: "sidecar", Phase: nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING, IsKilled: true})
	eventually(t, func() bool { return h.crr(t, "crr").Status.Phase == v1alpha1.ContainerRecreateRequestRecreating }, "status Recreating")
	require.Equal(t, []v1alpha1.ContainerRecreateRequestContainerRecreateState{
		{Name: "app", Phase: "Succeeded", IsKilled: true}, {Name: "sidecar", Phase: "Recreating", IsKilled: true},
	}, h.crr(t, "crr").Status.ContainerRecreateStates)

	h.report("crr", nodeworkv1.Phase_PHASE_SUCCEEDED, succeeded("app"), succeeded("sidecar"))
	// TTL 0: completed, its active label removed, then deleted.
	eventually(t, func() bool { return h.crr(t, "crr") == nil }, "request deleted after its TTL")
	eventually(t, func() bool { return !h.holds("crr") }, "work removed from the node")

	var seen []string
	for len(h.recorder.Events) > 0 {
		seen = append(seen, <-h.recorder.Events)
	}
	joined := strings.Join(seen, "\n")
	require.Contains(t, joined, "Normal Recreating Recreating containers app, sidecar of pod web-0")
	require.Contains(t, joined, "Normal Completed Recreated containers app, sidecar")
}

func TestControllerRemovesActiveLabelAndKeepsWithoutTTL(t *testing.T) {
	h := start(t, true, testPod(), liveCRR("crr", time.Now()))
	eventually(t, func() bool { return h.holds("crr") }, "dispatched")
	h.report("crr", nodeworkv1.Phase_PHASE_SUCCEEDED, succeeded("app"), succeeded("sidecar"))
	eventually(t, func() bool {
		c := h.crr(t, "crr")
		_, active := c.Labels[wellknown.LabelCRRActive]
		return c.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted && !active
	}, "Completed and the active label removed")
	c := h.crr(t, "crr")
	require.NotNil(t, c.Status.CompletionTime)
	require.Empty(t, c.Status.Message)
	require.Equal(t, "uid-1", c.Labels[wellknown.LabelCRRPodUID], "other labels kept")
}

func TestControllerQueuesRequestsOfOnePod(t *testing.T) {
	now := time.Now()
	h := start(t, true, testPod(), liveCRR("second", now), liveCRR("first", now.Add(-time.Second)), liveCRR("third", now.Add(time.Second)))
	eventually(t, func() bool { return h.holds("first") }, "the oldest is dispatched")
	eventually(t, func() bool {
		return h.crr(t, "second").Status.Message == "waiting for first, created earlier for the same pod" &&
			h.crr(t, "third").Status.Message == "waiting for first, created earlier for the same pod"
	}, "the others say what they wait for")
	require.False(t, h.holds("second"))
	require.False(t, h.holds("third"))

	for i, name := range []string{"first", "second", "third"} {
		eventually(t, func() bool { return h.holds(name) }, "%s dispatched", name)
		h.report(name, nodeworkv1.Phase_PHASE_SUCCEEDED, succeeded("app"), succeeded("sidecar"))
		eventually(t, func() bool { return h.crr(t, name).Status.Phase == v1alpha1.ContainerRecreateRequestCompleted }, "%s completed (#%d)", name, i+1)
	}
}

func TestControllerHoldsPodUnready(t *testing.T) {
	pod := testPod()
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateKruisePodReady}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: wellknown.ConditionKruisePodReady, Status: corev1.ConditionTrue}}
	crr := liveCRR("crr", time.Now())
	crr.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](0)
	h := start(t, true, pod, crr)

	condition := func() corev1.PodCondition {
		p, err := h.kube.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range p.Status.Conditions {
			if c.Type == wellknown.ConditionKruisePodReady {
				return c
			}
		}
		return corev1.PodCondition{}
	}
	eventually(t, func() bool { return condition().Status == corev1.ConditionFalse }, "KruisePodReady False")
	var holders []map[string]string
	require.NoError(t, json.Unmarshal([]byte(condition().Message), &holders))
	require.Equal(t, []map[string]string{{"userAgent": "ContainerRecreateRequest", "key": "default/crr"}}, holders)
	c := h.crr(t, "crr")
	require.Contains(t, c.Finalizers, wellknown.FinalizerCRRUnreadyAcquired)
	eventually(t, func() bool {
		_, ok := h.crr(t, "crr").Annotations[wellknown.AnnotationCRRUnreadyAcquired]
		return ok
	}, "unready-acquired time recorded")
	acquired, err := time.Parse(time.RFC3339, h.crr(t, "crr").Annotations[wellknown.AnnotationCRRUnreadyAcquired])
	require.NoError(t, err)
	require.False(t, acquired.Before(condition().LastTransitionTime.Time), "the grace counts from after the pod was marked, never before")
	eventually(t, func() bool { return h.holds("crr") }, "dispatched once the grace is over")

	h.report("crr", nodeworkv1.Phase_PHASE_SUCCEEDED, succeeded("app"), succeeded("sidecar"))
	eventually(t, func() bool { return condition().Status == corev1.ConditionTrue }, "KruisePodReady True again")
	eventually(t, func() bool { return len(h.crr(t, "crr").Finalizers) == 0 }, "finalizer removed")
}

func TestStandbyWritesNothing(t *testing.T) {
	h := start(t, false, testPod(), liveCRR("crr", time.Now()))
	eventually(t, func() bool { return h.holds("crr") }, "a standby's store is warm")
	for _, a := range h.shoal.Actions() {
		require.Contains(t, []string{"list", "watch", "create", "get"}, a.GetVerb(), "a standby wrote: %v", a)
	}
	for _, a := range h.kube.Actions() {
		require.Contains(t, []string{"list", "watch", "get"}, a.GetVerb(), "a standby wrote: %v", a)
	}
}

func TestPodGoneCompletes(t *testing.T) {
	pod := testPod()
	pod.UID = "another-pod"
	h := start(t, true, pod, liveCRR("crr", time.Now()))
	eventually(t, func() bool { return h.crr(t, "crr").Status.Message == msgPodGone }, "completed: pod has gone")
	require.Equal(t, v1alpha1.ContainerRecreateRequestCompleted, h.crr(t, "crr").Status.Phase)
	require.False(t, h.holds("crr"))
}

func TestAcquiredStampRoundsUp(t *testing.T) {
	base := time.Date(2026, 11, 27, 11, 25, 30, 0, time.UTC)
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{base, "2026-11-27T11:25:30Z"},
		{base.Add(time.Nanosecond), "2026-11-27T11:25:31Z"},
		{base.Add(900 * time.Millisecond), "2026-11-27T11:25:31Z"},
		{base.In(time.FixedZone("CET", 3600)), "2026-11-27T11:25:30Z"},
	} {
		t.Run(tc.in.Format(time.RFC3339Nano), func(t *testing.T) {
			require.Equal(t, tc.want, acquiredStamp(tc.in))
		})
	}
}
