//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// sidecarJobTimeout bounds one Job of the sidecar terminator tests to its
// end (OpenKruise's e2e allows 10 minutes; a Job with restartPolicy
// OnFailure and backoffLimit 3 takes about two).
const sidecarJobTimeout = 5 * time.Minute

// sidecarEnv marks a container as a sidecar to stop when the Job's main
// containers have finished.
var sidecarEnv = corev1.EnvVar{Name: wellknown.EnvTerminateSidecarWhenJobExit, Value: "true"}

// trapScript is a busybox shell that runs until SIGTERM and then runs
// onTerm (sleeping in the background so that the trap runs at once).
func trapScript(onTerm string) string {
	return fmt.Sprintf("trap '%s' TERM; while true; do sleep 1 & wait $!; done", onTerm)
}

// sidecarJob is a Job of one pod (no retries) whose main container exits
// 0 after mainSeconds and whose sidecar runs sidecarScript with env.
func sidecarJob(f *framework.Framework, name string, mainSeconds int, sidecarScript string, env ...corev1.EnvVar) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"sidecar-job": name}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{
						{Name: "main", Image: f.Image("busybox:latest"), Command: []string{"sh", "-c", fmt.Sprintf("sleep %d", mainSeconds)}},
						{Name: "sidecar", Image: f.Image("busybox:latest"), Command: []string{"sh", "-c", sidecarScript}, Env: env},
					},
				},
			},
		},
	}
}

// jobFinished is the Job's Complete or Failed condition, if it has one.
func jobFinished(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

// waitJob polls the Job until done says so.
func waitJob(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, timeout time.Duration, done func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	return waitObject(ctx, t, f.Kube.BatchV1().Jobs(f.Namespace), timeout, name, what, done,
		func(j *batchv1.Job) any { return j.Status })
}

// sidecarJobPod is the only pod of the sidecarJob name.
func sidecarJobPod(ctx context.Context, t *testing.T, f *framework.Framework, name string) corev1.Pod {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "sidecar-job=" + name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, "one pod, no retries")
	return pods.Items[0]
}

// jobContainerStatus is the pod's status of container name.
func jobContainerStatus(t *testing.T, pod corev1.Pod, name string) corev1.ContainerStatus {
	t.Helper()
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("pod %s has no status of container %s: %+v", pod.Name, name, pod.Status)
	return corev1.ContainerStatus{}
}

