//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The WorkloadSpread tests port OpenKruise's "WorkloadSpread
// functionality" cases (test/e2e/apps/workloadspread.go) and its three
// v1beta1 cases (test/e2e/apps/v1beta1/workloadspread.go), each subtest
// named as its case, in a namespace of its own, with OpenKruise's
// assertions: the pods' apps.kruise.io/matched-workloadspread annotation,
// their required node affinity, the deletion costs, the patch, and
// status.subsetStatuses. Where OpenKruise reads a status or a pod once
// right after the workload is running, these tests poll (bounded) until
// it shows what OpenKruise expects: the controller writes the status and
// the deletion costs after the pods exist.
//
// Zones. OpenKruise labels its three workers with a fake zone key before
// every case (worker 0 zone-a, workers 1 and 2 zone-b) and removes the
// label after. Labelling nodes changes the cluster for every test, so
// these cases use labels the nodes already carry (wsTester.zones):
// topology.kubernetes.io/zone (the local cluster and kind-config.yaml
// label their nodes zone-a, zone-b, zone-c), zone-a being the zone of the
// first schedulable node and zone-b the zones of the others; on a cluster
// without zone labels, kubernetes.io/hostname (the first node, the
// others). OpenKruise's "zone-x", a subset no node matches, is a value no
// node carries. Besides OpenKruise's assertions, a scheduled pod of a
// subset with a required term must run on a node that term matches.

const (
	// wsTimeout bounds one WorkloadSpread step (OpenKruise's tester waits
	// 5 to 10 minutes; our pods start in seconds).
	wsTimeout = 2 * time.Minute
	// wsName is OpenKruise's workloadSpreadName.
	wsName = "test-workload-spread"
	// wsPatchKey is the annotation the subsets' patches set to the
	// subset's name.
	wsPatchKey = "subset"
)

// wsInjected is the value of the matched-workloadspread annotation
// (OpenKruise's InjectWorkloadSpread).
type wsInjected struct {
	Name   string `json:"name"`
	Subset string `json:"subset"`
	UID    string `json:"uid,omitempty"`
}

// wsTester carries one case's framework, as OpenKruise's
// WorkloadSpreadTester does.
type wsTester struct {
	t   *testing.T
	f   *framework.Framework
	ctx context.Context
	z   *wsZones
}

// newWSTester gives the (sub)test a namespace of its own.
func newWSTester(t *testing.T) *wsTester {
	// Each case runs up to a dozen pods on the small local cluster: at most
	// wsConcurrent of them run at once, so the rest of the parallel group
	// keeps its apiserver and kubelets responsive.
	select {
	case wsSlots <- struct{}{}:
	case <-t.Context().Done():
		t.Fatal("no WorkloadSpread test slot before the test's end")
	}
	t.Cleanup(func() { <-wsSlots })
	f := newFramework(t)
	return &wsTester{t: t, f: f, ctx: t.Context()}
}

// wsConcurrent bounds the WorkloadSpread cases that run at once.
const wsConcurrent = 3

var wsSlots = make(chan struct{}, wsConcurrent)

// wsZones stands for OpenKruise's fake zones: key is a node label, zone-a
// the nodes whose value is in a, zone-b those whose value is in b.
type wsZones struct {
	key   string
	a, b  []string
	nodes map[string]*corev1.Node
}

// zones picks the subsets' node label (see the file comment); it skips
// the test with fewer than 3 schedulable nodes, as OpenKruise's cases
// need 3 workers.
func (w *wsTester) zones() *wsZones {
	w.t.Helper()
	if w.z != nil {
		return w.z
	}
	schedulable := requireSchedulableNodes(w.ctx, w.t, w.f, 3)
	all, err := w.f.Kube.CoreV1().Nodes().List(w.ctx, metav1.ListOptions{})
	require.NoError(w.t, err)
	z := &wsZones{nodes: map[string]*corev1.Node{}}
	for i := range all.Items {
		z.nodes[all.Items[i].Name] = &all.Items[i]
	}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelHostname} {
		first, ok := schedulable[0].Labels[key]
		if !ok {
			continue
		}
		var others []string
		complete := true
		for _, n := range schedulable[1:] {
			v, ok := n.Labels[key]
			if !ok {
				complete = false
				break
			}
			if v != first && !slices.Contains(others, v) {
				others = append(others, v)
			}
		}
		if complete && len(others) > 0 {
			slices.Sort(others)
			z.key, z.a, z.b = key, []string{first}, others
			w.t.Logf("zones: zone-a is %s in %v, zone-b is %s in %v", key, z.a, key, z.b)
			w.z = z
			return z
		}
	}
	w.t.Skipf("the schedulable nodes carry neither %s nor %s with two values", corev1.LabelTopologyZone, corev1.LabelHostname)
	return nil
}

// term is a node selector term: the zone label in values.
func (z *wsZones) term(values ...string) *corev1.NodeSelectorTerm {
	return &corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: z.key, Operator: corev1.NodeSelectorOpIn, Values: values,
	}}}
}

// zoneA, zoneB and zoneX are OpenKruise's zone-a, zone-b and zone-x (no
// node) terms.
func (z *wsZones) zoneA() *corev1.NodeSelectorTerm { return z.term(z.a...) }
func (z *wsZones) zoneB() *corev1.NodeSelectorTerm { return z.term(z.b...) }
func (z *wsZones) zoneX() *corev1.NodeSelectorTerm { return z.term("zone-x") }

// wsPrefer is a preferred scheduling term of weight for term.
func wsPrefer(weight int32, term *corev1.NodeSelectorTerm) corev1.PreferredSchedulingTerm {
	return corev1.PreferredSchedulingTerm{Weight: weight, Preference: *term}
}

// nodeMatches reports whether node runs where term selects.
func (z *wsZones) nodeMatches(node string, term *corev1.NodeSelectorTerm) (bool, error) {
	n, ok := z.nodes[node]
	if !ok {
		return false, fmt.Errorf("node %s not listed", node)
	}
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{*term}})
	if err != nil {
		return false, err
	}
	return sel.Match(n), nil
}

// wsMax is an integer maxReplicas.
func wsMax(n int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(n)) }

// wsPatch is OpenKruise's subset patch: annotation subset=<name>.
func wsPatch(subset string) runtime.RawExtension {
	return runtime.RawExtension{Raw: fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, wsPatchKey, subset)}
}

// wsSubsetSpec is a subset with its required term, maxReplicas (nil: no
// limit) and OpenKruise's patch.
func wsSubsetSpec(name string, term *corev1.NodeSelectorTerm, maxReplicas *intstr.IntOrString) v1alpha1.WorkloadSpreadSubset {
	return v1alpha1.WorkloadSpreadSubset{Name: name, RequiredNodeSelectorTerm: term, MaxReplicas: maxReplicas, Patch: wsPatch(name)}
}

// wsRef names a workload of the test namespace.
func wsRef(apiVersion, kind, name string) *v1alpha1.TargetReference {
	return &v1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: name}
}

// wsCloneSetRef names a CloneSet as OpenKruise's cases do
// (apps.kruise.io/v1alpha1).
func wsCloneSetRef(name string) *v1alpha1.TargetReference {
	return wsRef("apps.kruise.io/v1alpha1", "CloneSet", name)
}

