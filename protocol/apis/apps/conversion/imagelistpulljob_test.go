package conversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestImageListPullJobRoundTrip(t *testing.T) {
	roundTrip(t, "ImageListPullJob", imageListPullJobToV1beta1, imageListPullJobToV1alpha1, jobFillFuncs()...)
}

func TestImageListPullJobMapping(t *testing.T) {
	two := intstr.FromInt32(2)
	tests := []struct {
		name  string
		alpha v1alpha1.ImageListPullJob
		beta  v1beta1.ImageListPullJob
	}{
		{
			name: "images and the shared pull settings are the same in v1beta1",
			alpha: v1alpha1.ImageListPullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "base-images", Namespace: "platform"},
				Spec: v1alpha1.ImageListPullJobSpec{Images: []string{"nginx:1.25", "redis:7.2"}, ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
					Selector:         &v1alpha1.ImagePullJobNodeSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}}},
					Parallelism:      &two,
					PullPolicy:       &v1alpha1.PullPolicy{TimeoutSeconds: ptr.To[int32](120)},
					CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always, TTLSecondsAfterFinished: ptr.To[int32](300)},
					ImagePullPolicy:  v1alpha1.PullIfNotPresent,
				}},
			},
			beta: v1beta1.ImageListPullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "base-images", Namespace: "platform"},
				Spec: v1beta1.ImageListPullJobSpec{Images: []string{"nginx:1.25", "redis:7.2"}, ImagePullJobTemplate: v1beta1.ImagePullJobTemplate{
					Selector:         &v1beta1.ImagePullJobNodeSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}}},
					Parallelism:      &two,
					PullPolicy:       &v1beta1.PullPolicy{TimeoutSeconds: ptr.To[int32](120)},
					CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always, TTLSecondsAfterFinished: ptr.To[int32](300)},
					ImagePullPolicy:  v1beta1.PullIfNotPresent,
				}},
			},
		},
		{
			name: "status with failed images, a null entry included, carries over",
			alpha: v1alpha1.ImageListPullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "partly"},
				Spec:       v1alpha1.ImageListPullJobSpec{Images: []string{"busybox:1.36"}, ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Never}}},
				Status: v1alpha1.ImageListPullJobStatus{Desired: 1, Active: 0, Completed: 1, Succeeded: 0,
					FailedImageStatuses: []*v1alpha1.FailedImageStatus{{ImagePullJob: "partly-abcde", Name: "busybox:1.36", Message: "job has completed"}, nil}},
			},
			beta: v1beta1.ImageListPullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "partly"},
				Spec:       v1beta1.ImageListPullJobSpec{Images: []string{"busybox:1.36"}, ImagePullJobTemplate: v1beta1.ImagePullJobTemplate{CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Never}}},
				Status: v1beta1.ImageListPullJobStatus{Desired: 1, Active: 0, Completed: 1, Succeeded: 0,
					FailedImageStatuses: []*v1beta1.FailedImageStatus{{ImagePullJob: "partly-abcde", Name: "busybox:1.36", Message: "job has completed"}, nil}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.ImageListPullJob
			require.NoError(t, imageListPullJobToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)
			var alpha v1alpha1.ImageListPullJob
			require.NoError(t, imageListPullJobToV1alpha1(&tc.beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}
}
