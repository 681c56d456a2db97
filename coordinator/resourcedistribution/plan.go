package resourcedistribution

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// systemNamespaces are left out of allNamespaces (they can still be named
// in includedNamespaces).
var systemNamespaces = map[string]bool{"kube-system": true, "kube-public": true}

// conditionOrder is the order of status.conditions: every type, always
// present, True with the failed namespaces when something went wrong.
var conditionOrder = []v1alpha1.ResourceDistributionConditionType{
	v1alpha1.ResourceDistributionGetResourceFailed,
	v1alpha1.ResourceDistributionCreateResourceFailed,
	v1alpha1.ResourceDistributionUpdateResourceFailed,
	v1alpha1.ResourceDistributionDeleteResourceFailed,
	v1alpha1.ResourceDistributionConflictOccurred,
	v1alpha1.ResourceDistributionNamespaceNotExists,
}

// HashCode is the hashcode annotation of a resource manifest: the hex
// SHA-256 of its bytes as stored in spec.resource.
func HashCode(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// labelValue is the copy label's value for distribution name: the name
// itself, or, for a name longer than a label value may be (63), "h-" and
// a hash of it.
func labelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	return "h-" + HashCode([]byte(name))[:40]
}

// resource is the object a distribution copies: a Secret or a ConfigMap.
type resource struct {
	kind   string
	secret *corev1.Secret
	cm     *corev1.ConfigMap
}

// name is the resource's metadata.name.
func (r resource) name() string {
	if r.secret != nil {
		return r.secret.Name
	}
	return r.cm.Name
}

// decode reads spec.resource.
func decode(rd *v1alpha1.ResourceDistribution) (resource, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(rd.Spec.Resource.Raw, &tm); err != nil {
		return resource{}, fmt.Errorf("spec.resource: %w", err)
	}
	r := resource{kind: tm.Kind}
	var err error
	switch {
	case tm.APIVersion == "v1" && tm.Kind == "Secret":
		r.secret = &corev1.Secret{}
		err = json.Unmarshal(rd.Spec.Resource.Raw, r.secret)
	case tm.APIVersion == "v1" && tm.Kind == "ConfigMap":
		r.cm = &corev1.ConfigMap{}
		err = json.Unmarshal(rd.Spec.Resource.Raw, r.cm)
	default:
		return resource{}, fmt.Errorf("spec.resource: %s %s cannot be distributed; use a v1 Secret or ConfigMap", tm.APIVersion, tm.Kind)
	}
	if err != nil {
		return resource{}, fmt.Errorf("spec.resource: %w", err)
	}
	if r.name() == "" {
		return resource{}, fmt.Errorf("spec.resource.metadata.name: required")
	}
	return r, nil
}

// Resource returns the kind (Secret or ConfigMap) and name of the object
// rd copies, or why spec.resource is not one.
func Resource(rd *v1alpha1.ResourceDistribution) (kind, name string, err error) {
	r, err := decode(rd)
	if err != nil {
		return "", "", err
	}
	return r.kind, r.name(), nil
}

// copyMeta is the metadata of rd's copy of r in namespace ns.
func copyMeta(rd *v1alpha1.ResourceDistribution, src metav1.ObjectMeta, ns string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name: src.Name, Namespace: ns,
		Labels:      maps.Clone(src.Labels),
		Annotations: maps.Clone(src.Annotations),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rd,
			v1alpha1.SchemeGroupVersion.WithKind("ResourceDistribution"))},
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Labels[wellknown.LabelResourceDistribution] = labelValue(rd.Name)
	m.Annotations[wellknown.AnnotationResourceDistributionFrom] = rd.Name
	m.Annotations[wellknown.AnnotationResourceDistributionHashCode] = HashCode(rd.Spec.Resource.Raw)
	return m
}

// sameContent reports whether a copy holds what rd wants (its labels,
// annotations other than the timestamp, and data).
func sameContent(want, have metav1.ObjectMeta, wantData, haveData any) bool {
	strip := func(a map[string]string) map[string]string {
		out := maps.Clone(a)
		delete(out, wellknown.AnnotationResourceDistributionDistributedTimestamp)
		return out
	}
	return maps.Equal(want.Labels, have.Labels) && maps.Equal(strip(want.Annotations), strip(have.Annotations)) &&
		apiequality.Semantic.DeepEqual(wantData, haveData)
}

// TargetNamespaces returns the namespaces rd targets that exist (sorted)
// and the included ones that do not.
func TargetNamespaces(rd *v1alpha1.ResourceDistribution, namespaces []*corev1.Namespace) (targets, missing []string, err error) {
	t := rd.Spec.Targets
	excluded := map[string]bool{}
	for _, n := range t.ExcludedNamespaces.List {
		excluded[n.Name] = true
	}
	sel := labels.Nothing()
	if len(t.NamespaceLabelSelector.MatchLabels)+len(t.NamespaceLabelSelector.MatchExpressions) > 0 {
		if sel, err = metav1.LabelSelectorAsSelector(&t.NamespaceLabelSelector); err != nil {
			return nil, nil, fmt.Errorf("spec.targets.namespaceLabelSelector: %w", err)
		}
	}
	exists := map[string]bool{}
	for _, ns := range namespaces {
		if ns.DeletionTimestamp != nil {
			continue
		}
		exists[ns.Name] = true
		if excluded[ns.Name] {
			continue
		}
		if (t.AllNamespaces && !systemNamespaces[ns.Name]) || sel.Matches(labels.Set(ns.Labels)) {
			targets = append(targets, ns.Name)
		}
	}
	for _, n := range t.IncludedNamespaces.List {
		switch {
		case excluded[n.Name]:
		case !exists[n.Name]:
			missing = append(missing, n.Name)
		case !slices.Contains(targets, n.Name):
			targets = append(targets, n.Name)
		}
	}
	slices.Sort(targets)
	slices.Sort(missing)
	return targets, slices.Compact(missing), nil
}

// failures collects the namespaces of each failure kind.
type failures map[v1alpha1.ResourceDistributionConditionType][]string

// status is rd's status for targets of which succeeded went well.
func status(rd *v1alpha1.ResourceDistribution, targets []string, succeeded int, f failures, now metav1.Time) v1alpha1.ResourceDistributionStatus {
	st := v1alpha1.ResourceDistributionStatus{
		Desired: int32(len(targets)), Succeeded: int32(succeeded), ObservedGeneration: rd.Generation,
	}
	failed := map[string]bool{}
	for _, t := range conditionOrder {
		ns := slices.Compact(slices.Sorted(slices.Values(f[t])))
		c := v1alpha1.ResourceDistributionCondition{Type: t, Status: v1alpha1.ResourceDistributionConditionFalse, FailedNamespaces: ns}
		if len(ns) > 0 {
			c.Status, c.Reason = v1alpha1.ResourceDistributionConditionTrue, string(t)
			if t != v1alpha1.ResourceDistributionNamespaceNotExists {
				for _, n := range ns {
					failed[n] = true
				}
			}
		}
		c.LastTransitionTime = now
		for _, old := range rd.Status.Conditions {
			if old.Type == t && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		st.Conditions = append(st.Conditions, c)
	}
	st.Failed = int32(len(failed))
	return st
}
