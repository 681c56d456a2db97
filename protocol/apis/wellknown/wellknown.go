// Package wellknown lists the names that OpenKruise-compatible components and
// their users exchange outside of any CRD schema: label and annotation keys,
// finalizers, container environment variables, pod condition types and
// readiness gates, plus the few fixed values, name prefixes and suffixes that
// go with them.
//
// Shoal's controllers, webhooks and node agents set and read exactly the keys
// OpenKruise does, so that manifests, scripts and dashboards written for
// OpenKruise keep working. Every value here is therefore fixed by OpenKruise
// and must not be changed. Constants are grouped by feature; each one says
// who sets it, who reads it and what its values mean.
package wellknown

import corev1 "k8s.io/api/core/v1"

// LifecycleState is a value of the LabelLifecycleState pod label: where a pod
// managed by CloneSet, Advanced StatefulSet or Advanced DaemonSet stands in
// the lifecycle-hook state machine.
type LifecycleState string

// DeletionProtection is a value of the LabelDeleteProtection label.
type DeletionProtection string

// PubOperation names one kind of voluntary disruption that a
// PodUnavailableBudget can guard. AnnotationPubProtectOperations holds a
// comma-separated list of them.
type PubOperation string

// ---------------------------------------------------------------------------
// Revisions and pod identity
// ---------------------------------------------------------------------------

const (
	// LabelControllerRevisionHash is the upstream Kubernetes revision label.
	// CloneSet, Advanced StatefulSet and Advanced DaemonSet set it on every
	// pod they create (and on their ControllerRevisions) to the name of the
	// revision the pod was built from, "<workload>-<hash>". With the
	// CloneSetShortHash feature gate a CloneSet writes only the "<hash>" part.
	// The workload controllers read it to tell updated pods from old ones and
	// accept both forms.
	LabelControllerRevisionHash = "controller-revision-hash"

	// LabelPodTemplateHash is the upstream Deployment label. CloneSet also
	// sets it on its pods, always to the short "<hash>" of the revision, so
	// that selectors and Services written for Deployments keep working.
	LabelPodTemplateHash = "pod-template-hash"

	// LabelKruiseControllerRevisionHash is set by UnitedDeployment on the
	// per-subset workloads it creates to the UnitedDeployment revision they
	// were rendered from. The UnitedDeployment controller reads it to decide
	// which subsets still have to be updated.
	LabelKruiseControllerRevisionHash = "apps.kruise.io/controller-revision-hash"

	// LabelStatefulSetPodName is the upstream StatefulSet label. Advanced
	// StatefulSet sets it on each pod to the pod's own name so that a Service
	// can select exactly one replica.
	LabelStatefulSetPodName = "statefulset.kubernetes.io/pod-name"

	// LabelPodIndex is the upstream StatefulSet label carrying the pod's
	// ordinal as a decimal string. Advanced StatefulSet sets it when the
	// PodIndexLabel feature gate is on (the default); applications read it,
	// typically through the downward API.
	LabelPodIndex = "apps.kubernetes.io/pod-index"
)

// ---------------------------------------------------------------------------
// CloneSet scaling and deletion
// ---------------------------------------------------------------------------

const (
	// LabelCloneSetInstanceID is set by CloneSet on each pod and on the
	// PersistentVolumeClaims created for it from volumeClaimTemplates; a pod
	// and its claims share the same random value. CloneSet reads it to find a
	// pod's claims and to reuse them when the pod is recreated.
	LabelCloneSetInstanceID = "apps.kruise.io/cloneset-instance-id"

	// LabelBroadcastJobName is set by the BroadcastJob controller on each
	// pod it creates to the job's name (OpenKruise's key, without a
	// prefix, as a Job's job-name label).
	LabelBroadcastJobName = "broadcastjob-name"

	// LabelBroadcastJobControllerUID is set by the BroadcastJob controller
	// on each pod it creates to the job's UID.
	LabelBroadcastJobControllerUID = "broadcastjob-controller-uid"

	// LabelSpecifiedDelete is set on a pod by users (or by CloneSet itself for
	// a recreate update, with the value "true") to ask the owning CloneSet or
	// Advanced StatefulSet to delete that particular pod; any value counts.
	// CloneSet deletes it within the limits of maxUnavailable, creating a
	// replacement first when maxSurge allows.
	LabelSpecifiedDelete = "apps.kruise.io/specified-delete"

	// AnnotationPVCOwnedByAdvancedStatefulSet is set by the Advanced
	// StatefulSet controller, to the set's name, on each PVC it resizes
	// (volumeClaimUpdateStrategy OnPodRollingUpdate): the PVC's changes,
	// such as its capacity growing, then wake the set.
	AnnotationPVCOwnedByAdvancedStatefulSet = "apps.kruise.io/owned-by-asts"

	// LabelCloneSetScalingExcludePreparingDelete is set by users on a CloneSet.
	// With the value "true" pods in the PreparingDelete lifecycle state are
	// not counted towards replicas, so the CloneSet creates replacements for
	// them right away. The v1beta1 API has the field
	// scaleStrategy.excludePreparingDelete instead.
	LabelCloneSetScalingExcludePreparingDelete = "apps.kruise.io/cloneset-scaling-exclude-preparing-delete"

	// AnnotationPodDeletionCost is the upstream pod annotation holding an
	// int32 deletion cost. Users, PodProbeMarker marker policies and
	// WorkloadSpread (which writes "100" or "-100") set it; CloneSet, like a
	// ReplicaSet, deletes pods with a lower cost first when scaling in.
	AnnotationPodDeletionCost = "controller.kubernetes.io/pod-deletion-cost"
)

