package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/podunavailablebudget"
	"github.com/shoal-io/shoal/coordinator/workload/podops"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Paths of the PodUnavailableBudget webhooks.
const (
	// PodUnavailableBudgetPodPath serves
	// PodUnavailableBudgetAdmission.ValidatePod: pods DELETE and UPDATE,
	// pods/eviction CREATE, and pods/status UPDATE by the coordinator.
	PodUnavailableBudgetPodPath = "/validate-pod-unavailable-budget"
	// PodUnavailableBudgetValidatePath serves
	// PodUnavailableBudgetAdmission.Validate (PodUnavailableBudget CREATE
	// and UPDATE).
	PodUnavailableBudgetValidatePath = "/validate-podunavailablebudget"
)

// Bounds of one budget check.
const (
	// pubWriteAttempts bounds the status writes of one request: a
	// conflict is retried with a fresh read.
	pubWriteAttempts = 3
	// pubDecisionTimeout bounds one pod check, the wait for the budget's
	// lock included, inside the webhook's 3 s timeout. Past that timeout
	// the apiserver gives up on the webhook and, as it fails open, lets
	// the disruption through unrecorded; a check that cannot finish in
	// time refuses instead, and the caller retries.
	pubDecisionTimeout = 2500 * time.Millisecond
)

// PodUnavailableBudgetLookup finds budgets in the informer caches
// (podunavailablebudget.Controller).
type PodUnavailableBudgetLookup interface {
	// BudgetFor returns the budget covering the pod, nil if none does.
	BudgetFor(pod *corev1.Pod) (*policyv1alpha1.PodUnavailableBudget, error)
	// Budgets lists the budgets of a namespace.
	Budgets(namespace string) ([]*policyv1alpha1.PodUnavailableBudget, error)
}

// PodUnavailableBudgetAdmission holds the PodUnavailableBudget webhooks:
// the pod check that spends a budget's unavailableAllowed on each
// voluntary disruption, and the validation of budgets.
//
// A disruption is a pod DELETE, an eviction (pods/eviction CREATE, which
// kubectl drain sends), or an UPDATE that may take the pod out of service:
// a change of its spec (in practice its container images), the
// addition of an unavailable-pod.kruise.io/ label, or a status write of
// Shoal's own workload controllers that starts an in-place update
// (InPlaceUpdateReady, or KruisePodReady for the inPlaceUpdate hook,
// going False). Shoal's CloneSets, Advanced StatefulSets and Advanced
// DaemonSets take a pod out of service through that status write before
// they change its images, so their in-place updates are held at the
// first write, before the pod stops serving; OpenKruise's controllers
// consult the budget themselves at the same point.
type PodUnavailableBudgetAdmission struct {
	budgets     PodUnavailableBudgetLookup
	pods        PodGetter
	client      shoalclient.Interface
	terminating func(namespace string) bool
	now         func() time.Time

	// locks serialises the checks of each budget on this replica.
	locks keyedLocks
	// written holds the status this replica last wrote per budget UID,
	// used while the informer has not shown it yet.
	written sync.Map
	denials *prometheus.CounterVec
}

// NewPodUnavailableBudgetAdmission returns the handlers: budgets come from
// budgets, the pods of evictions from pods (an informer cache), and
// status is written through client. Denials are counted in reg as
// shoal_coordinator_pub_denials_total by operation.
func NewPodUnavailableBudgetAdmission(budgets PodUnavailableBudgetLookup, pods PodGetter, client shoalclient.Interface,
	reg prometheus.Registerer) *PodUnavailableBudgetAdmission {
	a := &PodUnavailableBudgetAdmission{
		budgets: budgets, pods: pods, client: client, now: time.Now,
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_pub_denials_total",
			Help: "Pod disruptions refused by a PodUnavailableBudget, by operation (DELETE, EVICT, UPDATE).",
		}, []string{"operation"}),
	}
	if reg != nil {
		reg.MustRegister(a.denials)
	}
	return a
}

