//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// cloneSetTimeout bounds one CloneSet step (pods created and ready).
const cloneSetTimeout = 2 * time.Minute

// testCloneSet is a CloneSet of the testserver with an HTTP readiness probe,
// recreated on update.
func testCloneSet(f *framework.Framework, name string, replicas int32) *v1beta1.CloneSet {
	return &v1beta1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.CloneSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
				Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{
					PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType,
					MaxUnavailable:  ptr.To(intstr.FromInt32(2)),
				},
			},
		},
	}
}

// waitCloneSet polls the CloneSet until its status is of its generation
// and done says so.
func waitCloneSet(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, done func(*v1beta1.CloneSet) bool) *v1beta1.CloneSet {
	t.Helper()
	return waitObject(ctx, t, f.Shoal.AppsV1beta1().CloneSets(f.Namespace), cloneSetTimeout, name, what,
		func(cs *v1beta1.CloneSet) bool { return cs.Status.ObservedGeneration == cs.Generation && done(cs) },
		func(cs *v1beta1.CloneSet) any { return cs.Status })
}

// settled: every pod exists, is ready and at the update revision, as far
// as partition lets it.
func settled(replicas, updated int32) func(*v1beta1.CloneSet) bool {
	return func(cs *v1beta1.CloneSet) bool {
		s := cs.Status
		return s.Replicas == replicas && s.ReadyReplicas == replicas && s.UpdatedReplicas == updated && s.UpdatedReadyReplicas == updated
	}
}

// cloneSetPods lists the CloneSet's pods that are not being deleted.
func cloneSetPods(ctx context.Context, t *testing.T, f *framework.Framework, name string) []corev1.Pod {
	t.Helper()
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// TestCloneSetScaleAndRecreate ports OpenKruise's CloneSet cases "scale
// up and down", "recreate update" and "partition" (with v1.2's rounding:
// partition 99% of 3 updates exactly one pod), on the v1beta1 API.
func TestCloneSetScaleAndRecreate(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	sets := f.Shoal.AppsV1beta1().CloneSets(f.Namespace)
	created, err := sets.Create(ctx, testCloneSet(f, "web", 3), metav1.CreateOptions{})
	require.NoError(t, err)

	cs := waitCloneSet(ctx, t, f, "web", "3 pods ready", settled(3, 3))
	require.Equal(t, cs.Status.UpdateRevision, cs.Status.CurrentRevision)
	require.Equal(t, "app=web", cs.Status.LabelSelector)
	require.EqualValues(t, 3, cs.Status.ExpectedUpdatedReplicas)
	pods := cloneSetPods(ctx, t, f, "web")
	require.Len(t, pods, 3)
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		require.NotNil(t, ref)
		require.Equal(t, created.UID, ref.UID)
		require.Equal(t, cs.Status.UpdateRevision, p.Labels[wellknown.LabelControllerRevisionHash])
		require.NotEmpty(t, p.Labels[wellknown.LabelCloneSetInstanceID])
		require.Equal(t, "web-"+p.Labels[wellknown.LabelCloneSetInstanceID], p.Name)
		require.Equal(t, string(wellknown.LifecycleStateNormal), p.Labels[wellknown.LabelLifecycleState])
		require.Contains(t, p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateKruisePodReady})
	}
	revs, err := f.Kube.AppsV1().ControllerRevisions(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, revs.Items, 1)
	require.Equal(t, cs.Status.UpdateRevision, revs.Items[0].Name)

	// Scale through the scale subresource, as kubectl scale and an HPA do.
	scale := func(n int32) {
		t.Helper()
		_, err := sets.UpdateScale(ctx, "web", &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: n},
		}, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	scale(1)
	waitCloneSet(ctx, t, f, "web", "scaled in to 1", settled(1, 1))
	scale(3)
	cs = waitCloneSet(ctx, t, f, "web", "scaled out to 3", settled(3, 3))
	oldRev := cs.Status.UpdateRevision
	before := cloneSetPods(ctx, t, f, "web")

	// A template change with partition 99%: exactly one pod is recreated
	// at the new revision (OpenKruise rounds up but updates at least one).
	cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "VERSION", Value: "v2"}}
	cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromString("99%"))
	_, err = sets.Update(ctx, cs, metav1.UpdateOptions{})
	require.NoError(t, err)
	cs = waitCloneSet(ctx, t, f, "web", "one pod updated", settled(3, 1))
	require.NotEqual(t, oldRev, cs.Status.UpdateRevision)
	require.Equal(t, oldRev, cs.Status.CurrentRevision, "not every pod is updated yet")
	require.EqualValues(t, 1, cs.Status.ExpectedUpdatedReplicas)
	after := cloneSetPods(ctx, t, f, "web")
	kept := 0
	for _, p := range after {
		if slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == p.UID }) {
			kept++
			require.Equal(t, oldRev, p.Labels[wellknown.LabelControllerRevisionHash])
		} else {
			require.Equal(t, cs.Status.UpdateRevision, p.Labels[wellknown.LabelControllerRevisionHash])
		}
	}
	require.Equal(t, 2, kept, "partition keeps two old pods")

	// Partition 0: the rest follow, within maxUnavailable; the revision
	// becomes current.
	cs.Spec.UpdateStrategy.RollingUpdate.Partition = nil
	_, err = sets.Update(ctx, cs, metav1.UpdateOptions{})
	require.NoError(t, err)
	cs = waitCloneSet(ctx, t, f, "web", "all pods updated", func(cs *v1beta1.CloneSet) bool {
		return settled(3, 3)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
	})
	for _, p := range cloneSetPods(ctx, t, f, "web") {
		require.Equal(t, cs.Status.UpdateRevision, p.Labels[wellknown.LabelControllerRevisionHash], "pod %s", p.Name)
	}

	// maxSurge 1, maxUnavailable 0: a new pod comes up before each old one
	// goes, and the update still finishes.
	cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "VERSION", Value: "v3"}}
	cs.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
	cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	_, err = sets.Update(ctx, cs, metav1.UpdateOptions{})
	require.NoError(t, err)
	v2 := cs.Status.UpdateRevision
	var minReady int32 = 3
	done := waitCloneSet(ctx, t, f, "web", "all pods updated with surge", func(cs *v1beta1.CloneSet) bool {
		if cs.Status.UpdateRevision != v2 {
			minReady = min(minReady, cs.Status.ReadyReplicas)
		}
		return cs.Status.UpdateRevision != v2 && settled(3, 3)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
	})
	require.EqualValues(t, 3, minReady, "maxUnavailable 0: never fewer than 3 ready pods (as polled)")
	for _, p := range cloneSetPods(ctx, t, f, "web") {
		require.Equal(t, done.Status.UpdateRevision, p.Labels[wellknown.LabelControllerRevisionHash], "pod %s", p.Name)
	}

	// Events tell what happened.
	evs, err := f.Kube.EventsV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	reasons := map[string]int{}
	for _, e := range evs.Items {
		if e.Regarding.Kind == "CloneSet" {
			reasons[e.Reason]++
		}
	}
	require.Positive(t, reasons["SuccessfulCreate"], fmt.Sprint(reasons))
	require.Positive(t, reasons["SuccessfulDelete"], fmt.Sprint(reasons))
}

