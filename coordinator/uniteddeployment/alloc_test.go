package uniteddeployment

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// ud is a UnitedDeployment of replicas with subsets.
func ud(replicas int32, subsets ...v1alpha1.Subset) *v1alpha1.UnitedDeployment {
	return &v1alpha1.UnitedDeployment{Spec: v1alpha1.UnitedDeploymentSpec{
		Replicas: ptr.To(replicas), Topology: v1alpha1.Topology{Subsets: subsets},
	}}
}

// q parses "" (nil), "3" or "25%".
func q(s string) *intstr.IntOrString {
	if s == "" {
		return nil
	}
	v := intstr.Parse(s)
	return &v
}

// subset names a subset with replicas, minReplicas and maxReplicas.
func subset(name, replicas, minR, maxR string) v1alpha1.Subset {
	return v1alpha1.Subset{Name: name, Replicas: q(replicas), MinReplicas: q(minR), MaxReplicas: q(maxR)}
}

func TestAllocate(t *testing.T) {
	elastic := []v1alpha1.Subset{subset("subset-0", "", "1", "2"), subset("subset-1", "", "1", "2"), subset("subset-2", "", "1", "")}
	specific := []v1alpha1.Subset{subset("subset-0", "25%", "", ""), subset("subset-1", "25%", "", ""), subset("subset-2", "", "", "")}
	for _, tc := range []struct {
		name    string
		ud      *v1alpha1.UnitedDeployment
		current map[string]int32
		want    map[string]int32
		wantErr string
	}{
		// OpenKruise's "united deployment with elastic allocator".
		{"elastic: the sum of minReplicas", ud(3, elastic...), nil, map[string]int32{"subset-0": 1, "subset-1": 1, "subset-2": 1}, ""},
		{"elastic: more", ud(7, elastic...), nil, map[string]int32{"subset-0": 2, "subset-1": 2, "subset-2": 3}, ""},
		{"elastic: fewer than the minReplicas", ud(1, elastic...), nil, map[string]int32{"subset-0": 1, "subset-1": 0, "subset-2": 0}, ""},
		{"elastic: the doc comment's example", ud(5, subset("a", "", "2", "4"), subset("b", "", "2", "")), nil, map[string]int32{"a": 3, "b": 2}, ""},
		{"elastic: max below min", ud(5, subset("a", "", "3", "2")), nil, nil, "spec.topology.subsets[0]: maxReplicas 2 is below minReplicas 3"},
		// OpenKruise's "united deployment with specific allocator".
		{"specific: create", ud(3, specific...), nil, map[string]int32{"subset-0": 1, "subset-1": 1, "subset-2": 1}, ""},
		{"specific: scale up", ud(4, specific...), map[string]int32{"subset-0": 1, "subset-1": 1, "subset-2": 1}, map[string]int32{"subset-0": 1, "subset-1": 1, "subset-2": 2}, ""},
		{"specific: scale down", ud(1, specific...), map[string]int32{"subset-0": 1, "subset-1": 1, "subset-2": 2}, map[string]int32{"subset-0": 0, "subset-1": 0, "subset-2": 1}, ""},
		{"specific: even spread, remainder to the biggest", ud(5, subset("a", "", "", ""), subset("b", "", "", ""), subset("c", "", "", "")),
			map[string]int32{"a": 3}, map[string]int32{"a": 2, "b": 1, "c": 2}, ""},
		{"specific: too many", ud(2, subset("a", "3", "", ""), subset("b", "", "", "")), nil, nil, "add up to 3, more than spec.replicas 2"},
		{"specific: too few, all specified", ud(4, subset("a", "1", "", ""), subset("b", "1", "", "")), nil, nil, "add up to 2, less than spec.replicas 4"},
		{"bad percentage", ud(4, subset("a", "150%", "", ""), subset("b", "", "", "")), nil, nil, `spec.topology.subsets[0].replicas: "150%" is not a percentage`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := allocate(tc.ud, tc.current)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
