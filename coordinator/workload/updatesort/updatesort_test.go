package updatesort

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
)

// p is a pod named name with the given labels as key, value pairs.
func p(name string, kv ...string) *corev1.Pod {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, pod := range pods {
		if pod == nil {
			out[i] = "<nil>"
			continue
		}
		out[i] = pod.Name
	}
	return out
}

// numbered returns pods named by their position in base 36 ("0" to "9",
// then "a", "b", ...) with the labels given for each.
func numbered(labels ...[]string) []*corev1.Pod {
	pods := make([]*corev1.Pod, len(labels))
	for i, kv := range labels {
		pods[i] = p(strconv.FormatInt(int64(i), 36), kv...)
	}
	return pods
}

func weight(w int32, sel metav1.LabelSelector) pub.UpdatePriorityWeightTerm {
	return pub.UpdatePriorityWeightTerm{Weight: w, MatchSelector: sel}
}

func matchLabels(kv ...string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: p("", kv...).Labels}
}

func TestNoStrategyKeepsOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		priority *pub.UpdatePriorityStrategy
		scatter  pub.UpdateScatterStrategy
	}{
		{"nil priority, nil scatter", nil, nil},
		{"empty priority", &pub.UpdatePriorityStrategy{}, nil},
		{"empty scatter", nil, pub.UpdateScatterStrategy{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := []*corev1.Pod{p("c", "zone", "a"), p("a"), p("b", "zone", "a"), p("d")}
			Sort(pods, tc.priority, tc.scatter)
			require.Equal(t, []string{"c", "a", "b", "d"}, names(pods))
		})
	}
	t.Run("empty and single pod lists", func(t *testing.T) {
		s := &pub.UpdatePriorityStrategy{WeightPriority: []pub.UpdatePriorityWeightTerm{weight(10, matchLabels("a", "1"))}}
		sc := pub.UpdateScatterStrategy{{Key: "a", Value: "1"}}
		Sort(nil, s, sc)
		one := []*corev1.Pod{p("x", "a", "1")}
		Sort(one, s, sc)
		require.Equal(t, []string{"x"}, names(one))
	})
}

func TestWeightPriority(t *testing.T) {
	terms := []pub.UpdatePriorityWeightTerm{
		weight(20, matchLabels("app", "foo")),
		weight(10, matchLabels("zone", "a")),
		weight(15, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
		}}),
		// Does not convert to a selector: matches nothing, so its 100
		// never counts.
		weight(100, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: "Bogus", Values: []string{"foo"}},
		}}),
	}
	for _, tc := range []struct {
		name  string
		terms []pub.UpdatePriorityWeightTerm
		pods  []*corev1.Pod
		want  []string
	}{
		{
			name:  "weights of all matching terms add up, heaviest first",
			terms: terms,
			pods: []*corev1.Pod{
				p("none"),                                // 0
				p("app", "app", "foo"),                   // 20
				p("zone+tier", "zone", "a", "tier", "x"), // 25
				p("app+zone", "app", "foo", "zone", "a"), // 30
				p("zone", "zone", "a"),                   // 10
				p("tier", "tier", "y"),                   // 15
			},
			want: []string{"app+zone", "zone+tier", "app", "tier", "zone", "none"},
		},
		{
			name:  "ties keep the incoming order",
			terms: terms,
			pods: []*corev1.Pod{
				p("z0"), p("f1", "app", "foo"), p("z1", "app", "bar"),
				p("f2", "app", "foo"), p("z2"), p("f3", "app", "foo"),
			},
			want: []string{"f1", "f2", "f3", "z0", "z1", "z2"},
		},
		{
			name:  "an unparsable selector adds nothing",
			terms: terms[3:],
			pods:  []*corev1.Pod{p("b"), p("a", "app", "foo")},
			want:  []string{"b", "a"},
		},
		{
			name:  "an empty selector matches every pod",
			terms: []pub.UpdatePriorityWeightTerm{weight(50, metav1.LabelSelector{}), weight(10, matchLabels("zone", "a"))},
			pods:  []*corev1.Pod{p("b"), p("a", "zone", "a"), p("c")},
			want:  []string{"a", "b", "c"},
		},
		{
			name:  "a nil pod weighs as a pod without labels",
			terms: terms,
			pods:  []*corev1.Pod{nil, p("app", "app", "foo"), p("none")},
			want:  []string{"app", "<nil>", "none"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Sort(tc.pods, &pub.UpdatePriorityStrategy{WeightPriority: tc.terms}, nil)
			require.Equal(t, tc.want, names(tc.pods))
		})
	}
}

