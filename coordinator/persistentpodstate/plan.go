package persistentpodstate

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// The workloads a PersistentPodState can target.
var (
	// AppsStatefulSet is the upstream StatefulSet.
	AppsStatefulSet = schema.GroupKind{Group: "apps", Kind: KindStatefulSet}
	// KruiseStatefulSet is the Advanced StatefulSet.
	KruiseStatefulSet = schema.GroupKind{Group: "apps.kruise.io", Kind: KindStatefulSet}
)

const (
	// KindStatefulSet is the kind of both built-in targets.
	KindStatefulSet = "StatefulSet"
	// generatedWeight is the weight of the preferred term of a generated
	// PersistentPodState, as OpenKruise writes it.
	generatedWeight = 100
)

// WhiteList is the custom workload kinds of the kruise-configuration
// ConfigMap's PPS_Watch_Custom_Workload_WhiteList: StatefulSet-like kinds
// (pods named <workload>-<ordinal>, replicas at spec.replicas) that a
// PersistentPodState may target besides the two StatefulSets. The version
// says which version to read a kind at; matching ignores it, as
// OpenKruise's does.
type WhiteList []schema.GroupVersionKind

// ParseWhiteList decodes the ConfigMap value {"workloads": [{"Group":
// "...", "Version": "...", "Kind": "..."}]} (OpenKruise writes the keys
// capitalised; lowercase ones are read too). An empty value is an empty
// list; an entry without a group, version or kind is an error naming it.
func ParseWhiteList(data string) (WhiteList, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	var v struct {
		Workloads []struct{ Group, Version, Kind string } `json:"workloads"`
	}
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return nil, fmt.Errorf("decode %s: %w; want {\"workloads\": [{\"Group\": ..., \"Version\": ..., \"Kind\": ...}]}",
			wellknown.ConfigPersistentPodStateWatchCustomWorkloadWhiteList, err)
	}
	var out WhiteList
	for i, w := range v.Workloads {
		if w.Group == "" || w.Version == "" || w.Kind == "" {
			return nil, fmt.Errorf("%s: workloads[%d] needs Group, Version and Kind, got %+v",
				wellknown.ConfigPersistentPodStateWatchCustomWorkloadWhiteList, i, w)
		}
		gvk := schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind}
		if !slices.ContainsFunc(out, func(o schema.GroupVersionKind) bool { return o.GroupKind() == gvk.GroupKind() }) {
			out = append(out, gvk)
		}
	}
	return out, nil
}

// Lists reports whether the white list names gk (any version).
func (l WhiteList) Lists(gk schema.GroupKind) bool {
	return slices.ContainsFunc(l, func(g schema.GroupVersionKind) bool { return g.GroupKind() == gk })
}

// TargetKind returns the workload kind a targetRef or owner reference
// names when a PersistentPodState follows it: a StatefulSet of apps or
// apps.kruise.io (any version), or a kind of custom; ok is false for any
// other.
func TargetKind(apiVersion, kind string, custom WhiteList) (gk schema.GroupKind, ok bool) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupKind{}, false
	}
	gk = schema.GroupKind{Group: gv.Group, Kind: kind}
	return gk, custom.Follows(gk)
}

// Follows reports whether a PersistentPodState follows workloads of kind
// gk: the two StatefulSets, and the kinds of the white list.
func (l WhiteList) Follows(gk schema.GroupKind) bool {
	return gk == AppsStatefulSet || gk == KruiseStatefulSet || l.Lists(gk)
}

// Targets reports whether ref names the workload of kind gk and name
// (the version does not matter: Advanced StatefulSet is served at two).
func Targets(ref v1alpha1.TargetReference, gk schema.GroupKind, name string) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == gk.Group && ref.Kind == gk.Kind && ref.Name == name
}

// statefulSet is what the controller reads of a target: a StatefulSet of
// either kind, or a StatefulSet-like workload of the white list.
type statefulSet struct {
	// kind is the workload's group and kind; apiVersion the version the
	// coordinator reads it at.
	kind            schema.GroupKind
	apiVersion      string
	namespace, name string
	uid             types.UID
	annotations     map[string]string
	deleting        bool
	replicas, start int
	reserved        [][2]int // inclusive ordinal ranges (Advanced only)
}

// fromStatefulSet reads an upstream StatefulSet.
func fromStatefulSet(s *appsv1.StatefulSet) *statefulSet {
	w := &statefulSet{
		kind: AppsStatefulSet, apiVersion: appsv1.SchemeGroupVersion.String(), namespace: s.Namespace, name: s.Name, uid: s.UID,
		annotations: s.Annotations, deleting: s.DeletionTimestamp != nil, replicas: int(ptr.Deref(s.Spec.Replicas, 1)),
	}
	if s.Spec.Ordinals != nil && s.Spec.Ordinals.Start > 0 {
		w.start = int(s.Spec.Ordinals.Start)
	}
	return w
}