// WithNamespaces makes the pod check let everything through in a
// namespace that terminating says is being deleted: its pods go anyway.
func (a *PodUnavailableBudgetAdmission) WithNamespaces(terminating func(namespace string) bool) *PodUnavailableBudgetAdmission {
	a.terminating = terminating
	return a
}

var (
	_ Handler = (*PodUnavailableBudgetAdmission)(nil).ValidatePod
	_ Handler = (*PodUnavailableBudgetAdmission)(nil).Validate
)

// ValidatePod handles the pod requests. It allows at once what disrupts
// nothing; a disruption of a pod that opts out (pub.kruise.io/no-protect
// "true"), is not ready or not consistent (it does not count as available
// anyway), is covered by no budget, by a budget whose
// kruise.io/pub-protect-operations leaves the operation out, by one whose
// desiredAvailable is 0, or is already recorded in the budget's
// disruptedPods or unavailablePods is allowed too. Otherwise, with the
// budget's lock held, it refuses when unavailableAllowed is 0 (or the
// records hold MaxRecordedPods), and else writes the budget's status with
// unavailableAllowed one lower and the pod recorded (UPDATE in
// unavailablePods, DELETE and EVICT in disruptedPods), then allows; a dry
// run writes nothing. An eviction is refused with 429 Too Many Requests,
// as a PodDisruptionBudget refuses one, so kubectl drain waits and
// retries.
func (a *PodUnavailableBudgetAdmission) ValidatePod(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	pod, op := a.disruption(ctx, req)
	if pod == nil {
		return nil
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	ctx, cancel := context.WithTimeout(ctx, pubDecisionTimeout)
	defer cancel()
	return a.admit(ctx, pod, op, req.DryRun != nil && *req.DryRun)
}

// disruption returns the pod a request may take out of service and how
// (nil when it takes none out).
func (a *PodUnavailableBudgetAdmission) disruption(ctx context.Context, req *admissionv1.AdmissionRequest) (*corev1.Pod, wellknown.PubOperation) {
	decode := func(raw []byte) *corev1.Pod {
		if len(raw) == 0 {
			return nil
		}
		p := &corev1.Pod{}
		if err := json.Unmarshal(raw, p); err != nil {
			return nil // the apiserver's own validation answers for it
		}
		return p
	}
	switch {
	case req.Operation == admissionv1.Delete && req.SubResource == "":
		pod := decode(req.OldObject.Raw)
		if pod == nil {
			pod = a.cachedPod(ctx, req.Namespace, req.Name)
		}
		if pod == nil || pod.DeletionTimestamp != nil {
			return nil, "" // already going: a second delete disrupts nothing more
		}
		return pod, wellknown.PubOperationDelete
	case req.Operation == admissionv1.Create && req.SubResource == "eviction":
		pod := a.cachedPod(ctx, req.Namespace, req.Name)
		if pod == nil || pod.DeletionTimestamp != nil {
			return nil, ""
		}
		return pod, wellknown.PubOperationEvict
	case req.Operation == admissionv1.Update && req.SubResource == "":
		old, pod := decode(req.OldObject.Raw), decode(req.Object.Raw)
		if old == nil || pod == nil || !UnavailableChange(old, pod) {
			return nil, ""
		}
		return old, wellknown.PubOperationUpdate
	case req.Operation == admissionv1.Update && req.SubResource == "status":
		old, pod := decode(req.OldObject.Raw), decode(req.Object.Raw)
		if old == nil || pod == nil || !InPlaceUpdateStarts(old, pod) {
			return nil, ""
		}
		return old, wellknown.PubOperationUpdate
	}
	return nil, ""
}

// cachedPod reads a pod through the PodGetter, nil if it is unknown.
func (a *PodUnavailableBudgetAdmission) cachedPod(ctx context.Context, namespace, name string) *corev1.Pod {
	p, err := a.pods.Pod(namespace, name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Read the pod for the PodUnavailableBudget check; allowed", "pod", klog.KRef(namespace, name))
		}
		return nil
	}
	return p
}