// ---------------------------------------------------------------------------
// Image pre-download for in-place updates
// ---------------------------------------------------------------------------

const (
	// AnnotationImagePreDownloadParallelism is set by users on a CloneSet,
	// Advanced StatefulSet or Advanced DaemonSet. Its integer value is the
	// parallelism of the ImagePullJobs the workload creates to pre-pull new
	// images on the nodes of its old pods (default 1). v1beta1 CloneSet uses
	// updateStrategy.rollingUpdate.inPlaceUpdateStrategy.imagePreDownloadParallelism.
	AnnotationImagePreDownloadParallelism = "apps.kruise.io/image-predownload-parallelism"

	// AnnotationImagePreDownloadTimeoutSeconds is set by users on the same
	// workloads. Its integer value is the per-attempt pull timeout of the
	// pre-download ImagePullJobs, in seconds (default 300).
	AnnotationImagePreDownloadTimeoutSeconds = "apps.kruise.io/image-predownload-timeout-seconds"

	// AnnotationImagePreDownloadMinUpdatedReadyPods is set by users on the
	// same workloads. Pre-download starts only once this many pods (an
	// integer, or a percentage of replicas) of the new revision are updated
	// and ready (default 0: start at once).
	AnnotationImagePreDownloadMinUpdatedReadyPods = "apps.kruise.io/image-predownload-min-updated-ready-pods"

	// LabelImagePreDownloadIgnored is set to "true" by the workload
	// controllers on a ControllerRevision for which pre-download was decided
	// to be pointless (recreate updates, three replicas or fewer, everything
	// updated in one batch, a change that cannot be applied in place). The
	// controllers skip revisions carrying it.
	LabelImagePreDownloadIgnored = "apps.kruise.io/image-predownload-ignored"

	// LabelImagePreDownloadCreated is set to "true" by the workload
	// controllers on a ControllerRevision once its pre-download ImagePullJobs
	// have been created, so that they are created only once.
	LabelImagePreDownloadCreated = "apps.kruise.io/pre-predownload-created"
)

// ---------------------------------------------------------------------------
// ImagePullJob, NodeImage and the node agent
// ---------------------------------------------------------------------------

const (
	// AnnotationPullingImageBy is put by the node agent into the sandbox
	// config annotations of every CRI PullImage request it sends, with the
	// value PullingImageByKruiseDaemon, so that registries and runtimes can
	// tell pre-pulls from kubelet pulls.
	AnnotationPullingImageBy = "apps.kruise.io/pulling-image-by"

	// PullingImageByKruiseDaemon is the value of AnnotationPullingImageBy.
	PullingImageByKruiseDaemon = "kruise-daemon"

	// AnnotationImagePullSecretSourceKey is set by the ImagePullJob
	// controller on each Secret it copies into NamespaceKruiseDaemonConfig,
	// to "<namespace>/<name>" of the Secret it was copied from. The
	// controller reads it to find and refresh the copy when the source
	// changes.
	AnnotationImagePullSecretSourceKey = "imagepulljobs.kruise.io/source-key"

	// LabelImagePullSecretSourceUID was set by older ImagePullJob controllers
	// on copied Secrets to the UID of the source Secret. It is no longer
	// written, only tolerated on existing copies.
	LabelImagePullSecretSourceUID = "imagepulljobs.kruise.io/source-uid"

	// AnnotationImagePullSecretReferences is set by the ImagePullJob
	// controller on each copied Secret to the sorted, comma-separated
	// "<namespace>/<name>" list of ImagePullJobs using it. The controller
	// deletes the copy when the list becomes empty.
	AnnotationImagePullSecretReferences = "imagepulljobs.kruise.io/references"

	// AnnotationImagePullSecretMode is set by the ImagePullJob controller on
	// each copied Secret, to ImagePullSecretModeBatch for copies shared by all
	// jobs of a source Secret. The same mode is recorded in the NodeImage
	// pullSecrets reference so that such copies are cleaned up with the image.
	AnnotationImagePullSecretMode = "imagepulljobs.kruise.io/mode"

	// ImagePullSecretModeBatch is the value of AnnotationImagePullSecretMode
	// for a copied Secret shared by every ImagePullJob of the same source.
	ImagePullSecretModeBatch = "batch"

	// FinalizerDeletionProtection is added to an ImagePullJob by the mutating
	// webhook when it is created. The ImagePullJob controller removes it after
	// releasing the job's copied pull Secrets, so that no copy is leaked.
	FinalizerDeletionProtection = "apps.kruise.io/deletion-protection"

	// LabelFakeNodeImage marks a NodeImage that has no Node behind it. Only
	// end-to-end tests create such NodeImages; the NodeImage controller does
	// not delete a NodeImage carrying this label when no Node of that name
	// exists.
	LabelFakeNodeImage = "apps.kruise.io/fake-nodeimage"
)

// ---------------------------------------------------------------------------
// In-place update
// ---------------------------------------------------------------------------

