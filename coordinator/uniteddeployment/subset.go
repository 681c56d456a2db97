package uniteddeployment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// AnnotationSubsetHash is set by the UnitedDeployment controller on each
// per-subset workload to a hash of what it wrote, so that a workload is
// rewritten only when the UnitedDeployment asks for something else.
const AnnotationSubsetHash = "apps.kruise.io/subset-hash"

// AnnotationSubsetRevision is set on each per-subset workload to the
// UnitedDeployment revision (status.currentRevision) its template comes
// from.
const AnnotationSubsetRevision = "apps.kruise.io/united-deployment-revision"

// workloadKind is a kind a subset can be: where its objects are written
// (the version of the UnitedDeployment's template) and where its
// partition is.
type workloadKind struct {
	// Kind is the object kind.
	Kind string
	// Write is the resource (at the template's version) objects are
	// created and updated through.
	Write schema.GroupVersionResource
	// Partition is the path of the rolling update's partition, nil when
	// the kind has none (Deployment).
	Partition []string
}

var (
	statefulSetKind         = workloadKind{"StatefulSet", appsv1.SchemeGroupVersion.WithResource("statefulsets"), []string{"spec", "updateStrategy", "rollingUpdate", "partition"}}
	advancedStatefulSetKind = workloadKind{"StatefulSet", v1beta1.SchemeGroupVersion.WithResource("statefulsets"), []string{"spec", "updateStrategy", "rollingUpdate", "partition"}}
	cloneSetKind            = workloadKind{"CloneSet", v1alpha1.SchemeGroupVersion.WithResource("clonesets"), []string{"spec", "updateStrategy", "partition"}}
	deploymentKind          = workloadKind{"Deployment", appsv1.SchemeGroupVersion.WithResource("deployments"), nil}
)

// template returns the kind of the UnitedDeployment's subsets, the
// template's metadata and its workload spec.
func template(ud *v1alpha1.UnitedDeployment) (workloadKind, metav1.ObjectMeta, any, error) {
	t := ud.Spec.Template
	switch {
	case t.StatefulSetTemplate != nil:
		return statefulSetKind, t.StatefulSetTemplate.ObjectMeta, &t.StatefulSetTemplate.Spec, nil
	case t.AdvancedStatefulSetTemplate != nil:
		return advancedStatefulSetKind, t.AdvancedStatefulSetTemplate.ObjectMeta, &t.AdvancedStatefulSetTemplate.Spec, nil
	case t.CloneSetTemplate != nil:
		return cloneSetKind, t.CloneSetTemplate.ObjectMeta, &t.CloneSetTemplate.Spec, nil
	case t.DeploymentTemplate != nil:
		return deploymentKind, t.DeploymentTemplate.ObjectMeta, &t.DeploymentTemplate.Spec, nil
	}
	return workloadKind{}, metav1.ObjectMeta{}, nil, fmt.Errorf("spec.template: set one of statefulSetTemplate, advancedStatefulSetTemplate, cloneSetTemplate or deploymentTemplate")
}

// revisionOf is the UnitedDeployment's revision: <name>-<hash of
// spec.template>.
func revisionOf(ud *v1alpha1.UnitedDeployment) (string, error) {
	raw, err := json.Marshal(ud.Spec.Template)
	if err != nil {
		return "", fmt.Errorf("encode spec.template: %w", err)
	}
	sum := sha256.Sum256(raw)
	return ud.Name + "-" + hex.EncodeToString(sum[:])[:10], nil
}

// workloadName is the name of a subset's workload.
func workloadName(ud *v1alpha1.UnitedDeployment, subset string) string {
	return ud.Name + "-" + subset
}

