// Package workload is the layer the workload controllers (CloneSet,
// Advanced StatefulSet, Advanced DaemonSet, SidecarSet) share, written
// once as docs/architecture.md's workload layer describes: rollout
// arithmetic (rollout), the in-place update engine (inplace), and, as
// they land, expectations, revisions, lifecycle hooks and pre-download.
// Each controller is the kind-specific policy on top.
package workload
