package recreate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0", UID: "uid-1"},
		Spec: corev1.PodSpec{
			NodeName:                      "node-1",
			TerminationGracePeriodSeconds: ptr.To[int64](20),
			Containers: []corev1.Container{
				{Name: "app", ReadinessProbe: &corev1.Probe{}},
				{Name: "sidecar"},
			},
		},
		Status: corev1.PodStatus{PodIP: "10.244.1.5", ContainerStatuses: []corev1.ContainerStatus{
			{Name: "app", ContainerID: "containerd://a1", Ready: true},
			{Name: "sidecar", ContainerID: "containerd://s1", Ready: false},
		}},
	}
}

func testCRR(name string, created time.Time) *v1alpha1.ContainerRecreateRequest {
	return &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("crr-" + name),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{wellknown.LabelCRRPodUID: "uid-1", wellknown.LabelCRRNodeName: "node-1"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{
			PodName:  "web-0",
			Strategy: &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail},
			Containers: []v1alpha1.ContainerRecreateRequestContainer{
				{Name: "app", StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://a1"},
					PreStop: &v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("http")}},
					Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
				{Name: "sidecar", StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://s1", RestartCount: 2}},
			},
		},
	}
}

func report(phase nodeworkv1.Phase, states ...*nodeworkv1.RecreateContainerState) *nodeworkv1.WorkReport {
	return &nodeworkv1.WorkReport{Phase: phase, Status: &nodeworkv1.WorkReport_Recreate{Recreate: &nodeworkv1.RecreateStatus{Containers: states}}}
}

func state(name string, phase nodeworkv1.RecreatePhase, killed bool) *nodeworkv1.RecreateContainerState {
	return &nodeworkv1.RecreateContainerState{Name: name, Phase: phase, IsKilled: killed}
}

