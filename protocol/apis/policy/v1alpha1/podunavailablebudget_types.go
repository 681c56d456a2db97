package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PodUnavailableBudgetSpec says which pods a budget protects and how many of
// them may be unavailable at once. Pick the pods with exactly one of selector
// and targetRef, and set the budget with exactly one of maxUnavailable and
// minAvailable.
//
// +kubebuilder:validation:XValidation:rule="has(self.selector) != has(self.targetRef)",message="spec: set exactly one of selector and targetRef"
// +kubebuilder:validation:XValidation:rule="has(self.maxUnavailable) != has(self.minAvailable)",message="spec: set exactly one of maxUnavailable and minAvailable"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="spec.selector: set at least one matchLabels entry or matchExpressions requirement; an empty selector is not allowed"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="spec.selector.matchExpressions: use operator In or NotIn with at least one value, or Exists or DoesNotExist with no values"
// +kubebuilder:validation:XValidation:rule="!has(self.targetRef) || (has(self.targetRef.apiVersion) && size(self.targetRef.apiVersion) > 0 && has(self.targetRef.kind) && size(self.targetRef.kind) > 0 && has(self.targetRef.name) && size(self.targetRef.name) > 0)",message="spec.targetRef: set apiVersion, kind and name of the workload"
// +kubebuilder:validation:XValidation:rule="has(self.selector) == has(oldSelf.selector) && (!has(self.selector) || self.selector == oldSelf.selector)",message="spec.selector: cannot be added, removed or changed after creation; only maxUnavailable and minAvailable may be updated"
// +kubebuilder:validation:XValidation:rule="has(self.targetRef) == has(oldSelf.targetRef) && (!has(self.targetRef) || self.targetRef == oldSelf.targetRef)",message="spec.targetRef: cannot be added, removed or changed after creation; only maxUnavailable and minAvailable may be updated"
type PodUnavailableBudgetSpec struct {
	// Selector picks the protected pods by label, in the budget's namespace.
	// Use it when an application spans several workloads. It must not be
	// empty, cannot be combined with targetRef, and cannot be changed once
	// the budget exists.
	//
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// TargetReference names the single workload (Deployment, CloneSet,
	// StatefulSet, ...) in the budget's namespace whose pods are protected.
	// Cannot be combined with selector and cannot be changed once the budget
	// exists.
	//
	// +optional
	TargetReference *TargetReference `json:"targetRef,omitempty"`

	// MaxUnavailable is the most pods that may be unavailable at once: a
	// delete, eviction or in-place update of a pod is refused if it would
	// leave more than this many of the protected pods unavailable. An integer
	// (0 or more) or a percentage of the workload's replicas from "0%" to
	// "100%". Cannot be combined with minAvailable.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.maxUnavailable: use a non-negative integer or a percentage from \"0%\" to \"100%\", such as \"20%\""
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MinAvailable is the fewest pods that must stay available: a delete,
	// eviction or in-place update of a pod is refused if it would leave fewer
	// than this many of the protected pods available. An integer (0 or more)
	// or a percentage of the workload's replicas from "0%" to "100%". Cannot
	// be combined with maxUnavailable.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.minAvailable: use a non-negative integer or a percentage from \"0%\" to \"100%\", such as \"80%\""
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// TargetReference identifies one workload in the budget's namespace.
type TargetReference struct {
	// APIVersion of the workload, such as "apps/v1" or
	// "apps.kruise.io/v1alpha1". Must be set.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^[^/]*(/[^/]*)?$')",message="spec.targetRef.apiVersion: use \"<version>\" or \"<group>/<version>\", such as \"apps/v1\""
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the workload, such as "Deployment" or "CloneSet". Must be set.
	//
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name of the workload. Must be set.
	//
	// +optional
	Name string `json:"name,omitempty"`
}

// PodUnavailableBudgetStatus is the budget as last computed by the
// controller, plus the disruptions it has allowed but not yet seen
// complete.
type PodUnavailableBudgetStatus struct {
	// ObservedGeneration is the metadata.generation this status was computed
	// from. The other fields describe the current spec only when it equals
	// metadata.generation.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`

	// DisruptedPods maps the name of each pod whose deletion or eviction the
	// budget has allowed, but which the controller has not yet seen go away,
	// to the time it was allowed. Such pods are already counted as
	// unavailable.
	//
	// +optional
	DisruptedPods map[string]metav1.Time `json:"disruptedPods,omitempty"`

	// UnavailablePods maps the name of each pod whose in-place update the
	// budget has allowed to the time it was allowed. A pod is removed once
	// it runs the updated spec and is ready again.
	//
	// +optional
	UnavailablePods map[string]metav1.Time `json:"unavailablePods,omitempty"`

	// UnavailableAllowed is how many more protected pods may be disrupted
	// right now: currentAvailable minus desiredAvailable, never below zero.
	UnavailableAllowed int32 `json:"unavailableAllowed"`

	// CurrentAvailable is the number of protected pods that are available
	// now, not counting pods in disruptedPods or unavailablePods.
	CurrentAvailable int32 `json:"currentAvailable"`

	// DesiredAvailable is the number of protected pods that must stay
	// available, derived from minAvailable or maxUnavailable.
	DesiredAvailable int32 `json:"desiredAvailable"`

	// TotalReplicas is the number of pods the budget is computed against:
	// the workload's desired replicas, or the number of selected pods.
	TotalReplicas int32 `json:"totalReplicas"`
}

// PodUnavailableBudget (short name pub) limits how many pods of an
// application may be unavailable at the same time because of voluntary
// disruption: deletion, eviction (for example kubectl drain) and in-place
// updates of the pod spec by any controller. A request that would exceed the
// budget is refused until enough pods are available again. Unlike a
// PodDisruptionBudget it also guards deletions and updates, not only the
// eviction API.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=pub,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Allowed",type="integer",JSONPath=".status.unavailableAllowed",description="How many more pods may be disrupted now."
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.currentAvailable",description="Pods available now."
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".status.desiredAvailable",description="Pods that must stay available."
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.totalReplicas",description="Pods the budget is computed against."
type PodUnavailableBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec selects the protected pods and sets the budget.
	//
	// +required
	Spec PodUnavailableBudgetSpec `json:"spec,omitempty"`
	// Status is the budget as last computed by the controller.
	//
	// +optional
	Status PodUnavailableBudgetStatus `json:"status,omitempty"`
}

// PodUnavailableBudgetList is a list of PodUnavailableBudgets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PodUnavailableBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the PodUnavailableBudgets.
	Items []PodUnavailableBudget `json:"items"`
}
