package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/workloadspread/spread"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Paths of the WorkloadSpread webhooks.
const (
	// WorkloadSpreadPodPath serves WorkloadSpreadAdmission.Pod: pods
	// CREATE (mutating: the pod is placed in a subset), pods DELETE and
	// pods/eviction CREATE (recorded in the subset's deletingPods).
	WorkloadSpreadPodPath = "/mutate-pod-workloadspread"
	// WorkloadSpreadValidatePath serves WorkloadSpreadAdmission.Validate
	// (WorkloadSpread CREATE and UPDATE).
	WorkloadSpreadValidatePath = "/validate-workloadspread"
)

// Bounds of one WorkloadSpread status write, well inside the webhook's
// timeout.
const (
	// wsWriteAttempts bounds the status writes of one request: a
	// conflict is retried after a fresh read.
	wsWriteAttempts = 5
	// wsAPITimeout bounds the status writes of one request, the wait for
	// the WorkloadSpread's lock included.
	wsAPITimeout = 2 * time.Second
)

// WorkloadSpreadLookup finds WorkloadSpreads and their workloads in the
// informer caches (workloadspread.Controller implements it).
type WorkloadSpreadLookup interface {
	// SpreadFor returns the WorkloadSpread (not being deleted) whose
	// targetRef is in the pod's chain of controllers and whose
	// targetFilter selects the pod, nil when none is.
	// It may wait, within ctx, for its caches to catch up with the pod's
	// controller.
	SpreadFor(ctx context.Context, pod *corev1.Pod) (*v1alpha1.WorkloadSpread, error)
	// Spread returns the WorkloadSpread namespace/name, nil when there is
	// none.
	Spread(namespace, name string) (*v1alpha1.WorkloadSpread, error)
	// Spreads lists the WorkloadSpreads of a namespace.
	Spreads(namespace string) ([]*v1alpha1.WorkloadSpread, error)
	// Replicas returns the replica count the percentages of ws's
	// maxReplicas count against (0 when its workload does not exist).
	Replicas(ctx context.Context, ws *v1alpha1.WorkloadSpread) (int32, error)
}

// WorkloadSpreadAdmission holds the WorkloadSpread webhooks: the pod
// webhook that places each new pod of a workload in a subset of its
// WorkloadSpread and records pod deletions, and the validation of
// WorkloadSpreads.
//
// The pod webhook serializes concurrent pod creates through the
// WorkloadSpread's status, as OpenKruise does: a pod is recorded in its
// subset's creatingPods (and missingReplicas lowered) by a status UPDATE
// whose resourceVersion guards against a concurrent writer; on a conflict
// it reads the WorkloadSpread again and chooses again. Replicas of this
// coordinator also serialize per WorkloadSpread in process. The webhook
// fails open: when the status cannot be written the pod is created
// unchanged (and logged), and a deletion is never refused.
type WorkloadSpreadAdmission struct {
	spreads WorkloadSpreadLookup
	pods    PodGetter
	client  shoalclient.Interface
	custom  func() []spread.CustomWorkload
	now     func() time.Time
	newUID  func() string

	// locks serialises the writes of each WorkloadSpread on this replica.
	locks keyedLocks
	// written holds the WorkloadSpread this replica last wrote, by UID,
	// used while the informer has not shown it yet.
	written sync.Map
}

// NewWorkloadSpreadAdmission returns the handlers: WorkloadSpreads and
// workloads come from spreads, the pods of evictions from pods (an
// informer cache), and status is written through client.
func NewWorkloadSpreadAdmission(spreads WorkloadSpreadLookup, pods PodGetter, client shoalclient.Interface) *WorkloadSpreadAdmission {
	return &WorkloadSpreadAdmission{spreads: spreads, pods: pods, client: client, now: time.Now,
		newUID: func() string { return string(uuid.NewUUID()) }}
}

