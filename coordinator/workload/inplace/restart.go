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
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// LabelInPlaceRestartOf is set on the ContainerRecreateRequests that
// RestartWithCRR creates, to the pod's name.
const LabelInPlaceRestartOf = "inplace.shoal.io/restart-of"

// RestartWithCRR returns an Updater.Restart that restarts containers
// through a ContainerRecreateRequest: the node agent that runs the pod
// stops each container and the kubelet starts it again, with env values
// read from the pod's metadata as it is now. The request is named after
// the pod and the batch (so asking again is a no-op), owned by the pod,
// and removed five minutes after it finishes.
func RestartWithCRR(client shoalclient.Interface) func(ctx context.Context, pod *corev1.Pod, st *pub.InPlaceUpdateState, containers []string) error {
	return func(ctx context.Context, pod *corev1.Pod, st *pub.InPlaceUpdateState, containers []string) error {
		h := fnv.New32a()
		_, _ = fmt.Fprintf(h, "%s/%s", st.Revision, st.UpdateTimestamp.UTC().Format("20060102T150405"))
		crr := &v1alpha1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{
				Name:            fmt.Sprintf("%s-env-%08x", pod.Name, h.Sum32()),
				Namespace:       pod.Namespace,
				Labels:          map[string]string{LabelInPlaceRestartOf: pod.Name},
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
		_, err := client.AppsV1alpha1().ContainerRecreateRequests(pod.Namespace).Create(ctx, crr, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("restart containers %v of pod %s for their env: %w", containers, pod.Name, err)
		}
		return nil
	}
}
