//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// TestHelmChartInstall installs the Helm chart (deploy/helm/shoal) over the
// running Shoal with `helm upgrade --install --take-ownership`, as a team
// moving from kustomize to Helm would, with the images and flags the
// deployment runs with. Helm adopts every object and waits for the
// rollout; the coordinators and agents keep running (the chart renders the
// same pod templates), and Shoal then warms an image on every node and
// completes a ContainerRecreateRequest.
//
// Serial: it changes the installation everyone uses. The release stays:
// uninstalling it would take Shoal with it.
func TestHelmChartInstall(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireShoal(ctx, t, f)
	root := repoRoot(t)

	coordinator, err := f.Kube.AppsV1().Deployments(framework.ShoalNamespace).Get(ctx, "shoal-coordinator", metav1.GetOptions{})
	require.NoError(t, err)
	agent, err := f.Kube.AppsV1().DaemonSets(framework.ShoalNamespace).Get(ctx, "shoal-agent", metav1.GetOptions{})
	require.NoError(t, err)
	before, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, time.Minute)
	require.NoError(t, err)
	helmUpgrade(ctx, t, f, root, liveValues(coordinator, agent, nil))

	// Adopted: the objects belong to the release now.
	gotCoordinator, err := f.Kube.AppsV1().Deployments(framework.ShoalNamespace).Get(ctx, coordinator.Name, metav1.GetOptions{})
	require.NoError(t, err)
	gotAgent, err := f.Kube.AppsV1().DaemonSets(framework.ShoalNamespace).Get(ctx, agent.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, obj := range []metav1.Object{gotCoordinator, gotAgent} {
		require.Equal(t, "shoal", obj.GetAnnotations()["meta.helm.sh/release-name"], "%s adopted by the release", obj.GetName())
		require.Equal(t, "Helm", obj.GetLabels()["app.kubernetes.io/managed-by"], obj.GetName())
	}
	crd, err := f.Dynamic.Resource(crdResource).Get(ctx, "clonesets.apps.kruise.io", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "keep", crd.GetAnnotations()["helm.sh/resource-policy"], "CRDs outlive the release")
	after, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, time.Minute)
	require.NoError(t, err)
	names := func(pods []corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	require.ElementsMatch(t, names(before), names(after), "the same pod templates: no coordinator restarted")

	// Shoal works under the release: an image warmed on every node, and a
	// container recreated.
	createPullJob(ctx, t, f, pullJob("helm-warm", f.Image("busybox:latest"), nil))
	done := waitPullJob(ctx, t, f, "helm-warm", pullJobTimeout, "completed", isComplete)
	require.EqualValues(t, len(nodes), done.Status.Succeeded, pullJobState(done))
	startCRRPod(ctx, t, f, "web", nil)
	createCRR(ctx, t, f, newCRR("helm-recreate", "web", "app"))
	crr := waitCRR(ctx, t, f, "helm-recreate", crrTimeout, "Completed", isCompleted)
	require.Equal(t, v1alpha1.ContainerRecreateRequestCompleted, crr.Status.Phase)
}

// repoRoot is the module's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	cwd, err := os.Getwd()
	require.NoError(t, err)
	root, err := cluster.FindRoot(cwd)
	require.NoError(t, err)
	return root
}

// liveValues are chart values that render the pod templates the
// deployment runs now: its images and flags, with extra appended to both
// components' flags.
func liveValues(coordinator *appsv1.Deployment, agent *appsv1.DaemonSet, extra []string) map[string]any {
	cc, ac := coordinator.Spec.Template.Spec.Containers[0], agent.Spec.Template.Spec.Containers[0]
	return map[string]any{
		"images":      map[string]any{"coordinator": cc.Image, "agent": ac.Image},
		"coordinator": map[string]any{"extraArgs": append(slices.Clone(cc.Args), extra...)},
		"agent":       map[string]any{"extraArgs": append(slices.Clone(ac.Args), extra...)},
	}
}

// helmUpgrade runs `helm upgrade --install --take-ownership --wait` of the
// chart with values, as release shoal in Shoal's namespace.
func helmUpgrade(ctx context.Context, t *testing.T, f *framework.Framework, root string, values map[string]any) {
	t.Helper()
	b, err := json.Marshal(values)
	require.NoError(t, err)
	valuesFile := filepath.Join(t.TempDir(), "values.json")
	require.NoError(t, os.WriteFile(valuesFile, b, 0o600))
	start := time.Now()
	helm := exec.CommandContext(ctx, "go", "tool", "-modfile="+filepath.Join(root, "hack/tools/helm/go.mod"), "helm",
		"upgrade", "--install", "shoal", filepath.Join(root, "deploy/helm/shoal"), "--namespace", framework.ShoalNamespace,
		"--take-ownership", "--values", valuesFile, "--wait", "--timeout", "4m")
	helm.Dir = root
	out, err := helm.CombinedOutput()
	require.NoError(t, err, "helm upgrade --install:\n%s", out)
	t.Logf("helm upgrade --install took %.1fs:\n%s", time.Since(start).Seconds(), out)
}

