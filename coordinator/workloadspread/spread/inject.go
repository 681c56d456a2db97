package spread

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Subset returns the spec subset named name, nil without one.
func Subset(ws *v1alpha1.WorkloadSpread, name string) *v1alpha1.WorkloadSpreadSubset {
	for i := range ws.Spec.Subsets {
		if ws.Spec.Subsets[i].Name == name {
			return &ws.Spec.Subsets[i]
		}
	}
	return nil
}

// MergeRequired adds term to the required node affinity terms: the only
// term when there are none, else its expressions and fields are added to
// every term (the terms are ORed, so each must now also satisfy term).
func MergeRequired(terms []corev1.NodeSelectorTerm, term *corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	if term == nil {
		return terms
	}
	if len(terms) == 0 {
		return []corev1.NodeSelectorTerm{*term.DeepCopy()}
	}
	out := make([]corev1.NodeSelectorTerm, len(terms))
	for i := range terms {
		t := terms[i].DeepCopy()
		t.MatchExpressions = append(t.MatchExpressions, term.DeepCopy().MatchExpressions...)
		t.MatchFields = append(t.MatchFields, term.DeepCopy().MatchFields...)
		out[i] = *t
	}
	return out
}

// Inject places a pod, given as the JSON of a pod object, in a subset of
// ws and returns the changed JSON, as OpenKruise's webhook does:
// tolerations appended, preferred node affinity terms appended, the
// required node selector term merged (MergeRequired), then the subset's
// patch applied as a strategic merge patch (spec.priority cleared when
// the patch changes priorityClassName, so the Priority admission plugin
// sets it again), and the matched-workloadspread annotation set to
// {name, subset[, uid]}. Fields of the pod this code does not know are
// kept.
func Inject(raw []byte, ws *v1alpha1.WorkloadSpread, subsetName, uid string) ([]byte, error) {
	subset := Subset(ws, subsetName)
	if subset == nil {
		return nil, fmt.Errorf("WorkloadSpread %s has no subset %s", ws.Name, subsetName)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		return nil, fmt.Errorf("decode the pod: %w", err)
	}
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode the pod: %w", err)
	}
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		obj["spec"] = spec
	}
	if len(subset.Tolerations) > 0 {
		if err := setJSON(spec, "tolerations", append(pod.Spec.Tolerations, subset.Tolerations...)); err != nil {
			return nil, err
		}
	}
	if len(subset.PreferredNodeSelectorTerms) > 0 || subset.RequiredNodeSelectorTerm != nil {
		aff := pod.Spec.Affinity
		if aff == nil {
			aff = &corev1.Affinity{}
		}
		if aff.NodeAffinity == nil {
			aff.NodeAffinity = &corev1.NodeAffinity{}
		}
		na := aff.NodeAffinity
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, subset.PreferredNodeSelectorTerms...)
		if subset.RequiredNodeSelectorTerm != nil {
			if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
				na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
			}
			req := na.RequiredDuringSchedulingIgnoredDuringExecution
			req.NodeSelectorTerms = MergeRequired(req.NodeSelectorTerms, subset.RequiredNodeSelectorTerm)
		}
		if err := setJSON(spec, "affinity", aff); err != nil {
			return nil, err
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode the pod: %w", err)
	}
	if len(subset.Patch.Raw) > 0 {
		patched, err := strategicpatch.StrategicMergePatch(out, subset.Patch.Raw, &corev1.Pod{})
		if err != nil {
			return nil, fmt.Errorf("apply the patch of subset %s: %w", subsetName, err)
		}
		obj = map[string]any{}
		if err := json.Unmarshal(patched, &obj); err != nil {
			return nil, fmt.Errorf("decode the patched pod: %w", err)
		}
		spec, _ = obj["spec"].(map[string]any)
		if spec != nil && spec["priorityClassName"] != nonEmpty(pod.Spec.PriorityClassName) {
			delete(spec, "priority")
		}
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	annotations[wellknown.AnnotationMatchedWorkloadSpread] = Injection{Name: ws.Name, Subset: subsetName, UID: uid}.Annotation()
	out, err = json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode the pod: %w", err)
	}
	return out, nil
}

// nonEmpty is s as a decoded JSON value: nil for "" (an omitted field).
func nonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// setJSON sets m[key] to v as generic JSON.
func setJSON(m map[string]any, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	m[key] = g
	return nil
}

// ExistingPodPatch is the JSON merge patch the controller applies to a
// pod created before the WorkloadSpread when it assigns it to subset: the
// matched-workloadspread annotation (without uid) and, unless ws carries
// workloadspread.kruise.io/ignore-patch-existing-pods-metadata "true",
// the labels and annotations of the subset's patch.
func ExistingPodPatch(ws *v1alpha1.WorkloadSpread, subset *v1alpha1.WorkloadSpreadSubset) ([]byte, error) {
	meta := map[string]any{}
	if len(subset.Patch.Raw) > 0 && !strings.EqualFold(ws.Annotations[wellknown.AnnotationWorkloadSpreadIgnorePatchExistingPods], "true") {
		var p struct {
			Metadata struct {
				Labels      map[string]any `json:"labels,omitempty"`
				Annotations map[string]any `json:"annotations,omitempty"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(subset.Patch.Raw, &p); err == nil {
			if len(p.Metadata.Labels) > 0 {
				meta["labels"] = p.Metadata.Labels
			}
			if len(p.Metadata.Annotations) > 0 {
				meta["annotations"] = p.Metadata.Annotations
			}
		}
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	annotations[wellknown.AnnotationMatchedWorkloadSpread] = Injection{Name: ws.Name, Subset: subset.Name}.Annotation()
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, fmt.Errorf("encode the patch of pod metadata: %w", err)
	}
	return b, nil
}
