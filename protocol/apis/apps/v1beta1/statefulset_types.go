package v1beta1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
)

// MaxMinReadySeconds is the largest value allowed for
// spec.updateStrategy.rollingUpdate.minReadySeconds.
const MaxMinReadySeconds = 300

// VolumeClaimUpdateStrategyType is when PVCs are brought in line with a
// changed spec.volumeClaimTemplates.
type VolumeClaimUpdateStrategyType string

const (
	// OnPodRollingUpdateVolumeClaimUpdateStrategyType updates a pod's PVCs
	// while the pod itself is rolled.
	OnPodRollingUpdateVolumeClaimUpdateStrategyType VolumeClaimUpdateStrategyType = "OnPodRollingUpdate"
	// OnPVCDeleteVolumeClaimUpdateStrategyType applies the new template only
	// to PVCs created after the old ones have been deleted by the user.
	OnPVCDeleteVolumeClaimUpdateStrategyType VolumeClaimUpdateStrategyType = "OnDelete"
)

// VolumeClaimStatus reports how far the PVCs of one volume claim template
// match it.
type VolumeClaimStatus struct {
	// VolumeClaimName is the name of the volume claim template.
	VolumeClaimName string `json:"volumeClaimName"`
	// CompatibleReplicas is the number of replicas whose PVC requests at
	// least the storage the template asks for.
	CompatibleReplicas int32 `json:"compatibleReplicas"`
	// CompatibleReadyReplicas is the number of those replicas whose PVC
	// capacity has also reached the requested storage.
	CompatibleReadyReplicas int32 `json:"compatibleReadyReplicas"`
}

// StatefulSetUpdateStrategy tunes how pods are moved to a new revision.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.type) && self.type == 'OnDelete' && has(self.rollingUpdate))",message="spec.updateStrategy.rollingUpdate: only allowed when spec.updateStrategy.type is RollingUpdate"
type StatefulSetUpdateStrategy struct {
	// Type is RollingUpdate (the default), which updates pods as set out in
	// rollingUpdate, or OnDelete, which moves a pod to the new revision only
	// after the user has deleted it.
	//
	// +optional
	// +kubebuilder:default=RollingUpdate
	// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
	Type appsv1.StatefulSetUpdateStrategyType `json:"type,omitempty"`
	// RollingUpdate tunes the rolling update. Only allowed with type
	// RollingUpdate.
	//
	// +optional
	RollingUpdate *RollingUpdateStatefulSetStrategy `json:"rollingUpdate,omitempty"`
}

// VolumeClaimUpdateStrategy is when PVCs are brought in line with a changed
// spec.volumeClaimTemplates.
type VolumeClaimUpdateStrategy struct {
	// Type is OnPodRollingUpdate (PVCs are updated while their pod is
	// rolled) or OnDelete (only PVCs recreated after the user deleted them
	// get the new template). Takes effect only where automatic PVC resizing
	// is enabled.
	//
	// +optional
	// +kubebuilder:validation:Enum=OnPodRollingUpdate;OnDelete
	Type VolumeClaimUpdateStrategyType `json:"type,omitempty"`
}

// RollingUpdateStatefulSetStrategy tunes a rolling update of an Advanced
// StatefulSet.
type RollingUpdateStatefulSetStrategy struct {
	// Partition is how many pods keep the old revision: (replicas -
	// partition) pods are updated, highest ordinals first (or in priority
	// order with unorderedUpdate). Defaults to 0 (update all).
	//
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	Partition *int32 `json:"partition,omitempty"`
	// MaxUnavailable is how many pods may be unavailable at once during the
	// update: an integer of at least 1 or a non-zero percentage of
	// spec.replicas (rounded down). Values other than 1 need
	// podManagementPolicy Parallel. Defaults to 1.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]*[1-9][0-9]*%$')",message="spec.updateStrategy.rollingUpdate.maxUnavailable: use an integer of at least 1 or a percentage above 0% such as \"20%\""
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// PodUpdatePolicy is how a pod is moved to the new revision: ReCreate
	// (the default) deletes and recreates it; InPlaceIfPossible updates it
	// in place when only images or labels/annotations changed and recreates
	// it otherwise; InPlaceOnly always updates in place and rejects other
	// template changes. Both in-place policies need the InPlaceUpdateReady
	// readiness gate in spec.template.spec.readinessGates.
	//
	// +optional
	// +kubebuilder:default=ReCreate
	// +kubebuilder:validation:Enum=ReCreate;InPlaceIfPossible;InPlaceOnly
	PodUpdatePolicy PodUpdateStrategyType `json:"podUpdatePolicy,omitempty"`
	// Paused, when true, stops updating pods; scaling continues. Defaults
	// to false.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`
	// UnorderedUpdate, when set, updates pods in the order of its priority
	// strategy instead of by descending ordinal. Needs podManagementPolicy
	// Parallel.
	//
	// +optional
	UnorderedUpdate *UnorderedUpdateStrategy `json:"unorderedUpdate,omitempty"`
	// InPlaceUpdateStrategy tunes in-place updates (podUpdatePolicy
	// InPlaceIfPossible and InPlaceOnly).
	//
	// +optional
	InPlaceUpdateStrategy *pub.InPlaceUpdateStrategy `json:"inPlaceUpdateStrategy,omitempty"`
	// MinReadySeconds is how long, in seconds, an updated pod must stay ready
	// before it counts as available and the update moves on; with
	// OrderedReady it also paces scale-up. 0 to 300, defaults to 0.
	//
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`
}

// UnorderedUpdateStrategy orders a rolling update by pod priority rather
// than by ordinal.
type UnorderedUpdateStrategy struct {
	// PriorityStrategy orders pods for update by their labels: pods with
	// higher priority are updated first.
	//
	// +optional
	PriorityStrategy *pub.UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`
}

