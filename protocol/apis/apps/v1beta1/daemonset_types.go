package v1beta1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
)

// DaemonSetUpdateStrategy tunes how an Advanced DaemonSet replaces its pods
// when spec.template changes.
//
// The rules below mirror the admission checks on a rolling update, after the
// webhook's defaults are applied: with both maxUnavailable and maxSurge
// unset, maxUnavailable becomes 1; with only maxSurge set, maxUnavailable
// becomes 0.
//
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || (has(self.type) && self.type == 'OnDelete') || !((has(self.rollingUpdate.maxSurge) && (type(self.rollingUpdate.maxSurge) == int ? self.rollingUpdate.maxSurge != 0 : self.rollingUpdate.maxSurge != '0%')) && (has(self.rollingUpdate.maxUnavailable) ? (type(self.rollingUpdate.maxUnavailable) == int ? self.rollingUpdate.maxUnavailable != 0 : self.rollingUpdate.maxUnavailable != '0%') : !has(self.rollingUpdate.maxSurge)))",message="spec.updateStrategy.rollingUpdate.maxSurge: must be 0 when maxUnavailable is above 0; set only one of maxSurge and maxUnavailable above 0"
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || (has(self.type) && self.type == 'OnDelete') || (has(self.rollingUpdate.maxSurge) && (type(self.rollingUpdate.maxSurge) == int ? self.rollingUpdate.maxSurge != 0 : self.rollingUpdate.maxSurge != '0%')) || (has(self.rollingUpdate.maxUnavailable) ? (type(self.rollingUpdate.maxUnavailable) == int ? self.rollingUpdate.maxUnavailable != 0 : self.rollingUpdate.maxUnavailable != '0%') : !has(self.rollingUpdate.maxSurge))",message="spec.updateStrategy.rollingUpdate.maxUnavailable: cannot be 0 when maxSurge is 0; set one of maxUnavailable and maxSurge above 0"
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || (has(self.type) && self.type == 'OnDelete') || !(has(self.rollingUpdate.rollingUpdateType) && self.rollingUpdate.rollingUpdateType == 'InPlaceIfPossible' && (has(self.rollingUpdate.maxSurge) && (type(self.rollingUpdate.maxSurge) == int ? self.rollingUpdate.maxSurge != 0 : self.rollingUpdate.maxSurge != '0%')))",message="spec.updateStrategy.rollingUpdate.maxSurge: must be 0 when rollingUpdateType is InPlaceIfPossible; use maxUnavailable to pace an in-place update"
type DaemonSetUpdateStrategy struct {
	// Type is RollingUpdate (the default), which replaces pods node by node
	// as set out in rollingUpdate, or OnDelete, which creates a new pod on a
	// node only after its old pod has been deleted by someone else.
	//
	// +optional
	// +kubebuilder:default=RollingUpdate
	// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
	Type DaemonSetUpdateStrategyType `json:"type,omitempty"`

	// RollingUpdate tunes the rolling update. Used only with type
	// RollingUpdate.
	//
	// +optional
	RollingUpdate *RollingUpdateDaemonSet `json:"rollingUpdate,omitempty"`
}

// DaemonSetUpdateStrategyType is how an Advanced DaemonSet replaces pods.
type DaemonSetUpdateStrategyType string

// RollingUpdateType is how each pod is replaced during a rolling update of
// an Advanced DaemonSet.
type RollingUpdateType string

const (
	// RollingUpdateDaemonSetStrategyType replaces pods node by node. The
	// default.
	RollingUpdateDaemonSetStrategyType DaemonSetUpdateStrategyType = "RollingUpdate"
	// OnDeleteDaemonSetStrategyType replaces a pod only after it has been
	// deleted.
	OnDeleteDaemonSetStrategyType DaemonSetUpdateStrategyType = "OnDelete"

	// StandardRollingUpdateType deletes and recreates pods, as the upstream
	// DaemonSet does (or creates the new pod first when maxSurge is set).
	StandardRollingUpdateType RollingUpdateType = "Standard"
	// InplaceRollingUpdateType updates pods in place when only images or
	// labels/annotations changed, and recreates them otherwise.
	InplaceRollingUpdateType RollingUpdateType = "InPlaceIfPossible"
)

