package uniteddeployment

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// The Adaptive schedule strategy (spec.topology.scheduleStrategy), as
// OpenKruise runs it:
//
//   - A pod that has stayed unschedulable (PodScheduled=False, reason
//     Unschedulable) for rescheduleCriticalSeconds since its creation makes
//     its subset unschedulable: the subset's Schedulable condition turns
//     False, and its lastTransitionTime is when.
//   - By default the subset then keeps only its ready pods (at least its
//     minReplicas) and the rest go to later subsets; it is tried again
//     unschedulableLastSeconds after the condition turned False. Ready pods
//     of any subset are never moved: each subset keeps at least its ready
//     pods, so scale-in trims the last subsets, and pods that never got
//     ready, first.
//   - With reserveUnschedulablePods the unschedulable pods stay (labelled
//     apps.kruise.io/united-deployment-reserved-pod=true) and temporary
//     pods are created in later subsets for as many; once a reserved pod
//     has been ready for unschedulableLastSeconds it is no longer
//     reserved, and the temporary pods go.
//
// The controller does not watch pods: it requeues itself at the next
// moment one of these clocks runs out.

// Defaults of the adaptive strategy's durations.
const (
	defaultRescheduleCritical = 30 * time.Second
	defaultUnschedulableLast  = 300 * time.Second
)

// adaptiveSettings are the Adaptive strategy's knobs, defaults applied.
type adaptiveSettings struct {
	// on is true under the Adaptive strategy.
	on bool
	// reserve keeps unschedulable pods (reserveUnschedulablePods).
	reserve bool
	// critical is rescheduleCriticalSeconds: how long a pod may stay
	// unschedulable.
	critical time.Duration
	// last is unschedulableLastSeconds: how long a subset stays
	// unschedulable, and how long a reserved pod must be ready before it
	// is not reserved any more.
	last time.Duration
}

// adaptiveOf reads ud's schedule strategy.
func adaptiveOf(ud *v1alpha1.UnitedDeployment) adaptiveSettings {
	s := ud.Spec.Topology.ScheduleStrategy
	if s.Type != v1alpha1.AdaptiveUnitedDeploymentScheduleStrategyType {
		return adaptiveSettings{}
	}
	out := adaptiveSettings{on: true, critical: defaultRescheduleCritical, last: defaultUnschedulableLast}
	if a := s.Adaptive; a != nil {
		out.reserve = a.ReserveUnschedulablePods
		if a.RescheduleCriticalSeconds != nil {
			out.critical = time.Duration(*a.RescheduleCriticalSeconds) * time.Second
		}
		if a.UnschedulableLastSeconds != nil {
			out.last = time.Duration(*a.UnschedulableLastSeconds) * time.Second
		}
	}
	return out
}

// subsetState is what the adaptive allocators know of one subset.
type subsetState struct {
	// exists is true when the subset's workload exists.
	exists bool
	// replicas is the workload's spec.replicas; ready its ready pods.
	replicas, ready int32
	// pods are the subset's pods, terminating ones included.
	pods []*corev1.Pod
	// unschedulable: the subset takes no more pods for now.
	unschedulable bool
	// wasUnschedulable: reserve mode, the subset's Schedulable condition
	// was False when this reconcile began.
	wasUnschedulable bool
	// reserved counts the reserved pods (reserve mode).
	reserved int32
	// waiting: reserve mode, some pods the scheduler found no node for
	// are not reserved yet.
	waiting bool
}

// soonest keeps the shortest positive requeue delay.
type soonest time.Duration

// at lowers s to d when d is positive and sooner.
func (s *soonest) at(d time.Duration) {
	if d > 0 && (*s == 0 || d < time.Duration(*s)) {
		*s = soonest(d)
	}
}

// schedulable returns the subset's Schedulable condition, nil without one.
func schedulable(ss *v1alpha1.UnitedDeploymentSubsetStatus) *v1alpha1.UnitedDeploymentSubsetCondition {
	for i := range ss.Conditions {
		if ss.Conditions[i].Type == v1alpha1.UnitedDeploymentSubsetSchedulable {
			return &ss.Conditions[i]
		}
	}
	return nil
}

// setSchedulable sets the subset's Schedulable condition; the transition
// time moves only when the status or the reason changes.
func setSchedulable(ss *v1alpha1.UnitedDeploymentSubsetStatus, status corev1.ConditionStatus, reason, message string, now time.Time) {
	c := schedulable(ss)
	if c == nil {
		ss.Conditions = append(ss.Conditions, v1alpha1.UnitedDeploymentSubsetCondition{Type: v1alpha1.UnitedDeploymentSubsetSchedulable})
		c = &ss.Conditions[len(ss.Conditions)-1]
	} else if c.Status == status && c.Reason == reason {
		return
	}
	c.Status, c.Reason, c.Message, c.LastTransitionTime = status, reason, message, metav1.NewTime(now)
}