// PodUpdateStrategyType is how a pod is moved to a new revision.
type PodUpdateStrategyType string

const (
	// RecreatePodUpdateStrategyType deletes the pod and creates a new one.
	// The default.
	RecreatePodUpdateStrategyType PodUpdateStrategyType = "ReCreate"
	// InPlaceIfPossiblePodUpdateStrategyType updates the pod in place when
	// the template change allows it and recreates it otherwise.
	InPlaceIfPossiblePodUpdateStrategyType PodUpdateStrategyType = "InPlaceIfPossible"
	// InPlaceOnlyPodUpdateStrategyType always updates in place; template
	// changes that cannot be applied in place are rejected.
	InPlaceOnlyPodUpdateStrategyType PodUpdateStrategyType = "InPlaceOnly"
)

// PersistentVolumeClaimRetentionPolicyType is what happens to PVCs created
// from spec.volumeClaimTemplates.
type PersistentVolumeClaimRetentionPolicyType string

const (
	// RetainPersistentVolumeClaimRetentionPolicyType keeps the PVCs. The
	// default.
	RetainPersistentVolumeClaimRetentionPolicyType PersistentVolumeClaimRetentionPolicyType = "Retain"
	// DeletePersistentVolumeClaimRetentionPolicyType deletes the PVCs.
	DeletePersistentVolumeClaimRetentionPolicyType PersistentVolumeClaimRetentionPolicyType = "Delete"
)

// StatefulSetPersistentVolumeClaimRetentionPolicy is what happens to the
// PVCs created from spec.volumeClaimTemplates when the StatefulSet is
// deleted or scaled in.
type StatefulSetPersistentVolumeClaimRetentionPolicy struct {
	// WhenDeleted is Retain (the default: PVCs outlive the StatefulSet) or
	// Delete (PVCs are deleted with it).
	//
	// +optional
	// +kubebuilder:default=Retain
	// +kubebuilder:validation:Enum=Retain;Delete
	WhenDeleted PersistentVolumeClaimRetentionPolicyType `json:"whenDeleted,omitempty"`
	// WhenScaled is Retain (the default: PVCs of removed replicas are kept)
	// or Delete (PVCs of replicas removed by scale-in are deleted).
	//
	// +optional
	// +kubebuilder:default=Retain
	// +kubebuilder:validation:Enum=Retain;Delete
	WhenScaled PersistentVolumeClaimRetentionPolicyType `json:"whenScaled,omitempty"`
}

// StatefulSetOrdinals sets how replicas are numbered.
type StatefulSetOrdinals struct {
	// Start is the ordinal of the first replica; replicas are numbered
	// start, start+1, ... start+replicas-1 (skipping reserveOrdinals).
	// Defaults to 0.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	Start int32 `json:"start" protobuf:"varint,1,opt,name=start"`
}

