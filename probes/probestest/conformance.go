package probestest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/probes"
)

// Harness drives a probes.Runtime under test: it creates containers in the
// runtime behind it and decides how that runtime answers ExecSync.
type Harness interface {
	// Runtime is the probes.Runtime under test.
	Runtime() probes.Runtime
	// AddRunning adds a running container named name to pod podUID, started
	// at startedAt, and returns its id.
	AddRunning(podUID, name string, startedAt time.Time) string
	// AddCreated adds a created, never started, container and returns its id.
	AddCreated(podUID, name string) string
	// Exit makes container id exited.
	Exit(id string)
	// Restart replaces container id with a new attempt, running since
	// startedAt, and returns the new attempt's id.
	Restart(id string, startedAt time.Time) string
	// ReplyExec makes the runtime answer later ExecSync calls with r.
	ReplyExec(r ExecReply)
}

// ExecReply is how a Harness's runtime answers ExecSync.
type ExecReply struct {
	// Stdout, Stderr and ExitCode are the command's output and exit code.
	Stdout, Stderr string
	ExitCode       int32
	// TimedOut makes the runtime report that the command ran out of time,
	// the way that runtime does.
	TimedOut bool
	// Err makes the call fail with a transport-level error (the command
	// could not be run).
	Err error
}

// RuntimeConformance runs the suite every probes.Runtime must pass, with a
// fresh harness from newHarness for each case.
func RuntimeConformance(t *testing.T, newHarness func(t *testing.T) Harness) {
	ctx := context.Background()
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	t.Run("missing container is ErrContainerNotFound", func(t *testing.T) {
		h := newHarness(t)
		h.AddRunning("uid-other", "app", started)
		h.AddRunning("uid-a", "sidecar", started)
		_, err := h.Runtime().ContainerOf(ctx, "uid-a", "app")
		require.ErrorIs(t, err, probes.ErrContainerNotFound)
	})

	t.Run("running container", func(t *testing.T) {
		h := newHarness(t)
		id := h.AddRunning("uid-a", "app", started)
		h.AddRunning("uid-b", "app", started.Add(time.Minute))
		c, err := h.Runtime().ContainerOf(ctx, "uid-a", "app")
		require.NoError(t, err)
		require.Equal(t, id, c.ID)
		require.True(t, c.Running)
		require.True(t, started.Equal(c.StartedAt), "startedAt %v, want %v", c.StartedAt, started)
	})

	t.Run("created container is not running", func(t *testing.T) {
		h := newHarness(t)
		id := h.AddCreated("uid-a", "app")
		c, err := h.Runtime().ContainerOf(ctx, "uid-a", "app")
		require.NoError(t, err)
		require.Equal(t, id, c.ID)
		require.False(t, c.Running)
	})

	t.Run("exited container is not running", func(t *testing.T) {
		h := newHarness(t)
		id := h.AddRunning("uid-a", "app", started)
		h.Exit(id)
		c, err := h.Runtime().ContainerOf(ctx, "uid-a", "app")
		require.NoError(t, err)
		require.Equal(t, id, c.ID)
		require.False(t, c.Running)
	})

	t.Run("latest attempt after a restart", func(t *testing.T) {
		h := newHarness(t)
		old := h.AddRunning("uid-a", "app", started)
		id := h.Restart(old, started.Add(time.Hour))
		require.NotEqual(t, old, id)
		c, err := h.Runtime().ContainerOf(ctx, "uid-a", "app")
		require.NoError(t, err)
		require.Equal(t, id, c.ID)
		require.True(t, c.Running)
		require.True(t, started.Add(time.Hour).Equal(c.StartedAt))
	})

	execTests := []struct {
		name     string
		reply    ExecReply
		stdout   string
		stderr   string
		code     int32
		timeout  bool
		transErr bool
	}{
		{name: "exit 0", reply: ExecReply{Stdout: "ok\n"}, stdout: "ok\n"},
		{name: "non-zero exit is an exit code, not an error", reply: ExecReply{Stdout: "partial", Stderr: "boom", ExitCode: 3}, stdout: "partial", stderr: "boom", code: 3},
		{name: "timeout wraps ErrExecTimeout", reply: ExecReply{TimedOut: true}, timeout: true},
		{name: "transport error", reply: ExecReply{Err: errors.New("connection reset")}, transErr: true},
	}
	for _, tc := range execTests {
		t.Run("exec: "+tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := h.AddRunning("uid-a", "app", started)
			h.ReplyExec(tc.reply)
			stdout, stderr, code, err := h.Runtime().ExecSync(ctx, id, []string{"sh", "-c", "check"}, 2*time.Second)
			switch {
			case tc.timeout:
				require.ErrorIs(t, err, probes.ErrExecTimeout)
			case tc.transErr:
				require.Error(t, err)
				require.NotErrorIs(t, err, probes.ErrExecTimeout)
			default:
				require.NoError(t, err)
				require.Equal(t, tc.stdout, string(stdout))
				require.Equal(t, tc.stderr, string(stderr))
				require.Equal(t, tc.code, code)
			}
		})
	}
}
