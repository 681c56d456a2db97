package probes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// State is the state of one probe, as NodePodProbe's status reports it.
type State string

const (
	// StateUnknown means the probe has no verdict for the current container
	// yet: the container was just seen (first time, or after a restart) or
	// the probe's handler changed.
	StateUnknown State = "Unknown"
	// StateSucceeded means the probe succeeded successThreshold times in a
	// row (an exec exit code 0, a TCP connect, an HTTP status 200-399).
	StateSucceeded State = "Succeeded"
	// StateFailed means the probe failed failureThreshold times in a row, or
	// the container is not running.
	StateFailed State = "Failed"
)

// Valid reports whether s is one of the three states.
func (s State) Valid() bool {
	return s == StateUnknown || s == StateSucceeded || s == StateFailed
}

// Key identifies one probe worker: a probe of a container of a pod.
// ProbeName is the probe's name as NodePodProbe spells it
// ("<ppm>#<probe>"), but the runner treats all three fields as opaque.
type Key struct {
	// PodUID is the pod's UID.
	PodUID string
	// Container is the name of the probed container in the pod spec.
	Container string
	// ProbeName is the probe's name, unique per pod.
	ProbeName string
}

// String renders the key as "<podUID>/<container>/<probe>", for logs.
func (k Key) String() string { return k.PodUID + "/" + k.Container + "/" + k.ProbeName }

// validate reports a key with an empty field.
func (k Key) validate() error {
	if k.PodUID == "" || k.Container == "" || k.ProbeName == "" {
		return fmt.Errorf("probe key %q: pod UID, container and probe name are all required", k.String())
	}
	return nil
}

// Spec is one probe to run: what Set receives, one per Key. Set keeps a
// deep copy.
type Spec struct {
	Key
	// PodNamespace and PodName name the pod, for logs and results.
	PodNamespace, PodName string
	// PodIP is the address TCP and HTTP probes dial, unless the handler
	// names a host.
	PodIP string
	// Probe is the probe: exactly one of exec, tcpSocket and httpGet, and
	// its timing fields. Zero timing fields take the defaults described in
	// the package documentation (1 s, 1 s, 1 s, 1, 1), not the Kubernetes
	// API defaults.
	Probe corev1.Probe
	// ContainerPorts are the probed container's ports from the pod spec;
	// they resolve a tcpSocket or httpGet port given by name.
	ContainerPorts []corev1.ContainerPort
}

// deepCopy returns a copy of s that shares no memory with it.
func (s *Spec) deepCopy() Spec {
	out := *s
	s.Probe.DeepCopyInto(&out.Probe)
	out.ContainerPorts = slices.Clone(s.ContainerPorts)
	return out
}

// Result is the reported state of one probe.
type Result struct {
	Key
	// PodNamespace and PodName name the pod (copied from the Spec).
	PodNamespace, PodName string
	// State is the probe's state.
	State State
	// Message is the probe's output: an exec probe's stdout on success and
	// stderr on failure, an HTTP probe's body or status, a TCP probe's dial
	// error, or why the state was set without probing. At most
	// MaxMessageBytes bytes.
	Message string
	// LastProbeTime is when the container was last looked at or probed
	// (including probes whose result was below its threshold and did not
	// change State).
	LastProbeTime time.Time
	// LastTransitionTime is when State last changed.
	LastTransitionTime time.Time
	// ContainerID is the CRI id of the container the result is about. A
	// result passed to Restore is kept only while the container has this id.
	ContainerID string
}

// Container is what a probe worker needs to know about the container it
// probes.
type Container struct {
	// ID is the CRI container id of the latest attempt of the container.
	ID string
	// Running reports whether the container is running.
	Running bool
	// StartedAt is when the container started; it may be zero only when the
	// container is not running.
	StartedAt time.Time
}

// Runtime is the container runtime as the probe runner uses it. CRIRuntime
// implements it over the node's CRI; probestest.Runtime is a fake.
type Runtime interface {
	// ContainerOf returns the latest attempt of the container named
	// container of the pod with UID podUID. It returns an error wrapping
	// ErrContainerNotFound when the runtime holds no such container, and
	// another error when it could not tell.
	ContainerOf(ctx context.Context, podUID, container string) (Container, error)
	// ExecSync runs cmd in the container with CRI id containerID and waits
	// at most timeout for it. A command that ran and exited non-zero is not
	// an error: its exit code is returned with its output. A command that
	// did not finish within timeout gives an error wrapping ErrExecTimeout;
	// any other error means the command could not be run or waited for.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error)
}

var (
	// ErrContainerNotFound is wrapped by Runtime.ContainerOf when the
	// container does not exist (yet, or any more) on the node.
	ErrContainerNotFound = errors.New("container not found")
	// ErrExecTimeout is wrapped by Runtime.ExecSync when the command ran
	// out of time.
	ErrExecTimeout = errors.New("exec timed out")
)