const (
	// AnnotationInPlaceUpdateState is set by the workload controllers on a pod
	// when they update it in place. Its value is a JSON object with the target
	// revision, the update start time, the image IDs of the containers before
	// the update, and, for updates done in batches by container priority, the
	// images, metadata and resources still to apply, the readiness pre-check
	// before the next batch and a record of the batches done. The controllers
	// read it to decide whether the update has completed.
	AnnotationInPlaceUpdateState = "apps.kruise.io/inplace-update-state"

	// AnnotationInPlaceUpdateStateOld is the key pods updated by OpenKruise
	// releases before v1.0 carry instead of AnnotationInPlaceUpdateState.
	// Readers fall back to it; writers use the new key.
	AnnotationInPlaceUpdateStateOld = "inplace-update-state"

	// AnnotationInPlaceUpdateGrace is set by the workload controllers on a pod
	// whose in-place update has a grace period: it holds the pending update,
	// as JSON, while the pod is kept not-ready for the grace period. The
	// controller applies the update and removes the annotation when the
	// period ends.
	AnnotationInPlaceUpdateGrace = "apps.kruise.io/inplace-update-grace"

	// AnnotationInPlaceUpdateGraceOld is the pre-v1.0 key of
	// AnnotationInPlaceUpdateGrace. Readers fall back to it and it is removed
	// together with the new key.
	AnnotationInPlaceUpdateGraceOld = "inplace-update-grace"

	// AnnotationRuntimeContainersMeta is written by the node agent on the pods
	// of its node (through the pods/status subresource). Its value is a JSON
	// object listing, per running container, its name, containerID,
	// restartCount and hashes, including the hash of the environment values
	// taken from pod labels and annotations. The workload controllers read it
	// to know when an in-place update of such environment variables has
	// reached the containers.
	AnnotationRuntimeContainersMeta = "apps.kruise.io/runtime-containers-meta"
)

// ---------------------------------------------------------------------------
// Pod lifecycle hooks
// ---------------------------------------------------------------------------

const (
	// LabelLifecycleState is set by CloneSet, Advanced StatefulSet and
	// Advanced DaemonSet on their pods; its value is a LifecycleState. The
	// controllers move pods between states and wait on the lifecycle hooks
	// (labels or finalizers that users' controllers add and remove) before
	// leaving the Preparing* states. Users' controllers read it to know when
	// to act.
	LabelLifecycleState = "lifecycle.apps.kruise.io/state"

	// AnnotationLifecycleTimestamp is set by the same controllers to the
	// RFC 3339 time at which LabelLifecycleState last changed.
	AnnotationLifecycleTimestamp = "lifecycle.apps.kruise.io/timestamp"
)

// Values of LabelLifecycleState.
const (
	// LifecycleStatePreparingNormal: the pod was created but is held back
	// until the preNormal hook is in place; it becomes Normal when it is.
	LifecycleStatePreparingNormal LifecycleState = "PreparingNormal"
	// LifecycleStateNormal: the pod is in service; only Normal pods count as
	// available.
	LifecycleStateNormal LifecycleState = "Normal"
	// LifecycleStatePreparingUpdate: the pod is about to be updated in place;
	// the controller waits for the inPlaceUpdate hook to be released.
	LifecycleStatePreparingUpdate LifecycleState = "PreparingUpdate"
	// LifecycleStateUpdating: the in-place update has been applied and the
	// containers are being restarted.
	LifecycleStateUpdating LifecycleState = "Updating"
	// LifecycleStateUpdated: the in-place update is complete; the pod goes
	// back to Normal once the inPlaceUpdate hook is in place again.
	LifecycleStateUpdated LifecycleState = "Updated"
	// LifecycleStatePreparingDelete: the pod is about to be deleted; the
	// controller deletes it once the preDelete hook is released.
	LifecycleStatePreparingDelete LifecycleState = "PreparingDelete"
)

// ---------------------------------------------------------------------------
// Pod conditions and readiness gates
// ---------------------------------------------------------------------------

const (
	// ConditionKruisePodReady is a pod condition owned by Shoal's controllers.
	// It is False while some controller holds the pod not-ready (a lifecycle
	// hook with markPodNotReady, a ContainerRecreateRequest with
	// unreadyGracePeriodSeconds), its message listing who holds it, and True
	// otherwise. It only affects readiness through ReadinessGateKruisePodReady.
	ConditionKruisePodReady corev1.PodConditionType = "KruisePodReady"

	// ConditionInPlaceUpdateReady is a pod condition set by the workload
	// controllers: False (reason StartInPlaceUpdate) just before a pod is
	// updated in place, True once the update has completed. It only affects
	// readiness through ReadinessGateInPlaceUpdateReady.
	ConditionInPlaceUpdateReady corev1.PodConditionType = "InPlaceUpdateReady"

	// ConditionSidecarSetUpgradable is a pod condition set by the SidecarSet
	// controller: False (reason UpdateImmutableField) when a matching
	// SidecarSet changed more than sidecar images, so the pod's sidecars cannot
	// be upgraded in place and the pod must be recreated to pick them up.
	ConditionSidecarSetUpgradable corev1.PodConditionType = "SidecarSetUpgradable"

	// ConditionSidecarTerminated is a pod condition set to True by the Job
	// sidecar terminator when it has moved a Job pod to Succeeded or Failed
	// itself, because its remaining sidecars were told to ignore their exit
	// codes. The ContainerRecreateRequest webhook accepts requests for such
	// finished pods, which is how the sidecars are then stopped.
	ConditionSidecarTerminated corev1.PodConditionType = "SidecarTerminated"

	// ReadinessGateKruisePodReady is the readiness gate that makes
	// ConditionKruisePodReady count towards pod readiness. The pod webhook
	// adds it to pods of Shoal's workloads (to every pod with the
	// KruisePodReadinessGate feature gate).
	ReadinessGateKruisePodReady = ConditionKruisePodReady

	// ReadinessGateInPlaceUpdateReady is the readiness gate that makes
	// ConditionInPlaceUpdateReady count towards pod readiness. The workload
	// controllers add it to the pods they create, so that a pod is not ready
	// while it is being updated in place.
	ReadinessGateInPlaceUpdateReady = ConditionInPlaceUpdateReady
)

