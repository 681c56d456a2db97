package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/persistentpodstate"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Paths of the PersistentPodState webhooks.
const (
	// PersistentPodStatePodMutatePath serves
	// PersistentPodStateAdmission.MutatePod (pods CREATE, only pods with
	// the statefulset.kubernetes.io/pod-name label reach it).
	PersistentPodStatePodMutatePath = "/mutate-pod-persistent-state"
	// PersistentPodStateValidatePath serves
	// PersistentPodStateAdmission.Validate.
	PersistentPodStateValidatePath = "/validate-persistentpodstate"
)

// PersistentPodStateLister lists the PersistentPodStates of a namespace
// (the coordinator wires it from the informer's lister).
type PersistentPodStateLister interface {
	// PersistentPodStates returns the namespace's PersistentPodStates
	// (shared cache objects: not to be changed).
	PersistentPodStates(namespace string) ([]*v1alpha1.PersistentPodState, error)
}

// PersistentPodStateListerFunc adapts a function to
// PersistentPodStateLister.
type PersistentPodStateListerFunc func(namespace string) ([]*v1alpha1.PersistentPodState, error)

// PersistentPodStates implements PersistentPodStateLister.
func (f PersistentPodStateListerFunc) PersistentPodStates(namespace string) ([]*v1alpha1.PersistentPodState, error) {
	return f(namespace)
}

// PersistentPodStateAdmission holds the PersistentPodState webhooks: the
// pod mutation that gives a recreated StatefulSet pod its recorded
// placement and annotations, and the validation of PersistentPodStates.
type PersistentPodStateAdmission struct {
	states PersistentPodStateLister
	custom func() persistentpodstate.WhiteList
}

// NewPersistentPodStateAdmission returns the webhooks over states.
func NewPersistentPodStateAdmission(states PersistentPodStateLister) *PersistentPodStateAdmission {
	return &PersistentPodStateAdmission{states: states, custom: func() persistentpodstate.WhiteList { return nil }}
}

// WithCustomWorkloads makes the webhooks accept, and act for, the
// StatefulSet-like kinds list returns (the controller's white list, from
// PPS_Watch_Custom_Workload_WhiteList).
func (a *PersistentPodStateAdmission) WithCustomWorkloads(list func() persistentpodstate.WhiteList) *PersistentPodStateAdmission {
	a.custom = list
	return a
}

// stateFor returns the PersistentPodState (not being deleted) in namespace
// that targets the workload of kind gk and name; of several (which the
// validation refuses), the first by name.
func (a *PersistentPodStateAdmission) stateFor(namespace string, gk schema.GroupKind, name string) (*v1alpha1.PersistentPodState, error) {
	all, err := a.states.PersistentPodStates(namespace)
	if err != nil {
		return nil, fmt.Errorf("list the PersistentPodStates of namespace %s: %w", namespace, err)
	}
	var found *v1alpha1.PersistentPodState
	for _, pps := range all {
		if pps.DeletionTimestamp == nil && persistentpodstate.Targets(pps.Spec.TargetReference, gk, name) &&
			(found == nil || pps.Name < found.Name) {
			found = pps
		}
	}
	return found, nil
}