// wsNew is OpenKruise's NewWorkloadSpread.
func wsNew(name string, ref *v1alpha1.TargetReference, subsets ...v1alpha1.WorkloadSpreadSubset) *v1alpha1.WorkloadSpread {
	return &v1alpha1.WorkloadSpread{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.WorkloadSpreadSpec{TargetReference: ref, Subsets: subsets},
	}
}

// createWS creates the WorkloadSpread and waits until the controller has
// observed it (OpenKruise's CreateWorkloadSpread).
func (w *wsTester) createWS(ws *v1alpha1.WorkloadSpread) *v1alpha1.WorkloadSpread {
	w.t.Helper()
	_, err := w.f.Shoal.AppsV1alpha1().WorkloadSpreads(w.f.Namespace).Create(w.ctx, ws, metav1.CreateOptions{})
	require.NoError(w.t, err, "create WorkloadSpread %s", ws.Name)
	return w.waitWS(ws.Name, "observed", func(*v1alpha1.WorkloadSpread) bool { return true })
}

// updateWS changes the WorkloadSpread and waits until the controller has
// observed the change (OpenKruise's UpdateWorkloadSpread).
func (w *wsTester) updateWS(name string, change func(*v1alpha1.WorkloadSpread)) {
	w.t.Helper()
	updateObject(w.ctx, w.t, w.f.Shoal.AppsV1alpha1().WorkloadSpreads(w.f.Namespace), name, change)
	w.waitWS(name, "observed the update", func(*v1alpha1.WorkloadSpread) bool { return true })
}

// waitWS polls the WorkloadSpread until its status is of its generation
// and done says so.
func (w *wsTester) waitWS(name, what string, done func(*v1alpha1.WorkloadSpread) bool) *v1alpha1.WorkloadSpread {
	w.t.Helper()
	return w.waitWSFor(name, what, wsTimeout, done)
}

func (w *wsTester) waitWSFor(name, what string, timeout time.Duration, done func(*v1alpha1.WorkloadSpread) bool) *v1alpha1.WorkloadSpread {
	w.t.Helper()
	return waitObject(w.ctx, w.t, w.f.Shoal.AppsV1alpha1().WorkloadSpreads(w.f.Namespace), timeout, name, what,
		func(ws *v1alpha1.WorkloadSpread) bool {
			return ws.Status.ObservedGeneration == ws.Generation && done(ws)
		},
		func(ws *v1alpha1.WorkloadSpread) any { return ws.Status })
}

// wsCount is one subset's status.replicas and missingReplicas.
type wsCount struct{ replicas, missing int32 }

// wsStatus: one subset status per subset, in spec order, each with the
// subset's name, replicas and missingReplicas as want, and no creating or
// deleting pods (OpenKruise's checks after each step).
func wsStatus(want ...wsCount) func(*v1alpha1.WorkloadSpread) bool {
	return func(ws *v1alpha1.WorkloadSpread) bool {
		st := ws.Status.SubsetStatuses
		if len(st) != len(ws.Spec.Subsets) || len(st) != len(want) {
			return false
		}
		for i, c := range want {
			if st[i].Name != ws.Spec.Subsets[i].Name || st[i].Replicas != c.replicas || st[i].MissingReplicas != c.missing ||
				len(st[i].CreatingPods) != 0 || len(st[i].DeletingPods) != 0 {
				return false
			}
		}
		return true
	}
}

// wsReplicasByName: the subset statuses' replicas, summed by subset name,
// are want (OpenKruise's replicasForSubsetX).
func wsReplicasByName(want map[string]int32) func(*v1alpha1.WorkloadSpread) bool {
	return func(ws *v1alpha1.WorkloadSpread) bool {
		got := map[string]int32{}
		for _, s := range ws.Status.SubsetStatuses {
			got[s.Name] += s.Replicas
		}
		for name, n := range want {
			if got[name] != n {
				return false
			}
		}
		return true
	}
}

// wsCondition: subset i has condition Schedulable with status.
func wsCondition(i int, status corev1.ConditionStatus) func(*v1alpha1.WorkloadSpread) bool {
	return func(ws *v1alpha1.WorkloadSpread) bool {
		if len(ws.Status.SubsetStatuses) <= i {
			return false
		}
		for _, c := range ws.Status.SubsetStatuses[i].Conditions {
			if c.Type == v1alpha1.SubsetSchedulable && c.Status == status {
				return true
			}
		}
		return false
	}
}

// wsCloneSet is OpenKruise's NewBaseCloneSet with the testserver: 2
// replicas by default, updated in place only.
func wsCloneSet(f *framework.Framework, name string, replicas int32) *v1beta1.CloneSet {
	cs := testCloneSet(f, name, replicas)
	cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType
	return cs
}

func (w *wsTester) createCloneSet(cs *v1beta1.CloneSet) {
	w.t.Helper()
	_, err := w.f.Shoal.AppsV1beta1().CloneSets(w.f.Namespace).Create(w.ctx, cs, metav1.CreateOptions{})
	require.NoError(w.t, err, "create CloneSet %s", cs.Name)
}

// waitCloneSetRunning is OpenKruise's WaitForCloneSetRunning (and
// WaiteCloneSetUpdate): n pods, all ready and updated.
func (w *wsTester) waitCloneSetRunning(name string, n int32) {
	w.t.Helper()
	waitCloneSet(w.ctx, w.t, w.f, name, fmt.Sprintf("%d pods ready and updated", n), settled(n, n))
}

// waitCloneSetReady is OpenKruise's WaitForCloneSetRunReplicas: n pods
// ready and updated-ready, other pods may be pending.
func (w *wsTester) waitCloneSetReady(name string, n int32, timeout time.Duration) {
	w.t.Helper()
	waitObject(w.ctx, w.t, w.f.Shoal.AppsV1beta1().CloneSets(w.f.Namespace), timeout, name, fmt.Sprintf("%d pods ready", n),
		func(cs *v1beta1.CloneSet) bool {
			return cs.Status.ObservedGeneration == cs.Generation && cs.Status.ReadyReplicas == n && cs.Status.UpdatedReadyReplicas == n
		},
		func(cs *v1beta1.CloneSet) any { return cs.Status })
}

func (w *wsTester) updateCloneSet(name string, change func(*v1beta1.CloneSet)) {
	w.t.Helper()
	updateObject(w.ctx, w.t, w.f.Shoal.AppsV1beta1().CloneSets(w.f.Namespace), name, change)
}

func (w *wsTester) scaleCloneSet(name string, n int32) {
	w.t.Helper()
	w.updateCloneSet(name, func(cs *v1beta1.CloneSet) { cs.Spec.Replicas = ptr.To(n) })
}

// setImage is OpenKruise's image update to NewWebserverImage: another
// digest of the testserver.
func (w *wsTester) setImage(name string) {
	w.t.Helper()
	w.updateCloneSet(name, func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = w.f.Image("testserver:v2") })
}

// wsActive drops the pods that are terminal or being deleted (the
// tester's GetSelectorPods keeps the active pods).
func wsActive(pods []corev1.Pod) []corev1.Pod {
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
}

