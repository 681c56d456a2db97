// Package rollout is the arithmetic of a workload's rollout, with
// OpenKruise's rounding: partition, maxUnavailable, maxSurge and the
// scale-up maxUnavailable, each an integer or a percentage of replicas.
package rollout

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// scaled resolves v against replicas, rounding a percentage up or down.
func scaled(field string, v *intstr.IntOrString, replicas int32, roundUp bool) (int32, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(replicas), roundUp)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", field, v.String(), err)
	}
	return int32(n), nil
}

// Partition is how many of replicas pods keep the current (old) revision.
// A percentage is rounded up, so any partition above 0% keeps at least one
// old pod; but a percentage other than "100%" of more than one replica
// updates at least one pod ("99%" of 4 is 3, not 4). The result is within
// [0, replicas]; nil is 0.
func Partition(p *intstr.IntOrString, replicas int32) (int32, error) {
	if p == nil {
		return 0, nil
	}
	n, err := scaled("partition", p, replicas, true)
	if err != nil {
		return 0, err
	}
	if replicas > 1 && n == replicas && p.Type == intstr.String && p.StrVal != "100%" {
		n = replicas - 1
	}
	return min(max(n, 0), replicas), nil
}

// ExpectedUpdated is status.expectedUpdatedReplicas: the pods the
// partition lets reach the update revision.
func ExpectedUpdated(replicas, partition int32) int32 {
	return max(replicas-partition, 0)
}

// Limits are a rolling update's resolved maxUnavailable and maxSurge.
type Limits struct {
	// MaxUnavailable is how many pods may be unavailable at once.
	MaxUnavailable int32
	// MaxSurge is how many pods may exist above replicas.
	MaxSurge int32
}

// UpdateLimits resolves maxUnavailable and maxSurge against replicas:
// maxSurge rounds up; maxUnavailable rounds up too, unless there is a
// surge, when it rounds down (the surge pods carry the update). nil is 0
// for both (the API defaults maxUnavailable to 20%).
func UpdateLimits(maxUnavailable, maxSurge *intstr.IntOrString, replicas int32) (Limits, error) {
	var l Limits
	var err error
	if maxSurge != nil {
		if l.MaxSurge, err = scaled("maxSurge", maxSurge, replicas, true); err != nil {
			return Limits{}, err
		}
	}
	if maxUnavailable != nil {
		if l.MaxUnavailable, err = scaled("maxUnavailable", maxUnavailable, replicas, l.MaxSurge == 0); err != nil {
			return Limits{}, err
		}
	}
	return l, nil
}

// ScaleUpLimit resolves scaleStrategy.maxUnavailable, the most pods a
// scale-up leaves unavailable at once (rounded up); nil means no limit
// (-1).
func ScaleUpLimit(maxUnavailable *intstr.IntOrString, replicas int32) (int32, error) {
	if maxUnavailable == nil {
		return -1, nil
	}
	return scaled("scaleStrategy.maxUnavailable", maxUnavailable, replicas, true)
}
