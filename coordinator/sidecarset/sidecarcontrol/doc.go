// Package sidecarcontrol is the SidecarSet library shared by the pod
// admission webhook, which injects sidecars into pods on CREATE, and the
// SidecarSet controller, which keeps the injected sidecars up to date.
//
// It holds what both sides must agree on, with OpenKruise's semantics:
//
//   - which pods a SidecarSet selects (Matches);
//   - the two hashes of a SidecarSet, with and without images (Hashes);
//   - the pod annotations recording what was injected
//     (kruise.io/sidecarset-hash, kruise.io/sidecarset-hash-without-image,
//     kruise.io/sidecarset-injected-list; UpgradeSpec, PodUpgradeSpecs,
//     SetPodUpgradeSpec);
//   - hot-upgrade naming and bookkeeping (HotUpgradeNames,
//     WorkingHotUpgradeContainers and the version annotations);
//   - the SidecarSet ControllerRevisions, stored in a namespace the caller
//     chooses and named <set>-<hash> (NewRevision, ApplyRevision);
//   - injection itself (Inject), including injectionStrategy.revision and
//     patchPodMetadata (PatchPodMetadata).
//
// Everything here works on objects handed in by the caller; the package
// never talks to the API server.
package sidecarcontrol
