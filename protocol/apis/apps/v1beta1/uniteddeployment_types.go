package v1beta1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// UpdateStrategyType is how a UnitedDeployment rolls a new template out to
// its subsets.
type UpdateStrategyType string

const (
	// ManualUpdateStrategyType rolls the template out to every subset and
	// lets the user pace each subset through its partition.
	ManualUpdateStrategyType UpdateStrategyType = "Manual"
)

// UnitedDeploymentConditionType is the type of a UnitedDeployment condition.
type UnitedDeploymentConditionType string

const (
	// SubsetProvisioned: every subset in spec.topology exists and subsets no
	// longer listed have been deleted.
	SubsetProvisioned UnitedDeploymentConditionType = "SubsetProvisioned"
	// SubsetUpdated: every subset runs the latest template.
	SubsetUpdated UnitedDeploymentConditionType = "SubsetUpdated"
	// SubsetFailure: reconciling one of the subsets failed.
	SubsetFailure UnitedDeploymentConditionType = "SubsetFailure"
	// UnitedDeploymentUpdated: status.currentRevision has caught up with
	// status.updatedRevision, so the rollout is complete.
	UnitedDeploymentUpdated UnitedDeploymentConditionType = "UnitedDeploymentUpdated"
)

// UnitedDeploymentSpec is the desired state of a UnitedDeployment.
//
// +kubebuilder:validation:XValidation:rule="has(self.template) && [has(self.template.statefulSetTemplate), has(self.template.advancedStatefulSetTemplate), has(self.template.cloneSetTemplate), has(self.template.deploymentTemplate)].filter(x, x).size() == 1",message="spec.template: set exactly one of statefulSetTemplate, advancedStatefulSetTemplate, cloneSetTemplate and deploymentTemplate"
// +kubebuilder:validation:XValidation:rule="has(self.replicas) || !has(self.topology) || !has(self.topology.subsets) || self.topology.subsets.all(s, has(s.replicas))",message="spec.replicas: required unless every subset in spec.topology.subsets sets replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || !has(self.updateStrategy.manualUpdate) || !has(self.updateStrategy.manualUpdate.partitions) || self.updateStrategy.manualUpdate.partitions.all(k, has(self.topology) && has(self.topology.subsets) && self.topology.subsets.exists(s, s.name == k))",message="spec.updateStrategy.manualUpdate.partitions: every key must be the name of a subset in spec.topology.subsets"
// +kubebuilder:validation:XValidation:rule="!has(self.topology) || !has(self.topology.scheduleStrategy) || !has(self.topology.scheduleStrategy.adaptive) || !has(self.topology.scheduleStrategy.adaptive.reserveUnschedulablePods) || !self.topology.scheduleStrategy.adaptive.reserveUnschedulablePods || !has(self.template) || !(has(self.template.statefulSetTemplate) || has(self.template.advancedStatefulSetTemplate))",message="spec.topology.scheduleStrategy.adaptive.reserveUnschedulablePods: not supported with a StatefulSet template (its pods have fixed identities); use a Deployment or CloneSet template, or set it to false"
type UnitedDeploymentSpec struct {
	// Replicas is the total number of pods across all subsets. May be left
	// unset only when every subset sets its own replicas; required when
	// subsets use minReplicas or maxReplicas.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Selector picks the pods of all subsets. It must not be empty and must
	// match the labels of the workload template.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector: must not be empty; set matchLabels or matchExpressions"
	Selector *metav1.LabelSelector `json:"selector"`

	// Template is the workload created for each subset. Set exactly one of
	// its fields.
	Template SubsetTemplate `json:"template,omitempty"`

	// Topology lists the subsets and how pods are spread over them.
	//
	// +optional
	Topology Topology `json:"topology,omitempty"`

	// UpdateStrategy tunes how a changed template is rolled out to the
	// subsets.
	//
	// +optional
	// +kubebuilder:default={}
	UpdateStrategy UnitedDeploymentUpdateStrategy `json:"updateStrategy,omitempty"`

	// RevisionHistoryLimit is how many old revisions (ControllerRevisions)
	// are kept. Defaults to 10.
	//
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// SubsetTemplate is the workload a UnitedDeployment creates for each
// subset: exactly one of its fields is set.
type SubsetTemplate struct {
	// StatefulSetTemplate makes each subset an apps/v1 StatefulSet.
	//
	// +optional
	StatefulSetTemplate *StatefulSetTemplateSpec `json:"statefulSetTemplate,omitempty"`

	// AdvancedStatefulSetTemplate makes each subset an Advanced StatefulSet
	// (apps.kruise.io).
	//
	// +optional
	AdvancedStatefulSetTemplate *AdvancedStatefulSetTemplateSpec `json:"advancedStatefulSetTemplate,omitempty"`

	// CloneSetTemplate makes each subset a CloneSet.
	//
	// +optional
	CloneSetTemplate *CloneSetTemplateSpec `json:"cloneSetTemplate,omitempty"`

	// DeploymentTemplate makes each subset an apps/v1 Deployment.
	//
	// +optional
	DeploymentTemplate *DeploymentTemplateSpec `json:"deploymentTemplate,omitempty"`
}

// StatefulSetTemplateSpec is the template of an apps/v1 StatefulSet subset.
type StatefulSetTemplateSpec struct {
	// Metadata holds the labels and annotations given to each subset
	// StatefulSet. Its labels must match spec.selector.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the apps/v1 StatefulSet spec; replicas, partition and node
	// placement are set per subset by the UnitedDeployment.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Spec appsv1.StatefulSetSpec `json:"spec"`
}

// AdvancedStatefulSetTemplateSpec is the template of an Advanced StatefulSet
// subset.
type AdvancedStatefulSetTemplateSpec struct {
	// Metadata holds the labels and annotations given to each subset
	// StatefulSet. Its labels must match spec.selector.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the Advanced StatefulSet spec; replicas, partition and node
	// placement are set per subset by the UnitedDeployment.
	Spec StatefulSetSpec `json:"spec"`
}

// CloneSetTemplateSpec is the template of a CloneSet subset.
type CloneSetTemplateSpec struct {
	// Metadata holds the labels and annotations given to each subset
	// CloneSet. Its labels must match spec.selector.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the CloneSet spec, in its apps.kruise.io/v1beta1 form;
	// replicas, partition and node placement are set per subset by the
	// UnitedDeployment.
	Spec CloneSetSpec `json:"spec"`
}

// DeploymentTemplateSpec is the template of an apps/v1 Deployment subset.
type DeploymentTemplateSpec struct {
	// Metadata holds the labels and annotations given to each subset
	// Deployment. Its labels must match spec.selector.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the apps/v1 Deployment spec; replicas and node placement are
	// set per subset by the UnitedDeployment.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Spec appsv1.DeploymentSpec `json:"spec"`
}

// UnitedDeploymentUpdateStrategy tunes how a changed template is rolled out.
type UnitedDeploymentUpdateStrategy struct {
	// Type of update. Manual, the only and default value, rolls the template
	// out to all subsets, each limited by its partition in manualUpdate.
	//
	// +optional
	// +kubebuilder:default=Manual
	// +kubebuilder:validation:Enum=Manual
	Type UpdateStrategyType `json:"type,omitempty"`
	// ManualUpdate sets the partition of each subset.
	//
	// +optional
	ManualUpdate *ManualUpdate `json:"manualUpdate,omitempty"`
}

// ManualUpdate paces an update subset by subset.
type ManualUpdate struct {
	// Partitions maps a subset name to its partition: the number of that
	// subset's pods that keep the old revision. Subsets not listed use 0
	// (update all). Every key must name a subset in spec.topology.subsets.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Partitions map[string]int32 `json:"partitions,omitempty"`
}

// Topology lists the subsets of a UnitedDeployment and how pods are spread
// over them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.subsets) || !(self.subsets.exists(s, has(s.replicas)) && self.subsets.exists(s, has(s.minReplicas) || has(s.maxReplicas)))",message="spec.topology.subsets: replicas and minReplicas/maxReplicas cannot be mixed; use replicas on subsets or minReplicas/maxReplicas, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.subsets) || !self.subsets.exists(s, has(s.minReplicas) || has(s.maxReplicas)) || self.subsets.exists(s, !has(s.maxReplicas))",message="spec.topology.subsets: when subsets use minReplicas/maxReplicas, at least one subset must leave maxReplicas unset"
type Topology struct {
	// Subsets are the groups of nodes to spread pods over, one workload per
	// subset, named <unitedDeployment>-<subset>. A subset added or
	// removed here is created or deleted. When scaling up, subsets are
	// filled in list order; scale-in goes in reverse.
	//
	// +optional
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Subsets []Subset `json:"subsets,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	// ScheduleStrategy is what happens when a subset cannot schedule its
	// pods.
	//
	// +optional
	ScheduleStrategy UnitedDeploymentScheduleStrategy `json:"scheduleStrategy,omitempty"`
}

// Subset is one group of nodes of a UnitedDeployment.
type Subset struct {
	// Name identifies the subset; a DNS label (lowercase letters, digits and
	// '-', at most 63 characters), unique within the UnitedDeployment.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// NodeSelectorTerm selects the nodes of this subset; it is added to the
	// pods' required node affinity. Cannot be changed for an existing
	// subset.
	//
	// +optional
	NodeSelectorTerm corev1.NodeSelectorTerm `json:"nodeSelectorTerm,omitempty"`

	// Tolerations are added to the pods of this subset. Cannot be changed
	// for an existing subset.
	//
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Replicas is this subset's share of spec.replicas: a number of pods or
	// a percentage such as "40%". Subsets without replicas split what is
	// left evenly. Cannot be combined with minReplicas/maxReplicas on any
	// subset.
	//
	// +optional
	Replicas *intstr.IntOrString `json:"replicas,omitempty"`

	// MinReplicas is the fewest pods this subset gets (a number or a
	// percentage of spec.replicas); subsets are given their minimum in list
	// order. Defaults to 0 when subsets use minReplicas/maxReplicas.
	//
	// +optional
	MinReplicas *intstr.IntOrString `json:"minReplicas,omitempty"`

	// MaxReplicas is the most pods this subset gets (a number or a
	// percentage of spec.replicas); unset means no limit. At least one
	// subset must leave it unset so that scale-up cannot get stuck.
	//
	// +optional
	MaxReplicas *intstr.IntOrString `json:"maxReplicas,omitempty"`

	// Patch is a strategic merge patch applied to this subset's workload
	// template (for example to set container resources or env per subset).
	// It wins over replicas, nodeSelectorTerm and tolerations where it sets
	// the same fields.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Patch runtime.RawExtension `json:"patch,omitempty"`
}

// UnitedDeploymentScheduleStrategyType is what a UnitedDeployment does with
// pods a subset cannot schedule.
type UnitedDeploymentScheduleStrategyType string

const (
	// AdaptiveUnitedDeploymentScheduleStrategyType moves pods that stay
	// unschedulable in their subset to later subsets.
	AdaptiveUnitedDeploymentScheduleStrategyType UnitedDeploymentScheduleStrategyType = "Adaptive"
	// FixedUnitedDeploymentScheduleStrategyType keeps pods in their subset
	// even when they cannot be scheduled. The default.
	FixedUnitedDeploymentScheduleStrategyType UnitedDeploymentScheduleStrategyType = "Fixed"
)

// AdaptiveUnitedDeploymentStrategy tunes the Adaptive schedule strategy.
type AdaptiveUnitedDeploymentStrategy struct {
	// RescheduleCriticalSeconds is how long, in seconds, a pod may stay
	// unschedulable in its subset before it is moved to a later subset with
	// room. Defaults to 30.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	RescheduleCriticalSeconds *int32 `json:"rescheduleCriticalSeconds,omitempty"`

	// UnschedulableDuration is how long, in seconds, a subset is treated as
	// unschedulable (and skipped) after one of its pods failed to schedule.
	// Defaults to 300.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	UnschedulableDuration *int32 `json:"unschedulableDuration,omitempty"`

	// ReserveUnschedulablePods, when true, keeps an unschedulable pod in its
	// subset (still trying to schedule it) and creates a temporary pod in
	// the next subset instead; the temporary pod is removed once the
	// reserved one is running and ready. When false (the default) the pod
	// is moved for good.
	//
	// +optional
	ReserveUnschedulablePods bool `json:"reserveUnschedulablePods,omitempty"`
}

// UnitedDeploymentScheduleStrategy is what a UnitedDeployment does with pods
// a subset cannot schedule.
type UnitedDeploymentScheduleStrategy struct {
	// Type is Fixed (the default when empty: pods stay in their subset) or
	// Adaptive (pods that stay unschedulable move to later subsets).
	//
	// +optional
	// +kubebuilder:validation:Enum=Adaptive;Fixed;""
	Type UnitedDeploymentScheduleStrategyType `json:"type,omitempty"`

	// Adaptive tunes the Adaptive type.
	//
	// +optional
	Adaptive *AdaptiveUnitedDeploymentStrategy `json:"adaptive,omitempty"`
}

// UnitedDeploymentStatus is the observed state of a UnitedDeployment.
type UnitedDeploymentStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ReadyReplicas is the number of ready pods over all subsets.
	//
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Replicas is the number of pods over all subsets.
	Replicas int32 `json:"replicas"`

	// UpdatedReplicas is the number of pods at the latest revision.
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// UpdatedReadyReplicas is the number of ready pods at the latest
	// revision.
	//
	// +optional
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas,omitempty"`

	// ReservedPods is the number of unschedulable pods kept in their subset
	// while a temporary pod runs elsewhere (reserveUnschedulablePods).
	//
	// +optional
	ReservedPods int32 `json:"reservedPods,omitempty"`

	// CollisionCount counts hash collisions between revision names; the
	// controller uses it to make the next revision name unique.
	//
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// CurrentRevision is the revision of the current template.
	CurrentRevision string `json:"currentRevision"`

	// UpdatedRevision is the revision being rolled out (the latest
	// template).
	//
	// +optional
	UpdatedRevision string `json:"updatedRevision,omitempty"`

	// SubsetStatuses reports on each subset, including the number of pods
	// assigned to it (replicas) and its partition in effect.
	//
	// +optional
	SubsetStatuses []UnitedDeploymentSubsetStatus `json:"subsetStatuses,omitempty"`

	// Conditions are the latest observations of the UnitedDeployment's
	// state.
	//
	// +optional
	Conditions []UnitedDeploymentCondition `json:"conditions,omitempty"`

	// LabelSelector is spec.selector in string form, for the scale
	// subresource (used by HorizontalPodAutoscalers).
	//
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// UnitedDeploymentCondition is one observation of a UnitedDeployment's
// state.
type UnitedDeploymentCondition struct {
	// Type of the condition: SubsetProvisioned, SubsetUpdated or
	// SubsetFailure.
	//
	// +optional
	Type UnitedDeploymentConditionType `json:"type,omitempty"`

	// Status of the condition: True, False or Unknown.
	//
	// +optional
	Status corev1.ConditionStatus `json:"status,omitempty"`

	// LastTransitionTime is when the status last changed.
	//
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// Reason is a one-word, CamelCase reason for the last transition.
	//
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message is a human-readable account of the last transition.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// UnitedDeploymentSubsetStatus reports on one subset.
type UnitedDeploymentSubsetStatus struct {
	// Name of the subset, as in spec.topology.subsets.
	//
	// +optional
	Name string `json:"name,omitempty"`
	// Replicas is the number of pods assigned to the subset.
	//
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of ready pods in the subset.
	//
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Partition is the subset's partition in effect.
	//
	// +optional
	Partition int32 `json:"partition,omitempty"`
	// ReservedPods is the number of the subset's pods that are reserved
	// while unschedulable (reserveUnschedulablePods).
	//
	// +optional
	ReservedPods int32 `json:"reservedPods,omitempty"`
	// Conditions are the latest observations of the subset's state.
	//
	// +optional
	Conditions []UnitedDeploymentSubsetCondition `json:"conditions,omitempty"`
}

// UnitedDeploymentSubsetConditionType is the type of a subset condition.
type UnitedDeploymentSubsetConditionType string

const (
	// UnitedDeploymentSubsetSchedulable is False while the subset is treated
	// as unable to schedule new pods.
	UnitedDeploymentSubsetSchedulable UnitedDeploymentSubsetConditionType = "Schedulable"
)

// UnitedDeploymentSubsetCondition is one observation of a subset's state.
type UnitedDeploymentSubsetCondition struct {
	// Type of the condition: Schedulable.
	Type UnitedDeploymentSubsetConditionType `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastTransitionTime is when the status last changed.
	//
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is a one-word, CamelCase reason for the last transition.
	//
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable account of the last transition.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// UnitedDeployment spreads one application over several groups of nodes
// (subsets, for example zones): it creates one workload per subset from a
// single template and splits the pods between them.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ud,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:printcolumn:name="DESIRED",type="integer",JSONPath=".spec.replicas",description="Desired number of pods over all subsets."
// +kubebuilder:printcolumn:name="CURRENT",type="integer",JSONPath=".status.replicas",description="Pods over all subsets."
// +kubebuilder:printcolumn:name="UPDATED",type="integer",JSONPath=".status.updatedReplicas",description="Pods at the latest revision."
// +kubebuilder:printcolumn:name="READY",type="integer",JSONPath=".status.readyReplicas",description="Pods that are ready."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the UnitedDeployment was created."
type UnitedDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the UnitedDeployment.
	Spec UnitedDeploymentSpec `json:"spec,omitempty"`
	// Status is the observed state of the UnitedDeployment, written by the
	// controller.
	Status UnitedDeploymentStatus `json:"status,omitempty"`
}

// UnitedDeploymentList is a list of UnitedDeployments.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type UnitedDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the UnitedDeployments.
	Items []UnitedDeployment `json:"items"`
}
