//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The PodUnavailableBudget tests port OpenKruise's "podUnavailableBudget
// functionality" cases (test/e2e/policy/v1alpha1/podunavailablebudget.go)
// that keep to one namespace, with its assertions on the budget's status
// counts, on smaller workloads (2 to 5 pods), plus the 60% arithmetic
// example of OpenKruise v0.10's release notes. Evictions go to the
// pods/eviction subresource of the pods directly: no node is cordoned or
// drained. Bounds are 2 minutes per step, and every wait polls.

const (
	// pubTimeout bounds one PodUnavailableBudget step.
	pubTimeout = 2 * time.Minute
	// pubName is every test's budget.
	pubName = "webserver-pub"
	// pubLabel marks the pods a selector budget covers, as OpenKruise's
	// tests do.
	pubLabel = "pub-controller"
)

// newPub is a budget of the test namespace covering the pods labelled
// pub-controller=true, at most maxUnavailable of them unavailable.
func newPub(maxUnavailable intstr.IntOrString) *policyv1alpha1.PodUnavailableBudget {
	return &policyv1alpha1.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: pubName},
		Spec: policyv1alpha1.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{pubLabel: "true"}},
			MaxUnavailable: &maxUnavailable,
		},
	}
}

// createPub creates the budget in the test namespace.
func createPub(ctx context.Context, t *testing.T, f *framework.Framework, pub *policyv1alpha1.PodUnavailableBudget) {
	t.Helper()
	_, err := f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace).Create(ctx, pub, metav1.CreateOptions{})
	require.NoError(t, err)
}

// pubCounts are the status counts OpenKruise's tests compare.
type pubCounts struct{ allowed, current, desired, total int32 }

func pubCountsOf(st policyv1alpha1.PodUnavailableBudgetStatus) pubCounts {
	return pubCounts{st.UnavailableAllowed, st.CurrentAvailable, st.DesiredAvailable, st.TotalReplicas}
}

// waitPub waits until the budget's status is of its generation and has
// the counts want (unavailableAllowed, currentAvailable, desiredAvailable,
// totalReplicas).
func waitPub(ctx context.Context, t *testing.T, f *framework.Framework, what string, want pubCounts) *policyv1alpha1.PodUnavailableBudget {
	t.Helper()
	return waitObject(ctx, t, f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace), pubTimeout, pubName,
		fmt.Sprintf("%s: %+v", what, want),
		func(p *policyv1alpha1.PodUnavailableBudget) bool {
			return p.Status.ObservedGeneration == p.Generation && pubCountsOf(p.Status) == want
		},
		func(p *policyv1alpha1.PodUnavailableBudget) any { return p.Status })
}

// pubDeployment is a testserverDeployment whose pods carry
// pub-controller=true, rolled out as OpenKruise's tests roll theirs
// (maxUnavailable 50%, maxSurge 0).
func pubDeployment(f *framework.Framework, name string, replicas int32) *appsv1.Deployment {
	d := testserverDeployment(f, name, replicas)
	d.Spec.Template.Labels[pubLabel] = "true"
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptr.To(intstr.FromString("50%")), MaxSurge: ptr.To(intstr.FromInt32(0)),
	}}
	return d
}

// createPubDeployment creates d and waits until it is available.
func createPubDeployment(ctx context.Context, t *testing.T, f *framework.Framework, d *appsv1.Deployment) {
	t.Helper()
	_, err := f.Kube.AppsV1().Deployments(f.Namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.WaitForDeploymentAvailable(ctx, f.Namespace, d.Name, pubTimeout)
	require.NoError(t, err)
}

// updatePubDeployment changes a Deployment, retrying on a conflict.
func updatePubDeployment(ctx context.Context, t *testing.T, f *framework.Framework, name string, change func(*appsv1.Deployment)) {
	t.Helper()
	updateObject(ctx, t, f.Kube.AppsV1().Deployments(f.Namespace), name, change)
}

// pubLivePods lists the pods of the test namespace matching selector that
// are not being deleted.
func pubLivePods(ctx context.Context, t *testing.T, f *framework.Framework, selector string) []corev1.Pod {
	t.Helper()
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitPubPodsGone waits until no pod matching selector is left.
func waitPubPodsGone(ctx context.Context, t *testing.T, f *framework.Framework, selector string) {
	t.Helper()
	err := framework.WaitFor(ctx, pubTimeout, func(ctx context.Context) (bool, error) {
		list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == 0, err
	})
	require.NoError(t, err, "pods %q gone", selector)
}

// pubEvict asks the pods/eviction subresource to evict pod, as kubectl drain
// does.
func pubEvict(ctx context.Context, f *framework.Framework, pod string, dryRun bool) error {
	e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: f.Namespace}}
	if dryRun {
		e.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return f.Kube.CoreV1().Pods(f.Namespace).EvictV1(ctx, e)
}

// requirePubRefused checks that err is the budget's refusal, naming it and
// its numbers.
func requirePubRefused(t *testing.T, f *framework.Framework, err error, parts ...string) {
	t.Helper()
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprintf("PodUnavailableBudget %s/%s does not allow", f.Namespace, pubName))
	for _, p := range parts {
		require.Contains(t, err.Error(), p)
	}
}

