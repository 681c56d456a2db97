package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ResourceDistributionSpec is the desired state of a ResourceDistribution.
type ResourceDistributionSpec struct {
	// Resource is the complete manifest of the object to copy into the
	// target namespaces: a Secret or a ConfigMap (apiVersion v1) with its
	// metadata.name. Any namespace in it is ignored; each copy lives in its
	// target namespace. Its apiVersion, kind and name cannot be changed.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || !has(self.kind) || (self.apiVersion == 'v1' && (self.kind == 'Secret' || self.kind == 'ConfigMap'))",message="spec.resource: only a Secret or a ConfigMap (apiVersion v1) can be distributed"
	// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || !has(self.kind) || !has(oldSelf.apiVersion) || !has(oldSelf.kind) || (self.apiVersion == oldSelf.apiVersion && self.kind == oldSelf.kind && has(self.metadata) == has(oldSelf.metadata) && (!has(self.metadata) || (has(self.metadata.name) == has(oldSelf.metadata.name) && (!has(self.metadata.name) || self.metadata.name == oldSelf.metadata.name))))",message="spec.resource: apiVersion, kind and metadata.name cannot be changed; create a new ResourceDistribution instead"
	Resource runtime.RawExtension `json:"resource"`

	// Targets selects the namespaces the resource is copied into.
	Targets ResourceDistributionTargets `json:"targets"`
}

// ResourceDistributionTargets selects namespaces. The union of
// allNamespaces, includedNamespaces and namespaceLabelSelector is taken,
// then excludedNamespaces is removed from it.
type ResourceDistributionTargets struct {
	// AllNamespaces selects every namespace except the system ones
	// (kube-system, kube-public). Defaults to false.
	//
	// +optional
	AllNamespaces bool `json:"allNamespaces,omitempty"`

	// ExcludedNamespaces are never targeted, whatever the other fields
	// select.
	//
	// +optional
	ExcludedNamespaces ResourceDistributionTargetNamespaces `json:"excludedNamespaces,omitempty"`

	// IncludedNamespaces are targeted by name. A namespace may not be both
	// included and excluded.
	//
	// +optional
	IncludedNamespaces ResourceDistributionTargetNamespaces `json:"includedNamespaces,omitempty"`

	// NamespaceLabelSelector targets the namespaces whose labels it matches.
	// An empty selector selects no namespace.
	//
	// +optional
	NamespaceLabelSelector metav1.LabelSelector `json:"namespaceLabelSelector,omitempty"`
}

// ResourceDistributionTargetNamespaces is a list of namespaces.
type ResourceDistributionTargetNamespaces struct {
	// List of the namespaces, by name.
	//
	// +optional
	List []ResourceDistributionNamespace `json:"list,omitempty"`
}

// ResourceDistributionNamespace names one namespace.
type ResourceDistributionNamespace struct {
	// Name of the namespace: a DNS label (lowercase letters, digits and '-',
	// at most 63 characters).
	//
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// ResourceDistributionStatus is the observed state of a
// ResourceDistribution, written by the controller.
type ResourceDistributionStatus struct {
	// Desired is the number of target namespaces.
	//
	// +optional
	Desired int32 `json:"desired,omitempty"`

	// Succeeded is the number of target namespaces holding an up-to-date
	// copy.
	//
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`

	// Failed is the number of target namespaces the copy could not be
	// written to.
	//
	// +optional
	Failed int32 `json:"failed,omitempty"`

	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions report problems met while creating, updating or deleting
	// the copies.
	//
	// +optional
	Conditions []ResourceDistributionCondition `json:"conditions,omitempty"`
}

// ResourceDistributionCondition reports one kind of problem and the
// namespaces it affects.
type ResourceDistributionCondition struct {
	// Type of the condition: ConflictOccurred, NamespaceNotExists,
	// GetResourceFailed, CreateResourceFailed, UpdateResourceFailed or
	// DeleteResourceFailed.
	Type ResourceDistributionConditionType `json:"type"`

	// Status of the condition: True, False or Unknown.
	Status ResourceDistributionConditionStatus `json:"status"`

	// LastTransitionTime is when the status last changed.
	//
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// Reason explains the last change, for people.
	//
	// +optional
	Reason string `json:"reason,omitempty"`

	// FailedNamespaces are the namespaces the condition applies to.
	//
	// +optional
	FailedNamespaces []string `json:"failedNamespace,omitempty"`
}

// ResourceDistributionConditionType is the type of a ResourceDistribution
// condition.
type ResourceDistributionConditionType string

const (
	// ResourceDistributionConflictOccurred: a target namespace already holds
	// an object of the same name not created by this ResourceDistribution.
	ResourceDistributionConflictOccurred ResourceDistributionConditionType = "ConflictOccurred"
	// ResourceDistributionNamespaceNotExists: some included namespaces do
	// not exist.
	ResourceDistributionNamespaceNotExists ResourceDistributionConditionType = "NamespaceNotExists"
	// ResourceDistributionGetResourceFailed: reading some copies failed.
	ResourceDistributionGetResourceFailed ResourceDistributionConditionType = "GetResourceFailed"
	// ResourceDistributionCreateResourceFailed: creating some copies failed.
	ResourceDistributionCreateResourceFailed ResourceDistributionConditionType = "CreateResourceFailed"
	// ResourceDistributionUpdateResourceFailed: updating some copies failed.
	ResourceDistributionUpdateResourceFailed ResourceDistributionConditionType = "UpdateResourceFailed"
	// ResourceDistributionDeleteResourceFailed: deleting some copies failed.
	ResourceDistributionDeleteResourceFailed ResourceDistributionConditionType = "DeleteResourceFailed"
)

// ResourceDistributionConditionStatus is True, False or Unknown.
type ResourceDistributionConditionStatus string

const (
	// ResourceDistributionConditionTrue means the condition holds.
	ResourceDistributionConditionTrue ResourceDistributionConditionStatus = "True"
	// ResourceDistributionConditionFalse means the condition does not hold.
	ResourceDistributionConditionFalse ResourceDistributionConditionStatus = "False"
	// ResourceDistributionConditionUnknown means it is not known whether
	// the condition holds.
	ResourceDistributionConditionUnknown ResourceDistributionConditionStatus = "Unknown"
)

// ResourceDistribution copies a Secret or ConfigMap into many namespaces
// and keeps the copies in sync with it. It is cluster-scoped.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=distributor,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="TOTAL",type="integer",JSONPath=".status.desired",description="Number of target namespaces."
// +kubebuilder:printcolumn:name="SUCCEED",type="integer",JSONPath=".status.succeeded",description="Number of namespaces with an up-to-date copy."
// +kubebuilder:printcolumn:name="FAILED",type="integer",JSONPath=".status.failed",description="Number of namespaces the copy could not be written to."
type ResourceDistribution struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state: the resource and its target namespaces.
	Spec ResourceDistributionSpec `json:"spec"`

	// Status is the observed state, written by the controller.
	//
	// +optional
	Status ResourceDistributionStatus `json:"status,omitempty"`
}

// ResourceDistributionList is a list of ResourceDistributions.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ResourceDistributionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ResourceDistributions.
	Items []ResourceDistribution `json:"items"`
}
