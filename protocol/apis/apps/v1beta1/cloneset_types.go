package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
)

// CloneSetSpec is the desired state of a CloneSet.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.updateStrategy) && has(self.updateStrategy.rollingUpdate) && has(self.updateStrategy.rollingUpdate.podUpdatePolicy) && self.updateStrategy.rollingUpdate.podUpdatePolicy == 'InPlaceOnly' && has(self.updateStrategy.rollingUpdate.maxSurge) && (type(self.updateStrategy.rollingUpdate.maxSurge) == int ? self.updateStrategy.rollingUpdate.maxSurge > 0 : (self.updateStrategy.rollingUpdate.maxSurge != '0%' && (!has(self.replicas) || self.replicas > 0))))",message="spec.updateStrategy.rollingUpdate.maxSurge: must be 0 when podUpdatePolicy is InPlaceOnly; use InPlaceIfPossible or ReCreate to surge extra pods"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas == 0 || !has(self.updateStrategy) || !has(self.updateStrategy.rollingUpdate) || !((!has(self.updateStrategy.rollingUpdate.maxUnavailable) || (type(self.updateStrategy.rollingUpdate.maxUnavailable) == int ? self.updateStrategy.rollingUpdate.maxUnavailable == 0 : self.updateStrategy.rollingUpdate.maxUnavailable == '0%')) && (!has(self.updateStrategy.rollingUpdate.maxSurge) || (type(self.updateStrategy.rollingUpdate.maxSurge) == int ? self.updateStrategy.rollingUpdate.maxSurge == 0 : self.updateStrategy.rollingUpdate.maxSurge == '0%')))",message="spec.updateStrategy.rollingUpdate.maxUnavailable: maxUnavailable and maxSurge cannot both be 0 while spec.replicas is above 0; set at least one of them above 0"
type CloneSetSpec struct {
	// Replicas is the number of pods the CloneSet keeps. Defaults to 1.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Selector picks the pods this CloneSet owns. It must not be empty, must
	// match the labels of spec.template, and cannot be changed after
	// creation.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector: must not be empty; set matchLabels or matchExpressions"
	Selector *metav1.LabelSelector `json:"selector"`

	// Template is the pod template the CloneSet creates pods from. Its
	// restartPolicy must be Always and it must not set
	// activeDeadlineSeconds. Checked by the admission webhook.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Template corev1.PodTemplateSpec `json:"template"`

	// VolumeClaimTemplates are PVC templates; the CloneSet creates one PVC
	// per template for each pod, named after the pod's instance ID. A pod's
	// PVCs are deleted with it when the CloneSet deletes the pod. Whether a
	// replacement for a pod that disappeared otherwise gets the old PVCs
	// back is set by scaleStrategy.enablePVCReuse.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`

	// ScaleStrategy tunes how pods are created and deleted.
	//
	// +optional
	ScaleStrategy CloneSetScaleStrategy `json:"scaleStrategy,omitempty"`

	// UpdateStrategy tunes how pods are moved to a new revision when
	// spec.template changes.
	//
	// +optional
	// +kubebuilder:default={}
	UpdateStrategy CloneSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// RevisionHistoryLimit is how many old revisions (ControllerRevisions)
	// are kept for rollback. Defaults to 10.
	//
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// MinReadySeconds is how long, in seconds, a new pod must stay ready,
	// with no container crashing, before it counts as available. Defaults
	// to 0: available as soon as ready.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// Lifecycle defines hooks that hold pods after creation (preNormal),
	// before deletion (preDelete) and around in-place updates
	// (inPlaceUpdate).
	//
	// +optional
	Lifecycle *pub.Lifecycle `json:"lifecycle,omitempty"`

	// ProgressDeadlineSeconds is how long, in seconds, a rollout may go
	// without progress before the Progressing condition turns False with
	// reason ProgressDeadlineExceeded. The clock restarts when the rollout
	// completes, reaches its partition, or is paused. Unset (the default)
	// means no deadline and no Progressing condition. It only reports; the
	// rollout itself continues.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// CloneSetScaleStrategy tunes how a CloneSet creates and deletes pods.
type CloneSetScaleStrategy struct {
	// PodsToDelete names pods of this CloneSet to delete. When the pod count
	// stays the same the CloneSet creates a replacement for each; when
	// spec.replicas is lowered at the same time, these pods are the ones
	// removed. Names of pods that no longer exist are dropped from the
	// list. Each name may appear once and must be a pod owned by this
	// CloneSet (checked by the admission webhook).
	//
	// +optional
	// +listType=atomic
	PodsToDelete []string `json:"podsToDelete,omitempty"`

	// MaxUnavailable limits scale-up: new pods are created only while fewer
	// than this many pods are unavailable. An absolute number or a
	// percentage of spec.replicas (rounded up). Unset means no limit.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.scaleStrategy.maxUnavailable: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// EnablePVCReuse, when true, gives the replacement of a pod that
	// disappeared (deleted or evicted from outside the CloneSet) the old
	// pod's instance ID and PVCs. When false (the default) those PVCs are
	// deleted and the replacement gets fresh ones.
	//
	// +optional
	EnablePVCReuse bool `json:"enablePVCReuse,omitempty"`

	// ExcludePreparingDelete, when true, does not count pods in the
	// PreparingDelete lifecycle state (held by a preDelete hook) towards
	// spec.replicas, so the CloneSet creates their replacements at once.
	// Defaults to false.
	//
	// +optional
	ExcludePreparingDelete bool `json:"excludePreparingDelete,omitempty"`
}

// CloneSetUpdateStrategy tunes how a CloneSet updates its pods.
type CloneSetUpdateStrategy struct {
	// Type is RollingUpdate (the default), which updates pods as set out in
	// rollingUpdate, or OnDelete, which moves a pod to the new revision only
	// when the pod is deleted and recreated (for example by the user).
	//
	// +optional
	// +kubebuilder:default=RollingUpdate
	// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
	Type CloneSetUpdateStrategyType `json:"type,omitempty"`

	// RollingUpdate tunes the rolling update: how many pods at a time, how
	// many stay at the old revision, and whether pods are recreated or
	// updated in place. Ignored with type OnDelete.
	//
	// +optional
	// +kubebuilder:default={}
	RollingUpdate *RollingUpdateCloneSetStrategy `json:"rollingUpdate,omitempty"`
}

// CloneSetUpdateStrategyType is how a CloneSet rolls out a new revision.
type CloneSetUpdateStrategyType string

const (
	// RollingUpdateCloneSetUpdateStrategyType updates pods automatically,
	// paced by spec.updateStrategy.rollingUpdate. The default.
	RollingUpdateCloneSetUpdateStrategyType CloneSetUpdateStrategyType = "RollingUpdate"
	// OnDeleteCloneSetUpdateStrategyType leaves running pods alone; a pod
	// gets the new revision only when it is deleted and recreated.
	OnDeleteCloneSetUpdateStrategyType CloneSetUpdateStrategyType = "OnDelete"
)

// RollingUpdateCloneSetStrategy tunes a rolling update of a CloneSet.
type RollingUpdateCloneSetStrategy struct {
	// Partition is how many pods stay at the old revision: the CloneSet
	// updates (replicas - partition) pods. An absolute number or a
	// percentage of spec.replicas, rounded up; a percentage below 100% with
	// more than one replica still updates at least one pod. Defaults to 0
	// (update all).
	//
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.rollingUpdate.partition: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// MaxUnavailable is how many pods may be unavailable at once during an
	// update or scale-in. An absolute number or a percentage of
	// spec.replicas, rounded up (rounded down when maxSurge is above 0).
	// Defaults to "20%".
	//
	// +optional
	// +kubebuilder:default="20%"
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.rollingUpdate.maxUnavailable: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge is how many pods may exist above spec.replicas during an
	// update or while replacing pods listed in scaleStrategy.podsToDelete.
	// An absolute number or a percentage of spec.replicas, rounded up.
	// Defaults to 0. Must be 0 with podUpdatePolicy InPlaceOnly.
	//
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.rollingUpdate.maxSurge: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// PodUpdatePolicy is how one pod is moved to the new revision: ReCreate
	// (the default) deletes the old pod and creates a new one;
	// InPlaceIfPossible changes the pod in place when only images,
	// labels/annotations (or, where enabled, resources) changed and
	// recreates it otherwise; InPlaceOnly always updates in place and
	// rejects template changes that cannot be applied in place.
	//
	// +optional
	// +kubebuilder:default=ReCreate
	// +kubebuilder:validation:Enum=ReCreate;InPlaceIfPossible;InPlaceOnly
	PodUpdatePolicy CloneSetPodUpdateStrategyType `json:"podUpdatePolicy,omitempty"`

	// Paused, when true, stops updating pods; scaling continues. Defaults
	// to false.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`

	// PriorityStrategy orders pods for update by their labels: pods with
	// higher priority are updated first.
	//
	// +optional
	PriorityStrategy *pub.UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`

	// ScatterStrategy spreads pods carrying the given labels evenly over the
	// update instead of updating them together. Applied after
	// priorityStrategy; using one of the two, with a single term, keeps the
	// order easy to predict.
	//
	// +optional
	ScatterStrategy pub.UpdateScatterStrategy `json:"scatterStrategy,omitempty"`

	// InPlaceUpdateStrategy tunes in-place updates (podUpdatePolicy
	// InPlaceIfPossible and InPlaceOnly), including the pre-download of new
	// images to the nodes of old pods.
	//
	// +optional
	InPlaceUpdateStrategy *pub.InPlaceUpdateStrategy `json:"inPlaceUpdateStrategy,omitempty"`
}

// CloneSetPodUpdateStrategyType is how a CloneSet moves one pod to a new
// revision.
type CloneSetPodUpdateStrategyType string

const (
	// RecreateCloneSetPodUpdateStrategyType deletes the old pod and creates
	// a new one. The default.
	RecreateCloneSetPodUpdateStrategyType CloneSetPodUpdateStrategyType = "ReCreate"
	// InPlaceIfPossibleCloneSetPodUpdateStrategyType updates the pod in
	// place when the template change allows it and recreates it otherwise.
	InPlaceIfPossibleCloneSetPodUpdateStrategyType CloneSetPodUpdateStrategyType = "InPlaceIfPossible"
	// InPlaceOnlyCloneSetPodUpdateStrategyType always updates in place;
	// template changes that cannot be applied in place are rejected.
	InPlaceOnlyCloneSetPodUpdateStrategyType CloneSetPodUpdateStrategyType = "InPlaceOnly"
)

// CloneSetStatus is the observed state of a CloneSet.
type CloneSetStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods the CloneSet currently has.
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of pods with a Ready condition.
	ReadyReplicas int32 `json:"readyReplicas"`

	// AvailableReplicas is the number of pods that have been ready for at
	// least spec.minReadySeconds.
	AvailableReplicas int32 `json:"availableReplicas"`

	// UpdatedReplicas is the number of pods at the update revision.
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// UpdatedReadyReplicas is the number of pods at the update revision that
	// are ready.
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas"`

	// UpdatedAvailableReplicas is the number of pods at the update revision
	// that are available. A pod whose resources are being resized in place
	// counts as unavailable.
	//
	// +optional
	UpdatedAvailableReplicas int32 `json:"updatedAvailableReplicas,omitempty"`

	// ExpectedUpdatedReplicas is the number of pods that should reach the
	// update revision: spec.replicas minus the partition.
	//
	// +optional
	ExpectedUpdatedReplicas int32 `json:"expectedUpdatedReplicas,omitempty"`

	// UpdateRevision is the name of the revision generated from the current
	// spec.template.
	//
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`

	// CurrentRevision is the revision all pods were at before the update
	// started; it becomes the update revision once every pod is updated.
	//
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`

	// CollisionCount counts hash collisions between revision names; the
	// controller uses it to make the next revision name unique.
	//
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// Conditions are the latest observations of the CloneSet's state.
	//
	// +optional
	Conditions []CloneSetCondition `json:"conditions,omitempty"`

	// LabelSelector is spec.selector in string form, for the scale
	// subresource (used by HorizontalPodAutoscalers).
	//
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// CloneSetConditionType is the type of a CloneSet condition.
type CloneSetConditionType string

const (
	// CloneSetConditionFailedScale: the controller failed to create or
	// delete pods or PVCs.
	CloneSetConditionFailedScale CloneSetConditionType = "FailedScale"
	// CloneSetConditionFailedUpdate: the controller failed to update pods.
	CloneSetConditionFailedUpdate CloneSetConditionType = "FailedUpdate"
	// CloneSetConditionTypeProgressing reports rollout progress; present only
	// when spec.progressDeadlineSeconds is set.
	CloneSetConditionTypeProgressing CloneSetConditionType = "Progressing"
)

// CloneSetConditionReason is the reason of a Progressing condition.
type CloneSetConditionReason string

const (
	// CloneSetProgressUpdated: a rollout is in progress (Progressing=True).
	CloneSetProgressUpdated CloneSetConditionReason = "CloneSetUpdated"
	// CloneSetAvailable: the rollout has finished and all pods are
	// available (Progressing=True).
	CloneSetAvailable CloneSetConditionReason = "CloneSetAvailable"
	// CloneSetProgressPaused: the rollout is paused (Progressing=True).
	CloneSetProgressPaused CloneSetConditionReason = "CloneSetPaused"
	// CloneSetProgressPartitionAvailable: the pods above the partition are
	// updated and available (Progressing=True).
	CloneSetProgressPartitionAvailable CloneSetConditionReason = "ProgressPartitionAvailable"
	// CloneSetProgressDeadlineExceeded: the rollout made no progress within
	// spec.progressDeadlineSeconds (Progressing=False).
	CloneSetProgressDeadlineExceeded CloneSetConditionReason = "ProgressDeadlineExceeded"
)

// CloneSetCondition is one observation of a CloneSet's state.
type CloneSetCondition struct {
	// Type of the condition: FailedScale, FailedUpdate or Progressing.
	Type CloneSetConditionType `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// LastUpdateTime is when the condition was last updated.
	//
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
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

// CloneSet manages a set of interchangeable pods, like a Deployment, but
// owns the pods directly: it can update them in place, keep part of them at
// the old revision (partition), delete chosen pods, give each pod its own
// PVCs, and hold pods at lifecycle hooks.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=clone,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:printcolumn:name="DESIRED",type="integer",JSONPath=".spec.replicas",description="Desired number of pods."
// +kubebuilder:printcolumn:name="UPDATED",type="integer",JSONPath=".status.updatedReplicas",description="Pods at the update revision."
// +kubebuilder:printcolumn:name="UPDATED_READY",type="integer",JSONPath=".status.updatedReadyReplicas",description="Pods at the update revision that are ready."
// +kubebuilder:printcolumn:name="UPDATED_AVAILABLE",type="integer",JSONPath=".status.updatedAvailableReplicas",description="Pods at the update revision that are available."
// +kubebuilder:printcolumn:name="READY",type="integer",JSONPath=".status.readyReplicas",description="Pods that are ready."
// +kubebuilder:printcolumn:name="TOTAL",type="integer",JSONPath=".status.replicas",description="All pods of the CloneSet."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the CloneSet was created."
// +kubebuilder:printcolumn:name="CONTAINERS",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].name",description="Container names of the pod template."
// +kubebuilder:printcolumn:name="IMAGES",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].image",description="Container images of the pod template."
// +kubebuilder:printcolumn:name="SELECTOR",type="string",priority=1,JSONPath=".status.labelSelector",description="Label selector of the pods."
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(self.spec) || self.spec.selector == oldSelf.spec.selector",message="spec.selector: cannot be changed after creation"
type CloneSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the CloneSet.
	Spec CloneSetSpec `json:"spec,omitempty"`
	// Status is the observed state of the CloneSet, written by the
	// controller.
	Status CloneSetStatus `json:"status,omitempty"`
}

// CloneSetList is a list of CloneSets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type CloneSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the CloneSets.
	Items []CloneSet `json:"items"`
}
