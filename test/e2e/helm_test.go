//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	cwd, err := os.Getwd()
	require.NoError(t, err)
	root, err := cluster.FindRoot(cwd)
	require.NoError(t, err)

	coordinator, err := f.Kube.AppsV1().Deployments(framework.ShoalNamespace).Get(ctx, "shoal-coordinator", metav1.GetOptions{})
	require.NoError(t, err)
	agent, err := f.Kube.AppsV1().DaemonSets(framework.ShoalNamespace).Get(ctx, "shoal-agent", metav1.GetOptions{})
	require.NoError(t, err)
	cc, ac := coordinator.Spec.Template.Spec.Containers[0], agent.Spec.Template.Spec.Containers[0]
	values, err := json.Marshal(map[string]any{
		"images":      map[string]any{"coordinator": cc.Image, "agent": ac.Image},
		"coordinator": map[string]any{"extraArgs": cc.Args},
		"agent":       map[string]any{"extraArgs": ac.Args},
	})
	require.NoError(t, err)
	valuesFile := filepath.Join(t.TempDir(), "values.json")
	require.NoError(t, os.WriteFile(valuesFile, values, 0o600))
	before, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, 2, time.Minute)
	require.NoError(t, err)

	start := time.Now()
	helm := exec.CommandContext(ctx, "go", "tool", "-modfile="+filepath.Join(root, "hack/tools/helm/go.mod"), "helm",
		"upgrade", "--install", "shoal", filepath.Join(root, "deploy/helm/shoal"), "--namespace", framework.ShoalNamespace,
		"--take-ownership", "--values", valuesFile, "--wait", "--timeout", "3m")
	helm.Dir = root
	out, err := helm.CombinedOutput()
	require.NoError(t, err, "helm upgrade --install:\n%s", out)
	t.Logf("helm upgrade --install took %.1fs:\n%s", time.Since(start).Seconds(), out)

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
