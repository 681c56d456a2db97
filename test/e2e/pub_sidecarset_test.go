//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
)

// TestPodUnavailableBudgetSidecarSet ports OpenKruise's "PodUnavailableBudget
// selector SidecarSet, inject sidecar container, update failed sidecar
// image, block": a SidecarSet updating the sidecars of 5 pods with
// maxUnavailable 100% takes only the one pod the budget allows when the
// new image fails, and all of them once the image is fixed.
func TestPodUnavailableBudgetSidecarSet(t *testing.T) {
	t.Parallel()
	s := newSCSTester(t)
	f := s.f
	ctx := t.Context()
	createPub(ctx, t, f, newPub(intstr.FromInt32(1)))

	set := s.baseSidecarSet()
	set.Spec.InitContainers = nil
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{pubLabel: "true"}}
	// The base set's suffixed name: SidecarSets are cluster-scoped and
	// admission refuses two that inject the same container name into pods
	// both could select (another test's, or an unscoped seed example's).
	set.Spec.Containers = []v1beta1.SidecarContainer{{Container: corev1.Container{
		Name: set.Spec.Containers[0].Name, Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8081"},
	}}}
	set.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.RollingUpdateSidecarSetStrategyType, MaxUnavailable: new(intstr.FromString("100%"))}
	set = s.create(ctx, set)

	createPubDeployment(ctx, t, f, pubDeployment(f, "webserver", 5))
	pods := pubLivePods(ctx, t, f, "app=webserver")
	require.Len(t, pods[0].Spec.Containers, 2, "the sidecar is injected")
	waitPub(ctx, t, f, "5 pods", pubCounts{1, 5, 4, 5})

	set.Spec.Containers[0].Image = f.Image("pub-missing:none")
	s.update(ctx, set)
	s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 5, UpdatedPods: 1, UpdatedReadyPods: 0, ReadyPods: 4})
	pub := waitPub(ctx, t, f, "the budget is spent on the one failing pod", pubCounts{0, 4, 4, 5})
	waitObject(ctx, t, f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace), pubTimeout, pub.Name, "one unavailable pod recorded",
		func(p *policyv1alpha1.PodUnavailableBudget) bool { return len(p.Status.UnavailablePods) == 1 },
		func(p *policyv1alpha1.PodUnavailableBudget) any { return p.Status })

	set.Spec.Containers[0].Image = f.Image("testserver:v2")
	s.update(ctx, set)
	s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 5, UpdatedPods: 5, UpdatedReadyPods: 5, ReadyPods: 5})
	waitPub(ctx, t, f, "all pods updated", pubCounts{1, 5, 4, 5})
}