// TestSidecarTerminatorChecker ports OpenKruise's "SidecarTerminator
// checker: job and broadcast job with sidecar" with its assertions: native
// Jobs (restartPolicy Never and OnFailure, main succeeded or failed) and
// v1alpha1 BroadcastJobs whose sidecar (env
// KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true) runs until stopped. The
// sidecar is the testserver's pause (exits 0 on SIGTERM, as OpenKruise's
// nginx does) instead of nginx, which the local registry does not hold.
//
// One change to a case: "main succeeded, sidecar never stop" was written
// when OpenKruise's terminator set every such pod's phase itself; since
// KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE it does so only for sidecars
// with that env (without it, a sidecar that ignores SIGTERM is killed and
// fails the pod). The port gives the never-stopping sidecar that env; its
// assertions are unchanged.
func TestSidecarTerminatorChecker(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()

	main := corev1.Container{
		Name: "main", Image: f.Image("busybox:latest"), ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/bin/sh", "-c", "sleep 5"},
	}
	failingMain := *main.DeepCopy()
	failingMain.Command = []string{"/bin/sh", "-c", "exit 1"}
	sidecar := corev1.Container{
		Name: "sidecar", Image: f.Image("testserver:latest"), ImagePullPolicy: corev1.PullIfNotPresent,
		Args: []string{"pause"}, Env: []corev1.EnvVar{sidecarEnv},
	}
	neverStop := corev1.Container{
		Name: "sidecar", Image: f.Image("busybox:latest"), ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/bin/sh", "-c", "sleep 10000"},
		Env:     []corev1.EnvVar{sidecarEnv, {Name: wellknown.EnvTerminateSidecarIgnoreExitCode, Value: "true"}},
	}
	jobComplete := func(name string) func(t *testing.T) bool {
		return func(t *testing.T) bool {
			j, err := f.Kube.BatchV1().Jobs(f.Namespace).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			typ, done := jobFinished(j)
			return done && typ == batchv1.JobComplete
		}
	}
	jobFailed := func(name string) func(t *testing.T) bool {
		return func(t *testing.T) bool {
			j, err := f.Kube.BatchV1().Jobs(f.Namespace).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			typ, done := jobFinished(j)
			return done && typ == batchv1.JobFailed
		}
	}
	createJob := func(t *testing.T, name string, policy corev1.RestartPolicy, backoff *int32, labels map[string]string, cs ...corev1.Container) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{BackoffLimit: backoff, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: cs, RestartPolicy: policy},
			}},
		}
		_, err := f.Kube.BatchV1().Jobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	broadcastPhase := func(name string, want v1alpha1.BroadcastJobPhase) func(t *testing.T) bool {
		return func(t *testing.T) bool {
			j, err := f.Shoal.AppsV1alpha1().BroadcastJobs(f.Namespace).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			return j.Status.Phase == want
		}
	}
	createBroadcastJob := func(t *testing.T, name string, policy corev1.RestartPolicy, cs ...corev1.Container) {
		job := &v1alpha1.BroadcastJob{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.BroadcastJobSpec{
				Template:         corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: cs, RestartPolicy: policy}},
				CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always},
			},
		}
		_, err := f.Shoal.AppsV1alpha1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	for i, tc := range []struct {
		name   string
		create func(t *testing.T, name string)
		check  func(name string) func(t *testing.T) bool
	}{
		{"native job, restartPolicy=Never", func(t *testing.T, name string) {
			createJob(t, name, corev1.RestartPolicyNever, nil, nil, main, sidecar)
		}, jobComplete},
		{"native job, restartPolicy=Never, main succeeded, sidecar never stop", func(t *testing.T, name string) {
			createJob(t, name, corev1.RestartPolicyNever, nil, map[string]string{"with-sidecar-neverstop": name}, main, neverStop)
		}, func(name string) func(t *testing.T) bool {
			return func(t *testing.T) bool {
				if jobComplete(name)(t) {
					return true
				}
				pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "with-sidecar-neverstop=" + name})
				require.NoError(t, err)
				return len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodSucceeded
			}
		}},
		{"native job, restartPolicy=OnFailure, main failed", func(t *testing.T, name string) {
			createJob(t, name, corev1.RestartPolicyOnFailure, ptr.To[int32](3), nil, failingMain, sidecar)
		}, jobFailed},
		{"native job, restartPolicy=OnFailure, main succeeded", func(t *testing.T, name string) {
			createJob(t, name, corev1.RestartPolicyOnFailure, ptr.To[int32](3), nil, main, sidecar)
		}, jobComplete},
		{"BroadcastJob, restartPolicy=Never", func(t *testing.T, name string) {
			createBroadcastJob(t, name, corev1.RestartPolicyNever, main, sidecar)
		}, func(name string) func(t *testing.T) bool { return broadcastPhase(name, v1alpha1.PhaseCompleted) }},
		{"BroadcastJob, restartPolicy=OnFailure, main failed", func(t *testing.T, name string) {
			createBroadcastJob(t, name, corev1.RestartPolicyOnFailure, failingMain, sidecar)
		}, func(name string) func(t *testing.T) bool { return broadcastPhase(name, v1alpha1.PhaseFailed) }},
		{"BroadcastJob, restartPolicy=OnFailure, main succeeded", func(t *testing.T, name string) {
			createBroadcastJob(t, name, corev1.RestartPolicyOnFailure, main, sidecar)
		}, func(name string) func(t *testing.T) bool { return broadcastPhase(name, v1alpha1.PhaseCompleted) }},
	} {
		name := fmt.Sprintf("job-%d", i)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.create(t, name)
			check := tc.check(name)
			err := framework.WaitFor(ctx, sidecarJobTimeout, func(context.Context) (bool, error) { return check(t), nil })
			if err != nil {
				require.NoError(t, err, "%s: the job did not reach the expected end; its pods: %s", tc.name, describeJobPods(ctx, t, f, name))
			}
		})
	}
}

// describeJobPods says, for a failure message, how the pods of job name
// (a Job's or a BroadcastJob's: their names start with it) stand.
func describeJobPods(ctx context.Context, t *testing.T, f *framework.Framework, name string) string {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, name+"-") {
			continue
		}
		line := fmt.Sprintf("%s on %s %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			switch st := c.State; {
			case st.Running != nil:
				line += fmt.Sprintf(" %s=running(restarts %d)", c.Name, c.RestartCount)
			case st.Terminated != nil:
				line += fmt.Sprintf(" %s=exited(%d, restarts %d)", c.Name, st.Terminated.ExitCode, c.RestartCount)
			case st.Waiting != nil:
				line += fmt.Sprintf(" %s=waiting(%s)", c.Name, st.Waiting.Reason)
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "; ")
}

