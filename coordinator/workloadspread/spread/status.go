package spread

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// Outcome is a WorkloadSpread's computed status and what the controller
// does next.
type Outcome struct {
	// Status is the status to write.
	Status v1alpha1.WorkloadSpreadStatus
	// Recheck is the earliest time the status changes by itself (a record
	// expires, a pod's scheduling deadline passes, a subset becomes
	// schedulable again); zero when none does.
	Recheck time.Time
	// CreateExpired are creatingPods records dropped because their pod
	// never appeared; DeleteExpired are pods still present whose
	// deletingPods record was dropped.
	CreateExpired, DeleteExpired []string
	// Reschedule are, under the Adaptive strategy, the pods pending
	// unschedulable for longer than rescheduleCriticalSeconds (in any
	// subset but the last): the controller deletes them so the workload
	// creates them again, in another subset.
	Reschedule []*corev1.Pod
	// Recovered are the subsets that became schedulable again.
	Recovered []string
}

// soonest keeps the earliest non-zero time in *t.
func soonest(t *time.Time, at time.Time) {
	if t.IsZero() || at.Before(*t) {
		*t = at
	}
}

// RescheduleCriticalSeconds is the Adaptive strategy's deadline, 0 when
// ws does not reschedule.
func RescheduleCriticalSeconds(ws *v1alpha1.WorkloadSpread) int32 {
	s := ws.Spec.ScheduleStrategy
	if s.Type != v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType || s.Adaptive == nil || s.Adaptive.RescheduleCriticalSeconds == nil {
		return 0
	}
	return *s.Adaptive.RescheduleCriticalSeconds
}

// Status computes ws's status at now from its pods by subset and the
// workload's replicas, as OpenKruise's controller does. Per subset:
// replicas counts the active pods; missingReplicas starts at maxReplicas
// (Unlimited without one), one less per active pod (never below 0), one
// more per deletingPods record still valid, one less per creatingPods
// record still valid. A creatingPods record goes once its pod (by name or
// generated UID) shows, or after CreatePodTimeout; a deletingPods record
// once its pod is gone, or after DeletePodTimeout. With the Adaptive
// strategy and rescheduleCriticalSeconds set, each subset but the last
// gets a Schedulable condition, False while one of its pods has been
// pending unschedulable past the deadline and for
// MaxScheduledFailedDuration after; the last subset is always
// Schedulable True. Without it, no Schedulable condition is kept.
func Status(ws *v1alpha1.WorkloadSpread, g Groups, replicas int32, now time.Time) (Outcome, error) {
	out := Outcome{Status: v1alpha1.WorkloadSpreadStatus{
		ObservedGeneration: ws.Generation,
		SubsetStatuses:     make([]v1alpha1.WorkloadSpreadSubsetStatus, len(ws.Spec.Subsets)),
	}}
	critical := RescheduleCriticalSeconds(ws)
	for i := range ws.Spec.Subsets {
		s := &ws.Spec.Subsets[i]
		old := SubsetStatus(&ws.Status, s.Name)
		st, err := subsetStatus(s, g.BySubset[s.Name], old, replicas, now, &out)
		if err != nil {
			return out, err
		}
		switch {
		case critical <= 0:
			st.Conditions = withoutCondition(st.Conditions, v1alpha1.SubsetSchedulable)
		case i == len(ws.Spec.Subsets)-1:
			if c := Condition(old, v1alpha1.SubsetSchedulable); c != nil {
				setCondition(&st, *c)
			}
			setCondition(&st, newCondition(corev1.ConditionTrue, now))
		default:
			reschedule(s.Name, g.BySubset[s.Name], &st, old, time.Duration(critical)*time.Second, now, &out)
		}
		out.Status.SubsetStatuses[i] = st
	}
	return out, nil
}

