package conversion

import (
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// BroadcastJob has the same fields at v1alpha1 and v1beta1, so every field
// maps to its twin and nothing is stashed.

func init() { register("BroadcastJob", broadcastJobToV1beta1, broadcastJobToV1alpha1) }

// broadcastJobToV1beta1 converts a v1alpha1 BroadcastJob to v1beta1.
func broadcastJobToV1beta1(in *v1alpha1.BroadcastJob, out *v1beta1.BroadcastJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = broadcastJobSpecToV1beta1(&in.Spec)
	s := &in.Status
	out.Status = v1beta1.BroadcastJobStatus{
		StartTime:      s.StartTime,
		CompletionTime: s.CompletionTime,
		Active:         s.Active,
		Succeeded:      s.Succeeded,
		Failed:         s.Failed,
		Desired:        s.Desired,
		Phase:          v1beta1.BroadcastJobPhase(s.Phase),
	}
	if s.Conditions != nil {
		out.Status.Conditions = make([]v1beta1.JobCondition, len(s.Conditions))
		for i, c := range s.Conditions {
			out.Status.Conditions[i] = v1beta1.JobCondition{
				Type:               v1beta1.JobConditionType(c.Type),
				Status:             c.Status,
				LastProbeTime:      c.LastProbeTime,
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}
	return nil
}

// broadcastJobToV1alpha1 converts a v1beta1 BroadcastJob to v1alpha1.
func broadcastJobToV1alpha1(in *v1beta1.BroadcastJob, out *v1alpha1.BroadcastJob) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = broadcastJobSpecToV1alpha1(&in.Spec)
	s := &in.Status
	out.Status = v1alpha1.BroadcastJobStatus{
		StartTime:      s.StartTime,
		CompletionTime: s.CompletionTime,
		Active:         s.Active,
		Succeeded:      s.Succeeded,
		Failed:         s.Failed,
		Desired:        s.Desired,
		Phase:          v1alpha1.BroadcastJobPhase(s.Phase),
	}
	if s.Conditions != nil {
		out.Status.Conditions = make([]v1alpha1.JobCondition, len(s.Conditions))
		for i, c := range s.Conditions {
			out.Status.Conditions[i] = v1alpha1.JobCondition{
				Type:               v1alpha1.JobConditionType(c.Type),
				Status:             c.Status,
				LastProbeTime:      c.LastProbeTime,
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}
	return nil
}

// broadcastJobSpecToV1beta1 converts a BroadcastJob spec (also the spec of
// an AdvancedCronJob's broadcastJobTemplate) to v1beta1. The pod template
// is shared, not copied.
func broadcastJobSpecToV1beta1(in *v1alpha1.BroadcastJobSpec) v1beta1.BroadcastJobSpec {
	return v1beta1.BroadcastJobSpec{
		Parallelism:      in.Parallelism,
		Template:         in.Template,
		CompletionPolicy: completionPolicyToV1beta1(in.CompletionPolicy),
		Paused:           in.Paused,
		FailurePolicy: v1beta1.FailurePolicy{
			Type:         v1beta1.FailurePolicyType(in.FailurePolicy.Type),
			RestartLimit: in.FailurePolicy.RestartLimit,
		},
	}
}

// broadcastJobSpecToV1alpha1 is broadcastJobSpecToV1beta1 the other way.
func broadcastJobSpecToV1alpha1(in *v1beta1.BroadcastJobSpec) v1alpha1.BroadcastJobSpec {
	return v1alpha1.BroadcastJobSpec{
		Parallelism:      in.Parallelism,
		Template:         in.Template,
		CompletionPolicy: completionPolicyToV1alpha1(in.CompletionPolicy),
		Paused:           in.Paused,
		FailurePolicy: v1alpha1.FailurePolicy{
			Type:         v1alpha1.FailurePolicyType(in.FailurePolicy.Type),
			RestartLimit: in.FailurePolicy.RestartLimit,
		},
	}
}

// completionPolicyToV1beta1 converts the completion policy that
// BroadcastJob, ImagePullJob and ImageListPullJob share.
func completionPolicyToV1beta1(in v1alpha1.CompletionPolicy) v1beta1.CompletionPolicy {
	return v1beta1.CompletionPolicy{
		Type:                    v1beta1.CompletionPolicyType(in.Type),
		ActiveDeadlineSeconds:   in.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: in.TTLSecondsAfterFinished,
	}
}

// completionPolicyToV1alpha1 is completionPolicyToV1beta1 the other way.
func completionPolicyToV1alpha1(in v1beta1.CompletionPolicy) v1alpha1.CompletionPolicy {
	return v1alpha1.CompletionPolicy{
		Type:                    v1alpha1.CompletionPolicyType(in.Type),
		ActiveDeadlineSeconds:   in.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: in.TTLSecondsAfterFinished,
	}
}
