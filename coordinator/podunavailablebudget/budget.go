package podunavailablebudget

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Timing and size limits of the budget's records, as OpenKruise's.
const (
	// DeletionTimeout is how long a pod stays in status.disruptedPods after
	// its deletion or eviction was allowed: if it still runs then, the
	// disruption did not happen (a NotDeleted event says so) and the pod
	// counts again, as upstream's PodDisruptionBudget does.
	DeletionTimeout = 2 * time.Minute
	// UpdateCheckDelay is how long a pod stays in status.unavailablePods
	// after its update was allowed even if it looks ready and consistent:
	// the kubelet (and the informer) need a moment to show that the
	// update took it out of service.
	UpdateCheckDelay = 10 * time.Second
	// MaxRecordedPods bounds disruptedPods plus unavailablePods: beyond it
	// the webhook refuses further disruptions until the controller has
	// confirmed some.
	MaxRecordedPods = 2000
)

// DefaultProtectedOperations are the operations a budget guards without
// the kruise.io/pub-protect-operations annotation.
var DefaultProtectedOperations = []wellknown.PubOperation{
	wellknown.PubOperationDelete, wellknown.PubOperationEvict, wellknown.PubOperationUpdate,
}

// KnownOperations are the values kruise.io/pub-protect-operations may
// list. RESIZE is accepted for OpenKruise manifests; Shoal guards no pod
// resize (the pods/resize subresource does not reach its webhook).
var KnownOperations = []wellknown.PubOperation{
	wellknown.PubOperationDelete, wellknown.PubOperationEvict, wellknown.PubOperationUpdate, wellknown.PubOperationResize,
}

// ProtectedOperations parses a budget's kruise.io/pub-protect-operations
// annotation (comma-separated, blanks around items ignored); absent or
// empty it is DefaultProtectedOperations.
func ProtectedOperations(pub *policyv1alpha1.PodUnavailableBudget) []wellknown.PubOperation {
	raw := strings.TrimSpace(pub.Annotations[wellknown.AnnotationPubProtectOperations])
	if raw == "" {
		return DefaultProtectedOperations
	}
	var out []wellknown.PubOperation
	for item := range strings.SplitSeq(raw, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, wellknown.PubOperation(item))
		}
	}
	return out
}

// Protects reports whether pub guards op.
func Protects(pub *policyv1alpha1.PodUnavailableBudget, op wellknown.PubOperation) bool {
	return slices.Contains(ProtectedOperations(pub), op)
}

// TotalReplicasOverride reads the pub.kruise.io/protect-total-replicas
// annotation: ok is false without it; an error says why its value is not
// a replica count.
func TotalReplicasOverride(pub *policyv1alpha1.PodUnavailableBudget) (total int32, ok bool, err error) {
	raw, present := pub.Annotations[wellknown.AnnotationPubProtectTotalReplicas]
	if !present || raw == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("annotation %s=%q: use a replica count from 0 to 2147483647", wellknown.AnnotationPubProtectTotalReplicas, raw)
	}
	return int32(n), true, nil
}

// NoProtect reports whether the pod opts out of every budget with the
// pub.kruise.io/no-protect annotation set to a true value ("true").
func NoProtect(pod *corev1.Pod) bool {
	v, ok := pod.Annotations[wellknown.AnnotationPubNoProtect]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// DesiredAvailable is how many of total pods must stay available under
// pub, with OpenKruise's arithmetic: maxUnavailable (it wins when both
// are set) is scaled from total rounding up and subtracted from total,
// never below 0; minAvailable is taken as is when an integer and scaled
// from total rounding up when a percentage. 5 replicas and maxUnavailable
// 60% give 5 - 3 = 2; minAvailable 40% gives 2 too.
func DesiredAvailable(pub *policyv1alpha1.PodUnavailableBudget, total int32) (int32, error) {
	switch spec := pub.Spec; {
	case spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(total), true)
		if err != nil {
			return 0, fmt.Errorf("spec.maxUnavailable %q: %w", spec.MaxUnavailable.String(), err)
		}
		return max(total-int32(n), 0), nil
	case spec.MinAvailable != nil:
		if spec.MinAvailable.Type == intstr.Int {
			return max(spec.MinAvailable.IntVal, 0), nil
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(total), true)
		if err != nil {
			return 0, fmt.Errorf("spec.minAvailable %q: %w", spec.MinAvailable.String(), err)
		}
		return int32(n), nil
	}
	return 0, nil
}

// HasUnavailableLabel reports whether the pod carries a label of the
// unavailable-pod.kruise.io/ family, which takes it out of every count.
func HasUnavailableLabel(pod *corev1.Pod) bool {
	for k := range pod.Labels {
		if strings.HasPrefix(k, wellknown.LabelUnavailablePodPrefix) {
			return true
		}
	}
	return false
}

// Active reports whether the pod counts at all: neither being deleted nor
// finished.
func Active(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// PodReady reports whether the pod serves: Running, Ready (and none of
// its readiness gates False, which the kubelet turns into not Ready a
// moment later) and without an unavailable-pod.kruise.io/ label.
func PodReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && podstatus.ReadySince(pod) != nil && !HasUnavailableLabel(pod)
}

