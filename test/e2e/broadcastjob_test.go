//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/placement"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// broadcastJobTimeout bounds one BroadcastJob step.
const broadcastJobTimeout = 2 * time.Minute

// testBroadcastJob runs `testserver sleep 2s` once per node.
func testBroadcastJob(f *framework.Framework, name string) *v1beta1.BroadcastJob {
	return &v1beta1.BroadcastJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.BroadcastJobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers:                    []corev1.Container{{Name: "box", Image: f.Image("testserver:latest"), Args: []string{"sleep", "2s"}}},
				RestartPolicy:                 corev1.RestartPolicyNever,
			}},
			CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always},
		},
	}
}

// waitBroadcastJob polls the job until done says so.
func waitBroadcastJob(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, done func(*v1beta1.BroadcastJob) bool) *v1beta1.BroadcastJob {
	t.Helper()
	return waitObject(ctx, t, f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace), broadcastJobTimeout, name, what, done,
		func(j *v1beta1.BroadcastJob) any { return j.Status })
}

// jobPods lists the job's pods.
func jobPods(ctx context.Context, t *testing.T, f *framework.Framework, name string) []corev1.Pod {
	t.Helper()
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelBroadcastJobName + "=" + name})
	require.NoError(t, err)
	return list.Items
}

