package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ImagePullPolicy says whether a node pulls an image it already has.
//
// +kubebuilder:validation:Enum=Always;IfNotPresent
type ImagePullPolicy string

const (
	// PullAlways pulls the image even when the node already has it, so a
	// moved tag is refreshed.
	PullAlways ImagePullPolicy = "Always"
	// PullIfNotPresent pulls the image only when the node does not have
	// it. This is the default.
	PullIfNotPresent ImagePullPolicy = "IfNotPresent"
)

// ImagePullJobSpec is the desired state of an ImagePullJob: one image and
// how, where and for how long to pull it.
type ImagePullJobSpec struct {
	// Image is the image to pull, for example "nginx:1.25" or
	// "registry.example.com/team/app@sha256:...". A reference without a tag
	// or digest means the "latest" tag. Required.
	//
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	ImagePullJobTemplate `json:",inline"`
}

// ImagePullJobTemplate holds the settings an ImagePullJob and an
// ImageListPullJob share: which nodes pull, how fast, with which
// credentials, and when the job finishes.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.selector) && has(self.podSelector))",message="spec.podSelector: set either selector (nodes) or podSelector (nodes of matching pods), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.completionPolicy) || !has(self.completionPolicy.activeDeadlineSeconds) || self.completionPolicy.activeDeadlineSeconds >= (has(self.pullPolicy) && has(self.pullPolicy.timeoutSeconds) ? self.pullPolicy.timeoutSeconds : 600)",message="spec.completionPolicy.activeDeadlineSeconds: must be greater than pullPolicy.timeoutSeconds(default 600) or equal to it"
// +kubebuilder:validation:XValidation:rule="(has(self.pullSecrets) ? self.pullSecrets : []) == (has(oldSelf.pullSecrets) ? oldSelf.pullSecrets : [])",message="spec.pullSecrets: is immutable; create a new job to use other secrets"
type ImagePullJobTemplate struct {
	// PullSecrets names Secrets in the job's namespace (of type
	// kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg) holding
	// registry credentials for the pull. Cannot be changed after creation.
	//
	// +optional
	// +listType=atomic
	PullSecrets []string `json:"pullSecrets,omitempty"`

	// Selector picks the nodes that pull the image, either by name (names)
	// or by node labels (matchLabels/matchExpressions), not both. Unset
	// means every node. Cannot be combined with podSelector.
	//
	// +optional
	Selector *ImagePullJobNodeSelector `json:"selector,omitempty"`

	// PodSelector picks, by pod labels in the job's namespace, the pods
	// whose nodes pull the image: only nodes running an active, scheduled
	// matching pod take part. Cannot be combined with selector.
	//
	// +optional
	PodSelector *ImagePullJobPodSelector `json:"podSelector,omitempty"`

	// Parallelism is the maximum number of nodes pulling at the same time.
	// It must be a non-negative integer; percentages are not accepted.
	// Default 1; 0 pauses the job.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int && self >= 0",message="spec.parallelism: must be a non-negative integer; percentages are not accepted"
	Parallelism *intstr.IntOrString `json:"parallelism,omitempty"`

	// PullPolicy sets the timeout and the number of retries of each node's
	// pull. Defaults to timeoutSeconds 600 and backoffLimit 3.
	//
	// +optional
	// +kubebuilder:default={}
	PullPolicy *PullPolicy `json:"pullPolicy,omitempty"`

	// CompletionPolicy decides whether the job finishes after one round of
	// pulls (type Always, the default) or keeps pulling on matching nodes,
	// including new ones (type Never).
	CompletionPolicy CompletionPolicy `json:"completionPolicy"`

	// SandboxConfig is metadata passed to the container runtime with each
	// pull request (for example to tag registry traffic).
	//
	// +optional
	SandboxConfig *SandboxConfig `json:"sandboxConfig,omitempty"`

	// ImagePullPolicy is IfNotPresent (default: nodes that already have the
	// image report success without pulling) or Always (pull anyway).
	//
	// +optional
	// +kubebuilder:default=IfNotPresent
	ImagePullPolicy ImagePullPolicy `json:"imagePullPolicy,omitempty"`
}

