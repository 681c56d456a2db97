// Package probeview is the coordinator's per-pod view of a PodProbeMarker:
// each selected pod's probe states as its node's agent last reported them.
// It is served over HTTP and read by `kubectl kruise get podprobemarker
// NAME --pods`; it depends on nothing heavy, so the kubectl plugin can
// import it.
package probeview

import "time"

// PodsPathPrefix is where the coordinator's metrics server shows a
// marker's pods: GET PodsPathPrefix + "<namespace>/<name>" answers a
// MarkerPods as JSON (404 when the marker does not exist, 503 on a replica
// that is not the leader). It is read through the apiserver's service
// proxy of the shoal-coordinator Service, port "http".
const PodsPathPrefix = "/podprobemarkers/"

// Probe states in a view: the agent's, with Unknown for a probe that has
// no result yet (not run, or its container restarted).
const (
	StateUnknown   = "Unknown"
	StateSucceeded = "Succeeded"
	StateFailed    = "Failed"
)

// MarkerPods is the coordinator's per-pod view of one PodProbeMarker.
type MarkerPods struct {
	// Namespace and Name name the marker.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Pods are the pods the marker's probes run on, sorted by name.
	Pods []PodProbes `json:"pods"`
}

// PodProbes is one pod's part of a marker.
type PodProbes struct {
	// Name, UID and Node name the pod and where it runs.
	Name string `json:"name"`
	UID  string `json:"uid"`
	Node string `json:"node"`
	// Probes are the marker's probes on the pod, in spec order.
	Probes []ProbeState `json:"probes"`
}

// ProbeState is one probe's last reported state.
type ProbeState struct {
	// Name is the probe's name in the marker.
	Name string `json:"name"`
	// State is one of the State constants.
	State string `json:"state"`
	// Message is the probe's output: stdout on success, stderr on failure.
	Message string `json:"message,omitempty"`
	// LastProbeTime and LastTransitionTime are the agent's times (zero
	// before the first result).
	LastProbeTime      time.Time `json:"lastProbeTime,omitzero"`
	LastTransitionTime time.Time `json:"lastTransitionTime,omitzero"`
}