// fromAdvanced reads an Advanced StatefulSet.
func fromAdvanced(s *v1beta1.StatefulSet) *statefulSet {
	w := &statefulSet{
		kind: KruiseStatefulSet, apiVersion: v1beta1.SchemeGroupVersion.String(), namespace: s.Namespace, name: s.Name, uid: s.UID,
		annotations: s.Annotations, deleting: s.DeletionTimestamp != nil, replicas: int(ptr.Deref(s.Spec.Replicas, 1)),
		reserved: reservedRanges(s.Spec.ReserveOrdinals),
	}
	if s.Spec.Ordinals != nil && s.Spec.Ordinals.Start > 0 {
		w.start = int(s.Spec.Ordinals.Start)
	}
	return w
}

// fromCustom reads a StatefulSet-like workload of the white list: its
// replicas at spec.replicas (0 when unset, as OpenKruise reads them),
// ordinals from 0.
func fromCustom(gk schema.GroupKind, u *unstructured.Unstructured) *statefulSet {
	replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return &statefulSet{
		kind: gk, apiVersion: u.GetAPIVersion(), namespace: u.GetNamespace(), name: u.GetName(), uid: u.GetUID(),
		annotations: u.GetAnnotations(), deleting: u.GetDeletionTimestamp() != nil, replicas: int(replicas),
	}
}

// reservedRanges parses reserveOrdinals: integers and "a-b" ranges
// (inclusive). Entries the StatefulSet webhook would refuse are skipped.
func reservedRanges(reserve []intstr.IntOrString) [][2]int {
	var out [][2]int
	for _, r := range reserve {
		if r.Type == intstr.Int {
			if r.IntVal >= 0 {
				out = append(out, [2]int{int(r.IntVal), int(r.IntVal)})
			}
			continue
		}
		a, b, isRange := strings.Cut(strings.TrimSpace(r.StrVal), "-")
		lo, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil || lo < 0 {
			continue
		}
		hi := lo
		if isRange {
			if hi, err = strconv.Atoi(strings.TrimSpace(b)); err != nil || hi < lo {
				continue
			}
		}
		out = append(out, [2]int{lo, hi})
	}
	return out
}

// wantsOrdinal reports whether ordinal ord is one of the workload's
// replicas: the first replicas ordinals from the start ordinal that are
// not reserved.
func (w *statefulSet) wantsOrdinal(ord int) bool {
	if ord < w.start {
		return false
	}
	taken := 0
	for o := w.start; taken < w.replicas && o <= ord; o++ {
		if i := slices.IndexFunc(w.reserved, func(r [2]int) bool { return r[0] <= o && o <= r[1] }); i >= 0 {
			o = w.reserved[i][1] // past the reserved range at once
			continue
		}
		if o == ord {
			return true
		}
		taken++
	}
	return false
}

// ordinalOf is the ordinal in a pod name "<set>-<ordinal>", or -1.
func ordinalOf(set, pod string) int {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return -1
	}
	ord, err := strconv.Atoi(rest)
	if err != nil || ord < 0 || strconv.Itoa(ord) != rest {
		return -1
	}
	return ord
}

// controllerIs reports whether ref is a controller reference to the
// workload of kind gk and name.
func controllerIs(ref *metav1.OwnerReference, gk schema.GroupKind, name string) bool {
	if ref == nil || ref.Name != name || ref.Kind != gk.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == gk.Group
}

// ownsPod reports whether the workload is the pod's controller.
func (w *statefulSet) ownsPod(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return controllerIs(ref, w.kind, w.name) && ref.UID == w.uid
}

// recordable reports whether a pod's state is recorded: it is scheduled,
// Running and Ready, and not being deleted (OpenKruise records a pod once
// it is Ready on its node).
func recordable(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// topologyKeys are the node label keys a PersistentPodState records: those
// of requiredPersistentTopology and of every preferred term, sorted and
// without duplicates.
func topologyKeys(spec *v1alpha1.PersistentPodStateSpec) []string {
	var keys []string
	if spec.RequiredPersistentTopology != nil {
		keys = append(keys, spec.RequiredPersistentTopology.NodeTopologyKeys...)
	}
	for _, t := range spec.PreferredPersistentTopology {
		keys = append(keys, t.Preference.NodeTopologyKeys...)
	}
	return sortedUnique(keys)
}

// annotationKeys are the pod annotation keys a PersistentPodState
// records, sorted and without duplicates.
func annotationKeys(spec *v1alpha1.PersistentPodStateSpec) []string {
	var keys []string
	for _, a := range spec.PersistentPodAnnotations {
		keys = append(keys, a.Key)
	}
	return sortedUnique(keys)
}

func sortedUnique(keys []string) []string {
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "" })
	slices.Sort(keys)
	return slices.Compact(keys)
}