// TestCloneSetPreDeleteHook ports OpenKruise's CloneSet lifecycle case for
// preDelete with markPodNotReady: a pod carrying the hook's label is not
// deleted on scale-in but moves to PreparingDelete with KruisePodReady
// False; once the label is removed it is deleted.
func TestCloneSetPreDeleteHook(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	cs := testCloneSet(f, "hooked", 2)
	cs.Spec.Template.Labels["example.io/unregister"] = "true"
	cs.Spec.Lifecycle = &pub.Lifecycle{PreDelete: &pub.LifecycleHook{
		LabelsHandler: map[string]string{"example.io/unregister": "true"}, MarkPodNotReady: true,
	}}
	sets := f.Shoal.AppsV1beta1().CloneSets(f.Namespace)
	_, err := sets.Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	cs = waitCloneSet(ctx, t, f, "hooked", "2 pods ready", settled(2, 2))

	cs.Spec.Replicas = ptr.To[int32](1)
	_, err = sets.Update(ctx, cs, metav1.UpdateOptions{})
	require.NoError(t, err)
	var held corev1.Pod
	err = framework.WaitFor(ctx, cloneSetTimeout, func(ctx context.Context) (bool, error) {
		for _, p := range cloneSetPods(ctx, t, f, "hooked") {
			if p.Labels[wellknown.LabelLifecycleState] != string(wellknown.LifecycleStatePreparingDelete) {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == wellknown.ConditionKruisePodReady && c.Status == corev1.ConditionFalse {
					held = p
					return true, nil
				}
			}
		}
		return false, nil
	})
	require.NoError(t, err, "a pod in PreparingDelete with KruisePodReady False")
	require.Len(t, cloneSetPods(ctx, t, f, "hooked"), 2, "the held pod is not deleted")
	require.NotEmpty(t, held.Annotations[wellknown.AnnotationLifecycleTimestamp])

	// The hook lets go: the pod is deleted and one pod is left.
	patch := []byte(`{"metadata":{"labels":{"example.io/unregister":null}}}`)
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, held.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, "hooked", "scaled in to 1", settled(1, 1))
	for _, p := range cloneSetPods(ctx, t, f, "hooked") {
		require.NotEqual(t, held.Name, p.Name, "the released pod was deleted")
	}
}

// inPlaceCloneSet is testCloneSet updated in place (policy), one pod at a
// time.
func inPlaceCloneSet(f *framework.Framework, name string, replicas int32, policy v1beta1.CloneSetPodUpdateStrategyType) *v1beta1.CloneSet {
	cs := testCloneSet(f, name, replicas)
	cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = policy
	cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	return cs
}

// updateCloneSet reads, changes and writes the CloneSet, retrying on a
// conflict with the controller's status writes.
func updateCloneSet(ctx context.Context, t *testing.T, f *framework.Framework, name string, change func(*v1beta1.CloneSet)) {
	t.Helper()
	updateObject(ctx, t, f.Shoal.AppsV1beta1().CloneSets(f.Namespace), name, change)
}

// byUID indexes pods by UID.
func byUID(pods []corev1.Pod) map[types.UID]corev1.Pod {
	out := map[types.UID]corev1.Pod{}
	for _, p := range pods {
		out[p.UID] = p
	}
	return out
}