// ImagePullJobPodSelector selects pods by label; the nodes those pods run on
// pull the image.
type ImagePullJobPodSelector struct {
	// LabelSelector matches pods in the job's namespace.
	//
	// +optional
	metav1.LabelSelector `json:",inline"`
}

// ImagePullJobNodeSelector selects nodes either by name or by label, not
// both.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.names) && (has(self.matchLabels) || has(self.matchExpressions)))",message="spec.selector: set either names or matchLabels/matchExpressions, not both"
type ImagePullJobNodeSelector struct {
	// Names lists the nodes that pull the image. Each name may appear only
	// once; names of nodes that do not exist are ignored.
	//
	// +optional
	// +listType=set
	Names []string `json:"names,omitempty"`

	// LabelSelector matches nodes by their labels.
	//
	// +optional
	metav1.LabelSelector `json:",inline"`
}

// PullPolicy sets the timeout and retries of each node's pull.
type PullPolicy struct {
	// TimeoutSeconds is how long one pull attempt on a node may take before
	// it is abandoned. Default 600.
	//
	// +optional
	// +kubebuilder:default=600
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// BackoffLimit is how many times a failed pull is retried on a node
	// before the node is counted as failed (a node makes backoffLimit+1
	// attempts). Default 3; a negative value is treated as 3.
	//
	// +optional
	// +kubebuilder:default=3
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
}

// SandboxConfig is metadata handed to the container runtime with an image
// pull request, the way kubelet passes pod metadata when it pulls.
type SandboxConfig struct {
	// Labels passed to the runtime with the pull.
	//
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations passed to the runtime with the pull.
	//
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ImagePullJobStatus is the observed state of an ImagePullJob.
type ImagePullJobStatus struct {
	// StartTime is when the controller first processed the job (RFC 3339,
	// UTC).
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job finished (RFC 3339, UTC). A job with
	// completion type Never never finishes.
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Desired is the number of nodes the job targets.
	Desired int32 `json:"desired"`

	// Active is the number of targeted nodes whose pull has not finished.
	//
	// +optional
	Active int32 `json:"active"`

	// Succeeded is the number of nodes that pulled the image.
	//
	// +optional
	Succeeded int32 `json:"succeeded"`

	// Failed is the number of nodes whose pull failed.
	//
	// +optional
	Failed int32 `json:"failed"`

	// Message summarizes the job's progress, for example
	// "job is running, progress 12.5%" or "job has completed".
	//
	// +optional
	Message string `json:"message,omitempty"`

	// FailedNodes lists, sorted, the nodes whose pull failed.
	//
	// +optional
	FailedNodes []string `json:"failedNodes,omitempty"`
}

// ImagePullJob pulls one image onto a set of nodes ahead of time, so that
// pods using it start without waiting for the pull.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="TOTAL",type="integer",JSONPath=".status.desired",description="Number of nodes the job targets."
// +kubebuilder:printcolumn:name="ACTIVE",type="integer",JSONPath=".status.active",description="Number of nodes whose pull has not finished."
// +kubebuilder:printcolumn:name="SUCCEED",type="integer",JSONPath=".status.succeeded",description="Number of nodes that pulled the image."
// +kubebuilder:printcolumn:name="FAILED",type="integer",JSONPath=".status.failed",description="Number of nodes whose pull failed."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the job was created."
// +kubebuilder:printcolumn:name="MESSAGE",type="string",JSONPath=".status.message",description="Summary of the job's progress."
type ImagePullJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	Spec ImagePullJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by the controller.
	Status ImagePullJobStatus `json:"status,omitempty"`
}

// ImagePullJobList is a list of ImagePullJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ImagePullJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ImagePullJobs.
	Items []ImagePullJob `json:"items"`
}
