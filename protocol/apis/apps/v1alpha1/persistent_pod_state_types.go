package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PersistentPodStateSpec is the desired state of a PersistentPodState.
//
// +kubebuilder:validation:XValidation:rule="has(self.requiredPersistentTopology) || (has(self.preferredPersistentTopology) && size(self.preferredPersistentTopology) > 0)",message="spec: set requiredPersistentTopology or preferredPersistentTopology (or both)"
type PersistentPodStateSpec struct {
	// TargetReference is the workload whose pods' state is recorded: a
	// StatefulSet (apps or apps.kruise.io), or a custom workload allowed by
	// the PPS_Watch_Custom_Workload_WhiteList entry of the
	// kruise-configuration ConfigMap. Cannot be changed.
	//
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.targetRef: cannot be changed; create a new PersistentPodState instead"
	TargetReference TargetReference `json:"targetRef"`

	// PersistentPodAnnotations are the pod annotations to record when a pod
	// becomes ready and to set again on the pod that replaces it.
	//
	// +optional
	PersistentPodAnnotations []PersistentPodAnnotation `json:"persistentPodAnnotations,omitempty"`

	// RequiredPersistentTopology is a required placement: a recreated pod
	// must land on a node with the same values of these node labels as the
	// node the old pod ran on.
	//
	// +optional
	RequiredPersistentTopology *NodeTopologyTerm `json:"requiredPersistentTopology,omitempty"`

	// PreferredPersistentTopology are weighted preferences: a recreated pod
	// prefers nodes with the same values of these node labels as the node
	// the old pod ran on.
	//
	// +optional
	PreferredPersistentTopology []PreferredTopologyTerm `json:"preferredPersistentTopology,omitempty"`

	// PersistentPodStateRetentionPolicy decides when a pod's record is
	// deleted: WhenScaled (the behaviour when unset) deletes it when the
	// workload scales the pod away; WhenDeleted keeps it until the workload
	// is deleted.
	//
	// +optional
	PersistentPodStateRetentionPolicy PersistentPodStateRetentionPolicyType `json:"persistentPodStateRetentionPolicy,omitempty"`
}

// PreferredTopologyTerm is a weighted placement preference.
type PreferredTopologyTerm struct {
	// Weight of the preference among the pod's preferred node affinity
	// terms, 1-100.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`

	// Preference lists the node labels to keep.
	Preference NodeTopologyTerm `json:"preference"`
}

// NodeTopologyTerm lists node label keys whose values a recreated pod keeps.
type NodeTopologyTerm struct {
	// NodeTopologyKeys are node label keys, for example
	// kubernetes.io/hostname or topology.kubernetes.io/zone.
	NodeTopologyKeys []string `json:"nodeTopologyKeys"`
}

// PersistentPodAnnotation names one pod annotation to record.
type PersistentPodAnnotation struct {
	// Key of the annotation.
	Key string `json:"key"`
}

// PersistentPodStateRetentionPolicyType is WhenScaled or WhenDeleted.
//
// +kubebuilder:validation:Enum=WhenScaled;WhenDeleted
type PersistentPodStateRetentionPolicyType string

const (
	// PersistentPodStateRetentionPolicyWhenScaled deletes a pod's record
	// when the workload scales the pod away.
	PersistentPodStateRetentionPolicyWhenScaled PersistentPodStateRetentionPolicyType = "WhenScaled"
	// PersistentPodStateRetentionPolicyWhenDeleted keeps records until the
	// workload is deleted.
	PersistentPodStateRetentionPolicyWhenDeleted PersistentPodStateRetentionPolicyType = "WhenDeleted"
)

// PersistentPodStateStatus is the observed state of a PersistentPodState.
type PersistentPodStateStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration"`

	// PodStates maps pod names to the state recorded when the pod was last
	// ready.
	//
	// +optional
	PodStates map[string]PodState `json:"podStates,omitempty"`
}

// PodState is the recorded state of one pod.
type PodState struct {
	// NodeName is the node the pod ran on.
	//
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// NodeTopologyLabels are that node's values of the recorded topology
	// labels, for example kubernetes.io/hostname: node-1.
	//
	// +optional
	NodeTopologyLabels map[string]string `json:"nodeTopologyLabels,omitempty"`

	// Annotations are the pod's values of persistentPodAnnotations.
	//
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PersistentPodState records, for each pod of a stateful workload, the node
// topology and annotations it had when ready, and makes the pod that
// replaces it keep them (for example the same zone or the same IP
// annotation).
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="KIND",type="string",JSONPath=".spec.targetRef.kind",description="Kind of the workload whose pods' state is kept."
// +kubebuilder:printcolumn:name="TARGET",type="string",JSONPath=".spec.targetRef.name",description="Name of the workload whose pods' state is kept."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the PersistentPodState was created."
type PersistentPodState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state: the workload and what to keep.
	Spec PersistentPodStateSpec `json:"spec"`

	// Status is the observed state: the recorded pod states.
	//
	// +optional
	Status PersistentPodStateStatus `json:"status,omitempty"`
}

// PersistentPodStateList is a list of PersistentPodStates.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PersistentPodStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the PersistentPodStates.
	Items []PersistentPodState `json:"items"`
}
