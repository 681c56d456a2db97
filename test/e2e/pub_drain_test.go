//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
)

// drainSample is what the drain test saw at one moment: the budget's
// covered pods that are ready and not being deleted, and the budget's
// status in between two pod lists.
type drainSample struct {
	at              time.Duration
	readyBefore     int
	readyAfter      int
	terminating     []string
	live            []string
	allowed         int32
	statusGenerated bool
}

// TestPodUnavailableBudgetDrain drains a node with `kubectl drain` while
// a PodUnavailableBudget (maxUnavailable 1) covers the three pods on it:
// kubectl evicts through the pods/eviction subresource, the budget
// refuses all but one eviction at a time with 429 (kubectl retries those
// after 5 s), so the pods move to the other node one by one, each only
// after the previous replacement is ready. A watcher samples the pods
// and the budget's status every 100 ms while the drain runs and checks
// that the ready pods never drop below the 2 the budget keeps and that
// the status never allows more than the ready pods leave room for.
//
// Serial: it cordons and drains a node of the shared cluster.
func TestPodUnavailableBudgetDrain(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	kubectl, err := exec.LookPath("kubectl")
	require.NoError(t, err, "kubectl on PATH (eval \"$(.cache/bin/shoal-cluster env)\" puts the cluster's there)")

	nodes := requireSchedulableNodes(ctx, t, f, 2)
	from, to := nodes[0].Name, nodes[1].Name
	cordon := func(node string, on bool) {
		t.Helper()
		patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
		_, err := f.Kube.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err, "cordon=%t node %s", on, node)
	}
	t.Cleanup(func() {
		// Never leave a node of the shared cluster cordoned.
		for _, n := range []string{from, to} {
			_, err := f.Kube.CoreV1().Nodes().Patch(context.Background(), n, types.StrategicMergePatchType,
				[]byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
			if err != nil {
				t.Errorf("uncordon node %s: %v", n, err)
			}
		}
	})

	// Three pods on `from`: the Deployment may use `from` and `to` only,
	// and `to` is cordoned until the pods run.
	const name = "drained"
	selector := "app=" + name
	cordon(to, true)
	d := pubDeployment(f, name, 3)
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{from, to}}},
		}}},
	}}
	createPub(ctx, t, f, newPub(intstr.FromInt32(1)))
	createPubDeployment(ctx, t, f, d)
	for _, p := range pubLivePods(ctx, t, f, selector) {
		require.Equal(t, from, p.Spec.NodeName, "pod %s before the drain", p.Name)
	}
	waitPub(ctx, t, f, "three pods available", pubCounts{allowed: 1, current: 3, desired: 2, total: 3})
	cordon(to, false)

	// The watcher.
	var (
		mu      sync.Mutex
		samples []drainSample
	)
	readyPods := func(ctx context.Context) (ready int, terminating, live []string, err error) {
		list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return 0, nil, nil, err
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				terminating = append(terminating, p.Name)
				continue
			}
			live = append(live, p.Name)
			if podReady(&p) {
				ready++
			}
		}
		return ready, terminating, live, nil
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	start := time.Now()
	go func() {
		// Every 100 ms (faster than framework.WaitFor polls) until the
		// drain is over, at most 10 minutes.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(10 * time.Minute)
		for {
			select {
			case <-watchCtx.Done():
				watched <- nil
				return
			case <-deadline:
				watched <- fmt.Errorf("the drain watcher ran for 10 minutes")
				return
			case <-tick.C:
			}
			before, terminating, live, err := readyPods(watchCtx)
			if err != nil {
				continue
			}
			pub, err := f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace).Get(watchCtx, pubName, metav1.GetOptions{})
			if err != nil {
				continue
			}
			after, _, _, err := readyPods(watchCtx)
			if err != nil {
				continue
			}
			s := drainSample{at: time.Since(start), readyBefore: before, readyAfter: after, terminating: terminating, live: live,
				allowed: pub.Status.UnavailableAllowed, statusGenerated: pub.Status.ObservedGeneration == pub.Generation}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}
	}()

	// Every write of the budget's status, from now on: the webhook lists
	// each pod it lets go in disruptedPods, which the controller clears
	// once the pod is gone, possibly between two samples.
	cur, err := f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace).Get(ctx, pubName, metav1.GetOptions{})
	require.NoError(t, err)
	pubWatch, err := f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace).Watch(watchCtx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + pubName, ResourceVersion: cur.ResourceVersion})
	require.NoError(t, err)
	defer pubWatch.Stop()
	disrupted := map[string]bool{}
	pubWatched := make(chan struct{})
	go func() {
		defer close(pubWatched)
		for ev := range pubWatch.ResultChan() {
			if pub, ok := ev.Object.(*policyv1alpha1.PodUnavailableBudget); ok {
				mu.Lock()
				for p := range pub.Status.DisruptedPods {
					disrupted[p] = true
				}
				mu.Unlock()
			}
		}
	}()

	// kubectl drain, as an operator runs it (only this test's pods:
	// the node also runs other tests' pods and the agent).
	cmd := exec.CommandContext(ctx, kubectl, "drain", from, "--pod-selector", selector,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "5m")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	drainErr := cmd.Run()
	took := time.Since(start)
	stopWatch()
	require.NoError(t, <-watched)
	pubWatch.Stop()
	<-pubWatched
	t.Logf("kubectl drain %s took %s:\n%s", from, took.Round(time.Millisecond), out.String())
	require.NoError(t, drainErr, "kubectl drain %s", from)

	// Every pod moved, and the budget is back to its steady counts.
	pods := pubLivePods(ctx, t, f, selector)
	require.Len(t, pods, 3)
	for _, p := range pods {
		require.Equal(t, to, p.Spec.NodeName, "pod %s after the drain", p.Name)
	}
	waitPub(ctx, t, f, "three pods available after the drain", pubCounts{allowed: 1, current: 3, desired: 2, total: 3})

	// kubectl was refused while a replacement was not ready, and retried.
	refusals := strings.Count(out.String(), "PodUnavailableBudget "+f.Namespace+"/"+pubName+" does not allow")
	require.GreaterOrEqual(t, refusals, 2, "the budget refused evictions (kubectl retries them): %s", out.String())

	// At every sample: never fewer than 2 ready pods, and the budget
	// allowed no more disruptions than the ready pods leave room for.
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, samples)
	// A pod leaves when it is seen terminating, or gone after being seen
	// live (it may terminate between two samples).
	minReady, evicted := 3, map[string]time.Duration{}
	seen := map[string]bool{}
	for _, s := range samples {
		present := map[string]bool{}
		for _, p := range s.live {
			seen[p], present[p] = true, true
		}
		for _, p := range s.terminating {
			present[p] = true
		}
		for p := range seen {
			if _, ok := evicted[p]; !ok && !present[p] {
				evicted[p] = s.at
			}
		}
		ready := max(s.readyBefore, s.readyAfter)
		minReady = min(minReady, s.readyBefore, s.readyAfter)
		require.GreaterOrEqual(t, s.readyBefore, 2, "ready pods at %s: %+v", s.at, s)
		require.GreaterOrEqual(t, s.readyAfter, 2, "ready pods at %s: %+v", s.at, s)
		if s.statusGenerated {
			require.LessOrEqual(t, s.allowed, int32(max(ready-2, 0)), "unavailableAllowed at %s with %d ready pods: %+v", s.at, ready, s)
		}
		for _, p := range s.terminating {
			if _, ok := evicted[p]; !ok {
				evicted[p] = s.at
			}
		}
	}
	require.Len(t, evicted, 3, "each of the three pods seen leaving: %v", evicted)
	for p := range evicted {
		require.True(t, disrupted[p], "the budget's status listed evicted pod %s in disruptedPods (listed: %v)", p, disrupted)
	}
	t.Logf("drain: %d samples, ready pods never below %d (budget keeps 2), %d refusals, pods left at %v", len(samples), minReady, refusals, evicted)
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
