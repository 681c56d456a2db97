package webhook

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAnswerBy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		url    string
		within time.Duration // zero: no deadline
	}{
		{"the apiserver's timeout, less a fifth", "/validate?timeout=3s", 2400 * time.Millisecond},
		{"no timeout sent", "/validate", 0},
		{"an unreadable timeout is ignored", "/validate?timeout=soon", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := answerBy(httptest.NewRequest("POST", tc.url, nil))
			defer cancel()
			deadline, ok := ctx.Deadline()
			if tc.within == 0 {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.False(t, deadline.Before(start.Add(tc.within)))
			require.False(t, deadline.After(time.Now().Add(tc.within)))
		})
	}
}