// PodConsistent reports whether the pod runs what its spec says, as far
// as can be told: every container whose image is a digest reference runs
// an image of that digest, and an in-place update recorded in the pod's
// inplace-update-state annotation has every batch applied and running.
// A plain image change shows only through readiness (the kubelet
// restarts the container), as in OpenKruise.
func PodConsistent(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		_, digest, ok := strings.Cut(c.Image, "@")
		if !ok {
			continue
		}
		s := containerStatus(pod, c.Name)
		if s == nil || !strings.HasSuffix(s.ImageID, "@"+digest) && s.ImageID != digest {
			return false
		}
	}
	st, ok, err := inplace.ReadState(pod)
	if err != nil {
		return false
	}
	if ok {
		if len(st.NextContainerImages) > 0 || len(st.NextContainerRefMetadata) > 0 {
			return false
		}
		if done, _ := inplace.ImagesUpdated(pod, st); !done {
			return false
		}
	}
	return true
}

// Available reports whether the pod counts towards currentAvailable
// (recorded pods aside): active, ready and consistent.
func Available(pod *corev1.Pod) bool {
	return Active(pod) && PodReady(pod) && PodConsistent(pod)
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// Recorded reports whether the pod's name is in pub's disruptedPods or
// unavailablePods: its disruption is already counted.
func Recorded(pub *policyv1alpha1.PodUnavailableBudget, pod string) bool {
	_, d := pub.Status.DisruptedPods[pod]
	_, u := pub.Status.UnavailablePods[pod]
	return d || u
}

// Record takes one disruption of pod out of pub's status (a copy the
// caller owns): unavailableAllowed goes down by one and the pod goes into
// unavailablePods for an UPDATE, disruptedPods otherwise, at now.
func Record(pub *policyv1alpha1.PodUnavailableBudget, pod string, op wellknown.PubOperation, now time.Time) {
	pub.Status.UnavailableAllowed--
	at := metav1.NewTime(now)
	if op == wellknown.PubOperationUpdate {
		if pub.Status.UnavailablePods == nil {
			pub.Status.UnavailablePods = map[string]metav1.Time{}
		}
		pub.Status.UnavailablePods[pod] = at
		return
	}
	if pub.Status.DisruptedPods == nil {
		pub.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pub.Status.DisruptedPods[pod] = at
}

// outcome is a computed status with what the controller reports about it.
type outcome struct {
	status policyv1alpha1.PodUnavailableBudgetStatus
	// recheck is when a record expires or becomes checkable (zero: no
	// timed recheck).
	recheck time.Time
	// notDeleted are the pods whose allowed disruption did not happen
	// within DeletionTimeout.
	notDeleted []string
}

// computeStatus is pub's next status over its matched pods and total at
// now: records of pods that are gone (or replaced by a new pod of the
// same name) are dropped, disruptedPods after DeletionTimeout,
// unavailablePods once the pod is ready and consistent again after
// UpdateCheckDelay; currentAvailable counts the available pods not
// recorded; unavailableAllowed is currentAvailable - desiredAvailable,
// never below 0.
func computeStatus(pub *policyv1alpha1.PodUnavailableBudget, pods []*corev1.Pod, total int32, now time.Time) (outcome, error) {
	desired, err := DesiredAvailable(pub, total)
	if err != nil {
		return outcome{}, err
	}
	var out outcome
	soonest := func(t time.Time) {
		if out.recheck.IsZero() || t.Before(out.recheck) {
			out.recheck = t
		}
	}
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		if Active(p) {
			byName[p.Name] = p
		}
	}
	// live returns the active pod a record of at refers to: a pod of the
	// same name created after the record is another pod.
	live := func(name string, at metav1.Time) *corev1.Pod {
		p := byName[name]
		if p == nil || at.Before(&p.CreationTimestamp) {
			return nil
		}
		return p
	}
	disrupted := map[string]metav1.Time{}
	for name, at := range pub.Status.DisruptedPods {
		if live(name, at) == nil {
			continue
		}
		due := at.Add(DeletionTimeout)
		if !now.Before(due) {
			out.notDeleted = append(out.notDeleted, name)
			continue
		}
		disrupted[name] = at
		soonest(due)
	}
	unavailable := map[string]metav1.Time{}
	for name, at := range pub.Status.UnavailablePods {
		p := live(name, at)
		if p == nil {
			continue
		}
		due := at.Add(UpdateCheckDelay)
		if now.Before(due) {
			unavailable[name] = at
			soonest(due)
			continue
		}
		if PodReady(p) && PodConsistent(p) {
			continue
		}
		unavailable[name] = at
	}
	slices.Sort(out.notDeleted)

	var current int32
	for name, p := range byName {
		_, d := disrupted[name]
		_, u := unavailable[name]
		if !d && !u && Available(p) {
			current++
		}
	}
	out.status = policyv1alpha1.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation,
		UnavailableAllowed: max(current-desired, 0),
		CurrentAvailable:   current,
		DesiredAvailable:   desired,
		TotalReplicas:      total,
	}
	if len(disrupted) > 0 {
		out.status.DisruptedPods = disrupted
	}
	if len(unavailable) > 0 {
		out.status.UnavailablePods = unavailable
	}
	return out, nil
}
