// Package updatesort decides the order in which a rolling update takes the
// pods still waiting for the new revision, from the priorityStrategy and
// scatterStrategy that CloneSet, Advanced StatefulSet and Advanced
// DaemonSet share. It follows OpenKruise's pkg/util/updatesort
// (priority_sort.go and scatter_sort.go). The caller brings the pods in its
// own default order (for example not-ready before ready, or the highest
// ordinal first); the priority step then reorders them and the scatter step
// runs last, on the priority step's result.
//
// Priority. With no strategy, or one with neither list set, the order is
// kept. When weightPriority has terms, it alone decides and orderPriority is
// ignored, even for pods whose weights tie. A pod's weight is the sum of the
// weights of the terms whose matchSelector matches its labels; a heavier pod
// goes first. An empty matchSelector matches every pod, and a selector that
// does not convert to a label selector matches none.
//
// Otherwise orderPriority decides. A pod belongs to the first term, in list
// order, whose orderedKey is among its labels (the value may be anything,
// empty included). Pods carrying none of the keys go first of all, as in
// OpenKruise; then the pods of the first term, then those of the second,
// and so on. Within one term the pod whose value ends in the larger number
// goes first: the number is the run of ASCII digits at the very end of the
// value, so "sts-10" gives 10 and outranks "sts-9"; a value that does not
// end in a digit, or whose digits overflow an int64, counts as 0.
//
// Pods that the priority step does not tell apart keep the order the
// caller gave them. (OpenKruise instead breaks such ties by the pods'
// positions in its pod slice, the later position first; an Advanced
// StatefulSet that passes its pods highest ordinal first gets the same
// order from both.)
//
// Scatter. Each key/value term spreads the pods it matches over the update
// instead of letting them come one after another. With a single term that
// term is used; with several, only the terms that at least one waiting pod
// carries (key present and equal value) are used, each once, the term
// matching more waiting pods first and list order breaking ties. A term
// repeated in the list counts its pods once per repetition. Terms are
// applied one after the other, each to the order the previous one left.
//
// Applying one term: the waiting pods split, keeping their order, into
// matched ones (the label's value equals the term's, an absent label
// reading as empty) and the others. With fewer than two of either, nothing
// moves. Otherwise the last matched pod is set aside to go last of all.
// Let m and u be the remaining matched and unmatched waiting pods, and M and
// U the matched (less the one set aside) and unmatched pods among all the
// workload's pods, waiting or not. A grouping of a and b pods has
// g = min(a, b) groups of round(a/g) and round(b/g) pods (halves round up).
// When U/M >= u/m, the grouping of m and u is used as is. Otherwise the
// sizes come from the grouping of M and U, the number of groups is the
// smaller of m divided by the matched size and u divided by the unmatched
// size (integer division), and the unmatched pods that do not fit these
// groups go first. Then each group puts its matched pods before its
// unmatched ones; a group short of pods takes what is left. Matched pods
// left over follow, then unmatched ones, then the pod set aside.
//
// For example, 10 pods of which the 1st, 4th and 8th match, all waiting:
// the 8th is set aside, m = 2 and u = 7 give 2 groups of 1 matched and 4
// unmatched pods, so the matched pods are updated 1st, 6th and 10th.
package updatesort

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
)

// Sort orders pods in place for a rolling update: by priority first, then
// by scatter, as the package documentation describes. All of pods are
// taken to be waiting for the update. A nil priority, an empty one and an
// empty scatter keep the order. A nil entry counts as a pod without labels.
func Sort(pods []*corev1.Pod, priority *pub.UpdatePriorityStrategy, scatter pub.UpdateScatterStrategy) {
	waiting := make([]int, len(pods))
	for i := range waiting {
		waiting[i] = i
	}
	order := SortIndexes(pods, waiting, priority, scatter)
	sorted := make([]*corev1.Pod, len(order))
	for i, idx := range order {
		sorted[i] = pods[idx]
	}
	copy(pods, sorted)
}

