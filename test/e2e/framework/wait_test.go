package framework

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPollEvery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{500 * time.Millisecond, 50 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
		{3 * time.Second, 150 * time.Millisecond},
		{20 * time.Second, time.Second},
		{5 * time.Minute, time.Second},
	} {
		t.Run(tc.timeout.String(), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, pollEvery(tc.timeout))
		})
	}
}

// TestWaitForSeesTheWholeWindow: a condition that becomes true 1.9 s into
// a 2 s window is seen, which a check each second would miss; one that
// becomes true after the window is not.
func TestWaitForSeesTheWholeWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := WaitFor(t.Context(), 2*time.Second, func(context.Context) (bool, error) {
			return time.Since(start) >= 1900*time.Millisecond, nil
		})
		require.NoError(t, err)

		start = time.Now()
		err = WaitFor(t.Context(), 2*time.Second, func(context.Context) (bool, error) {
			return time.Since(start) >= 2100*time.Millisecond, nil
		})
		require.Error(t, err)
	})
}
