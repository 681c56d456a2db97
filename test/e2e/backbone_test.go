//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// requireShoal skips t unless Shoal is deployed, and waits until the
// coordinator is available and one agent per node is Ready.
func requireShoal(ctx context.Context, t *testing.T, f *framework.Framework) []corev1.Node {
	t.Helper()
	ok, why, err := f.ShoalDeployed(ctx)
	require.NoError(t, err)
	if !ok {
		t.Skip(why)
	}
	nodes, err := f.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = f.WaitForDeploymentAvailable(ctx, framework.ShoalNamespace, "shoal-coordinator", 2*time.Minute)
	require.NoError(t, err)
	_, err = f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.AgentSelector, len(nodes.Items), 2*time.Minute)
	require.NoError(t, err)
	return nodes.Items
}

// connectedAgents reads the leader's shoal_coordinator_connected_agents.
func connectedAgents(ctx context.Context, f *framework.Framework) (float64, string, error) {
	leader, err := f.CoordinatorLeader(ctx)
	if err != nil {
		return 0, "", err
	}
	m, err := framework.Scrape(ctx, framework.CoordinatorURL(leader))
	if err != nil {
		return 0, leader.Name, err
	}
	v, _ := m.Value("shoal_coordinator_connected_agents", nil)
	return v, leader.Name, nil
}

// waitMeshAlive waits until every agent's metrics show want alive members
// (and, when dead is not empty, that node as dead).
func waitMeshAlive(ctx context.Context, t *testing.T, f *framework.Framework, on []string, want int, dead string, timeout time.Duration) {
	t.Helper()
	require.NoError(t, framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		agents, err := f.AgentPods(ctx)
		if err != nil {
			return false, err
		}
		for _, node := range on {
			pod, ok := agents[node]
			if !ok {
				return false, nil
			}
			m, err := framework.Scrape(ctx, framework.AgentURL(pod))
			if err != nil {
				return false, nil // agent restarting or node cut
			}
			alive, _ := m.Value("shoal_agent_mesh_members", map[string]string{"state": "alive"})
			if int(alive) != want {
				return false, nil
			}
			if dead != "" {
				var members []struct {
					Name  string
					State string
				}
				if err := framework.GetJSON(ctx, framework.AgentURL(pod)+"/mesh", f.EndpointReaderToken(ctx), &members); err != nil {
					return false, nil
				}
				found := false
				for _, mb := range members {
					found = found || (mb.Name == dead && mb.State == "dead")
				}
				if !found {
					return false, nil
				}
			}
		}
		return true, nil
	}), "mesh did not reach %d alive members (dead: %q) on %v", want, dead, on)
}

func nodeNames(nodes []corev1.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

// TestBackboneDeployed: after make deploy the coordinator is Ready, one
// agent runs per node, the leader counts N connected agents, every agent
// counts N mesh members, and each agent's CRI inventory matches the API's
// pods on its node.
func TestBackboneDeployed(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireShoal(ctx, t, f)
	n := len(nodes)

	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)
	require.Len(t, agents, n, "one agent pod per node")
	for _, node := range nodes {
		require.Contains(t, agents, node.Name)
	}

	start := time.Now()
	require.NoError(t, framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		v, _, err := connectedAgents(ctx, f)
		return err == nil && int(v) == n, nil
	}), "leader should count %d connected agents", n)
	t.Logf("leader counts %d connected agents after %s", n, time.Since(start).Round(time.Millisecond))

	waitMeshAlive(ctx, t, f, nodeNames(nodes), n, "", time.Minute)
	t.Logf("every agent counts %d alive mesh members", n)

	// A workload pod of this test on every node, so each inventory holds
	// more than Shoal's own pods.
	for _, node := range nodes {
		runBusybox(ctx, t, f, "inv-"+node.Name, node.Name, "sleep 3600")
	}

	// Inventory vs the API, per node. Pods churn (other tests), so compare
	// a snapshot of both sides until they agree.
	for _, node := range nodes {
		pod := agents[node.Name]
		var last string
		var count int
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			var inv cri.Inventory
			if err := framework.GetJSON(ctx, framework.AgentURL(pod)+"/inventory", f.EndpointReaderToken(ctx), &inv); err != nil {
				last = err.Error()
				return false, nil
			}
			api, err := f.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
			if err != nil {
				return false, err
			}
			want, have := apiPodsView(api.Items), inventoryView(inv)
			last, count = fmt.Sprintf("API: %v\nagent: %v", want, have), len(want)
			return strings.Join(want, "\n") == strings.Join(have, "\n"), nil
		})
		require.NoError(t, err, "inventory of %s differs from kubectl get pods -o wide:\n%s", node.Name, last)
		t.Logf("%s: agent inventory matches the API (%d pods)", node.Name, count)
	}
}

