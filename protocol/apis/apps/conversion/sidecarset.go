package conversion

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// SidecarSet differs between the versions in two places:
//
//   - v1alpha1's spec.namespace is, in v1beta1, a namespaceSelector on the
//     namespace's kubernetes.io/metadata.name label. The stash remembers
//     that the selector came from a namespace, and the way back turns the
//     selector into the namespace again while it still has that exact
//     shape. (An object with both namespace and namespaceSelector, which
//     the v1alpha1 schema refuses, keeps its namespace in the stash.)
//   - v1alpha1's label apps.kruise.io/sidecarset-custom-version is
//     v1beta1's spec.customVersion. An empty label value stays a label. A
//     v1beta1 object that carries the label itself where v1alpha1 would
//     read it as the custom version keeps it in the stash.
//
// Everything else, including containers' resourcesPolicy and
// shareVolumeDevicePolicy, maps field for field.

func init() { register("SidecarSet", sidecarSetToV1beta1, sidecarSetToV1alpha1) }

// scsNamespaceNameLabel is the label Kubernetes sets on every namespace
// to its own name.
const scsNamespaceNameLabel = "kubernetes.io/metadata.name"

// sidecarSetAlphaFields are the v1alpha1 facts a v1beta1 SidecarSet cannot
// hold, stashed on the v1beta1 object.
type sidecarSetAlphaFields struct {
	// NamespaceAsSelector is spec.namespace when v1beta1's namespaceSelector
	// was made from it.
	NamespaceAsSelector *string `json:"namespaceAsSelector,omitempty"`
	// Namespace is spec.namespace when namespaceSelector was set as well,
	// so it had no place in v1beta1.
	Namespace *string `json:"namespace,omitempty"`
}

// sidecarSetBetaFields are the v1beta1 facts a v1alpha1 SidecarSet cannot
// hold, stashed on the v1alpha1 object.
type sidecarSetBetaFields struct {
	// CustomVersionLabel is the value the v1beta1 object's own
	// apps.kruise.io/sidecarset-custom-version label had, when v1alpha1
	// would have read it as the custom version or customVersion took its
	// place.
	CustomVersionLabel *string `json:"customVersionLabel,omitempty"`
}

// sidecarSetToV1beta1 converts a v1alpha1 SidecarSet to v1beta1.
func sidecarSetToV1beta1(in *v1alpha1.SidecarSet, out *v1beta1.SidecarSet) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var beta sidecarSetBetaFields
	if _, err := Unstash(&out.ObjectMeta, "v1beta1", &beta); err != nil {
		return err
	}
	var alpha sidecarSetAlphaFields

	s := &in.Spec
	out.Spec = v1beta1.SidecarSetSpec{
		Selector:             s.Selector,
		NamespaceSelector:    s.NamespaceSelector,
		InitContainers:       sidecarContainersToV1beta1(s.InitContainers),
		Containers:           sidecarContainersToV1beta1(s.Containers),
		Volumes:              s.Volumes,
		UpdateStrategy:       sidecarSetUpdateStrategyToV1beta1(&s.UpdateStrategy),
		InjectionStrategy:    sidecarSetInjectionToV1beta1(&s.InjectionStrategy),
		ImagePullSecrets:     s.ImagePullSecrets,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
	}
	if s.PatchPodMetadata != nil {
		out.Spec.PatchPodMetadata = make([]v1beta1.SidecarSetPatchPodMetadata, len(s.PatchPodMetadata))
		for i, p := range s.PatchPodMetadata {
			out.Spec.PatchPodMetadata[i] = v1beta1.SidecarSetPatchPodMetadata{
				Annotations: p.Annotations,
				PatchPolicy: v1beta1.SidecarSetPatchPolicyType(p.PatchPolicy),
			}
		}
	}
	if ns := s.Namespace; ns != "" {
		if s.NamespaceSelector == nil {
			out.Spec.NamespaceSelector = sidecarSetNamespaceSelector(ns)
			alpha.NamespaceAsSelector = &ns
		} else {
			alpha.Namespace = &ns
		}
	}

	// A non-empty custom-version label is the custom version. The v1beta1
	// object's own label comes back from the stash unless the v1alpha1
	// object now has another (empty) value there.
	v, ok := out.Labels[v1alpha1.SidecarSetCustomVersionLabel]
	if ok && v != "" {
		out.Spec.CustomVersion = v
		scsDeleteLabel(&out.ObjectMeta, v1alpha1.SidecarSetCustomVersionLabel)
		ok = false
	}
	if beta.CustomVersionLabel != nil && !ok {
		scsSetLabel(&out.ObjectMeta, v1beta1.SidecarSetCustomVersionLabel, *beta.CustomVersionLabel)
	}

	st := &in.Status
	out.Status = v1beta1.SidecarSetStatus{
		ObservedGeneration: st.ObservedGeneration,
		MatchedPods:        st.MatchedPods,
		UpdatedPods:        st.UpdatedPods,
		ReadyPods:          st.ReadyPods,
		UpdatedReadyPods:   st.UpdatedReadyPods,
		LatestRevision:     st.LatestRevision,
		CollisionCount:     st.CollisionCount,
	}
	return Stash(&out.ObjectMeta, "v1alpha1", &alpha)
}