// subsetStatus computes one subset's status.
func subsetStatus(s *v1alpha1.WorkloadSpreadSubset, pods []*corev1.Pod, old *v1alpha1.WorkloadSpreadSubsetStatus,
	replicas int32, now time.Time, out *Outcome) (v1alpha1.WorkloadSpreadSubsetStatus, error) {
	st := v1alpha1.WorkloadSpreadSubsetStatus{Name: s.Name, MissingReplicas: Unlimited,
		CreatingPods: map[string]metav1.Time{}, DeletingPods: map[string]metav1.Time{}}
	max := Unlimited
	if limit, ok, err := MaxReplicas(s, replicas); ok {
		if err != nil {
			return st, err
		}
		max = limit
	}
	st.MissingReplicas = max
	creating := map[string]metav1.Time{}
	var deleting map[string]metav1.Time
	if old != nil {
		st.Conditions = slices.Clone(old.Conditions)
		maps.Copy(creating, old.CreatingPods)
		deleting = old.DeletingPods
	}
	for _, p := range pods {
		if i := InjectionOf(p); i != nil && i.UID != "" {
			delete(creating, i.UID)
		} else {
			delete(creating, p.Name)
		}
		if !Active(p) {
			continue
		}
		st.Replicas++
		if st.MissingReplicas > 0 {
			st.MissingReplicas--
		}
		if at, ok := deleting[p.Name]; ok {
			expires := at.Add(DeletePodTimeout)
			if expires.Before(now) {
				out.DeleteExpired = append(out.DeleteExpired, p.Name)
				continue
			}
			st.DeletingPods[p.Name] = at
			if st.MissingReplicas < max {
				st.MissingReplicas++
			}
			soonest(&out.Recheck, expires)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(creating)) {
		at := creating[id]
		expires := at.Add(CreatePodTimeout)
		if expires.Before(now) {
			out.CreateExpired = append(out.CreateExpired, id)
			continue
		}
		st.CreatingPods[id] = at
		if st.MissingReplicas > 0 {
			st.MissingReplicas--
		}
		soonest(&out.Recheck, expires)
	}
	if len(st.CreatingPods) == 0 {
		st.CreatingPods = nil
	}
	if len(st.DeletingPods) == 0 {
		st.DeletingPods = nil
	}
	return st, nil
}

// Unscheduled reports whether the pod has been pending unschedulable
// (PodScheduled False, reason Unschedulable) for longer than critical
// since it was created, and else when it will have, if it is pending
// unschedulable (zero otherwise).
func Unscheduled(pod *corev1.Pod, critical time.Duration, now time.Time) (bool, time.Time) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName != "" {
		return false, time.Time{}
	}
	if !workload.Unschedulable(pod) {
		return false, time.Time{}
	}
	deadline := pod.CreationTimestamp.Add(critical)
	if deadline.Before(now) {
		return true, time.Time{}
	}
	return false, deadline
}

// reschedule sets a subset's Schedulable condition under the Adaptive
// strategy and collects its pods to reschedule.
func reschedule(name string, pods []*corev1.Pod, st, old *v1alpha1.WorkloadSpreadSubsetStatus, critical time.Duration, now time.Time, out *Outcome) {
	var failed []*corev1.Pod
	for _, p := range pods {
		timedOut, at := Unscheduled(p, critical, now)
		if timedOut {
			failed = append(failed, p)
		} else if !at.IsZero() {
			soonest(&out.Recheck, at)
		}
	}
	out.Reschedule = append(out.Reschedule, failed...)
	unschedulable := len(failed) > 0
	oldCond := Condition(old, v1alpha1.SubsetSchedulable)
	if oldCond == nil {
		status := corev1.ConditionTrue
		if unschedulable {
			status = corev1.ConditionFalse
		}
		setCondition(st, newCondition(status, now))
		return
	}
	setCondition(st, *oldCond)
	switch {
	case unschedulable:
		setCondition(st, newCondition(corev1.ConditionFalse, now))
	case oldCond.Status == corev1.ConditionFalse:
		recover := oldCond.LastTransitionTime.Add(MaxScheduledFailedDuration)
		if recover.Before(now) {
			setCondition(st, newCondition(corev1.ConditionTrue, now))
			out.Recovered = append(out.Recovered, name)
		} else {
			soonest(&out.Recheck, recover)
		}
	}
}

func newCondition(status corev1.ConditionStatus, now time.Time) v1alpha1.WorkloadSpreadSubsetCondition {
	return v1alpha1.WorkloadSpreadSubsetCondition{Type: v1alpha1.SubsetSchedulable, Status: status, LastTransitionTime: metav1.NewTime(now)}
}

