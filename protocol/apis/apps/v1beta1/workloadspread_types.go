package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// WorkloadSpreadSpec is the desired state of a WorkloadSpread.
//
// +kubebuilder:validation:XValidation:rule="self.subsets.all(s, !has(s.maxReplicas) || (type(s.maxReplicas) == int ? s.maxReplicas >= 0 : s.maxReplicas in ['0%', '1%', '2%', '3%', '4%', '5%', '6%', '7%', '8%', '9%', '10%', '11%', '12%', '13%', '14%', '15%', '16%', '17%', '18%', '19%', '20%', '21%', '22%', '23%', '24%', '25%', '26%', '27%', '28%', '29%', '30%', '31%', '32%', '33%', '34%', '35%', '36%', '37%', '38%', '39%', '40%', '41%', '42%', '43%', '44%', '45%', '46%', '47%', '48%', '49%', '50%', '51%', '52%', '53%', '54%', '55%', '56%', '57%', '58%', '59%', '60%', '61%', '62%', '63%', '64%', '65%', '66%', '67%', '68%', '69%', '70%', '71%', '72%', '73%', '74%', '75%', '76%', '77%', '78%', '79%', '80%', '81%', '82%', '83%', '84%', '85%', '86%', '87%', '88%', '89%', '90%', '91%', '92%', '93%', '94%', '95%', '96%', '97%', '98%', '99%', '100%']))",message="spec.subsets[].maxReplicas: use a non-negative integer or a percentage from 0% to 100%, such as \"50%\""
// +kubebuilder:validation:XValidation:rule="self.subsets.all(s, !has(s.maxReplicas) || type(s.maxReplicas) == int) || self.subsets.all(s, !has(s.maxReplicas) || type(s.maxReplicas) == string)",message="spec.subsets: maxReplicas must be integers in every subset or percentages in every subset, not a mix"
// +kubebuilder:validation:XValidation:rule="self.targetRef.kind != 'StatefulSet' || self.subsets.all(s, !has(s.maxReplicas) || type(s.maxReplicas) == int)",message="spec.subsets: maxReplicas must be an integer, not a percentage, when targetRef.kind is StatefulSet"
// +kubebuilder:validation:XValidation:rule="!has(self.scheduleStrategy) || !has(self.scheduleStrategy.adaptive) || size(self.subsets) <= 1 || !has(self.subsets[size(self.subsets) - 1].maxReplicas)",message="spec.subsets: with an adaptive scheduleStrategy the last subset must leave maxReplicas unset"
// +kubebuilder:validation:XValidation:rule="!has(self.scheduleStrategy) || !has(self.scheduleStrategy.adaptive) || !has(self.scheduleStrategy.adaptive.rescheduleCriticalSeconds) || size(self.subsets) <= 1 || self.scheduleStrategy.adaptive.rescheduleCriticalSeconds <= 295 / (size(self.subsets) - 1)",message="spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds: must be at most 295 divided by (number of subsets - 1), rounded down"
type WorkloadSpreadSpec struct {
	// TargetReference is the workload whose pods are spread: a Deployment,
	// ReplicaSet, Job, CloneSet, StatefulSet (apps or apps.kruise.io), or a
	// custom workload allowed by the WorkloadSpread_Watch_Custom_Workload_WhiteList
	// entry of the kruise-configuration ConfigMap. Its group, kind and name
	// cannot be changed.
	//
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind && self.name == oldSelf.name && self.apiVersion.contains('/') == oldSelf.apiVersion.contains('/') && (!self.apiVersion.contains('/') || self.apiVersion.split('/')[0] == oldSelf.apiVersion.split('/')[0])",message="spec.targetRef: the API group, kind and name cannot be changed; only the version in apiVersion may change"
	TargetReference *TargetReference `json:"targetRef"`

	// TargetFilter limits the WorkloadSpread to some of the workload's pods
	// and says how to count them. Unset manages all of them.
	//
	// +optional
	TargetFilter *TargetFilter `json:"targetFilter,omitempty"`

	// Subsets are the domains (node pools, zones, ...) the pods are spread
	// over. A new pod goes to the first subset, in list order, that has
	// room; on scale-in, pods are removed from the last subsets first. Names
	// must be unique.
	//
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Subsets []WorkloadSpreadSubset `json:"subsets"`

	// ScheduleStrategy decides what happens to pods that cannot be scheduled
	// in their subset. Fixed when unset.
	//
	// +optional
	ScheduleStrategy WorkloadSpreadScheduleStrategy `json:"scheduleStrategy,omitempty"`
}

