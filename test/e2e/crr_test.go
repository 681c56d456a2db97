//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// crrTimeout bounds one request's way to Completed (OpenKruise's e2e
// allows 70 s).
const crrTimeout = 70 * time.Second

// crrPod is a pod with an "app" container (the testserver, ready through
// an HTTP probe) and a "sidecar" container (testserver pause), as in
// OpenKruise's CRR e2e; mutate adjusts it.
func crrPod(f *framework.Framework, name string, mutate func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{
				{
					Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
						PeriodSeconds: 1,
					},
				},
				{Name: "sidecar", Image: f.Image("testserver:latest"), Args: []string{"pause"}},
			},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

// sleepHook runs the testserver's sleep in the container.
func sleepHook(d string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/testserver", "sleep", d}}}
}

// startCRRPod creates the pod and returns it once ready.
func startCRRPod(ctx context.Context, t *testing.T, f *framework.Framework, name string, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	return runPod(ctx, t, f, crrPod(f, name, mutate))
}

// runPod creates pod (labelled app=<its name>) in the test namespace and
// returns it once ready.
func runPod(ctx context.Context, t *testing.T, f *framework.Framework, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app="+pod.Name, 1, podStartTimeout)
	require.NoError(t, err)
	return &pods[0]
}

func newCRR(name, pod string, containers ...string) *v1alpha1.ContainerRecreateRequest {
	c := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ContainerRecreateRequestSpec{PodName: pod, Strategy: &v1alpha1.ContainerRecreateRequestStrategy{}},
	}
	for _, n := range containers {
		c.Spec.Containers = append(c.Spec.Containers, v1alpha1.ContainerRecreateRequestContainer{Name: n})
	}
	return c
}

func createCRR(ctx context.Context, t *testing.T, f *framework.Framework, crr *v1alpha1.ContainerRecreateRequest) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	created, err := crrs(t, f).Create(ctx, crr, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// waitCRR polls the request until done says so (or timeout).
func waitCRR(ctx context.Context, t *testing.T, f *framework.Framework, name string, timeout time.Duration, what string, done func(*v1alpha1.ContainerRecreateRequest) bool) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	var last *v1alpha1.ContainerRecreateRequest
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		c, err := crrs(t, f).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = c
		return done(c), nil
	})
	require.NoError(t, err, "%s: request %s never got there; last status %+v", what, name, statusOf(last))
	return last
}

func statusOf(c *v1alpha1.ContainerRecreateRequest) any {
	if c == nil {
		return nil
	}
	return c.Status
}

func isCompleted(c *v1alpha1.ContainerRecreateRequest) bool {
	return c.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted
}

