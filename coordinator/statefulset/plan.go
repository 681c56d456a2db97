package statefulset

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/coordinator/workload/lifecycle"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/coordinator/workload/updatesort"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// input is what one sync knows about a StatefulSet.
type input struct {
	set *v1beta1.StatefulSet
	// pods are the set's pods, terminating ones included.
	pods []*corev1.Pod
	// current and update are the revision names (<set>-<hash>) the
	// status' currentRevision and the template are at.
	current, update string
	now             time.Time
	// updatesSeen is false while in-place updates the controller started
	// are not in the informer yet: no further update starts.
	updatesSeen bool
	// inPlace returns the in-place update of pod to the update revision,
	// or an error when it cannot be done in place; nil when the policy is
	// ReCreate.
	inPlace func(pod *corev1.Pod) (*inplace.Spec, error)
	// claim returns the set's PVC of that name, nil when there is none.
	claim func(name string) *corev1.PersistentVolumeClaim
	// resizeClaims is true when the rolling update expands PVCs to their
	// templates (gate StatefulSetAutoResizePVCGate and
	// volumeClaimUpdateStrategy OnPodRollingUpdate).
	resizeClaims bool
}

// deletion is a pod to delete, and why.
type deletion struct {
	pod *corev1.Pod
	why string
}

// create is a missing pod to create.
type create struct {
	ordinal int
	// revision is the revision name to create it at.
	revision string
}

// plan is what one sync does. Actions are in the order to carry them out;
// a monotonic (OrderedReady) set plans at most one.
type plan struct {
	status  v1beta1.StatefulSetStatus
	creates []create
	deletes []deletion
	// updates are pods to update in place to the update revision, with
	// their update.
	updates []inPlaceUpdate
	// condemned are the pods whose ordinals are no longer wanted
	// (ascending), for the PVC retention policy.
	condemned []*corev1.Pod
	// blocked says why the plan stops short, for the log.
	blocked string
	// failedUpdate, when set, is the FailedUpdatePod condition's message
	// (InPlaceOnly and a change that cannot be done in place).
	failedUpdate string
	// resizes are PVCs to expand to their templates before their pods
	// are updated.
	resizes []claimResize
	// claimProblem, when set, says which PVC stops the rolling update.
	claimProblem string
	// requeueAfter is when to look again for a pod to become available.
	requeueAfter time.Duration
}

// inPlaceUpdate is one pod to update in place.
type inPlaceUpdate struct {
	pod  *corev1.Pod
	spec *inplace.Spec
}

// waitFor makes the plan look again after d, if sooner than planned.
func (p *plan) waitFor(d time.Duration) {
	if d > 0 && (p.requeueAfter == 0 || d < p.requeueAfter) {
		p.requeueAfter = d
	}
}

