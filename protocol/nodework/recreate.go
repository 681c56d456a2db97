package nodework

import (
	"fmt"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Bounds of a recreate work item.
const (
	// MaxRecreateContainers bounds the containers of one recreate item.
	MaxRecreateContainers = 64
	// maxGraceSeconds bounds grace periods, sleeps and min-started times (a day).
	maxGraceSeconds = 86400
	// maxCommandArgs bounds an exec hook's argv.
	maxCommandArgs = 64
	// maxHeaders bounds an httpGet hook's headers.
	maxHeaders = 32
	// maxExpectedEnv bounds a container's expected env variables, and
	// maxExpectedEnvValue each value (a label value is at most 63 bytes;
	// an annotation can be longer).
	maxExpectedEnv      = 64
	maxExpectedEnvValue = 16 << 10
)

// RecreateID is the work item id of the ContainerRecreateRequest
// namespace/name.
func RecreateID(namespace, name string) string {
	return KindRecreate + "/" + namespace + "/" + name
}

func validateRecreateSpec(path string, r *nodeworkv1.RecreateSpec) error {
	for _, f := range []struct{ name, value string }{
		{"podNamespace", r.GetPodNamespace()}, {"podName", r.GetPodName()}, {"podUid", r.GetPodUid()},
	} {
		if f.value == "" || len(f.value) > maxShortString {
			return violation("%s.%s: %d bytes, want 1..%d", path, f.name, len(f.value), maxShortString)
		}
	}
	if len(r.GetPodIp()) > maxShortString {
		return violation("%s.podIp: %d bytes, at most %d", path, len(r.GetPodIp()), maxShortString)
	}
	if n := len(r.GetContainers()); n < 1 || n > MaxRecreateContainers {
		return violation("%s.containers: %d, want 1..%d", path, n, MaxRecreateContainers)
	}
	if g := r.GetTerminationGraceSeconds(); g < 0 || g > maxGraceSeconds {
		return violation("%s.terminationGraceSeconds: %d, want 0..%d", path, g, maxGraceSeconds)
	}
	if m := r.GetMinStartedSeconds(); m < 0 || m > maxGraceSeconds {
		return violation("%s.minStartedSeconds: %d, want 0..%d", path, m, maxGraceSeconds)
	}
	if n := len(r.GetReadyContainerIds()); n > MaxRecreateContainers {
		return violation("%s.readyContainerIds: %d, at most %d", path, n, MaxRecreateContainers)
	}
	seen := map[string]bool{}
	for i, c := range r.GetContainers() {
		cp := fmt.Sprintf("%s.containers[%d]", path, i)
		if c.GetName() == "" || len(c.GetName()) > maxShortString {
			return violation("%s.name: %d bytes, want 1..%d", cp, len(c.GetName()), maxShortString)
		}
		if seen[c.GetName()] {
			return violation("%s.name: %q appears twice", cp, c.GetName())
		}
		seen[c.GetName()] = true
		if c.GetContainerId() == "" || len(c.GetContainerId()) > MaxIDBytes {
			return violation("%s.containerId: %d bytes, want 1..%d", cp, len(c.GetContainerId()), MaxIDBytes)
		}
		if c.GetRestartCount() < 0 {
			return violation("%s.restartCount: negative", cp)
		}
		if err := validatePreStop(cp+".preStop", c.GetPreStop()); err != nil {
			return err
		}
		if n := len(c.GetExpectedEnv()); n > maxExpectedEnv {
			return violation("%s.expectedEnv: %d variables, at most %d", cp, n, maxExpectedEnv)
		}
		for k, v := range c.GetExpectedEnv() {
			if k == "" || len(k) > maxShortString || len(v) > maxExpectedEnvValue {
				return violation("%s.expectedEnv[%.64q]: name 1..%d bytes and value at most %d bytes", cp, k, maxShortString, maxExpectedEnvValue)
			}
		}
	}
	return nil
}

func validatePreStop(path string, h *nodeworkv1.PreStopHook) error {
	if h == nil {
		return nil
	}
	switch a := h.GetAction().(type) {
	case *nodeworkv1.PreStopHook_Exec:
		if n := len(a.Exec.GetCommand()); n < 1 || n > maxCommandArgs {
			return violation("%s.exec.command: %d arguments, want 1..%d", path, n, maxCommandArgs)
		}
	case *nodeworkv1.PreStopHook_HttpGet:
		g := a.HttpGet
		if g.GetPort() < 1 || g.GetPort() > 65535 {
			return violation("%s.httpGet.port: %d, want 1..65535", path, g.GetPort())
		}
		if s := g.GetScheme(); s != "" && s != "HTTP" && s != "HTTPS" {
			return violation("%s.httpGet.scheme: %q, want HTTP or HTTPS", path, s)
		}
		if len(g.GetHeaders()) > maxHeaders {
			return violation("%s.httpGet.headers: %d, at most %d", path, len(g.GetHeaders()), maxHeaders)
		}
	case *nodeworkv1.PreStopHook_Sleep:
		if s := a.Sleep.GetSeconds(); s < 0 || s > maxGraceSeconds {
			return violation("%s.sleep.seconds: %d, want 0..%d", path, s, maxGraceSeconds)
		}
	default:
		return violation("%s: no action", path)
	}
	return nil
}

func validateRecreateStatus(path string, s *nodeworkv1.RecreateStatus) error {
	if n := len(s.GetContainers()); n > MaxRecreateContainers {
		return violation("%s.containers: %d, at most %d", path, n, MaxRecreateContainers)
	}
	for i, c := range s.GetContainers() {
		cp := fmt.Sprintf("%s.containers[%d]", path, i)
		if c.GetName() == "" || len(c.GetName()) > maxShortString {
			return violation("%s.name: %d bytes, want 1..%d", cp, len(c.GetName()), maxShortString)
		}
		if _, known := nodeworkv1.RecreatePhase_name[int32(c.GetPhase())]; !known || c.GetPhase() == nodeworkv1.RecreatePhase_RECREATE_PHASE_UNSPECIFIED {
			return violation("%s.phase: %d is not a recreate phase", cp, c.GetPhase())
		}
		if len(c.GetMessage()) > MaxMessageTextBytes {
			return violation("%s.message: %d bytes, at most %d", cp, len(c.GetMessage()), MaxMessageTextBytes)
		}
		if len(c.GetNewContainerId()) > MaxIDBytes {
			return violation("%s.newContainerId: %d bytes, at most %d", cp, len(c.GetNewContainerId()), MaxIDBytes)
		}
	}
	return nil
}
