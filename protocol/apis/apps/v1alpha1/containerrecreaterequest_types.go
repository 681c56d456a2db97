package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContainerRecreateRequestSpec is the desired state of a
// ContainerRecreateRequest: which containers of which pod to recreate, and
// how. The whole spec is immutable once created.
type ContainerRecreateRequestSpec struct {
	// PodName is the pod, in the request's namespace, whose containers are
	// recreated. The pod must be running on a node. Required.
	//
	// +kubebuilder:validation:MinLength=1
	PodName string `json:"podName"`

	// Containers lists the containers to recreate, at least one, each name
	// once. Each must be a container of the pod that has been started.
	//
	// +kubebuilder:validation:MinItems=1
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge
	Containers []ContainerRecreateRequestContainer `json:"containers" patchStrategy:"merge" patchMergeKey:"name"`

	// Strategy tunes how the containers are recreated. Defaults to {}, so
	// that its own defaults (failurePolicy Fail) always show.
	//
	// +optional
	// +kubebuilder:default={}
	Strategy *ContainerRecreateRequestStrategy `json:"strategy,omitempty"`

	// ActiveDeadlineSeconds is how long, in seconds from creation, the
	// request may run; after that it is marked Completed whatever the state
	// of its containers. At least 3. Unset means no deadline.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 3",message="spec.activeDeadlineSeconds: must be at least 3 seconds"
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the request this many seconds after it
	// completes (0 deletes it right away). Unset means it is kept.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ContainerRecreateRequestContainer names one container to recreate. Apart
// from name, its fields are filled in by the system when the request is
// created and must not be set by users.
type ContainerRecreateRequestContainer struct {
	// Name of the container in the pod's spec.containers.
	//
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// PreStop is copied from the container's lifecycle.preStop when the
	// request is created, and run before the container is stopped.
	// Read-only: set by the system.
	//
	// +optional
	PreStop *ProbeHandler `json:"preStop,omitempty"`

	// Ports is copied from the container's ports when preStop is an httpGet
	// hook, to resolve named ports. Read-only: set by the system.
	//
	// +optional
	// +listType=atomic
	Ports []corev1.ContainerPort `json:"ports,omitempty"`

	// StatusContext is the container's ID and restart count when the
	// request was created; a different ID or a higher count later shows
	// that the container has been recreated. Read-only: set by the system.
	//
	// +optional
	StatusContext *ContainerRecreateRequestContainerContext `json:"statusContext,omitempty"`
}

// ProbeHandler is an action run in or against a container: one of exec,
// httpGet or tcpSocket.
type ProbeHandler struct {
	// Exec runs a command inside the container.
	//
	// +optional
	Exec *corev1.ExecAction `json:"exec,omitempty"`

	// HTTPGet sends an HTTP GET request to the container.
	//
	// +optional
	HTTPGet *corev1.HTTPGetAction `json:"httpGet,omitempty"`

	// TCPSocket opens a TCP connection to the container.
	//
	// +optional
	TCPSocket *corev1.TCPSocketAction `json:"tcpSocket,omitempty"`
}

// ContainerRecreateRequestContainerContext is the identity of a container
// instance at the time the request was created.
type ContainerRecreateRequestContainerContext struct {
	// ContainerID of the instance, as in the pod status
	// ("<runtime>://<id>").
	ContainerID string `json:"containerID"`

	// RestartCount of the container, as in the pod status.
	RestartCount int32 `json:"restartCount"`
}

// ContainerRecreateRequestStrategy tunes how containers are recreated.
type ContainerRecreateRequestStrategy struct {
	// FailurePolicy is Fail (default: the request completes as soon as one
	// container fails to be recreated) or Ignore (carry on with the other
	// containers).
	//
	// +optional
	// +kubebuilder:default=Fail
	FailurePolicy ContainerRecreateRequestFailurePolicyType `json:"failurePolicy,omitempty"`

	// OrderedRecreate, when true, recreates the containers one after
	// another in list order, each only after the previous one is back.
	// Default false.
	//
	// +optional
	OrderedRecreate bool `json:"orderedRecreate,omitempty"`

	// ForceRecreate, when true, stops the container even if it is still
	// starting up from an earlier restart. Default false.
	//
	// +optional
	ForceRecreate bool `json:"forceRecreate,omitempty"`

	// TerminationGracePeriodSeconds is how long, in seconds, a container
	// may take to stop gracefully before it is killed; 0 kills it at once.
	// Must be 0 or more. Unset means the pod's
	// terminationGracePeriodSeconds.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// UnreadyGracePeriodSeconds, when set, first marks the pod not ready
	// (through its KruisePodReady readiness gate) and waits this many
	// seconds before stopping the containers, so traffic can drain. Must be
	// 0 or more.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	UnreadyGracePeriodSeconds *int64 `json:"unreadyGracePeriodSeconds,omitempty"`

	// MinStartedSeconds is how long, in seconds, a recreated container must
	// have been running and ready before it counts as Succeeded. Must be 0
	// or more. Default 0.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinStartedSeconds int32 `json:"minStartedSeconds,omitempty"`
}

// ContainerRecreateRequestFailurePolicyType is Fail or Ignore.
//
// +kubebuilder:validation:Enum=Fail;Ignore
type ContainerRecreateRequestFailurePolicyType string

const (
	// ContainerRecreateRequestFailurePolicyFail completes the request as
	// soon as one container fails to be recreated. This is the default.
	ContainerRecreateRequestFailurePolicyFail ContainerRecreateRequestFailurePolicyType = "Fail"
	// ContainerRecreateRequestFailurePolicyIgnore carries on with the
	// remaining containers when one fails.
	ContainerRecreateRequestFailurePolicyIgnore ContainerRecreateRequestFailurePolicyType = "Ignore"
)

// ContainerRecreateRequestStatus is the observed state of a
// ContainerRecreateRequest.
type ContainerRecreateRequestStatus struct {
	// Phase of the request: Pending, Recreating or Completed. Empty until a
	// node agent has picked the request up.
	Phase ContainerRecreateRequestPhase `json:"phase"`

	// CompletionTime is when the request completed (RFC 3339, UTC).
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Message explains the phase, for example why the request completed
	// early.
	//
	// +optional
	Message string `json:"message,omitempty"`

	// ContainerRecreateStates is the recreation state of each container.
	//
	// +optional
	// +listType=atomic
	ContainerRecreateStates []ContainerRecreateRequestContainerRecreateState `json:"containerRecreateStates,omitempty"`
}

// ContainerRecreateRequestPhase is the phase of a request (Pending,
// Recreating, Completed) or of one of its containers (Pending, Recreating,
// Succeeded, Failed).
type ContainerRecreateRequestPhase string

const (
	// ContainerRecreateRequestPending means the request, or the container,
	// is waiting to be handled.
	ContainerRecreateRequestPending ContainerRecreateRequestPhase = "Pending"
	// ContainerRecreateRequestRecreating means containers are being, or the
	// container is being, stopped and restarted.
	ContainerRecreateRequestRecreating ContainerRecreateRequestPhase = "Recreating"
	// ContainerRecreateRequestSucceeded means the container was recreated
	// and is running and ready. Used for containers only.
	ContainerRecreateRequestSucceeded ContainerRecreateRequestPhase = "Succeeded"
	// ContainerRecreateRequestFailed means the container could not be
	// recreated. Used for containers only.
	ContainerRecreateRequestFailed ContainerRecreateRequestPhase = "Failed"
	// ContainerRecreateRequestCompleted means the request is finished;
	// the per-container states say how each container ended. Used for the
	// request only.
	ContainerRecreateRequestCompleted ContainerRecreateRequestPhase = "Completed"
)

// ContainerRecreateRequestContainerRecreateState is the recreation state
// of one container.
type ContainerRecreateRequestContainerRecreateState struct {
	// Name of the container.
	Name string `json:"name"`

	// Phase of the container: Pending, Recreating, Succeeded or Failed.
	Phase ContainerRecreateRequestPhase `json:"phase"`

	// Message explains the phase, for example the error that made the
	// recreation fail.
	//
	// +optional
	Message string `json:"message,omitempty"`

	// IsKilled is true once the node agent has stopped the old container
	// instance.
	//
	// +optional
	IsKilled bool `json:"isKilled,omitempty"`
}

// ContainerRecreateRequestSyncContainerStatus is one entry of the JSON list
// kept in the crr.apps.kruise.io/sync-container-statuses annotation. It is
// not part of the resource's schema.
type ContainerRecreateRequestSyncContainerStatus struct {
	// Name of the container.
	Name string `json:"name"`
	// Ready is true once kubelet reports the container ready.
	Ready bool `json:"ready"`
	// RestartCount of the container, as in the pod status.
	RestartCount int32 `json:"restartCount"`
	// ContainerID of the container, as in the pod status.
	ContainerID string `json:"containerID,omitempty"`
}

// ContainerRecreateRequest asks the node agent to stop and restart some
// containers of a running pod in place, without deleting the pod. Its spec
// cannot be changed after creation.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=crr,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="PHASE",type="string",JSONPath=".status.phase",description="Phase of the request."
// +kubebuilder:printcolumn:name="POD",type="string",JSONPath=".spec.podName",description="Pod whose containers are recreated."
// +kubebuilder:printcolumn:name="NODE",type="string",JSONPath=".metadata.labels.crr\\.apps\\.kruise\\.io/node-name",description="Node the pod runs on."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the request was created."
type ContainerRecreateRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the request. Immutable.
	//
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec: is immutable; delete the ContainerRecreateRequest and create a new one instead"
	Spec ContainerRecreateRequestSpec `json:"spec,omitempty"`
	// Status is the observed state of the request, written by the
	// controller and the node agent.
	Status ContainerRecreateRequestStatus `json:"status,omitempty"`
}

// ContainerRecreateRequestList is a list of ContainerRecreateRequests.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ContainerRecreateRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ContainerRecreateRequests.
	Items []ContainerRecreateRequest `json:"items"`
}
