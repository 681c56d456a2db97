package conversion

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// jobFillFuncs fill the enums and values that the job kinds (BroadcastJob,
// ImagePullJob, ImageListPullJob, AdvancedCronJob) share.
func jobFillFuncs() []any {
	return []any{
		// An IntOrString is either a number or a string in JSON; a random
		// Type field would be neither and cannot be written at all.
		func(s *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*s = intstr.FromInt32(c.Int31())
			} else {
				*s = intstr.FromString(c.String(0))
			}
		},
		func(s *v1alpha1.CompletionPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.Always, v1alpha1.Never)
		},
		func(s *v1beta1.CompletionPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.Always, v1beta1.Never)
		},
		func(s *v1alpha1.FailurePolicyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.FailurePolicyTypeContinue, v1alpha1.FailurePolicyTypeFailFast, v1alpha1.FailurePolicyTypePause)
		},
		func(s *v1beta1.FailurePolicyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.FailurePolicyTypeContinue, v1beta1.FailurePolicyTypeFailFast, v1beta1.FailurePolicyTypePause)
		},
		func(s *v1alpha1.ImagePullPolicy, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.PullAlways, v1alpha1.PullIfNotPresent)
		},
		func(s *v1beta1.ImagePullPolicy, c randfill.Continue) {
			*s = pick(c, "", v1beta1.PullAlways, v1beta1.PullIfNotPresent)
		},
		func(s *v1alpha1.ConcurrencyPolicy, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.AllowConcurrent, v1alpha1.ForbidConcurrent, v1alpha1.ReplaceConcurrent)
		},
		func(s *v1beta1.ConcurrencyPolicy, c randfill.Continue) {
			*s = pick(c, "", v1beta1.AllowConcurrent, v1beta1.ForbidConcurrent, v1beta1.ReplaceConcurrent)
		},
	}
}

func TestBroadcastJobRoundTrip(t *testing.T) {
	roundTrip(t, "BroadcastJob", broadcastJobToV1beta1, broadcastJobToV1alpha1, jobFillFuncs()...)
}

func TestBroadcastJobMapping(t *testing.T) {
	pod := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "clean", Image: "busybox:1.36"}},
	}}
	half := intstr.FromString("50%")
	probed := metav1.NewTime(time.Unix(1700000000, 0).UTC())
	tests := []struct {
		name  string
		alpha v1alpha1.BroadcastJob
		beta  v1beta1.BroadcastJob
	}{
		{
			name: "completionPolicy Always with ttl and activeDeadline is the same in v1beta1",
			alpha: v1alpha1.BroadcastJob{
				ObjectMeta: metav1.ObjectMeta{Name: "clean", Namespace: "ops"},
				Spec: v1alpha1.BroadcastJobSpec{
					Parallelism: &half, Template: pod,
					CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always, TTLSecondsAfterFinished: ptr.To[int32](30), ActiveDeadlineSeconds: ptr.To[int64](600)},
				},
			},
			beta: v1beta1.BroadcastJob{
				ObjectMeta: metav1.ObjectMeta{Name: "clean", Namespace: "ops"},
				Spec: v1beta1.BroadcastJobSpec{
					Parallelism: &half, Template: pod,
					CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always, TTLSecondsAfterFinished: ptr.To[int32](30), ActiveDeadlineSeconds: ptr.To[int64](600)},
				},
			},
		},
		{
			name: "completionPolicy Never, failurePolicy Pause with restartLimit and paused keep their values",
			alpha: v1alpha1.BroadcastJob{
				ObjectMeta: metav1.ObjectMeta{Name: "agent"},
				Spec: v1alpha1.BroadcastJobSpec{
					Template: pod, Paused: true,
					CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Never},
					FailurePolicy:    v1alpha1.FailurePolicy{Type: v1alpha1.FailurePolicyTypePause, RestartLimit: 3},
				},
			},
			beta: v1beta1.BroadcastJob{
				ObjectMeta: metav1.ObjectMeta{Name: "agent"},
				Spec: v1beta1.BroadcastJobSpec{
					Template: pod, Paused: true,
					CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Never},
					FailurePolicy:    v1beta1.FailurePolicy{Type: v1beta1.FailurePolicyTypePause, RestartLimit: 3},
				},
			},
		},
		{
			name: "status counters, phase and conditions carry over",
			alpha: v1alpha1.BroadcastJob{
				ObjectMeta: metav1.ObjectMeta{Name: "done"},
				Status: v1alpha1.BroadcastJobStatus{
					Active: 0, Succeeded: 3, Failed: 1, Desired: 4, Phase: v1alpha1.PhaseCompleted,
					StartTime: &probed, CompletionTime: &probed,
					Conditions: []v1alpha1.JobCondition{{Type: v1alpha1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: probed, LastTransitionTime: probed, Reason: "Done", Message: "all pods ended"}},
				},
			},
			beta: v1beta1.BroadcastJob{
				ObjectMeta: metav1.ObjectMeta{Name: "done"},
				Status: v1beta1.BroadcastJobStatus{
					Active: 0, Succeeded: 3, Failed: 1, Desired: 4, Phase: v1beta1.PhaseCompleted,
					StartTime: &probed, CompletionTime: &probed,
					Conditions: []v1beta1.JobCondition{{Type: v1beta1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: probed, LastTransitionTime: probed, Reason: "Done", Message: "all pods ended"}},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.BroadcastJob
			require.NoError(t, broadcastJobToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)
			var alpha v1alpha1.BroadcastJob
			require.NoError(t, broadcastJobToV1alpha1(&tc.beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}
}
