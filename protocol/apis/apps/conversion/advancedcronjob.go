package conversion

import (
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// AdvancedCronJob differs between the versions in one place: v1beta1's
// spec.template.imageListPullJobTemplate, which v1alpha1 has no field for.
// It travels in v1alpha1 in the annotation conversion.shoal.io/v1beta1,
// as v1beta1 JSON, and comes back from it; such a v1alpha1 object has
// neither jobTemplate nor broadcastJobTemplate. status.type is a plain
// string in both versions, so "ImageListPullJob" maps as it is. The
// broadcastJobTemplate spec converts as a BroadcastJob spec does.

func init() { register("AdvancedCronJob", advancedCronJobToV1beta1, advancedCronJobToV1alpha1) }

// advancedCronJobV1beta1Fields are the v1beta1 fields a v1alpha1
// AdvancedCronJob has no place for.
type advancedCronJobV1beta1Fields struct {
	// ImageListPullJobTemplate is spec.template.imageListPullJobTemplate.
	ImageListPullJobTemplate *v1beta1.ImageListPullJobTemplateSpec `json:"imageListPullJobTemplate,omitempty"`
}

// advancedCronJobToV1beta1 converts a v1alpha1 AdvancedCronJob to v1beta1,
// restoring a stashed imageListPullJobTemplate.
func advancedCronJobToV1beta1(in *v1alpha1.AdvancedCronJob, out *v1beta1.AdvancedCronJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var beta advancedCronJobV1beta1Fields
	if _, err := Unstash(&out.ObjectMeta, "v1beta1", &beta); err != nil {
		return err
	}
	s := &in.Spec
	out.Spec = v1beta1.AdvancedCronJobSpec{
		Schedule:                   s.Schedule,
		TimeZone:                   s.TimeZone,
		StartingDeadlineSeconds:    s.StartingDeadlineSeconds,
		ConcurrencyPolicy:          v1beta1.ConcurrencyPolicy(s.ConcurrencyPolicy),
		Paused:                     s.Paused,
		SuccessfulJobsHistoryLimit: s.SuccessfulJobsHistoryLimit,
		FailedJobsHistoryLimit:     s.FailedJobsHistoryLimit,
		Template: v1beta1.CronJobTemplate{
			JobTemplate:              s.Template.JobTemplate,
			ImageListPullJobTemplate: beta.ImageListPullJobTemplate,
		},
	}
	if t := s.Template.BroadcastJobTemplate; t != nil {
		out.Spec.Template.BroadcastJobTemplate = &v1beta1.BroadcastJobTemplateSpec{
			ObjectMeta: t.ObjectMeta,
			Spec:       broadcastJobSpecToV1beta1(&t.Spec),
		}
	}
	out.Status = v1beta1.AdvancedCronJobStatus{
		Type:             v1beta1.TemplateKind(in.Status.Type),
		Active:           in.Status.Active,
		LastScheduleTime: in.Status.LastScheduleTime,
	}
	return nil
}

// advancedCronJobToV1alpha1 converts a v1beta1 AdvancedCronJob to
// v1alpha1, stashing an imageListPullJobTemplate.
func advancedCronJobToV1alpha1(in *v1beta1.AdvancedCronJob, out *v1alpha1.AdvancedCronJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	s := &in.Spec
	out.Spec = v1alpha1.AdvancedCronJobSpec{
		Schedule:                   s.Schedule,
		TimeZone:                   s.TimeZone,
		StartingDeadlineSeconds:    s.StartingDeadlineSeconds,
		ConcurrencyPolicy:          v1alpha1.ConcurrencyPolicy(s.ConcurrencyPolicy),
		Paused:                     s.Paused,
		SuccessfulJobsHistoryLimit: s.SuccessfulJobsHistoryLimit,
		FailedJobsHistoryLimit:     s.FailedJobsHistoryLimit,
		Template: v1alpha1.CronJobTemplate{
			JobTemplate: s.Template.JobTemplate,
		},
	}
	if t := s.Template.BroadcastJobTemplate; t != nil {
		out.Spec.Template.BroadcastJobTemplate = &v1alpha1.BroadcastJobTemplateSpec{
			ObjectMeta: t.ObjectMeta,
			Spec:       broadcastJobSpecToV1alpha1(&t.Spec),
		}
	}
	out.Status = v1alpha1.AdvancedCronJobStatus{
		Type:             v1alpha1.TemplateKind(in.Status.Type),
		Active:           in.Status.Active,
		LastScheduleTime: in.Status.LastScheduleTime,
	}
	beta := advancedCronJobV1beta1Fields{ImageListPullJobTemplate: s.Template.ImageListPullJobTemplate}
	return Stash(&out.ObjectMeta, "v1beta1", &beta)
}