// pubHolds checks cond every second for d: it must hold every time.
func pubHolds(ctx context.Context, t *testing.T, d time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	end := time.Now().Add(d)
	err := framework.WaitFor(ctx, d+30*time.Second, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("%s stopped holding", what)
		}
		return time.Now().After(end), nil
	})
	require.NoError(t, err, what)
}

// pubImageCount counts the live pods matching selector whose first
// container runs image.
func pubImageCount(ctx context.Context, t *testing.T, f *framework.Framework, selector, image string) (with, without int) {
	t.Helper()
	for _, p := range pubLivePods(ctx, t, f, selector) {
		if p.Spec.Containers[0].Image == image {
			with++
		} else {
			without++
		}
	}
	return with, without
}

// TestPodUnavailableBudgetSelectorNoMatchedPods ports "PodUnavailableBudget
// selector no matched pods": a budget whose selector matches none of the
// namespace's pods reports all zeros.
func TestPodUnavailableBudgetSelectorNoMatchedPods(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	d := pubDeployment(f, "webserver", 1)
	d.Spec.Template.Labels[pubLabel] = "false"
	createPubDeployment(ctx, t, f, d)
	createPub(ctx, t, f, newPub(intstr.FromInt32(1)))
	waitPub(ctx, t, f, "no pod matched", pubCounts{0, 0, 0, 0})
}

// TestPodUnavailableBudgetEvictionAndDeleteWorkload ports
// "PodUnavailableBudget selector pods and delete deployment ignore": with
// maxUnavailable 0 the only pod cannot be evicted (429, as a
// PodDisruptionBudget refuses, so kubectl drain waits) nor deleted, a dry
// run neither; annotated pub.kruise.io/no-protect=true it can; and
// deleting its Deployment is not held up: every pod goes and the counts
// drop to zero.
func TestPodUnavailableBudgetEvictionAndDeleteWorkload(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	createPub(ctx, t, f, newPub(intstr.FromInt32(0)))
	createPubDeployment(ctx, t, f, pubDeployment(f, "webserver", 1))
	waitPub(ctx, t, f, "one pod, none may go", pubCounts{0, 1, 1, 1})

	pods := pubLivePods(ctx, t, f, "app=webserver")
	require.Len(t, pods, 1)
	name := pods[0].Name
	err := pubEvict(ctx, f, name, false)
	requirePubRefused(t, f, err, "evicting pod "+name, "unavailableAllowed is 0", "currentAvailable 1, desiredAvailable 1")
	require.True(t, apierrors.IsTooManyRequests(err), "an eviction is refused with 429: %v", err)
	err = pubEvict(ctx, f, name, true)
	requirePubRefused(t, f, err, "evicting")
	err = f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	requirePubRefused(t, f, err, "deleting pod "+name)
	require.True(t, apierrors.IsForbidden(err), "a delete is refused with 403: %v", err)

	// The pod opts out.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, wellknown.AnnotationPubNoProtect)
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	err = framework.WaitFor(ctx, pubTimeout, func(ctx context.Context) (bool, error) {
		return pubEvict(ctx, f, name, false) == nil, nil
	})
	require.NoError(t, err, "the no-protect pod is evicted")
	waitPub(ctx, t, f, "its replacement is ready", pubCounts{0, 1, 1, 1})

	require.NoError(t, f.Kube.AppsV1().Deployments(f.Namespace).Delete(ctx, "webserver", metav1.DeleteOptions{}))
	waitPub(ctx, t, f, "the Deployment is gone", pubCounts{0, 0, 0, 0})
	waitPubPodsGone(ctx, t, f, "app=webserver")
}

