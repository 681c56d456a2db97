package cri_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
)

func TestLatestContainer(t *testing.T) {
	f := critest.New(t)
	web := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web"})
	// An earlier pod of the same name, with a container of the same name.
	stale := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web-old", Attempt: 0, ID: "sb-stale"})
	f.AddContainer(stale, critest.Container{Name: "app", Attempt: 9, State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: at(9)})
	f.AddContainer(web, critest.Container{Name: "app", Attempt: 0, State: runtimeapi.ContainerState_CONTAINER_EXITED, StartedAt: at(1), FinishedAt: at(2), ExitCode: 137, Reason: "Error"})
	latest := f.AddContainer(web, critest.Container{Name: "app", Attempt: 1, State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: at(3)})
	f.AddContainer(web, critest.Container{Name: "sidecar", Attempt: 4, State: runtimeapi.ContainerState_CONTAINER_CREATED})

	tests := []struct {
		name      string
		uid, cont string
		found     bool
		want      func(t *testing.T, c cri.Container)
	}{
		{name: "latest attempt of the pod's own container", uid: "uid-web", cont: "app", found: true, want: func(t *testing.T, c cri.Container) {
			require.Equal(t, latest.ID, c.ID)
			require.Equal(t, cri.ContainerRunning, c.State)
			require.EqualValues(t, 1, c.Attempt)
			require.Equal(t, 1, c.OlderAttempts)
			require.NotNil(t, c.StartedAt)
			require.True(t, at(3).Equal(*c.StartedAt))
			require.Nil(t, c.ExitCode)
		}},
		{name: "created container has no start time", uid: "uid-web", cont: "sidecar", found: true, want: func(t *testing.T, c cri.Container) {
			require.Equal(t, cri.ContainerCreated, c.State)
			require.Nil(t, c.StartedAt)
		}},
		{name: "no such container", uid: "uid-web", cont: "db"},
		{name: "no such pod", uid: "uid-gone", cont: "app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, found, err := f.Runtime.LatestContainer(t.Context(), tc.uid, tc.cont)
			require.NoError(t, err)
			require.Equal(t, tc.found, found)
			if tc.want != nil {
				tc.want(t, c)
			}
		})
	}

	t.Run("exited container", func(t *testing.T) {
		f.SetState(latest.ID, runtimeapi.ContainerState_CONTAINER_EXITED)
		c, found, err := f.Runtime.LatestContainer(t.Context(), "uid-web", "app")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, cri.ContainerExited, c.State)
		require.NotNil(t, c.ExitCode)
		require.NotNil(t, c.FinishedAt)
	})

	t.Run("errors", func(t *testing.T) {
		_, _, err := f.Runtime.LatestContainer(t.Context(), "", "app")
		require.Error(t, err)
		_, _, err = f.Runtime.LatestContainer(t.Context(), "uid-web", "")
		require.Error(t, err)

		f.RuntimeService.InjectError("ListContainers", errors.New("list failed"))
		_, _, err = f.Runtime.LatestContainer(t.Context(), "uid-web", "app")
		require.ErrorContains(t, err, "list failed")

		f.RuntimeService.InjectError("ContainerStatus", errors.New("status failed"))
		_, found, err := f.Runtime.LatestContainer(t.Context(), "uid-web", "app")
		require.ErrorContains(t, err, "status failed")
		require.False(t, found)
	})
}

func TestRunningContainerIDs(t *testing.T) {
	f := critest.New(t)
	sb := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web"})
	running := f.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING, StartedAt: at(1)})
	f.AddContainer(sb, critest.Container{Name: "old", State: runtimeapi.ContainerState_CONTAINER_EXITED, StartedAt: at(1), FinishedAt: at(2)})
	f.AddContainer(sb, critest.Container{Name: "new", State: runtimeapi.ContainerState_CONTAINER_CREATED})
	ids, err := f.Runtime.RunningContainerIDs(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[string]struct{}{running.ID: {}}, ids)
}
