package rollout

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr(v intstr.IntOrString) *intstr.IntOrString { return &v }

func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        *intstr.IntOrString
		replicas int32
		want     int32
	}{
		{"unset is 0", nil, 5, 0},
		{"integer", ptr(intstr.FromInt32(3)), 5, 3},
		{"integer above replicas is clamped", ptr(intstr.FromInt32(9)), 5, 5},
		{"percent rounds up: 50% of 5", ptr(intstr.FromString("50%")), 5, 3},
		{"any percent above 0 keeps one old pod", ptr(intstr.FromString("1%")), 5, 1},
		{"99% of 4 updates exactly one pod (seed 000, v1.2)", ptr(intstr.FromString("99%")), 4, 3},
		{"100% of 4 updates none", ptr(intstr.FromString("100%")), 4, 4},
		{"0% updates all", ptr(intstr.FromString("0%")), 4, 0},
		{"99% of 1 replica keeps it (only more than one replica updates one)", ptr(intstr.FromString("99%")), 1, 1},
		{"no replicas", ptr(intstr.FromString("50%")), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Partition(tc.p, tc.replicas)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.replicas-tc.want, ExpectedUpdated(tc.replicas, got))
		})
	}
	_, err := Partition(ptr(intstr.FromString("half")), 4)
	require.ErrorContains(t, err, `partition "half"`)
}

func TestUpdateLimits(t *testing.T) {
	for _, tc := range []struct {
		name               string
		unavailable, surge *intstr.IntOrString
		replicas           int32
		want               Limits
	}{
		{"default 20% of 10", ptr(intstr.FromString("20%")), nil, 10, Limits{MaxUnavailable: 2}},
		{"20% of 3 rounds up without surge", ptr(intstr.FromString("20%")), nil, 3, Limits{MaxUnavailable: 1}},
		{"with a surge maxUnavailable rounds down", ptr(intstr.FromString("20%")), ptr(intstr.FromInt32(1)), 3, Limits{MaxUnavailable: 0, MaxSurge: 1}},
		{"maxSurge percent rounds up", ptr(intstr.FromInt32(0)), ptr(intstr.FromString("10%")), 5, Limits{MaxUnavailable: 0, MaxSurge: 1}},
		{"integers", ptr(intstr.FromInt32(2)), ptr(intstr.FromInt32(3)), 10, Limits{MaxUnavailable: 2, MaxSurge: 3}},
		{"unset", nil, nil, 10, Limits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UpdateLimits(tc.unavailable, tc.surge, tc.replicas)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := UpdateLimits(ptr(intstr.FromString("x%")), nil, 3)
	require.ErrorContains(t, err, "maxUnavailable")
}

func TestScaleUpLimit(t *testing.T) {
	n, err := ScaleUpLimit(nil, 10)
	require.NoError(t, err)
	require.EqualValues(t, -1, n)
	n, err = ScaleUpLimit(ptr(intstr.FromString("25%")), 10)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "rounded up")
}