func getPod(ctx context.Context, t *testing.T, f *framework.Framework, name string) *corev1.Pod {
	t.Helper()
	p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func containerStatus(pod *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// startedAt is when the container's current instance started.
func startedAt(pod *corev1.Pod, name string) time.Time {
	if r := containerStatus(pod, name).State.Running; r != nil {
		return r.StartedAt.Time
	}
	return time.Time{}
}

// stoppedAt is when the container's previous instance ended.
func stoppedAt(pod *corev1.Pod, name string) time.Time {
	if term := containerStatus(pod, name).LastTerminationState.Terminated; term != nil {
		return term.FinishedAt.Time
	}
	return time.Time{}
}

func states(pairs ...any) []v1alpha1.ContainerRecreateRequestContainerRecreateState {
	var out []v1alpha1.ContainerRecreateRequestContainerRecreateState
	for i := 0; i+2 < len(pairs); i += 3 {
		out = append(out, v1alpha1.ContainerRecreateRequestContainerRecreateState{
			Name: pairs[i].(string), Phase: v1alpha1.ContainerRecreateRequestPhase(pairs[i+1].(string)), IsKilled: pairs[i+2].(bool),
		})
	}
	return out
}

// waitRecreated waits until every named container restarted once and the
// pod is ready again.
func waitRecreated(ctx context.Context, t *testing.T, f *framework.Framework, pod string, containers ...string) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := framework.WaitFor(ctx, crrTimeout, func(ctx context.Context) (bool, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		for _, c := range containers {
			if containerStatus(p, c).RestartCount < 1 {
				return false, nil
			}
		}
		return framework.IsPodReady(p), nil
	})
	require.NoError(t, err, "pod %s: containers %v were not recreated", pod, containers)
	return last
}

// TestCRRRecreatesSimpleContainers ports OpenKruise's "recreates simple
// containers" cases: one and two containers.
func TestCRRRecreatesSimpleContainers(t *testing.T) {
	t.Parallel()
	for _, containers := range [][]string{{"app"}, {"app", "sidecar"}} {
		t.Run(strings.Join(containers, "+"), func(t *testing.T) {
			t.Parallel()
			f := newFramework(t)
			ctx := t.Context()
			pod := startCRRPod(ctx, t, f, "web", nil)
			crr := newCRR("recreate", "web", containers...)
			crr.Spec.Strategy.MinStartedSeconds = 5
			crr.Spec.TTLSecondsAfterFinished = ptr.To[int32](3)
			created := createCRR(ctx, t, f, crr)

			// Admission: labels, default failure policy, status context.
			require.Equal(t, string(pod.UID), created.Labels[wellknown.LabelCRRPodUID])
			require.Equal(t, pod.Spec.NodeName, created.Labels[wellknown.LabelCRRNodeName])
			require.Equal(t, "true", created.Labels[wellknown.LabelCRRActive])
			require.Equal(t, v1alpha1.ContainerRecreateRequestFailurePolicyFail, created.Spec.Strategy.FailurePolicy)
			for i, c := range containers {
				require.Equal(t, containerStatus(pod, c).ContainerID, created.Spec.Containers[i].StatusContext.ContainerID)
			}

			// Completed, and no longer active. Both are checked on the same
			// read: with ttlSecondsAfterFinished 3 the request may be gone
			// by the time a later read looks.
			done := waitCRR(ctx, t, f, "recreate", crrTimeout, "Completed, active label removed", func(c *v1alpha1.ContainerRecreateRequest) bool {
				_, active := c.Labels[wellknown.LabelCRRActive]
				return isCompleted(c) && !active
			})
			require.NotNil(t, done.Status.CompletionTime)
			var want []v1alpha1.ContainerRecreateRequestContainerRecreateState
			for _, c := range containers {
				want = append(want, states(c, "Succeeded", true)...)
			}
			require.Equal(t, want, done.Status.ContainerRecreateStates)
			t.Logf("%v recreated: created %s, completed %s", containers, created.CreationTimestamp.Format(time.RFC3339), done.Status.CompletionTime.Format(time.RFC3339))

			// Events on the request and on the pod. client-go's event
			// broadcaster retries a failed write after about 10 s, so
			// allow two tries beyond the first.
			err := framework.WaitFor(ctx, 40*time.Second, func(ctx context.Context) (bool, error) {
				evs, err := f.Kube.EventsV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				var onCRR, onPod bool
				for _, e := range evs.Items {
					onCRR = onCRR || (e.Regarding.Kind == "ContainerRecreateRequest" && e.Regarding.Name == "recreate" && e.Reason == "Completed")
					onPod = onPod || (e.Regarding.Kind == "Pod" && e.Regarding.Name == "web" && e.Reason == "ContainerRecreateSucceeded")
				}
				return onCRR && onPod, nil
			})
			require.NoError(t, err, "Completed events on the request and the pod")
			after := waitRecreated(ctx, t, f, "web", containers...)
			for _, c := range containers {
				st := containerStatus(after, c)
				require.Equal(t, int32(1), st.RestartCount, "%s restarted once", c)
				require.NotEqual(t, containerStatus(pod, c).ContainerID, st.ContainerID, "%s has a new container", c)
				// minStartedSeconds 5: completion at least 4 s (second
				// granularity) after the new instance started.
				require.GreaterOrEqual(t, done.Status.CompletionTime.Sub(startedAt(after, c)), 4*time.Second, "%s: completed too early", c)
			}

			err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				_, err := f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace).Get(ctx, "recreate", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			require.NoError(t, err, "request not deleted after its TTL")
		})
	}
}

// TestCRRPostStartHook ports "recreates containers with postStartHook":
// the app's postStart sleeps 5 s; without ordering the sidecar is stopped
// right after the app, with ordering only once the app is back.
func TestCRRPostStartHook(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) { recreateAfterPostStart(t, false, ordered) })
	}
}

