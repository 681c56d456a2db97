//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/test/e2e/framework"
)

// buildKruisePlugin builds kubectl-kruise into a temporary directory (the
// build cache is warm after the suite's build stage) and returns its path.
func buildKruisePlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-kruise")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../../cmd/kubectl-kruise")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build kubectl-kruise: %s", out)
	return bin
}

// TestKubectlKruiseMigrateStatefulSet: `kubectl kruise migrate
// statefulset/NAME` replaces an apps/v1 StatefulSet by an Advanced one of
// the same name that adopts its pods and keeps their PVCs.
func TestKubectlKruiseMigrateStatefulSet(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name = "migrate"
	plugin := buildKruisePlugin(t)

	adv := newStatefulSet(f, name, 2)
	withDataClaim(adv, "data", "/data")
	upstream := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), Selector: adv.Spec.Selector, ServiceName: name, Template: adv.Spec.Template,
			VolumeClaimTemplates: adv.Spec.VolumeClaimTemplates,
		},
	}
	_, err := f.Kube.AppsV1().StatefulSets(f.Namespace).Create(ctx, upstream, metav1.CreateOptions{})
	require.NoError(t, err)
	before := waitSetPods(ctx, t, f, name, "2 running and ready under the apps/v1 StatefulSet", runningReady(2, 2))
	claims := map[string]string{}
	for _, o := range []string{"0", "1"} {
		pvc, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).Get(ctx, "data-"+name+"-"+o, metav1.GetOptions{})
		require.NoError(t, err)
		claims[pvc.Name] = string(pvc.UID)
	}

	cmd := exec.CommandContext(ctx, plugin, "migrate", "statefulset/"+name, "-n", f.Namespace)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl kruise migrate: %s", out)
	t.Logf("kubectl kruise migrate: %s", out)

	// The orphaning delete ends when the garbage collector has released
	// the pods (which migrate waits for) and then drops its finalizer.
	err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := f.Kube.AppsV1().StatefulSets(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the apps/v1 StatefulSet is gone")
	s := waitStatefulSet(ctx, t, f, name, "2 ready at its own revision", settledSet(2))
	pods := waitSetPods(ctx, t, f, name, "2 running and ready, controlled by the Advanced StatefulSet", func(pods []corev1.Pod) bool {
		if !runningReady(2, 2)(pods) {
			return false
		}
		for _, p := range pods {
			ref := metav1.GetControllerOf(&p)
			if ref == nil || ref.UID != s.UID || revisionOf(&p) != s.Status.UpdateRevision {
				return false
			}
		}
		return true
	})
	require.Equal(t, []string{before[0].Name, before[1].Name}, []string{pods[0].Name, pods[1].Name}, "the same identities")
	for n, uid := range claims {
		pvc, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, uid, string(pvc.UID), "PVC %s kept", n)
	}
}
