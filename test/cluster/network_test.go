package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"800bit", 800, false},
		{"100kbit", 100_000, false},
		{"10mbit", 10_000_000, false},
		{"1gbit", 1_000_000_000, false},
		{"10mbps", 0, true},
		{"0mbit", 0, true},
		{"fast", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseRate(tt.in)
			if tt.wantErr {
				require.ErrorContains(t, err, "use a positive integer")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