// TestCloneSetInPlaceUpdate ports OpenKruise's "CloneSet Updating in-place
// update images with the same imageID" and extends it to an image with
// another digest on two pods: the pods keep their UIDs, each container is
// replaced (new containerID, restartCount 1) with the new image, every pod
// carries the InPlaceUpdateReady readiness gate and ends with the
// condition True and the inplace-update-state annotation of the new
// revision.
func TestCloneSetInPlaceUpdate(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx,
		inPlaceCloneSet(f, "inplace", 2, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType), metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, "inplace", "2 pods ready", settled(2, 2))
	before := byUID(cloneSetPods(ctx, t, f, "inplace"))
	for _, p := range before {
		require.Contains(t, p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady})
		c := podstatus.Condition(&p, wellknown.ConditionInPlaceUpdateReady)
		require.NotNil(t, c, "pod %s has InPlaceUpdateReady", p.Name)
		require.Equal(t, corev1.ConditionTrue, c.Status)
	}

	// check waits for the update to rev and checks every pod was updated
	// in place: same UID, a new container running image, one restart more.
	check := func(image string, restarts int32) *v1beta1.CloneSet {
		t.Helper()
		cs := waitCloneSet(ctx, t, f, "inplace", "both pods updated in place", func(cs *v1beta1.CloneSet) bool {
			return settled(2, 2)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
		})
		after := cloneSetPods(ctx, t, f, "inplace")
		require.Len(t, after, 2)
		for _, p := range after {
			old, ok := before[p.UID]
			require.True(t, ok, "pod %s was recreated, not updated in place", p.Name)
			require.Equal(t, image, p.Spec.Containers[0].Image)
			require.Equal(t, cs.Status.UpdateRevision, p.Labels[wellknown.LabelControllerRevisionHash])
			require.NotEqual(t, old.Status.ContainerStatuses[0].ContainerID, p.Status.ContainerStatuses[0].ContainerID, "pod %s: a new container", p.Name)
			require.Equal(t, restarts, p.Status.ContainerStatuses[0].RestartCount, "pod %s", p.Name)
			c := podstatus.Condition(&p, wellknown.ConditionInPlaceUpdateReady)
			require.Equal(t, corev1.ConditionTrue, c.Status, "pod %s", p.Name)
			require.Contains(t, p.Annotations[wellknown.AnnotationInPlaceUpdateState], `"revision":"`+cs.Status.UpdateRevision+`"`)
			require.Equal(t, string(wellknown.LifecycleStateNormal), p.Labels[wellknown.LabelLifecycleState])
			before[p.UID] = p
		}
		return cs
	}

	// The same image by digest: same imageID, new container.
	var first corev1.Pod
	for _, p := range before {
		first = p
	}
	imageID := first.Status.ContainerStatuses[0].ImageID
	digest := imageID[strings.LastIndex(imageID, "@")+1:]
	require.True(t, strings.HasPrefix(digest, "sha256:"), "image ID %q", imageID)
	byDigest := f.Image("testserver@" + digest)
	updateCloneSet(ctx, t, f, "inplace", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = byDigest })
	check(byDigest, 1)
	for _, p := range before {
		require.Equal(t, imageID, p.Status.ContainerStatuses[0].ImageID, "the same imageID")
	}

	// Another digest.
	v2 := f.Image("testserver:v2")
	updateCloneSet(ctx, t, f, "inplace", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	check(v2, 2)
	for _, p := range before {
		require.NotEqual(t, imageID, p.Status.ContainerStatuses[0].ImageID, "pod %s runs the v2 image", p.Name)
	}

	evs, err := f.Kube.EventsV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	reasons := map[string]int{}
	for _, e := range evs.Items {
		reasons[e.Reason]++
	}
	require.Equal(t, 4, reasons["StartUpdatePodInPlace"], fmt.Sprint(reasons))
	require.Zero(t, reasons["SuccessfulDelete"], "nothing recreated: %v", reasons)
}

// TestCloneSetInPlaceOnlyAndIfPossible: a change that cannot happen in
// place (a container's env) is rejected at admission for an InPlaceOnly
// CloneSet, with the field and the fix, in either API version, and its pod
// is untouched; an InPlaceIfPossible CloneSet takes the change and
// recreates its pod.
func TestCloneSetInPlaceOnlyAndIfPossible(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	for _, cs := range []*v1beta1.CloneSet{
		inPlaceCloneSet(f, "only", 1, v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType),
		inPlaceCloneSet(f, "possible", 1, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType),
	} {
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitCloneSet(ctx, t, f, "only", "1 pod ready", settled(1, 1))
	waitCloneSet(ctx, t, f, "possible", "1 pod ready", settled(1, 1))
	onlyBefore := cloneSetPods(ctx, t, f, "only")
	possibleBefore := cloneSetPods(ctx, t, f, "possible")
	env := []corev1.EnvVar{{Name: "VERSION", Value: "v2"}}

	only, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "only", metav1.GetOptions{})
	require.NoError(t, err)
	only.Spec.Template.Spec.Containers[0].Env = env
	_, err = f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Update(ctx, only, metav1.UpdateOptions{})
	require.Error(t, err, "InPlaceOnly refuses a change it cannot make")
	require.Contains(t, err.Error(), "spec.template.spec.containers[app].env: cannot change in place, and spec.updateStrategy.rollingUpdate.podUpdatePolicy is InPlaceOnly")
	alpha, err := f.Shoal.AppsV1alpha1().CloneSets(f.Namespace).Get(ctx, "only", metav1.GetOptions{})
	require.NoError(t, err)
	alpha.Spec.Template.Spec.Containers[0].Env = env
	_, err = f.Shoal.AppsV1alpha1().CloneSets(f.Namespace).Update(ctx, alpha, metav1.UpdateOptions{})
	require.Error(t, err)
	require.Contains(t, err.Error(), "spec.updateStrategy.type is InPlaceOnly", "a v1alpha1 user is told the v1alpha1 field")

	updateCloneSet(ctx, t, f, "possible", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Env = env })
	waitCloneSet(ctx, t, f, "possible", "the pod recreated", func(cs *v1beta1.CloneSet) bool {
		return settled(1, 1)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
	})
	possibleAfter := cloneSetPods(ctx, t, f, "possible")
	require.Len(t, possibleAfter, 1)
	require.NotEqual(t, possibleBefore[0].UID, possibleAfter[0].UID, "InPlaceIfPossible recreates")
	onlyAfter := cloneSetPods(ctx, t, f, "only")
	require.Len(t, onlyAfter, 1)
	require.Equal(t, onlyBefore[0].UID, onlyAfter[0].UID, "InPlaceOnly never recreates")
	require.Equal(t, onlyBefore[0].Labels[wellknown.LabelControllerRevisionHash], onlyAfter[0].Labels[wellknown.LabelControllerRevisionHash])
}

