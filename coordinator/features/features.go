// Package features holds the coordinator's feature gates: OpenKruise's
// gates of the same names, for behaviour OpenKruise keeps behind a switch.
// Set them with --feature-gates=Name=true,Other=false.
//
// Defaults follow OpenKruise, with the exceptions said at the gates:
// PreDownloadImageForInPlaceUpdate and PreDownloadImageForDaemonSetUpdate
// are on in Shoal, because the agents' swarm makes warming a new image
// cheap.
package features

import (
	"k8s.io/component-base/featuregate"
)

const (
	// CloneSetShortHash writes only the hash part ("6d8f7b9c4") of the
	// revision into a CloneSet pod's controller-revision-hash label,
	// instead of "<cloneset>-<hash>", so long CloneSet names fit in the
	// label's 63 characters. Both forms are always read. Off by default.
	CloneSetShortHash featuregate.Feature = "CloneSetShortHash"

	// CloneSetPartitionRollback moves pods back to the current revision
	// when a CloneSet's partition is raised during a rollout (without it,
	// raising the partition only stops further updates). Off by default.
	CloneSetPartitionRollback featuregate.Feature = "CloneSetPartitionRollback"

	// PreparingUpdateAsUpdate counts a pod that a lifecycle hook holds in
	// PreparingUpdate as already updated when a CloneSet decides at which
	// revision to create pods, so a rebuilt or added pod does not overshoot
	// the partition. Off by default.
	PreparingUpdateAsUpdate featuregate.Feature = "PreparingUpdateAsUpdate"

	// PreDownloadImageForInPlaceUpdate creates ImagePullJobs for the new
	// images of an in-place CloneSet rollout before pods restart. On by
	// default in Shoal (off in OpenKruise).
	PreDownloadImageForInPlaceUpdate featuregate.Feature = "PreDownloadImageForInPlaceUpdate"

	// PreDownloadImageForDaemonSetUpdate creates ImagePullJobs for the new
	// images of an Advanced DaemonSet's rolling update, on the nodes of
	// its old pods, before they are updated. On by default in Shoal (off
	// in OpenKruise).
	PreDownloadImageForDaemonSetUpdate featuregate.Feature = "PreDownloadImageForDaemonSetUpdate"

	// SidecarSetPatchPodMetadataDefaultsAllowed lets any SidecarSet patch
	// any pod annotation through spec.patchPodMetadata. Off, a SidecarSet
	// may patch only the keys an allow-list rule grants it (key
	// SidecarSet_PatchPodMetadata_WhiteList of the kruise-configuration
	// ConfigMap in the coordinator's namespace). Off by default.
	SidecarSetPatchPodMetadataDefaultsAllowed featuregate.Feature = "SidecarSetPatchPodMetadataDefaultsAllowed"

	// SidecarTerminator stops the sidecars of Job pods (containers with
	// env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true) once the main
	// containers are done, so the Job completes. On by default in Shoal
	// (off in OpenKruise): the node agents stop the sidecars through the
	// CRI the moment the mains exit, and only pods that ask are touched.
	SidecarTerminator featuregate.Feature = "SidecarTerminator"

	// EnablePodProbeMarkerOnServerless makes the pod webhook record, on
	// each new pod that PodProbeMarkers select, the probes that have a
	// podConditionType in the kruise.io/podprobe annotation, for
	// runtimes that run probes themselves (serverless nodes without an
	// agent). Off by default, as in OpenKruise: off, the webhook lets pods
	// through unchanged.
	EnablePodProbeMarkerOnServerless featuregate.Feature = "EnablePodProbeMarkerOnServerless"

	// StatefulSetAutoResizePVCGate lets an Advanced StatefulSet with
	// volumeClaimUpdateStrategy OnPodRollingUpdate expand its existing
	// PVCs when a volumeClaimTemplate asks for more storage, one pod at a
	// time in its rolling update, and makes the webhook refuse template
	// changes that no PVC can follow. Off by default, as in OpenKruise:
	// off, existing PVCs keep their size.
	StatefulSetAutoResizePVCGate featuregate.Feature = "StatefulSetAutoResizePVCGate"
)

// defaults are the gates and their default values.
var defaults = map[featuregate.Feature]featuregate.FeatureSpec{
	CloneSetShortHash:                         {Default: false, PreRelease: featuregate.Alpha},
	CloneSetPartitionRollback:                 {Default: false, PreRelease: featuregate.Alpha},
	PreparingUpdateAsUpdate:                   {Default: false, PreRelease: featuregate.Alpha},
	PreDownloadImageForInPlaceUpdate:          {Default: true, PreRelease: featuregate.Beta},
	PreDownloadImageForDaemonSetUpdate:        {Default: true, PreRelease: featuregate.Beta},
	SidecarSetPatchPodMetadataDefaultsAllowed: {Default: false, PreRelease: featuregate.Alpha},
	SidecarTerminator:                         {Default: true, PreRelease: featuregate.Beta},
	EnablePodProbeMarkerOnServerless:          {Default: false, PreRelease: featuregate.Alpha},
	StatefulSetAutoResizePVCGate:              {Default: false, PreRelease: featuregate.Alpha},
}

// New returns the coordinator's gates at their defaults; Set
// ("Name=true,...") changes them.
func New() featuregate.MutableFeatureGate {
	g := featuregate.NewFeatureGate()
	if err := g.Add(defaults); err != nil {
		// The table above is fixed: a failure is a programming error.
		panic(err)
	}
	return g
}

// Enabled reports whether gate f is on in g, or at its default when g is
// nil (tests and callers without flags).
func Enabled(g featuregate.FeatureGate, f featuregate.Feature) bool {
	if g == nil {
		return defaults[f].Default
	}
	return g.Enabled(f)
}