func TestOrderPriority(t *testing.T) {
	byRankThenGroup := []pub.UpdatePriorityOrderTerm{{OrderedKey: "rank"}, {OrderedKey: "group"}}
	for _, tc := range []struct {
		name  string
		terms []pub.UpdatePriorityOrderTerm
		pods  []*corev1.Pod
		want  []string
	}{
		{
			name:  "the number ending the value, larger first: sts-10 before sts-9",
			terms: byRankThenGroup[:1],
			pods:  []*corev1.Pod{p("sts-9", "rank", "sts-9"), p("sts-2", "rank", "sts-2"), p("sts-10", "rank", "sts-10"), p("7", "rank", "7")},
			want:  []string{"sts-10", "sts-9", "7", "sts-2"},
		},
		{
			// First key's pods, then the second key's; pods with neither
			// key go first of all, as OpenKruise puts them at level -1.
			name:  "terms in list order, pods with none of the keys first",
			terms: byRankThenGroup,
			pods: []*corev1.Pod{
				p("rank-1", "rank", "r-1"),
				p("group-12", "group", "g-12"),
				p("none-a"),
				p("rank-5+group-99", "rank", "r-5", "group", "g-99"), // the first key found decides
				p("group-3", "group", "g-3"),
				p("none-b", "other", "100"),
			},
			want: []string{"none-a", "none-b", "rank-5+group-99", "rank-1", "group-12", "group-3"},
		},
		{
			name:  "values not ending in a digit, empty ones and overflowing ones count as 0",
			terms: byRankThenGroup[:1],
			pods: []*corev1.Pod{
				p("abc", "rank", "abc"),
				p("one", "rank", "x1"),
				p("empty", "rank", ""),
				p("zero", "rank", "sts-0"),
				p("huge", "rank", "99999999999999999999"),
				p("digits-inside", "rank", "3a"),
			},
			// "one" is the only nonzero value; the others tie at 0 and
			// keep their incoming order.
			want: []string{"one", "abc", "empty", "zero", "huge", "digits-inside"},
		},
		{
			name:  "equal numbers keep the incoming order",
			terms: byRankThenGroup[:1],
			pods:  []*corev1.Pod{p("b", "rank", "a-4"), p("a", "rank", "b-04"), p("c", "rank", "4")},
			want:  []string{"b", "a", "c"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Sort(tc.pods, &pub.UpdatePriorityStrategy{OrderPriority: tc.terms}, nil)
			require.Equal(t, tc.want, names(tc.pods))
		})
	}
}

func TestTrailingNumber(t *testing.T) {
	for v, want := range map[string]int64{
		"": 0, "abc": 0, "5": 5, "sts-10": 10, "v1.2": 2, "007": 7, "-3": 3, "3a": 0,
		"9223372036854775807": 9223372036854775807, "9223372036854775808": 0,
	} {
		t.Run(v, func(t *testing.T) { require.Equal(t, want, trailingNumber(v)) })
	}
}

func TestWeightWinsOverOrder(t *testing.T) {
	// The API forbids setting both, but if both come, OpenKruise looks at
	// the weights only: order terms are ignored even among equal weights.
	s := &pub.UpdatePriorityStrategy{
		WeightPriority: []pub.UpdatePriorityWeightTerm{weight(10, matchLabels("zone", "a"))},
		OrderPriority:  []pub.UpdatePriorityOrderTerm{{OrderedKey: "rank"}},
	}
	pods := []*corev1.Pod{
		p("r1", "rank", "1"),
		p("r9", "rank", "9"),
		p("zone-r2", "zone", "a", "rank", "2"),
		p("zone-r8", "zone", "a", "rank", "8"),
	}
	Sort(pods, s, nil)
	// By order alone it would be r9, zone-r8, zone-r2, r1.
	require.Equal(t, []string{"zone-r2", "zone-r8", "r1", "r9"}, names(pods))
}

