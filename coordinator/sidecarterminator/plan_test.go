package sidecarterminator

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// container is a container with the given env ("NAME=value" pairs).
func container(name string, env ...string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example/" + name}
	for _, kv := range env {
		for i := range kv {
			if kv[i] == '=' {
				c.Env = append(c.Env, corev1.EnvVar{Name: kv[:i], Value: kv[i+1:]})
				break
			}
		}
	}
	return c
}

var (
	sidecarEnv = wellknown.EnvTerminateSidecarWhenJobExit + "=true"
	ignoreEnv  = wellknown.EnvTerminateSidecarIgnoreExitCode + "=TRUE"
	imageEnv   = wellknown.EnvTerminateSidecarWhenJobExitWithImage + "=registry.example/exit:1"
)

// jobPod is a running Job pod on node-1 with containers main, log (a
// sidecar) and whatever more.
func jobPod(policy corev1.RestartPolicy, more ...corev1.Container) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "job-1-abcde", UID: "uid-1"},
		Spec: corev1.PodSpec{
			NodeName: "node-1", RestartPolicy: policy, TerminationGracePeriodSeconds: ptr.To[int64](45),
			Containers: append([]corev1.Container{container("main"), container("log", sidecarEnv)}, more...),
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
	return pod
}

// terminate marks container name terminated with code in the pod's status.
func terminate(pod *corev1.Pod, name string, code int32) *corev1.Pod {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			pod.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
		}
	}
	return pod
}

func vkNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{wellknown.LabelVirtualKubelet: wellknown.VirtualKubeletValue}}}
}

func awaiting(codes ...int32) *nodeworkv1.SidecarTerminateStatus {
	st := &nodeworkv1.SidecarTerminateStatus{PodUid: "uid-1", Stage: nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_AWAITING_GO_AHEAD}
	for _, c := range codes {
		st.Mains = append(st.Mains, &nodeworkv1.SidecarTerminateContainerState{Name: "main", Exited: true, ExitCode: c})
	}
	return st
}

func TestClassify(t *testing.T) {
	pod := jobPod(corev1.RestartPolicyNever,
		container("proxy", sidecarEnv, ignoreEnv),
		container("vk", imageEnv),
		container("both", "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=True", imageEnv),
		container("off", wellknown.EnvTerminateSidecarWhenJobExit+"=false"),
		container("ignore-only", ignoreEnv))
	cs := classify(pod)
	require.Equal(t, []string{"main", "off", "ignore-only"}, cs.mains)
	require.Equal(t, []string{"log", "both"}, cs.normal)
	require.Equal(t, []string{"proxy"}, cs.ignoreExitCode)
	require.Equal(t, map[string]string{"vk": "registry.example/exit:1", "both": "registry.example/exit:1"}, cs.withImage)
}

func TestIsVirtualKubelet(t *testing.T) {
	require.True(t, isVirtualKubelet(vkNode()))
	require.True(t, isVirtualKubelet(&corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: wellknown.TaintVirtualKubeletProvider, Effect: corev1.TaintEffectNoSchedule}}}}))
	require.False(t, isVirtualKubelet(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"type": "agent"}}}))
	require.False(t, isVirtualKubelet(nil))
}