// TestCloneSetAdmission: the CloneSet webhook's rejections reach kubectl
// users with the field and the fix (the full table is in
// coordinator/webhook's unit tests).
func TestCloneSetAdmission(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		change func(*v1beta1.CloneSet)
		want   string
	}{
		{"selector", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Labels = map[string]string{"app": "other"} },
			"spec.template.metadata.labels: map[app:other] does not match spec.selector"},
		{"restartPolicy", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			`spec.template.spec.restartPolicy: "Never" is not supported`},
		{"activeDeadlineSeconds", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) },
			"spec.template.spec.activeDeadlineSeconds: must not be set"},
	} {
		cs := testCloneSet(f, "bad-"+strings.ToLower(tc.name), 1)
		tc.change(cs)
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, testCloneSet(f, "good", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	updateCloneSet(ctx, t, f, "good", func(cs *v1beta1.CloneSet) { cs.Spec.Replicas = ptr.To[int32](0) })
	// Settled, the controller writes nothing more that could conflict.
	waitCloneSet(ctx, t, f, "good", "no pods", settled(0, 0))
	good, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "good", metav1.GetOptions{})
	require.NoError(t, err)
	good.Spec.ScaleStrategy.PodsToDelete = []string{"not-a-pod"}
	_, err = f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Update(ctx, good, metav1.UpdateOptions{})
	require.Error(t, err)
	require.Contains(t, err.Error(), `spec.scaleStrategy.podsToDelete[0]: no pod "not-a-pod"`)
}

// TestCloneSetInPlaceEnvFromLabel ports OpenKruise's "CloneSet Updating
// in-place update both image and env from label" (one pod keeps its UID,
// a new container, restartCount 1, reading the new label value) and goes
// on with a change of the label alone: the kubelet restarts nothing for
// it, so the update restarts the container through the node agent (a
// ContainerRecreateRequest whose new instance's env the agent checks from
// the runtime), and the new container reads the new value (restartCount
// 2, same UID). The testserver image is distroless: one static binary, no
// shell, no env binary.
func TestCloneSetInPlaceEnvFromLabel(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	cs := inPlaceCloneSet(f, "envlabel", 1, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType)
	cs.Spec.Template.Labels["test-env"] = "foo"
	cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{
		Name: "TEST_ENV", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['test-env']"}},
	}}
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, "envlabel", "1 pod ready", settled(1, 1))
	before := cloneSetPods(ctx, t, f, "envlabel")[0]

	// envOf reads TEST_ENV inside the pod's container.
	envOf := func(p corev1.Pod) string {
		t.Helper()
		out, stderr, err := f.Exec(ctx, p.Namespace, p.Name, "app", []string{"/testserver", "env", "TEST_ENV"})
		require.NoError(t, err, stderr)
		return strings.TrimSpace(out)
	}
	require.Equal(t, "foo", envOf(before))

	step := func(what string, change func(*v1beta1.CloneSet), value string, restarts int32) corev1.Pod {
		t.Helper()
		updateCloneSet(ctx, t, f, "envlabel", change)
		waitCloneSet(ctx, t, f, "envlabel", what, func(cs *v1beta1.CloneSet) bool {
			return settled(1, 1)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
		})
		after := cloneSetPods(ctx, t, f, "envlabel")[0]
		require.Equal(t, before.UID, after.UID, "%s: updated in place", what)
		require.NotEqual(t, before.Status.ContainerStatuses[0].ContainerID, after.Status.ContainerStatuses[0].ContainerID, "%s: a new container", what)
		require.Equal(t, restarts, after.Status.ContainerStatuses[0].RestartCount, what)
		require.Equal(t, value, after.Labels["test-env"])
		require.Equal(t, value, envOf(after), "%s: the container reads the new label", what)
		before = after
		return after
	}
	step("image and env from label", func(cs *v1beta1.CloneSet) {
		cs.Spec.Template.Labels["test-env"] = "bar"
		cs.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2")
	}, "bar", 1)
	step("env from label alone", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Labels["test-env"] = "baz" }, "baz", 2)

	crrs, err := f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, crrs.Items, 1, "one restart request, for the label-only change")
	crr := crrs.Items[0]
	require.Equal(t, before.Name, crr.Spec.PodName)
	require.Equal(t, "true", crr.Annotations[wellknown.AnnotationCRRVerifyEnvFromMetadata], "the agent checks the new env")
	require.Equal(t, v1alpha1.ContainerRecreateRequestCompleted, crr.Status.Phase)
	require.Len(t, crr.Status.ContainerRecreateStates, 1)
	require.Equal(t, v1alpha1.ContainerRecreateRequestSucceeded, crr.Status.ContainerRecreateStates[0].Phase,
		"the agent read the new instance's env from the runtime: testserver has no shell and no env binary")
}

