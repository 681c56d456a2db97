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

func TestImagePullJobRoundTrip(t *testing.T) {
	roundTrip(t, "ImagePullJob", imagePullJobToV1beta1, imagePullJobToV1alpha1, jobFillFuncs()...)
}

func TestImagePullJobMapping(t *testing.T) {
	four := intstr.FromInt32(4)
	tests := []struct {
		name  string
		alpha v1alpha1.ImagePullJob
		beta  v1beta1.ImagePullJob
	}{
		{
			name: "node names, secrets, pull policy and imagePullPolicy Always are the same in v1beta1, with no annotation",
			alpha: v1alpha1.ImagePullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "warm-nginx", Namespace: "web"},
				Spec: v1alpha1.ImagePullJobSpec{Image: "nginx:1.25", ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
					PullSecrets:      []string{"registry-cred"},
					Selector:         &v1alpha1.ImagePullJobNodeSelector{Names: []string{"node-a", "node-b"}},
					Parallelism:      &four,
					PullPolicy:       &v1alpha1.PullPolicy{TimeoutSeconds: ptr.To[int32](300), BackoffLimit: ptr.To[int32](2)},
					CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always, ActiveDeadlineSeconds: ptr.To[int64](1200), TTLSecondsAfterFinished: ptr.To[int32](60)},
					ImagePullPolicy:  v1alpha1.PullAlways,
				}},
			},
			beta: v1beta1.ImagePullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "warm-nginx", Namespace: "web"},
				Spec: v1beta1.ImagePullJobSpec{Image: "nginx:1.25", ImagePullJobTemplate: v1beta1.ImagePullJobTemplate{
					PullSecrets:      []string{"registry-cred"},
					Selector:         &v1beta1.ImagePullJobNodeSelector{Names: []string{"node-a", "node-b"}},
					Parallelism:      &four,
					PullPolicy:       &v1beta1.PullPolicy{TimeoutSeconds: ptr.To[int32](300), BackoffLimit: ptr.To[int32](2)},
					CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always, ActiveDeadlineSeconds: ptr.To[int64](1200), TTLSecondsAfterFinished: ptr.To[int32](60)},
					ImagePullPolicy:  v1beta1.PullAlways,
				}},
			},
		},
		{
			name: "a Never job on the nodes of matching pods, with sandbox metadata",
			alpha: v1alpha1.ImagePullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "keep-redis"},
				Spec: v1alpha1.ImagePullJobSpec{Image: "redis:7.2", ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
					PodSelector:      &v1alpha1.ImagePullJobPodSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}},
					CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Never},
					SandboxConfig:    &v1alpha1.SandboxConfig{Labels: map[string]string{"team": "cache"}, Annotations: map[string]string{"trace": "on"}},
					ImagePullPolicy:  v1alpha1.PullIfNotPresent,
				}},
				Status: v1alpha1.ImagePullJobStatus{Desired: 3, Active: 1, Succeeded: 1, Failed: 1, Message: "job is running, progress 66.7%", FailedNodes: []string{"node-c"}},
			},
			beta: v1beta1.ImagePullJob{
				ObjectMeta: metav1.ObjectMeta{Name: "keep-redis"},
				Spec: v1beta1.ImagePullJobSpec{Image: "redis:7.2", ImagePullJobTemplate: v1beta1.ImagePullJobTemplate{
					PodSelector:      &v1beta1.ImagePullJobPodSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}},
					CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Never},
					SandboxConfig:    &v1beta1.SandboxConfig{Labels: map[string]string{"team": "cache"}, Annotations: map[string]string{"trace": "on"}},
					ImagePullPolicy:  v1beta1.PullIfNotPresent,
				}},
				Status: v1beta1.ImagePullJobStatus{Desired: 3, Active: 1, Succeeded: 1, Failed: 1, Message: "job is running, progress 66.7%", FailedNodes: []string{"node-c"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.ImagePullJob
			require.NoError(t, imagePullJobToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)
			var alpha v1alpha1.ImagePullJob
			require.NoError(t, imagePullJobToV1alpha1(&tc.beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}
}
