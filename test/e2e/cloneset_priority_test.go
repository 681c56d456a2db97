//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// TestCloneSetInPlacePriorityStopsOnFailure ports OpenKruise's "in-place
// update two container images with priorities, should not update the
// next when the previous one failed": the higher-priority container's new
// image cannot be pulled, so the lower-priority container keeps its old
// image and the pod stays in its first batch.
func TestCloneSetInPlacePriorityStopsOnFailure(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name = "prio-fail"
	cs := inPlaceCloneSet(f, name, 1, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType)
	cs.Spec.Template.Spec.Containers = append(cs.Spec.Template.Spec.Containers, corev1.Container{
		Name: "side", Image: f.Image("testserver:latest"), Args: []string{"pause"},
		Env: []corev1.EnvVar{{Name: wellknown.EnvContainerPriority, Value: "10"}},
	})
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, name, "1 ready", settled(1, 1))
	oldImage := cs.Spec.Template.Spec.Containers[0].Image

	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2")
		cs.Spec.Template.Spec.Containers[1].Image = f.Image("testserver:no-such-tag")
	})
	var pod corev1.Pod
	err = framework.WaitFor(ctx, cloneSetTimeout, func(ctx context.Context) (bool, error) {
		pods := cloneSetPods(ctx, t, f, name)
		if len(pods) != 1 {
			return false, nil
		}
		pod = pods[0]
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == "side" && s.State.Waiting != nil && (s.State.Waiting.Reason == "ErrImagePull" || s.State.Waiting.Reason == "ImagePullBackOff") {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the side container fails to pull its new image")

	// Give the controller passes to (wrongly) go on; the pod must stay.
	err = framework.WaitFor(ctx, cloneSetTimeout, func(ctx context.Context) (bool, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = *p
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "side" && s.State.Waiting != nil && s.State.Waiting.Reason == "ImagePullBackOff" {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the kubelet backs off the pull")
	require.Equal(t, oldImage, pod.Spec.Containers[0].Image, "the lower-priority container is not updated")
	var state pub.InPlaceUpdateState
	require.NoError(t, json.Unmarshal([]byte(pod.Annotations[wellknown.AnnotationInPlaceUpdateState]), &state))
	require.Len(t, state.ContainerBatchesRecord, 1)
	require.Equal(t, []string{"side"}, state.ContainerBatchesRecord[0].Containers)
	require.Equal(t, map[string]string{"app": f.Image("testserver:v2")}, state.NextContainerImages, "app waits for side")
}
