// Package spreadrank computes the rank a CloneSet scale-in uses, next to
// phase, readiness and pod-deletion-cost, to choose which pods go first:
// the higher a pod's rank, the earlier it is deleted. It follows
// OpenKruise's CloneSet (pkg/controller/cloneset/utils/pod_sorter.go and
// the scale code that picks a ranker).
//
// Which ranker applies: when the CloneSet's pod template has topology
// spread constraints, the spread ranker; otherwise the same-node ranker.
// Only each constraint's topologyKey is used: its labelSelector, maxSkew,
// whenUnsatisfiable and the other fields are ignored, so a constraint
// counts even when its selector does not match the set's pods.
//
// Both rankers order a group of pods by "keep value", least worth keeping
// first, comparing in turn: a pod not bound to a node before a bound one;
// phase Pending (and any phase other than Unknown or Running) before
// Unknown before Running; not Ready before Ready; lower
// controller.kubernetes.io/pod-deletion-cost first (an absent or malformed
// value counts as 0); when the group is a domain of a spread constraint
// other than kubernetes.io/hostname, higher same-node rank first; when
// both are Ready, the one that became Ready later first (an unset time
// first); more restarts of its most restarted container first; newer
// creation time first (an unset time first). Pods still equal keep the
// order they had in the input.
//
// Same-node ranker: the pods bound to each node are ordered as above. A
// node with a single pod of the set gives it rank 0; on a node with n > 1
// pods the first in the order gets n-1, the next n-2, and so on, so the
// pod most worth keeping on the node always gets 0. A crowded node thus
// offers its weaker pods for deletion before a node with one pod loses
// its only one.
//
// Spread ranker: for each constraint, every bound pod whose node is known
// and carries the constraint's topologyKey label falls into the domain
// named by that label's value. Each domain is ordered as above; in a
// domain of n pods the first gets n, the next n-1, down to 1 for the pod
// most worth keeping. These positions are multiplied by ln(d+2), d being
// the number of domains the set's pods occupy for that constraint, and
// summed over the constraints. A crowded domain therefore hands out
// larger ranks than a sparse one.
//
// Under either ranker a pod not bound to a node has rank 0, as has, for a
// constraint, a pod on a node that is unknown or lacks the label (it adds
// nothing for that constraint).
package spreadrank

