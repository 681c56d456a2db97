package inplace

import (
	"context"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// LabelInPlaceRestartOf is set on the ContainerRecreateRequests that
// RestartWithCRR creates, to the pod's name.
const LabelInPlaceRestartOf = "inplace.shoal.io/restart-of"

// RestartWithCRR returns an Updater.Restart that restarts containers
// through a ContainerRecreateRequest: the node agent that runs the pod
// stops each container and the kubelet starts it again, with env values
// read from the pod's metadata as it is now. The request asks the agent to
// check the new containers' env (AnnotationCRRVerifyEnvFromMetadata) and
// to recreate them again while it is stale. It is named after the pod and
// the batch (so asking again only reads its status), owned by the pod, and
// removed five minutes after it finishes. Done when it succeeded for every
// container; an error when it failed.
func RestartWithCRR(client shoalclient.Interface) func(ctx context.Context, pod *corev1.Pod, st *pub.InPlaceUpdateState, containers []string) (bool, error) {
	return func(ctx context.Context, pod *corev1.Pod, st *pub.InPlaceUpdateState, containers []string) (bool, error) {
		h := fnv.New32a()
		_, _ = fmt.Fprintf(h, "%s/%s", st.Revision, st.UpdateTimestamp.UTC().Format("20060102T150405"))
		crr := &v1alpha1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{
				Name:            fmt.Sprintf("%s-env-%08x", pod.Name, h.Sum32()),
				Namespace:       pod.Namespace,
				Labels:          map[string]string{LabelInPlaceRestartOf: pod.Name},
				Annotations:     map[string]string{wellknown.AnnotationCRRVerifyEnvFromMetadata: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
			},
			Spec: v1alpha1.ContainerRecreateRequestSpec{
				PodName:                 pod.Name,
				Strategy:                &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyIgnore},
				ActiveDeadlineSeconds:   ptr.To[int64](300),
				TTLSecondsAfterFinished: ptr.To[int32](300),
			},
		}
		for _, c := range containers {
			crr.Spec.Containers = append(crr.Spec.Containers, v1alpha1.ContainerRecreateRequestContainer{Name: c})
		}
		crrs := client.AppsV1alpha1().ContainerRecreateRequests(pod.Namespace)
		got, err := crrs.Create(ctx, crr, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = crrs.Get(ctx, crr.Name, metav1.GetOptions{})
		}
		if err != nil {
			return false, fmt.Errorf("restart containers %v of pod %s for their env: %w", containers, pod.Name, err)
		}
		if got.Status.Phase != v1alpha1.ContainerRecreateRequestCompleted {
			return false, nil
		}
		for _, s := range got.Status.ContainerRecreateStates {
			if s.Phase != v1alpha1.ContainerRecreateRequestSucceeded {
				return false, fmt.Errorf("restart container %s of pod %s for its env (ContainerRecreateRequest %s): %s %s", s.Name, pod.Name, got.Name, s.Phase, s.Message)
			}
		}
		return true, nil
	}
}