// recreateAfterPostStart recreates app (whose postStart sleeps 5 s) and
// sidecar with the strategy given: without ordering the sidecar is stopped
// right after the app, with ordering it starts only once the app is back.
func recreateAfterPostStart(t *testing.T, force, ordered bool) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	startCRRPod(ctx, t, f, "web", func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: sleepHook("5s")}
	})
	crr := newCRR("recreate", "web", "app", "sidecar")
	crr.Spec.Strategy.ForceRecreate = force
	crr.Spec.Strategy.OrderedRecreate = ordered
	createCRR(ctx, t, f, crr)
	done := waitCRR(ctx, t, f, "recreate", crrTimeout, "Completed", isCompleted)
	require.Equal(t, states("app", "Succeeded", true, "sidecar", "Succeeded", true), done.Status.ContainerRecreateStates)
	pod := waitRecreated(ctx, t, f, "web", "app", "sidecar")
	if !ordered {
		gap := stoppedAt(pod, "sidecar").Sub(stoppedAt(pod, "app"))
		t.Logf("sidecar stopped %s after app", gap)
		require.Less(t, gap, 3*time.Second, "without ordering the sidecar is stopped right after the app")
		return
	}
	gap := startedAt(pod, "sidecar").Sub(startedAt(pod, "app"))
	t.Logf("sidecar started %s after app", gap)
	require.GreaterOrEqual(t, gap, 5*time.Second, "with ordering the sidecar waits for the app to be back")
}