// apiPodsView is "namespace/name ip running" for pods the kubelet has a
// sandbox for: scheduled, not finished, with a pod IP assigned.
func apiPodsView(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Status.PodIP == "" {
			continue
		}
		ip := p.Status.PodIP
		if p.Spec.HostNetwork {
			ip = "host"
		}
		out = append(out, fmt.Sprintf("%s/%s %s containers=%s", p.Namespace, p.Name, ip, apiContainers(p)))
	}
	sort.Strings(out)
	return out
}

func apiContainers(p corev1.Pod) string {
	var names []string
	for _, c := range p.Status.ContainerStatuses {
		names = append(names, c.Name+":"+strconv.Itoa(int(c.RestartCount)))
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func inventoryView(inv cri.Inventory) []string {
	var out []string
	for _, p := range inv.Pods {
		if !p.Running() {
			continue
		}
		ip := p.IP
		if p.HostNetwork {
			ip = "host"
		}
		var names []string
		for _, c := range p.Containers {
			if c.Type == cri.ContainerTypeInit {
				continue
			}
			names = append(names, c.Name+":"+strconv.Itoa(int(c.RestartCount)))
		}
		sort.Strings(names)
		out = append(out, fmt.Sprintf("%s/%s %s containers=%s", p.Namespace, p.Name, ip, strings.Join(names, ",")))
	}
	sort.Strings(out)
	return out
}

// TestCoordinatorFailover: deleting the leader hands the lease to the
// standby, and every agent is connected to it within 15 s.
func TestCoordinatorFailover(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireShoal(ctx, t, f)
	n := len(nodes)
	_, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, 2*time.Minute)
	require.NoError(t, err, "needs the warm standby")
	require.NoError(t, framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		v, _, err := connectedAgents(ctx, f)
		return err == nil && int(v) == n, nil
	}))
	old, err := f.CoordinatorLeader(ctx)
	require.NoError(t, err)

	start := time.Now()
	require.NoError(t, f.Kube.CoreV1().Pods(framework.ShoalNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}))
	var newLeader string
	err = framework.WaitFor(ctx, 15*time.Second, func(ctx context.Context) (bool, error) {
		v, leader, err := connectedAgents(ctx, f)
		if err != nil || leader == old.Name {
			return false, nil
		}
		newLeader = leader
		return int(v) == n, nil
	})
	took := time.Since(start)
	require.NoError(t, err, "all %d agents should be connected to a new leader within 15s", n)
	t.Logf("leader %s deleted: %s leads with %d agents connected after %s", old.Name, newLeader, n, took.Round(time.Millisecond))

	// Let the Deployment bring the standby back before the next test.
	_, err = f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, 2*time.Minute)
	require.NoError(t, err)
}

