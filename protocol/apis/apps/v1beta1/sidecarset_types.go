package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
)

// SidecarSetCustomVersionLabel is the label of the ControllerRevision
// recorded for each SidecarSet revision that carries spec.customVersion,
// so that spec.injectionStrategy.revision.customVersion can pick a
// revision by it. At v1alpha1 the SidecarSet itself carries this label.
const SidecarSetCustomVersionLabel = "apps.kruise.io/sidecarset-custom-version"

// SidecarSetSpec is the desired state of a SidecarSet.
//
// +kubebuilder:validation:XValidation:rule="(has(self.containers) && size(self.containers) > 0) || (has(self.initContainers) && size(self.initContainers) > 0)",message="spec: define at least one entry in containers or initContainers"
type SidecarSetSpec struct {
	// Selector picks, by their labels, the pods the sidecars are injected
	// into and kept up to date in. It must not be empty.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector: set at least one matchLabels entry or matchExpressions term; an empty selector is not allowed"
	Selector *metav1.LabelSelector `json:"selector"`

	// NamespaceSelector, when set, limits the SidecarSet to pods in the
	// namespaces whose labels it matches. To target one namespace, match
	// its kubernetes.io/metadata.name label. When unset, pods in every
	// namespace are matched.
	//
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// InitContainers are added to the init containers of matching pods when
	// they are created, in ascending order of name. Pods that already exist
	// are not changed. An init container with restartPolicy Always is a
	// native sidecar.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=100
	InitContainers []SidecarContainer `json:"initContainers,omitempty"`

	// Containers are the sidecar containers added to matching pods when they
	// are created, and updated in place in running pods by updateStrategy.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Containers []SidecarContainer `json:"containers,omitempty"`

	// Volumes are added to matching pods so that the sidecar containers can
	// mount them. Each item is a standard pod volume; the admission webhook
	// validates them.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// UpdateStrategy controls how the sidecar containers of pods that already
	// run them are updated when this SidecarSet changes.
	//
	// +optional
	// +kubebuilder:default={}
	UpdateStrategy SidecarSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// InjectionStrategy controls how sidecars are injected into newly
	// created pods.
	//
	// +optional
	InjectionStrategy SidecarSetInjectionStrategy `json:"injectionStrategy,omitempty"`

	// ImagePullSecrets are added to matching pods so that the sidecar images
	// can be pulled. The Secrets must exist in each pod's namespace.
	//
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// RevisionHistoryLimit is how many old revisions of this SidecarSet are
	// kept as ControllerRevisions. Defaults to 10.
	//
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// PatchPodMetadata lists annotations written to matching pods on
	// injection and, depending on patchPolicy, kept up to date afterwards.
	//
	// +optional
	PatchPodMetadata []SidecarSetPatchPodMetadata `json:"patchPodMetadata,omitempty"`

	// CustomVersion is a name of your choosing for the current revision of
	// this SidecarSet, for example "v2". It is copied to the label
	// apps.kruise.io/sidecarset-custom-version of the ControllerRevision
	// recorded for the revision, so that
	// injectionStrategy.revision.customVersion can name it later. It must
	// be a valid label value. Empty by default.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	CustomVersion string `json:"customVersion,omitempty"`
}

// SidecarSetPatchPodMetadata is a set of annotations to write to matching
// pods and how to treat annotations the pod already has.
type SidecarSetPatchPodMetadata struct {
	// Annotations to set on matching pods. At least one is required.
	//
	// +kubebuilder:validation:MinProperties=1
	Annotations map[string]string `json:"annotations"`

	// PatchPolicy decides what happens when a pod already carries one of the
	// annotations: Retain (default) keeps the pod's value and only writes
	// the annotations on injection; Overwrite replaces the pod's value, on
	// injection and on in-place updates; MergePatchJson merges the value, a
	// JSON object, into the pod's value as a JSON merge patch.
	//
	// +optional
	// +kubebuilder:default=Retain
	PatchPolicy SidecarSetPatchPolicyType `json:"patchPolicy,omitempty"`
}

// SidecarSetPatchPolicyType is how patchPodMetadata treats annotations a pod
// already has: Retain, Overwrite or MergePatchJson.
//
// +kubebuilder:validation:Enum=Retain;Overwrite;MergePatchJson
type SidecarSetPatchPolicyType string

