//go:build e2e

package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/shoal-io/shoal/test/cluster"
)

// TestDownLeavesNothing brings a cluster up, runs pods on every node, takes
// it down, and then checks the machine with its own eyes (not through
// cluster.Leftovers): no process, mount, network namespace, link, cgroup or
// state directory of the cluster remains. It needs root and the
// shoal-cluster binary (make builds it).
//
// By default it runs when no cluster is up and brings up one of its own.
// With SHOAL_TEARDOWN_RUNNING_CLUSTER=1 it adopts the running cluster
// instead and takes that one down: hack/e2e.sh fresh does so after the e2e
// suite, so a CI run pays for one cluster bring-up, not two.
func TestDownLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the local cluster uses namespaces, mounts and cgroups")
	}
	cwd, err := os.Getwd()
	require.NoError(t, err)
	root, err := cluster.FindRoot(cwd)
	require.NoError(t, err)
	self := filepath.Join(root, ".cache", "bin", "shoal-cluster")
	if _, err := os.Stat(self); err != nil {
		t.Skipf("%s is missing: run make cluster-up once", self)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	cfg, err := cluster.LoadConfig(root, 2)
	require.NoError(t, err)
	if os.Getenv("SHOAL_TEARDOWN_RUNNING_CLUSTER") == "1" {
		nodes, err := os.ReadDir(filepath.Join(cfg.StateDir(), "nodes"))
		require.NoError(t, err, "SHOAL_TEARDOWN_RUNNING_CLUSTER=1 but no cluster state")
		cfg, err = cluster.LoadConfig(root, len(nodes))
		require.NoError(t, err)
		require.NoError(t, cluster.Healthy(ctx, cfg), "SHOAL_TEARDOWN_RUNNING_CLUSTER=1 but the cluster is not healthy")
		t.Logf("adopting the running %d-node cluster", len(nodes))
	} else {
		if cluster.Healthy(t.Context(), cfg) == nil {
			t.Skip("a cluster is running; this test takes one up and down itself (or set SHOAL_TEARDOWN_RUNNING_CLUSTER=1)")
		}
		require.NoError(t, cluster.Up(ctx, cfg, self, testWriter{t}))
	}
	t.Cleanup(func() { _ = cluster.Down(context.Background(), cfg, testWriter{t}) })
	runPodsOnEveryNode(ctx, t, cfg)

	require.NoError(t, cluster.Down(ctx, cfg, testWriter{t}))

	netns, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	require.NotContains(t, string(netns), cluster.NodePrefix, "network namespaces left")

	links, err := exec.Command("ip", "-o", "link", "show").Output()
	require.NoError(t, err)
	for _, l := range []string{cluster.BridgeName + ":", "shoal-w1@", "shoal-w2@", "cni0"} {
		require.NotContains(t, string(links), l, "links left")
	}

	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	for _, m := range []string{cfg.StateDir(), "netns/" + cluster.NodePrefix} {
		require.NotContains(t, string(mountinfo), m, "mounts left")
	}

	cgroups, err := filepath.Glob("/sys/fs/cgroup/*/" + cluster.NodePrefix + "*")
	require.NoError(t, err)
	v2, err := filepath.Glob("/sys/fs/cgroup/" + cluster.NodePrefix + "*")
	require.NoError(t, err)
	require.Empty(t, append(cgroups, v2...), "cgroups left")

	require.Empty(t, processesMentioning(t, cfg.StateDir()), "processes left")
	for _, comm := range []string{"containerd-shim", "containerd-shim-runc-v2"} {
		require.Empty(t, processesNamed(t, comm, cfg), "container shims left")
	}

	_, err = os.Stat(cfg.StateDir())
	require.True(t, os.IsNotExist(err), "state dir left: %v", err)
}

// runPodsOnEveryNode runs a DaemonSet, so that teardown has containers,
// shims, pod network namespaces and volume mounts to clean up everywhere.
func runPodsOnEveryNode(ctx context.Context, t *testing.T, cfg *cluster.Config) {
	client, err := cluster.Client(cfg)
	require.NoError(t, err)
	labels := map[string]string{"app": "teardown-check"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "teardown-check", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: cluster.Registry() + "/testserver:latest",
					Args:  []string{"serve"},
				}}},
			},
		},
	}
	_, err = client.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().DaemonSets("default").Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.DesiredNumberScheduled == int32(cfg.Nodes) && got.Status.NumberReady == int32(cfg.Nodes), nil
	})
	require.NoError(t, err, "DaemonSet not ready on every node")
}

// processesMentioning lists live processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	var found []string
	forEachProcess(t, func(pid, comm, cmdline string) {
		if strings.Contains(cmdline, s) {
			found = append(found, pid+" "+cmdline)
		}
	})
	return found
}

// processesNamed lists live processes named comm whose executable or
// working files belong to this cluster (shims of other containerds on the
// machine are not ours).
func processesNamed(t *testing.T, comm string, cfg *cluster.Config) []string {
	t.Helper()
	var found []string
	forEachProcess(t, func(pid, c, cmdline string) {
		if c == comm && strings.Contains(cmdline, "k8s.io") {
			if cg, err := os.ReadFile("/proc/" + pid + "/cgroup"); err == nil && strings.Contains(string(cg), cluster.NodePrefix) {
				found = append(found, pid+" "+cmdline)
			}
		}
	})
	return found
}

func forEachProcess(t *testing.T, fn func(pid, comm, cmdline string)) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat[strings.LastIndexByte(string(stat), ')'):]), ") Z") {
			continue // gone, or a zombie waiting for init
		}
		comm, _ := os.ReadFile("/proc/" + pid + "/comm")
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		fn(pid, strings.TrimSpace(string(comm)), strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