// ---------------------------------------------------------------------------
// Container launch priority
// ---------------------------------------------------------------------------

const (
	// AnnotationContainerLaunchPriority is set by users on a pod (or pod
	// template) to ContainerLaunchPriorityOrdered to have its containers start
	// one after another in the order they are listed. The pod webhook reads it
	// when the pod is created.
	AnnotationContainerLaunchPriority = "apps.kruise.io/container-launch-priority"

	// ContainerLaunchPriorityOrdered is the value of
	// AnnotationContainerLaunchPriority: start containers in list order.
	ContainerLaunchPriorityOrdered = "Ordered"

	// AnnotationContainerLaunchPriorityCompleted is set to "true" on a pod by
	// the launch-priority controller once every priority key has been written
	// to the pod's barrier ConfigMap; the controller then stops watching it.
	AnnotationContainerLaunchPriorityCompleted = "apps.kruise.io/container-launch-priority-completed"

	// EnvContainerPriority is set by users on a container to an integer launch
	// priority; containers with a higher value start before those with a
	// lower one. The pod webhook reads it when the pod is created.
	EnvContainerPriority = "KRUISE_CONTAINER_PRIORITY"

	// EnvContainerBarrier is added by the pod webhook to every container of a
	// pod that uses launch priorities. It takes its value from key
	// ContainerLaunchBarrierKeyPrefix+"<priority>" of the ConfigMap
	// "<pod>"+ContainerLaunchBarrierConfigMapSuffix; the kubelet cannot start
	// the container until the launch-priority controller has written that
	// key. Workload controllers also read it to update containers in
	// priority order.
	EnvContainerBarrier = "KRUISE_CONTAINER_BARRIER"

	// ContainerLaunchBarrierConfigMapSuffix is appended to the pod name to
	// name the per-pod barrier ConfigMap, which the launch-priority controller
	// creates (owned by the pod) and which lives as long as the pod.
	ContainerLaunchBarrierConfigMapSuffix = "-barrier"

	// ContainerLaunchBarrierKeyPrefix is followed by a container priority (for
	// example "p_0", "p_10", "p_-1") to form a key of the barrier ConfigMap.
	ContainerLaunchBarrierKeyPrefix = "p_"
)

// ---------------------------------------------------------------------------
// Job sidecar terminator and virtual-kubelet nodes
// ---------------------------------------------------------------------------

const (
	// EnvTerminateSidecarWhenJobExit is set by users to "true" on a sidecar
	// container of a Job or BroadcastJob pod. Once the main containers have
	// finished (all of them, or all successfully under restartPolicy
	// OnFailure) the sidecar terminator stops such sidecars through a
	// ContainerRecreateRequest, so that the pod can complete.
	EnvTerminateSidecarWhenJobExit = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT"

	// EnvTerminateSidecarIgnoreExitCode is set by users to "true" next to
	// EnvTerminateSidecarWhenJobExit. The sidecar terminator then ignores the
	// sidecar's exit code: it sets the pod phase itself from the main
	// containers' results (and ConditionSidecarTerminated) before stopping the
	// sidecar.
	EnvTerminateSidecarIgnoreExitCode = "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE"

	// EnvTerminateSidecarWhenJobExitWithImage is set by users on a sidecar to
	// an image that exits at once. On virtual-kubelet nodes, where no node
	// agent can stop containers, the sidecar terminator stops the sidecar by
	// updating its image in place to this one.
	EnvTerminateSidecarWhenJobExitWithImage = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE"

	// LabelVirtualKubelet is the Node label that marks a virtual-kubelet node
	// when set to VirtualKubeletValue. Shoal reads it to avoid relying on the
	// node agent there: the sidecar terminator uses in-place image updates,
	// ContainerRecreateRequests get the same label, and the node agent
	// DaemonSet is kept off such nodes.
	LabelVirtualKubelet = "type"

	// VirtualKubeletValue is the value of LabelVirtualKubelet on
	// virtual-kubelet nodes.
	VirtualKubeletValue = "virtual-kubelet"

	// TaintVirtualKubeletProvider is the taint key virtual-kubelet nodes
	// carry; the sidecar terminator also treats a node with this taint as a
	// virtual-kubelet node.
	TaintVirtualKubeletProvider = "virtual-kubelet.io/provider"
)

// ---------------------------------------------------------------------------
// ContainerRecreateRequest
// ---------------------------------------------------------------------------