// sidecarSetToV1alpha1 converts a v1beta1 SidecarSet to v1alpha1.
func sidecarSetToV1alpha1(in *v1beta1.SidecarSet, out *v1alpha1.SidecarSet) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var alpha sidecarSetAlphaFields
	if _, err := Unstash(&out.ObjectMeta, "v1alpha1", &alpha); err != nil {
		return err
	}
	var beta sidecarSetBetaFields

	s := &in.Spec
	out.Spec = v1alpha1.SidecarSetSpec{
		Selector:             s.Selector,
		NamespaceSelector:    s.NamespaceSelector,
		InitContainers:       sidecarContainersToV1alpha1(s.InitContainers),
		Containers:           sidecarContainersToV1alpha1(s.Containers),
		Volumes:              s.Volumes,
		UpdateStrategy:       sidecarSetUpdateStrategyToV1alpha1(&s.UpdateStrategy),
		InjectionStrategy:    sidecarSetInjectionToV1alpha1(&s.InjectionStrategy),
		ImagePullSecrets:     s.ImagePullSecrets,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
	}
	if s.PatchPodMetadata != nil {
		out.Spec.PatchPodMetadata = make([]v1alpha1.SidecarSetPatchPodMetadata, len(s.PatchPodMetadata))
		for i, p := range s.PatchPodMetadata {
			out.Spec.PatchPodMetadata[i] = v1alpha1.SidecarSetPatchPodMetadata{
				Annotations: p.Annotations,
				PatchPolicy: v1alpha1.SidecarSetPatchPolicyType(p.PatchPolicy),
			}
		}
	}
	// The selector turns back into the namespace it was made from while it
	// still selects exactly that namespace.
	if ns := alpha.NamespaceAsSelector; ns != nil && sidecarSetIsNamespaceSelector(s.NamespaceSelector, *ns) {
		out.Spec.Namespace = *ns
		out.Spec.NamespaceSelector = nil
	}
	if alpha.Namespace != nil {
		out.Spec.Namespace = *alpha.Namespace
	}

	// customVersion becomes the label. The object's own label is kept as
	// it is unless v1alpha1 would read it as the custom version (non-empty)
	// or customVersion takes its place; then it goes to the stash.
	key := v1alpha1.SidecarSetCustomVersionLabel
	if own, had := out.Labels[key]; had && (s.CustomVersion != "" || own != "") {
		beta.CustomVersionLabel = &own
		scsDeleteLabel(&out.ObjectMeta, key)
	}
	if s.CustomVersion != "" {
		scsSetLabel(&out.ObjectMeta, key, s.CustomVersion)
	}

	st := &in.Status
	out.Status = v1alpha1.SidecarSetStatus{
		ObservedGeneration: st.ObservedGeneration,
		MatchedPods:        st.MatchedPods,
		UpdatedPods:        st.UpdatedPods,
		ReadyPods:          st.ReadyPods,
		UpdatedReadyPods:   st.UpdatedReadyPods,
		LatestRevision:     st.LatestRevision,
		CollisionCount:     st.CollisionCount,
	}
	return Stash(&out.ObjectMeta, "v1beta1", &beta)
}

// sidecarSetNamespaceSelector selects the one namespace ns by its name
// label.
func sidecarSetNamespaceSelector(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{scsNamespaceNameLabel: ns}}
}

