package conversion

import (
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// PersistentPodState: both versions hold the same fields. v1beta1 renames
// nodeTopologyKeys to keys in requiredPersistentTopology and in each
// preferredPersistentTopology[].preference; nothing is stashed.

func init() {
	register("PersistentPodState", persistentPodStateToV1beta1, persistentPodStateToV1alpha1)
}

// persistentPodStateToV1beta1 converts a v1alpha1 PersistentPodState to
// v1beta1.
func persistentPodStateToV1beta1(in *v1alpha1.PersistentPodState, out *v1beta1.PersistentPodState) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	s := &in.Spec
	out.Spec = v1beta1.PersistentPodStateSpec{
		TargetReference: v1beta1.TargetReference{
			APIVersion: s.TargetReference.APIVersion,
			Kind:       s.TargetReference.Kind,
			Name:       s.TargetReference.Name,
		},
		PersistentPodStateRetentionPolicy: v1beta1.PersistentPodStateRetentionPolicyType(s.PersistentPodStateRetentionPolicy),
	}
	if s.PersistentPodAnnotations != nil {
		out.Spec.PersistentPodAnnotations = make([]v1beta1.PersistentPodAnnotation, len(s.PersistentPodAnnotations))
		for i, a := range s.PersistentPodAnnotations {
			out.Spec.PersistentPodAnnotations[i] = v1beta1.PersistentPodAnnotation{Key: a.Key}
		}
	}
	if t := s.RequiredPersistentTopology; t != nil {
		out.Spec.RequiredPersistentTopology = &v1beta1.NodeTopologyTerm{Keys: t.NodeTopologyKeys}
	}
	if s.PreferredPersistentTopology != nil {
		out.Spec.PreferredPersistentTopology = make([]v1beta1.PreferredTopologyTerm, len(s.PreferredPersistentTopology))
		for i, t := range s.PreferredPersistentTopology {
			out.Spec.PreferredPersistentTopology[i] = v1beta1.PreferredTopologyTerm{
				Weight:     t.Weight,
				Preference: v1beta1.NodeTopologyTerm{Keys: t.Preference.NodeTopologyKeys},
			}
		}
	}
	out.Status = v1beta1.PersistentPodStateStatus{ObservedGeneration: in.Status.ObservedGeneration}
	if in.Status.PodStates != nil {
		out.Status.PodStates = make(map[string]v1beta1.PodState, len(in.Status.PodStates))
		for name, p := range in.Status.PodStates {
			out.Status.PodStates[name] = v1beta1.PodState{
				NodeName:           p.NodeName,
				NodeTopologyLabels: p.NodeTopologyLabels,
				Annotations:        p.Annotations,
			}
		}
	}
	return nil
}

// persistentPodStateToV1alpha1 converts a v1beta1 PersistentPodState to
// v1alpha1.
func persistentPodStateToV1alpha1(in *v1beta1.PersistentPodState, out *v1alpha1.PersistentPodState) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	s := &in.Spec
	out.Spec = v1alpha1.PersistentPodStateSpec{
		TargetReference: v1alpha1.TargetReference{
			APIVersion: s.TargetReference.APIVersion,
			Kind:       s.TargetReference.Kind,
			Name:       s.TargetReference.Name,
		},
		PersistentPodStateRetentionPolicy: v1alpha1.PersistentPodStateRetentionPolicyType(s.PersistentPodStateRetentionPolicy),
	}
	if s.PersistentPodAnnotations != nil {
		out.Spec.PersistentPodAnnotations = make([]v1alpha1.PersistentPodAnnotation, len(s.PersistentPodAnnotations))
		for i, a := range s.PersistentPodAnnotations {
			out.Spec.PersistentPodAnnotations[i] = v1alpha1.PersistentPodAnnotation{Key: a.Key}
		}
	}
	if t := s.RequiredPersistentTopology; t != nil {
		out.Spec.RequiredPersistentTopology = &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: t.Keys}
	}
	if s.PreferredPersistentTopology != nil {
		out.Spec.PreferredPersistentTopology = make([]v1alpha1.PreferredTopologyTerm, len(s.PreferredPersistentTopology))
		for i, t := range s.PreferredPersistentTopology {
			out.Spec.PreferredPersistentTopology[i] = v1alpha1.PreferredTopologyTerm{
				Weight:     t.Weight,
				Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: t.Preference.Keys},
			}
		}
	}
	out.Status = v1alpha1.PersistentPodStateStatus{ObservedGeneration: in.Status.ObservedGeneration}
	if in.Status.PodStates != nil {
		out.Status.PodStates = make(map[string]v1alpha1.PodState, len(in.Status.PodStates))
		for name, p := range in.Status.PodStates {
			out.Status.PodStates[name] = v1alpha1.PodState{
				NodeName:           p.NodeName,
				NodeTopologyLabels: p.NodeTopologyLabels,
				Annotations:        p.Annotations,
			}
		}
	}
	return nil
}