const (
	// LabelCRRPodName is set by the ContainerRecreateRequest webhook to
	// spec.podName when the request is created. Immutable.
	LabelCRRPodName = "crr.apps.kruise.io/pod-name"

	// LabelCRRPodUID is set by the ContainerRecreateRequest webhook to the
	// UID of the target pod when the request is created. Immutable. The
	// controllers read it to notice that the pod was replaced.
	LabelCRRPodUID = "crr.apps.kruise.io/pod-uid"

	// LabelCRRNodeName is set by the ContainerRecreateRequest webhook to the
	// node of the target pod when the request is created. Immutable. Each
	// node agent watches only requests labelled with its own node name.
	LabelCRRNodeName = "crr.apps.kruise.io/node-name"

	// LabelCRRActive is set to "true" by the ContainerRecreateRequest webhook
	// on creation and removed by the controller when the request completes.
	// Node agents watch only requests carrying it.
	LabelCRRActive = "crr.apps.kruise.io/active"

	// AnnotationCRRSyncContainerStatuses is written by the
	// ContainerRecreateRequest controller while a v1alpha1 request is
	// Recreating: a JSON list of {name, ready, restartCount, containerID} of
	// the pod's containers, which the node agent reads to decide when a
	// recreated container counts as succeeded. v1beta1 requests use
	// status.containerStatusSnapshot instead.
	AnnotationCRRSyncContainerStatuses = "crr.apps.kruise.io/sync-container-statuses"

	// AnnotationCRRUnreadyAcquired is set by the ContainerRecreateRequest
	// controller to the RFC 3339 time at which it made the pod not-ready for a
	// request with unreadyGracePeriodSeconds; the node agent waits the grace
	// period from that time before stopping containers. Immutable once set.
	// v1beta1 requests record this as the PreRecreateGrace condition.
	AnnotationCRRUnreadyAcquired = "crr.apps.kruise.io/unready-acquired"

	// AnnotationCRRVerifyEnvFromMetadata, set to "true" on a
	// ContainerRecreateRequest (by Shoal's in-place updates), makes the
	// node agent check that each recreated container's env values read
	// from the pod's labels and annotations (valueFrom.fieldRef) match the
	// pod's metadata, and recreate it again while they do not. A Shoal
	// addition.
	AnnotationCRRVerifyEnvFromMetadata = "crr.shoal.io/verify-env-from-metadata"

	// FinalizerCRRUnreadyAcquired is the finalizer the ContainerRecreateRequest
	// controller adds to a request while it holds the pod not-ready, so that
	// the hold is released even if the request is deleted early. It is the
	// same string as AnnotationCRRUnreadyAcquired.
	FinalizerCRRUnreadyAcquired = AnnotationCRRUnreadyAcquired
)

// ---------------------------------------------------------------------------
// PodProbeMarker and NodePodProbe
// ---------------------------------------------------------------------------

const (
	// AnnotationPodProbe is set by the pod webhook when a pod matched by
	// PodProbeMarkers is created: a JSON list of the probes that have a
	// podConditionType (name, containerName, podConditionType, probe), for
	// runtimes such as serverless nodes that run the probes themselves.
	AnnotationPodProbe = "kruise.io/podprobe"

	// AnnotationPodProbeMarkerList is set by the pod webhook alongside
	// AnnotationPodProbe to the comma-separated names of the PodProbeMarkers
	// whose probes were recorded.
	AnnotationPodProbeMarkerList = "kruise.io/podprobemarker-list"

	// FinalizerNodePodProbeCleanup is added to every PodProbeMarker by its
	// controller and removed after the marker's probes have been deleted from
	// all NodePodProbes.
	FinalizerNodePodProbeCleanup = "kruise.io/node-pod-probe-cleanup"
)

// ---------------------------------------------------------------------------
// SidecarSet
// ---------------------------------------------------------------------------

