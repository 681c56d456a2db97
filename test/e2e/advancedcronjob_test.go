//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// acjTimeout bounds a wait for a scheduled run (the schedules below run
// every minute, or every few seconds).
const acjTimeout = 2 * time.Minute

// acjPodSpec runs `testserver sleep 1s` to completion.
func acjPodSpec(f *framework.Framework) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		RestartPolicy:                 corev1.RestartPolicyNever,
		Containers:                    []corev1.Container{{Name: "box", Image: f.Image("testserver:latest"), Args: []string{"sleep", "1s"}}},
	}
}

// runsOf lists the Jobs the cron job started (by controller reference).
func runsOf(ctx context.Context, t *testing.T, f *framework.Framework, name string) []batchv1.Job {
	t.Helper()
	list, err := f.Kube.BatchV1().Jobs(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []batchv1.Job
	for _, j := range list.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.Kind == "AdvancedCronJob" && ref.Name == name {
			out = append(out, j)
		}
	}
	return out
}

// TestAdvancedCronJob ports OpenKruise's AdvancedCronJob cases: "should
// create and schedule AdvancedCronJob with Job template" and "... with
// BroadcastJob template" (a run starts on the schedule and completes;
// lastScheduleTime is set), and "should pause and resume AdvancedCronJob"
// with a schedule of every 5 s instead of every minute (no run while
// paused, runs again once resumed), plus the admission of a bad time
// zone.
func TestAdvancedCronJob(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	cronJobs := f.Shoal.AppsV1beta1().AdvancedCronJobs(f.Namespace)
	waitScheduled := func(t *testing.T, name string) *v1beta1.AdvancedCronJob {
		t.Helper()
		return waitObject(ctx, t, cronJobs, acjTimeout, name, "gets a lastScheduleTime",
			func(acj *v1beta1.AdvancedCronJob) bool { return acj.Status.LastScheduleTime != nil },
			func(acj *v1beta1.AdvancedCronJob) any { return acj.Status })
	}

	t.Run("with Job template", func(t *testing.T) {
		t.Parallel()
		_, err := cronJobs.Create(ctx, &v1beta1.AdvancedCronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "acj-job"},
			Spec: v1beta1.AdvancedCronJobSpec{Schedule: "*/1 * * * *", Template: v1beta1.CronJobTemplate{
				JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: acjPodSpec(f)}}},
			}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		acj := waitScheduled(t, "acj-job")
		require.Equal(t, v1beta1.JobTemplate, acj.Status.Type)
		var run batchv1.Job
		err = framework.WaitFor(ctx, acjTimeout, func(ctx context.Context) (bool, error) {
			runs := runsOf(ctx, t, f, "acj-job")
			for _, j := range runs {
				for _, c := range j.Status.Conditions {
					if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
						run = j
						return true, nil
					}
				}
			}
			return false, nil
		})
		require.NoError(t, err, "a run completes")
		require.NotEmpty(t, run.Annotations[wellknown.AnnotationScheduledAt])
	})

	t.Run("with BroadcastJob template", func(t *testing.T) {
		t.Parallel()
		_, err := cronJobs.Create(ctx, &v1beta1.AdvancedCronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "acj-bcj"},
			Spec: v1beta1.AdvancedCronJobSpec{Schedule: "*/1 * * * *", Template: v1beta1.CronJobTemplate{
				BroadcastJobTemplate: &v1beta1.BroadcastJobTemplateSpec{Spec: v1beta1.BroadcastJobSpec{
					Template: corev1.PodTemplateSpec{Spec: acjPodSpec(f)}, CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always},
				}},
			}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		acj := waitScheduled(t, "acj-bcj")
		require.Equal(t, v1beta1.BroadcastJobTemplate, acj.Status.Type)
		err = framework.WaitFor(ctx, acjTimeout, func(ctx context.Context) (bool, error) {
			list, err := f.Shoal.AppsV1beta1().BroadcastJobs(f.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, j := range list.Items {
				if ref := metav1.GetControllerOf(&j); ref != nil && ref.Name == "acj-bcj" && j.Status.Phase == v1beta1.PhaseCompleted {
					return true, nil
				}
			}
			return false, nil
		})
		require.NoError(t, err, "a BroadcastJob run completes on every node")
	})

	// Issue 24: with a timeZone east of UTC and the schedule one minute
	// ahead in that zone, exactly one Job runs, at that minute.
	t.Run("timeZone east of UTC", func(t *testing.T) {
		t.Parallel()
		tokyo, err := time.LoadLocation("Asia/Tokyo")
		require.NoError(t, err)
		// Two minutes ahead when close to the minute's end, so the object
		// is surely in before its slot.
		at := time.Now().In(tokyo).Add(time.Minute).Truncate(time.Minute)
		if time.Until(at) < 20*time.Second {
			at = at.Add(time.Minute)
		}
		_, err = cronJobs.Create(ctx, &v1beta1.AdvancedCronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "acj-tz"},
			Spec: v1beta1.AdvancedCronJobSpec{
				Schedule: fmt.Sprintf("%d %d * * *", at.Minute(), at.Hour()), TimeZone: ptr.To("Asia/Tokyo"),
				Template: v1beta1.CronJobTemplate{JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: acjPodSpec(f)}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Empty(t, runsOf(ctx, t, f, "acj-tz"), "no run before the minute")
		waitScheduled(t, "acj-tz")
		// A little past the slot, nothing more may come (the next is a
		// day away): exactly one run, for that minute.
		err = framework.WaitFor(ctx, acjTimeout, func(context.Context) (bool, error) { return time.Since(at) > 10*time.Second, nil })
		require.NoError(t, err)
		runs := runsOf(ctx, t, f, "acj-tz")
		require.Len(t, runs, 1, "exactly one run")
		require.Equal(t, at.UTC().Format(time.RFC3339), runs[0].Annotations[wellknown.AnnotationScheduledAt], "scheduled at %s Tokyo time", at.Format("15:04"))
		require.False(t, runs[0].CreationTimestamp.Time.Before(at), "not created before its minute")
	})

	// Issue 24: Forbid skips a run while the last one still goes; Replace
	// stops it and starts the new one.
	for _, tc := range []struct {
		policy v1beta1.ConcurrencyPolicy
		name   string
	}{{v1beta1.ForbidConcurrent, "acj-forbid"}, {v1beta1.ReplaceConcurrent, "acj-replace"}} {
		t.Run("concurrencyPolicy "+string(tc.policy), func(t *testing.T) {
			t.Parallel()
			long := acjPodSpec(f)
			long.Containers[0].Args = []string{"sleep", "60s"}
			_, err := cronJobs.Create(ctx, &v1beta1.AdvancedCronJob{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name},
				Spec: v1beta1.AdvancedCronJobSpec{Schedule: "@every 3s", ConcurrencyPolicy: tc.policy,
					Template: v1beta1.CronJobTemplate{JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: long}}}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			waitScheduled(t, tc.name)
			first := runsOf(ctx, t, f, tc.name)
			require.NotEmpty(t, first)
			// Four slots later: Forbid kept the first run alone; Replace
			// has replaced it, and never ran two at once.
			seen := map[string]bool{}
			err = framework.WaitFor(ctx, acjTimeout, func(ctx context.Context) (bool, error) {
				live := 0
				for _, j := range runsOf(ctx, t, f, tc.name) {
					seen[j.Name] = true
					if j.DeletionTimestamp == nil {
						live++
					}
				}
				require.LessOrEqual(t, live, 1, "at most one run at a time under %s", tc.policy)
				return time.Since(first[0].CreationTimestamp.Time) > 12*time.Second, nil
			})
			require.NoError(t, err)
			runs := runsOf(ctx, t, f, tc.name)
			if tc.policy == v1beta1.ForbidConcurrent {
				require.Len(t, seen, 1, "Forbid: no second run while the first goes: %v", seen)
				require.Equal(t, first[0].UID, runs[0].UID)
				return
			}
			require.Greater(t, len(seen), 1, "Replace: newer runs replaced the first: %v", seen)
			for _, j := range runs {
				if j.DeletionTimestamp == nil {
					require.NotEqual(t, first[0].UID, j.UID, "the first run is replaced")
				}
			}
		})
	}

	t.Run("pause and resume", func(t *testing.T) {
		t.Parallel()
		_, err := cronJobs.Create(ctx, &v1beta1.AdvancedCronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "acj-pause"},
			Spec: v1beta1.AdvancedCronJobSpec{Schedule: "@every 5s", ConcurrencyPolicy: v1beta1.AllowConcurrent,
				SuccessfulJobsHistoryLimit: ptr.To[int32](100),
				Template: v1beta1.CronJobTemplate{
					JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: acjPodSpec(f)}}},
				}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		err = framework.WaitFor(ctx, acjTimeout, func(ctx context.Context) (bool, error) { return len(runsOf(ctx, t, f, "acj-pause")) >= 1, nil })
		require.NoError(t, err, "a first run")

		setPaused := func(paused bool) {
			t.Helper()
			updateObject(ctx, t, cronJobs, "acj-pause", func(acj *v1beta1.AdvancedCronJob) { acj.Spec.Paused = ptr.To(paused) })
		}
		setPaused(true)
		// A run may start as the pause is written; after that, none.
		paused := len(runsOf(ctx, t, f, "acj-pause"))
		// (The waits below are meant to time out: the lists use the test's
		// context, not the wait's.)
		err = framework.WaitFor(ctx, 12*time.Second, func(context.Context) (bool, error) {
			return len(runsOf(ctx, t, f, "acj-pause")) > paused+1, nil
		})
		require.Error(t, err, "at most the run in flight while pausing")
		paused = len(runsOf(ctx, t, f, "acj-pause"))
		err = framework.WaitFor(ctx, 12*time.Second, func(context.Context) (bool, error) {
			return len(runsOf(ctx, t, f, "acj-pause")) > paused, nil
		})
		require.Error(t, err, "no run while paused (slots every 5 s)")

		setPaused(false)
		err = framework.WaitFor(ctx, acjTimeout, func(ctx context.Context) (bool, error) {
			return len(runsOf(ctx, t, f, "acj-pause")) > paused, nil
		})
		require.NoError(t, err, "runs again once resumed")
	})

	t.Run("admission", func(t *testing.T) {
		t.Parallel()
		_, err := cronJobs.Create(ctx, &v1beta1.AdvancedCronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "acj-bad-zone"},
			Spec: v1beta1.AdvancedCronJobSpec{Schedule: "0 2 * * *", TimeZone: ptr.To("Moon/Base"), Template: v1beta1.CronJobTemplate{
				JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: acjPodSpec(f)}}},
			}},
		}, metav1.CreateOptions{})
		require.ErrorContains(t, err, `spec.timeZone "Moon/Base"`)
		// A real zone is known (the coordinator's image has no zoneinfo;
		// the binary carries it).
		_, err = cronJobs.Create(ctx, &v1beta1.AdvancedCronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "acj-shanghai"},
			Spec: v1beta1.AdvancedCronJobSpec{Schedule: "0 2 * * *", TimeZone: ptr.To("Asia/Shanghai"), Template: v1beta1.CronJobTemplate{
				JobTemplate: &batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: acjPodSpec(f)}}},
			}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
	})
}
