package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// ParseContainerID splits a container id as a pod's status shows it,
// "<runtime>://<id>" (e.g. "containerd://0a1b..."), into the runtime's name
// and the CRI container id. An id without the "://" separator is returned
// whole, with an empty runtime.
func ParseContainerID(s string) (runtime, id string) {
	if rt, id, ok := strings.Cut(s, "://"); ok {
		return rt, id
	}
	return "", s
}

// PodContainers returns the latest attempt of each container name of the
// pod with UID podUID, sorted by name, as ReadInventory describes them
// (state, attempt, restart count, start time, kubelet's annotations). It
// finds the containers by the pod-UID label kubelet puts on them, so it never
// returns a container of another pod of the same name. A pod with no
// containers on the node gives an empty list. Only a failed list, or ctx
// ending, is an error; status calls that fail become the containers'
// warnings.
func (r *Runtime) PodContainers(ctx context.Context, podUID string) ([]Container, error) {
	if podUID == "" {
		return nil, errors.New("list containers of pod: empty pod UID")
	}
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{LabelPodUID: podUID},
	})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", podUID, err)
	}
	out, warnings, err := latestAttempts(ctx, r.rs, cs)
	if err != nil {
		return nil, fmt.Errorf("read containers of pod %s: %w", podUID, err)
	}
	for _, w := range warnings {
		klog.FromContext(ctx).V(2).Info("Pod containers warning", "podUID", podUID, "warning", w)
	}
	return out, nil
}

// StopContainer stops the container with CRI id id, as kubelet does when it
// kills a container: the runtime sends the stop signal and, when timeout has
// passed, kills it. The timeout is sent in whole seconds, rounded up; zero
// (or less) means no grace at all. Stopping an exited container is not an
// error for conforming runtimes.
func (r *Runtime) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	if err := r.rs.StopContainer(ctx, id, wholeSeconds(timeout)); err != nil {
		return fmt.Errorf("stop container %q: %w", id, err)
	}
	return nil
}

// ContainerEnv returns the environment of the container with CRI id id
// as the runtime started it, by variable name: the process env of its OCI
// spec (or else the env of its CRI config) from the runtime's verbose
// container status, where a later entry of a name wins. It never runs
// anything inside the container, so images without a shell or an env
// binary work.
func (r *Runtime) ContainerEnv(ctx context.Context, id string) (map[string]string, error) {
	resp, err := r.rs.ContainerStatus(ctx, id, true)
	if err != nil {
		return nil, fmt.Errorf("status of container %q: %w", id, err)
	}
	raw := resp.GetInfo()["info"]
	if raw == "" {
		return nil, fmt.Errorf("container %q: the runtime reports no verbose info to read its env from", id)
	}
	var info struct {
		RuntimeSpec *struct {
			Process *struct {
				Env []string `json:"env"`
			} `json:"process"`
		} `json:"runtimeSpec"`
		Config *struct {
			Envs []struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			} `json:"envs"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return nil, fmt.Errorf("container %q: verbose info: %w", id, err)
	}
	env := map[string]string{}
	switch {
	case info.RuntimeSpec != nil && info.RuntimeSpec.Process != nil:
		for _, kv := range info.RuntimeSpec.Process.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	case info.Config != nil:
		for _, e := range info.Config.Envs {
			env[e.Key] = e.Value
		}
	default:
		return nil, fmt.Errorf("container %q: verbose info has neither runtimeSpec.process nor config", id)
	}
	return env, nil
}

// ExecSync runs cmd in the container with CRI id id and waits for it, at
// most timeout (sent to the runtime in whole seconds, rounded up; zero means
// no limit). A command that ran and exited non-zero is not an error: its
// exit code is returned with its output. err is set only when the command
// could not be run or waited for (including timing out).
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error) {
	stdout, stderr, err = r.rs.ExecSync(ctx, id, cmd, time.Duration(wholeSeconds(timeout))*time.Second)
	if err != nil {
		var exit utilexec.ExitError
		if errors.As(err, &exit) {
			return stdout, stderr, clampExitCode(exit.ExitStatus()), nil
		}
		return stdout, stderr, 0, fmt.Errorf("exec in container %q: %w", id, err)
	}
	return stdout, stderr, 0, nil
}

// wholeSeconds rounds d up to whole seconds; zero and less become 0.
func wholeSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

func clampExitCode(code int) int32 {
	switch {
	case code > math.MaxInt32:
		return math.MaxInt32
	case code < math.MinInt32:
		return math.MinInt32
	default:
		return int32(code)
	}
}
