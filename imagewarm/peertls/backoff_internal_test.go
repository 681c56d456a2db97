package peertls

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoff(t *testing.T) {
	id, err := NewIdentity(Options{Node: "node-a"})
	require.NoError(t, err)
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{6, 32 * time.Second},
		{7, time.Minute},
		{100, time.Minute},
	} {
		t.Run(fmt.Sprintf("%d failures", tc.failures), func(t *testing.T) {
			for range 20 {
				got := id.backoff(tc.failures)
				require.LessOrEqual(t, got, tc.want)
				require.Greater(t, got, tc.want*4/5-1, "at most a fifth of jitter")
			}
		})
	}
}