// WithCustomWorkloads makes validation accept, as targetRef, the custom
// workload kinds custom returns (the WorkloadSpread_Watch_Custom_Workload_WhiteList
// of the kruise-configuration ConfigMap, spread.ParseWhiteList).
func (a *WorkloadSpreadAdmission) WithCustomWorkloads(custom func() []spread.CustomWorkload) *WorkloadSpreadAdmission {
	a.custom = custom
	return a
}

var (
	_ Handler = (*WorkloadSpreadAdmission)(nil).Pod
	_ Handler = (*WorkloadSpreadAdmission)(nil).Validate
)

// Pod handles the pod requests. It denies only a CREATE it could not
// place in time (see below), so that the create is retried.
//
// CREATE: a pod (active, with a controller, not placed already) whose
// workload a WorkloadSpread targets goes to a subset: for a StatefulSet by
// its ordinal, with a single unlimited subset there, else the first
// subset with room (spread.RecordCreate) after recording it in the
// status. The pod is patched (spread.Inject) to carry the subset's node
// affinity, tolerations, patch and the matched-workloadspread annotation.
// With no subset with room the pod is left unchanged. When the status
// cannot be written (a slow or failing API, conflicts past
// wsWriteAttempts), the create is refused with a message that asks for a
// retry: the workload's controller creates the pod again.
//
// DELETE and pods/eviction CREATE: an active pod placed by a
// WorkloadSpread is recorded in its subset's deletingPods, and the
// subset's missingReplicas raised, so that a replacement can be placed
// there at once.
//
// A dry run writes no status.
func (a *WorkloadSpreadAdmission) Pod(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	dryRun := req.DryRun != nil && *req.DryRun
	switch {
	case req.Operation == admissionv1.Create && req.SubResource == "":
		return a.create(ctx, req, dryRun)
	case req.Operation == admissionv1.Delete && req.SubResource == "":
		pod := wsDecodePod(req.OldObject.Raw)
		if pod == nil {
			pod = a.cachedPod(ctx, req.Namespace, req.Name)
		}
		a.deleting(ctx, pod, req.Namespace, dryRun)
	case req.Operation == admissionv1.Create && req.SubResource == "eviction":
		a.deleting(ctx, a.cachedPod(ctx, req.Namespace, req.Name), req.Namespace, dryRun)
	}
	return nil
}

// wsDecodePod decodes a pod, nil when raw is empty or not a pod.
func wsDecodePod(raw []byte) *corev1.Pod {
	if len(raw) == 0 {
		return nil
	}
	p := &corev1.Pod{}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil
	}
	return p
}

// cachedPod reads a pod through the PodGetter, nil when it is unknown.
func (a *WorkloadSpreadAdmission) cachedPod(ctx context.Context, namespace, name string) *corev1.Pod {
	if a.pods == nil {
		return nil
	}
	p, err := a.pods.Pod(namespace, name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Read the pod for WorkloadSpread; its deletion is not recorded", "pod", klog.KRef(namespace, name))
		}
		return nil
	}
	return p
}