// UnavailableChange reports whether a pod UPDATE may take the pod out of
// service, by OpenKruise's rule: its spec changes (through an update only
// container images, activeDeadlineSeconds and tolerations can, and an
// image change restarts the container), or it gains an
// unavailable-pod.kruise.io/ label.
func UnavailableChange(old, pod *corev1.Pod) bool {
	if !apiequality.Semantic.DeepEqual(old.Spec, pod.Spec) {
		return true
	}
	return !podunavailablebudget.HasUnavailableLabel(old) && podunavailablebudget.HasUnavailableLabel(pod)
}

// InPlaceUpdateStarts reports whether a pod status write starts an
// in-place update that takes the pod out of service: a readiness gate's
// condition goes False, InPlaceUpdateReady (the update engine) or
// KruisePodReady with reason PreparingUpdate (the inPlaceUpdate lifecycle
// hook's markPodNotReady). Other KruisePodReady changes (a
// ContainerRecreateRequest's unready grace, the preDelete hook before a
// guarded delete) are not in-place updates.
func InPlaceUpdateStarts(old, pod *corev1.Pod) bool {
	for _, t := range []corev1.PodConditionType{wellknown.ConditionInPlaceUpdateReady, wellknown.ConditionKruisePodReady} {
		if !slices.Contains(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: t}) {
			continue
		}
		c := podstatus.Condition(pod, t)
		if c == nil || c.Status != corev1.ConditionFalse {
			continue
		}
		if was := podstatus.Condition(old, t); was != nil && was.Status == corev1.ConditionFalse {
			continue
		}
		if t == wellknown.ConditionKruisePodReady && c.Reason != podops.ReasonPreparingUpdate {
			continue
		}
		return true
	}
	return false
}

