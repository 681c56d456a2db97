package conversion

import (
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// ImagePullJob has the same fields at v1alpha1 and v1beta1, so every field
// maps to its twin and nothing is stashed. (The secret "mode" that v1beta1
// added belongs to NodeImage's pull secret references, not to
// ImagePullJob.)

func init() { register("ImagePullJob", imagePullJobToV1beta1, imagePullJobToV1alpha1) }

// imagePullJobToV1beta1 converts a v1alpha1 ImagePullJob to v1beta1.
func imagePullJobToV1beta1(in *v1alpha1.ImagePullJob, out *v1beta1.ImagePullJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = v1beta1.ImagePullJobSpec{
		Image:                in.Spec.Image,
		ImagePullJobTemplate: imagePullJobTemplateToV1beta1(&in.Spec.ImagePullJobTemplate),
	}
	s := &in.Status
	out.Status = v1beta1.ImagePullJobStatus{
		StartTime:      s.StartTime,
		CompletionTime: s.CompletionTime,
		Desired:        s.Desired,
		Active:         s.Active,
		Succeeded:      s.Succeeded,
		Failed:         s.Failed,
		Message:        s.Message,
		FailedNodes:    s.FailedNodes,
	}
	return nil
}

// imagePullJobToV1alpha1 converts a v1beta1 ImagePullJob to v1alpha1.
func imagePullJobToV1alpha1(in *v1beta1.ImagePullJob, out *v1alpha1.ImagePullJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = v1alpha1.ImagePullJobSpec{
		Image:                in.Spec.Image,
		ImagePullJobTemplate: imagePullJobTemplateToV1alpha1(&in.Spec.ImagePullJobTemplate),
	}
	s := &in.Status
	out.Status = v1alpha1.ImagePullJobStatus{
		StartTime:      s.StartTime,
		CompletionTime: s.CompletionTime,
		Desired:        s.Desired,
		Active:         s.Active,
		Succeeded:      s.Succeeded,
		Failed:         s.Failed,
		Message:        s.Message,
		FailedNodes:    s.FailedNodes,
	}
	return nil
}

// imagePullJobTemplateToV1beta1 converts the settings ImagePullJob and
// ImageListPullJob share. Slices, maps and label selectors are shared with
// in, not copied.
func imagePullJobTemplateToV1beta1(in *v1alpha1.ImagePullJobTemplate) v1beta1.ImagePullJobTemplate {
	out := v1beta1.ImagePullJobTemplate{
		PullSecrets:      in.PullSecrets,
		Parallelism:      in.Parallelism,
		CompletionPolicy: completionPolicyToV1beta1(in.CompletionPolicy),
		ImagePullPolicy:  v1beta1.ImagePullPolicy(in.ImagePullPolicy),
	}
	if in.Selector != nil {
		out.Selector = &v1beta1.ImagePullJobNodeSelector{Names: in.Selector.Names, LabelSelector: in.Selector.LabelSelector}
	}
	if in.PodSelector != nil {
		out.PodSelector = &v1beta1.ImagePullJobPodSelector{LabelSelector: in.PodSelector.LabelSelector}
	}
	if in.PullPolicy != nil {
		out.PullPolicy = &v1beta1.PullPolicy{TimeoutSeconds: in.PullPolicy.TimeoutSeconds, BackoffLimit: in.PullPolicy.BackoffLimit}
	}
	if in.SandboxConfig != nil {
		out.SandboxConfig = &v1beta1.SandboxConfig{Labels: in.SandboxConfig.Labels, Annotations: in.SandboxConfig.Annotations}
	}
	return out
}

// imagePullJobTemplateToV1alpha1 is imagePullJobTemplateToV1beta1 the
// other way.
func imagePullJobTemplateToV1alpha1(in *v1beta1.ImagePullJobTemplate) v1alpha1.ImagePullJobTemplate {
	out := v1alpha1.ImagePullJobTemplate{
		PullSecrets:      in.PullSecrets,
		Parallelism:      in.Parallelism,
		CompletionPolicy: completionPolicyToV1alpha1(in.CompletionPolicy),
		ImagePullPolicy:  v1alpha1.ImagePullPolicy(in.ImagePullPolicy),
	}
	if in.Selector != nil {
		out.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: in.Selector.Names, LabelSelector: in.Selector.LabelSelector}
	}
	if in.PodSelector != nil {
		out.PodSelector = &v1alpha1.ImagePullJobPodSelector{LabelSelector: in.PodSelector.LabelSelector}
	}
	if in.PullPolicy != nil {
		out.PullPolicy = &v1alpha1.PullPolicy{TimeoutSeconds: in.PullPolicy.TimeoutSeconds, BackoffLimit: in.PullPolicy.BackoffLimit}
	}
	if in.SandboxConfig != nil {
		out.SandboxConfig = &v1alpha1.SandboxConfig{Labels: in.SandboxConfig.Labels, Annotations: in.SandboxConfig.Annotations}
	}
	return out
}
