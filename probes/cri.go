package probes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	remote "k8s.io/cri-client/pkg"

	"github.com/shoal-io/shoal/cri"
)

// CRIRuntime is the Runtime of the node's CRI runtime. get returns the
// runtime, or an error while there is none (the agent reconnects it); the
// probes then keep their state until it is back.
//
// ContainerOf finds the latest attempt of the container by the pod-UID and
// container-name labels kubelet puts on its containers
// (cri.Runtime.LatestContainer). ExecSync runs through cri.Runtime.ExecSync:
// a non-zero exit is an exit code, not an error, and the CRI client's
// timeout (or a gRPC DeadlineExceeded) becomes ErrExecTimeout.
func CRIRuntime(get func() (*cri.Runtime, error)) Runtime {
	return criRuntime{get: get}
}

type criRuntime struct {
	get func() (*cri.Runtime, error)
}

// ContainerOf implements Runtime.
func (c criRuntime) ContainerOf(ctx context.Context, podUID, container string) (Container, error) {
	rt, err := c.get()
	if err != nil {
		return Container{}, fmt.Errorf("container %q of pod %s: no container runtime: %w", container, podUID, err)
	}
	ct, found, err := rt.LatestContainer(ctx, podUID, container)
	if err != nil {
		return Container{}, err
	}
	if !found {
		return Container{}, fmt.Errorf("container %q of pod %s: %w", container, podUID, ErrContainerNotFound)
	}
	out := Container{ID: ct.ID, Running: ct.State == cri.ContainerRunning}
	if ct.StartedAt != nil {
		out.StartedAt = *ct.StartedAt
	}
	if out.Running && out.StartedAt.IsZero() {
		return Container{}, fmt.Errorf("container %s (%q of pod %s) is running but the runtime reports no start time", ct.ID, container, podUID)
	}
	return out, nil
}

// ExecSync implements Runtime.
func (c criRuntime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
	rt, err := c.get()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("exec in container %s: no container runtime: %w", containerID, err)
	}
	stdout, stderr, code, err := rt.ExecSync(ctx, containerID, cmd, timeout)
	if err != nil && isTimeout(err) {
		err = fmt.Errorf("%w: %w", ErrExecTimeout, err)
	}
	return stdout, stderr, code, err
}

// isTimeout reports whether an ExecSync error says the command ran out of
// time: the CRI client's ErrCommandTimedOut, or the DeadlineExceeded it
// derives it from.
func isTimeout(err error) bool {
	if errors.Is(err, remote.ErrCommandTimedOut) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.DeadlineExceeded {
		return true
	}
	return false
}
