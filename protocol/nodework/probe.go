package nodework

import (
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Bounds of a probe work item.
const (
	// MaxPodProbes bounds the probes of one pod (all its PodProbeMarkers
	// together).
	MaxPodProbes = 64
	// MaxProbeJSONBytes bounds one probe's JSON.
	MaxProbeJSONBytes = 16 << 10
	// MaxProbeMessageBytes bounds a probe result's message, as OpenKruise
	// truncates probe output.
	MaxProbeMessageBytes = 1024
)

// ProbeID is the work item id of the probes of the pod namespace/name.
func ProbeID(namespace, name string) string {
	return KindProbe + "/" + namespace + "/" + name
}

func validateProbeSpec(path string, s *nodeworkv1.ProbeSpec) error {
	for _, f := range []struct{ name, value string }{
		{"podNamespace", s.GetPodNamespace()}, {"podName", s.GetPodName()}, {"podUid", s.GetPodUid()},
	} {
		if f.value == "" || len(f.value) > maxShortString {
			return violation("%s.%s: %d bytes, want 1..%d", path, f.name, len(f.value), maxShortString)
		}
	}
	if len(s.GetPodIp()) > maxShortString {
		return violation("%s.podIp: %d bytes, at most %d", path, len(s.GetPodIp()), maxShortString)
	}
	if n := len(s.GetProbes()); n < 1 || n > MaxPodProbes {
		return violation("%s.probes: %d, want 1..%d", path, n, MaxPodProbes)
	}
	seen := map[string]bool{}
	for i, p := range s.GetProbes() {
		if p.GetName() == "" || len(p.GetName()) > maxShortString {
			return violation("%s.probes[%d].name: %d bytes, want 1..%d", path, i, len(p.GetName()), maxShortString)
		}
		if seen[p.GetName()] {
			return violation("%s.probes[%d].name: %q twice", path, i, p.GetName())
		}
		seen[p.GetName()] = true
		if p.GetContainerName() == "" || len(p.GetContainerName()) > maxShortString {
			return violation("%s.probes[%d].containerName: %d bytes, want 1..%d", path, i, len(p.GetContainerName()), maxShortString)
		}
		if n := len(p.GetProbeJson()); n < 2 || n > MaxProbeJSONBytes {
			return violation("%s.probes[%d].probeJson: %d bytes, want 2..%d", path, i, n, MaxProbeJSONBytes)
		}
	}
	return nil
}

func validateProbeStatus(path string, s *nodeworkv1.ProbeStatus) error {
	if len(s.GetPodUid()) > maxShortString {
		return violation("%s.podUid: %d bytes, at most %d", path, len(s.GetPodUid()), maxShortString)
	}
	if n := len(s.GetProbes()); n > MaxPodProbes {
		return violation("%s.probes: %d, at most %d", path, n, MaxPodProbes)
	}
	for i, r := range s.GetProbes() {
		if r.GetName() == "" || len(r.GetName()) > maxShortString {
			return violation("%s.probes[%d].name: %d bytes, want 1..%d", path, i, len(r.GetName()), maxShortString)
		}
		if _, known := nodeworkv1.ProbeState_name[int32(r.GetState())]; !known {
			return violation("%s.probes[%d].state: %d is not a known state", path, i, r.GetState())
		}
		if len(r.GetMessage()) > MaxProbeMessageBytes {
			return violation("%s.probes[%d].message: %d bytes, at most %d", path, i, len(r.GetMessage()), MaxProbeMessageBytes)
		}
	}
	return nil
}