// TestPodUnavailableBudgetScaleDownDeployment ports "PodUnavailableBudget
// selector pods and scale down deployment ignore": the budget follows the
// Deployment's replicas, so scaling it to 0 is not held up.
func TestPodUnavailableBudgetScaleDownDeployment(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	createPub(ctx, t, f, newPub(intstr.FromInt32(1)))
	createPubDeployment(ctx, t, f, pubDeployment(f, "webserver", 3))
	waitPub(ctx, t, f, "3 pods", pubCounts{1, 3, 2, 3})

	updatePubDeployment(ctx, t, f, "webserver", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) })
	waitObject(ctx, t, f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace), pubTimeout, pubName, "total and desired 0",
		func(p *policyv1alpha1.PodUnavailableBudget) bool {
			return p.Status.DesiredAvailable == 0 && p.Status.TotalReplicas == 0
		},
		func(p *policyv1alpha1.PodUnavailableBudget) any { return p.Status })
	waitPubPodsGone(ctx, t, f, "app=webserver")
	waitPub(ctx, t, f, "scaled to 0", pubCounts{0, 0, 0, 0})
}

// TestPodUnavailableBudgetTargetDeployment ports "PodUnavailableBudget
// targetReference pods, update failed image and block": a budget
// targeting a Deployment of 2 counts the rollout to a failing image (one
// pod taken, the other kept) and the rollout of a good image; an
// unavailable-pod.kruise.io/ label spends the budget; a further label or
// pod image update is then refused until the budget's
// kruise.io/pub-protect-operations leaves UPDATE out; the label's removal
// gives the budget back.
func TestPodUnavailableBudgetTargetDeployment(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	pub := newPub(intstr.FromInt32(1))
	pub.Spec.Selector = nil
	pub.Spec.TargetReference = &policyv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "webserver"}
	createPub(ctx, t, f, pub)
	createPubDeployment(ctx, t, f, pubDeployment(f, "webserver", 2))
	waitPub(ctx, t, f, "2 pods", pubCounts{1, 2, 1, 2})

	failing := f.Image("pub-missing:none")
	updatePubDeployment(ctx, t, f, "webserver", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = failing })
	waitPub(ctx, t, f, "one pod taken by the failing rollout", pubCounts{0, 1, 1, 2})
	pubHolds(ctx, t, 10*time.Second, "one pod keeps the old image", func(ctx context.Context) (bool, error) {
		_, without := pubImageCount(ctx, t, f, "app=webserver", failing)
		return without == 1, nil
	})

	good := f.Image("testserver:v2")
	updatePubDeployment(ctx, t, f, "webserver", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = good })
	_, err := f.WaitForDeploymentAvailable(ctx, f.Namespace, "webserver", pubTimeout)
	require.NoError(t, err)
	waitPub(ctx, t, f, "rolled out", pubCounts{1, 2, 1, 2})
	pods := pubLivePods(ctx, t, f, "app=webserver")
	require.Len(t, pods, 2)
	for _, p := range pods {
		require.Equal(t, good, p.Spec.Containers[0].Image)
	}

	// An unavailable-pod label takes a pod out of the count, and spends
	// the budget.
	label := wellknown.LabelUnavailablePodPrefix + "data"
	addLabel := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, label))
	podsAPI := f.Kube.CoreV1().Pods(f.Namespace)
	_, err = podsAPI.Patch(ctx, pods[0].Name, types.MergePatchType, addLabel, metav1.PatchOptions{})
	require.NoError(t, err)
	waitPub(ctx, t, f, "one pod labelled unavailable", pubCounts{0, 1, 1, 2})

	// setImage updates the pod's image, again on a conflict (the kubelet
	// writes the pod's status meanwhile); a refusal comes back at once.
	setImage := func(name, image string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := podsAPI.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Spec.Containers[0].Image = image
			_, err = podsAPI.Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
	}
	// The labelled pod counts for nothing: its update is free.
	require.NoError(t, setImage(pods[0].Name, f.Image("testserver:latest")))
	// The other one may not become unavailable.
	_, err = podsAPI.Patch(ctx, pods[1].Name, types.MergePatchType, addLabel, metav1.PatchOptions{})
	requirePubRefused(t, f, err, "updating pod "+pods[1].Name)
	requirePubRefused(t, f, setImage(pods[1].Name, f.Image("testserver:latest")), "updating pod "+pods[1].Name, "unavailableAllowed is 0")

	// Guarding deletes only, the budget lets the update through.
	annotate := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, wellknown.AnnotationPubProtectOperations, wellknown.PubOperationDelete))
	_, err = f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace).Patch(ctx, pubName, types.MergePatchType, annotate, metav1.PatchOptions{})
	require.NoError(t, err)
	err = framework.WaitFor(ctx, pubTimeout, func(ctx context.Context) (bool, error) {
		return setImage(pods[1].Name, f.Image("testserver:latest")) == nil, nil
	})
	require.NoError(t, err, "an update is let through once UPDATE is not guarded")
	for _, p := range pubLivePods(ctx, t, f, "app=webserver") {
		require.Equal(t, f.Image("testserver:latest"), p.Spec.Containers[0].Image)
	}
	waitPub(ctx, t, f, "both updated, one labelled", pubCounts{0, 1, 1, 2})

	removeLabel := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, label))
	_, err = podsAPI.Patch(ctx, pods[0].Name, types.MergePatchType, removeLabel, metav1.PatchOptions{})
	require.NoError(t, err)
	waitPub(ctx, t, f, "the label removed", pubCounts{1, 2, 1, 2})
}