// TestMeshMarksCutNodeDeadAndRejoins: a node whose network is cut for 30 s
// is marked dead by the others and goes not Ready; after the restore it
// rejoins the mesh and is Ready again.
func TestMeshMarksCutNodeDeadAndRejoins(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireShoal(ctx, t, f)
	if len(nodes) < 3 {
		t.Skip("needs 3 nodes")
	}
	localCluster(t, f)
	names := nodeNames(nodes)
	// Cut the leader's node: besides the mesh, this proves a coordinator
	// cut off from the apiserver steps down and stands by instead of
	// crash-looping (the suite's restart check would see it), and that the
	// agents find the new leader.
	leader, err := f.CoordinatorLeader(ctx)
	require.NoError(t, err)
	cut := leader.Spec.NodeName
	var others []string
	for _, n := range names {
		if n != cut {
			others = append(others, n)
		}
	}
	waitMeshAlive(ctx, t, f, names, len(names), "", time.Minute)

	start := time.Now()
	require.NoError(t, cluster.CutNode(ctx, cut))
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = cluster.RestoreNode(context.Background(), cut)
		}
	})
	waitMeshAlive(ctx, t, f, others, len(others), cut, 30*time.Second)
	t.Logf("%s marked dead by the others %s after the cut", cut, time.Since(start).Round(time.Millisecond))
	// The node-monitor grace period is 20 s: the node goes not Ready
	// within the cut (if it took longer, the cut lasts until it does).
	err = framework.WaitFor(ctx, nodeTransitionTimeout, func(ctx context.Context) (bool, error) {
		n, err := f.Kube.CoreV1().Nodes().Get(ctx, cut, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return framework.NodeConditionStatus(n, corev1.NodeReady) != corev1.ConditionTrue, nil
	})
	require.NoError(t, err, "%s still Ready after its network was cut", cut)
	t.Logf("%s not Ready %s after the cut", cut, time.Since(start).Round(time.Millisecond))
	if wait := 30*time.Second - time.Since(start); wait > 0 {
		timer := time.NewTimer(wait) // the cut lasts 30 s, as the issue asks
		<-timer.C
	}
	require.NoError(t, cluster.RestoreNode(ctx, cut))
	restored = true
	restoredAt := time.Now()
	waitMeshAlive(ctx, t, f, names, len(names), "", 90*time.Second)
	t.Logf("%s rejoined the mesh %s after the restore", cut, time.Since(restoredAt).Round(time.Millisecond))
	_, err = f.WaitForNodeCondition(ctx, cut, corev1.NodeReady, corev1.ConditionTrue, nodeTransitionTimeout)
	require.NoError(t, err, "%s not Ready again after its network was restored", cut)
	t.Logf("%s Ready %s after the restore", cut, time.Since(restoredAt).Round(time.Millisecond))
	require.NoError(t, framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		v, _, err := connectedAgents(ctx, f)
		return err == nil && int(v) == len(names), nil
	}), "every agent should be connected to the leader again")
}

// TestAgentRestartResumesWork: an agent restarted in the middle of a noop
// item resumes it from its state dir: the steps done before the restart are
// kept (never restarted from zero) and the item was started exactly twice.
func TestAgentRestartResumesWork(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)
	node := cluster.NodeName(1)
	cms := f.Kube.CoreV1().ConfigMaps(framework.ShoalNamespace)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-noop-", Labels: map[string]string{"nodework.shoal.io/test-noop": "true"}},
		Data:       map[string]string{"node": node, "steps": "40", "stepMillis": "250"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cms.Delete(context.Background(), cm.Name, metav1.DeleteOptions{}) })

	annotations := func(ctx context.Context) (map[string]string, error) {
		got, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return got.Annotations, nil
	}
	stepsDone := func(a map[string]string) int {
		v, _ := strconv.Atoi(a["nodework.shoal.io/steps-done"])
		return v
	}
	var before int
	require.NoError(t, framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		a, err := annotations(ctx)
		if err != nil {
			return false, err
		}
		before = stepsDone(a)
		return a["nodework.shoal.io/phase"] == "running" && before >= 8, nil
	}), "noop work should be running on %s", node)

	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)
	old := agents[node]
	require.NoError(t, f.Kube.CoreV1().Pods(framework.ShoalNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}))
	t.Logf("deleted agent %s on %s at step %d of 40", old.Name, node, before)

	lowest := 40
	require.NoError(t, framework.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		a, err := annotations(ctx)
		if err != nil {
			return false, err
		}
		lowest = min(lowest, stepsDone(a))
		return a["nodework.shoal.io/phase"] == "succeeded", nil
	}), "noop work should finish after the agent restart")
	a, err := annotations(ctx)
	require.NoError(t, err)
	require.Equal(t, "40", a["nodework.shoal.io/steps-done"])
	require.Equal(t, "2", a["nodework.shoal.io/starts"], "started once, resumed once")
	require.GreaterOrEqual(t, lowest, before, "progress went backwards after the restart")
	t.Logf("resumed after the restart: starts=%s, steps never below %d", a["nodework.shoal.io/starts"], before)

	_, err = f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.AgentSelector, len(agents), 2*time.Minute)
	require.NoError(t, err)
}