// admit decides a disruption op of pod.
func (a *PodUnavailableBudgetAdmission) admit(ctx context.Context, pod *corev1.Pod, op wellknown.PubOperation, dryRun bool) *admissionv1.AdmissionResponse {
	log := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "operation", op)
	if podunavailablebudget.NoProtect(pod) {
		return nil
	}
	if a.terminating != nil && a.terminating(pod.Namespace) {
		return nil
	}
	// A pod that is not available is not counted: disrupting it spends
	// nothing.
	if !podunavailablebudget.PodReady(pod) || !podunavailablebudget.PodConsistent(pod) {
		return nil
	}
	pub, err := a.budgets.BudgetFor(pod)
	if err != nil {
		return a.deny(op, fmt.Sprintf("cannot check the PodUnavailableBudgets of pod %s/%s: %v; retry", pod.Namespace, pod.Name, err))
	}
	if pub == nil || !podunavailablebudget.Protects(pub, op) || pub.Status.DesiredAvailable == 0 ||
		podunavailablebudget.Recorded(pub, pod.Name) {
		return nil
	}

	unlock, err := a.locks.lock(ctx, pub.UID)
	if err != nil {
		return a.deny(op, fmt.Sprintf("PodUnavailableBudget %s/%s could not check %s pod %s in time: other disruptions of its pods "+
			"were being recorded (%v); retry", pub.Namespace, pub.Name, verb(op), pod.Name, err))
	}
	defer unlock()
	cur := a.freshest(pub)
	budgets := a.client.PolicyV1alpha1().PodUnavailableBudgets(pub.Namespace)
	for attempt := 1; ; attempt++ {
		if podunavailablebudget.Recorded(cur, pod.Name) || cur.Status.DesiredAvailable == 0 {
			return nil
		}
		st := cur.Status
		if st.UnavailableAllowed <= 0 {
			log.V(2).Info("PodUnavailableBudget refuses the disruption", "podUnavailableBudget", cur.Name,
				"currentAvailable", st.CurrentAvailable, "desiredAvailable", st.DesiredAvailable)
			return a.deny(op, fmt.Sprintf("PodUnavailableBudget %s/%s does not allow %s pod %s: unavailableAllowed is %d "+
				"(currentAvailable %d, desiredAvailable %d, totalReplicas %d); wait until more of its pods are available, "+
				"loosen its maxUnavailable or minAvailable, or annotate the pod %s=true to exempt it",
				cur.Namespace, cur.Name, verb(op), pod.Name, max(st.UnavailableAllowed, 0), st.CurrentAvailable, st.DesiredAvailable,
				st.TotalReplicas, wellknown.AnnotationPubNoProtect))
		}
		if n := len(st.DisruptedPods) + len(st.UnavailablePods); n >= podunavailablebudget.MaxRecordedPods {
			return a.deny(op, fmt.Sprintf("PodUnavailableBudget %s/%s does not allow %s pod %s: it records %d disruptions the controller "+
				"has not confirmed yet (at most %d); retry once they are done",
				cur.Namespace, cur.Name, verb(op), pod.Name, n, podunavailablebudget.MaxRecordedPods))
		}
		if dryRun {
			return nil
		}
		next := cur.DeepCopy()
		podunavailablebudget.Record(next, pod.Name, op, a.now())
		written, err := budgets.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			a.written.Store(pub.UID, written)
			log.V(2).Info("PodUnavailableBudget allows the disruption", "podUnavailableBudget", cur.Name,
				"unavailableAllowed", written.Status.UnavailableAllowed)
			return nil
		}
		if apierrors.IsNotFound(err) {
			return nil // the budget is gone
		}
		if !apierrors.IsConflict(err) || attempt == pubWriteAttempts {
			return a.deny(op, fmt.Sprintf("could not record the disruption of pod %s in PodUnavailableBudget %s/%s: %v; retry",
				pod.Name, cur.Namespace, cur.Name, err))
		}
		fresh, err := budgets.Get(ctx, pub.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return a.deny(op, fmt.Sprintf("could not read PodUnavailableBudget %s/%s: %v; retry", pub.Namespace, pub.Name, err))
		}
		if fresh.UID != pub.UID || fresh.DeletionTimestamp != nil {
			return nil // replaced or going: this budget no longer holds
		}
		cur = fresh
	}
}

// freshest returns the newer of the informer's copy of pub and the status
// this replica last wrote to it. resourceVersions are etcd revisions, so
// comparing them as numbers tells which is newer, as OpenKruise's webhook
// does; a wrong guess only costs a conflict and a fresh read.
func (a *PodUnavailableBudgetAdmission) freshest(pub *policyv1alpha1.PodUnavailableBudget) *policyv1alpha1.PodUnavailableBudget {
	v, ok := a.written.Load(pub.UID)
	if !ok {
		return pub
	}
	w := v.(*policyv1alpha1.PodUnavailableBudget)
	wrv, err1 := strconv.ParseUint(w.ResourceVersion, 10, 64)
	irv, err2 := strconv.ParseUint(pub.ResourceVersion, 10, 64)
	if err1 != nil || err2 != nil || irv >= wrv {
		a.written.CompareAndDelete(pub.UID, v)
		return pub
	}
	return w
}

// verb is an operation as in "does not allow <verb> pod x".
func verb(op wellknown.PubOperation) string {
	switch op {
	case wellknown.PubOperationDelete:
		return "deleting"
	case wellknown.PubOperationEvict:
		return "evicting"
	}
	return "updating"
}

// deny refuses op with message: an eviction with 429 Too Many Requests
// (kubectl drain waits and retries, as for a PodDisruptionBudget), the
// others with 403 Forbidden, as OpenKruise does.
func (a *PodUnavailableBudgetAdmission) deny(op wellknown.PubOperation, message string) *admissionv1.AdmissionResponse {
	a.denials.WithLabelValues(string(op)).Inc()
	code, reason := int32(http.StatusForbidden), metav1.StatusReasonForbidden
	if op == wellknown.PubOperationEvict {
		code, reason = http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message,
	}}
}

