package cri

// The label and annotation keys below are the ones kubelet writes on the CRI
// objects it creates. They were checked against Kubernetes'
// pkg/kubelet/types/labels.go (the pod and container identity labels) and
// pkg/kubelet/kuberuntime/labels.go (the container annotations). Kubelet puts
// the identity labels on both pod sandboxes and containers; the sandbox also
// carries the pod's own labels, and its annotations are the pod's annotations.
const (
	// LabelPodName is the label with the pod's name, on sandboxes and
	// containers.
	LabelPodName = "io.kubernetes.pod.name"
	// LabelPodNamespace is the label with the pod's namespace, on sandboxes
	// and containers.
	LabelPodNamespace = "io.kubernetes.pod.namespace"
	// LabelPodUID is the label with the pod's UID, on sandboxes and
	// containers.
	LabelPodUID = "io.kubernetes.pod.uid"
	// LabelContainerName is the label with the container's name as written
	// in the pod spec, on containers only.
	LabelContainerName = "io.kubernetes.container.name"
)

// Container annotations written by kubelet (kuberuntime's
// newContainerAnnotations). Kubelet calls some of them "labels" in its code,
// but it stores every one of them as a CRI annotation.
const (
	// AnnotationContainerHash is the hex hash kubelet computed over the
	// container spec when it created the container.
	AnnotationContainerHash = "io.kubernetes.container.hash"
	// AnnotationContainerRestartCount is the container's restart count as a
	// decimal integer; kubelet also uses it as the CRI metadata attempt.
	AnnotationContainerRestartCount = "io.kubernetes.container.restartCount"
	// AnnotationContainerTerminationMessagePath is the container's
	// terminationMessagePath.
	AnnotationContainerTerminationMessagePath = "io.kubernetes.container.terminationMessagePath"
	// AnnotationContainerTerminationMessagePolicy is the container's
	// terminationMessagePolicy.
	AnnotationContainerTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	// AnnotationContainerPreStopHandler is the container's
	// lifecycle.preStop handler, as the JSON of a core/v1 LifecycleHandler.
	// It is absent when the container has no preStop hook.
	AnnotationContainerPreStopHandler = "io.kubernetes.container.preStopHandler"
	// AnnotationContainerPorts is the JSON list of the container's ports.
	AnnotationContainerPorts = "io.kubernetes.container.ports"
	// AnnotationContainerType says which list of the pod spec the container
	// comes from: ContainerTypeInit, ContainerTypeRegular or
	// ContainerTypeEphemeral.
	AnnotationContainerType = "io.kubernetes.container.type"
	// AnnotationPodTerminationGracePeriod is the pod's
	// spec.terminationGracePeriodSeconds as a decimal integer, present only
	// when the spec sets it.
	AnnotationPodTerminationGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	// AnnotationPodDeletionGracePeriod is the pod's
	// metadata.deletionGracePeriodSeconds as a decimal integer, present only
	// when the pod was already being deleted when the container was created.
	AnnotationPodDeletionGracePeriod = "io.kubernetes.pod.deletionGracePeriod"
)

// Values of AnnotationContainerType.
const (
	// ContainerTypeInit marks an init container.
	ContainerTypeInit = "init"
	// ContainerTypeRegular marks a container from spec.containers.
	ContainerTypeRegular = "container"
	// ContainerTypeEphemeral marks an ephemeral (debug) container.
	ContainerTypeEphemeral = "ephemeral"
)
