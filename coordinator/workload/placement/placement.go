// Package placement decides which nodes a per-node workload (BroadcastJob,
// Advanced DaemonSet) runs a pod on, and pins each pod to its node, the
// way the upstream DaemonSet controller does: a node is selected by the
// template's nodeName, nodeSelector and required node affinity (matched
// with k8s.io/component-helpers, the scheduler's own matchers), and must
// not carry a taint of the given effects the template does not tolerate.
// Pods are pinned with a required node affinity on metadata.name, so the
// scheduler still checks resources and ports before binding.
package placement

import (
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// nodeNameField is the node field a pinning affinity matches.
const nodeNameField = "metadata.name"

// Selects reports whether spec's nodeName, nodeSelector and required node
// affinity select node.
func Selects(spec *corev1.PodSpec, node *corev1.Node) bool {
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false
	}
	ok, _ := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec}).Match(node)
	return ok
}

// Tolerates reports whether spec tolerates every taint of node whose
// effect is one of effects.
func Tolerates(spec *corev1.PodSpec, node *corev1.Node, effects ...corev1.TaintEffect) bool {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, spec.Tolerations, func(t *corev1.Taint) bool {
		for _, e := range effects {
			if t.Effect == e {
				return true
			}
		}
		return false
	}, false)
	return !untolerated
}

// Eligible reports whether a new pod of spec may go to node: node is
// selected and no NoSchedule or NoExecute taint is left untolerated (so
// cordoned and not-ready nodes, which carry such taints, are left out).
func Eligible(spec *corev1.PodSpec, node *corev1.Node) bool {
	return Selects(spec, node) && Tolerates(spec, node, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute)
}

// PinToNode makes spec's required node affinity select node by name: the
// name goes into each of the template's terms (terms are ORed, so every
// way of matching ends on this node), replacing a name there before, and
// the terms' other requirements stay.
func PinToNode(spec *corev1.PodSpec, node string) {
	field := corev1.NodeSelectorRequirement{Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{field}}},
		}
		return
	}
	for i := range req.NodeSelectorTerms {
		t := &req.NodeSelectorTerms[i]
		var fields []corev1.NodeSelectorRequirement
		for _, f := range t.MatchFields {
			if f.Key != nodeNameField {
				fields = append(fields, f)
			}
		}
		t.MatchFields = append(fields, field)
	}
}

// TargetNode is the node a pinned pod was made for: its nodeName once
// bound, else the node its affinity names ("" for neither).
func TargetNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == nodeNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}