// Validate checks a PodUnavailableBudget on CREATE and UPDATE for what its
// CRD's schema cannot: the kruise.io/pub-protect-operations and
// pub.kruise.io/protect-total-replicas annotations, and that no other
// budget of the namespace covers the same pods (the same targetRef, or a
// selector that overlaps, by OpenKruise's loose rule). Exactly one of
// selector and targetRef, exactly one of maxUnavailable and minAvailable,
// their formats and the immutability of selector and targetRef are the
// CRD's rules; the selector's syntax is checked by ValidateSelectors.
func (a *PodUnavailableBudgetAdmission) Validate(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update || len(req.Object.Raw) == 0 {
		return nil
	}
	pub := &policyv1alpha1.PodUnavailableBudget{}
	if err := json.Unmarshal(req.Object.Raw, pub); err != nil {
		return Deny(fmt.Sprintf("object is not a PodUnavailableBudget: %v", err))
	}
	pub.Namespace = cmp.Or(pub.Namespace, req.Namespace)
	errs := validatePubAnnotations(pub)
	others, err := a.budgets.Budgets(pub.Namespace)
	if err != nil {
		return Deny(fmt.Sprintf("cannot check the other PodUnavailableBudgets of namespace %s: %v; retry", pub.Namespace, err))
	}
	errs = append(errs, pubConflicts(pub, others)...)
	if len(errs) == 0 {
		return nil
	}
	return Deny(fmt.Sprintf("PodUnavailableBudget %q is invalid: %s", cmp.Or(pub.Name, req.Name), errs.ToAggregate().Error()))
}

// validatePubAnnotations checks the budget's annotations.
func validatePubAnnotations(pub *policyv1alpha1.PodUnavailableBudget) field.ErrorList {
	var errs field.ErrorList
	annotations := field.NewPath("metadata", "annotations")
	if raw, ok := pub.Annotations[wellknown.AnnotationPubProtectOperations]; ok && strings.TrimSpace(raw) != "" {
		path := annotations.Key(wellknown.AnnotationPubProtectOperations)
		for item := range strings.SplitSeq(raw, ",") {
			op := wellknown.PubOperation(strings.TrimSpace(item))
			if !slices.Contains(podunavailablebudget.KnownOperations, op) {
				errs = append(errs, field.Invalid(path, raw, fmt.Sprintf("%q is not an operation; use a comma-separated list of DELETE, EVICT, UPDATE and RESIZE, such as \"DELETE,EVICT\" (without the annotation: DELETE,EVICT,UPDATE)", op)))
			}
		}
	}
	if _, _, err := podunavailablebudget.TotalReplicasOverride(pub); err != nil {
		raw := pub.Annotations[wellknown.AnnotationPubProtectTotalReplicas]
		errs = append(errs, field.Invalid(annotations.Key(wellknown.AnnotationPubProtectTotalReplicas), raw,
			"use a replica count from 0 to 2147483647, such as \"10\", or remove the annotation to use the workload's replicas"))
	}
	return errs
}

// pubConflicts lists the other budgets of the namespace (not being
// deleted) that cover the same pods as pub: a pod is covered by one
// budget only.
func pubConflicts(pub *policyv1alpha1.PodUnavailableBudget, others []*policyv1alpha1.PodUnavailableBudget) field.ErrorList {
	var errs field.ErrorList
	for _, o := range others {
		if o.Name == pub.Name || o.DeletionTimestamp != nil {
			continue
		}
		switch {
		case pub.Spec.TargetReference != nil && o.Spec.TargetReference != nil:
			if sameTarget(pub.Spec.TargetReference, o.Spec.TargetReference) {
				errs = append(errs, field.Invalid(field.NewPath("spec", "targetRef"), pub.Spec.TargetReference.Name, fmt.Sprintf(
					"PodUnavailableBudget %s already targets this workload; a pod is covered by one budget only: change that budget instead", o.Name)))
			}
		case pub.Spec.Selector != nil && o.Spec.Selector != nil:
			if selectorsOverlap(pub.Spec.Selector, o.Spec.Selector) {
				errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), metav1.FormatLabelSelector(pub.Spec.Selector), fmt.Sprintf(
					"overlaps the selector of PodUnavailableBudget %s (%s); a pod is covered by one budget only: give the two selectors a label key whose values cannot both match, or change that budget instead",
					o.Name, metav1.FormatLabelSelector(o.Spec.Selector))))
			}
		}
		if len(errs) > 0 {
			return errs
		}
	}
	return nil
}

