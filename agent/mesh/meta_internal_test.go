package mesh

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLeavingMeta(t *testing.T) {
	tests := []struct {
		name     string
		meta     Meta
		wantMeta Meta
	}{
		{name: "fits", meta: Meta{Endpoint: "10.0.0.1:9480", Zone: "z"}, wantMeta: Meta{Endpoint: "10.0.0.1:9480", Zone: "z"}},
		{name: "too big with the flag", meta: Meta{Endpoint: strings.Repeat("x", 500)}, wantMeta: Meta{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := leavingMeta(tc.meta)
			require.LessOrEqual(t, len(b), MaxMetaSize)
			w, err := decodeWire(b)
			require.NoError(t, err)
			require.True(t, w.Leaving)
			require.Equal(t, tc.wantMeta, w.meta())
			m, err := DecodeMeta(b)
			require.NoError(t, err)
			require.Equal(t, tc.wantMeta, m)
		})
	}
}
