package pub

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// InPlaceUpdateStrategy tunes how pods are updated in place.
type InPlaceUpdateStrategy struct {
	// GracePeriodSeconds is how long, in seconds, a pod is kept NotReady
	// (through the InPlaceUpdateReady readiness gate) before its containers
	// are changed, so that traffic can drain first. 0 (the default) changes
	// them immediately.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`

	// ImagePreDownloadParallelism is how many nodes at once pre-pull the new
	// images of an update before pods are updated in place: a non-negative
	// integer or a percentage of the workload's pods. It takes the place of
	// the apps.kruise.io/image-predownload-parallelism annotation, which is
	// still read. Default 1.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="imagePreDownloadParallelism: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	ImagePreDownloadParallelism *intstr.IntOrString `json:"imagePreDownloadParallelism,omitempty"`

	// ImagePreDownloadTimeoutSeconds is the per-node pull timeout, in
	// seconds, of the pre-download. It takes the place of the
	// apps.kruise.io/image-predownload-timeout-seconds annotation. Default
	// 300.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	ImagePreDownloadTimeoutSeconds *int32 `json:"imagePreDownloadTimeoutSeconds,omitempty"`

	// ImagePreDownloadMinUpdatedReadyPods is how many pods of the new
	// revision must be updated and ready before the other nodes start
	// pre-downloading its images, so that a bad image is not spread
	// everywhere. It takes the place of the
	// apps.kruise.io/image-predownload-min-updated-ready-pods annotation.
	// Default 0.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	ImagePreDownloadMinUpdatedReadyPods *int32 `json:"imagePreDownloadMinUpdatedReadyPods,omitempty"`
}

// InPlaceUpdateState is what the workload controller records on a pod (in
// the wellknown.AnnotationInPlaceUpdateState annotation) when it updates the pod in place.
// It is read back to decide when the update has finished and which
// containers still have to be updated in later batches.
type InPlaceUpdateState struct {
	// Revision is the workload revision the pod is being updated to.
	Revision string `json:"revision"`

	// UpdateTimestamp is when the in-place update started.
	UpdateTimestamp metav1.Time `json:"updateTimestamp"`

	// LastContainerStatuses holds, by container name, what the containers
	// being updated looked like before the update; a container counts as
	// updated once its status differs from this record.
	LastContainerStatuses map[string]InPlaceUpdateContainerStatus `json:"lastContainerStatuses"`

	// UpdateEnvFromMetadata is true when the update changes pod labels or
	// annotations that containers consume as environment variables, so
	// those containers have to be restarted by the node agent.
	UpdateEnvFromMetadata bool `json:"updateEnvFromMetadata,omitempty"`

	// UpdateResources is true when the update changes container resources.
	UpdateResources bool `json:"updateResources,omitempty"`

	// UpdateImages is true when the update changes container images.
	UpdateImages bool `json:"updateImages,omitempty"`

	// VerticalUpdateOnly is true when the update changes nothing but
	// container resources.
	VerticalUpdateOnly bool `json:"verticalUpdateOnly"`

	// NextContainerImages holds, by container name, the images still to be
	// applied in a later batch (containers of lower priority).
	NextContainerImages map[string]string `json:"nextContainerImages,omitempty"`

	// NextContainerRefMetadata holds, by container name, the pod labels and
	// annotations still to be applied in a later batch for containers that
	// read them as environment variables.
	NextContainerRefMetadata map[string]metav1.ObjectMeta `json:"nextContainerRefMetadata,omitempty"`

	// NextContainerResources holds, by container name, the resources still
	// to be applied in a later batch.
	NextContainerResources map[string]corev1.ResourceRequirements `json:"nextContainerResources,omitempty"`

	// PreCheckBeforeNext is what must hold before the next batch starts.
	PreCheckBeforeNext *InPlaceUpdatePreCheckBeforeNext `json:"preCheckBeforeNext,omitempty"`

	// ContainerBatchesRecord lists the batches already applied for this
	// revision, oldest first.
	ContainerBatchesRecord []InPlaceUpdateContainerBatch `json:"containerBatchesRecord,omitempty"`
}

// InPlaceUpdatePreCheckBeforeNext is the condition for starting the next
// batch of an in-place update.
type InPlaceUpdatePreCheckBeforeNext struct {
	// ContainersRequiredReady names the containers (those of the current
	// batch) that must be updated and ready before the next batch starts.
	ContainersRequiredReady []string `json:"containersRequiredReady,omitempty"`
}

// InPlaceUpdateContainerBatch records one batch of an in-place update.
type InPlaceUpdateContainerBatch struct {
	// Timestamp is when the batch was applied.
	Timestamp metav1.Time `json:"timestamp"`
	// Containers names the containers updated in the batch.
	Containers []string `json:"containers"`
}

// InPlaceUpdateContainerStatus is the state of one container before it was
// updated in place.
type InPlaceUpdateContainerStatus struct {
	// ImageID is the container's image ID before the update.
	ImageID string `json:"imageID,omitempty"`
	// Resources are the container's resources before the update.
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// ContainerID is the ID of the container that ran before the update
	// (a Shoal addition: OpenKruise leaves it out and ignores it). A tag
	// change to the same image keeps the image ID, and the kubelet may
	// report the old tag: a new container ID is how such an update is seen
	// to be done.
	ContainerID string `json:"containerID,omitempty"`
}

// RuntimeContainerMetaSet is the node agent's report of a pod's running
// containers, stored in the wellknown.AnnotationRuntimeContainersMeta pod annotation.
type RuntimeContainerMetaSet struct {
	// Containers has one entry per running container of the pod.
	Containers []RuntimeContainerMeta `json:"containers"`
}

// RuntimeContainerMeta describes one running container as the container
// runtime sees it.
type RuntimeContainerMeta struct {
	// Name is the container's name in the pod spec.
	Name string `json:"name"`
	// ContainerID is the runtime's container ID, in the same form as in the
	// pod's container statuses (for example "containerd://<id>").
	ContainerID string `json:"containerID"`
	// RestartCount is the container's restart count.
	RestartCount int32 `json:"restartCount"`
	// Hashes are the hashes computed for the running container.
	Hashes RuntimeContainerHashes `json:"hashes"`
}

// RuntimeContainerHashes are hashes of a running container's spec, used to
// tell whether it already runs what the pod spec asks for.
type RuntimeContainerHashes struct {
	// PlainHash is the hash of the container's spec as the kubelet computes
	// it (found in the runtime container's annotations).
	PlainHash uint64 `json:"plainHash"`
	// PlainHashWithoutResources is the same hash computed with the
	// container's resources left out.
	PlainHashWithoutResources uint64 `json:"plainHashWithoutResources"`
	// ExtractedEnvFromMetadataHash is a hash of the values the container
	// sees for environment variables taken from pod labels and
	// annotations; it changes when those values change.
	ExtractedEnvFromMetadataHash uint64 `json:"extractedEnvFromMetadataHash,omitempty"`
}
