package sidecarterminator

import (
	"context"
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
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

type harness struct {
	kube     *kubefake.Clientset
	store    *dispatch.Store
	recorder *events.FakeRecorder
	mu       sync.Mutex
	leader   bool
	seen     []string // Events drained so far
}

// start runs a controller over a fake clientset holding objs until the
// test ends.
func start(t *testing.T, leader, disabled bool, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{kube: kubefake.NewClientset(objs...), store: dispatch.NewStore(), recorder: events.NewFakeRecorder(100), leader: leader}
	ki := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	c, err := New(Options{
		Client: h.kube, Pods: ki.Core().V1().Pods().Informer(), Nodes: ki.Core().V1().Nodes().Informer(),
		Store: h.store, Recorder: h.recorder, Disabled: disabled,
		IsLeader: func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.leader },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	ki.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced, ki.Core().V1().Nodes().Informer().HasSynced))
	go func() { defer close(done); _ = c.Run(ctx) }()
	return h
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, append([]any{msg}, args...)...)
}

var itemID = nodework.SidecarTerminateID("default", "job-1-abcde")

// item is node-1's work for the pod (nil when none).
func (h *harness) item() *nodeworkv1.SidecarTerminateSpec {
	it, _ := h.store.Item("node-1", itemID)
	return it.GetSidecarTerminate()
}

// report sends the agent's report on the current item.
func (h *harness) report(phase nodeworkv1.Phase, st *nodeworkv1.SidecarTerminateStatus) {
	it, _ := h.store.Item("node-1", itemID)
	h.store.Report("node-1", &nodeworkv1.WorkReport{Id: itemID, ObservedGeneration: it.GetGeneration(), Kind: nodework.KindSidecarTerminate,
		Phase: phase, Message: "agent says so", Status: &nodeworkv1.WorkReport_SidecarTerminate{SidecarTerminate: st}})
}

func (h *harness) pod(t *testing.T) *corev1.Pod {
	t.Helper()
	p, err := h.kube.CoreV1().Pods("default").Get(context.Background(), "job-1-abcde", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return p
}

// updatePod plays the kubelet (or a user) changing the pod.
func (h *harness) updatePod(t *testing.T, edit func(p *corev1.Pod)) {
	t.Helper()
	p := h.pod(t)
	edit(p)
	_, err := h.kube.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// events returns every Event recorded so far.
func (h *harness) events() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		select {
		case e := <-h.recorder.Events:
			h.seen = append(h.seen, e)
			continue
		default:
		}
		return strings.Join(h.seen, "\n")
	}
}