import (
	"math"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Ranker gives each pod of the set it was built for a rank; a pod with a
// higher rank is deleted first. A pod the ranker was not built with ranks
// 0. Pods are told apart by UID, or by namespace and name when the UID is
// empty.
type Ranker interface {
	Rank(p *corev1.Pod) float64
}

// NodeLabels returns the labels of the node with the given name, or nil
// when the node is unknown.
type NodeLabels func(nodeName string) map[string]string

// New returns the ranker for pods, the set's active pods, given the
// topology spread constraints of the set's pod template
// (spec.template.spec.topologySpreadConstraints): the spread ranker when
// there is at least one constraint, the same-node ranker otherwise.
// nodeLabels is only consulted by the spread ranker and may be nil, which
// treats every node as unknown. New neither keeps nor reorders pods.
func New(constraints []corev1.TopologySpreadConstraint, pods []*corev1.Pod, nodeLabels NodeLabels) Ranker {
	if len(constraints) == 0 {
		return sameNode(pods)
	}
	keys := make([]string, len(constraints))
	for i, c := range constraints {
		keys[i] = c.TopologyKey
	}
	return spread(keys, pods, nodeLabels)
}

// ranks maps a pod's identity to its rank.
type ranks map[string]float64

// Rank implements Ranker.
func (r ranks) Rank(p *corev1.Pod) float64 { return r[podKey(p)] }

// podKey identifies a pod: its UID, or namespace/name without one.
func podKey(p *corev1.Pod) string {
	if p.UID != "" {
		return "uid:" + string(p.UID)
	}
	return "name:" + p.Namespace + "/" + p.Name
}

// sameNode builds the same-node ranker.
func sameNode(pods []*corev1.Pod) ranks {
	r := ranks{}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	for _, group := range byNode {
		if len(group) < 2 {
			continue
		}
		Sort(group, nil)
		last := len(group) - 1
		for i, p := range group[:last] {
			r[podKey(p)] = float64(last - i)
		}
	}
	return r
}

// spread builds the spread ranker for the constraints' topology keys.
func spread(keys []string, pods []*corev1.Pod, nodeLabels NodeLabels) ranks {
	var nodes []string // known nodes, first seen first
	labels := map[string]map[string]string{}
	looked := map[string]bool{}
	podsOn := map[string][]*corev1.Pod{}
	for _, p := range pods {
		name := p.Spec.NodeName
		if name == "" {
			continue
		}
		if !looked[name] {
			looked[name] = true
			var l map[string]string
			if nodeLabels != nil {
				l = nodeLabels(name)
			}
			if l != nil {
				labels[name] = l
				nodes = append(nodes, name)
			}
		}
		if _, known := labels[name]; known {
			podsOn[name] = append(podsOn[name], p)
		}
	}

	byNode := sameNode(pods)
	r := ranks{}
	for _, key := range keys {
		domains := map[string][]*corev1.Pod{}
		for _, n := range nodes {
			if v, ok := labels[n][key]; ok {
				domains[v] = append(domains[v], podsOn[n]...)
			}
		}
		var within Ranker = byNode
		if key == corev1.LabelHostname {
			within = nil
		}
		weight := math.Log(float64(len(domains) + 2))
		for _, group := range domains {
			Sort(group, within)
			for i, p := range group {
				r[podKey(p)] += float64(len(group)-i) * weight
			}
		}
	}
	return r
}

// Sort orders pods least worth keeping first, the order a scale-in
// deletes them in (see the package doc), breaking remaining ties by input
// order. within, when not nil, is compared after the deletion cost,
// higher rank first: pass the set's Ranker.
func Sort(pods []*corev1.Pod, within Ranker) {
	sort.SliceStable(pods, func(i, j int) bool { return before(pods[i], pods[j], within) })
}

// before reports whether a is less worth keeping than b.
func before(a, b *corev1.Pod, within Ranker) bool {
	if ua, ub := a.Spec.NodeName == "", b.Spec.NodeName == ""; ua != ub {
		return ua
	}
	if pa, pb := phaseOrdinal(a.Status.Phase), phaseOrdinal(b.Status.Phase); pa != pb {
		return pa < pb
	}
	ra, rb := readyCondition(a), readyCondition(b)
	if (ra != nil) != (rb != nil) {
		return ra == nil
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if within != nil {
		if ka, kb := within.Rank(a), within.Rank(b); ka != kb {
			return ka > kb
		}
	}
	if ra != nil && rb != nil && !ra.LastTransitionTime.Equal(&rb.LastTransitionTime) {
		return laterOrUnset(ra.LastTransitionTime.Time, rb.LastTransitionTime.Time)
	}
	if xa, xb := maxRestarts(a), maxRestarts(b); xa != xb {
		return xa > xb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return laterOrUnset(a.CreationTimestamp.Time, b.CreationTimestamp.Time)
	}
	return false
}

// laterOrUnset reports whether a comes first when the later time goes
// first and an unset (zero) time goes before any set one.
func laterOrUnset(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

// phaseOrdinal places Unknown after, and Running after both, every other
// phase.
func phaseOrdinal(p corev1.PodPhase) int {
	switch p {
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	default:
		return 0
	}
}

// readyCondition returns the pod's Ready condition when it is True, else
// nil.
func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return c
			}
			return nil
		}
	}
	return nil
}

// deletionCost reads the pod-deletion-cost annotation as an int32. A value
// with a plus sign, a leading zero (other than "0" itself), or that is not
// an int32 counts as 0, as does a missing one.
func deletionCost(p *corev1.Pod) int64 {
	v, ok := p.Annotations[wellknown.AnnotationPodDeletionCost]
	if !ok || v == "" {
		return 0
	}
	if first := v[0]; first != '-' && !(first >= '1' && first <= '9') && v != "0" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return n
}

// maxRestarts is the highest restart count among the pod's containers.
func maxRestarts(p *corev1.Pod) int32 {
	var most int32
	for _, s := range p.Status.ContainerStatuses {
		most = max(most, s.RestartCount)
	}
	return most
}