// SortIndexes orders the pods waiting for an update, given as their
// positions in pods, and returns the new order; waiting itself is not
// changed. pods is the whole workload, updated pods included: the scatter
// step weighs the waiting pods against all of them. Positions must be
// distinct and within pods. Nil entries of pods not listed in waiting are
// skipped; a nil entry that is waiting counts as a pod without labels.
func SortIndexes(pods []*corev1.Pod, waiting []int, priority *pub.UpdatePriorityStrategy, scatter pub.UpdateScatterStrategy) []int {
	order := slices.Clone(waiting)
	sortByPriority(pods, order, priority)
	return scatterAll(pods, order, scatter)
}

// podLabels returns the labels of pod, nil for a nil pod.
func podLabels(pod *corev1.Pod) map[string]string {
	if pod == nil {
		return nil
	}
	return pod.Labels
}

// sortByPriority stably reorders order, positions in pods, by priority.
func sortByPriority(pods []*corev1.Pod, order []int, priority *pub.UpdatePriorityStrategy) {
	if priority == nil {
		return
	}
	switch {
	case len(priority.WeightPriority) > 0:
		weights := weightsOf(pods, order, priority.WeightPriority)
		// Heavier first.
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(weights[b], weights[a]) })
	case len(priority.OrderPriority) > 0:
		ranks := make(map[int]orderRank, len(order))
		for _, idx := range order {
			ranks[idx] = orderRankOf(podLabels(pods[idx]), priority.OrderPriority)
		}
		slices.SortStableFunc(order, func(a, b int) int {
			ra, rb := ranks[a], ranks[b]
			if c := cmp.Compare(ra.term, rb.term); c != 0 {
				return c
			}
			// Larger number first.
			return cmp.Compare(rb.number, ra.number)
		})
	}
}

// weightsOf returns the summed weight of each waiting pod, by position.
func weightsOf(pods []*corev1.Pod, order []int, terms []pub.UpdatePriorityWeightTerm) map[int]int64 {
	type term struct {
		selector labels.Selector
		weight   int64
	}
	parsed := make([]term, 0, len(terms))
	for i := range terms {
		selector, err := metav1.LabelSelectorAsSelector(&terms[i].MatchSelector)
		if err != nil {
			continue
		}
		parsed = append(parsed, term{selector: selector, weight: int64(terms[i].Weight)})
	}
	weights := make(map[int]int64, len(order))
	for _, idx := range order {
		set := labels.Set(podLabels(pods[idx]))
		var sum int64
		for _, t := range parsed {
			if t.selector.Matches(set) {
				sum += t.weight
			}
		}
		weights[idx] = sum
	}
	return weights
}

// orderRank is a pod's place under orderPriority: the index of the first
// term whose key it carries (-1 for none, which sorts first) and the
// number its value ends in.
type orderRank struct {
	term   int
	number int64
}

func orderRankOf(podLabels map[string]string, terms []pub.UpdatePriorityOrderTerm) orderRank {
	for i, t := range terms {
		if value, ok := podLabels[t.OrderedKey]; ok {
			return orderRank{term: i, number: trailingNumber(value)}
		}
	}
	return orderRank{term: -1}
}