// TestHelmUpgradeKeepsWork: `helm upgrade` that rolls every Shoal pod (the
// coordinators and the agent on every node: the chart's flags change)
// while an ImagePullJob pulls a throttled image to every node and a
// ContainerRecreateRequest is in its container's 30 s preStop hook. No
// work is lost or done twice: the job succeeds on every node, and the
// request completes with its container restarted exactly once.
//
// Serial: it restarts every Shoal component.
func TestHelmUpgradeKeepsWork(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	root := repoRoot(t)
	coordinator, err := f.Kube.AppsV1().Deployments(framework.ShoalNamespace).Get(ctx, "shoal-coordinator", metav1.GetOptions{})
	require.NoError(t, err)
	agent, err := f.Kube.AppsV1().DaemonSets(framework.ShoalNamespace).Get(ctx, "shoal-agent", metav1.GetOptions{})
	require.NoError(t, err)
	// The release as it stands (a no-op when TestHelmChartInstall ran).
	helmUpgrade(ctx, t, f, root, liveValues(coordinator, agent, nil))
	coordinator, err = f.Kube.AppsV1().Deployments(framework.ShoalNamespace).Get(ctx, coordinator.Name, metav1.GetOptions{})
	require.NoError(t, err)
	agent, err = f.Kube.AppsV1().DaemonSets(framework.ShoalNamespace).Get(ctx, agent.Name, metav1.GetOptions{})
	require.NoError(t, err)
	agentsBefore, err := f.AgentPods(ctx)
	require.NoError(t, err)
	// An image pulled at 256 KiB/s per download: about half a minute of
	// work on every node.
	reg := framework.StartRegistry(t, framework.RegistryOptions{BytesPerSecond: 256 << 10})
	image := reg.Push(t, "helm/upgrade", "v1", 4, 2)
	createPullJob(ctx, t, f, pullJob("upgrade", image, func(j *v1alpha1.ImagePullJob) {
		setPull(&j.Spec.ImagePullJobTemplate, len(nodes), 300, 3)
	}))
	waitPullJob(ctx, t, f, "upgrade", time.Minute, "pulling", func(j *v1alpha1.ImagePullJob) bool { return j.Status.Active > 0 })

	startCRRPod(ctx, t, f, "web", func(p *corev1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: sleepHook("30s")}
	})
	createCRR(ctx, t, f, newCRR("upgrade", "web", "app"))
	waitCRR(ctx, t, f, "upgrade", 30*time.Second, "app's preStop hook running", func(c *v1alpha1.ContainerRecreateRequest) bool {
		return len(c.Status.ContainerRecreateStates) > 0 && c.Status.ContainerRecreateStates[0].Message == "running the preStop hook"
	})

	// The upgrade: one more flag (the default log verbosity, spelled out)
	// changes both pod templates, so Helm rolls every Shoal pod. It stays:
	// it changes nothing else, and a rollback would roll every pod again.
	inFlight := getPullJob(ctx, t, f, "upgrade")
	require.Nil(t, inFlight.Status.CompletionTime, "the pull must still run when the upgrade starts (a slower registry is needed): %s", pullJobState(inFlight))
	t.Logf("upgrading with the pull at %s and the request in its preStop hook", pullJobState(inFlight))
	upgradeAt := time.Now()
	helmUpgrade(ctx, t, f, root, liveValues(coordinator, agent, []string{"--v=0"}))
	agentsAfter, err := f.AgentPods(ctx)
	require.NoError(t, err)
	for node, a := range agentsAfter {
		require.NotEqual(t, agentsBefore[node].UID, a.UID, "the agent on %s was replaced by the upgrade", node)
	}

	crr := waitCRR(ctx, t, f, "upgrade", 2*crrTimeout, "Completed", isCompleted)
	require.Equal(t, states("app", "Succeeded", true), withoutMessages(crr.Status.ContainerRecreateStates))
	pod := waitRecreated(ctx, t, f, "web", "app")
	require.Equal(t, int32(1), containerStatus(pod, "app").RestartCount, "app stopped exactly once across the upgrade")
	done := waitPullJob(ctx, t, f, "upgrade", pullJobTimeout, "completed", isComplete)
	require.EqualValues(t, len(nodes), done.Status.Succeeded, pullJobState(done))
	require.Zero(t, done.Status.Failed, pullJobState(done))
	t.Logf("the request completed and the image reached %d nodes, %.0fs after the upgrade began",
		len(nodes), time.Since(upgradeAt).Seconds())
}