// create places a new pod.
func (a *WorkloadSpreadAdmission) create(ctx context.Context, req *admissionv1.AdmissionRequest, dryRun bool) *admissionv1.AdmissionResponse {
	pod := wsDecodePod(req.Object.Raw)
	if pod == nil || !spread.Active(pod) || metav1.GetControllerOf(pod) == nil || spread.InjectionOf(pod) != nil {
		return nil
	}
	pod.Namespace = cmp.Or(pod.Namespace, req.Namespace)
	log := klog.FromContext(ctx).WithValues("pod", klog.KRef(pod.Namespace, cmp.Or(pod.Name, pod.GenerateName)))
	ws, err := a.spreads.SpreadFor(ctx, pod)
	if err != nil {
		log.Error(err, "Find the WorkloadSpread of a new pod; the pod is created unchanged")
		return nil
	}
	if ws == nil {
		return nil
	}
	log = log.WithValues("workloadSpread", ws.Name)
	subset, uid, err := a.place(ctx, ws, pod, dryRun)
	if err != nil {
		// Created unchanged, the pod would stay outside every subset for
		// good; refused, it is created again by its workload's controller
		// a moment later, as OpenKruise's webhook has it.
		log.Error(err, "Place a new pod in a subset of its WorkloadSpread; the create is refused, to be retried")
		// 429 with a Retry-After: client-go itself tries again a second
		// later, and no controller takes the refusal for a write that may
		// have happened (as it would a 500).
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
			Message: fmt.Sprintf("WorkloadSpread %s/%s could not place the pod in a subset in time (%v); retry", ws.Namespace, ws.Name, err),
			Details: &metav1.StatusDetails{RetryAfterSeconds: 1},
		}}
	}
	if subset == "" {
		log.V(2).Info("No subset of the WorkloadSpread has room; the pod is created unchanged")
		return nil
	}
	mutated, err := spread.Inject(req.Object.Raw, ws, subset, uid)
	if err != nil {
		log.Error(err, "Inject the subset into the pod; the pod is created unchanged", "subset", subset)
		return nil
	}
	ops, err := wsJSONPatch(req.Object.Raw, mutated)
	if err != nil {
		log.Error(err, "Diff the injected pod; the pod is created unchanged", "subset", subset)
		return nil
	}
	if len(ops) == 0 {
		return nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		log.Error(err, "Encode the pod patch; the pod is created unchanged")
		return nil
	}
	log.V(2).Info("Placed the pod in a subset of its WorkloadSpread", "subset", subset)
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// place chooses the pod's subset and records it in ws's status; uid is
// the identifier generated for a pod without a name that was recorded.
func (a *WorkloadSpreadAdmission) place(ctx context.Context, ws *v1alpha1.WorkloadSpread, pod *corev1.Pod, dryRun bool) (subset, uid string, err error) {
	switch {
	case spread.SingleUnlimited(ws):
		return ws.Spec.Subsets[0].Name, "", nil
	case spread.IsStatefulSet(ws):
		return spread.ChooseByOrdinal(ws, pod.Name), "", nil
	}
	id := pod.Name
	if id == "" {
		id = a.newUID()
	}
	replicas, err := a.percentBase(ctx, ws)
	if err != nil {
		return "", "", err
	}
	var chosen string
	written, gone, err := a.write(ctx, ws, func(next *v1alpha1.WorkloadSpread) bool {
		s, changed := spread.RecordCreateVersion(next, spread.PodVersion(ws, pod), id, replicas, a.now())
		chosen = s
		return changed && !dryRun
	})
	if err != nil || gone {
		return "", "", err
	}
	if written && pod.Name == "" {
		uid = id
	}
	return chosen, uid, nil
}

// percentBase is the replica count ws's percentage maxReplicas count
// against: the workload's replicas, 0 when no maxReplicas is a
// percentage.
func (a *WorkloadSpreadAdmission) percentBase(ctx context.Context, ws *v1alpha1.WorkloadSpread) (int32, error) {
	if !spread.HasPercent(ws) {
		return 0, nil
	}
	replicas, err := a.spreads.Replicas(ctx, ws)
	if err != nil {
		return 0, fmt.Errorf("read the replicas of the workload of WorkloadSpread %s/%s: %w", ws.Namespace, ws.Name, err)
	}
	return replicas, nil
}