// RollingUpdateDaemonSet tunes a rolling update of an Advanced DaemonSet.
type RollingUpdateDaemonSet struct {
	// Type is how each pod is replaced: Standard (the default) deletes and
	// recreates it; InPlaceIfPossible updates it in place when only images
	// or labels/annotations changed. (v1alpha1's deprecated Surging is
	// Standard with maxSurge 1 and maxUnavailable 0.)
	//
	// +optional
	// +kubebuilder:default=Standard
	// +kubebuilder:validation:Enum=Standard;InPlaceIfPossible
	Type RollingUpdateType `json:"rollingUpdateType,omitempty"`

	// MaxUnavailable is how many of the DaemonSet's pods may be unavailable
	// at once during the update: an absolute number or a percentage of
	// status.desiredNumberScheduled, rounded up. When both maxUnavailable
	// and maxSurge are unset it defaults to 1, otherwise to 0. Must be 0
	// when maxSurge is above 0, and above 0 when maxSurge is 0.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.rollingUpdate.maxUnavailable: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge is how many nodes may run a new pod next to their old one
	// during the update; the old pod is deleted once the new one is
	// available. An absolute number or a percentage of
	// status.desiredNumberScheduled, rounded up. Defaults to 0. Must be 0
	// when maxUnavailable is above 0, and with rollingUpdateType
	// InPlaceIfPossible.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.rollingUpdate.maxSurge: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// Selector limits the update to pods on nodes whose labels match; pods
	// on other nodes keep the old revision. Unset means all nodes.
	//
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Partition is how many pods keep the old revision: an absolute number,
	// or a percentage of status.desiredNumberScheduled such as "20%".
	// Defaults to 0 (update all); status.desiredNumberScheduled or more
	// (or "100%") updates none.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.rollingUpdate.partition: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// Paused, when true, stops updating pods. Defaults to false.
	//
	// +optional
	Paused *bool `json:"paused,omitempty"`
}

// DaemonSetScaleStrategy tunes how an Advanced DaemonSet creates pods on
// nodes that need one.
type DaemonSetScaleStrategy struct {
	// PartitionedScaling, when true, makes rollingUpdate.partition (and
	// rollingUpdate.selector) also govern the creation of pods on nodes
	// that have none, so that only the share of nodes the update would
	// reach gets a pod. (v1alpha1 expresses it with the annotation
	// daemonset.kruise.io/progressive-create-pod: "true".) Defaults to
	// false: a pod is created on every node that should run one.
	//
	// +optional
	PartitionedScaling bool `json:"partitionedScaling,omitempty"`
}

// DaemonSetSpec is the desired state of an Advanced DaemonSet.
//
// +kubebuilder:validation:XValidation:rule="!has(self.lifecycle) || !has(self.lifecycle.inPlaceUpdate)",message="spec.lifecycle.inPlaceUpdate: not supported by Advanced DaemonSet; use preDelete or preNormal"
type DaemonSetSpec struct {
	// Selector picks the pods this DaemonSet owns. It must not be empty and
	// must match the labels of spec.template.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector: must not be empty; set matchLabels or matchExpressions"
	Selector *metav1.LabelSelector `json:"selector"`

	// Template is the pod template; one pod is run on every node that
	// matches the template's node selector and affinity (every node if it
	// has none). Its restartPolicy must be Always and it must not set
	// activeDeadlineSeconds. Checked by the admission webhook.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Template corev1.PodTemplateSpec `json:"template"`

	// UpdateStrategy tunes how pods are replaced when spec.template changes.
	//
	// +optional
	// +kubebuilder:default={}
	UpdateStrategy DaemonSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// MinReadySeconds is how long, in seconds, a new pod must stay ready,
	// with no container crashing, before it counts as available. Defaults
	// to 0: available as soon as ready.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// BurstReplicas caps how many pods are created or deleted in one sync,
	// to spread the load on large clusters. Defaults to 250.
	//
	// +optional
	// +kubebuilder:default=250
	BurstReplicas *intstr.IntOrString `json:"burstReplicas,omitempty"`

	// RevisionHistoryLimit is how many old revisions (ControllerRevisions)
	// are kept for rollback. Defaults to 10.
	//
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// Lifecycle defines hooks that hold pods after creation (preNormal) and
	// before deletion (preDelete). The inPlaceUpdate hook is not supported
	// for DaemonSets. Unset means no hooks.
	//
	// +optional
	Lifecycle *pub.Lifecycle `json:"lifecycle,omitempty"`

	// ScaleStrategy tunes how pods are created on nodes that need one.
	// Unset creates them on every such node.
	//
	// +optional
	ScaleStrategy *DaemonSetScaleStrategy `json:"scaleStrategy,omitempty"`
}