// sidecarSetIsNamespaceSelector reports whether sel is exactly
// sidecarSetNamespaceSelector(ns).
func sidecarSetIsNamespaceSelector(sel *metav1.LabelSelector, ns string) bool {
	if sel == nil || len(sel.MatchExpressions) != 0 || len(sel.MatchLabels) != 1 {
		return false
	}
	v, ok := sel.MatchLabels[scsNamespaceNameLabel]
	return ok && v == ns
}

// sidecarContainersToV1beta1 converts sidecar containers; the embedded pod
// container and its sub-structures are shared.
func sidecarContainersToV1beta1(in []v1alpha1.SidecarContainer) []v1beta1.SidecarContainer {
	if in == nil {
		return nil
	}
	out := make([]v1beta1.SidecarContainer, len(in))
	for i := range in {
		c := &in[i]
		o := v1beta1.SidecarContainer{
			Container:       c.Container,
			PodInjectPolicy: v1beta1.PodInjectPolicyType(c.PodInjectPolicy),
			UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{
				UpgradeType:          v1beta1.SidecarContainerUpgradeType(c.UpgradeStrategy.UpgradeType),
				HotUpgradeEmptyImage: c.UpgradeStrategy.HotUpgradeEmptyImage,
			},
			ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyType(c.ShareVolumePolicy.Type)},
		}
		if p := c.ShareVolumeDevicePolicy; p != nil {
			o.ShareVolumeDevicePolicy = &v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyType(p.Type)}
		}
		if c.TransferEnv != nil {
			o.TransferEnv = make([]v1beta1.TransferEnvVar, len(c.TransferEnv))
			for j, e := range c.TransferEnv {
				o.TransferEnv[j] = v1beta1.TransferEnvVar{
					SourceContainerName: e.SourceContainerName,
					EnvName:             e.EnvName,
					EnvNames:            e.EnvNames,
				}
				if f := e.SourceContainerNameFrom; f != nil {
					o.TransferEnv[j].SourceContainerNameFrom = &v1beta1.SourceContainerNameSource{FieldRef: f.FieldRef}
				}
			}
		}
		if p := c.ResourcesPolicy; p != nil {
			o.ResourcesPolicy = &v1beta1.ResourcesPolicy{
				TargetContainersMode:      v1beta1.TargetContainersModeType(p.TargetContainersMode),
				TargetContainersNameRegex: p.TargetContainersNameRegex,
			}
			if l := p.ResourcesExpr.Limits; l != nil {
				o.ResourcesPolicy.ResourcesExpr.Limits = &v1beta1.ResourceExprLimits{CPU: l.CPU, Memory: l.Memory}
			}
			if r := p.ResourcesExpr.Requests; r != nil {
				o.ResourcesPolicy.ResourcesExpr.Requests = &v1beta1.ResourceExprRequests{CPU: r.CPU, Memory: r.Memory}
			}
		}
		out[i] = o
	}
	return out
}

// sidecarContainersToV1alpha1 is sidecarContainersToV1beta1 the other way.
func sidecarContainersToV1alpha1(in []v1beta1.SidecarContainer) []v1alpha1.SidecarContainer {
	if in == nil {
		return nil
	}
	out := make([]v1alpha1.SidecarContainer, len(in))
	for i := range in {
		c := &in[i]
		o := v1alpha1.SidecarContainer{
			Container:       c.Container,
			PodInjectPolicy: v1alpha1.PodInjectPolicyType(c.PodInjectPolicy),
			UpgradeStrategy: v1alpha1.SidecarContainerUpgradeStrategy{
				UpgradeType:          v1alpha1.SidecarContainerUpgradeType(c.UpgradeStrategy.UpgradeType),
				HotUpgradeEmptyImage: c.UpgradeStrategy.HotUpgradeEmptyImage,
			},
			ShareVolumePolicy: v1alpha1.ShareVolumePolicy{Type: v1alpha1.ShareVolumePolicyType(c.ShareVolumePolicy.Type)},
		}
		if p := c.ShareVolumeDevicePolicy; p != nil {
			o.ShareVolumeDevicePolicy = &v1alpha1.ShareVolumePolicy{Type: v1alpha1.ShareVolumePolicyType(p.Type)}
		}
		if c.TransferEnv != nil {
			o.TransferEnv = make([]v1alpha1.TransferEnvVar, len(c.TransferEnv))
			for j, e := range c.TransferEnv {
				o.TransferEnv[j] = v1alpha1.TransferEnvVar{
					SourceContainerName: e.SourceContainerName,
					EnvName:             e.EnvName,
					EnvNames:            e.EnvNames,
				}
				if f := e.SourceContainerNameFrom; f != nil {
					o.TransferEnv[j].SourceContainerNameFrom = &v1alpha1.SourceContainerNameSource{FieldRef: f.FieldRef}
				}
			}
		}
		if p := c.ResourcesPolicy; p != nil {
			o.ResourcesPolicy = &v1alpha1.ResourcesPolicy{
				TargetContainersMode:      v1alpha1.TargetContainersModeType(p.TargetContainersMode),
				TargetContainersNameRegex: p.TargetContainersNameRegex,
			}
			if l := p.ResourcesExpr.Limits; l != nil {
				o.ResourcesPolicy.ResourcesExpr.Limits = &v1alpha1.ResourceExprLimits{CPU: l.CPU, Memory: l.Memory}
			}
			if r := p.ResourcesExpr.Requests; r != nil {
				o.ResourcesPolicy.ResourcesExpr.Requests = &v1alpha1.ResourceExprRequests{CPU: r.CPU, Memory: r.Memory}
			}
		}
		out[i] = o
	}
	return out
}