// waitPods polls the active pods matching selector until there are n
// (n < 0: any number) and check accepts them, and returns them.
func (w *wsTester) waitPods(selector string, n int, what string, check func([]corev1.Pod) error) []corev1.Pod {
	w.t.Helper()
	var pods []corev1.Pod
	var last error
	err := framework.WaitFor(w.ctx, wsTimeout, func(ctx context.Context) (bool, error) {
		list, err := w.f.Kube.CoreV1().Pods(w.f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = wsActive(list.Items)
		if n >= 0 && len(pods) != n {
			last = fmt.Errorf("%d active pods, want %d", len(pods), n)
			return false, nil
		}
		last = check(pods)
		return last == nil, nil
	})
	require.NoError(w.t, err, "pods %q: %s; last: %v", selector, what, last)
	return pods
}

// wsSubset is what OpenKruise checks of the pods a WorkloadSpread placed
// in one of its subsets.
type wsSubset struct {
	name string
	// term is the subset's requiredNodeSelectorTerm: its expressions are
	// those of the pod's first required node selector term, and a
	// scheduled pod's node matches it (nil: not checked).
	term *corev1.NodeSelectorTerm
	// cost is the pod's deletion cost ("": not checked).
	cost string
	// patched: the subset's patch annotated the pod subset=<name>.
	patched bool
	// pods is how many pods the subset holds (-1: not counted).
	pods int
}

// podsCheck is OpenKruise's loop over the pods: a pod the webhook placed
// names WorkloadSpread wsName in its annotation and, for the subsets
// given, carries what the subset gives it; a pod without the annotation
// has no deletion cost; the subsets hold the pods counted.
func (w *wsTester) podsCheck(ws string, subsets ...wsSubset) func([]corev1.Pod) error {
	return func(pods []corev1.Pod) error {
		counts := map[string]int{}
		for i := range pods {
			p := &pods[i]
			cost := p.Annotations[wellknown.AnnotationPodDeletionCost]
			raw, ok := p.Annotations[wellknown.AnnotationMatchedWorkloadSpread]
			if !ok {
				// A pod in no subset has no cost, or the one that puts it
				// first in line for scale-in: -100 x (subsets + 1).
				if n, err := strconv.Atoi(cost); cost != "" && (err != nil || n > -200 || n%100 != 0) {
					return fmt.Errorf("pod %s is in no WorkloadSpread but has deletion cost %q", p.Name, cost)
				}
				continue
			}
			var inj wsInjected
			if err := json.Unmarshal([]byte(raw), &inj); err != nil {
				return fmt.Errorf("pod %s: annotation %s=%q: %v", p.Name, wellknown.AnnotationMatchedWorkloadSpread, raw, err)
			}
			k := slices.IndexFunc(subsets, func(s wsSubset) bool { return s.name == inj.Subset })
			if k < 0 {
				continue
			}
			s := subsets[k]
			counts[s.name]++
			if inj.Name != ws {
				return fmt.Errorf("pod %s of subset %s names WorkloadSpread %q, want %q", p.Name, s.name, inj.Name, ws)
			}
			if s.term != nil {
				if err := w.checkTerm(p, s.term); err != nil {
					return fmt.Errorf("pod %s of subset %s: %w", p.Name, s.name, err)
				}
			}
			if s.cost != "" && cost != s.cost {
				return fmt.Errorf("pod %s of subset %s has deletion cost %q, want %q", p.Name, s.name, cost, s.cost)
			}
			if s.patched && p.Annotations[wsPatchKey] != s.name {
				return fmt.Errorf("pod %s of subset %s: patch annotation %s=%q, want %q", p.Name, s.name, wsPatchKey, p.Annotations[wsPatchKey], s.name)
			}
		}
		for _, s := range subsets {
			if s.pods >= 0 && counts[s.name] != s.pods {
				return fmt.Errorf("subset %s holds %d pods, want %d (all: %v)", s.name, counts[s.name], s.pods, counts)
			}
		}
		return nil
	}
}

// waitTwoZones waits for the n pods of selector to be na in subset a
// (cost 200) and nb in subset b (cost 100), each patched and carrying its
// subset's required term: the two-zone layout of several cases.
func (w *wsTester) waitTwoZones(selector, step string, a, b v1alpha1.WorkloadSpreadSubset, na, nb int) {
	w.t.Helper()
	w.waitPods(selector, na+nb, step, w.podsCheck(wsName,
		wsSubset{name: a.Name, term: a.RequiredNodeSelectorTerm, cost: "200", patched: true, pods: na},
		wsSubset{name: b.Name, term: b.RequiredNodeSelectorTerm, cost: "100", patched: true, pods: nb}))
}

// checkTerm: term's expressions lead the pod's required node affinity,
// and the pod, if scheduled, runs on a node term matches.
func (w *wsTester) checkTerm(p *corev1.Pod, term *corev1.NodeSelectorTerm) error {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		return fmt.Errorf("no required node affinity (affinity %+v)", a)
	}
	got := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions
	if !reflect.DeepEqual(got, term.MatchExpressions) {
		return fmt.Errorf("first required term's expressions %+v, want %+v", got, term.MatchExpressions)
	}
	if p.Spec.NodeName == "" || w.z == nil {
		return nil
	}
	ok, err := w.z.nodeMatches(p.Spec.NodeName, term)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("runs on %s, which %+v does not match", p.Spec.NodeName, term.MatchExpressions)
	}
	return nil
}

// wsAll passes when every check does.
func wsAll(checks ...func([]corev1.Pod) error) func([]corev1.Pod) error {
	return func(pods []corev1.Pod) error {
		for _, c := range checks {
			if err := c(pods); err != nil {
				return err
			}
		}
		return nil
	}
}

// wsSubsetOf is the subset a pod's annotation names ("" if none).
func wsSubsetOf(p *corev1.Pod) wsInjected {
	var inj wsInjected
	_ = json.Unmarshal([]byte(p.Annotations[wellknown.AnnotationMatchedWorkloadSpread]), &inj)
	return inj
}

// wsRunning: running of the pods of subset are running.
func wsRunning(subset string, running int) func([]corev1.Pod) error {
	return func(pods []corev1.Pod) error {
		n := 0
		for i := range pods {
			if wsSubsetOf(&pods[i]).Subset == subset && pods[i].Status.Phase == corev1.PodRunning {
				n++
			}
		}
		if n != running {
			return fmt.Errorf("subset %s has %d running pods, want %d", subset, n, running)
		}
		return nil
	}
}

// wsNegativeCosts: exactly n pods have a negative deletion cost.
func wsNegativeCosts(n int) func([]corev1.Pod) error {
	return func(pods []corev1.Pod) error {
		var neg []string
		for _, p := range pods {
			if c, err := strconv.Atoi(p.Annotations[wellknown.AnnotationPodDeletionCost]); err == nil && c < 0 {
				neg = append(neg, p.Name)
			}
		}
		if len(neg) != n {
			return fmt.Errorf("pods with a negative deletion cost: %v, want %d", neg, n)
		}
		return nil
	}
}

// wsCosts: every pod has deletion cost cost.
func wsCosts(cost string) func([]corev1.Pod) error {
	return func(pods []corev1.Pod) error {
		for _, p := range pods {
			if got := p.Annotations[wellknown.AnnotationPodDeletionCost]; got != cost {
				return fmt.Errorf("pod %s has deletion cost %q, want %q", p.Name, got, cost)
			}
		}
		return nil
	}
}