// pendingTimeout reports whether pod has stayed unscheduled for timeout
// since its creation, or else how long until it has (0: nothing to wait
// for: it is scheduled, running or going away).
func pendingTimeout(p *corev1.Pod, timeout time.Duration, now time.Time) (bool, time.Duration) {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
		return false, 0
	}
	deadline := p.CreationTimestamp.Add(timeout)
	switch {
	case !deadline.After(now) && workload.Unschedulable(p):
		return true, 0
	case !deadline.After(now):
		// Not yet seen unschedulable by the scheduler: look again soon.
		return false, time.Second
	}
	return false, deadline.Sub(now)
}

// observeDefault updates the Schedulable condition of an existing subset
// under the default (non-reserving) Adaptive strategy and marks the
// subset unschedulable: within unschedulableLastSeconds of the condition
// turning False, or when one of its pods has stayed unschedulable for
// rescheduleCriticalSeconds.
func observeDefault(ss *v1alpha1.UnitedDeploymentSubsetStatus, s *subsetState, a adaptiveSettings, now time.Time, requeue *soonest) {
	if c := schedulable(ss); c != nil && c.Status == corev1.ConditionFalse {
		if until := c.LastTransitionTime.Add(a.last); until.After(now) {
			s.unschedulable = true
			requeue.at(until.Sub(now))
		} else {
			setSchedulable(ss, corev1.ConditionTrue, "Recovered", fmt.Sprintf("tried again %s after its pods could not be scheduled", a.last), now)
		}
	}
	timedOut := 0
	for _, p := range s.pods {
		out, after := pendingTimeout(p, a.critical, now)
		if out {
			timedOut++
		}
		requeue.at(after)
	}
	if timedOut > 0 {
		s.unschedulable = true
		setSchedulable(ss, corev1.ConditionFalse, "Reschedule", fmt.Sprintf("%d pod(s) unschedulable for %s; new pods go to later subsets", timedOut, a.critical), now)
		requeue.at(a.last)
	}
}

// reservedLabel reads a pod's reserved label: its value, and whether it
// has one.
func reservedLabel(p *corev1.Pod) (reserved, labelled bool) {
	v, ok := p.Labels[wellknown.LabelUnitedDeploymentReservedPod]
	return v == "true", ok
}

// podReserved decides whether a pod is reserved now, and when to look
// again: a reserved pod stays reserved until it has been running and
// ready for unschedulableLastSeconds; another pod becomes reserved once it
// has stayed unschedulable for rescheduleCriticalSeconds.
func podReserved(p *corev1.Pod, wasReserved bool, a adaptiveSettings, now time.Time) (bool, time.Duration) {
	if !wasReserved {
		out, after := pendingTimeout(p, a.critical, now)
		if out {
			return true, a.last
		}
		return false, after
	}
	if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				until := c.LastTransitionTime.Add(a.last)
				if !until.After(now) {
					return false, 0
				}
				return true, until.Sub(now)
			}
		}
	}
	return true, a.last
}

// observeReserve counts the reserved pods of an existing subset under the
// reserving Adaptive strategy, returns the pods whose reserved label must
// change (pod name to value) and sets the Schedulable condition: False
// while the subset has reserved pods. A pod created while the subset was
// unschedulable is reserved at once, and so is every pod the scheduler
// found no node for once one of the subset's pods is reserved.
func observeReserve(ss *v1alpha1.UnitedDeploymentSubsetStatus, s *subsetState, a adaptiveSettings, now time.Time, requeue *soonest) map[string]bool {
	c := schedulable(ss)
	s.wasUnschedulable = c != nil && c.Status == corev1.ConditionFalse
	type decision struct {
		was, labelled, is bool
		after             time.Duration
	}
	decisions := make([]decision, len(s.pods))
	reservedAny := false
	for i, p := range s.pods {
		d := &decisions[i]
		d.was, d.labelled = reservedLabel(p)
		if s.wasUnschedulable && !d.labelled {
			d.is, d.after = true, a.last
		} else {
			d.is, d.after = podReserved(p, d.was, a, now)
		}
		reservedAny = reservedAny || d.is
	}
	label := map[string]bool{}
	for i, p := range s.pods {
		d := &decisions[i]
		if reservedAny && !d.is && p.DeletionTimestamp == nil && p.Spec.NodeName == "" && workload.Unschedulable(p) {
			// The subset is unschedulable: its other pods the scheduler
			// found no node for are reserved with it, not one by one as
			// each times out.
			d.is, d.after = true, a.last
		}
		switch {
		case d.is:
			s.reserved++
		case d.after > 0 && workload.Unschedulable(p):
			s.waiting = true
		}
		requeue.at(d.after)
		if d.is != d.was || !d.labelled {
			label[p.Name] = d.is
		}
	}
	if s.reserved > 0 {
		s.unschedulable = true
		setSchedulable(ss, corev1.ConditionFalse, "Reschedule", fmt.Sprintf("%d reserved pod(s): temporary pods run in later subsets", s.reserved), now)
	} else {
		setSchedulable(ss, corev1.ConditionTrue, "Reschedule", "no reserved pods", now)
	}
	return label
}

