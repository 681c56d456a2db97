//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// nodeTransitionTimeout bounds how long a node may take to go NotReady
// (the local cluster's node-monitor grace period is 20s) or Ready again.
const nodeTransitionTimeout = 2 * time.Minute

// localCluster returns the local cluster (test/cluster) the suite runs on.
// Fault injection needs its processes and namespaces, so on any other
// cluster the test is skipped.
func localCluster(t *testing.T, f *framework.Framework) *cluster.Config {
	t.Helper()
	cwd, err := os.Getwd()
	require.NoError(t, err)
	root, err := cluster.FindRoot(cwd)
	require.NoError(t, err)
	nodes, err := f.SchedulableNodes(t.Context())
	require.NoError(t, err)
	cfg, err := cluster.LoadConfig(root, max(len(nodes), 1))
	require.NoError(t, err)
	if kc, _ := filepath.Abs(os.Getenv("KUBECONFIG")); kc != cfg.Kubeconfig() {
		t.Skipf("fault injection needs the local cluster (KUBECONFIG=%s), not %s", cfg.Kubeconfig(), kc)
	}
	return cfg
}

// TestContainerdRestartKeepsPods: killing a node's containerd and starting
// it again brings the node back with its pods, which kept running (their
// shims survive the runtime), and the runtime serves them again (exec).
func TestContainerdRestartKeepsPods(t *testing.T) {
	serial(t)
	f := newFramework(t)
	cfg := localCluster(t, f)
	ctx := t.Context()
	node := cluster.NodeName(1)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor"},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:  "web",
				Image: f.Image("testserver:latest"),
				Args:  []string{"serve", "--port", "8080"},
			}},
		},
	}
	_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	before, err := f.WaitForPodsReady(ctx, f.Namespace, "", 1, podStartTimeout)
	require.NoError(t, err)
	containerID := before[0].Status.ContainerStatuses[0].ContainerID

	_, err = cluster.NodeCommand(ctx, cfg, node, "kill containerd")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if st, err := cluster.NodeStatus(ctx, cfg, node); err == nil && st["containerd"] == 0 {
			_, _ = cluster.NodeCommand(ctx, cfg, node, "start containerd")
		}
	})
	st, err := cluster.NodeStatus(ctx, cfg, node)
	require.NoError(t, err)
	require.Zero(t, st["containerd"], "containerd still running after kill")

	start := time.Now()
	_, err = cluster.NodeCommand(ctx, cfg, node, "start containerd")
	require.NoError(t, err)
	_, err = f.WaitForNodeCondition(ctx, node, corev1.NodeReady, corev1.ConditionTrue, nodeTransitionTimeout)
	require.NoError(t, err)

	var stdout string
	err = framework.WaitFor(ctx, execTimeout, func(ctx context.Context) (bool, error) {
		var err error
		stdout, _, err = f.ExecInPod(ctx, pod.Name, "web", []string{"/testserver", "get", "http://127.0.0.1:8080/healthz"})
		return err == nil, nil
	})
	require.NoError(t, err, "exec into the pod after containerd restarted")
	require.Equal(t, "ok\n", stdout)
	t.Logf("exec served again %.1fs after containerd restarted", time.Since(start).Seconds())

	after, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, framework.IsPodReady(after))
	require.Equal(t, containerID, after.Status.ContainerStatuses[0].ContainerID, "container was recreated")
	require.Zero(t, after.Status.ContainerStatuses[0].RestartCount)
}