const (
	// SidecarSetRetainPatchPolicy keeps the pod's existing value and patches
	// only on injection.
	SidecarSetRetainPatchPolicy SidecarSetPatchPolicyType = "Retain"
	// SidecarSetOverwritePatchPolicy replaces the pod's value, on injection
	// and on in-place updates.
	SidecarSetOverwritePatchPolicy SidecarSetPatchPolicyType = "Overwrite"
	// SidecarSetMergePatchJsonPatchPolicy merges the JSON value into the
	// pod's value as a JSON merge patch.
	SidecarSetMergePatchJsonPatchPolicy SidecarSetPatchPolicyType = "MergePatchJson"
)

// SidecarContainer is a container to inject into matching pods: all the
// fields of a pod container plus the injection and upgrade settings below.
type SidecarContainer struct {
	// Container holds the standard pod container fields (name, image,
	// command, env, volumeMounts, ...); the admission webhook validates
	// them.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	corev1.Container `json:",inline"`

	// PodInjectPolicy decides where the container goes in
	// pod.spec.containers: BeforeAppContainer (filled in by the webhook
	// when empty) puts it before the pod's own containers,
	// AfterAppContainer after them. Has no effect on initContainers.
	//
	// +optional
	PodInjectPolicy PodInjectPolicyType `json:"podInjectPolicy,omitempty"`

	// UpgradeStrategy decides how the container is upgraded in running pods.
	//
	// +optional
	// +kubebuilder:default={}
	UpgradeStrategy SidecarContainerUpgradeStrategy `json:"upgradeStrategy,omitempty"`

	// ShareVolumePolicy, when enabled, also mounts into this container every
	// volumeMount of the pod's other (non-sidecar) containers. Disabled by
	// default.
	//
	// +optional
	// +kubebuilder:default={}
	ShareVolumePolicy ShareVolumePolicy `json:"shareVolumePolicy,omitempty"`

	// ShareVolumeDevicePolicy, when enabled, also adds to this container
	// every volumeDevice of the pod's other (non-sidecar) containers.
	// Disabled when unset.
	//
	// +optional
	ShareVolumeDevicePolicy *ShareVolumePolicy `json:"shareVolumeDevicePolicy,omitempty"`

	// TransferEnv copies environment variables from another container of
	// the pod into this container at injection.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=100
	TransferEnv []TransferEnvVar `json:"transferEnv,omitempty"`

	// ResourcesPolicy computes this container's resources at injection from
	// the resources of other containers of the pod. Cannot be combined with
	// the container's own resources. Unset by default.
	//
	// +optional
	ResourcesPolicy *ResourcesPolicy `json:"resourcesPolicy,omitempty"`
}

// ShareVolumePolicy switches volume sharing with the pod's other containers
// on or off.
type ShareVolumePolicy struct {
	// Type is enabled or disabled. Defaults to disabled.
	//
	// +optional
	// +kubebuilder:default=disabled
	Type ShareVolumePolicyType `json:"type,omitempty"`
}

// PodInjectPolicyType is where a sidecar container is placed among the pod's
// containers: BeforeAppContainer or AfterAppContainer.
//
// +kubebuilder:validation:Enum=BeforeAppContainer;AfterAppContainer
type PodInjectPolicyType string

const (
	// BeforeAppContainerType places the sidecar before the pod's containers.
	BeforeAppContainerType PodInjectPolicyType = "BeforeAppContainer"
	// AfterAppContainerType places the sidecar after the pod's containers.
	AfterAppContainerType PodInjectPolicyType = "AfterAppContainer"
)

// ShareVolumePolicyType switches sharing on (enabled) or off (disabled).
//
// +kubebuilder:validation:Enum=enabled;disabled
type ShareVolumePolicyType string

const (
	// ShareVolumePolicyEnabled turns sharing on.
	ShareVolumePolicyEnabled ShareVolumePolicyType = "enabled"
	// ShareVolumePolicyDisabled turns sharing off.
	ShareVolumePolicyDisabled ShareVolumePolicyType = "disabled"
)