// deleting records the deletion of pod, if a WorkloadSpread placed it.
func (a *WorkloadSpreadAdmission) deleting(ctx context.Context, pod *corev1.Pod, namespace string, dryRun bool) {
	if pod == nil || dryRun || !spread.Active(pod) || metav1.GetControllerOf(pod) == nil {
		return
	}
	inj := spread.InjectionOf(pod)
	if inj == nil || inj.Name == "" {
		return
	}
	namespace = cmp.Or(pod.Namespace, namespace)
	log := klog.FromContext(ctx).WithValues("pod", klog.KRef(namespace, pod.Name), "workloadSpread", inj.Name)
	ws, err := a.spreads.Spread(namespace, inj.Name)
	if err != nil {
		log.Error(err, "Read the WorkloadSpread of a pod being deleted; its deletion is not recorded")
		return
	}
	if ws == nil || spread.SingleUnlimited(ws) || spread.IsStatefulSet(ws) {
		return
	}
	var replicas int32
	if spread.Versioned(ws) {
		if replicas, err = a.percentBase(ctx, ws); err != nil {
			log.Error(err, "Its deletion is not recorded")
			return
		}
	}
	_, _, err = a.write(ctx, ws, func(next *v1alpha1.WorkloadSpread) bool {
		return spread.RecordDeleteVersion(next, spread.PodVersion(ws, pod), pod.Name, inj.Subset, replicas, a.now())
	})
	if err != nil {
		log.Error(err, "Record the deletion of a pod in its WorkloadSpread; the controller will count it once it is gone")
	}
}

// write changes a copy of the newest known ws with change and, when
// change says so, writes its status (written); a conflict is retried
// after a fresh read, up to wsWriteAttempts times. A WorkloadSpread gone
// or replaced meanwhile is no error: gone says so, and nothing is
// written.
func (a *WorkloadSpreadAdmission) write(ctx context.Context, ws *v1alpha1.WorkloadSpread,
	change func(*v1alpha1.WorkloadSpread) bool) (written, gone bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, wsAPITimeout)
	defer cancel()
	unlock, err := a.locks.lock(ctx, ws.UID)
	if err != nil {
		return false, false, fmt.Errorf("wait for the other writes of WorkloadSpread %s/%s: %w", ws.Namespace, ws.Name, err)
	}
	defer unlock()
	client := a.client.AppsV1alpha1().WorkloadSpreads(ws.Namespace)
	cur := a.freshest(ws)
	for attempt := 1; ; attempt++ {
		next := cur.DeepCopy()
		if !change(next) {
			return false, false, nil
		}
		out, err := client.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			a.written.Store(ws.UID, out)
			return true, false, nil
		}
		if apierrors.IsNotFound(err) {
			return false, true, nil
		}
		if !apierrors.IsConflict(err) || attempt == wsWriteAttempts {
			return false, false, fmt.Errorf("write the status of WorkloadSpread %s/%s (attempt %d): %w", ws.Namespace, ws.Name, attempt, err)
		}
		fresh, err := client.Get(ctx, ws.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, true, nil
		}
		if err != nil {
			return false, false, fmt.Errorf("read WorkloadSpread %s/%s after a conflict: %w", ws.Namespace, ws.Name, err)
		}
		if fresh.UID != ws.UID || fresh.DeletionTimestamp != nil {
			return false, true, nil
		}
		cur = fresh
	}
}

// freshest returns the newer of the informer's copy of ws and the one this
// replica last wrote (resourceVersions compared as numbers, as
// OpenKruise's webhook does; a wrong guess costs a conflict and a read).
func (a *WorkloadSpreadAdmission) freshest(ws *v1alpha1.WorkloadSpread) *v1alpha1.WorkloadSpread {
	v, ok := a.written.Load(ws.UID)
	if !ok {
		return ws
	}
	w := v.(*v1alpha1.WorkloadSpread)
	wrv, err1 := strconv.ParseUint(w.ResourceVersion, 10, 64)
	irv, err2 := strconv.ParseUint(ws.ResourceVersion, 10, 64)
	if err1 != nil || err2 != nil || irv >= wrv {
		a.written.CompareAndDelete(ws.UID, v)
		return ws
	}
	return w
}