// allocateAdaptive is the default Adaptive allocator: each subset keeps
// its ready pods (up to its maximum) as its minimum; an unschedulable
// subset takes no more than its ready pods, but keeps its minReplicas.
func allocateAdaptive(total int32, subsets []v1alpha1.Subset, states map[string]*subsetState) (map[string]int32, error) {
	mins, maxs, err := minMax(total, subsets)
	if err != nil {
		return nil, err
	}
	for i, sub := range subsets {
		s := states[sub.Name]
		if s == nil || !s.exists {
			continue
		}
		if s.unschedulable {
			mins[i] = max(s.ready, mins[i])
			maxs[i] = min(s.ready, maxs[i])
			continue
		}
		if s.ready > mins[i] {
			mins[i] = min(s.ready, maxs[i])
		}
	}
	return fill(total, subsets, mins, maxs), nil
}

// reservation tracks one subset's share in allocateReserved: what it was
// given, and how many working pods it can still take.
type reservation struct {
	allocated, room int32
}

// take gives the subset up to `to` replicas out of rest, and returns how
// many of them count against the total: those beyond its room are
// reserved pods, for which temporary pods go to later subsets.
func (r *reservation) take(to, rest int32) int32 {
	add := max(min(to-r.allocated, rest), 0)
	r.allocated += add
	r.room -= add
	if r.room < 0 {
		return max(add+r.room, 0)
	}
	return add
}

// allocateReserved is the reserving Adaptive allocator: minimums, then
// maximums, in spec order, as fill does, except that a subset that is or
// was just unschedulable can hold only its replicas less its reserved
// pods as working pods, and an unschedulable one does not grow; what it
// cannot hold is given again to later subsets (temporary pods). Nor does a
// subset grow while the scheduler finds no node for some of its pods that
// are not reserved yet: subsets whose pods time out one after the other
// would otherwise take the replicas the first one gave up, and keep them
// as reserved pods.
func allocateReserved(total int32, subsets []v1alpha1.Subset, states map[string]*subsetState) (map[string]int32, error) {
	mins, maxs, err := minMax(total, subsets)
	if err != nil {
		return nil, err
	}
	recs := make([]reservation, len(subsets))
	for i, sub := range subsets {
		recs[i].room = math.MaxInt32
		if s := states[sub.Name]; s != nil && s.exists && (s.unschedulable || s.wasUnschedulable) {
			recs[i].room = s.replicas - s.reserved
		}
	}
	export := func() map[string]int32 {
		out := make(map[string]int32, len(subsets))
		for i, s := range subsets {
			out[s.Name] = recs[i].allocated
		}
		return out
	}
	rest := total
	for i := range subsets {
		if rest -= recs[i].take(mins[i], rest); rest <= 0 {
			return export(), nil
		}
	}
	for i, sub := range subsets {
		to := maxs[i]
		if s := states[sub.Name]; s != nil && s.exists {
			switch {
			case s.unschedulable:
				to = s.replicas
			case s.waiting:
				to = min(maxs[i], max(s.replicas, mins[i]))
			}
		}
		if rest -= recs[i].take(to, rest); rest <= 0 {
			return export(), nil
		}
	}
	return export(), nil
}

// reserveMaxUnavailable is the maxUnavailable a reserving subset's
// workload rolls out with while the subset is unschedulable: its pods
// that are not ready, so that pending reserved pods are replaced by pods
// of the new template rather than holding the rollout.
func reserveMaxUnavailable(s *subsetState) *int32 {
	if s == nil || !s.unschedulable {
		return nil
	}
	return ptr.To(max(s.replicas-s.ready, 0))
}