// TransferEnvVar copies environment variables from one container of the pod
// into the sidecar. Name the source container with sourceContainerName or
// sourceContainerNameFrom (which wins when both are set), and the variables
// with envName and/or envNames.
//
// +kubebuilder:validation:XValidation:rule="(has(self.sourceContainerName) && size(self.sourceContainerName) > 0) || (has(self.sourceContainerNameFrom) && has(self.sourceContainerNameFrom.fieldRef))",message="spec.containers[].transferEnv[]: set sourceContainerName or sourceContainerNameFrom.fieldRef"
// +kubebuilder:validation:XValidation:rule="(has(self.envName) && size(self.envName) > 0) || (has(self.envNames) && size(self.envNames) > 0)",message="spec.containers[].transferEnv[]: set envName or envNames"
type TransferEnvVar struct {
	// SourceContainerName is the name of the pod container to copy from.
	//
	// +optional
	SourceContainerName string `json:"sourceContainerName,omitempty"`

	// SourceContainerNameFrom reads the name of the container to copy from
	// out of the pod's own metadata. Takes precedence over
	// sourceContainerName.
	//
	// +optional
	SourceContainerNameFrom *SourceContainerNameSource `json:"sourceContainerNameFrom,omitempty"`

	// EnvName is the name of one variable to copy.
	//
	// +optional
	EnvName string `json:"envName,omitempty"`

	// EnvNames are the names of several variables to copy; combined with
	// envName when both are set.
	//
	// +optional
	EnvNames []string `json:"envNames,omitempty"`
}

// SourceContainerNameSource points at a pod field holding a container name.
type SourceContainerNameSource struct {
	// FieldRef selects the pod field: metadata.name,
	// metadata.labels['<KEY>'] or metadata.annotations['<KEY>'].
	//
	// +optional
	FieldRef *corev1.ObjectFieldSelector `json:"fieldRef,omitempty"`
}

// SidecarContainerUpgradeType is how a sidecar container is upgraded in
// running pods: ColdUpgrade or HotUpgrade.
//
// +kubebuilder:validation:Enum=ColdUpgrade;HotUpgrade
type SidecarContainerUpgradeType string

const (
	// SidecarContainerColdUpgrade restarts the container with the new image.
	SidecarContainerColdUpgrade SidecarContainerUpgradeType = "ColdUpgrade"
	// SidecarContainerHotUpgrade runs the container twice and switches
	// between the two copies, so the sidecar keeps serving during upgrades.
	SidecarContainerHotUpgrade SidecarContainerUpgradeType = "HotUpgrade"
)

// SidecarContainerUpgradeStrategy is how a sidecar container is upgraded in
// running pods.
//
// +kubebuilder:validation:XValidation:rule="!has(self.upgradeType) || self.upgradeType != 'HotUpgrade' || (has(self.hotUpgradeEmptyImage) && size(self.hotUpgradeEmptyImage) > 0)",message="spec.containers[].upgradeStrategy: hotUpgradeEmptyImage is required when upgradeType is HotUpgrade"
type SidecarContainerUpgradeStrategy struct {
	// UpgradeType is ColdUpgrade (default), which restarts the container
	// with its new image, or HotUpgrade, meant for stateful sidecars such as
	// proxies: two copies of the container (<name>-1 and <name>-2) are
	// injected, one running the real image and the other
	// hotUpgradeEmptyImage, and an upgrade starts the new image in the idle
	// copy before idling the old one; the new copy's postStart hook has to
	// migrate the state. Cannot be changed for an existing container name.
	//
	// +optional
	// +kubebuilder:default=ColdUpgrade
	UpgradeType SidecarContainerUpgradeType `json:"upgradeType,omitempty"`

	// HotUpgradeEmptyImage is the image the idle copy runs during a
	// HotUpgrade. It must accept the container's command, probes and hooks
	// but do no work. Required when upgradeType is HotUpgrade.
	//
	// +optional
	HotUpgradeEmptyImage string `json:"hotUpgradeEmptyImage,omitempty"`
}

// ResourcesPolicy computes a sidecar's resources at injection from the
// resources of selected containers of the pod.
type ResourcesPolicy struct {
	// TargetContainersMode is how the resources of the selected containers
	// are combined into the cpu and memory variables of resourcesExpr: sum
	// adds them up, max takes the largest.
	TargetContainersMode TargetContainersModeType `json:"targetContainersMode"`

	// TargetContainersNameRegex is a regular expression; the pod's
	// containers (plain and native sidecar, but not SidecarSet sidecars)
	// whose names match it are selected. Pod creation is refused when no
	// container matches.
	//
	// +kubebuilder:validation:MinLength=1
	TargetContainersNameRegex string `json:"targetContainersNameRegex"`

	// ResourcesExpr gives the expressions computing the sidecar's limits and
	// requests.
	ResourcesExpr ResourcesExpr `json:"resourcesExpr"`
}

// TargetContainersModeType combines the resources of the selected
// containers: sum or max.
//
// +kubebuilder:validation:Enum=sum;max
type TargetContainersModeType string