// TestCloneSetInPlaceUpdateHookAndGrace: the inPlaceUpdate lifecycle hook
// with markPodNotReady holds a pod in PreparingUpdate (KruisePodReady
// False, image unchanged) while the hook's label is on it; released, the
// pod is updated in place after inPlaceUpdateStrategy.gracePeriodSeconds
// (the image changes at least that long after the pod went not ready),
// waits in Updated until the hook's label is back, then is Normal and
// ready again.
func TestCloneSetInPlaceUpdateHookAndGrace(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const hold = "example.io/hold"
	cs := inPlaceCloneSet(f, "hookgrace", 1, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType)
	cs.Spec.Template.Labels[hold] = "true"
	cs.Spec.Lifecycle = &pub.Lifecycle{InPlaceUpdate: &pub.LifecycleHook{LabelsHandler: map[string]string{hold: "true"}, MarkPodNotReady: true}}
	cs.Spec.UpdateStrategy.RollingUpdate.InPlaceUpdateStrategy = &pub.InPlaceUpdateStrategy{GracePeriodSeconds: 3}
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, "hookgrace", "1 pod ready", settled(1, 1))
	pod := cloneSetPods(ctx, t, f, "hookgrace")[0]
	oldImage := pod.Spec.Containers[0].Image

	waitPod := func(what string, ok func(*corev1.Pod) bool) *corev1.Pod {
		t.Helper()
		var last *corev1.Pod
		err := framework.WaitFor(ctx, cloneSetTimeout, func(ctx context.Context) (bool, error) {
			p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = p
			return ok(p), nil
		})
		require.NoError(t, err, "pod %s: %s; last labels %v", pod.Name, what, last.Labels)
		return last
	}
	state := func(p *corev1.Pod) wellknown.LifecycleState {
		return wellknown.LifecycleState(p.Labels[wellknown.LabelLifecycleState])
	}

	updateCloneSet(ctx, t, f, "hookgrace", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2") })
	held := waitPod("held in PreparingUpdate, not ready", func(p *corev1.Pod) bool {
		c := podstatus.Condition(p, wellknown.ConditionKruisePodReady)
		return state(p) == wellknown.LifecycleStatePreparingUpdate && c != nil && c.Status == corev1.ConditionFalse
	})
	require.Equal(t, oldImage, held.Spec.Containers[0].Image, "the hook holds the update")

	// A watch catches the grace annotation, which lives for the grace
	// period only: its timestamp is when the pod went not ready, to the
	// microsecond.
	w, err := f.Kube.CoreV1().Pods(f.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: held.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	graceSeen := make(chan string, 1)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Annotations[wellknown.AnnotationInPlaceUpdateGrace] != "" {
				graceSeen <- p.Annotations[wellknown.AnnotationInPlaceUpdateGrace]
				return
			}
		}
	}()

	patch := []byte(`{"metadata":{"labels":{"` + hold + `":null}}}`)
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	updated := waitPod("updated in place, in Updated", func(p *corev1.Pod) bool {
		c := podstatus.Condition(p, wellknown.ConditionInPlaceUpdateReady)
		return state(p) == wellknown.LifecycleStateUpdated && c != nil && c.Status == corev1.ConditionTrue
	})
	require.Equal(t, f.Image("testserver:v2"), updated.Spec.Containers[0].Image)
	require.Equal(t, pod.UID, updated.UID)
	var st pub.InPlaceUpdateState
	require.NoError(t, json.Unmarshal([]byte(updated.Annotations[wellknown.AnnotationInPlaceUpdateState]), &st))
	notReady := podstatus.Condition(updated, wellknown.ConditionInPlaceUpdateReady).LastTransitionTime // True since the end
	started := st.UpdateTimestamp.Time
	require.NotContains(t, updated.Annotations, wellknown.AnnotationInPlaceUpdateGrace)
	require.False(t, notReady.Time.Before(started), "ready again only after the image changed")

	// The grace: the image was applied at least 3 s after the pod went
	// not ready. The state's updateTimestamp is whole seconds (OpenKruise's
	// format), so the image went in no earlier than that second.
	var grace struct {
		UpdateTimestamp metav1.MicroTime `json:"updateTimestamp"`
	}
	select {
	case raw := <-graceSeen:
		require.NoError(t, json.Unmarshal([]byte(raw), &grace), "grace annotation %s", raw)
	default:
		require.Fail(t, "the watch saw no "+wellknown.AnnotationInPlaceUpdateGrace+" annotation")
	}
	notReadyAt := grace.UpdateTimestamp.Time
	require.False(t, started.Before(notReadyAt.Add(3*time.Second).Truncate(time.Second)),
		"the image was applied in the second of %s, the pod went not ready at %s (grace 3 s)", started.Format(time.RFC3339), notReadyAt.Format(time.RFC3339Nano))
	// Events are written in the background: wait for it.
	err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := f.Kube.EventsV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool { return e.Reason == "StartUpdatePodInPlace" }), nil
	})
	require.NoError(t, err, "a StartUpdatePodInPlace event")

	patch = []byte(`{"metadata":{"labels":{"` + hold + `":"true"}}}`)
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	waitPod("Normal and ready", func(p *corev1.Pod) bool {
		c := podstatus.Condition(p, wellknown.ConditionKruisePodReady)
		return state(p) == wellknown.LifecycleStateNormal && c != nil && c.Status == corev1.ConditionTrue
	})
	waitCloneSet(ctx, t, f, "hookgrace", "updated and ready", settled(1, 1))
}

// TestCloneSetPreDownload ports OpenKruise's "CloneSet pre-download images
// pre-download for new image" (5 replicas, partition 1, InPlaceIfPossible;
// an image update with imagePreDownloadParallelism 2 creates one
// ImagePullJob for the new image with parallelism 2) and goes on: the job
// pulls on the nodes of the pods not yet updated, and once every pod is
// updated (partition removed) the CloneSet's jobs are deleted.
func TestCloneSetPreDownload(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	cs := inPlaceCloneSet(f, "predl", 5, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType)
	cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromInt32(1))
	cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = nil // the API's default, 20%
	created, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, ptr.To(intstr.FromString("20%")), created.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable)
	waitCloneSet(ctx, t, f, "predl", "5 pods ready", settled(5, 5))

	v2 := f.Image("testserver:v2")
	updateCloneSet(ctx, t, f, "predl", func(cs *v1beta1.CloneSet) {
		cs.Spec.UpdateStrategy.RollingUpdate.InPlaceUpdateStrategy = &pub.InPlaceUpdateStrategy{ImagePreDownloadParallelism: ptr.To(intstr.FromInt32(2))}
		cs.Spec.Template.Spec.Containers[0].Image = v2
	})
	jobs := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace)
	var job v1alpha1.ImagePullJob
	err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		list, err := jobs.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		require.Len(t, list.Items, 1, "one job: one container image changed")
		job = list.Items[0]
		return true, nil
	})
	require.NoError(t, err, "the update created an ImagePullJob")
	require.Equal(t, v2, job.Spec.Image)
	require.Equal(t, 2, job.Spec.Parallelism.IntValue())
	require.Equal(t, "CloneSet", metav1.GetControllerOf(&job).Kind)
	require.NotNil(t, job.Spec.PodSelector, "it pulls where the CloneSet's pods run")
	cs = waitCloneSet(ctx, t, f, "predl", "4 pods updated, partition 1", settled(5, 4))
	require.True(t, strings.HasPrefix(job.Name, cs.Status.UpdateRevision+"-"), "named <revision>-<container>: %s", job.Name)
	rev, err := f.Kube.AppsV1().ControllerRevisions(f.Namespace).Get(ctx, cs.Status.UpdateRevision, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "true", rev.Labels[wellknown.LabelImagePreDownloadCreated], "decided once")

	// The job finishes: it pulled on the node(s) of the pod left behind.
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil // finished and already collected
		}
		return err == nil && j.Status.CompletionTime != nil && j.Status.Succeeded >= 1, err
	})
	require.NoError(t, err, "the pre-download job pulled the image")

	// The rollout ends: the CloneSet's jobs go.
	updateCloneSet(ctx, t, f, "predl", func(cs *v1beta1.CloneSet) { cs.Spec.UpdateStrategy.RollingUpdate.Partition = nil })
	waitCloneSet(ctx, t, f, "predl", "all updated", func(cs *v1beta1.CloneSet) bool {
		return settled(5, 5)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
	})
	err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		list, err := jobs.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	require.NoError(t, err, "the pre-download jobs are deleted when the revisions converge")
}