// wsJSONPatch is the RFC 6902 patch that turns the JSON document orig
// into next: objects are compared key by key, anything else (lists
// included) is replaced whole when it differs.
func wsJSONPatch(orig, next []byte) ([]jsonPatchOp, error) {
	var a, b any
	if err := json.Unmarshal(orig, &a); err != nil {
		return nil, fmt.Errorf("decode the original object: %w", err)
	}
	if err := json.Unmarshal(next, &b); err != nil {
		return nil, fmt.Errorf("decode the changed object: %w", err)
	}
	var ops []jsonPatchOp
	wsDiff("", a, b, &ops)
	return ops, nil
}

// wsDiff appends the operations that turn a into b at path.
func wsDiff(path string, a, b any, ops *[]jsonPatchOp) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			*ops = append(*ops, jsonPatchOp{Op: "replace", Path: path, Value: b})
		}
		return
	}
	for _, k := range slices.Sorted(maps.Keys(am)) {
		if _, ok := bm[k]; !ok {
			*ops = append(*ops, jsonPatchOp{Op: "remove", Path: path + "/" + escapeJSONPointer(k)})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(bm)) {
		p := path + "/" + escapeJSONPointer(k)
		if av, ok := am[k]; ok {
			wsDiff(p, av, bm[k], ops)
		} else {
			*ops = append(*ops, jsonPatchOp{Op: "add", Path: p, Value: bm[k]})
		}
	}
}

// Validate checks a WorkloadSpread on CREATE and UPDATE, with OpenKruise's
// rules (the CRD's schema enforces several of them already; they are
// checked here as well, with messages that name the field):
//   - spec.targetRef: set, with apiVersion, kind and name, of a kind
//     WorkloadSpread supports (Deployment, ReplicaSet, Job, CloneSet,
//     StatefulSet of apps or apps.kruise.io, or a custom kind of the white
//     list); not the target of another WorkloadSpread of the namespace;
//     on UPDATE its group, kind and name unchanged;
//   - spec.targetFilter.selector a valid label selector, its
//     replicasPathList without empty paths;
//   - spec.subsets: at least one, names set and unique, node selector
//     terms, preferred terms and tolerations as a pod's would be
//     validated, maxReplicas non-negative integers or percentages from 0%
//     to 100%, all of one form, integers for a StatefulSet, percentages
//     adding up to at most 100% and to exactly 100% unless the last subset
//     is unlimited, patch a JSON object that applies to a pod as a
//     strategic merge patch;
//   - spec.scheduleStrategy: type Fixed, Adaptive or empty; adaptive only
//     with type Adaptive, then the last subset (of several) without
//     maxReplicas and rescheduleCriticalSeconds from 0 to 295/(subsets-1).
func (a *WorkloadSpreadAdmission) Validate(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update || len(req.Object.Raw) == 0 {
		return nil
	}
	ws := &v1alpha1.WorkloadSpread{}
	if err := json.Unmarshal(req.Object.Raw, ws); err != nil {
		return Deny(fmt.Sprintf("object is not a WorkloadSpread: %v", err))
	}
	ws.Namespace = cmp.Or(ws.Namespace, req.Namespace)
	var custom []spread.CustomWorkload
	if a.custom != nil {
		custom = a.custom()
	}
	errs := ValidateWorkloadSpread(ws, custom)
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old := &v1alpha1.WorkloadSpread{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err == nil {
			errs = append(errs, wsValidateTargetUpdate(ws, old)...)
		}
	}
	if a.spreads != nil && ws.Spec.TargetReference != nil {
		others, err := a.spreads.Spreads(ws.Namespace)
		if err != nil {
			return Deny(fmt.Sprintf("cannot check the other WorkloadSpreads of namespace %s: %v; retry", ws.Namespace, err))
		}
		errs = append(errs, wsConflicts(ws, others)...)
	}
	if len(errs) == 0 {
		return nil
	}
	return Deny(fmt.Sprintf("WorkloadSpread %q is invalid: %s", cmp.Or(ws.Name, req.Name), errs.ToAggregate().Error()))
}