const (
	// TargetContainersModeSum adds the selected containers' resources.
	TargetContainersModeSum TargetContainersModeType = "sum"
	// TargetContainersModeMax takes the largest of the selected containers'
	// resources.
	TargetContainersModeMax TargetContainersModeType = "max"
)

// ResourcesExpr holds the expressions computing a sidecar's limits and
// requests. Set at least one of limits and requests.
//
// +kubebuilder:validation:XValidation:rule="has(self.limits) || has(self.requests)",message="spec.containers[].resourcesPolicy.resourcesExpr: set limits, requests or both"
type ResourcesExpr struct {
	// Limits computes the sidecar's resource limits. A limit is left unset
	// when a selected container has no limit for that resource.
	//
	// +optional
	Limits *ResourceExprLimits `json:"limits,omitempty"`

	// Requests computes the sidecar's resource requests. A selected
	// container without a request counts as zero.
	//
	// +optional
	Requests *ResourceExprRequests `json:"requests,omitempty"`
}

// ResourceExprLimits holds the expressions for the sidecar's limits.
type ResourceExprLimits struct {
	// CPU is an expression for the cpu limit, for example
	// "max(cpu*50%, 50m)". It may use the variable cpu (the combined cpu of
	// the selected containers), numbers, percentages, quantities such as
	// 50m, + - * /, parentheses, max() and min().
	//
	// +optional
	CPU string `json:"cpu,omitempty"`

	// Memory is an expression for the memory limit, for example
	// "max(memory*50%, 100Mi)", written like cpu with the variable memory.
	//
	// +optional
	Memory string `json:"memory,omitempty"`
}

// ResourceExprRequests holds the expressions for the sidecar's requests.
type ResourceExprRequests struct {
	// CPU is an expression for the cpu request, written as for limits.
	//
	// +optional
	CPU string `json:"cpu,omitempty"`

	// Memory is an expression for the memory request, written as for
	// limits.
	//
	// +optional
	Memory string `json:"memory,omitempty"`
}

// SidecarSetInjectionStrategy controls injection into newly created pods.
type SidecarSetInjectionStrategy struct {
	// Paused stops injection into newly created pods; sidecars already
	// injected keep running and are still updated. Defaults to false.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Revision injects a recorded earlier revision of this SidecarSet instead
	// of the current one, for example to keep new pods on a stable version
	// while a canary update is in progress. Unset injects the current one.
	//
	// +optional
	Revision *SidecarSetInjectRevision `json:"revision,omitempty"`
}

// SidecarSetInjectRevision names a recorded SidecarSet revision to inject.
// Set revisionName or customVersion.
//
// +kubebuilder:validation:XValidation:rule="has(self.revisionName) || has(self.customVersion)",message="spec.injectionStrategy.revision: set revisionName or customVersion"
type SidecarSetInjectRevision struct {
	// CustomVersion selects the revision recorded while spec.customVersion
	// had this value (its ControllerRevision carries it in the label
	// apps.kruise.io/sidecarset-custom-version).
	//
	// +optional
	CustomVersion *string `json:"customVersion,omitempty"`

	// RevisionName is the name of the ControllerRevision to inject.
	//
	// +optional
	RevisionName *string `json:"revisionName,omitempty"`

	// Policy decides which new pods get the named revision: Always (default)
	// injects it into every new pod not selected by
	// updateStrategy.selector; Partial injects it into the share of new pods
	// that updateStrategy.partition keeps on the old revision and the latest
	// revision into the rest.
	//
	// +optional
	// +kubebuilder:default=Always
	Policy SidecarSetInjectRevisionPolicy `json:"policy,omitempty"`
}

// SidecarSetInjectRevisionPolicy is Always or Partial.
//
// +kubebuilder:validation:Enum=Always;Partial
type SidecarSetInjectRevisionPolicy string

const (
	// AlwaysSidecarSetInjectRevisionPolicy injects the named revision into
	// every new pod not selected by updateStrategy.selector.
	AlwaysSidecarSetInjectRevisionPolicy SidecarSetInjectRevisionPolicy = "Always"
	// PartialSidecarSetInjectRevisionPolicy injects the named revision into
	// the share of new pods given by updateStrategy.partition.
	PartialSidecarSetInjectRevisionPolicy SidecarSetInjectRevisionPolicy = "Partial"
)

