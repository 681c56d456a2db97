package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// SidecarSetInjectPath serves SidecarSetInjector.Mutate.
const SidecarSetInjectPath = "/mutate-pod-sidecarset"

// SidecarSetInjector injects the sidecars of SidecarSets into pods as
// they are created (see sidecarcontrol.Inject), like OpenKruise's pod
// webhook.
type SidecarSetInjector struct {
	// sets lists all SidecarSets.
	sets func() ([]*appsv1beta1.SidecarSet, error)
	// namespaces gets a namespace by name.
	namespaces func(name string) (*corev1.Namespace, error)
	// revs lists a SidecarSet's ControllerRevisions.
	revs sidecarcontrol.RevisionGetter
	// now is the injection time recorded on pods.
	now func() metav1.Time
}

// NewSidecarSetInjector returns an injector that reads all SidecarSets
// from sets, namespaces by name from namespaces (only needed when a
// SidecarSet has a namespaceSelector) and SidecarSet revisions from revs
// (only needed for injectionStrategy.revision).
func NewSidecarSetInjector(sets func() ([]*appsv1beta1.SidecarSet, error), namespaces func(name string) (*corev1.Namespace, error), revs sidecarcontrol.RevisionGetter) *SidecarSetInjector {
	return &SidecarSetInjector{sets: sets, namespaces: namespaces, revs: revs, now: metav1.Now}
}