// TestCloneSetNoPreDownload: a ReCreate update and a CloneSet of 3
// replicas roll without pre-download jobs (OpenKruise's documented
// exceptions); their revisions say so.
func TestCloneSetNoPreDownload(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	small := inPlaceCloneSet(f, "small", 3, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType)
	recreate := testCloneSet(f, "recreate", 4)
	for _, cs := range []*v1beta1.CloneSet{small, recreate} {
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitCloneSet(ctx, t, f, "small", "3 ready", settled(3, 3))
	waitCloneSet(ctx, t, f, "recreate", "4 ready", settled(4, 4))
	for _, name := range []string{"small", "recreate"} {
		updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2") })
	}
	for _, name := range []string{"small", "recreate"} {
		cs := waitCloneSet(ctx, t, f, name, "a new revision", func(cs *v1beta1.CloneSet) bool {
			return cs.Status.UpdateRevision != cs.Status.CurrentRevision || cs.Status.UpdatedReplicas > 0
		})
		err := framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			rev, err := f.Kube.AppsV1().ControllerRevisions(f.Namespace).Get(ctx, cs.Status.UpdateRevision, metav1.GetOptions{})
			return err == nil && rev.Labels[wellknown.LabelImagePreDownloadIgnored] == "true", err
		})
		require.NoError(t, err, "%s: the revision is marked pre-download ignored", name)
	}
	list, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items)
}

// progressing is the CloneSet's Progressing condition without its times,
// as OpenKruise's tester compares it ("" when it has none).
func progressing(cs *v1beta1.CloneSet) string {
	for _, c := range cs.Status.Conditions {
		if c.Type == v1beta1.CloneSetConditionTypeProgressing {
			return fmt.Sprintf("%s/%s/%s", c.Status, c.Reason, c.Message)
		}
	}
	return ""
}

// Progressing conditions of OpenKruise's tester.
const (
	condUpdated   = "True/CloneSetUpdated/CloneSet is progressing"
	condAvailable = "True/CloneSetAvailable/CloneSet is available"
	condPaused    = "True/CloneSetPaused/CloneSet is paused"
)

func condExceeded(rev string) string {
	return "False/ProgressDeadlineExceeded/CloneSet revision " + rev + " has timed out progressing"
}

// waitProgressing waits for the CloneSet's Progressing condition.
func waitProgressing(ctx context.Context, t *testing.T, f *framework.Framework, name, want string) *v1beta1.CloneSet {
	t.Helper()
	return waitCloneSet(ctx, t, f, name, "Progressing "+want, func(cs *v1beta1.CloneSet) bool { return progressing(cs) == want })
}

// TestCloneSetCreatingWithMaxInt32ProgressDeadline ports OpenKruise's
// "CloneSet Creating creates with maxInt32 progressDeadlineSeconds" and
// "... maxInt32 minReadySeconds and maxInt32 progressDeadlineSeconds":
// 2147483647 means no deadline, so no Progressing condition; a real
// deadline brings CloneSetAvailable.
func TestCloneSetCreatingWithMaxInt32ProgressDeadline(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		minReady int32
	}{{"pds", 0}, {"pds-minready", math.MaxInt32}} {
		cs := testCloneSet(f, tc.name, 1)
		cs.Spec.MinReadySeconds, cs.Spec.ProgressDeadlineSeconds = tc.minReady, ptr.To[int32](math.MaxInt32)
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, name := range []string{"pds", "pds-minready"} {
		cs := waitCloneSet(ctx, t, f, name, "1 ready", func(cs *v1beta1.CloneSet) bool { return cs.Status.ReadyReplicas == 1 })
		require.Empty(t, progressing(cs), "no deadline, no condition")
	}
	require.Zero(t, waitCloneSet(ctx, t, f, "pds-minready", "1 ready", settled(1, 1)).Status.AvailableReplicas, "not for 68 years")

	updateCloneSet(ctx, t, f, "pds", func(cs *v1beta1.CloneSet) { cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](600) })
	waitProgressing(ctx, t, f, "pds", condAvailable)
	updateCloneSet(ctx, t, f, "pds-minready", func(cs *v1beta1.CloneSet) {
		cs.Spec.MinReadySeconds, cs.Spec.ProgressDeadlineSeconds = 10, nil
	})
	cs := waitCloneSet(ctx, t, f, "pds-minready", "1 ready", settled(1, 1))
	require.Empty(t, progressing(cs))
}