// SidecarSetUpdateStrategy controls how the sidecar containers of running
// pods are updated when the SidecarSet changes. Only image changes are
// applied in place; other changes reach new pods only.
//
// +kubebuilder:validation:XValidation:rule="(has(self.type) && self.type == 'NotUpdate') || !has(self.selector) || !has(self.partition) || (type(self.partition) == int && self.partition == 0)",message="spec.updateStrategy: partition and selector cannot be used together; leave partition unset or 0 when selector is set"
type SidecarSetUpdateStrategy struct {
	// Type is RollingUpdate (default), which updates the sidecars of running
	// pods, or NotUpdate, which only injects into new pods.
	//
	// +optional
	// +kubebuilder:default=RollingUpdate
	Type SidecarSetUpdateStrategyType `json:"type,omitempty"`

	// Paused stops updating running pods; pods already updated stay updated.
	// Defaults to false.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Selector, when set, limits the update to the matching pods, for
	// example to canary a new version. Cannot be combined with a non-zero
	// partition. It also decides which new pods get the revision named in
	// injectionStrategy.revision.
	//
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Partition is how many matching pods (an integer, or a percentage such
	// as "90%") stay on the old revision; the others are updated. Defaults
	// to 0. Cannot be combined with selector.
	//
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.partition: use a non-negative integer or a percentage from 0% to 100%"
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// MaxUnavailable is how many matching pods (an integer, or a percentage
	// of matching pods rounded up, such as "10%") may be unavailable at once
	// during the update. Defaults to 1.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.maxUnavailable: use a non-negative integer or a percentage from 0% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// PriorityStrategy orders the pods to update by their labels. Unset
	// means no particular order.
	//
	// +optional
	PriorityStrategy *pub.UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`

	// ScatterStrategy spreads pods carrying the given labels over the whole
	// update instead of updating them together. Applied after
	// priorityStrategy; one term is easiest to reason about.
	//
	// +optional
	ScatterStrategy pub.UpdateScatterStrategy `json:"scatterStrategy,omitempty"`
}

// SidecarSetUpdateStrategyType is RollingUpdate or NotUpdate.
//
// +kubebuilder:validation:Enum=RollingUpdate;NotUpdate
type SidecarSetUpdateStrategyType string

const (
	// NotUpdateSidecarSetStrategyType only injects into new pods.
	NotUpdateSidecarSetStrategyType SidecarSetUpdateStrategyType = "NotUpdate"
	// RollingUpdateSidecarSetStrategyType also updates running pods.
	RollingUpdateSidecarSetStrategyType SidecarSetUpdateStrategyType = "RollingUpdate"
)

// SidecarSetStatus is the observed state of a SidecarSet.
type SidecarSetStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MatchedPods is the number of pods matched by the SidecarSet and
	// created after it.
	MatchedPods int32 `json:"matchedPods"`

	// UpdatedPods is the number of matched pods running the latest sidecar
	// containers.
	UpdatedPods int32 `json:"updatedPods"`

	// ReadyPods is the number of matched pods that are ready.
	ReadyPods int32 `json:"readyPods"`

	// UpdatedReadyPods is the number of matched pods that are both updated
	// and ready.
	//
	// +optional
	UpdatedReadyPods int32 `json:"updatedReadyPods,omitempty"`

	// LatestRevision is the name of the ControllerRevision recording the
	// current spec.
	//
	// +optional
	LatestRevision string `json:"latestRevision,omitempty"`

	// CollisionCount counts hash collisions between revision names; it is
	// mixed into the name of the next ControllerRevision to avoid them.
	//
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`
}

// SidecarSet injects sidecar containers into the pods its selector matches
// when they are created, and updates those sidecars in place afterwards.
// It is cluster-scoped.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MATCHED",type="integer",JSONPath=".status.matchedPods",description="Number of pods the SidecarSet matches."
// +kubebuilder:printcolumn:name="UPDATED",type="integer",JSONPath=".status.updatedPods",description="Number of matched pods running the latest sidecars."
// +kubebuilder:printcolumn:name="READY",type="integer",JSONPath=".status.readyPods",description="Number of matched pods that are ready."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the SidecarSet was created."
type SidecarSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state: which pods, which sidecars, how to update.
	Spec SidecarSetSpec `json:"spec"`

	// Status is the observed state, written by the controller.
	//
	// +optional
	Status SidecarSetStatus `json:"status,omitempty"`
}

// SidecarSetList is a list of SidecarSets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type SidecarSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the SidecarSets.
	Items []SidecarSet `json:"items"`
}
