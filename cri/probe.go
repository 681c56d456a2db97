package cri

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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

// ContainerRunning reports whether the container with CRI id id runs, and
// since when: one ContainerStatus call, for a caller that knows the
// container already and only checks it is still the same instance,
// running (a restart is a new container id; the old one reads exited).
func (r *Runtime) ContainerRunning(ctx context.Context, id string) (running bool, startedAt time.Time, err error) {
	resp, err := r.rs.ContainerStatus(ctx, id, false)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("status of container %s: %w", id, err)
	}
	st := resp.GetStatus()
	if st == nil {
		return false, time.Time{}, errors.New("status of container " + id + ": the runtime returned no status")
	}
	if t := st.GetStartedAt(); t != 0 {
		startedAt = nanosToTime(t)
	}
	return containerState(st.GetState()) == ContainerRunning, startedAt, nil
}
