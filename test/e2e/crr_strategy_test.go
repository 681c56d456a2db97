//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// busyboxCRRPod is a pod of busybox containers that loop in a shell, with
// an emptyDir at /marks and a grace period of 30 s; the shell as PID 1
// ignores SIGTERM, so a stop takes the whole grace the request gives it.
func busyboxCRRPod(f *framework.Framework, name string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Volumes:                       []corev1.Volume{{Name: "marks", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: c, Image: f.Image("busybox:latest"), Command: []string{"sh", "-c", "while true; do sleep 1; done"},
			VolumeMounts: []corev1.VolumeMount{{Name: "marks", MountPath: "/marks"}},
		})
	}
	return pod
}

// TestCRRForceRecreateStartingContainer: a request that completes leaves
// the next instance in a long postStart hook, during which the kubelet does
// not update the pod's status: a second request's statusContext names the
// instance before. With forceRecreate the agent stops the instance that
// runs now (restartCount reaches 2); without it the named instance counts
// as recreated and nothing is stopped (isKilled false, restartCount 1).
func TestCRRForceRecreateStartingContainer(t *testing.T) {
	t.Parallel()
	for _, force := range []bool{true, false} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			t.Parallel()
			f := newFramework(t)
			ctx := t.Context()
			// postStart sleeps 20 s on every start but the first.
			pod := busyboxCRRPod(f, "web", "app")
			pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
				Command: []string{"sh", "-c", "if [ -e /marks/started ]; then sleep 20; else touch /marks/started; fi"},
			}}}
			runPod(ctx, t, f, pod)

			first := newCRR("first", "web", "app")
			first.Spec.Strategy.TerminationGracePeriodSeconds = ptr.To[int64](1)
			createCRR(ctx, t, f, first)
			waitCRR(ctx, t, f, "first", crrTimeout, "first request Completed", isCompleted)

			// The new instance is in its 20 s postStart hook now.
			second := newCRR("second", "web", "app")
			second.Spec.Strategy.TerminationGracePeriodSeconds = ptr.To[int64](1)
			second.Spec.Strategy.ForceRecreate = force
			created := createCRR(ctx, t, f, second)
			named := created.Spec.Containers[0].StatusContext
			t.Logf("second request names %s (restartCount %d)", named.ContainerID, named.RestartCount)
			require.EqualValues(t, 0, named.RestartCount, "the pod's status still names the first instance")

			done := waitCRR(ctx, t, f, "second", crrTimeout, "second request Completed", isCompleted)
			require.Equal(t, states("app", "Succeeded", force), done.Status.ContainerRecreateStates)

			// Once the hook is over the kubelet reports the instance count.
			want := int32(1)
			if force {
				want = 2
			}
			var last corev1.ContainerStatus
			err := framework.WaitFor(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
				p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				last = containerStatus(p, "app")
				return last.RestartCount >= want && last.Ready, nil
			})
			require.NoError(t, err, "app never ready with restartCount %d: %+v", want, last)
			require.Equal(t, want, last.RestartCount)
			if !force {
				return
			}
			// The instance stopped is the one that was starting, not the
			// one the request named.
			require.NotNil(t, last.LastTerminationState.Terminated)
			require.NotEqual(t, named.ContainerID, last.LastTerminationState.Terminated.ContainerID)
		})
	}
}

// TestCRRKruisePodReadyGate: a bare pod that declares the KruisePodReady
// readiness gate becomes Ready within 5 s of its containers (the
// coordinator adds the condition); seed 001's strategy block with
// unreadyGracePeriodSeconds 3 then holds it NotReady at least 3 s before
// the container is stopped.
func TestCRRKruisePodReadyGate(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	pod := startCRRPod(ctx, t, f, "web", func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateKruisePodReady}}
	})
	containersReady := condition(pod, corev1.ContainersReady)
	ready := condition(pod, corev1.PodReady)
	require.NotNil(t, containersReady)
	require.NotNil(t, ready)
	lag := ready.LastTransitionTime.Sub(containersReady.LastTransitionTime.Time)
	t.Logf("Ready %s after ContainersReady", lag)
	require.LessOrEqual(t, lag, 5*time.Second, "Ready within 5 s of the containers")
	require.Equal(t, corev1.ConditionTrue, condition(pod, wellknown.ConditionKruisePodReady).Status)

	// Seed 001's strategy block.
	crr := newCRR("recreate", "web", "app")
	crr.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{
		FailurePolicy:                 v1alpha1.ContainerRecreateRequestFailurePolicyFail,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		UnreadyGracePeriodSeconds:     ptr.To[int64](3),
		MinStartedSeconds:             10,
	}
	crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](300)
	crr.Spec.TTLSecondsAfterFinished = ptr.To[int32](1800)
	createCRR(ctx, t, f, crr)

	var unreadyAt time.Time
	err := framework.WaitFor(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := condition(p, wellknown.ConditionKruisePodReady)
		if c != nil && c.Status == corev1.ConditionFalse {
			unreadyAt = c.LastTransitionTime.Time
			return true, nil
		}
		return false, nil
	})
	require.NoError(t, err, "KruisePodReady never turned False")
	waitCRR(ctx, t, f, "recreate", crrTimeout, "Completed", isCompleted)
	p := waitRecreated(ctx, t, f, "web", "app")
	term := containerStatus(p, "app").LastTerminationState.Terminated
	require.NotNil(t, term)
	held := term.FinishedAt.Sub(unreadyAt)
	t.Logf("KruisePodReady False at %s, app stopped %s later", unreadyAt.Format(time.RFC3339), held)
	require.GreaterOrEqual(t, held, 3*time.Second, "held NotReady for the unready grace before the stop")
	require.Equal(t, corev1.ConditionTrue, condition(p, wellknown.ConditionKruisePodReady).Status, "KruisePodReady restored")
}

// condition returns the pod's condition of type typ, or nil.
func condition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// TestCRRUnorderedStopsTogether: two containers that ignore SIGTERM, grace
// 10 s. Without orderedRecreate both stops start at once (their instances
// end within 2 s of each other, the request completes in under 15 s); with
// it, the second waits for the first to be back (at least 20 s).
func TestCRRUnorderedStopsTogether(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			t.Parallel()
			f := newFramework(t)
			ctx := t.Context()
			runPod(ctx, t, f, busyboxCRRPod(f, "web", "app", "sidecar"))

			crr := newCRR("recreate", "web", "app", "sidecar")
			crr.Spec.Strategy.TerminationGracePeriodSeconds = ptr.To[int64](10)
			crr.Spec.Strategy.OrderedRecreate = ordered
			created := createCRR(ctx, t, f, crr)
			done := waitCRR(ctx, t, f, "recreate", crrTimeout, "Completed", isCompleted)
			require.Equal(t, states("app", "Succeeded", true, "sidecar", "Succeeded", true), done.Status.ContainerRecreateStates)
			took := done.Status.CompletionTime.Sub(created.CreationTimestamp.Time)
			p := waitRecreated(ctx, t, f, "web", "app", "sidecar")
			gap := stoppedAt(p, "sidecar").Sub(stoppedAt(p, "app")).Abs()
			t.Logf("ordered=%v: completed after %s; the two instances ended %s apart", ordered, took, gap)
			if ordered {
				require.GreaterOrEqual(t, took, 20*time.Second, "one grace period after the other")
				return
			}
			require.LessOrEqual(t, gap, 2*time.Second, "both stops started at once")
			require.Less(t, took, 15*time.Second, "one grace period, not two")
		})
	}
}
