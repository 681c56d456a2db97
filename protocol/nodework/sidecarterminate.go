package nodework

import (
	"fmt"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Bounds of a sidecar-terminate work item.
const (
	// MaxSidecarTerminateContainers bounds the main containers of one
	// sidecar-terminate item, and its sidecars (both lists together).
	MaxSidecarTerminateContainers = 64
)

// SidecarTerminateID is the work item id of the sidecar terminator's work
// for the pod namespace/name.
func SidecarTerminateID(namespace, name string) string {
	return KindSidecarTerminate + "/" + namespace + "/" + name
}

// SidecarTerminateSidecars returns the spec's sidecars in the order their
// states are reported: sidecar_containers, then
// ignore_exit_code_containers.
func SidecarTerminateSidecars(s *nodeworkv1.SidecarTerminateSpec) []string {
	out := make([]string, 0, len(s.GetSidecarContainers())+len(s.GetIgnoreExitCodeContainers()))
	out = append(out, s.GetSidecarContainers()...)
	return append(out, s.GetIgnoreExitCodeContainers()...)
}

func validateSidecarTerminateSpec(path string, s *nodeworkv1.SidecarTerminateSpec) error {
	for _, f := range []struct{ name, value string }{
		{"podNamespace", s.GetPodNamespace()}, {"podName", s.GetPodName()}, {"podUid", s.GetPodUid()},
	} {
		if f.value == "" || len(f.value) > maxShortString {
			return violation("%s.%s: %d bytes, want 1..%d", path, f.name, len(f.value), maxShortString)
		}
	}
	if n := len(s.GetMainContainers()); n > MaxSidecarTerminateContainers {
		return violation("%s.mainContainers: %d, at most %d", path, n, MaxSidecarTerminateContainers)
	}
	if n := len(s.GetSidecarContainers()) + len(s.GetIgnoreExitCodeContainers()); n < 1 || n > MaxSidecarTerminateContainers {
		return violation("%s: %d sidecarContainers and ignoreExitCodeContainers, want 1..%d together", path, n, MaxSidecarTerminateContainers)
	}
	switch s.GetRestartPolicy() {
	case nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_NEVER, nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE:
	default:
		return violation("%s.restartPolicy: %d, want NEVER or ON_FAILURE", path, s.GetRestartPolicy())
	}
	if g := s.GetTerminationGraceSeconds(); g < 0 || g > maxGraceSeconds {
		return violation("%s.terminationGraceSeconds: %d, want 0..%d", path, g, maxGraceSeconds)
	}
	seen := map[string]string{}
	for _, list := range []struct {
		name  string
		names []string
	}{
		{"mainContainers", s.GetMainContainers()},
		{"sidecarContainers", s.GetSidecarContainers()},
		{"ignoreExitCodeContainers", s.GetIgnoreExitCodeContainers()},
	} {
		for i, n := range list.names {
			if n == "" || len(n) > maxShortString {
				return violation("%s.%s[%d]: %d bytes, want 1..%d", path, list.name, i, len(n), maxShortString)
			}
			if prev, dup := seen[n]; dup {
				return violation("%s.%s[%d]: %q is also in %s", path, list.name, i, n, prev)
			}
			seen[n] = list.name
		}
	}
	return nil
}

func validateSidecarTerminateStatus(path string, s *nodeworkv1.SidecarTerminateStatus) error {
	if len(s.GetPodUid()) > maxShortString {
		return violation("%s.podUid: %d bytes, at most %d", path, len(s.GetPodUid()), maxShortString)
	}
	if _, known := nodeworkv1.SidecarTerminateStage_name[int32(s.GetStage())]; !known ||
		s.GetStage() == nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_UNSPECIFIED {
		return violation("%s.stage: %d is not a sidecar-terminate stage", path, s.GetStage())
	}
	if s.GetStopDelayMillis() < 0 {
		return violation("%s.stopDelayMillis: negative", path)
	}
	for _, list := range []struct {
		name string
		cs   []*nodeworkv1.SidecarTerminateContainerState
	}{{"mains", s.GetMains()}, {"sidecars", s.GetSidecars()}} {
		if n := len(list.cs); n > MaxSidecarTerminateContainers {
			return violation("%s.%s: %d, at most %d", path, list.name, n, MaxSidecarTerminateContainers)
		}
		for i, c := range list.cs {
			cp := fmt.Sprintf("%s.%s[%d]", path, list.name, i)
			if c.GetName() == "" || len(c.GetName()) > maxShortString {
				return violation("%s.name: %d bytes, want 1..%d", cp, len(c.GetName()), maxShortString)
			}
			if len(c.GetContainerId()) > MaxIDBytes {
				return violation("%s.containerId: %d bytes, at most %d", cp, len(c.GetContainerId()), MaxIDBytes)
			}
			if c.GetStops() < 0 || c.GetStopMillis() < 0 {
				return violation("%s: negative stops or stopMillis", cp)
			}
			if len(c.GetMessage()) > MaxMessageTextBytes {
				return violation("%s.message: %d bytes, at most %d", cp, len(c.GetMessage()), MaxMessageTextBytes)
			}
		}
	}
	return nil
}
