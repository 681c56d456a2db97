package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/agent/state"
)

func TestOpenStateWaitsForThePreviousAgent(t *testing.T) {
	dir := t.TempDir()
	previous, err := state.Open(dir)
	require.NoError(t, err)

	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	type result struct {
		st  *state.Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := openState(t.Context(), dir, time.Minute, logger)
		done <- result{st, err}
	}()
	require.Eventually(t, func() bool {
		return strings.Contains(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), "Another agent holds the state dir")
	}, 10*time.Second, 5*time.Millisecond, "openState says it waits")
	require.NoError(t, previous.Close()) // the old agent exits
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.NoError(t, r.st.Close())
	case <-time.After(10 * time.Second):
		t.Fatal("openState did not take the state dir once it was free")
	}

	// Held for longer than the wait: the error says by whom.
	held, err := state.Open(dir)
	require.NoError(t, err)
	defer func() { require.NoError(t, held.Close()) }()
	_, err = openState(t.Context(), dir, 300*time.Millisecond, logger)
	require.ErrorIs(t, err, state.ErrLocked)
}