// TestCRRPreStopHook ports "recreates containers with preStopHook".
func TestCRRPreStopHook(t *testing.T) {
	t.Parallel()
	withPreStop := func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: sleepHook("8s")}
	}
	t.Run("preStop runs before the stop", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		startCRRPod(ctx, t, f, "web", withPreStop)
		created := createCRR(ctx, t, f, newCRR("recreate", "web", "app"))
		done := waitCRR(ctx, t, f, "recreate", crrTimeout, "Completed", isCompleted)
		require.Equal(t, states("app", "Succeeded", true), done.Status.ContainerRecreateStates)
		pod := waitRecreated(ctx, t, f, "web", "app")
		gap := stoppedAt(pod, "app").Sub(created.CreationTimestamp.Time)
		t.Logf("app stopped %s after the request", gap)
		require.GreaterOrEqual(t, gap, 7*time.Second, "the 8 s preStop ran first (second granularity)")
	})
	t.Run("activeDeadlineSeconds 3", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		startCRRPod(ctx, t, f, "web", withPreStop)
		crr := newCRR("recreate", "web", "app", "sidecar")
		crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
		// OpenKruise's daemon stops one container at a time, so its
		// deadline comes while the sidecar still waits. Shoal stops
		// unordered containers together (the sidecar, without a preStop
		// hook, would be done in a second); ordered recreation gives the
		// same situation and OpenKruise's assertions hold unchanged.
		crr.Spec.Strategy.OrderedRecreate = true
		created := createCRR(ctx, t, f, crr)
		done := waitCRR(ctx, t, f, "recreate", 10*time.Second, "Completed by the deadline", isCompleted)
		require.Equal(t, "recreating has exceeded the activeDeadlineSeconds", done.Status.Message)
		require.LessOrEqual(t, done.Status.CompletionTime.Sub(created.CreationTimestamp.Time), 5*time.Second)
		require.Equal(t, states("app", "Pending", false, "sidecar", "Pending", false), withoutMessages(done.Status.ContainerRecreateStates))
		// The stop already under way still happens.
		pod := waitRecreated(ctx, t, f, "web", "app")
		require.Equal(t, int32(1), containerStatus(pod, "app").RestartCount)
		require.Equal(t, int32(0), containerStatus(pod, "sidecar").RestartCount, "nothing new starts after the deadline")
		waitCRR(ctx, t, f, "recreate", 30*time.Second, "app shown as stopped", func(c *v1alpha1.ContainerRecreateRequest) bool {
			return len(c.Status.ContainerRecreateStates) > 0 && c.Status.ContainerRecreateStates[0].IsKilled &&
				c.Status.ContainerRecreateStates[0].Phase != v1alpha1.ContainerRecreateRequestPending
		})
	})
	t.Run("grace periods and KruisePodReady", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, crrPod(f, "web", func(p *corev1.Pod) {
			withPreStop(p)
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateKruisePodReady}}
		}), metav1.CreateOptions{})
		require.NoError(t, err)
		// The gate needs its condition True for the pod to be ready; Shoal's
		// pod webhook does that for gated pods, here the test does once the
		// containers run.
		setKruisePodReady(ctx, t, f, "web")
		crr := newCRR("recreate", "web", "app")
		crr.Spec.Strategy.TerminationGracePeriodSeconds = ptr.To[int64](3)
		crr.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](1)
		created := createCRR(ctx, t, f, crr)

		wantMsg := fmt.Sprintf(`[{"userAgent":"ContainerRecreateRequest","key":"%s/recreate"}]`, f.Namespace)
		err = framework.WaitFor(ctx, 2*time.Second, func(ctx context.Context) (bool, error) {
			c := kruisePodReady(getPod(ctx, t, f, "web"))
			return c.Status == corev1.ConditionFalse && c.Message == wantMsg, nil
		})
		require.NoError(t, err, "KruisePodReady not False with the request as holder within 2 s")

		done := waitCRR(ctx, t, f, "recreate", crrTimeout, "Completed", isCompleted)
		require.Equal(t, states("app", "Succeeded", true), withoutMessages(done.Status.ContainerRecreateStates))
		t.Logf("app: %s", done.Status.ContainerRecreateStates[0].Message)
		err = framework.WaitFor(ctx, 3*time.Second, func(ctx context.Context) (bool, error) {
			return kruisePodReady(getPod(ctx, t, f, "web")).Status == corev1.ConditionTrue, nil
		})
		require.NoError(t, err, "KruisePodReady not True again within 3 s of completion")
		pod := waitRecreated(ctx, t, f, "web", "app")
		gap := stoppedAt(pod, "app").Sub(created.CreationTimestamp.Time)
		t.Logf("app stopped %s after the request", gap)
		require.Less(t, gap, 8*time.Second, "the 3 s grace cut the 8 s preStop")
	})
}

// withoutMessages drops the states' messages: OpenKruise's cases compare
// name, phase and isKilled; Shoal adds what a container waits for.
func withoutMessages(in []v1alpha1.ContainerRecreateRequestContainerRecreateState) []v1alpha1.ContainerRecreateRequestContainerRecreateState {
	out := make([]v1alpha1.ContainerRecreateRequestContainerRecreateState, 0, len(in))
	for _, s := range in {
		s.Message = ""
		out = append(out, s)
	}
	return out
}

func kruisePodReady(p *corev1.Pod) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == wellknown.ConditionKruisePodReady {
			return c
		}
	}
	return corev1.PodCondition{}
}

func setKruisePodReady(ctx context.Context, t *testing.T, f *framework.Framework, pod string) {
	t.Helper()
	err := framework.WaitFor(ctx, podStartTimeout, func(ctx context.Context) (bool, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return containerStatus(p, "app").Ready && containerStatus(p, "sidecar").Ready, nil
	})
	require.NoError(t, err, "containers of %s not ready", pod)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: wellknown.ConditionKruisePodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
	}}}})
	require.NoError(t, err)
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, pod, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	_, err = f.WaitForPodsReady(ctx, f.Namespace, "app="+pod, 1, podStartTimeout)
	require.NoError(t, err)
}

