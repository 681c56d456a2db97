package conversion

import (
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// ImageListPullJob has the same fields at v1alpha1 and v1beta1, so every
// field maps to its twin and nothing is stashed.

func init() { register("ImageListPullJob", imageListPullJobToV1beta1, imageListPullJobToV1alpha1) }

// imageListPullJobToV1beta1 converts a v1alpha1 ImageListPullJob to
// v1beta1.
func imageListPullJobToV1beta1(in *v1alpha1.ImageListPullJob, out *v1beta1.ImageListPullJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = v1beta1.ImageListPullJobSpec{
		Images:               in.Spec.Images,
		ImagePullJobTemplate: imagePullJobTemplateToV1beta1(&in.Spec.ImagePullJobTemplate),
	}
	s := &in.Status
	out.Status = v1beta1.ImageListPullJobStatus{
		StartTime:      s.StartTime,
		CompletionTime: s.CompletionTime,
		Desired:        s.Desired,
		Active:         s.Active,
		Completed:      s.Completed,
		Succeeded:      s.Succeeded,
	}
	if s.FailedImageStatuses != nil {
		// A null entry stays null: dropping it would change the list.
		out.Status.FailedImageStatuses = make([]*v1beta1.FailedImageStatus, len(s.FailedImageStatuses))
		for i, f := range s.FailedImageStatuses {
			if f != nil {
				out.Status.FailedImageStatuses[i] = &v1beta1.FailedImageStatus{ImagePullJob: f.ImagePullJob, Name: f.Name, Message: f.Message}
			}
		}
	}
	return nil
}

// imageListPullJobToV1alpha1 converts a v1beta1 ImageListPullJob to
// v1alpha1.
func imageListPullJobToV1alpha1(in *v1beta1.ImageListPullJob, out *v1alpha1.ImageListPullJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = v1alpha1.ImageListPullJobSpec{
		Images:               in.Spec.Images,
		ImagePullJobTemplate: imagePullJobTemplateToV1alpha1(&in.Spec.ImagePullJobTemplate),
	}
	s := &in.Status
	out.Status = v1alpha1.ImageListPullJobStatus{
		StartTime:      s.StartTime,
		CompletionTime: s.CompletionTime,
		Desired:        s.Desired,
		Active:         s.Active,
		Completed:      s.Completed,
		Succeeded:      s.Succeeded,
	}
	if s.FailedImageStatuses != nil {
		out.Status.FailedImageStatuses = make([]*v1alpha1.FailedImageStatus, len(s.FailedImageStatuses))
		for i, f := range s.FailedImageStatuses {
			if f != nil {
				out.Status.FailedImageStatuses[i] = &v1alpha1.FailedImageStatus{ImagePullJob: f.ImagePullJob, Name: f.Name, Message: f.Message}
			}
		}
	}
	return nil
}