// ValidateWorkloadSpread checks a WorkloadSpread's spec by itself (see
// WorkloadSpreadAdmission.Validate); custom are the custom workload kinds
// a targetRef may name.
func ValidateWorkloadSpread(ws *v1alpha1.WorkloadSpread, custom []spread.CustomWorkload) field.ErrorList {
	spec := field.NewPath("spec")
	errs := wsValidateTarget(ws, custom, spec.Child("targetRef"))
	if f := ws.Spec.TargetFilter; f != nil {
		if f.Selector != nil {
			if _, err := metav1.LabelSelectorAsSelector(f.Selector); err != nil {
				errs = append(errs, field.Invalid(spec.Child("targetFilter", "selector"), metav1.FormatLabelSelector(f.Selector),
					fmt.Sprintf("not a valid label selector: %v", err)))
			}
		}
		for i, p := range f.ReplicasPathList {
			if p == "" {
				errs = append(errs, field.Required(spec.Child("targetFilter", "replicasPathList").Index(i),
					"use a dot-separated path of the workload, such as spec.replicas"))
			}
		}
	}
	errs = append(errs, wsValidateSubsets(ws, spec.Child("subsets"))...)
	errs = append(errs, wsValidateStrategy(ws, spec.Child("scheduleStrategy"))...)
	return errs
}

// wsValidateTarget checks spec.targetRef.
func wsValidateTarget(ws *v1alpha1.WorkloadSpread, custom []spread.CustomWorkload, path *field.Path) field.ErrorList {
	t := ws.Spec.TargetReference
	if t == nil {
		return field.ErrorList{field.Required(path, "name the workload to spread: apiVersion, kind and name, such as apps/v1 Deployment web")}
	}
	var errs field.ErrorList
	if t.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), "such as apps/v1"))
	}
	if t.Kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), "such as Deployment"))
	}
	if t.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "the name of the workload in this namespace"))
	}
	if len(errs) > 0 {
		return errs
	}
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("apiVersion"), t.APIVersion, fmt.Sprintf("not an API version: %v", err))}
	}
	if !spread.TargetAllowed(schema.GroupKind{Group: gv.Group, Kind: t.Kind}, custom) {
		errs = append(errs, field.NotSupported(path.Child("kind"), t.Kind+" of "+cmp.Or(gv.Group, "the core group"), []string{
			"Deployment (apps)", "ReplicaSet (apps)", "Job (batch)", "CloneSet (apps.kruise.io)", "StatefulSet (apps or apps.kruise.io)",
			"a custom kind listed in WorkloadSpread_Watch_Custom_Workload_WhiteList of ConfigMap kruise-configuration",
		}))
	}
	return errs
}