// setCondition sets c on st: an existing condition of its type with the
// same status and reason stays as it is; one with the same status keeps
// its lastTransitionTime.
func setCondition(st *v1alpha1.WorkloadSpreadSubsetStatus, c v1alpha1.WorkloadSpreadSubsetCondition) {
	cur := Condition(st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	st.Conditions = append(withoutCondition(st.Conditions, c.Type), c)
}

func withoutCondition(cs []v1alpha1.WorkloadSpreadSubsetCondition, t v1alpha1.WorkloadSpreadSubsetConditionType) []v1alpha1.WorkloadSpreadSubsetCondition {
	var out []v1alpha1.WorkloadSpreadSubsetCondition
	for _, c := range cs {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// Deletion-cost steps of OpenKruise's WorkloadSpread.
const (
	costPositive = 100
	costNegative = -100
)

// DeletionCostKind reports whether ws's target honours the pod deletion
// cost, so the controller sets it: a Deployment, ReplicaSet or CloneSet.
func DeletionCostKind(ws *v1alpha1.WorkloadSpread) bool {
	if ws.Spec.TargetReference == nil {
		return false
	}
	switch ws.Spec.TargetReference.Kind {
	case "Deployment", "ReplicaSet", "CloneSet":
		return true
	}
	return false
}

// DeletionCosts are the controller.kubernetes.io/pod-deletion-cost
// values of the active pods (by name), so that scale-in removes pods from
// the last subset first and the pods over a subset's maxReplicas before
// any other: with n subsets, a pod of subset i (0-based) within
// maxReplicas costs 100*(n-i); the pods over maxReplicas (the first ones
// in scale-in order: unscheduled, pending, not ready, ... newest) cost
// -100*(i+1); pods in no subset cost -100*(n+1).
//
// A WorkloadSpread with versioned statuses counts each revision's pods
// apart, and latest names the workload's current revision: its pods are
// costed as above, while an older revision's are costed with the subsets
// in reverse order, so that the rollout removes the old pods of the
// first subsets first, where the new revision's pods go first (latest
// "": all pods as one revision).
func DeletionCosts(ws *v1alpha1.WorkloadSpread, g Groups, replicas int32, latest string) map[string]string {
	costs := map[string]string{}
	if Versioned(ws) && latest != "" {
		for v, bySubset := range ByVersion(ws, g) {
			subsetCosts(ws, bySubset, replicas, v != latest, costs)
		}
	} else {
		subsetCosts(ws, g.BySubset, replicas, false, costs)
	}
	n := len(ws.Spec.Subsets)
	for _, p := range activeOf(g.Unmatched) {
		costs[p.Name] = strconv.Itoa(costNegative * (n + 1))
	}
	return costs
}

// subsetCosts sets in costs the deletion costs of the active pods of
// bySubset, the subsets taken in reverse order when reverse is set.
func subsetCosts(ws *v1alpha1.WorkloadSpread, bySubset map[string][]*corev1.Pod, replicas int32, reverse bool, costs map[string]string) {
	n := len(ws.Spec.Subsets)
	set := func(pods []*corev1.Pod, cost int) {
		for _, p := range pods {
			costs[p.Name] = strconv.Itoa(cost)
		}
	}
	for i := range ws.Spec.Subsets {
		s := &ws.Spec.Subsets[i]
		pos := i
		if reverse {
			pos = n - 1 - i
		}
		active := activeOf(bySubset[s.Name])
		limit, ok, err := MaxReplicas(s, replicas)
		if err != nil {
			continue
		}
		if !ok || len(active) <= int(limit) {
			set(active, costPositive*(n-pos))
			continue
		}
		SortForDeletion(active)
		extra := len(active) - int(limit)
		set(active[:extra], costNegative*(pos+1))
		set(active[extra:], costPositive*(n-pos))
	}
}

func activeOf(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if Active(p) {
			out = append(out, p)
		}
	}
	return out
}

// SortForDeletion orders pods the way Kubernetes picks pods to delete on
// scale-in, first to go first: not scheduled before scheduled; Pending,
// then Unknown, then Running; not ready before ready; ready for less time
// before more; more container restarts before fewer; newer before older.
// The sort is stable.
func SortForDeletion(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return deleteFirst(pods[i], pods[j]) })
}

func deleteFirst(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	rank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	if ra, rb := rank[a.Status.Phase], rank[b.Status.Phase]; ra != rb {
		return ra < rb
	}
	ra, rb := readySince(a), readySince(b)
	if (ra == nil) != (rb == nil) {
		return ra == nil
	}
	if ra != nil && !ra.Equal(*rb) {
		return ra.After(*rb)
	}
	if ca, cb := restarts(a), restarts(b); ca != cb {
		return ca > cb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	}
	return false
}

// readySince is when the pod became Ready, nil when it is not.
func readySince(p *corev1.Pod) *time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			t := c.LastTransitionTime.Time
			return &t
		}
	}
	return nil
}

// restarts is the highest restart count of the pod's containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}