func TestControllerDispatchesAndRecordsEvents(t *testing.T) {
	h := start(t, true, false, jobPod(corev1.RestartPolicyNever))
	eventually(t, func() bool { return h.item() != nil }, "node-1 holds the work")
	spec := h.item()
	require.Equal(t, []string{"main"}, spec.GetMainContainers())
	require.Equal(t, []string{"log"}, spec.GetSidecarContainers())
	require.EqualValues(t, 45, spec.GetTerminationGraceSeconds())

	h.report(nodeworkv1.Phase_PHASE_RUNNING, &nodeworkv1.SidecarTerminateStatus{PodUid: "uid-1",
		Stage: nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_STOPPING, StopDelayMillis: 120})
	eventually(t, func() bool {
		return strings.Contains(h.events(), "Normal StoppingSidecars Stopping sidecar containers on node node-1 120ms")
	}, "stopping Event")

	done := &nodeworkv1.SidecarTerminateStatus{PodUid: "uid-1", Stage: nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_DONE, StopDelayMillis: 120,
		Sidecars: []*nodeworkv1.SidecarTerminateContainerState{{Name: "log", Exited: true, Stops: 1}}}
	h.report(nodeworkv1.Phase_PHASE_SUCCEEDED, done)
	h.report(nodeworkv1.Phase_PHASE_SUCCEEDED, done) // a resend records nothing more
	eventually(t, func() bool {
		return strings.Contains(h.events(), "Normal SidecarTerminated Stopped sidecar containers log")
	}, "stopped Event")
	require.Equal(t, 1, strings.Count(h.events(), "SidecarTerminated"))
	require.Equal(t, 1, strings.Count(h.events(), "StoppingSidecars"))

	// The kubelet finishes the pod: the work goes.
	h.updatePod(t, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	eventually(t, func() bool { return h.item() == nil }, "work removed once the pod finished")
}

func TestControllerRemovesWorkOfDeletedPod(t *testing.T) {
	h := start(t, true, false, jobPod(corev1.RestartPolicyOnFailure))
	eventually(t, func() bool { return h.item() != nil }, "dispatched")
	require.Equal(t, nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE, h.item().GetRestartPolicy())
	require.NoError(t, h.kube.CoreV1().Pods("default").Delete(context.Background(), "job-1-abcde", metav1.DeleteOptions{}))
	eventually(t, func() bool { return h.item() == nil }, "work removed")
}

func TestControllerFailureEvent(t *testing.T) {
	h := start(t, true, false, jobPod(corev1.RestartPolicyNever))
	eventually(t, func() bool { return h.item() != nil }, "dispatched")
	h.report(nodeworkv1.Phase_PHASE_FAILED, &nodeworkv1.SidecarTerminateStatus{PodUid: "uid-1", Stage: nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_STOPPING})
	eventually(t, func() bool {
		return strings.Contains(h.events(), "Warning SidecarTerminationFailed Could not stop the sidecars on node node-1: agent says so")
	}, "failure Event")
}

func TestControllerUnsupportedAgentEvent(t *testing.T) {
	h := start(t, true, false, jobPod(corev1.RestartPolicyNever))
	eventually(t, func() bool { return h.item() != nil }, "dispatched")
	h.report(nodeworkv1.Phase_PHASE_UNSUPPORTED, nil)
	eventually(t, func() bool {
		return strings.Contains(h.events(), "Warning SidecarTerminationFailed Could not stop the sidecars on node node-1: agent says so")
	}, "an old agent's answer is an Event")
}

func TestControllerIgnoresReportOfAnotherPod(t *testing.T) {
	h := start(t, true, false, jobPod(corev1.RestartPolicyNever, container("proxy", sidecarEnv, ignoreEnv)))
	eventually(t, func() bool { return h.item() != nil }, "dispatched")
	st := awaiting(0)
	st.PodUid = "uid-older"
	h.report(nodeworkv1.Phase_PHASE_RUNNING, st)
	require.Never(t, func() bool { return h.pod(t).Status.Phase != corev1.PodRunning }, 300*time.Millisecond, 10*time.Millisecond,
		"a report about another pod sets no phase")
	require.False(t, h.item().GetStopIgnoreExitCode())
}

// TestControllerIgnoreExitCodeSetsPhaseThenGoesAhead: the phase is written
// first, and the go-ahead only once the watch shows it.
func TestControllerIgnoreExitCodeSetsPhaseThenGoesAhead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  int32
		phase corev1.PodPhase
	}{
		{"mains succeeded", 0, corev1.PodSucceeded},
		{"a main failed", 1, corev1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, true, false, jobPod(corev1.RestartPolicyNever, container("proxy", sidecarEnv, ignoreEnv)))
			eventually(t, func() bool { return h.item() != nil }, "dispatched")
			require.Equal(t, []string{"proxy"}, h.item().GetIgnoreExitCodeContainers())
			require.False(t, h.item().GetStopIgnoreExitCode())

			h.report(nodeworkv1.Phase_PHASE_RUNNING, awaiting(tc.code))
			eventually(t, func() bool { return h.pod(t).Status.Phase == tc.phase }, "phase %s written", tc.phase)
			p := h.pod(t)
			var cond *corev1.PodCondition
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == wellknown.ConditionSidecarTerminated {
					cond = &p.Status.Conditions[i]
				}
			}
			require.NotNil(t, cond)
			require.Equal(t, corev1.ConditionTrue, cond.Status)
			require.Equal(t, "Terminated by Sidecar Terminator", cond.Message)
			eventually(t, func() bool { return h.item().GetStopIgnoreExitCode() }, "the go-ahead once the watch shows the phase")
			require.Contains(t, h.events(), "Normal SidecarTerminatorSetPhase Set the pod's phase to "+string(tc.phase))

			patches := 0
			for _, a := range h.kube.Actions() {
				if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
					patches++
				}
			}
			require.Equal(t, 1, patches, "the phase is written once")

			h.report(nodeworkv1.Phase_PHASE_SUCCEEDED, &nodeworkv1.SidecarTerminateStatus{PodUid: "uid-1",
				Stage:    nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_DONE,
				Sidecars: []*nodeworkv1.SidecarTerminateContainerState{{Name: "log", Exited: true, Stops: 1}, {Name: "proxy", Exited: true, ExitCode: 143, Stops: 1}}})
			eventually(t, func() bool { return h.item() == nil }, "work removed once every sidecar exited")
			require.Equal(t, tc.phase, h.pod(t).Status.Phase, "the phase stays")
		})
	}
}

func TestControllerVirtualKubeletReplacesImage(t *testing.T) {
	pod := terminate(jobPod(corev1.RestartPolicyNever, container("vk", imageEnv)), "main", 0)
	h := start(t, true, false, pod, vkNode())
	eventually(t, func() bool { return h.pod(t).Spec.Containers[2].Image == "registry.example/exit:1" }, "image replaced")
	require.Equal(t, "registry.example/log", h.pod(t).Spec.Containers[1].Image, "a normal sidecar is ignored on a virtual-kubelet node")
	require.Nil(t, h.item(), "no agent work on a virtual-kubelet node")
	eventually(t, func() bool {
		return strings.Contains(h.events(), "Normal SidecarImageReplaced Replacing the images of sidecar containers vk")
	}, "image Event")
}

func TestControllerDisabled(t *testing.T) {
	h := start(t, true, true, jobPod(corev1.RestartPolicyNever))
	// Nothing is watched: a pod update brings no work either.
	h.updatePod(t, func(p *corev1.Pod) { p.Labels = map[string]string{"touched": "yes"} })
	require.Never(t, func() bool { return h.item() != nil }, 200*time.Millisecond, 10*time.Millisecond)
}

func TestControllerStandbyWritesNothing(t *testing.T) {
	h := start(t, false, false, jobPod(corev1.RestartPolicyNever, container("proxy", sidecarEnv, ignoreEnv)), vkNode())
	// A virtual-kubelet node: nothing for the store, nothing written.
	h2 := start(t, false, false, jobPod(corev1.RestartPolicyNever, container("proxy", sidecarEnv, ignoreEnv)))
	eventually(t, func() bool { return h2.item() != nil }, "a standby's store is warm")
	h2.report(nodeworkv1.Phase_PHASE_SUCCEEDED, awaiting(0))
	h.updatePod(t, func(p *corev1.Pod) { terminate(p, "main", 0) })
	for _, hh := range []*harness{h, h2} {
		require.Never(t, func() bool {
			for _, a := range hh.kube.Actions() {
				switch a.GetVerb() {
				case "list", "watch", "get":
				case "update":
					if a.GetSubresource() == "" && hh == h {
						continue // the test's own pod update
					}
					return true
				default:
					return true
				}
			}
			return false
		}, 200*time.Millisecond, 10*time.Millisecond, "a standby wrote")
	}
	require.Empty(t, h.events())
	require.Empty(t, h2.events())
}