func TestScatter(t *testing.T) {
	m := []string{"zone", "a"} // the label of the matched pods in one-term cases
	for _, tc := range []struct {
		name    string
		pods    []*corev1.Pod
		scatter pub.UpdateScatterStrategy
		want    []string
		why     string
	}{
		{
			name:    "one term, 3 of 10 pods: updated 1st, 6th and 10th",
			pods:    numbered(m, nil, nil, m, nil, nil, nil, m, nil, nil),
			scatter: pub.UpdateScatterStrategy{{Key: "zone", Value: "a"}},
			want:    []string{"0", "1", "2", "4", "5", "3", "6", "8", "9", "7"},
			why: "matched 0,3,7; 7 is set aside for the end. m=2, u=7: min(2,7)=2 " +
				"groups of round(2/2)=1 matched and round(7/2)=4 unmatched: " +
				"[0 1 2 4 5] [3 6 8 9] then 7",
		},
		{
			name:    "one matched pod: nothing moves",
			pods:    numbered(nil, nil, m, nil),
			scatter: pub.UpdateScatterStrategy{{Key: "zone", Value: "a"}},
			want:    []string{"0", "1", "2", "3"},
			why:     "fewer than two matched pods",
		},
		{
			name:    "one unmatched pod: nothing moves",
			pods:    numbered(m, m, nil, m),
			scatter: pub.UpdateScatterStrategy{{Key: "zone", Value: "a"}},
			want:    []string{"0", "1", "2", "3"},
			why:     "fewer than two unmatched pods",
		},
		{
			name:    "more matched than unmatched",
			pods:    numbered(m, m, m, m, m, nil, nil),
			scatter: pub.UpdateScatterStrategy{{Key: "zone", Value: "a"}},
			want:    []string{"0", "1", "5", "2", "3", "6", "4"},
			why: "4 is set aside; m=4, u=2: 2 groups of round(4/2)=2 matched " +
				"and 1 unmatched: [0 1 5] [2 3 6] then 4",
		},
		{
			name:    "an empty value also matches pods without the key",
			pods:    numbered(nil, nil, []string{"k", "x"}, []string{"k", "x"}, []string{"k", "x"}),
			scatter: pub.UpdateScatterStrategy{{Key: "k", Value: ""}},
			want:    []string{"0", "2", "3", "4", "1"},
			why: "an absent label reads as empty, so 0 and 1 match; 1 is set aside; " +
				"1 group of 1 matched and 3 unmatched: [0 2 3 4] then 1",
		},
		{
			name: "two terms: the one matching more pods goes first",
			pods: numbered(
				[]string{"zone", "a"}, []string{"zone", "a"}, []string{"zone", "a"},
				nil, nil, []string{"disk", "ssd"}, nil, []string{"disk", "ssd"},
			),
			scatter: pub.UpdateScatterStrategy{{Key: "disk", Value: "ssd"}, {Key: "zone", Value: "a"}},
			want:    []string{"5", "0", "3", "4", "1", "6", "2", "7"},
			why: "zone=a matches 3 pods, disk=ssd 2, so zone=a first although listed second. " +
				"zone=a: matched 0,1,2, 2 set aside; m=2, u=5: 2 groups of 1 and round(2.5)=3: " +
				"[0 3 4 5] [1 6 7] then 2 -> 0 3 4 5 1 6 7 2. " +
				"disk=ssd on that: matched 5,7, 7 set aside; m=1, u=6: one group of 1 and 6: " +
				"[5 0 3 4 1 6 2] then 7",
		},
		{
			name: "three terms, each applied to the previous order",
			pods: numbered(
				[]string{"a", "1"}, []string{"a", "1"},
				[]string{"b", "1"}, []string{"b", "1"}, []string{"b", "1"},
				[]string{"c", "1"}, []string{"c", "1"}, []string{"c", "1"}, []string{"c", "1"},
			),
			scatter: pub.UpdateScatterStrategy{{Key: "a", Value: "1"}, {Key: "b", Value: "1"}, {Key: "c", Value: "1"}, {Key: "d", Value: "1"}},
			want:    []string{"0", "2", "5", "3", "6", "7", "8", "4", "1"},
			why: "d=1 matches no pod and is dropped; counts c=4, b=3, a=2 give the order c, b, a. " +
				"c: matched 5,6,7,8, 8 set aside; m=3, u=5: 3 groups of 1 and round(5/3)=2: " +
				"[5 0 1] [6 2 3] [7 4] then 8 -> 5 0 1 6 2 3 7 4 8. " +
				"b: matched 2,3,4, 4 set aside; m=2, u=6: 2 groups of 1 and 3: " +
				"[2 5 0 1] [3 6 7 8] then 4 -> 2 5 0 1 3 6 7 8 4. " +
				"a: matched 0,1, 1 set aside; m=1, u=7: [0 2 5 3 6 7 8 4] then 1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Sort(tc.pods, nil, tc.scatter)
			require.Equal(t, tc.want, names(tc.pods), tc.why)
		})
	}
}