// MutatePod handles pod CREATE. A pod whose controller is a StatefulSet
// (apps or apps.kruise.io), or a white-listed StatefulSet-like workload,
// targeted by a PersistentPodState that has a
// record of the pod's name gets, as OpenKruise's pod webhook gives it:
//   - spec.nodeSelector entries with the recorded value of each
//     requiredPersistentTopology key (an entry of the same key is
//     overwritten), so that it must land where the old pod was;
//   - one preferredDuringScheduling node affinity term per
//     preferredPersistentTopology term, of its weight, requiring the
//     recorded value of each of its keys;
//   - the recorded persistentPodAnnotations it lacks (Shoal sets these
//     back; OpenKruise only records them);
//   - and the kruise.io/injected-persistent-pod-state annotation naming the
//     PersistentPodState.
//
// Keys without a recorded value are skipped. It never denies a pod:
// anything it cannot read lets the pod through unchanged.
func (a *PersistentPodStateAdmission) MutatePod(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Create || req.SubResource != "" || len(req.Object.Raw) == 0 {
		return allowed
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return allowed // the apiserver's own validation answers for it
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || pod.Name == "" {
		return allowed
	}
	gk, ok := persistentpodstate.TargetKind(ref.APIVersion, ref.Kind, a.custom())
	if !ok {
		return allowed
	}
	namespace := cmp.Or(pod.Namespace, req.Namespace)
	pps, err := a.stateFor(namespace, gk, ref.Name)
	if err != nil {
		klog.FromContext(ctx).Error(err, "PersistentPodState lookup; the pod is created unchanged", "pod", klog.KRef(namespace, pod.Name))
		return allowed
	}
	if pps == nil {
		return allowed
	}
	state, ok := pps.Status.PodStates[pod.Name]
	if !ok {
		return allowed // a pod created for the first time
	}
	ops := persistentPodStatePatch(pod, pps, state)
	if len(ops) == 0 {
		return allowed
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return allowed
	}
	klog.FromContext(ctx).V(2).Info("Gave a pod its recorded state", "pod", klog.KRef(namespace, pod.Name),
		"persistentPodState", pps.Name, "node", state.NodeName)
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// persistentPodStatePatch returns the JSON patch that gives pod the
// recorded state of pps (see MutatePod); none when there is nothing to add.
func persistentPodStatePatch(pod *corev1.Pod, pps *v1alpha1.PersistentPodState, state v1alpha1.PodState) []jsonPatchOp {
	selector := map[string]string{}
	if req := pps.Spec.RequiredPersistentTopology; req != nil {
		for _, k := range req.NodeTopologyKeys {
			if v, ok := state.NodeTopologyLabels[k]; ok && pod.Spec.NodeSelector[k] != v {
				selector[k] = v
			}
		}
	}
	var preferred []corev1.PreferredSchedulingTerm
	var have []corev1.PreferredSchedulingTerm
	if aff := pod.Spec.Affinity; aff != nil && aff.NodeAffinity != nil {
		have = aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	}
	for _, t := range pps.Spec.PreferredPersistentTopology {
		term := corev1.PreferredSchedulingTerm{Weight: t.Weight}
		for _, k := range t.Preference.NodeTopologyKeys {
			if v, ok := state.NodeTopologyLabels[k]; ok {
				term.Preference.MatchExpressions = append(term.Preference.MatchExpressions,
					corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
			}
		}
		if len(term.Preference.MatchExpressions) == 0 || slices.ContainsFunc(have, func(h corev1.PreferredSchedulingTerm) bool {
			return apiequality.Semantic.DeepEqual(h, term)
		}) {
			continue
		}
		preferred = append(preferred, term)
	}
	annotations := map[string]string{}
	for _, a := range pps.Spec.PersistentPodAnnotations {
		if v, ok := state.Annotations[a.Key]; ok {
			if _, present := pod.Annotations[a.Key]; !present {
				annotations[a.Key] = v
			}
		}
	}
	if len(selector) == 0 && len(preferred) == 0 && len(annotations) == 0 {
		return nil
	}
	if pod.Annotations[wellknown.AnnotationInjectedPersistentPodState] != pps.Name {
		annotations[wellknown.AnnotationInjectedPersistentPodState] = pps.Name
	}

	var ops []jsonPatchOp
	ops = append(ops, mapEntryOps("/metadata/annotations", pod.Annotations == nil, annotations)...)
	ops = append(ops, mapEntryOps("/spec/nodeSelector", pod.Spec.NodeSelector == nil, selector)...)
	if len(preferred) > 0 {
		switch aff := pod.Spec.Affinity; {
		case aff == nil:
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/affinity", Value: corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}}})
		case aff.NodeAffinity == nil:
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/affinity/nodeAffinity", Value: corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: preferred}})
		case len(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0:
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution", Value: preferred})
		default:
			for _, t := range preferred {
				ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/-", Value: t})
			}
		}
	}
	return ops
}

// mapEntryOps sets entries in the string map at path: the whole map when
// it is absent (or null), else one "add" per key (which replaces a value
// already there). Keys are sorted for a stable patch.
func mapEntryOps(path string, absent bool, entries map[string]string) []jsonPatchOp {
	if len(entries) == 0 {
		return nil
	}
	if absent {
		return []jsonPatchOp{{Op: "add", Path: path, Value: entries}}
	}
	var ops []jsonPatchOp
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		ops = append(ops, jsonPatchOp{Op: "add", Path: path + "/" + escapeJSONPointer(k), Value: entries[k]})
	}
	return ops
}

// escapeJSONPointer escapes a reference token of a JSON pointer (RFC
// 6901): "~" as "~0", "/" as "~1".
func escapeJSONPointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// persistentPodStateTargets are the targetRef apiVersions Shoal follows
// (kind StatefulSet).
var persistentPodStateTargets = []string{"apps/v1", "apps.kruise.io/v1beta1", "apps.kruise.io/v1alpha1"}

// The PersistentPodState CRD already enforces, before this webhook runs,
// with messages that name the field: a targetRef with apiVersion, kind and
// name (non-empty) that never changes; requiredPersistentTopology or a
// preferredPersistentTopology term (an object with neither is refused);
// preferred weights from 1 to 100; nodeTopologyKeys present in each term;
// annotation entries with a key; and the retention policy's values. The
// webhook adds what the schema cannot express.

// Validate handles CREATE and UPDATE of a PersistentPodState (matched at
// v1alpha1; v1beta1 requests arrive converted, and messages name the
// fields as the request's version spells them). It denies, each with the
// field and the fix:
//   - a targetRef other than a StatefulSet of apps/v1 or
//     apps.kruise.io/v1beta1 or v1alpha1, or a kind of the custom workload
//     white list (PPS_Watch_Custom_Workload_WhiteList, any version), or
//     whose name is not a valid object name;
//   - an empty list of node topology keys, or a key that is not a valid
//     label key;
//   - a persistentPodAnnotations key that is not a valid annotation key;
//   - on CREATE, a targetRef another PersistentPodState of the namespace
//     already has (a pod follows one PersistentPodState, as in
//     OpenKruise; targetRef cannot change, so UPDATE cannot make one).
//
// Status updates and deletes are allowed.
func (a *PersistentPodStateAdmission) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	pps := &v1alpha1.PersistentPodState{}
	if err := json.Unmarshal(req.Object.Raw, pps); err != nil {
		return badRequest(fmt.Sprintf("could not decode the PersistentPodState: %v", err))
	}
	keysField := "nodeTopologyKeys"
	if req.RequestKind != nil && req.RequestKind.Version == "v1beta1" {
		keysField = "keys"
	}
	problems := checkPersistentPodStateSpec(&pps.Spec, keysField, a.custom())
	if req.Operation == admissionv1.Create && len(problems) == 0 {
		ref := pps.Spec.TargetReference
		gk, _ := persistentpodstate.TargetKind(ref.APIVersion, ref.Kind, a.custom())
		namespace := cmp.Or(pps.Namespace, req.Namespace)
		all, err := a.states.PersistentPodStates(namespace)
		if err != nil {
			klog.FromContext(ctx).Error(err, "List PersistentPodStates; the targetRef conflict check is skipped")
		}
		for _, other := range all {
			if other.Name != pps.Name && other.DeletionTimestamp == nil && persistentpodstate.Targets(other.Spec.TargetReference, gk, ref.Name) {
				problems = append(problems, fmt.Sprintf("spec.targetRef: %s %s is already the target of PersistentPodState %s; a workload's pods follow one PersistentPodState: edit %s or delete it first",
					describeKind(gk), ref.Name, other.Name, other.Name))
				break
			}
		}
	}
	if len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// checkPersistentPodStateSpec checks what the CRD cannot; keysField is
// the request version's name of nodeTopologyKeys, custom the white list.
func checkPersistentPodStateSpec(spec *v1alpha1.PersistentPodStateSpec, keysField string, custom persistentpodstate.WhiteList) []string {
	var problems []string
	ref := spec.TargetReference
	gk, _ := persistentpodstate.TargetKind(ref.APIVersion, ref.Kind, custom)
	if !custom.Lists(gk) && (ref.Kind != persistentpodstate.KindStatefulSet || !slices.Contains(persistentPodStateTargets, ref.APIVersion)) {
		problems = append(problems, fmt.Sprintf("spec.targetRef: %s %s is not supported; a PersistentPodState targets a StatefulSet: set kind StatefulSet and apiVersion %s, "+
			"or ask the cluster administrator to add the kind to %s of ConfigMap %s",
			ref.APIVersion, ref.Kind, strings.Join(persistentPodStateTargets, ", or "),
			wellknown.ConfigPersistentPodStateWatchCustomWorkloadWhiteList, wellknown.ConfigMapKruiseConfiguration))
	}
	if ref.Name != "" {
		for _, msg := range content.IsDNS1123Subdomain(ref.Name) {
			problems = append(problems, fmt.Sprintf("spec.targetRef.name: %q is not a %s name: %s", ref.Name, ref.Kind, msg))
		}
	}
	checkKeys := func(path string, keys []string) {
		if len(keys) == 0 {
			problems = append(problems, fmt.Sprintf("%s.%s: empty; list at least one node label key, for example topology.kubernetes.io/zone or kubernetes.io/hostname", path, keysField))
		}
		for i, k := range keys {
			for _, msg := range content.IsLabelKey(k) {
				problems = append(problems, fmt.Sprintf("%s.%s[%d]: %q is not a node label key: %s", path, keysField, i, k, msg))
			}
		}
	}
	if spec.RequiredPersistentTopology != nil {
		checkKeys("spec.requiredPersistentTopology", spec.RequiredPersistentTopology.NodeTopologyKeys)
	}
	for i, t := range spec.PreferredPersistentTopology {
		checkKeys(fmt.Sprintf("spec.preferredPersistentTopology[%d].preference", i), t.Preference.NodeTopologyKeys)
	}
	for i, a := range spec.PersistentPodAnnotations {
		for _, msg := range content.IsLabelKey(a.Key) {
			problems = append(problems, fmt.Sprintf("spec.persistentPodAnnotations[%d].key: %q is not an annotation key: %s; set the key of the pod annotation to keep", i, a.Key, msg))
		}
	}
	return problems
}

// describeKind names a PersistentPodState target kind in messages: "apps
// StatefulSet", "apps.kruise.io StatefulSet", "example.io Widget".
func describeKind(gk schema.GroupKind) string {
	return gk.Group + " " + gk.Kind
}