// sameTarget reports whether two targetRefs name the same workload (API
// group, kind and name; the version does not matter).
func sameTarget(a, b *policyv1alpha1.TargetReference) bool {
	ga, _ := schema.ParseGroupVersion(a.APIVersion)
	gb, _ := schema.ParseGroupVersion(b.APIVersion)
	return ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name
}

// selectorsOverlap is OpenKruise's loose overlap of two label selectors:
// they overlap when they constrain the same label keys and, for each key,
// their requirements can both hold (a matchLabels entry is an In of one
// value). Selectors over different keys do not overlap by this rule.
func selectorsOverlap(a, b *metav1.LabelSelector) bool {
	ra, rb := requirementsByKey(a), requirementsByKey(b)
	if len(ra) != len(rb) {
		return false
	}
	for k, x := range ra {
		y, ok := rb[k]
		if !ok || !requirementsMeet(x, y) || !requirementsMeet(y, x) {
			return false
		}
	}
	return true
}

// requirementsByKey is a selector's requirements by label key (the last
// one of a key wins, as in OpenKruise).
func requirementsByKey(s *metav1.LabelSelector) map[string]metav1.LabelSelectorRequirement {
	out := map[string]metav1.LabelSelectorRequirement{}
	for _, e := range s.MatchExpressions {
		out[e.Key] = e
	}
	for k, v := range s.MatchLabels {
		out[k] = metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}}
	}
	return out
}

// requirementsMeet reports whether a label can satisfy x and y at once
// (checked from x's side; selectorsOverlap asks both ways).
func requirementsMeet(x, y metav1.LabelSelectorRequirement) bool {
	switch x.Operator {
	case metav1.LabelSelectorOpIn:
		switch y.Operator {
		case metav1.LabelSelectorOpExists:
			return true
		case metav1.LabelSelectorOpIn:
			return slices.ContainsFunc(x.Values, func(v string) bool { return slices.Contains(y.Values, v) })
		case metav1.LabelSelectorOpNotIn:
			return slices.ContainsFunc(x.Values, func(v string) bool { return !slices.Contains(y.Values, v) })
		}
	case metav1.LabelSelectorOpExists:
		return y.Operator == metav1.LabelSelectorOpIn || y.Operator == metav1.LabelSelectorOpExists || y.Operator == metav1.LabelSelectorOpNotIn
	case metav1.LabelSelectorOpNotIn:
		switch y.Operator {
		case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, metav1.LabelSelectorOpNotIn:
			return true
		case metav1.LabelSelectorOpIn:
			return slices.ContainsFunc(y.Values, func(v string) bool { return !slices.Contains(x.Values, v) })
		}
	case metav1.LabelSelectorOpDoesNotExist:
		return y.Operator == metav1.LabelSelectorOpDoesNotExist || y.Operator == metav1.LabelSelectorOpNotIn
	}
	return false
}

// keyedLocks is a lock per budget UID, dropped when unused.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[types.UID]*keyedLock
}

type keyedLock struct {
	// held has a token in it while the lock is held: a send waits for it
	// as Lock would, but can give up with its context.
	held  chan struct{}
	users int
}

// lock locks key and returns its unlock, or ctx's error if ctx ends
// first.
func (k *keyedLocks) lock(ctx context.Context, key types.UID) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[types.UID]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{held: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
