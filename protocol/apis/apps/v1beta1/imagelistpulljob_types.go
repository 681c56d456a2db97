package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageListPullJobSpec is what an ImageListPullJob should do: pull a list
// of images, all with the same settings.
type ImageListPullJobSpec struct {
	// Images are the images to pull: between 1 and 255, none repeated. The
	// job creates one ImagePullJob for each.
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=255
	// +kubebuilder:validation:items:MinLength=1
	// +listType=set
	Images []string `json:"images"`

	ImagePullJobTemplate `json:",inline"`
}

// ImageListPullJobStatus is what the controller last saw of an
// ImageListPullJob, summed up from the ImagePullJobs it created.
type ImageListPullJobStatus struct {
	// StartTime is when the controller first handled the job (RFC 3339,
	// UTC).
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the last of the job's ImagePullJobs finished
	// (RFC 3339, UTC).
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Desired is how many ImagePullJobs the job wants: one per image.
	Desired int32 `json:"desired"`

	// Active is how many of the job's ImagePullJobs are running.
	//
	// +optional
	Active int32 `json:"active"`

	// Completed is how many of the job's ImagePullJobs have finished,
	// whether or not they succeeded.
	//
	// +optional
	Completed int32 `json:"completed"`

	// Succeeded is how many of the job's ImagePullJobs finished with the
	// image pulled on every node they targeted.
	//
	// +optional
	Succeeded int32 `json:"succeeded"`

	// FailedImageStatuses are the images whose ImagePullJob failed on at
	// least one node.
	//
	// +optional
	FailedImageStatuses []*FailedImageStatus `json:"failedImageStatuses,omitempty"`
}

// FailedImageStatus is an image that some nodes failed to pull.
type FailedImageStatus struct {
	// ImagePullJob is the name of the ImagePullJob that pulled the image.
	//
	// +optional
	ImagePullJob string `json:"imagePullJob,omitempty"`

	// Name is the image.
	//
	// +optional
	Name string `json:"name,omitempty"`

	// Message is that ImagePullJob's status message.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// ImageListPullJob pulls a list of images onto a set of nodes in advance,
// through one ImagePullJob per image.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="TOTAL",type="integer",JSONPath=".status.desired",description="Number of ImagePullJobs, one per image."
// +kubebuilder:printcolumn:name="SUCCEEDED",type="integer",JSONPath=".status.succeeded",description="Number of ImagePullJobs that succeeded on every node."
// +kubebuilder:printcolumn:name="COMPLETED",type="integer",JSONPath=".status.completed",description="Number of ImagePullJobs that have finished."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the job was created."
type ImageListPullJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the job should do. Its pullSecrets cannot be changed
	// after creation.
	//
	// +kubebuilder:validation:XValidation:rule="(has(self.pullSecrets) ? self.pullSecrets : []) == (has(oldSelf.pullSecrets) ? oldSelf.pullSecrets : [])",message="spec.pullSecrets: is immutable; create a new job to use other secrets"
	Spec ImageListPullJobSpec `json:"spec,omitempty"`
	// Status is what the controller last saw of the job.
	Status ImageListPullJobStatus `json:"status,omitempty"`
}

// ImageListPullJobList holds a list of ImageListPullJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ImageListPullJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ImageListPullJobs in the list.
	Items []ImageListPullJob `json:"items"`
}