// Mutate handles pod CREATE: it answers with a JSON patch adding the
// sidecars, volumes, image pull secrets and annotations of the
// SidecarSets that select the pod. Other requests, and pods no
// SidecarSet selects, are allowed unchanged. It denies the pod when the
// SidecarSets cannot be read, when the pod's namespace cannot be read
// while a SidecarSet needs it for its namespaceSelector, and when
// injection fails (two SidecarSets injecting a container of the same
// name, a revision named in injectionStrategy.revision that does not
// exist, a patchPodMetadata value that cannot be merged); the message
// names the SidecarSets and fields involved. OpenKruise denies on the
// same errors, except that it treats an unreadable namespace as not
// matching.
func (i *SidecarSetInjector) Mutate(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Create || req.SubResource != "" || len(req.Object.Raw) == 0 ||
		(req.Resource.Resource != "" && req.Resource.Resource != "pods") {
		return allowed
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return badRequest(fmt.Sprintf("decode pod: %v", err))
	}
	namespace := pod.Namespace
	if namespace == "" {
		namespace = req.Namespace
	}

	sets, err := i.sets()
	if err != nil {
		return internalError(fmt.Sprintf("SidecarSet injection: list SidecarSets: %v", err))
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{corev1.LabelMetadataName: namespace}}}
	if scsInjectNeedsNamespace(sets) {
		if i.namespaces == nil {
			return internalError(fmt.Sprintf("SidecarSet injection: a SidecarSet has a namespaceSelector but namespace %q cannot be read", namespace))
		}
		got, err := i.namespaces(namespace)
		if err != nil || got == nil {
			return internalError(fmt.Sprintf("SidecarSet injection: read namespace %q to match the SidecarSets' namespaceSelector: %v", namespace, err))
		}
		ns = got
	}

	mutated := pod.DeepCopy()
	mutated.Namespace = namespace
	injected, err := sidecarcontrol.Inject(mutated, ns, sets, i.revs, i.now())
	if err != nil {
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: fmt.Sprintf("SidecarSet injection: %v", err),
		}}
	}
	mutated.Namespace = pod.Namespace
	ops, err := scsInjectPatch(req.Object.Raw, pod, mutated)
	if err != nil {
		return internalError(fmt.Sprintf("SidecarSet injection: build the patch: %v", err))
	}
	if len(ops) == 0 {
		return allowed
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return internalError(fmt.Sprintf("SidecarSet injection: encode the patch: %v", err))
	}
	if len(injected) > 0 {
		klog.V(4).InfoS("Injected SidecarSets", "namespace", namespace, "pod", scsInjectPodName(pod), "sidecarSets", injected)
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// scsInjectNeedsNamespace reports whether an active SidecarSet has a
// namespaceSelector, so that the pod's namespace must be read.
func scsInjectNeedsNamespace(sets []*appsv1beta1.SidecarSet) bool {
	for _, s := range sets {
		if s != nil && !s.Spec.InjectionStrategy.Paused && s.Spec.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// scsInjectPodName names a pod in logs, also before it has a name.
func scsInjectPodName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "<generated>"
}

// scsInjectPatch returns the JSON patch turning orig (decoded from raw)
// into mutated, limited to what injection changes: the annotations and
// labels (one op per key), and the containers, init containers, volumes
// and image pull secrets (one op per inserted or changed item, so that
// the pod's own items are left as the client sent them).
func scsInjectPatch(raw []byte, orig, mutated *corev1.Pod) ([]jsonPatchOp, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	var ops []jsonPatchOp
	if string(top["metadata"]) == "" || string(top["metadata"]) == "null" {
		meta := map[string]any{}
		if len(mutated.Annotations) > 0 {
			meta["annotations"] = mutated.Annotations
		}
		if len(mutated.Labels) > 0 {
			meta["labels"] = mutated.Labels
		}
		if len(meta) > 0 {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata", Value: meta})
		}
	} else {
		ops = append(ops, scsInjectMapOps("/metadata/annotations", orig.Annotations, mutated.Annotations)...)
		ops = append(ops, scsInjectMapOps("/metadata/labels", orig.Labels, mutated.Labels)...)
	}
	ops = append(ops, scsInjectListOps("/spec/initContainers", orig.Spec.InitContainers, mutated.Spec.InitContainers, func(c corev1.Container) string { return c.Name })...)
	ops = append(ops, scsInjectListOps("/spec/containers", orig.Spec.Containers, mutated.Spec.Containers, func(c corev1.Container) string { return c.Name })...)
	ops = append(ops, scsInjectListOps("/spec/volumes", orig.Spec.Volumes, mutated.Spec.Volumes, func(v corev1.Volume) string { return v.Name })...)
	ops = append(ops, scsInjectListOps("/spec/imagePullSecrets", orig.Spec.ImagePullSecrets, mutated.Spec.ImagePullSecrets, func(s corev1.LocalObjectReference) string { return s.Name })...)
	return ops, nil
}

// scsInjectMapOps turns the string map at path from orig into next: the
// whole map when orig is nil, else an "add" per new or changed key and a
// "remove" per dropped key.
func scsInjectMapOps(path string, orig, next map[string]string) []jsonPatchOp {
	if maps.Equal(orig, next) {
		return nil
	}
	if orig == nil {
		return []jsonPatchOp{{Op: "add", Path: path, Value: next}}
	}
	changed := map[string]string{}
	for k, v := range next {
		if old, ok := orig[k]; !ok || old != v {
			changed[k] = v
		}
	}
	ops := mapEntryOps(path, false, changed)
	for _, k := range slices.Sorted(maps.Keys(orig)) {
		if _, ok := next[k]; !ok {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: path + "/" + escapeJSONPointer(k)})
		}
	}
	return ops
}

// scsInjectListOps turns the list at path from orig into next, when next
// keeps orig's items (by key) in their order and only inserts or changes
// items: a "replace" per changed item and an "add" per inserted one, in
// order, so that each index is that of the list as patched so far.
// Otherwise, or when orig is empty, it sets the whole list.
func scsInjectListOps[T any](path string, orig, next []T, key func(T) string) []jsonPatchOp {
	if len(orig) == len(next) && apiequality.Semantic.DeepEqual(orig, next) {
		return nil
	}
	whole := []jsonPatchOp{{Op: "add", Path: path, Value: next}}
	if len(orig) == 0 {
		return whole
	}
	var ops []jsonPatchOp
	j := 0
	for idx, item := range next {
		at := path + "/" + strconv.Itoa(idx)
		if j < len(orig) && key(orig[j]) == key(item) {
			if !apiequality.Semantic.DeepEqual(orig[j], item) {
				ops = append(ops, jsonPatchOp{Op: "replace", Path: at, Value: item})
			}
			j++
			continue
		}
		ops = append(ops, jsonPatchOp{Op: "add", Path: at, Value: item})
	}
	if j != len(orig) {
		return whole
	}
	return ops
}