// podStateOf is the state to record for a pod on node: the node's values
// of the topology keys and the pod's values of the annotation keys (keys
// the node or pod lacks are left out; empty maps are nil).
func podStateOf(p *corev1.Pod, node *corev1.Node, topo, ann []string) v1alpha1.PodState {
	st := v1alpha1.PodState{NodeName: p.Spec.NodeName}
	for _, k := range topo {
		if v, ok := node.Labels[k]; ok {
			if st.NodeTopologyLabels == nil {
				st.NodeTopologyLabels = map[string]string{}
			}
			st.NodeTopologyLabels[k] = v
		}
	}
	for _, k := range ann {
		if v, ok := p.Annotations[k]; ok {
			if st.Annotations == nil {
				st.Annotations = map[string]string{}
			}
			st.Annotations[k] = v
		}
	}
	return st
}

// statusChange is what nextStatus changed, for events.
type statusChange struct {
	// recorded are the pods whose state was added or changed.
	recorded []string
	// dropped are the pods whose record was removed (scaled away).
	dropped []string
}

// nextStatus computes a PersistentPodState's status. w is its target (nil
// when the target does not exist; its records are then cleared, as
// OpenKruise does); pods are the target's pods, including those being
// deleted; node returns a node by name (nil if unknown: the pod's record
// is then left as it is).
//
// Every recordable pod of the target gets its current state recorded.
// Unless the retention policy is WhenDeleted, a record whose ordinal is no
// longer one of the target's replicas is dropped once its pod is gone;
// records of the replicas stay while their pods are away, for the pods
// that replace them.
func nextStatus(pps *v1alpha1.PersistentPodState, w *statefulSet, pods []*corev1.Pod, node func(string) *corev1.Node) (v1alpha1.PersistentPodStateStatus, statusChange) {
	st := v1alpha1.PersistentPodStateStatus{ObservedGeneration: pps.Generation}
	var ch statusChange
	if w == nil || w.deleting {
		ch.dropped = slices.Sorted(maps.Keys(pps.Status.PodStates))
		return st, ch
	}
	states := maps.Clone(pps.Status.PodStates)
	if states == nil {
		states = map[string]v1alpha1.PodState{}
	}
	topo, ann := topologyKeys(&pps.Spec), annotationKeys(&pps.Spec)
	present := map[string]bool{}
	for _, p := range pods {
		present[p.Name] = true
		if !recordable(p) {
			continue
		}
		n := node(p.Spec.NodeName)
		if n == nil {
			continue
		}
		next := podStateOf(p, n, topo, ann)
		if cur, ok := states[p.Name]; ok && apiequality.Semantic.DeepEqual(cur, next) {
			continue
		}
		states[p.Name] = next
		ch.recorded = append(ch.recorded, p.Name)
	}
	if pps.Spec.PersistentPodStateRetentionPolicy != v1alpha1.PersistentPodStateRetentionPolicyWhenDeleted {
		for name := range states {
			ord := ordinalOf(w.name, name)
			if ord < 0 || w.wantsOrdinal(ord) || present[name] {
				continue // not the target's name, still a replica, or its pod still there
			}
			delete(states, name)
			ch.dropped = append(ch.dropped, name)
		}
	}
	if len(states) > 0 {
		st.PodStates = states
	}
	slices.Sort(ch.recorded)
	slices.Sort(ch.dropped)
	return st, ch
}

