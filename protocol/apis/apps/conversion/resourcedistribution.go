package conversion

import (
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// ResourceDistribution: both versions hold the same fields. v1beta1 renames
// targets.namespaceLabelSelector to targets.namespaceSelector and
// status.conditions[].failedNamespace to failedNamespaces (same Go field);
// nothing is stashed.

func init() {
	register("ResourceDistribution", resourceDistributionToV1beta1, resourceDistributionToV1alpha1)
}

// resourceDistributionToV1beta1 converts a v1alpha1 ResourceDistribution to
// v1beta1.
func resourceDistributionToV1beta1(in *v1alpha1.ResourceDistribution, out *v1beta1.ResourceDistribution) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = v1beta1.ResourceDistributionSpec{
		Resource: in.Spec.Resource,
		Targets: v1beta1.ResourceDistributionTargets{
			AllNamespaces:      in.Spec.Targets.AllNamespaces,
			ExcludedNamespaces: rdNamespacesToV1beta1(in.Spec.Targets.ExcludedNamespaces),
			IncludedNamespaces: rdNamespacesToV1beta1(in.Spec.Targets.IncludedNamespaces),
			NamespaceSelector:  in.Spec.Targets.NamespaceLabelSelector,
		},
	}
	out.Status = v1beta1.ResourceDistributionStatus{
		Desired:            in.Status.Desired,
		Succeeded:          in.Status.Succeeded,
		Failed:             in.Status.Failed,
		ObservedGeneration: in.Status.ObservedGeneration,
	}
	if in.Status.Conditions != nil {
		out.Status.Conditions = make([]v1beta1.ResourceDistributionCondition, len(in.Status.Conditions))
		for i, c := range in.Status.Conditions {
			out.Status.Conditions[i] = v1beta1.ResourceDistributionCondition{
				Type:               v1beta1.ResourceDistributionConditionType(c.Type),
				Status:             v1beta1.ResourceDistributionConditionStatus(c.Status),
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				FailedNamespaces:   c.FailedNamespaces,
			}
		}
	}
	return nil
}

// resourceDistributionToV1alpha1 converts a v1beta1 ResourceDistribution to
// v1alpha1.
func resourceDistributionToV1alpha1(in *v1beta1.ResourceDistribution, out *v1alpha1.ResourceDistribution) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	out.Spec = v1alpha1.ResourceDistributionSpec{
		Resource: in.Spec.Resource,
		Targets: v1alpha1.ResourceDistributionTargets{
			AllNamespaces:          in.Spec.Targets.AllNamespaces,
			ExcludedNamespaces:     rdNamespacesToV1alpha1(in.Spec.Targets.ExcludedNamespaces),
			IncludedNamespaces:     rdNamespacesToV1alpha1(in.Spec.Targets.IncludedNamespaces),
			NamespaceLabelSelector: in.Spec.Targets.NamespaceSelector,
		},
	}
	out.Status = v1alpha1.ResourceDistributionStatus{
		Desired:            in.Status.Desired,
		Succeeded:          in.Status.Succeeded,
		Failed:             in.Status.Failed,
		ObservedGeneration: in.Status.ObservedGeneration,
	}
	if in.Status.Conditions != nil {
		out.Status.Conditions = make([]v1alpha1.ResourceDistributionCondition, len(in.Status.Conditions))
		for i, c := range in.Status.Conditions {
			out.Status.Conditions[i] = v1alpha1.ResourceDistributionCondition{
				Type:               v1alpha1.ResourceDistributionConditionType(c.Type),
				Status:             v1alpha1.ResourceDistributionConditionStatus(c.Status),
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				FailedNamespaces:   c.FailedNamespaces,
			}
		}
	}
	return nil
}

// rdNamespacesToV1beta1 converts a v1alpha1 namespace list.
func rdNamespacesToV1beta1(in v1alpha1.ResourceDistributionTargetNamespaces) v1beta1.ResourceDistributionTargetNamespaces {
	if in.List == nil {
		return v1beta1.ResourceDistributionTargetNamespaces{}
	}
	out := make([]v1beta1.ResourceDistributionNamespace, len(in.List))
	for i, n := range in.List {
		out[i] = v1beta1.ResourceDistributionNamespace{Name: n.Name}
	}
	return v1beta1.ResourceDistributionTargetNamespaces{List: out}
}

// rdNamespacesToV1alpha1 converts a v1beta1 namespace list.
func rdNamespacesToV1alpha1(in v1beta1.ResourceDistributionTargetNamespaces) v1alpha1.ResourceDistributionTargetNamespaces {
	if in.List == nil {
		return v1alpha1.ResourceDistributionTargetNamespaces{}
	}
	out := make([]v1alpha1.ResourceDistributionNamespace, len(in.List))
	for i, n := range in.List {
		out[i] = v1alpha1.ResourceDistributionNamespace{Name: n.Name}
	}
	return v1alpha1.ResourceDistributionTargetNamespaces{List: out}
}