// TestPodUnavailableBudgetTwoDeployments ports "PodUnavailableBudget
// selector two deployments, deployment.strategy.maxUnavailable=25% and
// maxSurge=25%, pub.spec.maxUnavailable=25%, and update success image"
// with two pods per Deployment: both roll out to a new image through the
// budget, which counts their replicas together; scaling one to 0 and
// deleting the other bring it to zero.
func TestPodUnavailableBudgetTwoDeployments(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	createPub(ctx, t, f, newPub(intstr.FromString("25%")))
	for _, name := range []string{"web-1", "web-2"} {
		d := pubDeployment(f, name, 2)
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%")),
		}
		createPubDeployment(ctx, t, f, d)
	}
	// 25% of 4 rounds up to 1.
	waitPub(ctx, t, f, "4 pods", pubCounts{1, 4, 3, 4})

	good := f.Image("testserver:v2")
	for _, name := range []string{"web-1", "web-2"} {
		updatePubDeployment(ctx, t, f, name, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = good })
	}
	for _, name := range []string{"web-1", "web-2"} {
		_, err := f.WaitForDeploymentAvailable(ctx, f.Namespace, name, pubTimeout)
		require.NoError(t, err)
	}
	for _, p := range pubLivePods(ctx, t, f, pubLabel+"=true") {
		require.Equal(t, good, p.Spec.Containers[0].Image, "pod %s", p.Name)
	}
	waitPub(ctx, t, f, "both rolled out", pubCounts{1, 4, 3, 4})

	updatePubDeployment(ctx, t, f, "web-1", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) })
	_, err := f.WaitForDeploymentAvailable(ctx, f.Namespace, "web-1", pubTimeout)
	require.NoError(t, err)
	// 25% of 2 rounds up to 1.
	waitPub(ctx, t, f, "web-1 scaled to 0", pubCounts{1, 2, 1, 2})

	require.NoError(t, f.Kube.AppsV1().Deployments(f.Namespace).Delete(ctx, "web-2", metav1.DeleteOptions{}))
	waitPub(ctx, t, f, "web-2 deleted", pubCounts{0, 0, 0, 0})
	waitPubPodsGone(ctx, t, f, pubLabel+"=true")
}

// TestPodUnavailableBudgetCloneSet ports "PodUnavailableBudget selector
// cloneSet, strategy.type=recreate, update failed image and block" and
// "... strategy.type=in-place, update failed image and block": a CloneSet
// of 2 with maxUnavailable 100% updating to a failing image takes one pod
// only, the budget's (a recreated pod, or an in-place update that the
// budget holds at the status write that would take the pod out of
// service), and then rolls out a good image to both pods.
func TestPodUnavailableBudgetCloneSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		policy  v1beta1.CloneSetPodUpdateStrategyType
		inPlace bool
	}{
		{"recreate", v1beta1.RecreateCloneSetPodUpdateStrategyType, false},
		{"in-place", v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFramework(t)
			ctx := t.Context()
			createPub(ctx, t, f, newPub(intstr.FromInt32(1)))
			cs := testCloneSet(f, "webserver", 2)
			cs.Spec.Template.Labels[pubLabel] = "true"
			cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = tc.policy
			cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("100%"))
			_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
			require.NoError(t, err)
			waitCloneSet(ctx, t, f, "webserver", "2 pods ready", settled(2, 2))
			waitPub(ctx, t, f, "2 pods", pubCounts{1, 2, 1, 2})
			before := byUID(cloneSetPods(ctx, t, f, "webserver"))

			failing := f.Image("pub-missing:none")
			updateCloneSet(ctx, t, f, "webserver", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = failing })
			waitPub(ctx, t, f, "one pod taken by the failing update", pubCounts{0, 1, 1, 2})
			pubHolds(ctx, t, 10*time.Second, "one pod keeps the old image", func(ctx context.Context) (bool, error) {
				_, without := pubImageCount(ctx, t, f, "app=webserver", failing)
				return without == 1, nil
			})

			good := f.Image("testserver:v2")
			updateCloneSet(ctx, t, f, "webserver", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = good })
			waitCloneSet(ctx, t, f, "webserver", "both pods at the good image", func(cs *v1beta1.CloneSet) bool {
				return settled(2, 2)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
			})
			waitPub(ctx, t, f, "rolled out", pubCounts{1, 2, 1, 2})
			after := cloneSetPods(ctx, t, f, "webserver")
			require.Len(t, after, 2)
			for _, p := range after {
				require.Equal(t, good, p.Spec.Containers[0].Image)
				if tc.inPlace {
					_, kept := before[p.UID]
					require.True(t, kept, "pod %s was updated in place", p.Name)
				}
			}
		})
	}
}

