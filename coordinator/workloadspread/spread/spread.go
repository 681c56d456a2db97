// Package spread is the pure logic of WorkloadSpread, shared by its pod
// webhook and its controller, as OpenKruise defines it:
//   - which subset a pod belongs to: the subset its
//     apps.kruise.io/matched-workloadspread annotation names or, for a pod
//     created before the WorkloadSpread, the subset whose
//     requiredNodeSelectorTerm and tolerations its node satisfies, the one
//     scoring best by preferredNodeSelectorTerms, patch and room (Group);
//   - the subsets' status: replicas, missingReplicas from maxReplicas and
//     the records of pods the webhook placed or let go (Status);
//   - the subset a new pod goes to: the first, in spec order, with
//     missing replicas and not marked unschedulable (Choose, RecordCreate);
//   - the pod's mutation: required and preferred node affinity,
//     tolerations, the subset's strategic merge patch and the annotation
//     (Inject);
//   - the pod-deletion-cost that steers scale-in (DeletionCosts);
//   - for Deployments and ReplicaSets, the same counts per revision
//     (versionedSubsetStatuses), so that a rolling update keeps the
//     spread (versioned.go).
package spread

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Timeouts of OpenKruise's WorkloadSpread.
const (
	// CreatePodTimeout is how long a creatingPods record waits for its pod
	// to show in the controller's informer before it is dropped (the pod
	// was not created after all).
	CreatePodTimeout = 30 * time.Second
	// DeletePodTimeout is how long a deletingPods record of a pod still
	// present is kept (the deletion was refused or failed after the
	// webhook let it through).
	DeletePodTimeout = 15 * time.Second
	// MaxScheduledFailedDuration is how long a subset stays Schedulable
	// False, under the Adaptive strategy, after its last unschedulable pod.
	MaxScheduledFailedDuration = 300 * time.Second
)

// Unlimited is the missingReplicas of a subset without maxReplicas.
const Unlimited int32 = -1

// Injection is the value of the pod annotation
// apps.kruise.io/matched-workloadspread.
type Injection struct {
	// Name of the WorkloadSpread.
	Name string `json:"name"`
	// Subset the pod was placed in.
	Subset string `json:"subset"`
	// UID identifies, in creatingPods, a pod created without a name
	// (generateName): the webhook generates it.
	UID string `json:"uid,omitempty"`
}

// Annotation is the JSON of the annotation, as OpenKruise writes it.
func (i Injection) Annotation() string {
	b, _ := json.Marshal(i) // a struct of strings always marshals
	return string(b)
}

// InjectionOf reads the pod's annotation; nil when it is absent or not
// valid JSON.
func InjectionOf(pod *corev1.Pod) *Injection {
	v, ok := pod.Annotations[wellknown.AnnotationMatchedWorkloadSpread]
	if !ok || v == "" {
		return nil
	}
	i := &Injection{}
	if err := json.Unmarshal([]byte(v), i); err != nil {
		return nil
	}
	return i
}

// matchedBy reports whether the pod's annotation places it in a subset of
// ws (by name; the subset may no longer exist).
func matchedBy(pod *corev1.Pod, ws *v1alpha1.WorkloadSpread) *Injection {
	i := InjectionOf(pod)
	if i == nil || i.Name != ws.Name || i.Subset == "" {
		return nil
	}
	return i
}