// TestSidecarTerminatorGracefulSidecar: a sidecar that handles SIGTERM by
// exiting 0 after 10 s is stopped once the main container exits, gets the
// pod's grace (30 s) to finish, and the Job completes. The time from the
// main container's exit to the Job's completion is logged.
func TestSidecarTerminatorGracefulSidecar(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	job := sidecarJob(f, "graceful", 3, trapScript("sleep 10; exit 0"), sidecarEnv)
	_, err := f.Kube.BatchV1().Jobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)

	got := waitJob(ctx, t, f, "graceful", "finished", sidecarJobTimeout, func(j *batchv1.Job) bool { _, done := jobFinished(j); return done })
	typ, _ := jobFinished(got)
	require.Equal(t, batchv1.JobComplete, typ, "the sidecar exited 0 after its SIGTERM")
	pod := sidecarJobPod(ctx, t, f, "graceful")
	require.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	mainState := jobContainerStatus(t, pod, "main").State.Terminated
	sideState := jobContainerStatus(t, pod, "sidecar").State.Terminated
	require.NotNil(t, mainState)
	require.NotNil(t, sideState)
	require.Zero(t, mainState.ExitCode)
	require.Zero(t, sideState.ExitCode, "the sidecar's own exit, not a kill")
	require.GreaterOrEqual(t, sideState.FinishedAt.Sub(mainState.FinishedAt.Time), 9*time.Second,
		"the sidecar had its 10 s to shut down (grace 30 s)")
	require.NotNil(t, got.Status.CompletionTime)
	d := got.Status.CompletionTime.Sub(mainState.FinishedAt.Time)
	t.Logf("terminator: main exit to job complete %s", d)
}

// TestSidecarTerminatorWithoutEnv: the same Job without the sidecar env
// does not complete: its sidecar keeps running (shows the test above can
// fail).
func TestSidecarTerminatorWithoutEnv(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	job := sidecarJob(f, "plain", 3, trapScript("sleep 10; exit 0"))
	_, err := f.Kube.BatchV1().Jobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	err = framework.WaitFor(ctx, podStartTimeout, func(ctx context.Context) (bool, error) {
		pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "sidecar-job=plain"})
		if err != nil || len(pods.Items) != 1 {
			return false, err
		}
		for _, s := range pods.Items[0].Status.ContainerStatuses {
			if s.Name == "main" && s.State.Terminated != nil {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the main container exits")

	// Meant to time out: nothing stops the sidecar.
	err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		j, err := f.Kube.BatchV1().Jobs(f.Namespace).Get(ctx, "plain", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, done := jobFinished(j)
		return done, nil
	})
	require.Error(t, err, "the Job must not finish while its sidecar runs")
	pod := sidecarJobPod(ctx, t, f, "plain")
	require.Equal(t, corev1.PodRunning, pod.Status.Phase)
	require.NotNil(t, jobContainerStatus(t, pod, "sidecar").State.Running, "the sidecar still runs")
}

// TestSidecarTerminatorIgnoreExitCode: a sidecar with
// KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true that exits 3 on SIGTERM:
// the terminator sets the pod's phase first, so the pod ends Succeeded
// with SidecarTerminated=True, and the Job (no retries) completes.
func TestSidecarTerminatorIgnoreExitCode(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	job := sidecarJob(f, "ignore", 3, trapScript("exit 3"),
		sidecarEnv, corev1.EnvVar{Name: wellknown.EnvTerminateSidecarIgnoreExitCode, Value: "true"})
	_, err := f.Kube.BatchV1().Jobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)

	got := waitJob(ctx, t, f, "ignore", "finished", sidecarJobTimeout, func(j *batchv1.Job) bool { _, done := jobFinished(j); return done })
	typ, _ := jobFinished(got)
	require.Equal(t, batchv1.JobComplete, typ, "the sidecar's exit code does not fail the Job")

	// The kubelet reports the sidecar's end after the phase: wait for it,
	// then the phase must still be Succeeded.
	var pod corev1.Pod
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		pod = sidecarJobPod(ctx, t, f, "ignore")
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == "sidecar" && s.State.Terminated != nil {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the sidecar was stopped: %+v", pod.Status)
	require.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	require.NotZero(t, jobContainerStatus(t, pod, "sidecar").State.Terminated.ExitCode, "the sidecar exited non-zero")
	var cond *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == wellknown.ConditionSidecarTerminated {
			cond = &pod.Status.Conditions[i]
		}
	}
	require.NotNil(t, cond, "condition %s: %+v", wellknown.ConditionSidecarTerminated, pod.Status.Conditions)
	require.Equal(t, corev1.ConditionTrue, cond.Status)
}