const (
	// AnnotationSidecarSetHash is set on each SidecarSet (by its webhook) and
	// on its ControllerRevisions to a hash of its sidecar containers, and by
	// the pod webhook and SidecarSet controller on each pod to a JSON
	// map from SidecarSet name to {hash, updateTimestamp, sidecarSetName,
	// sidecarList, controllerRevision} describing the version injected. A pod
	// is up to date with a SidecarSet when both hashes match.
	AnnotationSidecarSetHash = "kruise.io/sidecarset-hash"

	// AnnotationSidecarSetHashWithoutImage is like AnnotationSidecarSetHash
	// with the images left out of the hash. When only this hash still matches,
	// the difference is images only and the sidecars can be upgraded in place.
	AnnotationSidecarSetHashWithoutImage = "kruise.io/sidecarset-hash-without-image"

	// AnnotationSidecarSetInjectedList is set by the pod webhook to the
	// comma-separated names of the SidecarSets injected into the pod.
	AnnotationSidecarSetInjectedList = "kruise.io/sidecarset-injected-list"

	// AnnotationSidecarSetWorkingHotUpgradeContainer is set by the pod webhook
	// and SidecarSet controller on pods with hot-upgrade sidecars: a JSON map
	// from each sidecar name to the pod container currently doing the work,
	// "<sidecar>-1" or "<sidecar>-2".
	AnnotationSidecarSetWorkingHotUpgradeContainer = "kruise.io/sidecarset-working-hotupgrade-container"

	// AnnotationSidecarSetVersionPrefix followed by a pod container name
	// ("<sidecar>-1" or "<sidecar>-2") is set by the pod webhook and SidecarSet
	// controller to the version that container runs: "0" while it holds the
	// empty hot-upgrade image, "1" for the container that worked first, and
	// afterwards the SidecarSet resourceVersion it was upgraded to. Containers
	// read it through EnvSidecarSetVersion.
	AnnotationSidecarSetVersionPrefix = "version.sidecarset.kruise.io/"

	// AnnotationSidecarSetVersionAltPrefix followed by a pod container name is
	// set alongside AnnotationSidecarSetVersionPrefix to the version of the
	// other container of the same hot-upgrade pair, so that a container can
	// tell whether it is taking over from, or handing over to, its partner.
	// Containers read it through EnvSidecarSetVersionAlt.
	AnnotationSidecarSetVersionAltPrefix = "versionalt.sidecarset.kruise.io/"

	// AnnotationSidecarSetInPlaceUpdateState is set by the SidecarSet
	// controller on a pod whose sidecars it upgraded in place: a JSON map from
	// SidecarSet name to the in-place update state (revision, time, the
	// containers' previous image IDs), read back to detect completion.
	AnnotationSidecarSetInPlaceUpdateState = "kruise.io/sidecarset-inplace-update-state"

	// LabelSidecarSetName is set by the SidecarSet controller on the
	// ControllerRevisions it stores for a SidecarSet (in the controller's own
	// namespace) to the SidecarSet name; users list a SidecarSet's history
	// with it.
	LabelSidecarSetName = "kruise.io/sidecarset-name"

	// LabelSidecarSetCustomVersion is set by users on a v1alpha1 SidecarSet to
	// a version name of their choosing; the controller copies it to the
	// SidecarSet's ControllerRevisions, and
	// injectionStrategy.revision.customVersion selects a revision by it. The
	// v1beta1 API has the field spec.customVersion instead.
	LabelSidecarSetCustomVersion = "apps.kruise.io/sidecarset-custom-version"

	// AnnotationSidecarSetCanary is set by users to "true" on a SidecarSet
	// that is a canary of another one, named by AnnotationSidecarSetBase.
	// A canary SidecarSet must use the NotUpdate update strategy.
	AnnotationSidecarSetCanary = "apps.kruise.io/sidecarset-canary"

	// AnnotationSidecarSetBase is set by users on a canary SidecarSet to the
	// name of the SidecarSet it is a canary of. The webhook requires the base
	// to exist, not to be the canary itself and not to be a canary, and
	// refuses changes to this annotation.
	AnnotationSidecarSetBase = "apps.kruise.io/sidecarset-base"

	// EnvSidecarSetVersion is added by the pod webhook to both containers of
	// a hot-upgrade sidecar pair, taking its value from the container's
	// AnnotationSidecarSetVersionPrefix annotation through the downward API.
	EnvSidecarSetVersion = "SIDECARSET_VERSION"

	// EnvSidecarSetVersionAlt is added by the pod webhook to both containers
	// of a hot-upgrade sidecar pair, taking its value from the container's
	// AnnotationSidecarSetVersionAltPrefix annotation.
	EnvSidecarSetVersionAlt = "SIDECARSET_VERSION_ALT"

	// EnvIsInjected is added with the value "true" by the pod webhook to every
	// container it injects from a SidecarSet. The controllers and webhooks
	// read it to tell injected sidecars from the pod's own containers.
	EnvIsInjected = "IS_INJECTED"

	// HotUpgradeContainerSuffix1 is appended to a hot-upgrade sidecar's name
	// to name the first container of its pair.
	HotUpgradeContainerSuffix1 = "-1"

	// HotUpgradeContainerSuffix2 is appended to a hot-upgrade sidecar's name
	// to name the second container of its pair.
	HotUpgradeContainerSuffix2 = "-2"
)

// ---------------------------------------------------------------------------
// PodUnavailableBudget
// ---------------------------------------------------------------------------

const (
	// AnnotationPubProtectOperations is set by users on a PodUnavailableBudget
	// to the comma-separated PubOperations it guards. Without it, DELETE,
	// EVICT and UPDATE are guarded.
	AnnotationPubProtectOperations = "kruise.io/pub-protect-operations"

	// AnnotationPubProtectTotalReplicas is set by users on a
	// PodUnavailableBudget to an int32 replica count that the budget is then
	// computed against, for pods whose owner has no scale subresource or that
	// have no owner at all.
	AnnotationPubProtectTotalReplicas = "pub.kruise.io/protect-total-replicas"

	// AnnotationPubNoProtect is set by users on a pod to a true value
	// ("true") to exempt it from every PodUnavailableBudget, for example to
	// force its deletion.
	AnnotationPubNoProtect = "pub.kruise.io/no-protect"

	// AnnotationPubRelatedPub is set by the pod webhook on a pod to the name of
	// the PodUnavailableBudget that covers it, caching the lookup.
	AnnotationPubRelatedPub = "pub.kruise.io/related-pub"

	// AnnotationPubRelatedPubOld is the older key of AnnotationPubRelatedPub,
	// still read on pods that carry it.
	AnnotationPubRelatedPubOld = "kruise.io/related-pub"

	// LabelUnavailablePodPrefix starts a family of pod labels: a pod with any
	// label "unavailable-pod.kruise.io/<anything>" is treated as unavailable by
	// PodUnavailableBudgets and by the workload controllers even if it is
	// ready. Users and their controllers set such labels, for example before
	// taking a pod out of service without deleting it.
	LabelUnavailablePodPrefix = "unavailable-pod.kruise.io/"
)

