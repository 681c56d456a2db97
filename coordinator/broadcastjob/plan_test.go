package broadcastjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/placement"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func node(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec: corev1.NodeSpec{Taints: taints}}
}

func jobPod(name, nodeName string, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}, Status: corev1.PodStatus{Phase: phase}}
	placement.PinToNode(&p.Spec, nodeName)
	return p
}

func bcj(mutate func(*v1beta1.BroadcastJob)) *v1beta1.BroadcastJob {
	j := &v1beta1.BroadcastJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"}}
	j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	if mutate != nil {
		mutate(j)
	}
	return j
}

var threeNodes = []*corev1.Node{node("n1"), node("n2"), node("n3")}

func TestPlan(t *testing.T) {
	noSchedule := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name     string
		job      *v1beta1.BroadcastJob
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		create   []string
		deletes  int
		phase    v1beta1.BroadcastJobPhase
		finished string
		desired  int32
		pause    bool
	}{
		{name: "one pod per node", job: bcj(nil), nodes: threeNodes, create: []string{"n1", "n2", "n3"}, phase: v1beta1.PhaseRunning, desired: 3},
		{name: "parallelism 2 of 3 (OpenKruise's e2e: parallelism < nodes)",
			job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.Parallelism = ptr.To(intstr.FromInt32(2)) }), nodes: threeNodes,
			pods: []*corev1.Pod{jobPod("a", "n1", corev1.PodRunning)}, create: []string{"n2"}, phase: v1beta1.PhaseRunning, desired: 3},
		{name: "parallelism 50% rounds up", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.Parallelism = ptr.To(intstr.FromString("50%")) }),
			nodes: threeNodes, create: []string{"n1", "n2"}, phase: v1beta1.PhaseRunning, desired: 3},
		{name: "a tainted node is not eligible", job: bcj(nil), nodes: []*corev1.Node{node("n1"), node("n2", noSchedule)},
			create: []string{"n1"}, phase: v1beta1.PhaseRunning, desired: 1},
		{name: "unless the template tolerates the taint",
			job: bcj(func(j *v1beta1.BroadcastJob) {
				j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			}),
			nodes: []*corev1.Node{node("n1"), node("n2", noSchedule)}, create: []string{"n1", "n2"}, phase: v1beta1.PhaseRunning, desired: 2},
		{name: "nodeSelector", job: bcj(func(j *v1beta1.BroadcastJob) {
			j.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n2"}
		}),
			nodes: threeNodes, create: []string{"n2"}, phase: v1beta1.PhaseRunning, desired: 1},
		{name: "paused creates nothing", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.Paused = true }), nodes: threeNodes,
			phase: v1beta1.PhasePaused, desired: 3},
		{name: "Always: every node ran its pod", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.FailurePolicy.Type = v1beta1.FailurePolicyTypeContinue }),
			nodes: threeNodes,
			pods:  []*corev1.Pod{jobPod("a", "n1", corev1.PodSucceeded), jobPod("b", "n2", corev1.PodSucceeded), jobPod("c", "n3", corev1.PodFailed)},
			phase: v1beta1.PhaseCompleted, finished: reasonCompleted, desired: 3},
		{name: "Never: done pods do not end the job", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.CompletionPolicy.Type = v1beta1.Never }),
			nodes: threeNodes,
			pods:  []*corev1.Pod{jobPod("a", "n1", corev1.PodSucceeded), jobPod("b", "n2", corev1.PodSucceeded), jobPod("c", "n3", corev1.PodSucceeded)},
			phase: v1beta1.PhaseRunning, desired: 3},
		{name: "Never: a node that appears later gets a pod", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.CompletionPolicy.Type = v1beta1.Never }),
			nodes:  append(threeNodes, node("n4")),
			pods:   []*corev1.Pod{jobPod("a", "n1", corev1.PodSucceeded), jobPod("b", "n2", corev1.PodSucceeded), jobPod("c", "n3", corev1.PodSucceeded)},
			create: []string{"n4"}, phase: v1beta1.PhaseRunning, desired: 4},
		{name: "FailFast (the default) fails the job and stops the running pods", job: bcj(nil), nodes: threeNodes,
			pods:    []*corev1.Pod{jobPod("a", "n1", corev1.PodFailed), jobPod("b", "n2", corev1.PodRunning)},
			deletes: 1, phase: v1beta1.PhaseFailed, finished: reasonPodFailed, desired: 3},
		{name: "Pause pauses the job at a failed pod", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.FailurePolicy.Type = v1beta1.FailurePolicyTypePause }),
			nodes: threeNodes, pods: []*corev1.Pod{jobPod("a", "n1", corev1.PodFailed)}, phase: v1beta1.PhasePaused, pause: true, desired: 3},
		{name: "no eligible node yet: the job waits", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"} }),
			nodes: threeNodes, phase: v1beta1.PhaseRunning, desired: 0},
		{name: "a running pod whose node is gone goes", job: bcj(func(j *v1beta1.BroadcastJob) { j.Spec.CompletionPolicy.Type = v1beta1.Never }),
			nodes: threeNodes[:2], pods: []*corev1.Pod{jobPod("a", "n1", corev1.PodSucceeded), jobPod("b", "n2", corev1.PodSucceeded), jobPod("c", "n3", corev1.PodRunning)},
			deletes: 1, phase: v1beta1.PhaseRunning, desired: 2},
		{name: "activeDeadlineSeconds", job: bcj(func(j *v1beta1.BroadcastJob) {
			j.Spec.CompletionPolicy.ActiveDeadlineSeconds = ptr.To[int64](60)
			j.Status.StartTime = &metav1.Time{Time: now.Add(-time.Minute)}
		}), nodes: threeNodes, pods: []*corev1.Pod{jobPod("a", "n1", corev1.PodRunning)},
			deletes: 1, phase: v1beta1.PhaseFailed, finished: reasonDeadlineExceeded, desired: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(tc.job, tc.nodes, tc.pods, now)
			require.NoError(t, err)
			require.Equal(t, tc.create, p.create)
			require.Len(t, p.deletes, tc.deletes)
			require.Equal(t, tc.phase, p.status.Phase)
			require.Equal(t, tc.finished, p.finished)
			require.Equal(t, tc.desired, p.status.Desired)
			require.Equal(t, tc.pause, p.pause)
			if tc.finished != "" {
				require.NotNil(t, p.status.CompletionTime)
				require.Len(t, p.status.Conditions, 1)
			}
		})
	}
}

func TestRestartLimit(t *testing.T) {
	j := bcj(func(j *v1beta1.BroadcastJob) {
		j.Spec.FailurePolicy = v1beta1.FailurePolicy{Type: v1beta1.FailurePolicyTypeContinue, RestartLimit: 2}
	})
	restarting := jobPod("a", "n1", corev1.PodRunning)
	restarting.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	restarting.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 3}}
	p, err := newPlan(j, threeNodes[:1], []*corev1.Pod{restarting}, now)
	require.NoError(t, err)
	require.EqualValues(t, 1, p.status.Failed, "more restarts than restartLimit: failed")
	require.EqualValues(t, 0, p.status.Active)
	require.Equal(t, reasonCompleted, p.finished, "Continue: the job completes")
	require.Equal(t, []*corev1.Pod{restarting}, p.deletes, "and the pod still restarting is stopped")

	initLoop := jobPod("b", "n1", corev1.PodPending)
	initLoop.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	initLoop.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", RestartCount: 2}}
	initLoop.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 1}}
	require.True(t, failedPod(initLoop, 2), "restarts are summed, init containers included: 3 > 2")
	require.False(t, failedPod(initLoop, 3))
}
