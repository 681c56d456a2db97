package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodProbeMarkerSpec is the desired state of a PodProbeMarker: which pods to
// probe, and what to probe in them.
type PodProbeMarkerSpec struct {
	// Selector picks the pods, in the PodProbeMarker's namespace, whose
	// containers are probed. It must not be empty, and it cannot be changed
	// after creation.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector: must contain at least one matchLabels or matchExpressions entry"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.selector: is immutable; delete the PodProbeMarker and create a new one to select other pods"
	Selector *metav1.LabelSelector `json:"selector"`

	// Probes are the custom probes run against each selected pod, at least
	// one, each name once. The result of a probe is written to the pod as a
	// condition (podConditionType) and/or as labels and annotations
	// (markerPolicy).
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge
	Probes []PodContainerProbe `json:"probes" patchStrategy:"merge" patchMergeKey:"name"`
}

// PodContainerProbe is one custom probe of one container, and what to do
// with its result. At least one of podConditionType and markerPolicy must
// be set.
//
// +kubebuilder:validation:XValidation:rule="(has(self.podConditionType) && size(self.podConditionType) > 0) || (has(self.markerPolicy) && size(self.markerPolicy) > 0)",message="spec.probes[*]: set podConditionType, markerPolicy or both; they cannot both be empty"
type PodContainerProbe struct {
	// Name of the probe, unique among the probes a pod receives, even across
	// containers and PodProbeMarkers. It must not contain '#' and must not
	// be a built-in pod condition name (PodScheduled, Initialized, Ready,
	// ContainersReady, KruisePodReady, InPlaceUpdateReady).
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!self.contains('#')",message="spec.probes[*].name: must not contain '#'"
	// +kubebuilder:validation:XValidation:rule="!(self in ['PodScheduled', 'Initialized', 'Ready', 'ContainersReady', 'KruisePodReady', 'InPlaceUpdateReady'])",message="spec.probes[*].name: must not be a built-in pod condition (PodScheduled, Initialized, Ready, ContainersReady, KruisePodReady, InPlaceUpdateReady)"
	Name string `json:"name"`

	// ContainerName is the container of the pod the probe runs against.
	//
	// +kubebuilder:validation:MinLength=1
	ContainerName string `json:"containerName"`

	// Probe is the check to run: exactly one of exec, tcpSocket or httpGet,
	// plus timing. No defaults are applied: unset or 0 timing fields
	// (initialDelaySeconds, timeoutSeconds, periodSeconds,
	// successThreshold, failureThreshold) are treated as 1 by the node
	// agent.
	Probe ContainerProbeSpec `json:"probe"`

	// MarkerPolicy sets labels and annotations on the pod according to the
	// probe's result: the entry whose state matches the result is applied
	// and the keys of the other entry are removed. At most one entry per
	// state.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=2
	// +listType=map
	// +listMapKey=state
	// +patchMergeKey=state
	// +patchStrategy=merge
	MarkerPolicy []ProbeMarkerPolicy `json:"markerPolicy,omitempty" patchStrategy:"merge" patchMergeKey:"state"`

	// PodConditionType, when set, is the type of the pod condition that
	// records the probe's result: status True when the probe succeeds,
	// False otherwise, with the probe's output as message. It must be a
	// valid label name, for example "game.example.com/idle".
	//
	// +optional
	PodConditionType string `json:"podConditionType,omitempty"`
}

// ContainerProbeSpec is a Kubernetes container probe (the same fields as a
// container's readinessProbe).
type ContainerProbeSpec struct {
	corev1.Probe `json:",inline"`
}

// ProbeMarkerPolicy is the labels and annotations put on a pod while a probe
// is in one state.
//
// +kubebuilder:validation:XValidation:rule="(has(self.labels) && size(self.labels) > 0) || (has(self.annotations) && size(self.annotations) > 0)",message="spec.probes[*].markerPolicy[*]: set at least one label or annotation"
type ProbeMarkerPolicy struct {
	// State is the probe result this entry applies to: Succeeded or
	// Failed.
	//
	// +kubebuilder:validation:Enum=Succeeded;Failed
	State ProbeState `json:"state"`

	// Labels set on the pod while the probe is in this state.
	//
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations set on the pod while the probe is in this state.
	//
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ProbeState is the result of a custom probe.
type ProbeState string

const (
	// ProbeSucceeded means the last probe succeeded.
	ProbeSucceeded ProbeState = "Succeeded"
	// ProbeFailed means the last probe failed, or the container is not
	// running.
	ProbeFailed ProbeState = "Failed"
	// ProbeUnknown means there is no result yet, for example right after
	// the container (re)started. It is reported on pods as a False
	// condition, and it is not a valid markerPolicy state.
	ProbeUnknown ProbeState = "Unknown"
)

// PodProbeMarkerStatus is the observed state of a PodProbeMarker.
type PodProbeMarkerStatus struct {
	// ObservedGeneration is the metadata.generation of the PodProbeMarker
	// the controller last acted on.
	ObservedGeneration int64 `json:"observedGeneration"`

	// MatchedPods is the number of pods the selector currently matches.
	//
	// +optional
	MatchedPods int64 `json:"matchedPods,omitempty"`
}

// PodProbeMarker runs custom probes (exec, tcp or http) against containers
// of the selected pods, from the pods' nodes, and records the results on the
// pods as conditions, labels or annotations.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MATCHED",type="integer",JSONPath=".status.matchedPods",description="Number of pods the selector matches."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the PodProbeMarker was created."
type PodProbeMarker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the PodProbeMarker.
	Spec PodProbeMarkerSpec `json:"spec,omitempty"`
	// Status is the observed state of the PodProbeMarker, written by the
	// controller.
	Status PodProbeMarkerStatus `json:"status,omitempty"`
}

// PodProbeMarkerList is a list of PodProbeMarkers.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PodProbeMarkerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the PodProbeMarkers.
	Items []PodProbeMarker `json:"items"`
}
