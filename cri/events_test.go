package cri_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/cri/critest"
)

// event is a runtime event about a container of the pod with UID uid.
func event(uid string, typ runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
	return &runtimeapi.ContainerEventResponse{ContainerId: "c1", ContainerEventType: typ,
		PodSandboxStatus: &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}}}
}

// woken reports whether ch holds a wake-up (and takes it).
func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestEventsHandle(t *testing.T) {
	tests := []struct {
		name   string
		ev     *runtimeapi.ContainerEventResponse
		wakesA bool
		wakesB bool
	}{
		{"the sandbox's pod", event("a", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT), true, false},
		{"another pod", event("b", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT), false, true},
		{"pod UID from the container's labels", &runtimeapi.ContainerEventResponse{
			ContainersStatuses: []*runtimeapi.ContainerStatus{{Labels: map[string]string{cri.LabelPodUID: "a"}}}}, true, false},
		{"no pod UID at all", &runtimeapi.ContainerEventResponse{ContainerId: "c1"}, false, false},
		{"a pod no one watches", event("c", runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e cri.Events
			a, stopA := e.Subscribe("a")
			defer stopA()
			b, stopB := e.Subscribe("b")
			defer stopB()
			e.Handle(tc.ev)
			require.Equal(t, tc.wakesA, woken(a), "subscriber of pod a")
			require.Equal(t, tc.wakesB, woken(b), "subscriber of pod b")
		})
	}
}

func TestEventsCoalesceAndUnsubscribe(t *testing.T) {
	var e cri.Events
	a1, stop1 := e.Subscribe("a")
	a2, stop2 := e.Subscribe("a")
	defer stop2()
	ev := event("a", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	e.Handle(ev)
	e.Handle(ev)
	require.True(t, woken(a1))
	require.False(t, woken(a1), "two events before a read wake once")
	require.True(t, woken(a2), "every subscriber of the pod")
	stop1()
	e.Handle(ev)
	require.False(t, woken(a1), "no wake-up after the subscription ended")
	require.True(t, woken(a2))
}

// TestEventsRun: Run streams a runtime's events to subscribers, and keeps
// trying (without failing) against a runtime without the stream; both
// return when ctx ends.
func TestEventsRun(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		f := critest.NewHooked(t)
		sb := f.AddSandbox(critest.Sandbox{Namespace: "default", Name: "web", UID: "uid-web"})
		c := f.AddContainer(sb, critest.Container{Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING})
		var e cri.Events
		wake, stop := e.Subscribe("uid-web")
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx, func() (*cri.Runtime, error) { return f.Runtime, nil }) }()
		require.Eventually(t, e.Connected, 10*time.Second, time.Millisecond)

		f.Restart(c.ID, runtimeapi.ContainerState_CONTAINER_RUNNING)
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("no wake-up for the pod's restarted container")
		}
		cancel()
		require.NoError(t, <-done)
		require.False(t, e.Connected())
	})
	t.Run("no runtime yet, then one without the stream", func(t *testing.T) {
		f := critest.New(t) // its GetContainerEvents returns at once
		var calls atomic.Int32
		runtime := func() (*cri.Runtime, error) {
			if calls.Add(1) == 1 {
				return nil, errors.New("no runtime yet")
			}
			return f.Runtime, nil
		}
		var e cri.Events
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx, runtime) }()
		require.Eventually(t, func() bool { return calls.Load() >= 3 }, 10*time.Second, time.Millisecond,
			"Run keeps opening the stream again")
		require.False(t, e.Connected())
		cancel()
		require.NoError(t, <-done)
	})
}

func TestEventsToken(t *testing.T) {
	var e cri.Events
	before, connected := e.Token("uid-web")
	require.False(t, connected, "no stream yet")
	other, _ := e.Token("uid-db")
	e.Handle(&runtimeapi.ContainerEventResponse{PodSandboxStatus: &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-web"}}})
	after, _ := e.Token("uid-web")
	require.NotEqual(t, before, after, "an event of the pod changes its token")
	again, _ := e.Token("uid-web")
	require.Equal(t, after, again, "no event, same token")
	now, _ := e.Token("uid-db")
	require.NotEqual(t, other, now, "the first event starts an epoch: earlier tokens of every pod go stale")
}