// TestWorkloadSpread ports OpenKruise's WorkloadSpread cases.
func TestWorkloadSpread(t *testing.T) {
	t.Parallel()

	// First: this case waits 5 minutes for subset-a to be schedulable
	// again (OpenKruise's MaxScheduledFailedDuration). Subtests start in
	// the order they are defined, so it takes the first of the
	// WorkloadSpread slots and its wait overlaps the other cases.
	t.Run("reschedule subset-a", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		a, b := wsSubsetSpec("subset-a", z.zoneX(), wsMax(2)), wsSubsetSpec("subset-b", z.zoneB(), nil)
		ws := wsNew(wsName, wsCloneSetRef(cs), a, b)
		ws.Spec.ScheduleStrategy = v1alpha1.WorkloadSpreadScheduleStrategy{Type: v1alpha1.FixedWorkloadSpreadScheduleStrategyType}
		w.createWS(ws)
		w.createCloneSet(wsCloneSet(w.f, cs, 5))
		w.waitCloneSetReady(cs, 3, cloneSetTimeout)

		// Fixed: subset-a's 2 pods stay pending there.
		w.waitPods("app="+cs, 5, "2 pending pods in subset-a, 3 running in subset-b", wsAll(
			w.podsCheck(wsName,
				wsSubset{name: a.Name, term: a.RequiredNodeSelectorTerm, cost: "200", patched: true, pods: 2},
				wsSubset{name: b.Name, term: b.RequiredNodeSelectorTerm, cost: "100", patched: true, pods: 3}),
			wsRunning(a.Name, 0), wsRunning(b.Name, 3)))
		w.waitWS(wsName, "subset-a 2 of 2, subset-b 3, no conditions", func(ws *v1alpha1.WorkloadSpread) bool {
			st := ws.Status.SubsetStatuses
			return len(st) == 2 &&
				st[0].Name == ws.Spec.Subsets[0].Name && st[0].MissingReplicas == 0 && st[0].Replicas == 2 && len(st[0].Conditions) == 0 &&
				st[1].Name == ws.Spec.Subsets[1].Name && st[1].MissingReplicas == -1 && st[1].Replicas == 3 && len(st[1].Conditions) == 0
		})

		w.updateWS(wsName, func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.ScheduleStrategy = v1alpha1.WorkloadSpreadScheduleStrategy{
				Type: v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType,
				Adaptive: &v1alpha1.AdaptiveWorkloadSpreadStrategy{
					DisableSimulationSchedule: true,
					RescheduleCriticalSeconds: ptr.To[int32](5),
				},
			}
		})
		w.waitWSFor(wsName, "subset-a Schedulable=False", 6*time.Minute, wsCondition(0, corev1.ConditionFalse))

		// Its pods are recreated in subset-b.
		w.waitCloneSetReady(cs, 5, 5*time.Minute)
		w.waitPods("app="+cs, 5, "all 5 pods in subset-b", w.podsCheck(wsName,
			wsSubset{name: a.Name, pods: 0},
			wsSubset{name: b.Name, term: b.RequiredNodeSelectorTerm, cost: "100", patched: true, pods: 5}))

		w.waitWSFor(wsName, "subset-a Schedulable=True again", 5*time.Minute, wsCondition(0, corev1.ConditionTrue))
	})

	t.Run("deploy in two zone, the type of maxReplicas is Integer", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		a, b := wsSubsetSpec("zone-a", z.zoneA(), wsMax(3)), wsSubsetSpec("zone-b", z.zoneB(), wsMax(3))
		w.createWS(wsNew(wsName, wsCloneSetRef(cs), a, b))
		w.createCloneSet(wsCloneSet(w.f, cs, 6))
		w.waitCloneSetRunning(cs, 6)

		check := func(step string, na, nb int) {
			t.Helper()
			w.waitTwoZones("app="+cs, step, a, b, na, nb)
			w.waitWS(wsName, step, wsStatus(wsCount{int32(na), 0}, wsCount{int32(nb), 0}))
		}
		check("6 pods, 3 per zone", 3, 3)

		// Update the image (in place): the pods keep their subsets.
		w.setImage(cs)
		w.waitCloneSetRunning(cs, 6)
		check("image updated", 3, 3)

		// maxReplicas 2 and 2, replicas 4: the pod over each subset's
		// limit gets a negative cost and goes first.
		w.updateWS(wsName, func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].MaxReplicas, ws.Spec.Subsets[1].MaxReplicas = wsMax(2), wsMax(2)
		})
		w.waitPods("app="+cs, 6, "one pod over each subset's maxReplicas", wsNegativeCosts(2))
		w.scaleCloneSet(cs, 4)
		w.waitCloneSetRunning(cs, 4)
		check("scaled in to 4, maxReplicas 2", 2, 2)

		// maxReplicas 4 and 4, replicas 8.
		w.updateWS(wsName, func(ws *v1alpha1.WorkloadSpread) {
			ws.Spec.Subsets[0].MaxReplicas, ws.Spec.Subsets[1].MaxReplicas = wsMax(4), wsMax(4)
		})
		w.scaleCloneSet(cs, 8)
		w.waitCloneSetRunning(cs, 8)
		check("scaled out to 8, maxReplicas 4", 4, 4)
	})

	t.Run("elastic deployment, zone-a=2, zone-b=nil", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		a, b := wsSubsetSpec("zone-a", z.zoneA(), wsMax(2)), wsSubsetSpec("zone-b", z.zoneB(), nil)
		w.createWS(wsNew(wsName, wsCloneSetRef(cs), a, b))
		w.createCloneSet(wsCloneSet(w.f, cs, 2))
		w.waitCloneSetRunning(cs, 2)

		check := func(step string, na, nb int) {
			t.Helper()
			w.waitTwoZones("app="+cs, step, a, b, na, nb)
			w.waitWS(wsName, step, wsStatus(wsCount{int32(na), 0}, wsCount{int32(nb), -1}))
		}
		check("2 pods in zone-a", 2, 0)

		w.scaleCloneSet(cs, 6)
		w.waitCloneSetRunning(cs, 6)
		check("scaled out to 6: zone-b takes the rest", 2, 4)

		w.setImage(cs)
		w.waitCloneSetRunning(cs, 6)
		check("image updated", 2, 4)

		// Scale-in removes zone-b's pods (cost 100) before zone-a's (200).
		w.scaleCloneSet(cs, 2)
		w.waitCloneSetRunning(cs, 2)
		check("scaled in to 2", 2, 0)
	})

	// Adaptive: a subset whose pods cannot be scheduled (its term matches
	// no node) is marked unschedulable and its pods move to the next
	// subset. OpenKruise waits up to 6 minutes for the subset to be
	// marked, and up to 5 for it to be schedulable again (the mark lasts
	// 5 minutes): this case takes about 5 minutes.
	t.Run("manage the pods that were created before workloadspread", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		// The CloneSet's pods prefer zone-a.
		set := wsCloneSet(w.f, cs, 4)
		set.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{wsPrefer(100, z.zoneA())},
		}}
		a, b := wsSubsetSpec("zone-a", z.zoneA(), wsMax(2)), wsSubsetSpec("zone-b", z.zoneB(), nil)

		w.createCloneSet(set)
		w.waitCloneSetRunning(cs, 4)

		// Two pods claim an unmatched WorkloadSpread.
		list, err := w.f.Kube.CoreV1().Pods(w.f.Namespace).List(w.ctx, metav1.ListOptions{LabelSelector: "app=" + cs})
		require.NoError(t, err)
		pods := wsActive(list.Items)
		require.Len(t, pods, 4)
		fake, err := json.Marshal(wsInjected{Name: "fakeWS", Subset: "subset-a"})
		require.NoError(t, err)
		for _, p := range pods[:2] {
			updateObject(w.ctx, t, w.f.Kube.CoreV1().Pods(w.f.Namespace), p.Name, func(p *corev1.Pod) {
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				p.Annotations[wellknown.AnnotationMatchedWorkloadSpread] = string(fake)
			})
		}

		w.createWS(wsNew(wsName, wsCloneSetRef(cs), a, b))
		w.waitWS(wsName, "zone-a holds the 4 existing pods", func(ws *v1alpha1.WorkloadSpread) bool {
			return len(ws.Status.SubsetStatuses) > 0 && ws.Status.SubsetStatuses[0].Replicas == 4
		})

		// costs counts the pods by the sign of their deletion cost (every
		// pod has one) and by subset of this WorkloadSpread.
		costs := func(positive, zero, negative, inA, inB int) func([]corev1.Pod) error {
			return func(pods []corev1.Pod) error {
				var pos, zer, neg, na, nb, uninjected int
				for i := range pods {
					p := &pods[i]
					cost, err := strconv.Atoi(p.Annotations[wellknown.AnnotationPodDeletionCost])
					if err != nil {
						return fmt.Errorf("pod %s: deletion cost: %v", p.Name, err)
					}
					switch {
					case cost > 0:
						pos++
					case cost == 0:
						zer++
					default:
						neg++
					}
					inj := wsSubsetOf(p)
					if inj.Name != wsName {
						uninjected++
						continue
					}
					switch inj.Subset {
					case a.Name:
						na++
					case b.Name:
						nb++
					}
				}
				got := [6]int{pos, zer, neg, na, nb, uninjected}
				if want := [6]int{positive, zero, negative, inA, inB, 0}; got != want {
					return fmt.Errorf("costs positive/zero/negative %d/%d/%d, zone-a %d, zone-b %d, uninjected %d; want %v", pos, zer, neg, na, nb, uninjected, want)
				}
				return nil
			}
		}

		// 6 replicas: the new pods go to zone-b; zone-a keeps 4 pods, 2
		// over its maxReplicas (negative cost).
		w.scaleCloneSet(cs, 6)
		w.waitCloneSetRunning(cs, 6)
		w.waitWS(wsName, "zone-b holds 2 pods", func(ws *v1alpha1.WorkloadSpread) bool {
			return len(ws.Status.SubsetStatuses) > 1 && ws.Status.SubsetStatuses[1].Replicas == 2
		})
		w.waitPods("app="+cs, 6, "4 pods in zone-a, 2 in zone-b", wsAll(costs(4, 0, 2, 4, 2),
			w.podsCheck(wsName, wsSubset{name: b.Name, term: b.RequiredNodeSelectorTerm, cost: "100", patched: true, pods: 2})))

		// 3 replicas: the 2 pods over zone-a's limit go, then one of zone-b.
		w.scaleCloneSet(cs, 3)
		w.waitCloneSetRunning(cs, 3)
		w.waitWS(wsName, "zone-a holds 2 pods", func(ws *v1alpha1.WorkloadSpread) bool {
			return len(ws.Status.SubsetStatuses) > 0 && ws.Status.SubsetStatuses[0].Replicas == 2
		})
		w.waitPods("app="+cs, 3, "2 pods in zone-a, 1 in zone-b", wsAll(costs(3, 0, 0, 2, 1),
			w.podsCheck(wsName, wsSubset{name: b.Name, term: b.RequiredNodeSelectorTerm, cost: "100", patched: true, pods: 1})))
	})

	t.Run("only one subset, zone-a=nil", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		// A PriorityClass of its own (OpenKruise's test-priority-class),
		// set by the subset's patch.
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: w.f.Namespace}, Value: 100}
		_, err := w.f.Kube.SchedulingV1().PriorityClasses().Create(w.ctx, pc, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = w.f.Kube.SchedulingV1().PriorityClasses().Delete(context.WithoutCancel(w.ctx), pc.Name, metav1.DeleteOptions{})
		})
		a := wsSubsetSpec("zone-a", z.zoneA(), nil)
		a.Patch = runtime.RawExtension{Raw: fmt.Appendf(nil,
			`{"metadata":{"annotations":{%q:"zone-a"}},"spec":{"priorityClassName":%q}}`, wsPatchKey, pc.Name)}
		w.createWS(wsNew(wsName, wsCloneSetRef(cs), a))
		w.createCloneSet(wsCloneSet(w.f, cs, 2))
		w.waitCloneSetRunning(cs, 2)

		priority := func(pods []corev1.Pod) error {
			for _, p := range pods {
				if wsSubsetOf(&p).Subset != a.Name {
					continue
				}
				if p.Spec.PriorityClassName != pc.Name || p.Spec.Priority == nil || *p.Spec.Priority != 100 {
					return fmt.Errorf("pod %s: priorityClassName %q priority %v, want %q and 100", p.Name, p.Spec.PriorityClassName, p.Spec.Priority, pc.Name)
				}
			}
			return nil
		}
		check := func(step string, n int) {
			t.Helper()
			w.waitPods("app="+cs, n, step, wsAll(priority, w.podsCheck(wsName,
				wsSubset{name: a.Name, term: a.RequiredNodeSelectorTerm, cost: "100", patched: true, pods: n})))
			w.waitWS(wsName, step, wsStatus(wsCount{int32(n), -1}))
		}
		check("2 pods in zone-a", 2)

		w.scaleCloneSet(cs, 6)
		w.waitCloneSetRunning(cs, 6)
		check("scaled out to 6", 6)

		w.setImage(cs)
		w.waitCloneSetRunning(cs, 6)
		check("image updated", 6)
	})

	t.Run("only one subset, zone-a=2", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		a := wsSubsetSpec("zone-a", z.zoneA(), wsMax(2))
		w.createWS(wsNew(wsName, wsCloneSetRef(cs), a))
		w.createCloneSet(wsCloneSet(w.f, cs, 2))
		w.waitCloneSetRunning(cs, 2)

		check := func(step string, n int) {
			t.Helper()
			// The pods beyond zone-a's 2 are in no subset. OpenKruise's
			// test reads them without a cost because its controller is not
			// woken by these pods; Shoal's is, and gives them the cost of
			// pods in no subset (-200 here), which OpenKruise's controller
			// gives them too once it syncs. podsCheck accepts either.
			w.waitPods("app="+cs, n, step, w.podsCheck(wsName,
				wsSubset{name: a.Name, term: a.RequiredNodeSelectorTerm, cost: "100", patched: true, pods: 2}))
			w.waitWS(wsName, step, wsStatus(wsCount{2, 0}))
		}
		check("2 pods in zone-a", 2)

		w.scaleCloneSet(cs, 6)
		w.waitCloneSetRunning(cs, 6)
		check("scaled out to 6: 4 pods in no subset", 6)

		w.scaleCloneSet(cs, 2)
		w.waitCloneSetRunning(cs, 2)
		check("scaled in to 2: the pods in no subset went", 2)
	})

	t.Run("manage existing pods by only preferredNodeSelector, then deletion subset-b", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		toleration := []corev1.Toleration{{Key: "node-taint", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		subsets := []v1alpha1.WorkloadSpreadSubset{
			{
				Name:                       "subset-a",
				Tolerations:                toleration,
				PreferredNodeSelectorTerms: []corev1.PreferredSchedulingTerm{wsPrefer(20, z.zoneA()), wsPrefer(10, z.zoneB())},
				MaxReplicas:                wsMax(3),
			},
			{
				Name:                       "subset-b",
				Tolerations:                toleration,
				PreferredNodeSelectorTerms: []corev1.PreferredSchedulingTerm{wsPrefer(10, z.zoneA()), wsPrefer(20, z.zoneB())},
			},
		}
		set := wsCloneSet(w.f, cs, 3)
		set.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{wsPrefer(100, z.zoneB())},
		}}
		w.createCloneSet(set)
		w.waitCloneSetRunning(cs, 3)

		w.createWS(wsNew(wsName, wsCloneSetRef(cs), subsets...))
		w.waitWS(wsName, "subset-a 0 pods, subset-b 3", wsReplicasByName(map[string]int32{"subset-a": 0, "subset-b": 3}))
		w.waitPods("app="+cs, 3, "every pod costs 100", wsCosts("100"))

		// Without subset-b its pods are in no subset.
		w.updateWS(wsName, func(ws *v1alpha1.WorkloadSpread) { ws.Spec.Subsets = ws.Spec.Subsets[:1] })
		w.waitPods("app="+cs, 3, "every pod costs -200", wsCosts("-200"))
	})

	t.Run("manage statefulset pods only with patch", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		const sts = "busybox"
		w.createWS(wsNew(wsName, wsRef("apps.kruise.io/v1alpha1", "StatefulSet", sts),
			v1alpha1.WorkloadSpreadSubset{Name: "subset-a", MaxReplicas: wsMax(2), Patch: wsPatch("subset-a")},
			v1alpha1.WorkloadSpreadSubset{Name: "subset-b", MaxReplicas: wsMax(2), Patch: wsPatch("subset-b")},
			v1alpha1.WorkloadSpreadSubset{Name: "subset-c", Patch: wsPatch("subset-c")},
		))

		createStatefulSet(w.ctx, t, w.f, newStatefulSet(w.f, sts, 5))
		waitStatefulSet(w.ctx, t, w.f, sts, "5 pods ready", settledSet(5))

		want := map[string]int32{"subset-a": 2, "subset-b": 2, "subset-c": 1}
		w.waitWS(wsName, "subsets 2, 2, 1", wsReplicasByName(want))
		w.waitPods("app="+sts, 5, "patched 2, 2, 1", func(pods []corev1.Pod) error {
			got := map[string]int32{}
			for _, p := range pods {
				got[p.Annotations[wsPatchKey]]++
			}
			for s, n := range want {
				if got[s] != n {
					return fmt.Errorf("pods by patch annotation %v, want %v", got, want)
				}
			}
			return nil
		})
	})

	t.Run("job-like custom workload", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		// OpenKruise's e2e setup: the TFJob CRD, the coordinator may read
		// TFJobs, and the white list names TFJob (replicas at
		// spec.tfReplicaSpecs.MASTER.replicas) and apps.kruise.io/v1alpha1
		// DaemonSet.
		tfjobs := w.installTFJobs()
		w.allowCustomWorkloads(
			map[string]any{"Group": "kubeflow.org", "Version": "v1", "Kind": "TFJob", "ReplicasPath": "spec.tfReplicaSpecs.MASTER.replicas"},
			map[string]any{"Group": "apps.kruise.io", "Version": "v1alpha1", "Kind": "DaemonSet"},
		)
		subsets := func(aMax, bMax intstr.IntOrString) []v1alpha1.WorkloadSpreadSubset {
			return []v1alpha1.WorkloadSpreadSubset{{Name: "subset-a", MaxReplicas: &aMax}, {Name: "subset-b", MaxReplicas: &bMax}}
		}
		wantStatus := func(replicasA, missA, replicasB, missB int32) func(*v1alpha1.WorkloadSpread) bool {
			return func(ws *v1alpha1.WorkloadSpread) bool {
				st := ws.Status.SubsetStatuses
				return len(st) == 2 && st[0].Replicas == replicasA && st[0].MissingReplicas == missA &&
					st[1].Replicas == replicasB && st[1].MissingReplicas == missB
			}
		}
		// create retries while the coordinator has not yet read the white
		// list (OpenKruise's CreateWorkloadSpread retries for 20 s).
		create := func(ws *v1alpha1.WorkloadSpread) {
			t.Helper()
			var err error
			_ = framework.WaitFor(w.ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				_, err = w.f.Shoal.AppsV1alpha1().WorkloadSpreads(w.f.Namespace).Create(ctx, ws, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					err = nil // an earlier attempt went through
				}
				return err == nil, nil
			})
			require.NoError(t, err, "create WorkloadSpread %s", ws.Name)
			w.waitWS(ws.Name, "observed", func(*v1alpha1.WorkloadSpread) bool { return true })
		}

		// invalid targetFilter
		bad := wsNew("ws-invalid-target-filter", wsRef("apps.kruise.io/v1alpha1", "DaemonSet", "invalid-target-filter"), subsets(intstr.FromInt32(2), intstr.FromInt32(5))...)
		bad.Spec.TargetFilter = &v1alpha1.TargetFilter{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "key", Operator: metav1.LabelSelectorOpIn}},
		}}
		var err error
		_ = framework.WaitFor(w.ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err = w.f.Shoal.AppsV1alpha1().WorkloadSpreads(w.f.Namespace).Create(ctx, bad, metav1.CreateOptions{})
			return err == nil || strings.Contains(err.Error(), "targetFilter"), nil
		})
		require.Error(t, err, "a selector In without values is refused")
		require.ErrorContains(t, err, "targetFilter")

		// custom workload with no replicas: maxReplicas 2 and 5 over the
		// DaemonSet's pods (one per node: 2/2 and 1/5 on 3 nodes).
		noReplicas := wsNew("ws-no-replicas", wsRef("apps.kruise.io/v1alpha1", "DaemonSet", "no-replicas"), subsets(intstr.FromInt32(2), intstr.FromInt32(5))...)
		create(noReplicas)
		ds := &v1alpha1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "no-replicas"},
			Spec: v1alpha1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "no-replicas"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "no-replicas"}},
					Spec:       wsSleeperSpec(w.f),
				},
			},
		}
		_, err = w.f.Shoal.AppsV1alpha1().DaemonSets(w.f.Namespace).Create(w.ctx, ds, metav1.CreateOptions{})
		require.NoError(t, err)
		ready := waitObject(w.ctx, t, w.f.Shoal.AppsV1alpha1().DaemonSets(w.f.Namespace), wsTimeout, ds.Name, "every pod ready",
			func(d *v1alpha1.DaemonSet) bool {
				return d.Status.ObservedGeneration == d.Generation && d.Status.DesiredNumberScheduled > 0 &&
					d.Status.NumberReady == d.Status.DesiredNumberScheduled
			},
			func(d *v1alpha1.DaemonSet) any { return d.Status })
		nodes := ready.Status.DesiredNumberScheduled
		inA := min(nodes, 2)
		inB := min(nodes-inA, 5)
		w.waitWS(noReplicas.Name, fmt.Sprintf("%d pods: %d/2 and %d/5", nodes, inA, inB), wantStatus(inA, 2-inA, inB, 5-inB))

		// custom workload with replicas path in white list (MASTER):
		// replicas 5, 1 PS + 3 MASTER pods (not filtered), subsets 20%
		// and 80% of 5 => 1/1, 3/4.
		whitelisted := wsNew("ws-replicas-whitelist", wsRef("kubeflow.org/v1", "TFJob", "replicas-whitelist"), subsets(intstr.FromString("20%"), intstr.FromString("80%"))...)
		create(whitelisted)
		w.createTFJob(tfjobs, "replicas-whitelist", 1, 5, 0, 1, 3, 0)
		w.waitWS(whitelisted.Name, "1/1 and 3/4", wantStatus(1, 0, 3, 1))

		// custom workload with target filter (Worker): replicas 4 from
		// the path list, 1 PS + 1 MASTER + 2 Worker pods (only workers
		// count), subsets 25% and 75% of 4 => 1/1, 1/3.
		filtered := wsNew("ws-with-filter", wsRef("kubeflow.org/v1", "TFJob", "with-filter"), subsets(intstr.FromString("25%"), intstr.FromString("75%"))...)
		filtered.Spec.TargetFilter = &v1alpha1.TargetFilter{
			Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}},
			ReplicasPathList: []string{"spec.tfReplicaSpecs.Worker.replicas"},
		}
		create(filtered)
		w.createTFJob(tfjobs, "with-filter", 1, 1, 4, 1, 1, 2)
		w.waitWS(filtered.Name, "1/1 and 1/3", wantStatus(1, 0, 1, 2))
	})

	t.Run("elastic deploy for deployment, zone-a=2, zone-b=nil", func(t *testing.T) {
		t.Parallel()
		// The Deployment's rollout surges new pods while the old ones hold
		// zone-a; each revision's pods are counted apart
		// (status.versionedSubsetStatuses), so the new revision's first
		// two pods still go to zone-a, and the old ones there go first.
		w := newWSTester(t)
		z := w.zones()
		const name = "busybox"
		a, b := wsSubsetSpec("zone-a", z.zoneA(), wsMax(2)), wsSubsetSpec("zone-b", z.zoneB(), nil)
		w.createWS(wsNew(wsName, wsRef("apps/v1", "Deployment", name), a, b))

		deployments := w.f.Kube.AppsV1().Deployments(w.f.Namespace)
		_, err := deployments.Create(w.ctx, wsDeployment(w.f, name, 2), metav1.CreateOptions{})
		require.NoError(t, err)
		running := func() {
			t.Helper()
			_, err := w.f.WaitForDeploymentAvailable(w.ctx, w.f.Namespace, name, wsTimeout)
			require.NoError(t, err)
		}
		check := func(step string, na, nb int) {
			t.Helper()
			w.waitTwoZones("app="+name, step, a, b, na, nb)
		}
		// zone-a full, nothing creating or deleting.
		zoneAFull := func(ws *v1alpha1.WorkloadSpread) bool {
			st := ws.Status.SubsetStatuses
			return len(st) > 0 && st[0].Name == ws.Spec.Subsets[0].Name && st[0].MissingReplicas == 0 &&
				len(st[0].CreatingPods) == 0 && len(st[0].DeletingPods) == 0
		}
		running()
		check("2 pods in zone-a", 2, 0)

		updateObject(w.ctx, t, deployments, name, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](6) })
		running()
		check("scaled out to 6", 2, 4)
		w.waitWS(wsName, "zone-a full", zoneAFull)

		updateObject(w.ctx, t, deployments, name, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image = w.f.Image("testserver:v2")
		})
		running()
		check("image updated", 2, 4)

		updateObject(w.ctx, t, deployments, name, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) })
		running()
		check("scaled in to 2", 2, 0)
	})
}

