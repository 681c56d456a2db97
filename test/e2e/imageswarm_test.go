//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criremote "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// swarmRate is the tc rate every node is shaped to in the swarm test: slow
// enough that a node's link, not the machine, bounds a pull.
const swarmRate = "40mbit"

// agentMetric scrapes one agent's metric (summed over the matching series).
func agentMetric(ctx context.Context, t *testing.T, agent corev1.Pod, name string, labels map[string]string) float64 {
	t.Helper()
	m, err := framework.Scrape(ctx, framework.AgentURL(agent))
	require.NoError(t, err)
	v, _ := m.Value(name, labels)
	return v
}

// TestImageSwarmThroughMirror: every node's link is shaped (tc, 40 Mbit/s);
// an ImagePullJob over all nodes warms an image through the agents' registry
// mirror and swarm, and the registry serves about one copy of its layers
// (OpenKruise's daemons would fetch one per node). Then the image is removed
// from one node's runtime, and kubelet's own pull of it for a fresh pod goes
// through that node's agent: the agent serves the runtime the layers (from
// its peers), and the registry serves no further layer bytes.
func TestImageSwarmThroughMirror(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	if len(nodes) < 2 {
		t.Skipf("needs 2 nodes to share an image, the cluster has %d", len(nodes))
	}
	for _, n := range nodes {
		require.NoError(t, cluster.Netem(ctx, n.Name, "", swarmRate))
		t.Cleanup(func() { _ = cluster.Netem(context.WithoutCancel(ctx), n.Name, "", "") })
	}
	reg := framework.StartRegistry(t, framework.RegistryOptions{})
	ref := reg.Push(t, "swarm/app", "v1", 8, 3)
	pushed, _ := reg.Pushed(ref)
	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)

	start := time.Now()
	createPullJob(ctx, t, f, pullJob("swarm", ref, func(j *v1alpha1.ImagePullJob) {
		setPull(&j.Spec.ImagePullJobTemplate, len(nodes), 120, 2)
	}))
	done := waitPullJob(ctx, t, f, "swarm", 3*time.Minute, "completed", isComplete)
	took := time.Since(start)
	require.Equal(t, int32(len(nodes)), done.Status.Succeeded, pullJobState(done))

	byNode := layerBytesTo(t, reg, ref, nodes)
	upstream := layerTotal(t, reg, ref, nodes)
	alpha := float64(upstream) / float64(pushed.Size())
	var fromPeers float64
	for _, n := range nodes {
		fromPeers += agentMetric(ctx, t, agents[n.Name], "shoal_agent_swarm_pieces_total", map[string]string{"source": "peer"})
	}
	t.Logf("warmed %d nodes (%s each) with %.1f MiB of layers in %s; registry layer bytes %d = %.2f copies (by node %v); %0.f pieces came from peers",
		len(nodes), swarmRate, float64(pushed.Size())/(1<<20), took.Round(100*time.Millisecond), upstream, alpha, byNode, fromPeers)
	require.LessOrEqual(t, alpha, 1.5, "the registry served more than about one copy of the image")
	require.Positive(t, fromPeers, "no piece went from one agent to another")

	// Kubelet's own pull, on a node whose runtime lost the image.
	target := nodes[len(nodes)-1]
	removeImage(ctx, t, localCluster(t, f), target.Name, ref)
	agent := agents[target.Name]
	runtimeBytes := func() float64 {
		return agentMetric(ctx, t, agent, "shoal_agent_blob_served_bytes_total", map[string]string{"role": "runtime"})
	}
	servedBefore, upstreamBefore := runtimeBytes(), layerTotal(t, reg, ref, nodes)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-pull"},
		Spec: corev1.PodSpec{
			NodeName:                      target.Name,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			// The test image has no program to run: only the pull counts.
			Containers: []corev1.Container{{Name: "app", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent}},
		},
	}
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, framework.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := f.Kube.CoreV1().Events(f.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=kubelet-pull,reason=Pulled"})
		return err == nil && len(evs.Items) > 0, nil
	}), "kubelet did not pull %s on %s", ref, target.Name)
	served := runtimeBytes() - servedBefore
	upstreamAfter := layerTotal(t, reg, ref, nodes)
	t.Logf("kubelet's pull on %s: the agent served its runtime %.0f bytes (layers %d); the registry served %d more layer bytes",
		target.Name, served, pushed.Size(), upstreamAfter-upstreamBefore)
	require.GreaterOrEqual(t, served, float64(pushed.Size()), "kubelet's pull did not go through the agent")
	require.Zero(t, upstreamAfter-upstreamBefore, "kubelet's pull went to the registry, not to the swarm")
}

// layerTotal is the registry's layer bytes of ref to all nodes.
func layerTotal(t *testing.T, reg *framework.Registry, ref string, nodes []corev1.Node) int64 {
	var n int64
	for _, b := range layerBytesTo(t, reg, ref, nodes) {
		n += b
	}
	return n
}

// nodeImages is node's CRI image service, reached through the node's
// containerd process (the node's /run is its own).
func nodeImages(ctx context.Context, cfg *cluster.Config, node string) (internalapi.ImageManagerService, error) {
	st, err := cluster.NodeStatus(ctx, cfg, node)
	if err != nil {
		return nil, err
	}
	pid := st["containerd"]
	if pid <= 0 {
		return nil, fmt.Errorf("containerd of %s is not running", node)
	}
	return criremote.NewRemoteImageService(ctx, fmt.Sprintf("unix:///proc/%d/root%s", pid, cluster.ContainerdSocket), 10*time.Second, nil, false)
}

// removeImage removes an image from a node's runtime.
func removeImage(ctx context.Context, t *testing.T, cfg *cluster.Config, node, ref string) {
	t.Helper()
	is, err := nodeImages(ctx, cfg, node)
	require.NoError(t, err)
	require.NoError(t, is.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: ref}))
	img, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	require.NoError(t, err)
	require.Nil(t, img.GetImage(), "%s still on %s", ref, node)
}