// TargetFilter limits a WorkloadSpread to some of the target workload's
// pods, for example only the workers of a training job. Pods it does not
// select are neither placed nor counted.
type TargetFilter struct {
	// Selector picks, by their labels, the pods to manage. When unset, all
	// the workload's pods are managed.
	//
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// ReplicasPathList are dot-separated paths in the target workload (for
	// example spec.replicas, or spec.tfReplicaSpecs.Worker.replicas; list
	// elements are addressed by index, as in subsets.1.replicas) whose
	// integer values add up to the number of selected pods. When empty, the
	// workload's own replica count is used.
	//
	// +optional
	ReplicasPathList []string `json:"replicasPathList,omitempty"`
}

// WorkloadSpreadScheduleStrategyType is Fixed or Adaptive; empty means
// Fixed.
//
// +kubebuilder:validation:Enum=Adaptive;Fixed;""
type WorkloadSpreadScheduleStrategyType string

const (
	// AdaptiveWorkloadSpreadScheduleStrategyType moves pods that stay
	// unschedulable to another subset and may check schedulability when a
	// pod is created.
	AdaptiveWorkloadSpreadScheduleStrategyType WorkloadSpreadScheduleStrategyType = "Adaptive"
	// FixedWorkloadSpreadScheduleStrategyType keeps pods in the subset
	// chosen at creation.
	FixedWorkloadSpreadScheduleStrategyType WorkloadSpreadScheduleStrategyType = "Fixed"
)

// WorkloadSpreadScheduleStrategy decides what happens to pods that cannot
// be scheduled in their subset.
//
// +kubebuilder:validation:XValidation:rule="!has(self.adaptive) || (has(self.type) && self.type == 'Adaptive')",message="spec.scheduleStrategy: adaptive may only be set when type is Adaptive"
type WorkloadSpreadScheduleStrategy struct {
	// Type is Fixed (the default when empty), which keeps each pod in the
	// subset chosen when it was created, or Adaptive, which moves pods that
	// stay unschedulable to a later subset with room.
	//
	// +optional
	Type WorkloadSpreadScheduleStrategyType `json:"type,omitempty"`

	// Adaptive holds the settings of the Adaptive type.
	//
	// +optional
	Adaptive *AdaptiveWorkloadSpreadStrategy `json:"adaptive,omitempty"`
}

// AdaptiveWorkloadSpreadStrategy holds the settings of the Adaptive schedule
// strategy.
type AdaptiveWorkloadSpreadStrategy struct {
	// DisableSimulationSchedule turns off the check, made when a pod is
	// created, of whether a subset's nodes have room for it (a check of
	// node resources only). Defaults to false.
	//
	// +optional
	DisableSimulationSchedule bool `json:"disableSimulationSchedule,omitempty"`

	// RescheduleCriticalSeconds is how long a pod may stay unschedulable in
	// its subset before it is recreated in a later subset with room. At
	// most 295 / (number of subsets - 1) seconds. Unset leaves
	// unschedulable pods where they are.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	RescheduleCriticalSeconds *int32 `json:"rescheduleCriticalSeconds,omitempty"`
}