// StatefulSetSpec is the desired state of an Advanced StatefulSet.
//
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || !has(self.updateStrategy.rollingUpdate) || !has(self.updateStrategy.rollingUpdate.maxUnavailable) || (has(self.podManagementPolicy) && self.podManagementPolicy == 'Parallel') || (type(self.updateStrategy.rollingUpdate.maxUnavailable) == int && self.updateStrategy.rollingUpdate.maxUnavailable == 1)",message="spec.updateStrategy.rollingUpdate.maxUnavailable: values other than 1 need spec.podManagementPolicy Parallel"
// +kubebuilder:validation:XValidation:rule="!has(self.scaleStrategy) || !has(self.scaleStrategy.maxUnavailable) || (has(self.podManagementPolicy) && self.podManagementPolicy == 'Parallel') || (type(self.scaleStrategy.maxUnavailable) == int && self.scaleStrategy.maxUnavailable == 1)",message="spec.scaleStrategy.maxUnavailable: values other than 1 need spec.podManagementPolicy Parallel"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || !has(self.updateStrategy.rollingUpdate) || !has(self.updateStrategy.rollingUpdate.unorderedUpdate) || (has(self.podManagementPolicy) && self.podManagementPolicy == 'Parallel')",message="spec.updateStrategy.rollingUpdate.unorderedUpdate: needs spec.podManagementPolicy Parallel"
type StatefulSetSpec struct {
	// Replicas is the number of pods the StatefulSet keeps. Defaults to 1.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Selector picks the pods this StatefulSet owns. It must not be empty,
	// must match the labels of spec.template, and cannot be changed after
	// creation.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector: must not be empty; set matchLabels or matchExpressions"
	Selector *metav1.LabelSelector `json:"selector"`

	// Template is the pod template; each pod created from it gets a stable
	// name and identity (<name>-<ordinal>). Its restartPolicy must be Always
	// and it must not set activeDeadlineSeconds. Checked by the admission
	// webhook.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Template corev1.PodTemplateSpec `json:"template"`

	// VolumeClaimTemplates are PVC templates; each pod gets its own PVC per
	// template, named <template>-<pod>, which it keeps across restarts and
	// updates. Every template needs a matching volumeMount in some container
	// of spec.template, and takes precedence over a pod volume of the same
	// name.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`

	// VolumeClaimUpdateStrategy is when existing PVCs are brought in line
	// with a changed volumeClaimTemplates. Takes effect only where automatic
	// PVC resizing is enabled.
	//
	// +optional
	VolumeClaimUpdateStrategy VolumeClaimUpdateStrategy `json:"volumeClaimUpdateStrategy,omitempty"`

	// ServiceName is the headless Service that governs the pods' network
	// identity: pod <name>-<ordinal> is reachable as
	// <name>-<ordinal>.<serviceName>.<namespace>.svc. Cannot be changed
	// after creation.
	//
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// PodManagementPolicy is how pods are created and deleted when scaling:
	// OrderedReady (the default) creates them one at a time by ascending
	// ordinal, each after the previous one is ready, and deletes them in
	// reverse; Parallel creates and deletes them all at once. Cannot be
	// changed after creation.
	//
	// +optional
	// +kubebuilder:default=OrderedReady
	// +kubebuilder:validation:Enum=OrderedReady;Parallel
	PodManagementPolicy appsv1.PodManagementPolicyType `json:"podManagementPolicy,omitempty"`

	// UpdateStrategy tunes how pods are moved to a new revision when
	// spec.template changes.
	//
	// +optional
	// +kubebuilder:default={}
	UpdateStrategy StatefulSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// RevisionHistoryLimit is how many old revisions (ControllerRevisions)
	// are kept for rollback. Defaults to 10.
	//
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// ReserveOrdinals lists ordinals that get no pod; the StatefulSet still
	// runs spec.replicas pods, using the next free ordinals instead. Each
	// entry is an ordinal (3) or an inclusive range ("3-5"). With 3 replicas
	// on ordinals 0-2, reserving 1 deletes pod 1 and creates pod 3; reserving
	// 1 and lowering replicas to 2 just deletes pod 1.
	//
	// The format of each entry is checked by the admission webhook.
	//
	// +optional
	// +listType=atomic
	ReserveOrdinals []intstr.IntOrString `json:"reserveOrdinals,omitempty"`

	// Lifecycle defines hooks that hold pods after creation (preNormal),
	// before deletion (preDelete) and around in-place updates
	// (inPlaceUpdate).
	//
	// +optional
	Lifecycle *pub.Lifecycle `json:"lifecycle,omitempty"`

	// ScaleStrategy tunes how pods are created and deleted when scaling.
	//
	// +optional
	ScaleStrategy *StatefulSetScaleStrategy `json:"scaleStrategy,omitempty"`

	// PersistentVolumeClaimRetentionPolicy is what happens to the PVCs
	// created from volumeClaimTemplates when the StatefulSet is deleted or
	// scaled in. Defaults to keeping them (Retain) in both cases.
	//
	// +optional
	// +kubebuilder:default={}
	PersistentVolumeClaimRetentionPolicy *StatefulSetPersistentVolumeClaimRetentionPolicy `json:"persistentVolumeClaimRetentionPolicy,omitempty"`

	// Ordinals sets how replicas are numbered (the first ordinal). Unset
	// numbers them from 0.
	//
	// +optional
	Ordinals *StatefulSetOrdinals `json:"ordinals,omitempty"`
}

