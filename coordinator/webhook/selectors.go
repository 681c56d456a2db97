package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SelectorsPath is where ValidateSelectors is served.
const SelectorsPath = "/validate-selectors"

// ValidateSelectors checks every label selector in an object's spec — any
// field named "selector" or ending in "Selector" that holds matchLabels or
// matchExpressions (workload selectors, namespaceSelector, affinity and
// spread labelSelectors) — with the apiserver's own label-selector rules,
// which a CRD schema cannot express. Each error names the field.
func ValidateSelectors(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation == admissionv1.Delete || len(req.Object.Raw) == 0 {
		return nil
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return Deny(fmt.Sprintf("object is not JSON: %v", err))
	}
	spec, ok := obj["spec"]
	if !ok {
		return nil
	}
	var errs field.ErrorList
	walkSelectors(spec, field.NewPath("spec"), &errs)
	if len(errs) == 0 {
		return nil
	}
	return Deny(fmt.Sprintf("%s %q is invalid: %s", req.Kind.Kind, req.Name, errs.ToAggregate().Error()))
}

func walkSelectors(v any, path *field.Path, errs *field.ErrorList) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := path.Child(k)
			if isSelectorField(k) {
				if m, ok := x[k].(map[string]any); ok && (m["matchLabels"] != nil || m["matchExpressions"] != nil) {
					*errs = append(*errs, validateLabelSelector(m, child)...)
					continue
				}
			}
			walkSelectors(x[k], child, errs)
		}
	case []any:
		for i, item := range x {
			walkSelectors(item, path.Index(i), errs)
		}
	}
}

// isSelectorField reports whether a field named name holds a label
// selector. Node selectors are not label selectors (their operators
// include Gt and Lt): v1beta1 WorkloadSpread's requiredNodeSelector and
// preferredNodeSelector hold node selector terms.
func isSelectorField(name string) bool {
	return name == "selector" || (strings.HasSuffix(name, "Selector") && !strings.HasSuffix(name, "NodeSelector"))
}

func validateLabelSelector(m map[string]any, path *field.Path) field.ErrorList {
	raw, err := json.Marshal(map[string]any{"matchLabels": m["matchLabels"], "matchExpressions": m["matchExpressions"]})
	if err != nil {
		return field.ErrorList{field.Invalid(path, m, err.Error())}
	}
	var sel metav1.LabelSelector
	if err := json.Unmarshal(raw, &sel); err != nil {
		return field.ErrorList{field.Invalid(path, string(raw), "not a label selector: "+err.Error())}
	}
	return metav1validation.ValidateLabelSelector(&sel, metav1validation.LabelSelectorValidationOptions{}, path)
}