// WorkloadSpreadSubset is one domain the pods are spread over, and how pods
// placed in it are changed.
type WorkloadSpreadSubset struct {
	// Name identifies the subset; unique within the WorkloadSpread.
	//
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// RequiredNodeSelector is added to the required node affinity of pods
	// placed in this subset. (v1alpha1 calls it requiredNodeSelectorTerm.)
	//
	// +optional
	RequiredNodeSelector *corev1.NodeSelectorTerm `json:"requiredNodeSelector,omitempty"`

	// PreferredNodeSelector is added to the preferred node affinity of pods
	// placed in this subset. (v1alpha1 calls it
	// preferredNodeSelectorTerms.)
	//
	// +optional
	PreferredNodeSelector []corev1.PreferredSchedulingTerm `json:"preferredNodeSelector,omitempty"`

	// Tolerations are added to pods placed in this subset.
	//
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// MaxReplicas is the most pods this subset takes: an integer, or a
	// percentage of the workload's replicas such as "50%". Unset means no
	// limit. All subsets use the same form; percentages add up to 100%
	// unless the last subset is unlimited. StatefulSets take integers only.
	//
	// +optional
	MaxReplicas *intstr.IntOrString `json:"maxReplicas,omitempty"`

	// Patch is a strategic merge patch applied to pods placed in this
	// subset, for example to add labels, annotations or change container
	// resources. Empty by default.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Patch runtime.RawExtension `json:"patch,omitempty"`
}

// WorkloadSpreadStatus is the observed state of a WorkloadSpread.
type WorkloadSpreadStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// SubsetStatuses holds one entry per subset, in spec order.
	//
	// +optional
	SubsetStatuses []WorkloadSpreadSubsetStatus `json:"subsetStatuses,omitempty"`

	// VersionedSubsetStatuses holds the subset statuses per workload
	// revision, so that placement stays right during a rolling update that
	// creates new pods before deleting old ones.
	//
	// +optional
	VersionedSubsetStatuses map[string][]WorkloadSpreadSubsetStatus `json:"versionedSubsetStatuses,omitempty"`
}

const (
	// SubsetSchedulable is the type of the subset condition that is False
	// for a while after a pod of the subset failed to schedule, meaning the
	// subset's nodes are out of room.
	SubsetSchedulable = "Schedulable"
)

// WorkloadSpreadSubsetStatus is the observed state of one subset.
type WorkloadSpreadSubsetStatus struct {
	// Name of the subset.
	Name string `json:"name"`

	// Replicas is the number of active pods in the subset.
	Replicas int32 `json:"replicas"`

	// Conditions are the observed conditions of the subset, at most one of
	// each type, for example Schedulable.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// MissingReplicas is how many more pods the subset can take: 0 when it
	// is full, -1 when its maxReplicas is unset (no limit).
	MissingReplicas int32 `json:"missingReplicas"`

	// CreatingPods maps the names of pods placed in the subset by the
	// webhook, but not yet seen by the controller, to when they were
	// placed. Entries whose pod never appears are removed after a while.
	//
	// +optional
	CreatingPods map[string]metav1.Time `json:"creatingPods,omitempty"`

	// DeletingPods maps the names of pods whose deletion the webhook
	// admitted, but the controller has not yet seen, to when it was
	// admitted.
	//
	// +optional
	DeletingPods map[string]metav1.Time `json:"deletingPods,omitempty"`
}

// WorkloadSpread spreads the pods of one workload over subsets of nodes
// (zones, node pools, ...) with a maximum number of pods per subset, by
// changing pods as they are created, and steers scale-in by setting pod
// deletion costs.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ws,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="WorkloadName",type="string",JSONPath=".spec.targetRef.name",description="Name of the target workload."
// +kubebuilder:printcolumn:name="WorkloadKind",type="string",JSONPath=".spec.targetRef.kind",description="Kind of the target workload."
// +kubebuilder:printcolumn:name="Adaptive",type="boolean",JSONPath=`.spec.scheduleStrategy.type[?(@ == "Adaptive")]`,description="Whether unschedulable pods are moved to another subset."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the WorkloadSpread was created."
type WorkloadSpread struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state: the workload and its subsets.
	Spec WorkloadSpreadSpec `json:"spec"`

	// Status is the observed state, written by the controller and webhook.
	//
	// +optional
	Status WorkloadSpreadStatus `json:"status,omitempty"`
}

// WorkloadSpreadList is a list of WorkloadSpreads.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type WorkloadSpreadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the WorkloadSpreads.
	Items []WorkloadSpread `json:"items"`
}
