package conversion

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestAdvancedCronJobRoundTrip(t *testing.T) {
	roundTrip(t, "AdvancedCronJob", advancedCronJobToV1beta1, advancedCronJobToV1alpha1, jobFillFuncs()...)
}

func TestAdvancedCronJobMapping(t *testing.T) {
	pod := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "rotate", Image: "busybox:1.36"}},
	}}
	five := intstr.FromInt32(5)
	scheduled := metav1.NewTime(time.Unix(1700000000, 0).UTC())
	tests := []struct {
		name  string
		alpha v1alpha1.AdvancedCronJob
		beta  v1beta1.AdvancedCronJob
	}{
		{
			name: "a broadcastJobTemplate is the same in v1beta1",
			alpha: v1alpha1.AdvancedCronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "rotate", Namespace: "ops"},
				Spec: v1alpha1.AdvancedCronJobSpec{
					Schedule: "@hourly", TimeZone: ptr.To("Europe/Berlin"), ConcurrencyPolicy: v1alpha1.ForbidConcurrent, Paused: ptr.To(false),
					SuccessfulJobsHistoryLimit: ptr.To[int32](3), FailedJobsHistoryLimit: ptr.To[int32](1), StartingDeadlineSeconds: ptr.To[int64](60),
					Template: v1alpha1.CronJobTemplate{BroadcastJobTemplate: &v1alpha1.BroadcastJobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rotate"}},
						Spec:       v1alpha1.BroadcastJobSpec{Template: pod, CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always, TTLSecondsAfterFinished: ptr.To[int32](30)}},
					}},
				},
				Status: v1alpha1.AdvancedCronJobStatus{Type: v1alpha1.BroadcastJobTemplate, LastScheduleTime: &scheduled,
					Active: []corev1.ObjectReference{{Kind: "BroadcastJob", Namespace: "ops", Name: "rotate-1700000000"}}},
			},
			beta: v1beta1.AdvancedCronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "rotate", Namespace: "ops"},
				Spec: v1beta1.AdvancedCronJobSpec{
					Schedule: "@hourly", TimeZone: ptr.To("Europe/Berlin"), ConcurrencyPolicy: v1beta1.ForbidConcurrent, Paused: ptr.To(false),
					SuccessfulJobsHistoryLimit: ptr.To[int32](3), FailedJobsHistoryLimit: ptr.To[int32](1), StartingDeadlineSeconds: ptr.To[int64](60),
					Template: v1beta1.CronJobTemplate{BroadcastJobTemplate: &v1beta1.BroadcastJobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rotate"}},
						Spec:       v1beta1.BroadcastJobSpec{Template: pod, CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always, TTLSecondsAfterFinished: ptr.To[int32](30)}},
					}},
				},
				Status: v1beta1.AdvancedCronJobStatus{Type: v1beta1.BroadcastJobTemplate, LastScheduleTime: &scheduled,
					Active: []corev1.ObjectReference{{Kind: "BroadcastJob", Namespace: "ops", Name: "rotate-1700000000"}}},
			},
		},
		{
			name: "a jobTemplate is the same in v1beta1",
			alpha: v1alpha1.AdvancedCronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "report"},
				Spec: v1alpha1.AdvancedCronJobSpec{Schedule: "30 2 * * *", Template: v1alpha1.CronJobTemplate{
					JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](2), Template: pod}}}},
				Status: v1alpha1.AdvancedCronJobStatus{Type: v1alpha1.JobTemplate},
			},
			beta: v1beta1.AdvancedCronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "report"},
				Spec: v1beta1.AdvancedCronJobSpec{Schedule: "30 2 * * *", Template: v1beta1.CronJobTemplate{
					JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](2), Template: pod}}}},
				Status: v1beta1.AdvancedCronJobStatus{Type: v1beta1.JobTemplate},
			},
		},
		{
			name: "v1beta1 imageListPullJobTemplate is the v1alpha1 annotation conversion.shoal.io/v1beta1, next to the user's annotations; status.type ImageListPullJob stays",
			alpha: v1alpha1.AdvancedCronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "prefetch", Annotations: map[string]string{
					"owner": "platform",
					"conversion.shoal.io/v1beta1": `{"imageListPullJobTemplate":{"metadata":{"labels":{"app":"prefetch"}},"spec":{` +
						`"images":["nginx:1.25","redis:7.2"],"selector":{"names":["node-a"]},"parallelism":5,` +
						`"pullPolicy":{"timeoutSeconds":60},"completionPolicy":{"type":"Always"},"imagePullPolicy":"IfNotPresent"}}}`,
				}},
				Spec:   v1alpha1.AdvancedCronJobSpec{Schedule: "0 */2 * * *", ConcurrencyPolicy: v1alpha1.ReplaceConcurrent},
				Status: v1alpha1.AdvancedCronJobStatus{Type: "ImageListPullJob"},
			},
			beta: v1beta1.AdvancedCronJob{
				ObjectMeta: metav1.ObjectMeta{Name: "prefetch", Annotations: map[string]string{"owner": "platform"}},
				Spec: v1beta1.AdvancedCronJobSpec{Schedule: "0 */2 * * *", ConcurrencyPolicy: v1beta1.ReplaceConcurrent,
					Template: v1beta1.CronJobTemplate{ImageListPullJobTemplate: &v1beta1.ImageListPullJobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "prefetch"}},
						Spec: v1beta1.ImageListPullJobSpec{Images: []string{"nginx:1.25", "redis:7.2"}, ImagePullJobTemplate: v1beta1.ImagePullJobTemplate{
							Selector:         &v1beta1.ImagePullJobNodeSelector{Names: []string{"node-a"}},
							Parallelism:      &five,
							PullPolicy:       &v1beta1.PullPolicy{TimeoutSeconds: ptr.To[int32](60)},
							CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always},
							ImagePullPolicy:  v1beta1.PullIfNotPresent,
						}},
					}}},
				Status: v1beta1.AdvancedCronJobStatus{Type: v1beta1.ImageListPullJobTemplate},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.AdvancedCronJob
			require.NoError(t, advancedCronJobToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)

			var alpha v1alpha1.AdvancedCronJob
			require.NoError(t, advancedCronJobToV1alpha1(&tc.beta, &alpha))
			// The stash is JSON: compare it as JSON, the rest as it is.
			wantStash, gotStash := tc.alpha.Annotations[StashAnnotationPrefix+"v1beta1"], alpha.Annotations[StashAnnotationPrefix+"v1beta1"]
			if wantStash != "" {
				require.JSONEq(t, wantStash, gotStash)
				alpha.Annotations[StashAnnotationPrefix+"v1beta1"] = wantStash
			}
			require.Equal(t, tc.alpha, alpha)
		})
	}
}

func TestAdvancedCronJobBadStash(t *testing.T) {
	in := &v1alpha1.AdvancedCronJob{ObjectMeta: metav1.ObjectMeta{Name: "prefetch", Annotations: map[string]string{
		StashAnnotationPrefix + "v1beta1": `{"imageListPullJobTemplate":`,
	}}}
	var out v1beta1.AdvancedCronJob
	require.ErrorContains(t, advancedCronJobToV1beta1(in, &out), "annotation conversion.shoal.io/v1beta1 of prefetch")
}