// trailingNumber returns the number written by the ASCII digits ending v,
// or 0 when v does not end in a digit or the number overflows an int64.
func trailingNumber(v string) int64 {
	start := len(v)
	for start > 0 && v[start-1] >= '0' && v[start-1] <= '9' {
		start--
	}
	if start == len(v) {
		return 0
	}
	n, err := strconv.ParseInt(v[start:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// scatterAll applies every scatter term in turn to order.
func scatterAll(pods []*corev1.Pod, order []int, scatter pub.UpdateScatterStrategy) []int {
	if len(scatter) == 0 || len(order) <= 1 {
		return order
	}
	for _, term := range scatterTerms(pods, order, scatter) {
		order = scatterTerm(pods, order, term)
	}
	return order
}

// scatterTerms returns the terms to apply, in the order to apply them.
func scatterTerms(pods []*corev1.Pod, order []int, scatter pub.UpdateScatterStrategy) []pub.UpdateScatterTerm {
	if len(scatter) == 1 {
		return scatter
	}
	var terms []pub.UpdateScatterTerm
	counts := map[pub.UpdateScatterTerm]int{}
	for _, term := range scatter {
		for _, idx := range order {
			if value, ok := podLabels(pods[idx])[term.Key]; ok && value == term.Value {
				if _, seen := counts[term]; !seen {
					terms = append(terms, term)
				}
				counts[term]++
			}
		}
	}
	slices.SortStableFunc(terms, func(a, b pub.UpdateScatterTerm) int { return cmp.Compare(counts[b], counts[a]) })
	return terms
}

// scatterTerm spreads the pods term matches over order.
func scatterTerm(pods []*corev1.Pod, order []int, term pub.UpdateScatterTerm) []int {
	matches := func(idx int) bool { return podLabels(pods[idx])[term.Key] == term.Value }

	var matched, unmatched []int
	for _, idx := range order {
		if matches(idx) {
			matched = append(matched, idx)
		} else {
			unmatched = append(unmatched, idx)
		}
	}
	if len(matched) <= 1 || len(unmatched) <= 1 {
		return order
	}

	var totalMatched, totalUnmatched int
	for idx, pod := range pods {
		if pod == nil {
			continue
		}
		if matches(idx) {
			totalMatched++
		} else {
			totalUnmatched++
		}
	}
	// Waiting nil pods are not in the count above; the whole set never has
	// fewer pods than its waiting part.
	totalMatched = max(totalMatched, len(matched))
	totalUnmatched = max(totalUnmatched, len(unmatched))

	last := matched[len(matched)-1]
	matched = matched[:len(matched)-1]
	totalMatched--

	g := groupsFor(totalMatched, totalUnmatched, len(matched), len(unmatched))
	out := make([]int, 0, len(order))
	out = append(out, unmatched[:g.leadingUnmatched]...)
	unmatched = unmatched[g.leadingUnmatched:]
	take := func(src []int, n int) []int {
		n = min(n, len(src))
		out = append(out, src[:n]...)
		return src[n:]
	}
	for range g.count {
		matched = take(matched, g.matchedSize)
		unmatched = take(unmatched, g.unmatchedSize)
	}
	out = append(out, matched...)
	out = append(out, unmatched...)
	return append(out, last)
}

// groups is how the waiting pods of one scatter term are interleaved.
type groups struct {
	count            int
	matchedSize      int
	unmatchedSize    int
	leadingUnmatched int
}

// evenGroups splits matched and unmatched pods into min(matched,
// unmatched) groups of rounded even sizes. Both must be positive.
func evenGroups(matched, unmatched int) groups {
	n := min(matched, unmatched)
	return groups{
		count:         n,
		matchedSize:   int(math.Round(float64(matched) / float64(n))),
		unmatchedSize: int(math.Round(float64(unmatched) / float64(n))),
	}
}

// groupsFor returns the grouping of the waiting pods, m matched and u
// unmatched, given M matched and U unmatched pods in the whole set. When the
// waiting pods hold relatively more unmatched ones than the whole set, the
// whole set's group sizes are kept and the surplus unmatched pods lead.
func groupsFor(totalMatched, totalUnmatched, matched, unmatched int) groups {
	// Compared in float32, as OpenKruise does.
	if float32(totalUnmatched)/float32(totalMatched) >= float32(unmatched)/float32(matched) {
		return evenGroups(matched, unmatched)
	}
	whole := evenGroups(totalMatched, totalUnmatched)
	g := groups{matchedSize: whole.matchedSize, unmatchedSize: whole.unmatchedSize}
	g.count = min(matched/g.matchedSize, unmatched/g.unmatchedSize)
	g.leadingUnmatched = unmatched - g.count*g.unmatchedSize
	return g
}