// StatefulSetScaleStrategy tunes how an Advanced StatefulSet scales.
type StatefulSetScaleStrategy struct {
	// MaxUnavailable is how many pods may be unavailable at once while
	// scaling: an integer of at least 1 or a non-zero percentage of
	// spec.replicas (rounded down). Values other than 1 need
	// podManagementPolicy Parallel.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]*[1-9][0-9]*%$')",message="spec.scaleStrategy.maxUnavailable: use an integer of at least 1 or a percentage above 0% such as \"20%\""
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// StatefulSetStatus is the observed state of an Advanced StatefulSet.
type StatefulSetStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods the StatefulSet currently has.
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is the number of pods with a Ready condition.
	ReadyReplicas int32 `json:"readyReplicas"`

	// AvailableReplicas is the number of pods that have been ready for at
	// least the rolling update's minReadySeconds.
	AvailableReplicas int32 `json:"availableReplicas"`

	// CurrentReplicas is the number of pods at currentRevision.
	CurrentReplicas int32 `json:"currentReplicas"`

	// UpdatedReplicas is the number of pods at updateRevision.
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// UpdatedReadyReplicas is the number of pods at updateRevision that are
	// ready.
	//
	// +optional
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas,omitempty"`

	// UpdatedAvailableReplicas is the number of pods at updateRevision that
	// are available.
	//
	// +optional
	UpdatedAvailableReplicas int32 `json:"updatedAvailableReplicas,omitempty"`

	// CurrentRevision is the revision of the pods not yet updated.
	//
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`

	// UpdateRevision is the revision generated from the current
	// spec.template.
	//
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`

	// CollisionCount counts hash collisions between revision names; the
	// controller uses it to make the next revision name unique.
	//
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// Conditions are the latest observations of the StatefulSet's state.
	//
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []appsv1.StatefulSetCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// LabelSelector is spec.selector in string form, for the scale
	// subresource (used by HorizontalPodAutoscalers).
	//
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`

	// VolumeClaims reports, per volume claim template, how many replicas'
	// PVCs already match it.
	//
	// +optional
	VolumeClaims []VolumeClaimStatus `json:"volumeClaims,omitempty"`
}

const (
	// FailedCreatePod is the StatefulSet condition type set when creating a
	// pod failed.
	FailedCreatePod appsv1.StatefulSetConditionType = "FailedCreatePod"
	// FailedUpdatePod is the StatefulSet condition type set when updating a
	// pod failed.
	FailedUpdatePod appsv1.StatefulSetConditionType = "FailedUpdatePod"
)

// StatefulSet (Advanced StatefulSet) runs pods with stable identities and
// storage, like the upstream StatefulSet, and adds in-place updates,
// maxUnavailable for parallel updates, update by priority, pausing,
// reserved ordinals and lifecycle hooks. Served at v1beta1 (stored) and
// v1alpha1 with the same schema.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=sts;asts,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:printcolumn:name="DESIRED",type="integer",JSONPath=".spec.replicas",description="Desired number of pods."
// +kubebuilder:printcolumn:name="CURRENT",type="integer",JSONPath=".status.replicas",description="All pods of the StatefulSet."
// +kubebuilder:printcolumn:name="UPDATED",type="integer",JSONPath=".status.updatedReplicas",description="Pods at the update revision."
// +kubebuilder:printcolumn:name="READY",type="integer",JSONPath=".status.readyReplicas",description="Pods that are ready."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the StatefulSet was created."
// +kubebuilder:printcolumn:name="CONTAINERS",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].name",description="Container names of the pod template."
// +kubebuilder:printcolumn:name="IMAGES",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].image",description="Container images of the pod template."
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(self.spec) || self.spec.selector == oldSelf.spec.selector",message="spec.selector: cannot be changed after creation"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(self.spec) || (has(self.spec.serviceName) ? self.spec.serviceName : \"\") == (has(oldSelf.spec.serviceName) ? oldSelf.spec.serviceName : \"\")",message="spec.serviceName: cannot be changed after creation"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(self.spec) || (has(self.spec.podManagementPolicy) ? self.spec.podManagementPolicy : 'OrderedReady') == (has(oldSelf.spec.podManagementPolicy) ? oldSelf.spec.podManagementPolicy : 'OrderedReady')",message="spec.podManagementPolicy: cannot be changed after creation"
type StatefulSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the StatefulSet.
	Spec StatefulSetSpec `json:"spec,omitempty"`
	// Status is the observed state of the StatefulSet, written by the
	// controller.
	Status StatefulSetStatus `json:"status,omitempty"`
}

// StatefulSetList is a list of Advanced StatefulSets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type StatefulSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the StatefulSets.
	Items []StatefulSet `json:"items"`
}
