package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ImagePullPolicy says whether a node pulls an image again when it already
// has it.
//
// +kubebuilder:validation:Enum=Always;IfNotPresent
type ImagePullPolicy string

const (
	// PullAlways pulls the image even if the node has it already, so that
	// a tag that moved is fetched again.
	PullAlways ImagePullPolicy = "Always"
	// PullIfNotPresent pulls the image only on nodes that lack it. It is
	// the default.
	PullIfNotPresent ImagePullPolicy = "IfNotPresent"
)

// ImagePullJobSpec is what an ImagePullJob should do: pull one image, on
// which nodes, how, and for how long.
type ImagePullJobSpec struct {
	// Image is the image to pull, such as "nginx:1.25" or
	// "registry.example.com/team/app@sha256:...". With neither tag nor
	// digest the "latest" tag is pulled. Required.
	//
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	ImagePullJobTemplate `json:",inline"`
}

// ImagePullJobTemplate is the part of an ImagePullJob that an
// ImageListPullJob (and an AdvancedCronJob's imageListPullJobTemplate)
// shares: the nodes that pull, how many at once, the registry
// credentials, and when the job is finished.
//
// The rule that pullSecrets cannot change after creation sits on the spec
// of ImagePullJob and ImageListPullJob, not here, so that it does not
// freeze the secrets of an AdvancedCronJob's template.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.selector) && has(self.podSelector))",message="spec.podSelector: set either selector (nodes) or podSelector (nodes of matching pods), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.completionPolicy) || !has(self.completionPolicy.activeDeadlineSeconds) || self.completionPolicy.activeDeadlineSeconds >= (has(self.pullPolicy) && has(self.pullPolicy.timeoutSeconds) ? self.pullPolicy.timeoutSeconds : 600)",message="spec.completionPolicy.activeDeadlineSeconds: must be greater than pullPolicy.timeoutSeconds(default 600) or equal to it"
type ImagePullJobTemplate struct {
	// PullSecrets are the names of Secrets in the job's namespace, of type
	// kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg, whose
	// registry credentials are used for the pull. They cannot be changed
	// once the job exists.
	//
	// +optional
	// +listType=atomic
	PullSecrets []string `json:"pullSecrets,omitempty"`

	// Selector chooses the nodes that pull, either by node name (names) or
	// by node label (matchLabels/matchExpressions) but not both. Unset
	// means all nodes. It cannot be used together with podSelector.
	//
	// +optional
	Selector *ImagePullJobNodeSelector `json:"selector,omitempty"`

	// PodSelector chooses, by label, pods in the job's namespace; the nodes
	// where an active, scheduled matching pod runs are the ones that pull.
	// It cannot be used together with selector.
	//
	// +optional
	PodSelector *ImagePullJobPodSelector `json:"podSelector,omitempty"`

	// Parallelism is the most nodes that pull at the same time. Only a
	// non-negative integer is accepted, not a percentage. Defaults to 1; 0
	// holds the job.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int && self >= 0",message="spec.parallelism: must be a non-negative integer; percentages are not accepted"
	Parallelism *intstr.IntOrString `json:"parallelism,omitempty"`

	// PullPolicy sets how long each node's pull may take and how often it
	// is retried. Defaults to a timeout of 600 seconds and 3 retries.
	//
	// +optional
	// +kubebuilder:default={}
	PullPolicy *PullPolicy `json:"pullPolicy,omitempty"`

	// CompletionPolicy says whether the job finishes after one pass over
	// its nodes (type Always, the default) or goes on pulling on matching
	// nodes, new ones included (type Never).
	CompletionPolicy CompletionPolicy `json:"completionPolicy"`

	// SandboxConfig is metadata handed to the container runtime along
	// with every pull request, for example to label registry traffic.
	//
	// +optional
	SandboxConfig *SandboxConfig `json:"sandboxConfig,omitempty"`

	// ImagePullPolicy is IfNotPresent (the default: a node that has the
	// image reports success without pulling) or Always (every node pulls).
	//
	// +optional
	// +kubebuilder:default=IfNotPresent
	ImagePullPolicy ImagePullPolicy `json:"imagePullPolicy,omitempty"`
}

// ImagePullJobPodSelector picks pods by label; the nodes they run on pull
// the image.
type ImagePullJobPodSelector struct {
	// LabelSelector is matched against pods in the job's namespace.
	//
	// +optional
	metav1.LabelSelector `json:",inline"`
}

// ImagePullJobNodeSelector picks nodes by name or by label, one or the
// other.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.names) && (has(self.matchLabels) || has(self.matchExpressions)))",message="spec.selector: set either names or matchLabels/matchExpressions, not both"
type ImagePullJobNodeSelector struct {
	// Names are the nodes that pull the image, each listed once. Names of
	// nodes that do not exist are skipped.
	//
	// +optional
	// +listType=set
	Names []string `json:"names,omitempty"`

	// LabelSelector is matched against node labels.
	//
	// +optional
	metav1.LabelSelector `json:",inline"`
}

// PullPolicy sets the timeout and the retries of the pull on each node.
type PullPolicy struct {
	// TimeoutSeconds is how long a single pull attempt on a node may last
	// before it is given up. Defaults to 600.
	//
	// +optional
	// +kubebuilder:default=600
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// BackoffLimit is how many times a node retries a failed pull before
	// it counts as failed, so a node tries at most backoffLimit+1 times.
	// Defaults to 3; a negative value counts as 3.
	//
	// +optional
	// +kubebuilder:default=3
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
}

// SandboxConfig is metadata passed to the container runtime with an image
// pull request, like the pod metadata kubelet passes when it pulls.
type SandboxConfig struct {
	// Labels given to the runtime with the pull.
	//
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations given to the runtime with the pull.
	//
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ImagePullJobStatus is what the controller last saw of an ImagePullJob.
type ImagePullJobStatus struct {
	// StartTime is when the controller first handled the job (RFC 3339,
	// UTC).
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job finished (RFC 3339, UTC). Jobs with
	// completion type Never never finish.
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Desired is how many nodes the job pulls on.
	Desired int32 `json:"desired"`

	// Active is how many of those nodes have not finished their pull.
	//
	// +optional
	Active int32 `json:"active"`

	// Succeeded is how many nodes have pulled the image.
	//
	// +optional
	Succeeded int32 `json:"succeeded"`

	// Failed is how many nodes failed to pull the image.
	//
	// +optional
	Failed int32 `json:"failed"`

	// Message sums up how far the job is, such as
	// "job is running, progress 12.5%" or "job has completed".
	//
	// +optional
	Message string `json:"message,omitempty"`

	// FailedNodes are the nodes whose pull failed, in sorted order.
	//
	// +optional
	FailedNodes []string `json:"failedNodes,omitempty"`
}

// ImagePullJob pulls one image onto a set of nodes in advance, so that
// pods using the image start without waiting for it.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
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

	// Spec is what the job should do. Its pullSecrets cannot be changed
	// after creation.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.pullSecrets) ? self.pullSecrets : []) == (has(oldSelf.pullSecrets) ? oldSelf.pullSecrets : [])",message="spec.pullSecrets: is immutable; create a new job to use other secrets"
	Spec ImagePullJobSpec `json:"spec,omitempty"`
	// Status is what the controller last saw of the job.
	Status ImagePullJobStatus `json:"status,omitempty"`
}

// ImagePullJobList holds a list of ImagePullJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ImagePullJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ImagePullJobs in the list.
	Items []ImagePullJob `json:"items"`
}