// splitKeys splits a comma-separated annotation value into its keys,
// trimmed, without empty ones.
func splitKeys(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// generated is the PersistentPodState the workload's annotations ask for,
// or nil: with kruise.io/auto-generate-persistent-pod-state "true" and a
// required or preferred topology annotation (OpenKruise generates nothing
// without one of them), a PersistentPodState named after the workload,
// controlled by it, targeting it, with the required keys, one preferred
// term of weight 100 and the persisted annotation keys.
func generated(w *statefulSet) *v1alpha1.PersistentPodState {
	a := w.annotations
	if w.deleting || a[wellknown.AnnotationAutoGeneratePersistentPodState] != "true" {
		return nil
	}
	required, preferred := splitKeys(a[wellknown.AnnotationRequiredPersistentTopology]), splitKeys(a[wellknown.AnnotationPreferredPersistentTopology])
	if len(required) == 0 && len(preferred) == 0 {
		return nil
	}
	pps := &v1alpha1.PersistentPodState{
		ObjectMeta: metav1.ObjectMeta{
			Name: w.name, Namespace: w.namespace,
			OwnerReferences: []metav1.OwnerReference{w.controllerRef()},
		},
		Spec: v1alpha1.PersistentPodStateSpec{
			TargetReference: v1alpha1.TargetReference{APIVersion: w.apiVersion, Kind: w.kind.Kind, Name: w.name},
		},
	}
	if len(required) > 0 {
		pps.Spec.RequiredPersistentTopology = &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: required}
	}
	if len(preferred) > 0 {
		pps.Spec.PreferredPersistentTopology = []v1alpha1.PreferredTopologyTerm{{
			Weight: generatedWeight, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: preferred},
		}}
	}
	for _, k := range splitKeys(a[wellknown.AnnotationPersistentPodAnnotations]) {
		pps.Spec.PersistentPodAnnotations = append(pps.Spec.PersistentPodAnnotations, v1alpha1.PersistentPodAnnotation{Key: k})
	}
	return pps
}

// controllerRef is the owner reference a generated PersistentPodState
// carries (no blockOwnerDeletion: the coordinator needs no finalizers
// permission on upstream StatefulSets).
func (w *statefulSet) controllerRef() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: w.apiVersion, Kind: w.kind.Kind, Name: w.name, UID: w.uid, Controller: ptr.To(true)}
}

// generatedBy reports whether pps was generated for w: its controller is
// w (same UID).
func generatedBy(pps *v1alpha1.PersistentPodState, w *statefulSet) bool {
	ref := metav1.GetControllerOf(pps)
	return controllerIs(ref, w.kind, w.name) && ref.UID == w.uid
}

// generation is what to do about the PersistentPodState named after a
// workload.
type generation int

const (
	// keep: nothing to do.
	keep generation = iota
	// create the desired object.
	create
	// update the existing object's spec and owner references to the
	// desired ones (a generated object edited by someone, or one adopted:
	// generated for a workload of the same name that is gone, or with no
	// controller and targeting the workload).
	update
	// remove the generated object (the annotation was removed).
	remove
	// conflict: an object of that name belongs to something else; it is
	// left alone.
	conflict
)

// String names a generation decision for logs and tests.
func (g generation) String() string {
	return [...]string{"keep", "create", "update", "remove", "conflict"}[g]
}

// decideGeneration decides about existing (the PersistentPodState named
// after w, nil if none) given desired (generated(w)).
func decideGeneration(w *statefulSet, desired, existing *v1alpha1.PersistentPodState) generation {
	if existing != nil && existing.DeletionTimestamp != nil {
		return keep // wait until it is gone
	}
	ref := (*metav1.OwnerReference)(nil)
	if existing != nil {
		ref = metav1.GetControllerOf(existing)
	}
	switch {
	case desired == nil:
		if existing != nil && generatedBy(existing, w) {
			return remove
		}
		return keep
	case existing == nil:
		return create
	case generatedBy(existing, w):
		if apiequality.Semantic.DeepEqual(existing.Spec, desired.Spec) {
			return keep
		}
		return update
	case controllerIs(ref, w.kind, w.name):
		return update // generated for a same-named workload now gone
	case ref == nil && Targets(existing.Spec.TargetReference, w.kind, w.name):
		return update // the user's, or orphaned: adopt it
	default:
		return conflict
	}
}

// adopt returns existing with desired's spec and owner references in
// place of any StatefulSet controller reference.
func adopt(existing, desired *v1alpha1.PersistentPodState) *v1alpha1.PersistentPodState {
	out := existing.DeepCopy()
	out.Spec = *desired.Spec.DeepCopy()
	out.OwnerReferences = slices.DeleteFunc(out.OwnerReferences, func(r metav1.OwnerReference) bool {
		return ptr.Deref(r.Controller, false)
	})
	out.OwnerReferences = append(out.OwnerReferences, desired.OwnerReferences...)
	return out
}

// describeState renders a record for events: "node n1 (zone=a)".
func describeState(st v1alpha1.PodState) string {
	s := "node " + st.NodeName
	if len(st.NodeTopologyLabels) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(st.NodeTopologyLabels)) {
			parts = append(parts, fmt.Sprintf("%s=%s", k, st.NodeTopologyLabels[k]))
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