func TestDecide(t *testing.T) {
	type want struct {
		phase    v1alpha1.ContainerRecreateRequestPhase
		message  string
		states   []v1alpha1.ContainerRecreateRequestContainerRecreateState
		dispatch bool
		unready  bool
		requeue  time.Duration
	}
	pending := []v1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "app", Phase: "Pending"}, {Name: "sidecar", Phase: "Pending"}}
	for _, tc := range []struct {
		name  string
		setup func(in *input)
		want  want
	}{
		{"new request is dispatched and Pending", nil,
			want{phase: "Pending", states: pending, dispatch: true}},
		{"pod gone", func(in *input) { in.pod = nil },
			want{phase: "Completed", message: msgPodGone, states: nil}},
		{"pod replaced (other UID)", func(in *input) { in.pod.UID = "uid-2" },
			want{phase: "Completed", message: msgPodGone}},
		{"pod deleting", func(in *input) { in.pod.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) },
			want{phase: "Completed", message: msgPodGone}},
		{"deadline ahead requeues at it", func(in *input) { in.crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) },
			want{phase: "Pending", states: pending, dispatch: true, requeue: 20 * time.Second}},
		{"deadline passed keeps the node's states", func(in *input) {
			in.crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
			in.placed = true
			in.report = report(nodeworkv1.Phase_PHASE_RUNNING, state("app", nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING, true))
		}, want{phase: "Completed", message: msgDeadline, dispatch: true, states: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "app", Phase: "Recreating", IsKilled: true}, {Name: "sidecar", Phase: "Pending"}}}},
		{"deadline passed and the node is done", func(in *input) {
			in.crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
			in.report = report(nodeworkv1.Phase_PHASE_SUCCEEDED, state("app", nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING, true))
		}, want{phase: "Completed", message: msgDeadline, states: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "app", Phase: "Recreating", IsKilled: true}, {Name: "sidecar", Phase: "Pending"}}}},
		{"younger request waits for the head", func(in *input) {
			older := testCRR("older", t0.Add(-time.Minute))
			in.queue = append(in.queue, older)
		}, want{phase: "Pending", message: "waiting for older, created earlier for the same pod", states: pending}},
		{"completed older request does not block", func(in *input) {
			older := testCRR("older", t0.Add(-time.Minute))
			older.Status.Phase = v1alpha1.ContainerRecreateRequestCompleted
			in.queue = append(in.queue, older)
		}, want{phase: "Pending", states: pending, dispatch: true}},
		{"same creation time: name decides", func(in *input) {
			in.queue = append(in.queue, testCRR("a-first", in.crr.CreationTimestamp.Time))
		}, want{phase: "Pending", message: "waiting for a-first, created earlier for the same pod", states: pending}},
		{"unready grace: mark the pod first", func(in *input) {
			in.crr.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](5)
			in.pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateKruisePodReady}}
		}, want{phase: "Pending", message: "marking the pod not ready before recreating", states: pending, unready: true}},
		{"unready grace: wait it out", func(in *input) {
			in.crr.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](5)
			in.pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateKruisePodReady}}
			in.crr.Annotations = map[string]string{wellknown.AnnotationCRRUnreadyAcquired: in.now.Add(-2 * time.Second).Format(time.RFC3339)}
		}, want{phase: "Pending", message: "pod marked not ready; recreating in 3s (unreadyGracePeriodSeconds)", states: pending, unready: true, requeue: 3 * time.Second}},
		{"unready grace: over, dispatch and keep the pod unready", func(in *input) {
			in.crr.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](5)
			in.pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateKruisePodReady}}
			in.crr.Annotations = map[string]string{wellknown.AnnotationCRRUnreadyAcquired: in.now.Add(-6 * time.Second).Format(time.RFC3339)}
		}, want{phase: "Pending", states: pending, dispatch: true, unready: true}},
		{"unready grace without the readiness gate: nothing to drain", func(in *input) {
			in.crr.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](5)
		}, want{phase: "Pending", states: pending, dispatch: true}},
		{"no report a while after dispatch: requeue at the timeout", func(in *input) { in.dispatchedAt = in.now.Add(-20 * time.Second) },
			want{phase: "Pending", states: pending, dispatch: true, requeue: 40 * time.Second}},
		{"no report for a minute", func(in *input) { in.dispatchedAt = in.now.Add(-time.Minute) },
			want{phase: "Completed", message: msgNoResponse}},
		{"recreating", func(in *input) {
			in.report = report(nodeworkv1.Phase_PHASE_RUNNING,
				state("app", nodeworkv1.RecreatePhase_RECREATE_PHASE_SUCCEEDED, true),
				state("sidecar", nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING, true))
		}, want{phase: "Recreating", dispatch: true, states: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "app", Phase: "Succeeded", IsKilled: true}, {Name: "sidecar", Phase: "Recreating", IsKilled: true}}}},
		{"succeeded", func(in *input) {
			in.report = report(nodeworkv1.Phase_PHASE_SUCCEEDED,
				state("app", nodeworkv1.RecreatePhase_RECREATE_PHASE_SUCCEEDED, true),
				state("sidecar", nodeworkv1.RecreatePhase_RECREATE_PHASE_SUCCEEDED, true))
		}, want{phase: "Completed", states: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "app", Phase: "Succeeded", IsKilled: true}, {Name: "sidecar", Phase: "Succeeded", IsKilled: true}}}},
		{"failed", func(in *input) {
			r := report(nodeworkv1.Phase_PHASE_FAILED,
				&nodeworkv1.RecreateContainerState{Name: "app", Phase: nodeworkv1.RecreatePhase_RECREATE_PHASE_FAILED, Message: "kill container error: boom"})
			r.Message = "kill container error: boom"
			in.report = r
		}, want{phase: "Completed", message: "kill container error: boom", states: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "app", Phase: "Failed", Message: "kill container error: boom"}, {Name: "sidecar", Phase: "Pending"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crr := testCRR("crr", t0.Add(-10*time.Second))
			in := input{crr: crr, pod: testPod(), queue: []*v1alpha1.ContainerRecreateRequest{crr}, now: t0}
			if tc.setup != nil {
				tc.setup(&in)
			}
			p := decide(in)
			require.Equal(t, tc.want.phase, p.status.Phase)
			require.Equal(t, tc.want.message, p.status.Message)
			if tc.want.phase != "Completed" || tc.want.states != nil {
				require.Equal(t, tc.want.states, p.status.ContainerRecreateStates)
			}
			require.Equal(t, tc.want.dispatch, p.spec != nil, "dispatch")
			require.Equal(t, tc.want.unready, p.holdUnready, "holdUnready")
			require.Equal(t, tc.want.requeue, p.requeueAfter, "requeueAfter")
			if tc.want.phase == "Completed" {
				require.NotNil(t, p.status.CompletionTime)
				require.Equal(t, t0, p.status.CompletionTime.Time)
			} else {
				require.Nil(t, p.status.CompletionTime)
			}
			if p.spec != nil {
				require.Equal(t, "node-1", p.node)
			}
		})
	}
}

func TestDecideLeavesCompletedAlone(t *testing.T) {
	crr := testCRR("crr", t0)
	crr.Status = v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted, Message: "done"}
	p := decide(input{crr: crr, pod: nil, now: t0})
	require.Equal(t, crr.Status, p.status)
	require.Nil(t, p.spec)
}

