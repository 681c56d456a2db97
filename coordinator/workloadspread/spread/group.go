package spread

import (
	"encoding/json"
	"math"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// Groups are a WorkloadSpread's pods by subset.
type Groups struct {
	// BySubset holds the pods of each spec subset (every subset has an
	// entry).
	BySubset map[string][]*corev1.Pod
	// Unmatched are the pods in no subset: annotated with a subset that
	// no longer exists, or created before the WorkloadSpread on a node no
	// subset takes (or not scheduled yet). They are deleted first on
	// scale-in.
	Unmatched []*corev1.Pod
	// Assigned are the pods created before the WorkloadSpread that Group
	// placed in a subset by their node (pod name to subset): the
	// controller annotates them (ExistingPodPatch).
	Assigned map[string]string
}

// Group sorts the workload's pods into ws's subsets, as OpenKruise's
// controller does: a pod whose matched-workloadspread annotation names ws
// is in the subset it names; any other active pod (created before the
// WorkloadSpread, or placed by another one) is placed by its node (node
// returns the node of a name, nil when unknown): among the subsets whose
// requiredNodeSelectorTerm (with the pod's own required terms) and
// tolerations (with the pod's) its node satisfies, the one with the best
// score: preferredNodeSelectorTerms weight x100, +10 when the subset's
// patch would not change the pod, +1 while the subset has room (pods
// counted as they are placed); the first subset on a tie.
func Group(ws *v1alpha1.WorkloadSpread, pods []*corev1.Pod, replicas int32, node func(name string) *corev1.Node) Groups {
	g := Groups{BySubset: make(map[string][]*corev1.Pod, len(ws.Spec.Subsets)), Assigned: map[string]string{}}
	missing := make(map[string]int64, len(ws.Spec.Subsets))
	for i := range ws.Spec.Subsets {
		s := &ws.Spec.Subsets[i]
		g.BySubset[s.Name] = []*corev1.Pod{}
		missing[s.Name] = math.MaxInt32
		if limit, ok, err := MaxReplicas(s, replicas); ok && err == nil {
			missing[s.Name] = int64(limit)
		}
	}
	for _, p := range pods {
		if i := matchedBy(p, ws); i != nil {
			if _, ok := g.BySubset[i.Subset]; ok {
				missing[i.Subset]--
			}
		}
	}
	for _, p := range pods {
		if i := matchedBy(p, ws); i != nil {
			if _, ok := g.BySubset[i.Subset]; ok {
				g.BySubset[i.Subset] = append(g.BySubset[i.Subset], p)
			} else {
				g.Unmatched = append(g.Unmatched, p)
			}
			continue
		}
		// Only a pod created before the WorkloadSpread is placed by its
		// node: a later pod without the annotation found every subset full
		// when the webhook saw it, and stays outside them.
		if !ws.CreationTimestamp.IsZero() && !p.CreationTimestamp.Before(&ws.CreationTimestamp) {
			g.Unmatched = append(g.Unmatched, p)
			continue
		}
		var n *corev1.Node
		if Active(p) && p.Spec.NodeName != "" && node != nil {
			n = node(p.Spec.NodeName)
		}
		best := BestSubset(ws, p, n, missing)
		if best == nil {
			g.Unmatched = append(g.Unmatched, p)
			continue
		}
		missing[best.Name]--
		g.BySubset[best.Name] = append(g.BySubset[best.Name], p)
		g.Assigned[p.Name] = best.Name
	}
	return g
}

// BestSubset is the subset of ws a pod running on node fits best (see
// Group), nil when it fits none or node is nil. missing holds the
// subsets' room by name.
func BestSubset(ws *v1alpha1.WorkloadSpread, pod *corev1.Pod, node *corev1.Node, missing map[string]int64) *v1alpha1.WorkloadSpreadSubset {
	if node == nil {
		return nil
	}
	var best *v1alpha1.WorkloadSpreadSubset
	bestScore := int64(-1)
	for i := range ws.Spec.Subsets {
		s := &ws.Spec.Subsets[i]
		ok, score := subsetScore(pod, node, s, missing[s.Name])
		if ok && score > bestScore {
			best, bestScore = s, score
		}
	}
	return best
}

// subsetScore reports whether the node satisfies the subset's required
// term and tolerations for the pod, and the subset's score (see Group).
func subsetScore(pod *corev1.Pod, node *corev1.Node, s *v1alpha1.WorkloadSpreadSubset, missing int64) (bool, int64) {
	tolerations := append(append([]corev1.Toleration{}, pod.Spec.Tolerations...), s.Tolerations...)
	if _, untolerated := schedcorev1.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, tolerations, nil, false); untolerated {
		return false, -1
	}
	if s.RequiredNodeSelectorTerm != nil {
		var terms []corev1.NodeSelectorTerm
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		}
		ok, err := schedcorev1.MatchNodeSelectorTerms(node, &corev1.NodeSelector{NodeSelectorTerms: MergeRequired(terms, s.RequiredNodeSelectorTerm)})
		if err != nil || !ok {
			return false, -1
		}
	}
	var nodeScore int64
	if len(s.PreferredNodeSelectorTerms) > 0 {
		if terms, err := nodeaffinity.NewPreferredSchedulingTerms(s.PreferredNodeSelectorTerms); err == nil {
			nodeScore = terms.Score(node)
		}
	}
	var podScore int64
	if len(s.Patch.Raw) > 0 && patchKeeps(pod, s.Patch.Raw) {
		podScore = 1
	}
	var quota int64
	if missing > 0 {
		quota = 1
	}
	return true, nodeScore*100 + podScore*10 + quota
}

// patchKeeps reports whether applying patch would leave the pod as it is
// (annotations aside: their values may hold JSON in another order).
func patchKeeps(pod *corev1.Pod, patch []byte) bool {
	raw, err := json.Marshal(pod)
	if err != nil {
		return false
	}
	out, err := strategicpatch.StrategicMergePatch(raw, patch, &corev1.Pod{})
	if err != nil {
		return false
	}
	patched := &corev1.Pod{}
	if err := json.Unmarshal(out, patched); err != nil {
		return false
	}
	patched.Annotations = pod.Annotations
	return reflect.DeepEqual(pod, patched)
}
