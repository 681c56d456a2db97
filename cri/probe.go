package cri

import (
	"context"
	"errors"
	"fmt"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LatestContainer returns the latest attempt (highest attempt, then
// newest) of the container named name of the pod with UID podUID, with its
// state and times read from ContainerStatus; found is false when the
// runtime holds no such container. It lists only that container's
// attempts, by the pod-UID and container-name labels kubelet puts on its
// containers, and asks for the status of the latest one only, which makes
// it cheap enough to call at every probe period (PodContainers reads every
// container of the pod).
//
// Unlike PodContainers, a ContainerStatus call that fails is an error:
// callers need the container's real state, not the list's cached one.
func (r *Runtime) LatestContainer(ctx context.Context, podUID, name string) (c Container, found bool, err error) {
	if podUID == "" || name == "" {
		return Container{}, false, fmt.Errorf("find container %q of pod %q: empty pod UID or container name", name, podUID)
	}
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{LabelPodUID: podUID, LabelContainerName: name},
	})
	if err != nil {
		return Container{}, false, fmt.Errorf("list container %q of pod %s: %w", name, podUID, err)
	}
	if len(cs) == 0 {
		return Container{}, false, nil
	}
	newest := slices.MaxFunc(cs, compareContainers)
	c = containerFromCRI(name, newest)
	c.OlderAttempts = len(cs) - 1
	resp, err := r.rs.ContainerStatus(ctx, c.ID, false)
	if err != nil {
		return Container{}, false, fmt.Errorf("status of container %s (%q of pod %s): %w", c.ID, name, podUID, err)
	}
	st := resp.GetStatus()
	if st == nil {
		return Container{}, false, errors.New("status of container " + c.ID + ": the runtime returned no status")
	}
	c.State = containerState(st.GetState())
	if t := st.GetStartedAt(); t != 0 {
		ts := nanosToTime(t)
		c.StartedAt = &ts
	}
	if t := st.GetFinishedAt(); t != 0 {
		ts := nanosToTime(t)
		c.FinishedAt = &ts
	}
	if c.State == ContainerExited {
		code := st.GetExitCode()
		c.ExitCode = &code
	}
	c.Reason = st.GetReason()
	c.Message = st.GetMessage()
	return c, true, nil
}

// RunningContainerIDs lists the IDs of the runtime's running containers:
// one ListContainers call for the whole node, which probes share rather
// than asking for each container's status (a restarted container has a
// new ID, so a running ID is still the same instance).
func (r *Runtime) RunningContainerIDs(ctx context.Context) (map[string]struct{}, error) {
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return nil, fmt.Errorf("list running containers: %w", err)
	}
	ids := make(map[string]struct{}, len(cs))
	for _, c := range cs {
		ids[c.GetId()] = struct{}{}
	}
	return ids, nil
}