// Values listed in AnnotationPubProtectOperations.
const (
	// PubOperationDelete guards pod deletion.
	PubOperationDelete PubOperation = "DELETE"
	// PubOperationEvict guards the eviction API (for example kubectl drain).
	PubOperationEvict PubOperation = "EVICT"
	// PubOperationUpdate guards pod updates that restart containers, such as
	// in-place image updates.
	PubOperationUpdate PubOperation = "UPDATE"
	// PubOperationResize guards in-place vertical scaling (pod resize),
	// including resizes that restart no container.
	PubOperationResize PubOperation = "RESIZE"
)

// ---------------------------------------------------------------------------
// Deletion protection
// ---------------------------------------------------------------------------

const (
	// LabelDeleteProtection is set by users on a Namespace,
	// CustomResourceDefinition, Deployment, ReplicaSet, StatefulSet, CloneSet,
	// Advanced StatefulSet, UnitedDeployment, Service or Ingress; its value is
	// a DeletionProtection. The validating webhook (feature gate
	// ResourcesDeletionProtection) refuses deletions it forbids.
	LabelDeleteProtection = "policy.kruise.io/delete-protection"
)

// Values of LabelDeleteProtection.
const (
	// DeletionProtectionAlways forbids deleting the object until the label is
	// removed.
	DeletionProtectionAlways DeletionProtection = "Always"
	// DeletionProtectionCascading forbids deleting the object while it still
	// has live dependents: active pods or bound claims in a Namespace, custom
	// resources of a CRD, or replicas above zero in a workload. Services and
	// Ingresses support only Always.
	DeletionProtectionCascading DeletionProtection = "Cascading"
)

// ---------------------------------------------------------------------------
// WorkloadSpread
// ---------------------------------------------------------------------------

const (
	// AnnotationMatchedWorkloadSpread is set by the pod webhook when a pod is
	// created under a WorkloadSpread: JSON {name, subset[, uid]} naming the
	// WorkloadSpread and the subset the pod was placed in. The WorkloadSpread
	// controller and webhook read it to count pods per subset.
	AnnotationMatchedWorkloadSpread = "apps.kruise.io/matched-workloadspread"

	// AnnotationWorkloadSpreadIgnorePatchExistingPods, set to "true" on a
	// WorkloadSpread, keeps the controller from copying a subset's patch
	// labels and annotations onto pods that existed before the
	// WorkloadSpread when it assigns them to that subset (it still writes
	// AnnotationMatchedWorkloadSpread).
	AnnotationWorkloadSpreadIgnorePatchExistingPods = "workloadspread.kruise.io/ignore-patch-existing-pods-metadata"
)

// ---------------------------------------------------------------------------
// PersistentPodState
// ---------------------------------------------------------------------------

const (
	// AnnotationAutoGeneratePersistentPodState is set by users to "true" on a
	// StatefulSet or Advanced StatefulSet to have the controller create and
	// maintain a PersistentPodState for it from the two topology annotations
	// below and AnnotationPersistentPodAnnotations.
	AnnotationAutoGeneratePersistentPodState = "kruise.io/auto-generate-persistent-pod-state"

	// AnnotationRequiredPersistentTopology is set by users on such a workload
	// to comma-separated node label keys (for example
	// "topology.kubernetes.io/zone"); a recreated pod must land on a node with
	// the same values as before.
	AnnotationRequiredPersistentTopology = "kruise.io/required-persistent-topology"

	// AnnotationPreferredPersistentTopology is set by users on such a workload
	// to comma-separated node label keys (for example
	// "kubernetes.io/hostname"); a recreated pod preferably lands on a node
	// with the same values as before.
	AnnotationPreferredPersistentTopology = "kruise.io/preferred-persistent-topology"

	// AnnotationPersistentPodAnnotations is set by users on such a workload to
	// comma-separated pod annotation keys (for example a CNI's pod IP key)
	// whose values are recorded and put back on the pod when it is recreated.
	AnnotationPersistentPodAnnotations = "kruise.io/persistent-pod-annotations"

	// AnnotationInjectedPersistentPodState is set by the pod webhook, on a
	// StatefulSet pod it gave the recorded placement (node selector and
	// preferred node affinity) or annotations of a PersistentPodState, to
	// that PersistentPodState's name.
	AnnotationInjectedPersistentPodState = "kruise.io/injected-persistent-pod-state"
)

// ---------------------------------------------------------------------------
// ResourceDistribution
// ---------------------------------------------------------------------------

const (
	// AnnotationResourceDistributionFrom is set by the ResourceDistribution
	// controller on every Secret or ConfigMap it distributes to the name of
	// the ResourceDistribution. The controller treats a same-named object
	// without it (or naming another distribution) as a conflict and leaves it
	// alone.
	AnnotationResourceDistributionFrom = "kruise.io/resourcedistribution.resource.from"

	// AnnotationResourceDistributionHashCode is set by the ResourceDistribution
	// controller on every distributed copy to the hex SHA-256 of the
	// resource manifest it was written from (spec.resource as stored).
	AnnotationResourceDistributionHashCode = "kruise.io/resourcedistribution.resource.hashcode"

	// AnnotationResourceDistributionDistributedTimestamp is set by the
	// ResourceDistribution controller on every distributed copy to the time
	// it was last written. Informational.
	AnnotationResourceDistributionDistributedTimestamp = "kruise.io/resourcedistribution.resource.distributed.timestamp"

	// LabelResourceDistribution is set by Shoal's ResourceDistribution
	// controller on every copy it writes, to the distribution's name (as
	// the from annotation is): the coordinator watches only the Secrets and
	// ConfigMaps that carry it, not every one in the cluster.
	LabelResourceDistribution = "resourcedistribution.shoal.io/name"
)