func TestPriorityThenScatter(t *testing.T) {
	pods := numbered(
		[]string{"zone", "a"}, nil, nil,
		[]string{"tier", "front", "zone", "a"}, []string{"tier", "front", "zone", "a"}, []string{"tier", "front"},
	)
	Sort(pods,
		&pub.UpdatePriorityStrategy{WeightPriority: []pub.UpdatePriorityWeightTerm{weight(10, matchLabels("tier", "front"))}},
		pub.UpdateScatterStrategy{{Key: "zone", Value: "a"}},
	)
	// Priority: 3 4 5 (weight 10) then 0 1 2. Scatter zone=a on that:
	// matched 3,4,0, 0 set aside; m=2, u=3: 2 groups of 1 and
	// round(1.5)=2: [3 5 1] [4 2] then 0.
	require.Equal(t, []string{"3", "5", "1", "4", "2", "0"}, names(pods))
}

func TestSortIndexes(t *testing.T) {
	// Pods 0-5 match zone=a, 6-b do not; 3,4,5 and b are already updated.
	pods := numbered(
		[]string{"zone", "a"}, []string{"zone", "a"}, []string{"zone", "a"},
		[]string{"zone", "a"}, []string{"zone", "a"}, []string{"zone", "a"},
		nil, nil, nil, nil, nil, nil,
	)
	scatter := pub.UpdateScatterStrategy{{Key: "zone", Value: "a"}}
	waiting := []int{0, 1, 2, 6, 7, 8, 9, 10}

	t.Run("scatter weighs the waiting pods against the whole set", func(t *testing.T) {
		got := SortIndexes(pods, waiting, nil, scatter)
		// Waiting: matched 0,1,2 (2 set aside, m=2), unmatched u=5. Whole
		// set: M=6-1=5, U=6. U/M=1.2 < u/m=2.5, so group sizes come from
		// the whole set: min(5,6)=5 groups of round(5/5)=1 and
		// round(6/5)=1; min(2/1, 5/1)=2 groups; 5-2=3 unmatched lead:
		// [6 7 8] [0 9] [1 10] then 2.
		require.Equal(t, []int{6, 7, 8, 0, 9, 1, 10, 2}, got)
		require.Equal(t, []int{0, 1, 2, 6, 7, 8, 9, 10}, waiting, "waiting is not modified")
	})

	t.Run("the same pods sorted alone", func(t *testing.T) {
		alone := []*corev1.Pod{pods[0], pods[1], pods[2], pods[6], pods[7], pods[8], pods[9], pods[10]}
		Sort(alone, nil, scatter)
		// Now the whole set is the waiting set: 2 groups of 1 and
		// round(5/2)=3: [0 6 7 8] [1 9 10] then 2.
		require.Equal(t, []string{"0", "6", "7", "8", "1", "9", "a", "2"}, names(alone))
	})

	t.Run("nil entries outside waiting are skipped", func(t *testing.T) {
		withHoles := append(append([]*corev1.Pod{}, pods...), nil, nil)
		require.Equal(t, []int{6, 7, 8, 0, 9, 1, 10, 2}, SortIndexes(withHoles, waiting, nil, scatter))
	})

	t.Run("priority runs on the waiting pods only", func(t *testing.T) {
		prio := &pub.UpdatePriorityStrategy{OrderPriority: []pub.UpdatePriorityOrderTerm{{OrderedKey: "rank"}}}
		ranked := []*corev1.Pod{p("u0", "rank", "9"), p("w0", "rank", "1"), p("w1", "rank", "5"), p("w2")}
		require.Equal(t, []int{3, 2, 1}, SortIndexes(ranked, []int{1, 2, 3}, prio, nil))
	})
}
