//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// TestDaemonSetIgnoresNotReadyNodes ports OpenKruise's DaemonSet v1beta1
// "should ignore not ready nodes during rolling update when annotation is
// set" (apps/v1beta1/daemonset_filter_nodes.go, serial): with two nodes
// NotReady, an update whose node affinity leaves them out still rolls
// over the ready node under maxUnavailable 2. The pods on the NotReady
// nodes no longer belong there and are deleted; they do not hold the
// rollout back.
//
// OpenKruise stops the last two worker containers and moves its manager
// off them. Here the last two nodes that do not run the coordinator's
// leader have their network cut, and a standby coordinator on them is
// deleted the same way. OpenKruise's check of the NotReady nodes' pods
// compares pod names with node names and so never fails; this test checks
// what it means to: those pods are being deleted. OpenKruise finally waits
// for every pod of the cluster to be Ready; this test waits for the nodes
// and for Shoal's pods.
func TestDaemonSetIgnoresNotReadyNodes(t *testing.T) {
	serial(t)
	f := newFramework(t)
	localCluster(t, f)
	ctx := t.Context()
	nodes := readyNodes(ctx, t, f)
	if len(nodes) < 3 {
		t.Skipf("needs 3 nodes (two made NotReady, one for the coordinator's leader), have %d", len(nodes))
	}
	leader, err := f.CoordinatorLeader(ctx)
	require.NoError(t, err)
	var cut []string
	for _, n := range slices.Backward(nodes) {
		if n != leader.Spec.NodeName && len(cut) < 2 {
			cut = append(cut, n)
		}
	}
	ready := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return slices.Contains(cut, n) })

	const name = "e2e-ds"
	ds := testDaemonSet(f, name, v1beta1.DaemonSetUpdateStrategy{
		Type:          v1beta1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &v1beta1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(2))},
	})
	ds.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	createDaemonSet(ctx, t, f, ds)
	waitDaemonPods(ctx, t, f, name, "a ready pod on every node", runningOn(nodes))

	for _, n := range cut {
		require.NoError(t, cluster.CutNode(ctx, n), "cut %s", n)
	}
	t.Cleanup(func() { restoreNodes(t, f, cut, len(nodes)) })
	for _, n := range cut {
		_, err := f.WaitForNodeCondition(ctx, n, corev1.NodeReady, corev1.ConditionUnknown, nodeTransitionTimeout)
		require.NoError(t, err, "%s not NotReady after its network was cut", n)
	}
	// OpenKruise's "Migrate the kruise-system pod".
	coordinators, err := f.Kube.CoreV1().Pods(framework.ShoalNamespace).List(ctx, metav1.ListOptions{LabelSelector: framework.CoordinatorSelector})
	require.NoError(t, err)
	for _, p := range coordinators.Items {
		if slices.Contains(cut, p.Spec.NodeName) {
			require.NoError(t, f.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		}
	}

	v2 := f.Image("testserver:v2")
	updateDaemonSet(ctx, t, f, name, func(ds *v1beta1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = v2
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: cut}},
			}}},
		}}
	})
	// daemonPods leaves out pods being deleted: the NotReady nodes keep none.
	got := waitDaemonPods(ctx, t, f, name, "the ready node updated, the NotReady nodes' pods deleted", imageOnEveryPod(ready, v2))
	for _, n := range cut {
		require.Empty(t, got[n], "node %s", n)
	}

	// OpenKruise's "clean unready pods": the pods left terminating on the
	// cut nodes go at once.
	pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if slices.Contains(cut, p.Spec.NodeName) {
			require.NoError(t, f.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		}
	}
}

// restoreNodes gives the cut nodes their network back and waits until they
// are Ready and Shoal runs again in full: both coordinators and an agent
// per node Ready.
func restoreNodes(t *testing.T, f *framework.Framework, cut []string, nodes int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*nodeTransitionTimeout+2*time.Minute)
	defer cancel()
	for _, n := range cut {
		if err := cluster.RestoreNode(ctx, n); err != nil {
			t.Errorf("restore %s: %v", n, err)
		}
	}
	for _, n := range cut {
		if _, err := f.WaitForNodeCondition(ctx, n, corev1.NodeReady, corev1.ConditionTrue, nodeTransitionTimeout); err != nil {
			t.Errorf("%s not Ready again: %v", n, err)
		}
	}
	if _, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, 2*time.Minute); err != nil {
		t.Errorf("coordinators after the restore: %v", err)
	}
	if _, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.AgentSelector, nodes, 2*time.Minute); err != nil {
		t.Errorf("agents after the restore: %v", err)
	}
}