// Active reports whether the pod counts: not being deleted, not
// Succeeded or Failed.
func Active(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// MaxReplicas is a subset's maxReplicas against the workload's replicas:
// an integer as is, a percentage of replicas rounded up; ok is false for
// a subset without maxReplicas (no limit).
func MaxReplicas(subset *v1alpha1.WorkloadSpreadSubset, replicas int32) (limit int32, ok bool, err error) {
	if subset.MaxReplicas == nil {
		return 0, false, nil
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(subset.MaxReplicas, int(replicas), true)
	if err != nil {
		return 0, true, fmt.Errorf("subset %s: maxReplicas %s: %w", subset.Name, subset.MaxReplicas.String(), err)
	}
	if v < 0 {
		return 0, true, fmt.Errorf("subset %s: maxReplicas %s is negative", subset.Name, subset.MaxReplicas.String())
	}
	return int32(min(v, math.MaxInt32)), true, nil
}

// InitialStatus is a subset's status before any pod: missingReplicas is
// its maxReplicas (Unlimited without one).
func InitialStatus(subset *v1alpha1.WorkloadSpreadSubset, replicas int32) v1alpha1.WorkloadSpreadSubsetStatus {
	st := v1alpha1.WorkloadSpreadSubsetStatus{Name: subset.Name, MissingReplicas: Unlimited}
	if limit, ok, err := MaxReplicas(subset, replicas); ok {
		st.MissingReplicas = limit
		if err != nil {
			st.MissingReplicas = 0
		}
	}
	return st
}

// HasPercent reports whether a subset's maxReplicas is a percentage (the
// workload's replicas are then needed).
func HasPercent(ws *v1alpha1.WorkloadSpread) bool {
	for i := range ws.Spec.Subsets {
		if m := ws.Spec.Subsets[i].MaxReplicas; m != nil && m.Type == intstr.String {
			return true
		}
	}
	return false
}

// SubsetStatus returns the status entry of the subset named name, nil
// without one.
func SubsetStatus(st *v1alpha1.WorkloadSpreadStatus, name string) *v1alpha1.WorkloadSpreadSubsetStatus {
	for i := range st.SubsetStatuses {
		if st.SubsetStatuses[i].Name == name {
			return &st.SubsetStatuses[i]
		}
	}
	return nil
}

// Condition returns the subset status's condition of type t, nil without
// one.
func Condition(st *v1alpha1.WorkloadSpreadSubsetStatus, t v1alpha1.WorkloadSpreadSubsetConditionType) *v1alpha1.WorkloadSpreadSubsetCondition {
	if st == nil {
		return nil
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// Unschedulable reports whether the subset status is marked Schedulable
// False (by the Adaptive strategy).
func Unschedulable(st *v1alpha1.WorkloadSpreadSubsetStatus) bool {
	c := Condition(st, v1alpha1.SubsetSchedulable)
	return c != nil && c.Status == corev1.ConditionFalse
}

// Target is the group and kind of a targetRef.
func Target(ref *v1alpha1.TargetReference) schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
}

// IsStatefulSet reports whether ws targets a StatefulSet (apps or
// apps.kruise.io), whose pods are placed by ordinal rather than by
// counting.
func IsStatefulSet(ws *v1alpha1.WorkloadSpread) bool {
	return ws.Spec.TargetReference != nil && ws.Spec.TargetReference.Kind == "StatefulSet"
}

// statefulPodName splits a StatefulSet pod name into parent and ordinal.
var statefulPodName = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// ordinal is the ordinal of a StatefulSet pod name, -1 without one.
func ordinal(name string) int64 {
	m := statefulPodName.FindStringSubmatch(name)
	if len(m) < 3 {
		return -1
	}
	n, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return -1
	}
	return n
}

// ChooseByOrdinal is the subset of a StatefulSet pod: the subsets, in
// order and skipping those marked unschedulable, take consecutive
// ordinal ranges of maxReplicas each (the rest for an unlimited one).
// "" when the ordinal is past every subset.
func ChooseByOrdinal(ws *v1alpha1.WorkloadSpread, podName string) string {
	ord := ordinal(podName)
	var threshold int64
	for i := range ws.Spec.Subsets {
		s := &ws.Spec.Subsets[i]
		if Unschedulable(SubsetStatus(&ws.Status, s.Name)) {
			continue
		}
		limit := int64(math.MaxInt32)
		if s.MaxReplicas != nil {
			limit = int64(s.MaxReplicas.IntValue())
		}
		threshold += limit
		if ord < threshold {
			return s.Name
		}
	}
	return ""
}

// SingleUnlimited reports whether ws has one subset without maxReplicas:
// every pod goes there, and the webhook writes no status.
func SingleUnlimited(ws *v1alpha1.WorkloadSpread) bool {
	return len(ws.Spec.Subsets) == 1 && ws.Spec.Subsets[0].MaxReplicas == nil
}

// ensureStatuses gives ws.Status one subset status per spec subset, in
// spec order: the existing entry of that name, or InitialStatus.
func ensureStatuses(ws *v1alpha1.WorkloadSpread, replicas int32) {
	out := make([]v1alpha1.WorkloadSpreadSubsetStatus, 0, len(ws.Spec.Subsets))
	for i := range ws.Spec.Subsets {
		s := &ws.Spec.Subsets[i]
		if st := SubsetStatus(&ws.Status, s.Name); st != nil {
			out = append(out, *st)
		} else {
			out = append(out, InitialStatus(s, replicas))
		}
	}
	ws.Status.SubsetStatuses = out
}

// Recorded returns the subset whose creatingPods or deletingPods hold id,
// "" when none does.
func Recorded(ws *v1alpha1.WorkloadSpread, id string) string {
	for i := range ws.Status.SubsetStatuses {
		st := &ws.Status.SubsetStatuses[i]
		if _, ok := st.CreatingPods[id]; ok {
			return st.Name
		}
		if _, ok := st.DeletingPods[id]; ok {
			return st.Name
		}
	}
	return ""
}

// Choose is the subset a new pod goes to: the first subset in spec order
// that is not marked unschedulable and has missing replicas (or no
// limit), as ws.Status says (a subset without a status entry counts with
// its InitialStatus against replicas). "" when every subset is full.
func Choose(ws *v1alpha1.WorkloadSpread, replicas int32) string {
	for i := range ws.Spec.Subsets {
		s := &ws.Spec.Subsets[i]
		st := SubsetStatus(&ws.Status, s.Name)
		if st == nil {
			init := InitialStatus(s, replicas)
			st = &init
		}
		if Unschedulable(st) {
			continue
		}
		if st.MissingReplicas > 0 || st.MissingReplicas == Unlimited {
			return s.Name
		}
	}
	return ""
}

// RecordCreate places a new pod, identified by id (its name, or a
// generated UID), in ws, whose status it changes: the subset it is
// already recorded in, or Choose's, with id added to its creatingPods
// and one fewer missing replica. changed is false when nothing is to be
// written: the pod was recorded already, no subset has room, or the
// chosen subset is unlimited (OpenKruise keeps no records there).
func RecordCreate(ws *v1alpha1.WorkloadSpread, id string, replicas int32, now time.Time) (subset string, changed bool) {
	if s := Recorded(ws, id); s != "" {
		return s, false
	}
	if HasPercent(ws) {
		Rescale(ws, replicas)
	}
	subset = Choose(ws, replicas)
	if subset == "" {
		return "", false
	}
	ensureStatuses(ws, replicas)
	st := SubsetStatus(&ws.Status, subset)
	if st.MissingReplicas == Unlimited {
		return subset, false
	}
	if st.CreatingPods == nil {
		st.CreatingPods = map[string]metav1.Time{}
	}
	st.CreatingPods[id] = metav1.NewTime(now)
	if st.MissingReplicas > 0 {
		st.MissingReplicas--
	}
	return subset, true
}

// Rescale recomputes the missingReplicas of ws's limited subsets for
// the workload's current replica count, from the counts the status
// holds: maxReplicas minus the pods placed, minus those being created,
// plus those being deleted. The controller computes the status when pods
// change, not when a workload it does not watch (a white-listed custom
// kind) scales, so its missingReplicas may count against an older
// replica count; percentages are scaled again at each placement.
func Rescale(ws *v1alpha1.WorkloadSpread, replicas int32) {
	for i := range ws.Status.SubsetStatuses {
		st := &ws.Status.SubsetStatuses[i]
		s := subsetSpec(ws, st.Name)
		if s == nil {
			continue
		}
		limit, ok, err := MaxReplicas(s, replicas)
		if !ok || err != nil {
			continue
		}
		missing := limit - st.Replicas - int32(len(st.CreatingPods)) + int32(len(st.DeletingPods))
		st.MissingReplicas = max(0, min(missing, limit))
	}
}

// subsetSpec returns the spec of the subset named name, nil without one.
func subsetSpec(ws *v1alpha1.WorkloadSpread, name string) *v1alpha1.WorkloadSpreadSubset {
	for i := range ws.Spec.Subsets {
		if ws.Spec.Subsets[i].Name == name {
			return &ws.Spec.Subsets[i]
		}
	}
	return nil
}

// RecordDelete records that the pod named name, of subset, is being
// deleted (or evicted): its name goes into the subset's deletingPods and
// the subset gets one more missing replica. False when nothing is to be
// written: already recorded, no such subset status, or an unlimited
// subset.
func RecordDelete(ws *v1alpha1.WorkloadSpread, name, subset string, now time.Time) bool {
	if Recorded(ws, name) != "" {
		return false
	}
	st := SubsetStatus(&ws.Status, subset)
	if st == nil || st.MissingReplicas == Unlimited {
		return false
	}
	if st.DeletingPods == nil {
		st.DeletingPods = map[string]metav1.Time{}
	}
	st.DeletingPods[name] = metav1.NewTime(now)
	st.MissingReplicas++
	return true
}
