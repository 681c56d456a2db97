package spread

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CustomWorkload is an entry of the WorkloadSpread_Watch_Custom_Workload_WhiteList
// key of the kruise-configuration ConfigMap: a custom workload kind a
// targetRef may name.
type CustomWorkload struct {
	// GroupVersionKind of the workload (JSON keys Group, Version, Kind).
	schema.GroupVersionKind `json:",inline"`
	// SubResources are the kinds between the workload and its pods (a
	// ReplicaSet-like kind).
	SubResources []schema.GroupVersionKind `json:"subResources,omitempty"`
	// ReplicasPath is the dot-separated path of its replica count, such as
	// spec.replicas.
	ReplicasPath string `json:"replicasPath,omitempty"`
}

// ParseWhiteList decodes the ConfigMap value {"workloads": [...]}; an
// empty value is an empty list.
func ParseWhiteList(data string) ([]CustomWorkload, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	var v struct {
		Workloads []CustomWorkload `json:"workloads,omitempty"`
	}
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return nil, fmt.Errorf("decode the WorkloadSpread custom workload white list: %w", err)
	}
	return v.Workloads, nil
}

// builtinTargets are the kinds a targetRef may name without the white
// list, by kind: the API groups allowed.
var builtinTargets = map[string][]string{
	"CloneSet":    {"apps.kruise.io"},
	"Deployment":  {"apps"},
	"ReplicaSet":  {"apps"},
	"Job":         {"batch"},
	"StatefulSet": {"apps", "apps.kruise.io"},
}

// TargetAllowed reports whether a targetRef may name gk: a built-in kind
// in one of its groups, or a kind of the white list. A built-in kind name
// in another group is refused (as OpenKruise does).
func TargetAllowed(gk schema.GroupKind, custom []CustomWorkload) bool {
	if groups, ok := builtinTargets[gk.Kind]; ok {
		for _, g := range groups {
			if g == gk.Group {
				return true
			}
		}
		return false
	}
	for _, c := range custom {
		if c.Group == gk.Group && c.Kind == gk.Kind {
			return true
		}
	}
	return false
}
