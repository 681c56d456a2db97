package features

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/component-base/featuregate"
)

func TestGates(t *testing.T) {
	for _, tc := range []struct {
		name, set string
		want      map[string]bool
		err       string
	}{
		{name: "defaults", want: map[string]bool{
			"CloneSetShortHash": false, "CloneSetPartitionRollback": false,
			"PreparingUpdateAsUpdate": false, "PreDownloadImageForInPlaceUpdate": true,
		}},
		{name: "set two", set: "CloneSetShortHash=true,PreDownloadImageForInPlaceUpdate=false", want: map[string]bool{
			"CloneSetShortHash": true, "PreDownloadImageForInPlaceUpdate": false, "PreparingUpdateAsUpdate": false,
		}},
		{name: "unknown gate", set: "NoSuchGate=true", err: "unrecognized feature gate: NoSuchGate"},
		{name: "not a bool", set: "CloneSetShortHash=yes", err: "invalid value of CloneSetShortHash=yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New()
			if tc.set != "" {
				err := g.Set(tc.set)
				if tc.err != "" {
					require.ErrorContains(t, err, tc.err)
					return
				}
				require.NoError(t, err)
			}
			for name, want := range tc.want {
				require.Equal(t, want, Enabled(g, featureOf(name)), name)
			}
		})
	}
	require.True(t, Enabled(nil, PreDownloadImageForInPlaceUpdate), "nil gates are the defaults")
	require.False(t, Enabled(nil, CloneSetShortHash), "nil gates are the defaults")
}

func featureOf(name string) featuregate.Feature { return featuregate.Feature(name) }
