//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// TestSidecarTerminatorVirtualKubelet: seed 004's "pods on virtual nodes".
// One node is labelled as a virtual-kubelet node (type=virtual-kubelet,
// where no agent may act); a Job pinned there with a sidecar marked
// KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE completes because the
// coordinator swaps the sidecar's image, in place, for the quick-exit one
// once the main container is done. The sidecar uses its image's default
// command, so the quick-exit image (busybox, whose default `sh` exits 0
// with no input) ends it with code 0. Serial: it relabels a node.
func TestSidecarTerminatorVirtualKubelet(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	node := requireSchedulableNodes(ctx, t, f, 1)[0].Name
	setLabel := func(ctx context.Context, value *string) {
		updateObject(ctx, t, f.Kube.CoreV1().Nodes(), node, func(n *corev1.Node) {
			if value == nil {
				delete(n.Labels, wellknown.LabelVirtualKubelet)
			} else {
				n.Labels[wellknown.LabelVirtualKubelet] = *value
			}
		})
	}
	vk := wellknown.VirtualKubeletValue
	setLabel(ctx, &vk)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		setLabel(ctx, nil)
	})

	quickExit := f.Image("busybox:latest")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-job"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"sidecar-job": "vk-job"}},
				Spec: corev1.PodSpec{
					NodeName: node, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64(1)),
					Containers: []corev1.Container{
						{Name: "sidecar", Image: f.Image("testserver:latest"),
							Env: []corev1.EnvVar{{Name: wellknown.EnvTerminateSidecarWhenJobExitWithImage, Value: quickExit}}},
						{Name: "main", Image: f.Image("testserver:latest"), Args: []string{"sleep", "3s"}},
					},
				},
			},
		},
	}
	_, err := f.Kube.BatchV1().Jobs(f.Namespace).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	waitJob(ctx, t, f, job.Name, "complete", sidecarJobTimeout, func(j *batchv1.Job) bool {
		c, done := jobFinished(j)
		return done && c == batchv1.JobComplete
	})
	pod := sidecarJobPod(ctx, t, f, job.Name)
	for _, c := range pod.Spec.Containers {
		if c.Name == "sidecar" {
			require.Equal(t, quickExit, c.Image, "the sidecar's image was swapped in place")
		}
	}
	require.Zero(t, jobContainerStatus(t, pod, "sidecar").State.Terminated.ExitCode)
}