// TestCRRForceRecreate ports "recreates containers by force".
func TestCRRForceRecreate(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) { recreateAfterPostStart(t, true, ordered) })
	}
}

// TestCRRQueueOnOnePod: three requests for one pod created back to back
// all complete, in creation order (kruise#1058, #1626, #2474). All three
// name the instance that was running when they were made, so the first
// stops it (isKilled) and the later ones find it already recreated
// (Succeeded without a kill, isKilled false): one restart.
func TestCRRQueueOnOnePod(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	startCRRPod(ctx, t, f, "web", nil)
	names := []string{"first", "second", "third"}
	for _, n := range names {
		createCRR(ctx, t, f, newCRR(n, "web", "sidecar"))
	}
	var completions []time.Time
	for i, n := range names {
		done := waitCRR(ctx, t, f, n, 3*crrTimeout, "Completed", isCompleted)
		require.Equal(t, states("sidecar", "Succeeded", i == 0), done.Status.ContainerRecreateStates, n)
		completions = append(completions, done.Status.CompletionTime.Time)
	}
	require.False(t, completions[1].Before(completions[0]), "second completed before first")
	require.False(t, completions[2].Before(completions[1]), "third completed before second")
	pod := waitRecreated(ctx, t, f, "web", "sidecar")
	require.Equal(t, int32(1), containerStatus(pod, "sidecar").RestartCount, "the instance the requests named was stopped once")

	// A request created right after deleting another still runs (#2474).
	createCRR(ctx, t, f, newCRR("fourth", "web", "sidecar"))
	require.NoError(t, f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace).Delete(ctx, "fourth", metav1.DeleteOptions{}))
	createCRR(ctx, t, f, newCRR("fifth", "web", "sidecar"))
	waitCRR(ctx, t, f, "fifth", crrTimeout, "Completed", isCompleted)
}

// TestCRRAdmission is the bad-input table against the real apiserver and
// webhook: every request is refused with a message naming the field.
func TestCRRAdmission(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	startCRRPod(ctx, t, f, "web", nil)
	_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unschedulable"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"e2e.shoal.io/nowhere": "true"},
			Containers:   []corev1.Container{{Name: "app", Image: f.Image("testserver:latest")}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		crr  func() *v1alpha1.ContainerRecreateRequest
		want string
	}{
		{"pod missing", func() *v1alpha1.ContainerRecreateRequest { return newCRR("x", "nope", "app") },
			`spec.podName: pod "nope" not found in namespace`},
		{"pod not scheduled", func() *v1alpha1.ContainerRecreateRequest { return newCRR("x", "unschedulable", "app") },
			`spec.podName: pod "unschedulable" is not scheduled to a node yet`},
		{"unknown container", func() *v1alpha1.ContainerRecreateRequest { return newCRR("x", "web", "foo") },
			`spec.containers[0].name: container "foo" is not in pod "web" (its containers: app, sidecar)`},
		{"duplicate container", func() *v1alpha1.ContainerRecreateRequest { return newCRR("x", "web", "app", "app") },
			`spec.containers[1].name: duplicate container "app"`},
		{"no containers", func() *v1alpha1.ContainerRecreateRequest { return newCRR("x", "web") },
			`spec.containers`},
		{"deadline below 3", func() *v1alpha1.ContainerRecreateRequest {
			c := newCRR("x", "web", "app")
			c.Spec.ActiveDeadlineSeconds = ptr.To[int64](2)
			return c
		}, `spec.activeDeadlineSeconds: must be at least 3 seconds`},
		{"bad failure policy", func() *v1alpha1.ContainerRecreateRequest {
			c := newCRR("x", "web", "app")
			c.Spec.Strategy.FailurePolicy = "Retry"
			return c
		}, `spec.strategy.failurePolicy`},
		{"negative grace", func() *v1alpha1.ContainerRecreateRequest {
			c := newCRR("x", "web", "app")
			c.Spec.Strategy.TerminationGracePeriodSeconds = ptr.To[int64](-1)
			return c
		}, `terminationGracePeriodSeconds`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace).Create(ctx, tc.crr(), metav1.CreateOptions{})
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			t.Logf("refused: %v", err)
		})
	}

	t.Run("spec is immutable", func(t *testing.T) {
		c := newCRR("immutable", "web", "sidecar")
		c.Spec.Strategy.MinStartedSeconds = 1
		createCRR(ctx, t, f, c)
		got, err := f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace).Get(ctx, "immutable", metav1.GetOptions{})
		require.NoError(t, err)
		got.Spec.Strategy.MinStartedSeconds = 9
		_, err = f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace).Update(ctx, got, metav1.UpdateOptions{})
		require.Error(t, err)
		require.Contains(t, err.Error(), "immutable")
	})
}