func TestDecide(t *testing.T) {
	never, onFailure := nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_NEVER, nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE
	spec := func(policy nodeworkv1.JobRestartPolicy, ignore []string, goAhead bool) *nodeworkv1.SidecarTerminateSpec {
		return &nodeworkv1.SidecarTerminateSpec{
			PodNamespace: "default", PodName: "job-1-abcde", PodUid: "uid-1",
			MainContainers: []string{"main"}, SidecarContainers: []string{"log"}, IgnoreExitCodeContainers: ignore,
			RestartPolicy: policy, TerminationGraceSeconds: 45, StopIgnoreExitCode: goAhead,
		}
	}
	withIgnore := func(policy corev1.RestartPolicy) *corev1.Pod {
		return jobPod(policy, container("proxy", sidecarEnv, ignoreEnv))
	}
	marked := func(pod *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
		pod.Status.Phase = phase
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: wellknown.ConditionSidecarTerminated, Status: corev1.ConditionTrue})
		return pod
	}
	for _, tc := range []struct {
		name string
		in   input
		want plan
	}{
		{"running Never pod: work from the start", input{pod: jobPod(corev1.RestartPolicyNever)}, plan{spec: spec(never, nil, false)}},
		{"running OnFailure pod", input{pod: jobPod(corev1.RestartPolicyOnFailure)}, plan{spec: spec(onFailure, nil, false)}},
		{"default grace", input{pod: func() *corev1.Pod {
			p := jobPod(corev1.RestartPolicyNever)
			p.Spec.TerminationGracePeriodSeconds = nil
			return p
		}()}, plan{spec: func() *nodeworkv1.SidecarTerminateSpec {
			s := spec(never, nil, false)
			s.TerminationGraceSeconds = 30
			return s
		}()}},
		{"restartPolicy Always", input{pod: jobPod(corev1.RestartPolicyAlways)}, plan{}},
		{"no sidecars", input{pod: func() *corev1.Pod {
			p := jobPod(corev1.RestartPolicyNever)
			p.Spec.Containers[1].Env = nil
			return p
		}()}, plan{}},
		{"native sidecars", input{pod: func() *corev1.Pod {
			p := jobPod(corev1.RestartPolicyNever)
			p.Spec.InitContainers = []corev1.Container{{Name: "mesh", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
			return p
		}()}, plan{}},
		{"being deleted", input{pod: func() *corev1.Pod {
			p := jobPod(corev1.RestartPolicyNever)
			p.DeletionTimestamp = &metav1.Time{}
			return p
		}()}, plan{}},
		{"pending", input{pod: func() *corev1.Pod {
			p := jobPod(corev1.RestartPolicyNever)
			p.Status.Phase = corev1.PodPending
			return p
		}()}, plan{}},
		{"not scheduled", input{pod: func() *corev1.Pod { p := jobPod(corev1.RestartPolicyNever); p.Spec.NodeName = ""; return p }()}, plan{}},
		{"finished by the kubelet", input{pod: func() *corev1.Pod {
			p := jobPod(corev1.RestartPolicyNever)
			p.Status.Phase = corev1.PodSucceeded
			return p
		}()}, plan{}},
		{"image-only sidecar on a normal node: neither main nor stopped", input{pod: func() *corev1.Pod {
			p := jobPod(corev1.RestartPolicyNever, container("vk", imageEnv))
			return p
		}()}, plan{spec: spec(never, nil, false)}},
		{"ignore-exit-code, mains running: work, no phase", input{pod: withIgnore(corev1.RestartPolicyNever)},
			plan{spec: spec(never, []string{"proxy"}, false)}},
		{"ignore-exit-code, agent reports mains done 0", input{pod: withIgnore(corev1.RestartPolicyNever), report: awaiting(0)},
			plan{spec: spec(never, []string{"proxy"}, false), setPhase: corev1.PodSucceeded}},
		{"ignore-exit-code, agent reports a main failed", input{pod: withIgnore(corev1.RestartPolicyNever), report: awaiting(2)},
			plan{spec: spec(never, []string{"proxy"}, false), setPhase: corev1.PodFailed}},
		{"ignore-exit-code, still stopping the normal sidecars", input{pod: withIgnore(corev1.RestartPolicyNever),
			report: &nodeworkv1.SidecarTerminateStatus{PodUid: "uid-1", Stage: nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_STOPPING}},
			plan{spec: spec(never, []string{"proxy"}, false)}},
		{"ignore-exit-code, status shows mains and normal sidecars done", input{pod: terminate(terminate(withIgnore(corev1.RestartPolicyNever), "main", 1), "log", 0)},
			plan{spec: spec(never, []string{"proxy"}, false), setPhase: corev1.PodFailed}},
		{"ignore-exit-code, status shows mains done but a normal sidecar runs", input{pod: terminate(withIgnore(corev1.RestartPolicyNever), "main", 0)},
			plan{spec: spec(never, []string{"proxy"}, false)}},
		{"ignore-exit-code OnFailure, status shows a main failed: it restarts", input{pod: terminate(terminate(withIgnore(corev1.RestartPolicyOnFailure), "main", 1), "log", 0)},
			plan{spec: spec(onFailure, []string{"proxy"}, false)}},
		{"ignore-exit-code sidecar already exited: kubelet's business", input{pod: terminate(withIgnore(corev1.RestartPolicyNever), "proxy", 1), report: awaiting(0)},
			plan{spec: spec(never, []string{"proxy"}, false)}},
		{"phase set and seen: the go-ahead", input{pod: marked(withIgnore(corev1.RestartPolicyNever), corev1.PodSucceeded), report: awaiting(0)},
			plan{spec: spec(never, []string{"proxy"}, true)}},
		{"phase set, ignore-exit-code sidecar exited: done", input{pod: terminate(marked(withIgnore(corev1.RestartPolicyNever), corev1.PodSucceeded), "proxy", 137)}, plan{}},
		{"phase set, agent done", input{pod: marked(withIgnore(corev1.RestartPolicyNever), corev1.PodSucceeded),
			report: &nodeworkv1.SidecarTerminateStatus{PodUid: "uid-1", Stage: nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_DONE}}, plan{}},
		{"virtual kubelet, mains running", input{pod: jobPod(corev1.RestartPolicyNever, container("vk", imageEnv)), node: vkNode()}, plan{}},
		{"virtual kubelet, mains done: image replaced, normal sidecar ignored",
			input{pod: terminate(jobPod(corev1.RestartPolicyNever, container("vk", imageEnv)), "main", 3), node: vkNode()},
			plan{images: map[string]string{"vk": "registry.example/exit:1"}}},
		{"virtual kubelet, OnFailure main failed", input{pod: terminate(jobPod(corev1.RestartPolicyOnFailure, container("vk", imageEnv)), "main", 3), node: vkNode()}, plan{}},
		{"virtual kubelet, image already set", input{pod: func() *corev1.Pod {
			p := terminate(jobPod(corev1.RestartPolicyNever, container("vk", imageEnv)), "main", 0)
			p.Spec.Containers[2].Image = "registry.example/exit:1"
			return p
		}(), node: vkNode()}, plan{}},
		{"virtual kubelet, sidecar terminated", input{pod: terminate(terminate(jobPod(corev1.RestartPolicyNever, container("vk", imageEnv)), "main", 0), "vk", 0), node: vkNode()}, plan{}},
		{"virtual kubelet, no image sidecars", input{pod: terminate(jobPod(corev1.RestartPolicyNever), "main", 0), node: vkNode()}, plan{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.in)
			require.Equal(t, tc.want.setPhase, got.setPhase)
			require.Equal(t, tc.want.images, got.images)
			if tc.want.spec == nil {
				require.Nil(t, got.spec)
				return
			}
			require.NotNil(t, got.spec)
			require.True(t, proto.Equal(tc.want.spec, got.spec), "want %v\ngot  %v", tc.want.spec, got.spec)
		})
	}
}
