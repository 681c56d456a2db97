package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageListPullJobSpec is the desired state of an ImageListPullJob: a list
// of images, all pulled with the same settings.
type ImageListPullJobSpec struct {
	// Images lists the images to pull, 1 to 255 of them, each once. One
	// ImagePullJob is created per image.
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=255
	// +kubebuilder:validation:items:MinLength=1
	// +listType=set
	Images []string `json:"images"`

	ImagePullJobTemplate `json:",inline"`
}

// ImageListPullJobStatus is the observed state of an ImageListPullJob,
// aggregated from the ImagePullJobs it created.
type ImageListPullJobStatus struct {
	// StartTime is when the controller first processed the job (RFC 3339,
	// UTC).
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when all the job's ImagePullJobs had finished
	// (RFC 3339, UTC).
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Desired is the number of ImagePullJobs the job wants, one per image.
	Desired int32 `json:"desired"`

	// Active is the number of the job's ImagePullJobs that are running.
	//
	// +optional
	Active int32 `json:"active"`

	// Completed is the number of the job's ImagePullJobs that have
	// finished, successfully or not.
	//
	// +optional
	Completed int32 `json:"completed"`

	// Succeeded is the number of the job's ImagePullJobs that finished with
	// every targeted node having pulled the image.
	//
	// +optional
	Succeeded int32 `json:"succeeded"`

	// FailedImageStatuses lists the images whose ImagePullJob has at least
	// one failed node.
	//
	// +optional
	FailedImageStatuses []*FailedImageStatus `json:"failedImageStatuses,omitempty"`
}

// FailedImageStatus describes an image that failed to pull on some nodes.
type FailedImageStatus struct {
	// ImagePullJob is the name of the ImagePullJob that pulled the image.
	//
	// +optional
	ImagePullJob string `json:"imagePullJob,omitempty"`

	// Name is the image.
	//
	// +optional
	Name string `json:"name,omitempty"`

	// Message is the status message of that ImagePullJob.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// ImageListPullJob pulls a list of images onto a set of nodes ahead of time
// by creating one ImagePullJob per image.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="TOTAL",type="integer",JSONPath=".status.desired",description="Number of ImagePullJobs, one per image."
// +kubebuilder:printcolumn:name="SUCCEEDED",type="integer",JSONPath=".status.succeeded",description="Number of ImagePullJobs that succeeded on every node."
// +kubebuilder:printcolumn:name="COMPLETED",type="integer",JSONPath=".status.completed",description="Number of ImagePullJobs that have finished."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the job was created."
type ImageListPullJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	Spec ImageListPullJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by the controller.
	Status ImageListPullJobStatus `json:"status,omitempty"`
}

// ImageListPullJobList is a list of ImageListPullJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ImageListPullJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ImageListPullJobs.
	Items []ImageListPullJob `json:"items"`
}