// DaemonSetStatus is the observed state of an Advanced DaemonSet.
type DaemonSetStatus struct {
	// CurrentNumberScheduled is the number of nodes that run at least one
	// daemon pod and should run it.
	CurrentNumberScheduled int32 `json:"currentNumberScheduled"`

	// NumberMisscheduled is the number of nodes that run a daemon pod but
	// should not.
	NumberMisscheduled int32 `json:"numberMisscheduled"`

	// DesiredNumberScheduled is the number of nodes that should run a daemon
	// pod, whether or not they do.
	DesiredNumberScheduled int32 `json:"desiredNumberScheduled"`

	// NumberReady is the number of nodes that should run a daemon pod and
	// have one running and ready.
	NumberReady int32 `json:"numberReady"`

	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// UpdatedNumberScheduled is the number of nodes running a pod of the
	// latest revision.
	UpdatedNumberScheduled int32 `json:"updatedNumberScheduled"`

	// NumberAvailable is the number of nodes that should run a daemon pod
	// and have one that has been ready for at least spec.minReadySeconds.
	//
	// +optional
	NumberAvailable int32 `json:"numberAvailable,omitempty"`

	// NumberUnavailable is the number of nodes that should run a daemon pod
	// but have none available.
	//
	// +optional
	NumberUnavailable int32 `json:"numberUnavailable,omitempty"`

	// CollisionCount counts hash collisions between revision names; the
	// controller uses it to make the next revision name unique.
	//
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// Conditions are the latest observations of the DaemonSet's state.
	//
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []appsv1.DaemonSetCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// UpdateRevision is the revision hash (controller-revision-hash) of the
	// latest spec.template. (v1alpha1 calls it daemonSetHash.)
	//
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
}

// DaemonSet (Advanced DaemonSet) runs one pod on each selected node, like
// the upstream DaemonSet, and adds in-place updates, partitioned and
// node-selective rolling updates and creation, pausing, surge and
// lifecycle hooks.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=daemon;ads,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="DESIRED",type="integer",JSONPath=".status.desiredNumberScheduled",description="Nodes that should run a pod."
// +kubebuilder:printcolumn:name="CURRENT",type="integer",JSONPath=".status.currentNumberScheduled",description="Nodes that run a pod."
// +kubebuilder:printcolumn:name="READY",type="integer",JSONPath=".status.numberReady",description="Nodes with a ready pod."
// +kubebuilder:printcolumn:name="UP-TO-DATE",type="integer",JSONPath=".status.updatedNumberScheduled",description="Nodes running a pod of the latest revision."
// +kubebuilder:printcolumn:name="AVAILABLE",type="integer",JSONPath=".status.numberAvailable",description="Nodes with an available pod."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the DaemonSet was created."
// +kubebuilder:printcolumn:name="CONTAINERS",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].name",description="Container names of the pod template."
// +kubebuilder:printcolumn:name="IMAGES",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].image",description="Container images of the pod template."
type DaemonSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the DaemonSet.
	Spec DaemonSetSpec `json:"spec,omitempty"`
	// Status is the observed state of the DaemonSet, written by the
	// controller.
	Status DaemonSetStatus `json:"status,omitempty"`
}

// DaemonSetList is a list of Advanced DaemonSets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type DaemonSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the DaemonSets.
	Items []DaemonSet `json:"items"`
}