// wsSleeperSpec is a busybox that sleeps, stopped at once (the
// DaemonSet's and the fake TFJob pods').
func wsSleeperSpec(f *framework.Framework) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name: "main", Image: f.Image("busybox:latest"), Command: []string{"/bin/sh", "-c", "sleep 10000000"},
		}},
	}
}

// wsDeployment is OpenKruise's NewBaseDeployment with the testserver.
func wsDeployment(f *framework.Framework, name string, replicas int32) *appsv1.Deployment {
	d := testserverDeployment(f, name, replicas)
	// OpenKruise's Deployment has no spread constraint: the subsets place
	// the pods.
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	return d
}

// wsTFJobs is the TFJob resource.
var wsTFJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "tfjobs"}

// installTFJobs installs a TFJob CRD (kubeflow.org/v1, any content) and
// lets the coordinator read TFJobs (OpenKruise's e2e ClusterRole
// kruise-e2e-access) until the test ends. It returns the resource.
func (w *wsTester) installTFJobs() schema.GroupVersionResource {
	w.t.Helper()
	installCustomKind(w.ctx, w.t, w.f, wsTFJobs, "TFJob")
	return wsTFJobs
}

// createTFJob creates TFJob name with ps, master and worker replicas and,
// as OpenKruise's CreateTFJob does (no TFJob controller runs), its pods
// itself: psPods, masterPods and workerPods sleepers labelled app=tfjob
// and role=ps|master|worker, controlled by the TFJob.
func (w *wsTester) createTFJob(gvr schema.GroupVersionResource, name string, ps, master, worker int64, psPods, masterPods, workerPods int) {
	w.t.Helper()
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "TFJob",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"tfReplicaSpecs": map[string]any{
			"PS":     map[string]any{"replicas": ps},
			"MASTER": map[string]any{"replicas": master},
			"Worker": map[string]any{"replicas": worker},
		}},
	}}
	var created *unstructured.Unstructured
	var err error
	// Until the CRD is established.
	_ = framework.WaitFor(w.ctx, wsTimeout, func(ctx context.Context) (bool, error) {
		created, err = w.f.Dynamic.Resource(gvr).Namespace(w.f.Namespace).Create(ctx, job, metav1.CreateOptions{})
		return err == nil, nil
	})
	require.NoError(w.t, err, "create TFJob %s", name)
	pod := func(podName, role string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   podName,
				Labels: map[string]string{"app": "tfjob", "role": role},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: gvr.GroupVersion().String(), Kind: "TFJob", Name: created.GetName(), UID: created.GetUID(),
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}},
			},
			Spec: wsSleeperSpec(w.f),
		}
		_, err := w.f.Kube.CoreV1().Pods(w.f.Namespace).Create(w.ctx, p, metav1.CreateOptions{})
		require.NoError(w.t, err, "create pod %s", podName)
	}
	for i := range psPods {
		pod(fmt.Sprintf("tfjob-%s-ps-%d", name, i), "ps")
	}
	for i := range masterPods {
		pod(fmt.Sprintf("tfjob-%s-master-%d", name, i), "master")
	}
	for i := range workerPods {
		pod(fmt.Sprintf("tfjob-%s-worker-%d", name, i), "worker")
	}
}