// ---------------------------------------------------------------------------
// UnitedDeployment, AdvancedCronJob, Advanced DaemonSet
// ---------------------------------------------------------------------------

const (
	// LabelSubsetName is set by UnitedDeployment on each per-subset workload
	// and on its pod template to the subset name. The controller reads it to
	// map workloads and pods back to subsets.
	LabelSubsetName = "apps.kruise.io/subset-name"

	// LabelUnitedDeploymentReservedPod is set by UnitedDeployment (adaptive
	// scheduling) on pods it keeps reserved in a subset while their
	// replacements are created elsewhere because they stayed unschedulable.
	LabelUnitedDeploymentReservedPod = "apps.kruise.io/united-deployment-reserved-pod"

	// AnnotationSubsetPatch is set by UnitedDeployment on each per-subset
	// workload to the JSON patch of that subset (topology.subsets[].patch)
	// applied to its template.
	AnnotationSubsetPatch = "apps.kruise.io/subset-patch"

	// AnnotationScheduledAt is set by the AdvancedCronJob controller on each
	// Job or BroadcastJob it starts to the RFC 3339 time of the schedule slot
	// that started it. The controller reads it to find the last run.
	AnnotationScheduledAt = "apps.kruise.io/scheduled-at"

	// AnnotationDaemonSetProgressiveCreatePod on a v1alpha1 Advanced
	// DaemonSet makes the partition limit the creation of pods on new nodes,
	// not only updates. It is added when the DaemonSet is created and removed
	// once partition is set to 0; users may set it too. v1beta1 has
	// spec.scaleStrategy instead.
	AnnotationDaemonSetProgressiveCreatePod = "daemonset.kruise.io/progressive-create-pod"
)

// ---------------------------------------------------------------------------
// Enhanced liveness probe
// ---------------------------------------------------------------------------

const (
	// AnnotationUsingEnhancedLiveness is set by users to "true" on a pod (or
	// template) to have the node agent, rather than the kubelet, run the
	// containers' liveness probes (feature gate EnhancedLivenessProbe).
	AnnotationUsingEnhancedLiveness = "apps.kruise.io/using-enhanced-liveness"

	// AnnotationContainerProbeContext is set by the pod webhook on such pods
	// to a JSON copy of the containers' original liveness probes, which it
	// removes from the container specs so that the kubelet does not run them.
	AnnotationContainerProbeContext = "apps.kruise.io/container-probe-context"
)

// ---------------------------------------------------------------------------
// Components and cluster-wide configuration
// ---------------------------------------------------------------------------

const (
	// NamespaceKruiseSystem is the default namespace of the controller
	// manager, its ConfigMapKruiseConfiguration and the SidecarSet
	// ControllerRevisions. The manager uses EnvPodNamespace instead when set.
	NamespaceKruiseSystem = "kruise-system"

	// NamespaceKruiseDaemonConfig is the namespace from which node agents
	// read image pull Secrets; the ImagePullJob controller copies the jobs'
	// Secrets there. EnvKruiseDaemonConfigNamespace overrides it.
	NamespaceKruiseDaemonConfig = "kruise-daemon-config"

	// ConfigMapKruiseConfiguration is the name of the ConfigMap, in the
	// manager's namespace, whose data keys (the Config* constants) hold
	// optional cluster-wide settings as JSON.
	ConfigMapKruiseConfiguration = "kruise-configuration"

	// ConfigSidecarSetPatchPodMetadataWhiteList is a data key of
	// ConfigMapKruiseConfiguration: {"rules": [{selector, allowedAnnotationKeyExprs}]}
	// listing the pod annotation keys (regular expressions) that SidecarSets
	// matching each selector may patch through patchPodMetadata.
	ConfigSidecarSetPatchPodMetadataWhiteList = "SidecarSet_PatchPodMetadata_WhiteList"

	// ConfigWorkloadSpreadWatchCustomWorkloadWhiteList is a data key of
	// ConfigMapKruiseConfiguration: {"workloads": [{group, version, kind,
	// subResources, replicasPath}]} listing extra workload kinds a
	// WorkloadSpread targetRef may name, and where their replica count is.
	ConfigWorkloadSpreadWatchCustomWorkloadWhiteList = "WorkloadSpread_Watch_Custom_Workload_WhiteList"

	// ConfigPersistentPodStateWatchCustomWorkloadWhiteList is a data key of
	// ConfigMapKruiseConfiguration: {"workloads": [{group, version, kind}]}
	// listing extra workload kinds a PersistentPodState targetRef may name.
	ConfigPersistentPodStateWatchCustomWorkloadWhiteList = "PPS_Watch_Custom_Workload_WhiteList"

	// EnvNodeName must be set on every node agent pod to the name of its node
	// (through the downward API); the agent refuses to start without it.
	EnvNodeName = "NODE_NAME"

	// EnvPodNamespace is set on the controller manager pod to its namespace
	// (through the downward API); it replaces NamespaceKruiseSystem.
	EnvPodNamespace = "POD_NAMESPACE"

	// EnvKruiseDaemonConfigNamespace, when set on the controller manager and
	// node agent pods, replaces NamespaceKruiseDaemonConfig.
	EnvKruiseDaemonConfigNamespace = "KRUISE_DAEMON_CONFIG_NS"
)