// TestPodUnavailableBudgetSeedPercentage checks the arithmetic of the
// example in OpenKruise v0.10's release notes: a budget targeting a
// CloneSet of 5 with maxUnavailable 60% allows 5 * 60% = 3 pods to go
// (desiredAvailable 2), and so does minAvailable 40%. Three disruptions
// (an eviction and two deletes; a dry run spends nothing) go through, the
// fourth is refused with the budget's numbers, and the budget recovers
// once the CloneSet has replaced them.
func TestPodUnavailableBudgetSeedPercentage(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, testCloneSet(f, "web-server", 5), metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, "web-server", "5 pods ready", settled(5, 5))
	pub := newPub(intstr.FromString("60%"))
	pub.Spec.Selector = nil
	pub.Spec.TargetReference = &policyv1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: "web-server"}
	createPub(ctx, t, f, pub)
	waitPub(ctx, t, f, "maxUnavailable 60% of 5", pubCounts{3, 5, 2, 5})

	pubs := f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(f.Namespace)
	updateObject(ctx, t, pubs, pubName, func(p *policyv1alpha1.PodUnavailableBudget) {
		p.Spec.MaxUnavailable, p.Spec.MinAvailable = nil, ptr.To(intstr.FromString("40%"))
	})
	got := waitPub(ctx, t, f, "minAvailable 40% of 5", pubCounts{3, 5, 2, 5})
	require.EqualValues(t, 2, got.Generation)

	pods := cloneSetPods(ctx, t, f, "web-server")
	require.Len(t, pods, 5)
	podsAPI := f.Kube.CoreV1().Pods(f.Namespace)
	require.NoError(t, podsAPI.Delete(ctx, pods[0].Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}))
	got, err = pubs.Get(ctx, pubName, metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 3, got.Status.UnavailableAllowed, "a dry run records nothing")
	require.Empty(t, got.Status.DisruptedPods)

	require.NoError(t, pubEvict(ctx, f, pods[0].Name, false))
	require.NoError(t, podsAPI.Delete(ctx, pods[1].Name, metav1.DeleteOptions{}))
	require.NoError(t, podsAPI.Delete(ctx, pods[2].Name, metav1.DeleteOptions{}))
	err = podsAPI.Delete(ctx, pods[3].Name, metav1.DeleteOptions{})
	requirePubRefused(t, f, err, "deleting pod "+pods[3].Name, "unavailableAllowed is 0", "desiredAvailable 2", "totalReplicas 5")
	err = pubEvict(ctx, f, pods[4].Name, false)
	requirePubRefused(t, f, err, "evicting pod "+pods[4].Name)
	require.True(t, apierrors.IsTooManyRequests(err), "%v", err)
	got, err = pubs.Get(ctx, pubName, metav1.GetOptions{})
	require.NoError(t, err)
	// The records go as the controller sees the pods go; the budget stays
	// spent until their replacements are ready.
	require.Zero(t, got.Status.UnavailableAllowed, "%+v", got.Status)

	waitCloneSet(ctx, t, f, "web-server", "the pods replaced", settled(5, 5))
	got = waitPub(ctx, t, f, "recovered", pubCounts{3, 5, 2, 5})
	require.Empty(t, got.Status.DisruptedPods)
	require.Empty(t, got.Status.UnavailablePods)
}