// wsValidateSubsets checks spec.subsets.
func wsValidateSubsets(ws *v1alpha1.WorkloadSpread, path *field.Path) field.ErrorList {
	subsets := ws.Spec.Subsets
	if len(subsets) == 0 {
		return field.ErrorList{field.Required(path, "list at least one subset")}
	}
	var errs field.ErrorList
	names := map[string]bool{}
	var firstType *intstr.Type
	percentSum := 0
	for i := range subsets {
		s := &subsets[i]
		p := path.Index(i)
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "give the subset a name"))
		case names[s.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), s.Name))
		}
		names[s.Name] = true
		if s.RequiredNodeSelectorTerm != nil {
			errs = append(errs, wsValidateTerm(*s.RequiredNodeSelectorTerm, p.Child("requiredNodeSelectorTerm"))...)
		}
		for j, t := range s.PreferredNodeSelectorTerms {
			tp := p.Child("preferredNodeSelectorTerms").Index(j)
			if t.Weight < 1 || t.Weight > 100 {
				errs = append(errs, field.Invalid(tp.Child("weight"), t.Weight, "use a weight from 1 to 100"))
			}
			errs = append(errs, wsValidateTerm(t.Preference, tp.Child("preference"))...)
		}
		for j := range s.Tolerations {
			errs = append(errs, wsValidateToleration(&s.Tolerations[j], p.Child("tolerations").Index(j))...)
		}
		if len(s.Patch.Raw) > 0 {
			errs = append(errs, wsValidatePatch(s.Patch.Raw, p.Child("patch"))...)
		}
		if s.MaxReplicas == nil {
			continue
		}
		mp := p.Child("maxReplicas")
		if firstType == nil {
			firstType = &s.MaxReplicas.Type
		} else if s.MaxReplicas.Type != *firstType {
			errs = append(errs, field.Invalid(mp, s.MaxReplicas.String(),
				"every subset's maxReplicas must be of one form: all integers or all percentages"))
			return errs
		}
		if spread.IsStatefulSet(ws) && s.MaxReplicas.Type != intstr.Int {
			errs = append(errs, field.Invalid(mp, s.MaxReplicas.String(), "use an integer: a StatefulSet's subsets take integer maxReplicas only"))
			return errs
		}
		v, err := intstr.GetScaledValueFromIntOrPercent(s.MaxReplicas, 100, true)
		if err != nil || v < 0 || s.MaxReplicas.Type == intstr.String && v > 100 {
			errs = append(errs, field.Invalid(mp, s.MaxReplicas.String(), "use a non-negative integer or a percentage from 0% to 100%, such as \"50%\""))
			return errs
		}
		if s.MaxReplicas.Type == intstr.String {
			if percentSum += v; percentSum > 100 {
				errs = append(errs, field.Invalid(mp, s.MaxReplicas.String(), "the subsets' maxReplicas percentages add up to more than 100%"))
				return errs
			}
		}
	}
	if firstType != nil && *firstType == intstr.String && percentSum < 100 && subsets[len(subsets)-1].MaxReplicas != nil {
		errs = append(errs, field.Invalid(path.Index(0).Child("maxReplicas"), subsets[0].MaxReplicas.String(), fmt.Sprintf(
			"the subsets' maxReplicas percentages add up to %d%%: make them add up to 100%%, or leave the last subset's maxReplicas unset", percentSum)))
	}
	return errs
}

// wsValidatePatch checks a subset's patch: a JSON object that applies to
// a pod as a strategic merge patch.
func wsValidatePatch(raw []byte, path *field.Path) field.ErrorList {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return field.ErrorList{field.Invalid(path, string(raw), fmt.Sprintf("must be a JSON object (a strategic merge patch of a pod): %v", err))}
	}
	out, err := strategicpatch.StrategicMergePatch([]byte(`{}`), raw, &corev1.Pod{})
	if err == nil {
		err = json.Unmarshal(out, &corev1.Pod{})
	}
	if err != nil {
		return field.ErrorList{field.Invalid(path, string(raw), fmt.Sprintf("does not apply to a pod as a strategic merge patch: %v", err))}
	}
	return nil
}

// wsValidateTerm checks a node selector term as the apiserver checks a
// pod's.
func wsValidateTerm(t corev1.NodeSelectorTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range t.MatchExpressions {
		p := path.Child("matchExpressions").Index(i)
		for _, msg := range validation.IsQualifiedName(r.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), r.Key, msg))
		}
		errs = append(errs, wsValidateOperator(r.Operator, r.Values, p)...)
	}
	for i, r := range t.MatchFields {
		p := path.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(p.Child("key"), r.Key, []string{"metadata.name"}))
		}
		if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
			errs = append(errs, field.NotSupported(p.Child("operator"), r.Operator, []string{"In", "NotIn"}))
		} else if len(r.Values) != 1 {
			errs = append(errs, field.Invalid(p.Child("values"), r.Values, "give exactly one node name"))
		}
	}
	return errs
}