// TestCloneSetCreatingUnschedulable ports OpenKruise's "CloneSet Creating
// creates with unschedulable scheduler": the pending pod stays
// PreparingNormal, the 8 s deadline passes (ProgressDeadlineExceeded);
// with the default scheduler the pod runs, becomes Normal, and the
// CloneSet is available.
func TestCloneSetCreatingUnschedulable(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	cs := testCloneSet(f, "unsched", 1)
	cs.Spec.Template.Spec.SchedulerName = "unschedulable"
	cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](8)
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	cs = waitCloneSet(ctx, t, f, "unsched", "1 pod", func(cs *v1beta1.CloneSet) bool { return cs.Status.Replicas == 1 })
	waitProgressing(ctx, t, f, "unsched", condExceeded(cs.Status.UpdateRevision))
	pods := cloneSetPods(ctx, t, f, "unsched")
	require.Len(t, pods, 1)
	require.Equal(t, corev1.PodPending, pods[0].Status.Phase)
	require.Equal(t, string(wellknown.LifecycleStatePreparingNormal), pods[0].Labels[wellknown.LabelLifecycleState], "an unscheduled pod is not Normal")

	updateCloneSet(ctx, t, f, "unsched", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.SchedulerName = "" })
	waitCloneSet(ctx, t, f, "unsched", "1 ready", settled(1, 1))
	waitProgressing(ctx, t, f, "unsched", condAvailable)
	pods = cloneSetPods(ctx, t, f, "unsched")
	require.Len(t, pods, 1)
	require.Equal(t, string(wellknown.LifecycleStateNormal), pods[0].Labels[wellknown.LabelLifecycleState])
}

// TestCloneSetCreatingPreNormalFinalizer ports OpenKruise's "CloneSet
// Creating creates with lifecycle preNormal finalizer": the pod is ready
// but stays PreparingNormal (not available) until the hook's finalizer is
// on it, so the 11 s deadline passes; with the finalizer it is Normal and,
// the finalizer removed again, the CloneSet is available.
func TestCloneSetCreatingPreNormalFinalizer(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const fin = "finalizers.sigs.k8s.io/test"
	cs := testCloneSet(f, "prenormal", 1)
	cs.Spec.Lifecycle = &pub.Lifecycle{PreNormal: &pub.LifecycleHook{FinalizersHandler: []string{fin}}}
	cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](11)
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	cs = waitCloneSet(ctx, t, f, "prenormal", "1 ready", func(cs *v1beta1.CloneSet) bool { return cs.Status.ReadyReplicas == 1 })
	require.Zero(t, cs.Status.AvailableReplicas, "PreparingNormal is not available")
	waitProgressing(ctx, t, f, "prenormal", condExceeded(cs.Status.UpdateRevision))
	pod := cloneSetPods(ctx, t, f, "prenormal")[0]
	require.Equal(t, string(wellknown.LifecycleStatePreparingNormal), pod.Labels[wellknown.LabelLifecycleState], "preNormal not hooked yet")

	patch := []byte(`{"metadata":{"finalizers":["` + fin + `"]}}`)
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	err = framework.WaitFor(ctx, cloneSetTimeout, func(ctx context.Context) (bool, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStateNormal), err
	})
	require.NoError(t, err, "the hooked pod becomes Normal")
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, "prenormal", "available", func(cs *v1beta1.CloneSet) bool {
		return cs.Status.AvailableReplicas == 1 && progressing(cs) == condAvailable
	})
}

// TestCloneSetScalingPaused ports OpenKruise's "CloneSet Scaling pods
// should be ready when paused=true": a paused CloneSet still creates its
// pods, they become ready, and Progressing says CloneSetPaused.
func TestCloneSetScalingPaused(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	cs := testCloneSet(f, "paused", 3)
	cs.Spec.UpdateStrategy.RollingUpdate.Paused = true
	cs.Spec.MinReadySeconds, cs.Spec.ProgressDeadlineSeconds = 60, ptr.To[int32](600)
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitProgressing(ctx, t, f, "paused", condPaused)
	waitCloneSet(ctx, t, f, "paused", "3 ready", func(cs *v1beta1.CloneSet) bool { return cs.Status.ReadyReplicas == 3 })
}

// TestCloneSetScalingMinReadyAndScaleStrategy ports OpenKruise's "CloneSet
// Scaling scales with minReadySeconds and scaleStrategy": with
// scaleStrategy.maxUnavailable 1 and minReadySeconds 10, the 4 pods come
// one at a time, each created 10 to 12 s after the one before became
// ready; Progressing goes from CloneSetUpdated to CloneSetAvailable.
//
// It is in the serial group: the 2 s it allows for the controller to
// notice that a pod became available and create the next one is
// OpenKruise's, and on the parallel group's busy 2 cores a CI run once
// saw 13 s.
func TestCloneSetScalingMinReadyAndScaleStrategy(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	const replicas = 4
	cs := testCloneSet(f, "minready", replicas)
	cs.Spec.MinReadySeconds, cs.Spec.ProgressDeadlineSeconds = 10, ptr.To[int32](600)
	cs.Spec.ScaleStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitProgressing(ctx, t, f, "minready", condUpdated)
	err = framework.WaitFor(ctx, 3*cloneSetTimeout, func(ctx context.Context) (bool, error) {
		cs, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "minready", metav1.GetOptions{})
		return err == nil && cs.Status.AvailableReplicas == replicas && progressing(cs) == condAvailable, err
	})
	require.NoError(t, err, "all 4 available")

	pods := cloneSetPods(ctx, t, f, "minready")
	require.Len(t, pods, replicas)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for i := 1; i < replicas; i++ {
		var readyAt time.Time
		for _, c := range pods[i-1].Status.Conditions {
			if c.Type == corev1.PodReady {
				readyAt = c.LastTransitionTime.Time
			}
		}
		gap := pods[i].CreationTimestamp.Sub(readyAt)
		t.Logf("pod %d created %s after pod %d became ready (second granularity)", i, gap, i-1)
		require.GreaterOrEqual(t, gap, 10*time.Second, "pod %d came %s after pod %d was ready", i, gap, i-1)
		require.LessOrEqual(t, gap, 12*time.Second, "pod %d came %s after pod %d was ready", i, gap, i-1)
	}
}