// startSlowStop starts a pod whose app has an 8 s preStop hook and a
// request for app and sidecar, and returns once the app's hook runs (a
// recreate under way).
func startSlowStop(ctx context.Context, t *testing.T, f *framework.Framework) (*corev1.Pod, *v1alpha1.ContainerRecreateRequest) {
	t.Helper()
	pod := startCRRPod(ctx, t, f, "web", func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: sleepHook("8s")}
	})
	crr := createCRR(ctx, t, f, newCRR("recreate", "web", "app", "sidecar"))
	waitCRR(ctx, t, f, "recreate", 30*time.Second, "app's preStop hook running", func(c *v1alpha1.ContainerRecreateRequest) bool {
		return len(c.Status.ContainerRecreateStates) > 0 && c.Status.ContainerRecreateStates[0].Message == "running the preStop hook"
	})
	return pod, crr
}

// finishedOnce checks the request completed with both containers
// recreated, each restarted exactly once.
func finishedOnce(ctx context.Context, t *testing.T, f *framework.Framework) {
	t.Helper()
	done := waitCRR(ctx, t, f, "recreate", 2*crrTimeout, "Completed", isCompleted)
	require.Equal(t, states("app", "Succeeded", true, "sidecar", "Succeeded", true), withoutMessages(done.Status.ContainerRecreateStates))
	pod := waitRecreated(ctx, t, f, "web", "app", "sidecar")
	require.Equal(t, int32(1), containerStatus(pod, "app").RestartCount, "app stopped exactly once")
	require.Equal(t, int32(1), containerStatus(pod, "sidecar").RestartCount, "sidecar stopped exactly once")
}

// TestCRRSurvivesCoordinatorLoss: the leader is deleted while a recreate
// is under way; the node finishes it and the new leader completes it.
func TestCRRSurvivesCoordinatorLoss(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)
	_, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, 2*time.Minute)
	require.NoError(t, err, "needs the warm standby")
	startSlowStop(ctx, t, f)
	leader, err := f.CoordinatorLeader(ctx)
	require.NoError(t, err)
	require.NoError(t, f.Kube.CoreV1().Pods(framework.ShoalNamespace).Delete(ctx, leader.Name, metav1.DeleteOptions{}))
	t.Logf("deleted the leader %s during the preStop hook", leader.Name)
	finishedOnce(ctx, t, f)
	_, err = f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, 2*time.Minute)
	require.NoError(t, err)
}

// TestCRRSurvivesAgentRestart: the pod's agent is deleted during the
// app's preStop hook; the restarted agent resumes and stops each container
// exactly once (the hook is not run again).
func TestCRRSurvivesAgentRestart(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)
	pod, _ := startSlowStop(ctx, t, f)
	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)
	agent := agents[pod.Spec.NodeName]
	require.NoError(t, f.Kube.CoreV1().Pods(framework.ShoalNamespace).Delete(ctx, agent.Name, metav1.DeleteOptions{}))
	t.Logf("deleted agent %s on %s during the preStop hook", agent.Name, pod.Spec.NodeName)
	finishedOnce(ctx, t, f)
	_, err = f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.AgentSelector, len(agents), 2*time.Minute)
	require.NoError(t, err)
}