// startOrdinal is the first ordinal (spec.ordinals.start, default 0).
func startOrdinal(set *v1beta1.StatefulSet) int {
	if set.Spec.Ordinals != nil && set.Spec.Ordinals.Start > 0 {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// ordinalRanges are inclusive ranges of ordinals.
type ordinalRanges [][2]int

// reserved parses spec.reserveOrdinals: integers and "a-b" ranges
// (inclusive), kept as ranges so "0-2147483647" costs nothing. The
// webhook rejects anything else; here it is skipped.
func reserved(set *v1beta1.StatefulSet) ordinalRanges {
	var out ordinalRanges
	for _, r := range set.Spec.ReserveOrdinals {
		if r.Type == intstr.Int {
			out = append(out, [2]int{r.IntValue(), r.IntValue()})
			continue
		}
		if lo, hi, ok := parseRange(r.StrVal); ok {
			out = append(out, [2]int{lo, hi})
		}
	}
	return out
}

// parseRange parses "a-b" (a <= b, both >= 0) or a plain number.
func parseRange(s string) (lo, hi int, ok bool) {
	s = strings.TrimSpace(s)
	a, b, isRange := strings.Cut(s, "-")
	lo, err := strconv.Atoi(strings.TrimSpace(a))
	if err != nil || lo < 0 {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	hi, err = strconv.Atoi(strings.TrimSpace(b))
	if err != nil || hi < lo {
		return 0, 0, false
	}
	return lo, hi, true
}

// wantedOrdinals are the ordinals the set's replicas take, ascending: from
// ordinals.start up, skipping reserveOrdinals.
func wantedOrdinals(set *v1beta1.StatefulSet) []int {
	skip := reserved(set)
	n := int(ptr.Deref(set.Spec.Replicas, 1))
	out := make([]int, 0, n)
	for ord := startOrdinal(set); len(out) < n; ord++ {
		i := slices.IndexFunc(skip, func(x [2]int) bool { return x[0] <= ord && ord <= x[1] })
		if i < 0 {
			out = append(out, ord)
			continue
		}
		ord = skip[i][1] // past the reserved range at once
	}
	return out
}

// ordinalOf is the ordinal in the pod's name <set>-<ordinal>, or -1.
func ordinalOf(set string, pod *corev1.Pod) int {
	rest, ok := strings.CutPrefix(pod.Name, set+"-")
	if !ok {
		return -1
	}
	ord, err := strconv.Atoi(rest)
	if err != nil || ord < 0 || strconv.Itoa(ord) != rest {
		return -1
	}
	return ord
}

// revisionOf is the pod's revision name.
func revisionOf(p *corev1.Pod) string { return p.Labels[wellknown.LabelControllerRevisionHash] }

// terminating reports whether the pod is being deleted.
func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// healthy reports whether the pod runs, is Ready and is not terminating.
func healthy(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podstatus.ReadySince(p) != nil && !terminating(p)
}

// available reports whether the pod is healthy and has been ready for
// minReady at now; when it is healthy but not yet available, wait is how
// long until it is.
func available(p *corev1.Pod, minReady time.Duration, now time.Time) (ok bool, wait time.Duration) {
	if !healthy(p) {
		return false, 0
	}
	if podstatus.Available(p, minReady, now) {
		return true, 0
	}
	return false, podstatus.ReadySince(p).Add(minReady).Sub(now)
}

// failed reports whether the pod ended and must be recreated.
func failed(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// minReadySeconds is rollingUpdate.minReadySeconds.
func minReadySeconds(set *v1beta1.StatefulSet) time.Duration {
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MinReadySeconds != nil {
		return time.Duration(*ru.MinReadySeconds) * time.Second
	}
	return 0
}

// newPlan decides one step of the set toward its spec, as the upstream
// StatefulSet controller with OpenKruise's additions does:
//
//  1. Pods at wanted ordinals are the replicas; the rest are condemned.
//  2. Replicas in ascending ordinal order: failed ones are deleted,
//     missing ones created. OrderedReady stops at the first action and at
//     the first pod that is not available, so each pod waits for its
//     predecessors; Parallel goes on, unless scaleStrategy.maxUnavailable
//     bounds how many pods may be unavailable (or created) at once.
//  3. Condemned pods in descending ordinal order are deleted (through the
//     preDelete hook); OrderedReady one at a time, after every replica is
//     available.
//  4. Replicas labelled apps.kruise.io/specified-delete are deleted (to
//     come back at the same ordinal) within maxUnavailable. Rolling
//     update (not OnDelete, not paused): the replicas above the
//     partition (partition counts pods kept at the current revision, the
//     lowest ordinals) are updated, highest ordinal first (or by
//     unorderedUpdate.priorityStrategy with Parallel), in place when the
//     policy allows and the change permits, else recreated, while fewer
//     than maxUnavailable (1 for OrderedReady) are unavailable.
func newPlan(in input) (*plan, error) {
	set := in.set
	p := &plan{}
	minReady := minReadySeconds(set)
	st := &p.status
	st.ObservedGeneration = set.Generation
	st.CurrentRevision, st.UpdateRevision = in.current, in.update
	st.CollisionCount = set.Status.CollisionCount
	st.Conditions = slices.DeleteFunc(slices.Clone(set.Status.Conditions), func(c appsv1.StatefulSetCondition) bool {
		return c.Type == v1beta1.FailedUpdatePod || c.Type == v1beta1.FailedCreatePod
	})
	if sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector); err == nil {
		st.LabelSelector = sel.String()
	}

	ords := wantedOrdinals(set)
	if in.claim == nil {
		in.claim = func(string) *corev1.PersistentVolumeClaim { return nil }
	}
	st.VolumeClaims = volumeClaimStatus(set, ords, in.claim)
	position := make(map[int]int, len(ords))
	for i, o := range ords {
		position[o] = i
	}
	replicas := make([]*corev1.Pod, len(ords))
	for _, pod := range in.pods {
		st.Replicas++
		rev := revisionOf(pod)
		if healthy(pod) {
			st.ReadyReplicas++
			ok, _ := available(pod, minReady, in.now)
			if ok {
				st.AvailableReplicas++
			}
			if rev == in.update {
				st.UpdatedReadyReplicas++
				if ok {
					st.UpdatedAvailableReplicas++
				}
			}
		}
		if !terminating(pod) {
			if rev == in.current {
				st.CurrentReplicas++
			}
			if rev == in.update {
				st.UpdatedReplicas++
			}
		}
		ord := ordinalOf(set.Name, pod)
		if ord < 0 {
			continue
		}
		if i, ok := position[ord]; ok {
			replicas[i] = pod
		} else {
			p.condemned = append(p.condemned, pod)
		}
	}
	sort.Slice(p.condemned, func(i, j int) bool {
		return ordinalOf(set.Name, p.condemned[i]) < ordinalOf(set.Name, p.condemned[j])
	})
	completeRollingUpdate(set, st)
	if set.DeletionTimestamp != nil {
		return p, nil
	}

	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	replicaCount := int32(len(ords))
	var scaleBudget *int
	if ss := set.Spec.ScaleStrategy; ss != nil && ss.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(ss.MaxUnavailable, int(replicaCount), false)
		if err != nil {
			return nil, fmt.Errorf("spec.scaleStrategy.maxUnavailable: %w", err)
		}
		n = max(n, 1)
		scaleBudget = &n
	}
	// spend takes one from the scale budget and reports whether it is
	// used up: always for OrderedReady (which then stops the plan), when
	// the budget is spent for a bounded Parallel set (which then creates
	// no more pods, but goes on to scale down and update), never for an
	// unbounded one.
	spend := func() bool {
		if monotonic {
			return true
		}
		if scaleBudget == nil {
			return false
		}
		*scaleBudget--
		return *scaleBudget <= 0
	}
	creating := true
	partition := partitionOf(set, replicaCount)
	rolling := set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType

	// 2. replicas, lowest ordinal first.
	for i, pod := range replicas {
		var why string
		switch {
		case pod != nil && failed(pod) && !terminating(pod):
			p.deletes = append(p.deletes, deletion{pod, fmt.Sprintf("recreating pod %s: it %s", pod.Name, strings.ToLower(string(pod.Status.Phase)))})
			why = "recreating failed pod " + pod.Name
		case pod == nil && !creating:
			continue
		case pod == nil:
			rev := in.update
			if rolling && int32(i) < partition && in.current != "" {
				rev = in.current
			}
			p.creates = append(p.creates, create{ordinal: ords[i], revision: rev})
			why = fmt.Sprintf("creating pod %s-%d", set.Name, ords[i])
		case terminating(pod):
			if !monotonic && scaleBudget == nil {
				continue
			}
			why = "waiting for pod " + pod.Name + " to terminate"
		case monotonic || scaleBudget != nil:
			ok, wait := available(pod, minReady, in.now)
			if ok {
				continue
			}
			p.waitFor(wait)
			why = "waiting for pod " + pod.Name + " to be running and available"
		default:
			continue
		}
		if spend() {
			p.blocked = why
			if monotonic {
				return p, nil
			}
			creating = false
		}
	}

	// 3. condemned pods, highest ordinal first.
	firstUnhealthy := firstUnhealthyPod(set.Name, replicas, p.condemned)
	for i := len(p.condemned) - 1; i >= 0; i-- {
		pod := p.condemned[i]
		if terminating(pod) {
			if monotonic {
				p.blocked = "waiting for pod " + pod.Name + " to terminate before the next scale-down"
				return p, nil
			}
			continue
		}
		if ok, wait := available(pod, minReady, in.now); !ok && monotonic && pod != firstUnhealthy {
			p.waitFor(wait)
			p.blocked = "waiting for pod " + firstUnhealthy.Name + " to be running and available before scaling down"
			return p, nil
		}
		p.deletes = append(p.deletes, deletion{pod, "scale down"})
		if monotonic {
			p.blocked = "scaling down one pod at a time"
			return p, nil
		}
	}

	// 4. specified deletes, then the rolling update, within
	// maxUnavailable.
	ru := set.Spec.UpdateStrategy.RollingUpdate
	if !in.updatesSeen {
		p.blocked = "waiting for the informer to show the in-place updates started"
		return p, nil
	}
	maxUnavailable := 1
	if ru != nil && ru.MaxUnavailable != nil && !monotonic {
		n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(replicaCount), false)
		if err != nil {
			return nil, fmt.Errorf("spec.updateStrategy.rollingUpdate.maxUnavailable: %w", err)
		}
		maxUnavailable = max(n, 1)
	}
	claimsGrowingAt := func(i int) bool { return in.resizeClaims && claimsGrowing(in, ords[i]) }
	deleted := p.specifiedDeletes(replicas, maxUnavailable, minReady, in.now, claimsGrowingAt)
	switch {
	case !rolling:
		return p, nil
	case ru != nil && ru.Paused:
		p.blocked = "rolling update paused"
		return p, nil
	}
	unavailable := len(deleted)
	for _, i := range updateOrder(set, replicas, in.update, partition, monotonic) {
		if unavailable >= maxUnavailable {
			p.blocked = fmt.Sprintf("%d pods unavailable during the update, maxUnavailable %d", unavailable, maxUnavailable)
			return p, nil
		}
		pod := replicas[i]
		if pod != nil && deleted[pod.UID] {
			// counted already
		} else if pod == nil {
			unavailable++ // still to be created
		} else {
			resizing := false
			if in.resizeClaims && !terminating(pod) {
				pending, stop := p.expandClaims(in, pod, ords[i])
				if stop {
					return p, nil
				}
				resizing = pending
			}
			if revisionOf(pod) != in.update && !terminating(pod) && !resizing {
				if stop := p.updateOne(in, pod); stop {
					return p, nil
				}
			}
			switch ok, wait := available(pod, minReady, in.now); {
			case revisionOf(pod) != in.update || !healthy(pod) || inplace.InProgress(pod) ||
				resizing || claimsGrowingAt(i):
				unavailable++
			case !ok:
				p.waitFor(wait)
				unavailable++
			}
		}
		if unavailable >= maxUnavailable {
			p.blocked = fmt.Sprintf("%d pods unavailable during the update, maxUnavailable %d", unavailable, maxUnavailable)
			return p, nil
		}
	}
	return p, nil
}

// specifiedDeletes plans the deletion of the replicas labelled
// apps.kruise.io/specified-delete (to be recreated at the same ordinal),
// highest ordinal first, as long as no more than maxUnavailable replicas
// are unavailable; a labelled pod that is unavailable already goes at
// once. A replica whose PVC is still being resized (growing) counts as
// unavailable. It returns the pods planned.
func (p *plan) specifiedDeletes(replicas []*corev1.Pod, maxUnavailable int, minReady time.Duration, now time.Time, growing func(i int) bool) map[types.UID]bool {
	unavailable := 0
	for i, pod := range replicas {
		if pod == nil {
			unavailable++
		} else if ok, _ := available(pod, minReady, now); !ok || growing(i) {
			unavailable++
		}
	}
	deleted := map[types.UID]bool{}
	for i := len(replicas) - 1; i >= 0; i-- {
		pod := replicas[i]
		if pod == nil || terminating(pod) {
			continue
		}
		if _, ok := pod.Labels[wellknown.LabelSpecifiedDelete]; !ok {
			continue
		}
		if ok, _ := available(pod, minReady, now); ok {
			if unavailable >= maxUnavailable {
				continue
			}
			unavailable++
		}
		p.deletes = append(p.deletes, deletion{pod, "specified for deletion (" + wellknown.LabelSpecifiedDelete + ")"})
		deleted[pod.UID] = true
	}
	return deleted
}

// updateOne plans the update of one old pod: in place when it can be,
// recreated otherwise (InPlaceOnly: not at all, and the plan stops).
func (p *plan) updateOne(in input, pod *corev1.Pod) (stop bool) {
	ru := in.set.Spec.UpdateStrategy.RollingUpdate
	if in.inPlace != nil {
		state := lifecycle.State(pod)
		if state == wellknown.LifecycleStatePreparingDelete {
			p.deletes = append(p.deletes, deletion{pod, "recreated at revision " + in.update})
			return false
		}
		spec, err := in.inPlace(pod)
		if err == nil {
			p.updates = append(p.updates, inPlaceUpdate{pod, spec})
			return false
		}
		if ru != nil && ru.PodUpdatePolicy == v1beta1.InPlaceOnlyPodUpdateStrategyType {
			p.failedUpdate = fmt.Sprintf("podUpdatePolicy InPlaceOnly: pod %s cannot be updated in place to %s: %v; change only images, labels and annotations, or use InPlaceIfPossible or ReCreate", pod.Name, in.update, err)
			p.blocked = p.failedUpdate
			return true
		}
		p.deletes = append(p.deletes, deletion{pod, fmt.Sprintf("recreated at revision %s (not in place: %v)", in.update, err)})
		return false
	}
	p.deletes = append(p.deletes, deletion{pod, "recreated at revision " + in.update})
	return false
}

// partitionOf is rollingUpdate.partition within [0, replicas].
func partitionOf(set *v1beta1.StatefulSet, replicas int32) int32 {
	ru := set.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.Partition == nil {
		return 0
	}
	return min(max(*ru.Partition, 0), replicas)
}

// updateOrder lists the replica positions the rolling update goes
// through: pods already at the update revision (or terminating, or
// missing) first, then the old ones, each from the highest ordinal down
// (old ones by unorderedUpdate.priorityStrategy first with Parallel),
// replicas-partition of them in all.
func updateOrder(set *v1beta1.StatefulSet, replicas []*corev1.Pod, update string, partition int32, monotonic bool) []int {
	limit := len(replicas) - int(partition)
	if limit <= 0 {
		return nil
	}
	var done, waiting []int
	for i := len(replicas) - 1; i >= 0; i-- {
		pod := replicas[i]
		if pod == nil || terminating(pod) || revisionOf(pod) == update {
			done = append(done, i)
		} else {
			waiting = append(waiting, i)
		}
	}
	if ru := set.Spec.UpdateStrategy.RollingUpdate; !monotonic && ru != nil && ru.UnorderedUpdate != nil && ru.UnorderedUpdate.PriorityStrategy != nil {
		waiting = updatesort.SortIndexes(replicas, waiting, ru.UnorderedUpdate.PriorityStrategy, pub.UpdateScatterStrategy(nil))
	}
	return append(done, waiting...)[:min(limit, len(done)+len(waiting))]
}

// firstUnhealthyPod is the unhealthy pod with the lowest ordinal, replicas
// and condemned alike, or nil.
func firstUnhealthyPod(set string, replicas, condemned []*corev1.Pod) *corev1.Pod {
	var first *corev1.Pod
	for _, pod := range slices.Concat(replicas, condemned) {
		if pod != nil && !healthy(pod) && (first == nil || ordinalOf(set, pod) < ordinalOf(set, first)) {
			first = pod
		}
	}
	return first
}

// completeRollingUpdate makes the update revision current once every pod
// runs it and is ready.
func completeRollingUpdate(set *v1beta1.StatefulSet, st *v1beta1.StatefulSetStatus) {
	if set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType &&
		st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas && st.Replicas == ptr.Deref(set.Spec.Replicas, 1) {
		st.CurrentReplicas = st.UpdatedReplicas
		st.CurrentRevision = st.UpdateRevision
	}
}