// allowCustomWorkloads adds entries to the
// WorkloadSpread_Watch_Custom_Workload_WhiteList of the coordinator's
// kruise-configuration ConfigMap until the test ends.
func (w *wsTester) allowCustomWorkloads(entries ...map[string]any) {
	w.t.Helper()
	addWhiteListEntries(w.ctx, w.t, w.f, wellknown.ConfigWorkloadSpreadWatchCustomWorkloadWhiteList, entries...)
}

// TestWorkloadSpreadV1beta1 ports OpenKruise's "WorkloadSpread v1beta1"
// cases: WorkloadSpreads written and read at apps.kruise.io/v1beta1
// (requiredNodeSelector for v1alpha1's requiredNodeSelectorTerm), and a
// v1alpha1 WorkloadSpread read back at v1beta1.
func TestWorkloadSpreadV1beta1(t *testing.T) {
	t.Parallel()

	betaSubset := func(name string, term *corev1.NodeSelectorTerm, maxReplicas *intstr.IntOrString) v1beta1.WorkloadSpreadSubset {
		return v1beta1.WorkloadSpreadSubset{Name: name, RequiredNodeSelector: term, MaxReplicas: maxReplicas, Patch: wsPatch(name)}
	}
	betaWS := func(cs string, subsets ...v1beta1.WorkloadSpreadSubset) *v1beta1.WorkloadSpread {
		return &v1beta1.WorkloadSpread{
			ObjectMeta: metav1.ObjectMeta{Name: wsName},
			Spec: v1beta1.WorkloadSpreadSpec{
				TargetReference: &v1beta1.TargetReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: cs},
				Subsets:         subsets,
			},
		}
	}
	waitBeta := func(w *wsTester, what string, done func(*v1beta1.WorkloadSpread) bool) *v1beta1.WorkloadSpread {
		w.t.Helper()
		return waitObject(w.ctx, w.t, w.f.Shoal.AppsV1beta1().WorkloadSpreads(w.f.Namespace), wsTimeout, wsName, what,
			func(ws *v1beta1.WorkloadSpread) bool {
				return ws.Status.ObservedGeneration == ws.Generation && done(ws)
			},
			func(ws *v1beta1.WorkloadSpread) any { return ws.Status })
	}
	createBeta := func(w *wsTester, ws *v1beta1.WorkloadSpread) {
		w.t.Helper()
		_, err := w.f.Shoal.AppsV1beta1().WorkloadSpreads(w.f.Namespace).Create(w.ctx, ws, metav1.CreateOptions{})
		require.NoError(w.t, err, "create WorkloadSpread %s at v1beta1", ws.Name)
		waitBeta(w, "observed", func(*v1beta1.WorkloadSpread) bool { return true })
	}
	// replicas (and missingReplicas, when missing is given) of the
	// subsets in order.
	betaStatus := func(replicas []int32, missing []int32) func(*v1beta1.WorkloadSpread) bool {
		return func(ws *v1beta1.WorkloadSpread) bool {
			st := ws.Status.SubsetStatuses
			if len(st) != len(replicas) {
				return false
			}
			for i := range st {
				if st[i].Replicas != replicas[i] || (missing != nil && st[i].MissingReplicas != missing[i]) {
					return false
				}
			}
			return true
		}
	}

	t.Run("v1beta1: deploy in two zones, maxReplicas is Integer", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		a, b := betaSubset("zone-a", z.zoneA(), wsMax(3)), betaSubset("zone-b", z.zoneB(), wsMax(3))
		createBeta(w, betaWS(cs, a, b))
		w.createCloneSet(wsCloneSet(w.f, cs, 6))
		w.waitCloneSetRunning(cs, 6)

		w.waitPods("app="+cs, 6, "3 pods per zone", w.podsCheck(wsName,
			wsSubset{name: a.Name, term: a.RequiredNodeSelector, cost: "200", patched: true, pods: 3},
			wsSubset{name: b.Name, term: b.RequiredNodeSelector, cost: "100", patched: true, pods: 3}))
		waitBeta(w, "3/3 per zone", betaStatus([]int32{3, 3}, []int32{0, 0}))

		// maxReplicas 2 per zone, replicas 4.
		updateObject(w.ctx, t, w.f.Shoal.AppsV1beta1().WorkloadSpreads(w.f.Namespace), wsName, func(ws *v1beta1.WorkloadSpread) {
			ws.Spec.Subsets[0].MaxReplicas, ws.Spec.Subsets[1].MaxReplicas = wsMax(2), wsMax(2)
		})
		waitBeta(w, "observed maxReplicas 2", func(*v1beta1.WorkloadSpread) bool { return true })
		w.waitPods("app="+cs, 6, "one pod over each subset's maxReplicas", wsNegativeCosts(2))
		w.scaleCloneSet(cs, 4)
		w.waitCloneSetRunning(cs, 4)
		w.waitPods("app="+cs, 4, "4 pods", func([]corev1.Pod) error { return nil })
		waitBeta(w, "2 pods per zone", betaStatus([]int32{2, 2}, nil))
	})

	t.Run("v1beta1: elastic deployment, zone-a=2, zone-b=nil", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		a, b := betaSubset("zone-a", z.zoneA(), wsMax(2)), betaSubset("zone-b", z.zoneB(), nil)
		createBeta(w, betaWS(cs, a, b))
		w.createCloneSet(wsCloneSet(w.f, cs, 5))
		w.waitCloneSetRunning(cs, 5)

		w.waitPods("app="+cs, 5, "2 pods in zone-a, 3 in zone-b", w.podsCheck(wsName,
			wsSubset{name: a.Name, term: a.RequiredNodeSelector, patched: true, pods: 2},
			wsSubset{name: b.Name, term: b.RequiredNodeSelector, patched: true, pods: 3}))
	})

	t.Run("cross-version: v1alpha1 create is visible as v1beta1 with correct field mapping", func(t *testing.T) {
		t.Parallel()
		w := newWSTester(t)
		z := w.zones()
		const cs = "busybox"
		zoneA := z.zoneA()
		// v1alpha1 field names: requiredNodeSelectorTerm.
		alpha := wsNew(wsName, wsCloneSetRef(cs),
			v1alpha1.WorkloadSpreadSubset{Name: "zone-a", RequiredNodeSelectorTerm: zoneA, MaxReplicas: wsMax(3)},
			v1alpha1.WorkloadSpreadSubset{Name: "zone-b"})
		_, err := w.f.Shoal.AppsV1alpha1().WorkloadSpreads(w.f.Namespace).Create(w.ctx, alpha, metav1.CreateOptions{})
		require.NoError(t, err)

		beta := waitBeta(w, "observed", func(*v1beta1.WorkloadSpread) bool { return true })
		require.NotNil(t, beta.Spec.Subsets[0].RequiredNodeSelector, "requiredNodeSelector from requiredNodeSelectorTerm")
		require.Equal(t, zoneA.MatchExpressions, beta.Spec.Subsets[0].RequiredNodeSelector.MatchExpressions)
		require.Equal(t, z.key, beta.Spec.Subsets[0].RequiredNodeSelector.MatchExpressions[0].Key)

		// The pods of zone-a get the affinity of the WorkloadSpread created
		// at v1alpha1.
		w.createCloneSet(wsCloneSet(w.f, cs, 3))
		w.waitCloneSetRunning(cs, 3)
		w.waitPods("app="+cs, 3, "zone-a's pods have its node affinity", w.podsCheck(wsName,
			wsSubset{name: "zone-a", term: zoneA, pods: -1}))
	})
}
