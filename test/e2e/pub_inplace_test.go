//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// pubInPlaceCloneSet is a CloneSet of the budget's pods (pubLabel) that
// updates in place with policy, limited by the budget alone
// (maxUnavailable 100%).
func pubInPlaceCloneSet(f *framework.Framework, name string, replicas int32, policy v1beta1.CloneSetPodUpdateStrategyType) *v1beta1.CloneSet {
	cs := testCloneSet(f, name, replicas)
	cs.Spec.Template.Labels[pubLabel] = "true"
	cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = policy
	cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	return cs
}

// TestPodUnavailableBudgetTwoCloneSets ports "PodUnavailableBudget
// selector two cloneSets, strategy.type=in-place, update success image":
// a budget of 20% over two CloneSets of 5 (InPlaceIfPossible) lets 2 of
// the 10 pods go; a failing image takes exactly those 2 and the other 8
// keep the old image; the good image then rolls out to all 10, in place.
func TestPodUnavailableBudgetTwoCloneSets(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	createPub(ctx, t, f, newPub(intstr.FromString("20%")))
	names := []string{"webserver-1", "webserver-2"}
	for _, name := range names {
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx,
			pubInPlaceCloneSet(f, name, 5, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, name := range names {
		waitCloneSet(ctx, t, f, name, "5 pods ready", settled(5, 5))
	}
	waitPub(ctx, t, f, "10 pods", pubCounts{2, 10, 8, 10})
	before := map[string]bool{}
	for _, name := range names {
		for _, p := range cloneSetPods(ctx, t, f, name) {
			before[string(p.UID)] = true
		}
	}

	failing := f.Image("pub-missing:none")
	for _, name := range names {
		updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = failing })
	}
	waitPub(ctx, t, f, "two pods taken by the failing update", pubCounts{0, 8, 8, 10})
	// The budget counts a pod once its in-place update takes it out of
	// service (the readiness gate), a moment before its image changes.
	eightOld := func(ctx context.Context) (bool, error) {
		_, without := pubImageCount(ctx, t, f, pubLabel+"=true", failing)
		return without == 8, nil
	}
	require.NoError(t, framework.WaitFor(ctx, pubTimeout, eightOld), "two pods get the failing image")
	pubHolds(ctx, t, 5*time.Second, "8 pods keep the old image", eightOld)

	good := f.Image("testserver:v2")
	for _, name := range names {
		updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = good })
	}
	for _, name := range names {
		waitCloneSet(ctx, t, f, name, "all 5 pods at the good image", func(cs *v1beta1.CloneSet) bool {
			return settled(5, 5)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
		})
	}
	waitPub(ctx, t, f, "rolled out", pubCounts{2, 10, 8, 10})
	with, without := pubImageCount(ctx, t, f, pubLabel+"=true", good)
	require.Equal(t, 10, with, "pods at the good image")
	require.Zero(t, without)
	for _, name := range names {
		for _, p := range cloneSetPods(ctx, t, f, name) {
			require.True(t, before[string(p.UID)], "pod %s was updated in place", p.Name)
		}
	}
}

// TestPodUnavailableBudgetCloneSetAndSidecarSet ports "PodUnavailableBudget
// selector cloneSet and sidecarSet, strategy.type=in-place, update success
// image": a SidecarSet (maxUnavailable 100%) injects a sidecar into a
// CloneSet of 10 (InPlaceOnly) under a 20% budget; the app image and the
// sidecar image are both updated at once, and both roll out to all 10
// pods, in place, while the budget takes at most 2 pods at a time.
func TestPodUnavailableBudgetCloneSetAndSidecarSet(t *testing.T) {
	t.Parallel()
	s := newSCSTester(t)
	f := s.f
	ctx := t.Context()
	createPub(ctx, t, f, newPub(intstr.FromString("20%")))

	set := s.baseSidecarSet()
	set.Spec.InitContainers = nil
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{pubLabel: "true"}}
	set.Spec.Containers = []v1beta1.SidecarContainer{{Container: corev1.Container{
		Name: set.Spec.Containers[0].Name, Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8081"},
	}}}
	set.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.RollingUpdateSidecarSetStrategyType, MaxUnavailable: ptr.To(intstr.FromString("100%"))}
	set = s.create(ctx, set)

	const name = "webserver"
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx,
		pubInPlaceCloneSet(f, name, 10, v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType), metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, name, "10 pods ready", settled(10, 10))
	pods := cloneSetPods(ctx, t, f, name)
	require.Len(t, pods[0].Spec.Containers, 2, "the sidecar is injected")
	waitPub(ctx, t, f, "10 pods", pubCounts{2, 10, 8, 10})
	before := byUID(pods)

	good := f.Image("testserver:v2")
	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = good })
	set.Spec.Containers[0].Image = good
	s.update(ctx, set)
	waitCloneSet(ctx, t, f, name, "all 10 pods at the new app image", func(cs *v1beta1.CloneSet) bool {
		return settled(10, 10)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
	})
	s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 10, UpdatedPods: 10, UpdatedReadyPods: 10, ReadyPods: 10})
	waitPub(ctx, t, f, "rolled out", pubCounts{2, 10, 8, 10})

	after := cloneSetPods(ctx, t, f, name)
	require.Len(t, after, 10)
	for _, p := range after {
		_, kept := before[p.UID]
		require.True(t, kept, "pod %s was updated in place", p.Name)
		images := map[string]string{}
		for _, c := range p.Spec.Containers {
			images[c.Name] = c.Image
		}
		require.Equal(t, map[string]string{"app": good, set.Spec.Containers[0].Name: good}, images, "pod %s", p.Name)
	}
}