// A request completed by its deadline stays on its node (finish only)
// until the node is done, and its states keep following the node.
func TestDecideAfterDeadline(t *testing.T) {
	crr := testCRR("crr", t0.Add(-time.Minute))
	crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
	crr.Status = v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted, Message: msgDeadline,
		CompletionTime: ptr.To(metav1.NewTime(t0.Add(-50 * time.Second)))}
	in := input{crr: crr, pod: testPod(), now: t0, placed: true}

	p := decide(in)
	require.NotNil(t, p.spec, "no report yet: still on the node")
	require.True(t, p.spec.GetFinishOnly())
	require.Equal(t, crr.Status.CompletionTime, p.status.CompletionTime, "completion time kept")

	in.report = report(nodeworkv1.Phase_PHASE_SUCCEEDED, state("app", nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING, true))
	p = decide(in)
	require.Nil(t, p.spec, "the node is done")
	require.Equal(t, v1alpha1.ContainerRecreateRequestCompleted, p.status.Phase)
	require.Equal(t, []v1alpha1.ContainerRecreateRequestContainerRecreateState{
		{Name: "app", Phase: "Recreating", IsKilled: true}, {Name: "sidecar", Phase: "Pending"}}, p.status.ContainerRecreateStates)

	// Dropped after the final report (which goes with it): not sent again,
	// or a second run would report states it never saw.
	in.report, in.placed = nil, false
	require.Nil(t, decide(in).spec, "done on the node: not sent again")

	in.placed = true
	in.report, in.pod = nil, nil
	require.Nil(t, decide(in).spec, "pod gone: nothing left to finish")
}

func TestSpecFor(t *testing.T) {
	crr := testCRR("crr", t0)
	crr.Spec.Strategy.OrderedRecreate = true
	crr.Spec.Strategy.MinStartedSeconds = 5
	s := specFor(crr, testPod())
	require.Equal(t, "default", s.GetPodNamespace())
	require.Equal(t, "uid-1", s.GetPodUid())
	require.Equal(t, "10.244.1.5", s.GetPodIp())
	require.Equal(t, int64(20), s.GetTerminationGraceSeconds(), "the pod's grace when the request sets none")
	require.True(t, s.GetOrdered())
	require.False(t, s.GetIgnoreFailures())
	require.Equal(t, int32(5), s.GetMinStartedSeconds())
	require.Equal(t, []string{"containerd://a1"}, s.GetReadyContainerIds())
	require.Len(t, s.GetContainers(), 2)
	app := s.GetContainers()[0]
	require.Equal(t, "containerd://a1", app.GetContainerId())
	require.True(t, app.GetHasReadinessProbe())
	require.Equal(t, int32(8080), app.GetPreStop().GetHttpGet().GetPort(), "named port resolved")
	require.Equal(t, "/drain", app.GetPreStop().GetHttpGet().GetPath())
	side := s.GetContainers()[1]
	require.Equal(t, int32(2), side.GetRestartCount())
	require.Nil(t, side.GetPreStop())
	require.False(t, side.GetHasReadinessProbe())

	crr.Spec.Strategy.TerminationGracePeriodSeconds = ptr.To[int64](3)
	crr.Spec.Strategy.FailurePolicy = v1alpha1.ContainerRecreateRequestFailurePolicyIgnore
	s = specFor(crr, testPod())
	require.Equal(t, int64(3), s.GetTerminationGraceSeconds())
	require.True(t, s.GetIgnoreFailures())

	pod := testPod()
	pod.Spec.TerminationGracePeriodSeconds = nil
	crr.Spec.Strategy.TerminationGracePeriodSeconds = nil
	require.Equal(t, int64(defaultGraceSeconds), specFor(crr, pod).GetTerminationGraceSeconds())

	// An in-place update's request asks the agent to check the env read
	// from the pod's metadata, as the pod has it now.
	pod = testPod()
	pod.Labels = map[string]string{"test-env": "bar"}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "TEST_ENV", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['test-env']"}}},
		{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['gone']"}}},
		{Name: "PLAIN", Value: "x"},
	}
	require.Empty(t, specFor(crr, pod).GetContainers()[0].GetExpectedEnv(), "only when the request asks")
	crr.Annotations = map[string]string{wellknown.AnnotationCRRVerifyEnvFromMetadata: "true"}
	require.Equal(t, map[string]string{"TEST_ENV": "bar", "MISSING": ""}, specFor(crr, pod).GetContainers()[0].GetExpectedEnv())
}
