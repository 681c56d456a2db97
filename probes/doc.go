// Package probes will run PodProbeMarker probes on the agent: exec through
// CRI ExecSync, TCP and HTTP against the pod IP, with thresholds, reporting
// only changes.
package probes