// TestCloneSetSpecifiedDeleteWithPreDelete ports OpenKruise's "CloneSet
// Scaling specific delete a Pod, when scalingExcludePreparingDelete is
// disabled" and "... specific scale down with lifecycle and then scale
// up, when scalingExcludePreparingDelete is enabled": a pod specified for
// deletion waits in PreparingDelete while the preDelete hook's label is on
// it. Counted, it is not replaced meanwhile; excluded (the v1alpha1 label
// on the CloneSet), a scale-up back to 3 makes a fourth pod at once. When
// the label goes, the pod is deleted and 2 of the 3 first pods remain.
func TestCloneSetSpecifiedDeleteWithPreDelete(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	for _, exclude := range []bool{false, true} {
		name := "specified"
		if exclude {
			name = "excluded"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cs := testCloneSet(f, name, 3)
			if exclude {
				cs.Labels = map[string]string{wellknown.LabelCloneSetScalingExcludePreparingDelete: "true"}
			}
			cs.Spec.Template.Labels["lifecycle-hook"] = "true"
			cs.Spec.Lifecycle = &pub.Lifecycle{PreDelete: &pub.LifecycleHook{LabelsHandler: map[string]string{"lifecycle-hook": "true"}}}
			cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
			_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
			require.NoError(t, err)
			waitProgressing(ctx, t, f, name, condAvailable)
			oldPods := cloneSetPods(ctx, t, f, name)
			require.Len(t, oldPods, 3)
			victim := oldPods[0].Name

			if exclude {
				updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) {
					cs.Spec.Replicas = ptr.To[int32](2)
					cs.Spec.ScaleStrategy.PodsToDelete = []string{victim}
				})
			} else {
				patch := []byte(`{"metadata":{"labels":{"` + wellknown.LabelSpecifiedDelete + `":"true"}}}`)
				_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, victim, types.MergePatchType, patch, metav1.PatchOptions{})
				require.NoError(t, err)
			}
			err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, victim, metav1.GetOptions{})
				return err == nil && p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingDelete), err
			})
			require.NoError(t, err, "the specified pod waits in PreparingDelete")
			waitCloneSet(ctx, t, f, name, "3 pods, not available while one is leaving", func(cs *v1beta1.CloneSet) bool {
				return cs.Status.Replicas == 3 && progressing(cs) == condUpdated
			})

			if exclude {
				updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Replicas = ptr.To[int32](3) })
				waitCloneSet(ctx, t, f, name, "4 pods: the leaving one does not count", func(cs *v1beta1.CloneSet) bool { return cs.Status.Replicas == 4 })
			} else {
				require.Len(t, cloneSetPods(ctx, t, f, name), 3, "not replaced while it waits")
			}

			patch := []byte(`{"metadata":{"labels":{"lifecycle-hook":null}}}`)
			_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, victim, types.MergePatchType, patch, metav1.PatchOptions{})
			require.NoError(t, err)
			waitCloneSet(ctx, t, f, name, "3 pods, available", func(cs *v1beta1.CloneSet) bool {
				return cs.Status.Replicas == 3 && cs.Status.AvailableReplicas == 3 && progressing(cs) == condAvailable
			})
			kept := 0
			for _, p := range cloneSetPods(ctx, t, f, name) {
				require.NotEqual(t, victim, p.Name)
				if slices.ContainsFunc(oldPods, func(o corev1.Pod) bool { return o.UID == p.UID }) {
					kept++
				}
			}
			require.Equal(t, 2, kept, "two of the first pods remain")
		})
	}
}

// TestCloneSetPartitionAndOnDelete ports OpenKruise's "CloneSet Updating
// CloneSet partition="99%", replicas=4, make sure one pod is upgraded" (the
// v1.2 rounding: at least one pod below 100%) and "CloneSet updateStrategy
// type=OnDelete" (a template change moves no pod until the user deletes
// it; the replacement has the new revision).
func TestCloneSetPartitionAndOnDelete(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	t.Run("partition 99% of 4", func(t *testing.T) {
		t.Parallel()
		cs := testCloneSet(f, "p99", 4)
		cs.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(intstr.FromString("99%"))
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
		require.NoError(t, err)
		cs = waitCloneSet(ctx, t, f, "p99", "4 ready", settled(4, 4))
		require.EqualValues(t, 1, cs.Status.ExpectedUpdatedReplicas, "99% of 4 keeps 3, not 4: at least one pod is updated")
		updateCloneSet(ctx, t, f, "p99", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2") })
		cs = waitCloneSet(ctx, t, f, "p99", "exactly one pod updated", settled(4, 1))
		require.EqualValues(t, 1, cs.Status.ExpectedUpdatedReplicas)
		require.NotEqual(t, cs.Status.UpdateRevision, cs.Status.CurrentRevision)
	})
	t.Run("OnDelete", func(t *testing.T) {
		t.Parallel()
		cs := testCloneSet(f, "ondelete", 2)
		cs.Spec.UpdateStrategy = v1beta1.CloneSetUpdateStrategy{Type: v1beta1.OnDeleteCloneSetUpdateStrategyType}
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
		require.NoError(t, err)
		waitCloneSet(ctx, t, f, "ondelete", "2 ready", settled(2, 2))
		before := cloneSetPods(ctx, t, f, "ondelete")
		updateCloneSet(ctx, t, f, "ondelete", func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2") })
		cs = waitCloneSet(ctx, t, f, "ondelete", "the new revision observed", func(cs *v1beta1.CloneSet) bool {
			return cs.Status.UpdateRevision != cs.Status.CurrentRevision
		})
		require.Zero(t, cs.Status.UpdatedReplicas, "OnDelete: no pod moves by itself")
		require.Len(t, cloneSetPods(ctx, t, f, "ondelete"), 2)

		require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, before[0].Name, metav1.DeleteOptions{}))
		cs = waitCloneSet(ctx, t, f, "ondelete", "the deleted pod replaced at the new revision", settled(2, 1))
		for _, p := range cloneSetPods(ctx, t, f, "ondelete") {
			if p.UID == before[1].UID {
				require.Equal(t, cs.Status.CurrentRevision, p.Labels[wellknown.LabelControllerRevisionHash], "the pod left alone keeps its revision")
			} else {
				require.Equal(t, cs.Status.UpdateRevision, p.Labels[wellknown.LabelControllerRevisionHash])
				require.Equal(t, f.Image("testserver:v2"), p.Spec.Containers[0].Image)
			}
		}
	})
}