// sidecarSetUpdateStrategyToV1beta1 converts the update strategy; the
// selector, partition, maxUnavailable and pub strategies are shared.
func sidecarSetUpdateStrategyToV1beta1(in *v1alpha1.SidecarSetUpdateStrategy) v1beta1.SidecarSetUpdateStrategy {
	return v1beta1.SidecarSetUpdateStrategy{
		Type:             v1beta1.SidecarSetUpdateStrategyType(in.Type),
		Paused:           in.Paused,
		Selector:         in.Selector,
		Partition:        in.Partition,
		MaxUnavailable:   in.MaxUnavailable,
		PriorityStrategy: in.PriorityStrategy,
		ScatterStrategy:  in.ScatterStrategy,
	}
}

// sidecarSetUpdateStrategyToV1alpha1 is sidecarSetUpdateStrategyToV1beta1
// the other way.
func sidecarSetUpdateStrategyToV1alpha1(in *v1beta1.SidecarSetUpdateStrategy) v1alpha1.SidecarSetUpdateStrategy {
	return v1alpha1.SidecarSetUpdateStrategy{
		Type:             v1alpha1.SidecarSetUpdateStrategyType(in.Type),
		Paused:           in.Paused,
		Selector:         in.Selector,
		Partition:        in.Partition,
		MaxUnavailable:   in.MaxUnavailable,
		PriorityStrategy: in.PriorityStrategy,
		ScatterStrategy:  in.ScatterStrategy,
	}
}

// sidecarSetInjectionToV1beta1 converts the injection strategy.
func sidecarSetInjectionToV1beta1(in *v1alpha1.SidecarSetInjectionStrategy) v1beta1.SidecarSetInjectionStrategy {
	out := v1beta1.SidecarSetInjectionStrategy{Paused: in.Paused}
	if r := in.Revision; r != nil {
		out.Revision = &v1beta1.SidecarSetInjectRevision{
			CustomVersion: r.CustomVersion,
			RevisionName:  r.RevisionName,
			Policy:        v1beta1.SidecarSetInjectRevisionPolicy(r.Policy),
		}
	}
	return out
}

// sidecarSetInjectionToV1alpha1 is sidecarSetInjectionToV1beta1 the other
// way.
func sidecarSetInjectionToV1alpha1(in *v1beta1.SidecarSetInjectionStrategy) v1alpha1.SidecarSetInjectionStrategy {
	out := v1alpha1.SidecarSetInjectionStrategy{Paused: in.Paused}
	if r := in.Revision; r != nil {
		out.Revision = &v1alpha1.SidecarSetInjectRevision{
			CustomVersion: r.CustomVersion,
			RevisionName:  r.RevisionName,
			Policy:        v1alpha1.SidecarSetInjectRevisionPolicy(r.Policy),
		}
	}
	return out
}

// scsSetLabel sets one label of meta.
func scsSetLabel(meta *metav1.ObjectMeta, key, value string) {
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	meta.Labels[key] = value
}

// scsDeleteLabel removes one label of meta, leaving nil rather than an
// empty map.
func scsDeleteLabel(meta *metav1.ObjectMeta, key string) {
	delete(meta.Labels, key)
	if len(meta.Labels) == 0 {
		meta.Labels = nil
	}
}