// wsValidateOperator checks a node selector requirement's operator and
// values.
func wsValidateOperator(op corev1.NodeSelectorOperator, values []string, p *field.Path) field.ErrorList {
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(values) == 0 {
			return field.ErrorList{field.Required(p.Child("values"), "In and NotIn take at least one value")}
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(values) > 0 {
			return field.ErrorList{field.Forbidden(p.Child("values"), "Exists and DoesNotExist take no values")}
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(values) != 1 {
			return field.ErrorList{field.Required(p.Child("values"), "Gt and Lt take exactly one integer value")}
		}
		if _, err := strconv.ParseInt(values[0], 10, 64); err != nil {
			return field.ErrorList{field.Invalid(p.Child("values").Index(0), values[0], "Gt and Lt take an integer value")}
		}
	default:
		return field.ErrorList{field.NotSupported(p.Child("operator"), op, []string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})}
	}
	return nil
}

// wsValidateToleration checks a toleration as the apiserver checks a
// pod's.
func wsValidateToleration(t *corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	} else if t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "a toleration without a key must use operator Exists"))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "tolerationSeconds applies to effect NoExecute only"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "operator Exists takes no value"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
	}
	return errs
}

// wsValidateStrategy checks spec.scheduleStrategy.
func wsValidateStrategy(ws *v1alpha1.WorkloadSpread, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := ws.Spec.ScheduleStrategy
	switch s.Type {
	case "", v1alpha1.FixedWorkloadSpreadScheduleStrategyType, v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType:
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), s.Type, []string{"Fixed", "Adaptive"}))
	}
	if s.Adaptive == nil {
		return errs
	}
	if s.Type != v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType {
		errs = append(errs, field.Invalid(path.Child("type"), s.Type, "set type Adaptive to use adaptive, or remove adaptive"))
	}
	n := len(ws.Spec.Subsets)
	if n > 1 && ws.Spec.Subsets[n-1].MaxReplicas != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "subsets").Index(n-1).Child("maxReplicas"), ws.Spec.Subsets[n-1].MaxReplicas.String(),
			"with an adaptive scheduleStrategy the last subset must leave maxReplicas unset, to take the pods the others cannot"))
	}
	if secs := s.Adaptive.RescheduleCriticalSeconds; secs != nil {
		limit := int32(1<<31 - 1)
		if n > 1 {
			limit = int32(spread.MaxScheduledFailedDuration.Seconds()-5) / int32(n-1)
		}
		if *secs < 0 || *secs > limit {
			errs = append(errs, field.Invalid(path.Child("adaptive", "rescheduleCriticalSeconds"), *secs,
				fmt.Sprintf("use 0 to %d seconds (295 divided by the number of subsets less one)", limit)))
		}
	}
	return errs
}

// wsValidateTargetUpdate refuses a change of the targetRef's group, kind
// or name.
func wsValidateTargetUpdate(ws, old *v1alpha1.WorkloadSpread) field.ErrorList {
	t, o := ws.Spec.TargetReference, old.Spec.TargetReference
	if t == nil || o == nil {
		return nil
	}
	if spread.Target(t) != spread.Target(o) || t.Name != o.Name {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "targetRef"), fmt.Sprintf("%s %s %s", t.APIVersion, t.Kind, t.Name), fmt.Sprintf(
			"the workload's group, kind and name cannot change (was %s %s %s); only the version in apiVersion may: create another WorkloadSpread instead",
			o.APIVersion, o.Kind, o.Name))}
	}
	return nil
}

// wsConflicts refuses a targetRef another WorkloadSpread of the namespace
// already has: a workload is spread by one WorkloadSpread only.
func wsConflicts(ws *v1alpha1.WorkloadSpread, others []*v1alpha1.WorkloadSpread) field.ErrorList {
	t := ws.Spec.TargetReference
	for _, o := range others {
		if o.Name == ws.Name || o.Spec.TargetReference == nil {
			continue
		}
		if spread.Target(o.Spec.TargetReference) == spread.Target(t) && o.Spec.TargetReference.Name == t.Name {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "targetRef"), t.Kind+" "+t.Name, fmt.Sprintf(
				"WorkloadSpread %s already spreads this workload; a workload has one WorkloadSpread: change that one instead", o.Name))}
		}
	}
	return nil
}
