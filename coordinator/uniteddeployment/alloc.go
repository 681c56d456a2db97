package uniteddeployment

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// subsetReplicas resolves a subset's replicas, minReplicas or maxReplicas
// against the UnitedDeployment's replicas: an integer as it is, a
// percentage rounded half up (25% of 3 is 1, 25% of 1 is 0), as OpenKruise
// rounds it.
func subsetReplicas(total int32, v intstr.IntOrString) (int32, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return 0, fmt.Errorf("%d is negative", v.IntVal)
		}
		return v.IntVal, nil
	}
	digits, ok := strings.CutSuffix(v.StrVal, "%")
	if !ok {
		return 0, fmt.Errorf("%q is neither an integer nor a percentage such as \"25%%\"", v.StrVal)
	}
	p, err := strconv.Atoi(digits)
	if err != nil || p < 0 || p > 100 {
		return 0, fmt.Errorf("%q is not a percentage from 0%% to 100%%", v.StrVal)
	}
	return int32(math.Floor(float64(total)*float64(p)/100 + 0.5)), nil
}

// allocate splits the UnitedDeployment's replicas over its subsets, given
// each existing subset's current replicas:
//   - with minReplicas or maxReplicas on any subset (the elastic
//     allocator), every subset first gets its minReplicas, in spec order,
//     while replicas last; then each gets up to its maxReplicas (no
//     maximum: all that is left), again in spec order;
//   - otherwise (the specific allocator), subsets with replicas get them,
//     and the rest is spread evenly over the others, the remainder going
//     to those with the most replicas now (then the greatest name).
//     Specified replicas above the total, or below it with every subset
//     specified, are an error that names the numbers.
func allocate(ud *v1alpha1.UnitedDeployment, current map[string]int32) (map[string]int32, error) {
	total := ptr.Deref(ud.Spec.Replicas, 1)
	subsets := ud.Spec.Topology.Subsets
	elastic := false
	for _, s := range subsets {
		elastic = elastic || s.MinReplicas != nil || s.MaxReplicas != nil
	}
	if elastic {
		return allocateElastic(total, subsets)
	}
	return allocateSpecific(total, subsets, current)
}

// allocateElastic is the min/max allocator: each subset, in spec order,
// gets its minimum while replicas last, then each up to its maximum.
func allocateElastic(total int32, subsets []v1alpha1.Subset) (map[string]int32, error) {
	mins, maxs, err := minMax(total, subsets)
	if err != nil {
		return nil, err
	}
	return fill(total, subsets, mins, maxs), nil
}

// minMax resolves every subset's minReplicas and maxReplicas (0 and
// unlimited when unset).
func minMax(total int32, subsets []v1alpha1.Subset) (mins, maxs []int32, err error) {
	mins, maxs = make([]int32, len(subsets)), make([]int32, len(subsets))
	for i, s := range subsets {
		maxs[i] = math.MaxInt32
		if s.MinReplicas != nil {
			if mins[i], err = subsetReplicas(total, *s.MinReplicas); err != nil {
				return nil, nil, fmt.Errorf("spec.topology.subsets[%d].minReplicas: %w", i, err)
			}
		}
		if s.MaxReplicas != nil {
			if maxs[i], err = subsetReplicas(total, *s.MaxReplicas); err != nil {
				return nil, nil, fmt.Errorf("spec.topology.subsets[%d].maxReplicas: %w", i, err)
			}
		}
		if mins[i] > maxs[i] {
			return nil, nil, fmt.Errorf("spec.topology.subsets[%d]: maxReplicas %d is below minReplicas %d", i, maxs[i], mins[i])
		}
	}
	return mins, maxs, nil
}

// fill gives each subset, in spec order, its minimum while replicas last,
// then each up to its maximum.
func fill(total int32, subsets []v1alpha1.Subset, mins, maxs []int32) map[string]int32 {
	out := make(map[string]int32, len(subsets))
	left := total
	for i, s := range subsets {
		n := max(min(mins[i], left), 0)
		out[s.Name] = n
		left -= n
	}
	for i, s := range subsets {
		n := max(min(maxs[i]-mins[i], left), 0)
		out[s.Name] += n
		left -= n
	}
	return out
}

// allocateSpecific is the allocator of subsets with fixed replicas.
func allocateSpecific(total int32, subsets []v1alpha1.Subset, current map[string]int32) (map[string]int32, error) {
	out := make(map[string]int32, len(subsets))
	var specified int32
	var rest []v1alpha1.Subset
	for i, s := range subsets {
		if s.Replicas == nil {
			rest = append(rest, s)
			continue
		}
		n, err := subsetReplicas(total, *s.Replicas)
		if err != nil {
			return nil, fmt.Errorf("spec.topology.subsets[%d].replicas: %w", i, err)
		}
		out[s.Name] = n
		specified += n
	}
	switch {
	case specified > total:
		return nil, fmt.Errorf("spec.topology.subsets: the subsets' replicas add up to %d, more than spec.replicas %d", specified, total)
	case specified < total && len(rest) == 0:
		return nil, fmt.Errorf("spec.topology.subsets: the subsets' replicas add up to %d, less than spec.replicas %d, and no subset takes the rest", specified, total)
	case len(rest) == 0:
		return out, nil
	}
	// The remainder goes to the subsets with the most replicas now.
	sort.SliceStable(rest, func(i, j int) bool {
		if current[rest[i].Name] != current[rest[j].Name] {
			return current[rest[i].Name] > current[rest[j].Name]
		}
		return rest[i].Name > rest[j].Name
	})
	left := total - specified
	even, remainder := left/int32(len(rest)), left%int32(len(rest))
	for _, s := range rest {
		out[s.Name] = even
		if remainder > 0 {
			out[s.Name]++
			remainder--
		}
	}
	return out, nil
}