// desiredWorkload is the workload of subset s with replicas and partition,
// from the template at revision rev: the template's workload with the
// subset's label on it, its selector and its pod template; the subset's
// node selector term added to the pods' required node affinity (to every
// term there is), its tolerations appended and its patch merged into the
// pod template (strategic merge).
//
// maxUnavailable, when set, overrides the rollout's maxUnavailable
// (Deployment and CloneSet; the reserving Adaptive strategy's
// unschedulable subsets).
func desiredWorkload(ud *v1alpha1.UnitedDeployment, s *v1alpha1.Subset, replicas, partition int32, rev string, maxUnavailable *int32) (*unstructured.Unstructured, error) {
	kind, meta, spec, err := template(ud)
	if err != nil {
		return nil, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return nil, fmt.Errorf("spec.template: %w", err)
	}
	pt := &corev1.PodTemplateSpec{}
	if raw, ok := obj["template"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, pt); err != nil {
			return nil, fmt.Errorf("spec.template's pod template: %w", err)
		}
	}
	if pt, err = subsetPodTemplate(pt, s); err != nil {
		return nil, err
	}
	if obj["template"], err = runtime.DefaultUnstructuredConverter.ToUnstructured(pt); err != nil {
		return nil, err
	}
	sel := &metav1.LabelSelector{}
	if ud.Spec.Selector != nil {
		sel = ud.Spec.Selector.DeepCopy()
	}
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[wellknown.LabelSubsetName] = s.Name
	if obj["selector"], err = runtime.DefaultUnstructuredConverter.ToUnstructured(sel); err != nil {
		return nil, err
	}
	obj["replicas"] = int64(replicas)

	u := &unstructured.Unstructured{Object: map[string]any{"spec": obj}}
	if maxUnavailable != nil && *maxUnavailable > 0 {
		var path []string
		switch kind.Write {
		case deploymentKind.Write:
			if t, _, _ := unstructured.NestedString(u.Object, "spec", "strategy", "type"); t != string(appsv1.RecreateDeploymentStrategyType) {
				path = []string{"spec", "strategy", "rollingUpdate", "maxUnavailable"}
			}
		case cloneSetKind.Write:
			path = []string{"spec", "updateStrategy", "maxUnavailable"}
		}
		if path != nil {
			if err := unstructured.SetNestedField(u.Object, int64(*maxUnavailable), path...); err != nil {
				return nil, fmt.Errorf("set the maxUnavailable of subset %s: %w", s.Name, err)
			}
		}
	}
	if kind.Partition != nil {
		if err := unstructured.SetNestedField(u.Object, int64(partition), kind.Partition...); err != nil {
			return nil, fmt.Errorf("set the partition of subset %s: %w", s.Name, err)
		}
	}
	u.SetAPIVersion(kind.Write.GroupVersion().String())
	u.SetKind(kind.Kind)
	u.SetNamespace(ud.Namespace)
	u.SetName(workloadName(ud, s.Name))
	labels := maps.Clone(meta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[wellknown.LabelSubsetName] = s.Name
	u.SetLabels(labels)
	annotations := maps.Clone(meta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationSubsetRevision] = rev
	if len(s.Patch.Raw) > 0 {
		annotations[wellknown.AnnotationSubsetPatch] = string(s.Patch.Raw)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append(raw, []byte(fmt.Sprint(annotations))...))
	annotations[AnnotationSubsetHash] = hex.EncodeToString(sum[:])[:16]
	u.SetAnnotations(annotations)
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(ud, v1alpha1.SchemeGroupVersion.WithKind("UnitedDeployment"))})
	return u, nil
}

// subsetPodTemplate is pt for subset s: its label, node selector term,
// tolerations and patch.
func subsetPodTemplate(pt *corev1.PodTemplateSpec, s *v1alpha1.Subset) (*corev1.PodTemplateSpec, error) {
	pt = pt.DeepCopy()
	if pt.Labels == nil {
		pt.Labels = map[string]string{}
	}
	pt.Labels[wellknown.LabelSubsetName] = s.Name
	if term := s.NodeSelectorTerm; len(term.MatchExpressions) > 0 || len(term.MatchFields) > 0 {
		if pt.Spec.Affinity == nil {
			pt.Spec.Affinity = &corev1.Affinity{}
		}
		if pt.Spec.Affinity.NodeAffinity == nil {
			pt.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		na := pt.Spec.Affinity.NodeAffinity
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{*term.DeepCopy()}}
		} else {
			terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			for i := range terms {
				terms[i].MatchExpressions = append(terms[i].MatchExpressions, term.MatchExpressions...)
				terms[i].MatchFields = append(terms[i].MatchFields, term.MatchFields...)
			}
		}
	}
	pt.Spec.Tolerations = append(pt.Spec.Tolerations, s.Tolerations...)
	if len(s.Patch.Raw) == 0 {
		return pt, nil
	}
	orig, err := json.Marshal(pt)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(orig, s.Patch.Raw, corev1.PodTemplateSpec{})
	if err != nil {
		return nil, fmt.Errorf("spec.topology.subsets[%s].patch: %w; it must be a strategic merge patch of the pod template", s.Name, err)
	}
	out := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, fmt.Errorf("spec.topology.subsets[%s].patch: %w", s.Name, err)
	}
	return out, nil
}

// workloadStatus are the counts the UnitedDeployment adds up.
type workloadStatus struct {
	replicas, ready, updated, updatedReady int32
}

// statusOf reads a subset workload's status counts.
func statusOf(obj runtime.Object) workloadStatus {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return workloadStatus{}
	}
	get := func(field string) int32 {
		v, _, _ := unstructured.NestedInt64(u, "status", field)
		return int32(v)
	}
	st := workloadStatus{replicas: get("replicas"), ready: get("readyReplicas"), updated: get("updatedReplicas"), updatedReady: get("updatedReadyReplicas")}
	if _, found, _ := unstructured.NestedInt64(u, "status", "updatedReadyReplicas"); !found {
		st.updatedReady = min(st.updated, st.ready)
	}
	return st
}
