package sidecarcontrol

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// Matches reports whether set selects pod, whose namespace object is ns.
//
// spec.selector must select the pod's labels; an absent or empty selector
// selects nothing (as in OpenKruise). spec.namespaceSelector, when set, is
// matched against ns.Labels; the namespace's kubernetes.io/metadata.name
// label is assumed even when ns lacks it, so that a selector made from a
// v1alpha1 spec.namespace always works. When namespaceSelector is unset,
// every namespace matches and ns may be nil. An invalid selector, or a
// namespaceSelector with a nil ns, is an error.
func Matches(set *appsv1beta1.SidecarSet, pod *corev1.Pod, ns *corev1.Namespace) (bool, error) {
	if set == nil || pod == nil || set.Spec.Selector == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return false, fmt.Errorf("SidecarSet %s: spec.selector: %w", set.Name, err)
	}
	if sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		return false, nil
	}
	if set.Spec.NamespaceSelector == nil {
		return true, nil
	}
	nsSel, err := metav1.LabelSelectorAsSelector(set.Spec.NamespaceSelector)
	if err != nil {
		return false, fmt.Errorf("SidecarSet %s: spec.namespaceSelector: %w", set.Name, err)
	}
	if ns == nil {
		return false, fmt.Errorf("SidecarSet %s has a namespaceSelector but the namespace %q of pod %s is unknown", set.Name, pod.Namespace, podName(pod))
	}
	return nsSel.Matches(namespaceLabels(ns)), nil
}

// namespaceLabels are ns's labels plus kubernetes.io/metadata.name, which
// the API server sets on every namespace.
func namespaceLabels(ns *corev1.Namespace) labels.Set {
	set := make(labels.Set, len(ns.Labels)+1)
	for k, v := range ns.Labels {
		set[k] = v
	}
	if _, ok := set[corev1.LabelMetadataName]; !ok && ns.Name != "" {
		set[corev1.LabelMetadataName] = ns.Name
	}
	return set
}

// podName names a pod in messages, also before it has a name.
func podName(pod *corev1.Pod) string {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "<generated>"
	}
	if pod.Namespace != "" {
		return pod.Namespace + "/" + name
	}
	return name
}