// readyNodes names the cluster's nodes that a pod without tolerations can
// run on.
func readyNodes(ctx context.Context, t *testing.T, f *framework.Framework) []string {
	t.Helper()
	nodes, err := f.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, n := range nodes.Items {
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Effect != corev1.TaintEffectPreferNoSchedule }) {
			names = append(names, n.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestBroadcastJob ports OpenKruise's "BroadcastJob dispatching succeeds
// for parallelism < number of node" (v1alpha1 and v1beta1) and "test
// v1beta1 specific features" (ttlSecondsAfterFinished), on the local
// cluster's real nodes, and adds failurePolicy FailFast, the TTL deleting
// the finished job, and the admission check of restartPolicy.
func TestBroadcastJob(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := readyNodes(ctx, t, f)
	require.NotEmpty(t, nodes)
	parallelism := intstr.FromInt32(int32(max(len(nodes)-1, 1)))
	everyNode := func(t *testing.T, name string) {
		t.Helper()
		job := waitBroadcastJob(ctx, t, f, name, "every node ran its pod", func(j *v1beta1.BroadcastJob) bool {
			return j.Status.Phase == v1beta1.PhaseCompleted
		})
		require.EqualValues(t, len(nodes), job.Status.Desired)
		require.EqualValues(t, len(nodes), job.Status.Succeeded)
		require.Zero(t, job.Status.Active)
		require.NotNil(t, job.Status.CompletionTime)
		require.Equal(t, v1beta1.JobComplete, job.Status.Conditions[0].Type)
		var ran []string
		for _, p := range jobPods(ctx, t, f, name) {
			require.Equal(t, corev1.PodSucceeded, p.Status.Phase, p.Name)
			ran = append(ran, p.Spec.NodeName)
		}
		slices.Sort(ran)
		require.Equal(t, nodes, ran, "one pod on each node")
	}

	t.Run("v1beta1 parallelism < nodes", func(t *testing.T) {
		t.Parallel()
		job := testBroadcastJob(f, "beta")
		job.Spec.Parallelism = &parallelism
		_, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
		waitBroadcastJob(ctx, t, f, "beta", "desired", func(j *v1beta1.BroadcastJob) bool { return j.Status.Desired == int32(len(nodes)) })
		everyNode(t, "beta")
	})

	t.Run("v1alpha1 parallelism < nodes", func(t *testing.T) {
		t.Parallel()
		beta := testBroadcastJob(f, "alpha")
		job := &v1alpha1.BroadcastJob{ObjectMeta: beta.ObjectMeta, Spec: v1alpha1.BroadcastJobSpec{
			Parallelism: &parallelism, Template: beta.Spec.Template,
			CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always},
		}}
		_, err := f.Shoal.AppsV1alpha1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
		everyNode(t, "alpha")
	})

	t.Run("v1beta1 ttlSecondsAfterFinished", func(t *testing.T) {
		t.Parallel()
		job := testBroadcastJob(f, "ttl")
		job.Spec.Template.Spec.Containers[0].Args = []string{"sleep", "0s"}
		job.Spec.CompletionPolicy.TTLSecondsAfterFinished = ptr.To[int32](30)
		created, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NotNil(t, created.Spec.CompletionPolicy.TTLSecondsAfterFinished)
		require.EqualValues(t, 30, *created.Spec.CompletionPolicy.TTLSecondsAfterFinished)

		// A short TTL: the finished job goes.
		job = testBroadcastJob(f, "ttl-short")
		job.Spec.Template.Spec.Containers[0].Args = []string{"sleep", "0s"}
		job.Spec.CompletionPolicy.TTLSecondsAfterFinished = ptr.To[int32](2)
		_, err = f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
		err = framework.WaitFor(ctx, broadcastJobTimeout, func(ctx context.Context) (bool, error) {
			_, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Get(ctx, "ttl-short", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "the job is deleted 2 s after it finished")
	})

	t.Run("FailFast", func(t *testing.T) {
		t.Parallel()
		job := testBroadcastJob(f, "failfast")
		job.Spec.Template.Spec.Containers[0].Args = []string{"no-such-subcommand"}
		_, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
		got := waitBroadcastJob(ctx, t, f, "failfast", "failed", func(j *v1beta1.BroadcastJob) bool { return j.Status.Phase == v1beta1.PhaseFailed })
		require.Positive(t, got.Status.Failed)
		require.Equal(t, v1beta1.JobFailed, got.Status.Conditions[0].Type)
		require.Contains(t, got.Status.Conditions[0].Message, "failurePolicy is FailFast")
	})

	t.Run("admission", func(t *testing.T) {
		t.Parallel()
		job := testBroadcastJob(f, "always")
		job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		_, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		require.ErrorContains(t, err, "spec.template.spec.restartPolicy: Always is not supported")
	})
}

// TestBroadcastJobNewNode ports OpenKruise's BroadcastJob cases with a
// fake node ("succeeds for parallelism < number of node", "succeeds for
// node that has erased its taint"), for completionPolicy Never: a node
// that appears later, and one whose taint goes, get their pod. The fake
// node (a Node object without a kubelet, tainted so that only this test's
// pods go there) is why the test is in the serial group; its pod's phase
// is set by the test, as OpenKruise's does.
func TestBroadcastJobNewNode(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	key, value := "e2e-fake-key", utilrand.String(8)
	job := testBroadcastJob(f, "never")
	job.Spec.CompletionPolicy.Type = v1beta1.Never
	job.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: corev1.TaintEffectNoSchedule}}
	_, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	nodes := readyNodes(ctx, t, f)
	waitBroadcastJob(ctx, t, f, "never", "every real node ran its pod", func(j *v1beta1.BroadcastJob) bool {
		return j.Status.Succeeded == int32(len(nodes)) && j.Status.Desired == int32(len(nodes))
	})

	// A node appears, tainted twice: first not eligible (an extra taint),
	// then eligible once that taint goes.
	extra := corev1.Taint{Key: "test-taint-" + value, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	fake := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "fake-" + value, Labels: map[string]string{"kubernetes.io/hostname": "fake-" + value}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule}, extra}},
	}
	fakeName := fake.Name
	_, err = f.Kube.CoreV1().Nodes().Create(ctx, fake, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		// Leave the cluster as found: the node, and the pods bound to it
		// (the agent DaemonSet tolerates every taint), gone.
		ctx := context.WithoutCancel(ctx)
		require.NoError(t, f.Kube.CoreV1().Nodes().Delete(ctx, fakeName, metav1.DeleteOptions{}))
		// No kubelet confirms their end: they are deleted at once rather
		// than left to the pod garbage collector's 40 s quarantine.
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			pods, err := f.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + fakeName})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				err := f.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil && !apierrors.IsNotFound(err) {
					return false, err
				}
			}
			return len(pods.Items) == 0, nil
		})
		require.NoError(t, err, "the pods of the deleted fake node are collected")
	})
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	status, err := json.Marshal(map[string]any{"status": corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "FakeReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}})
	require.NoError(t, err)
	_, err = f.Kube.CoreV1().Nodes().Patch(ctx, fakeName, types.MergePatchType, status, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	// The extra taint keeps the new node out: no pod goes there (this
	// wait is meant to time out; it lists with the test's context).
	err = framework.WaitFor(ctx, 5*time.Second, func(context.Context) (bool, error) {
		return slices.ContainsFunc(jobPods(ctx, t, f, "never"), func(p corev1.Pod) bool {
			return placement.TargetNode(&p) == fakeName
		}), nil
	})
	require.Error(t, err, "no pod for the node whose taint is not tolerated")
	got, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).Get(ctx, "never", metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, len(nodes), got.Status.Desired, "the tainted node is not counted")
	require.Equal(t, v1beta1.PhaseRunning, got.Status.Phase, "Never: the job does not end")

	// The node lifecycle controller writes the node too: a merge patch
	// replaces the taint list whatever version it has.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": fake.Spec.Taints[:1]}})
	require.NoError(t, err)
	_, err = f.Kube.CoreV1().Nodes().Patch(ctx, fakeName, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	waitBroadcastJob(ctx, t, f, "never", "the new node counted in", func(j *v1beta1.BroadcastJob) bool {
		return j.Status.Desired == int32(len(nodes)+1)
	})
	var fakePod corev1.Pod
	err = framework.WaitFor(ctx, broadcastJobTimeout, func(ctx context.Context) (bool, error) {
		for _, p := range jobPods(ctx, t, f, "never") {
			if p.Spec.NodeName == fakeName {
				fakePod = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the new node got a pod, bound by the scheduler")
	fakePod.Status.Phase = corev1.PodSucceeded
	_, err = f.Kube.CoreV1().Pods(f.Namespace).UpdateStatus(ctx, &fakePod, metav1.UpdateOptions{})
	require.NoError(t, err)
	got = waitBroadcastJob(ctx, t, f, "never", "every node ran its pod", func(j *v1beta1.BroadcastJob) bool {
		return j.Status.Succeeded == int32(len(nodes)+1)
	})
	require.Equal(t, v1beta1.PhaseRunning, got.Status.Phase)
}
