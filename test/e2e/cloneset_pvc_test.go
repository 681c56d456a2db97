//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// claimsOf lists the namespace's PVCs that are not being deleted, with
// their names and instance IDs checked against the CloneSet's pods.
func claimsOf(ctx context.Context, t *testing.T, f *framework.Framework) []corev1.PersistentVolumeClaim {
	t.Helper()
	list, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.PersistentVolumeClaim
	for _, c := range list.Items {
		if c.DeletionTimestamp == nil {
			out = append(out, c)
		}
	}
	return out
}

// instanceIDs are the pods' apps.kruise.io/cloneset-instance-id labels.
func instanceIDs(pods []corev1.Pod) []string {
	var ids []string
	for _, p := range pods {
		ids = append(ids, p.Labels[wellknown.LabelCloneSetInstanceID])
	}
	return ids
}

// waitClaims waits until the namespace holds want PVCs, each of an
// instance ID of the CloneSet's pods and owned by the CloneSet, and
// returns their names.
func waitClaims(ctx context.Context, t *testing.T, f *framework.Framework, name string, want int) []string {
	t.Helper()
	var names []string
	var problem string
	err := framework.WaitFor(ctx, cloneSetTimeout, func(ctx context.Context) (bool, error) {
		ids := instanceIDs(cloneSetPods(ctx, t, f, name))
		names, problem = nil, ""
		for _, c := range claimsOf(ctx, t, f) {
			names = append(names, c.Name)
			ref := metav1.GetControllerOf(&c)
			switch {
			case !slices.Contains(ids, c.Labels[wellknown.LabelCloneSetInstanceID]):
				problem = "PVC " + c.Name + " has no pod"
			case ref == nil || ref.Kind != "CloneSet":
				problem = "PVC " + c.Name + " is not owned by the CloneSet"
			}
		}
		return len(names) == want && problem == "", nil
	})
	require.NoError(t, err, "want %d PVCs of the pods; have %v (%s)", want, names, problem)
	slices.Sort(names)
	return names
}

// TestCloneSetPVCReuse ports OpenKruise's "CloneSet Update with
// EnablePVCReuse=false" (v1alpha1: "DisablePVCReuse=true"): pods deleted
// behind the CloneSet's back come back on their old PVCs while
// scaleStrategy.enablePVCReuse is true, and on fresh ones once it is
// false. The claims are bound by the local cluster's default StorageClass
// (hostPath). Added: a scale-in deletes the pod's PVCs with it.
func TestCloneSetPVCReuse(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name = "pvc"
	cs := testCloneSet(f, name, 4)
	cs.Spec.ScaleStrategy.EnablePVCReuse = true
	cs.Spec.MinReadySeconds, cs.Spec.ProgressDeadlineSeconds = 3, ptr.To[int32](600)
	for _, vol := range []string{"data-vol1", "data-vol2"} {
		cs.Spec.VolumeClaimTemplates = append(cs.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: vol},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		})
		cs.Spec.Template.Spec.Containers[0].VolumeMounts = append(cs.Spec.Template.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: vol, MountPath: "/" + vol})
	}
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, name, "4 ready", settled(4, 4))
	claims := waitClaims(ctx, t, f, name, 8)
	for _, p := range cloneSetPods(ctx, t, f, name) {
		id := p.Labels[wellknown.LabelCloneSetInstanceID]
		require.Equal(t, name+"-"+id, p.Name, "a CloneSet pod is named after its instance ID")
		var mounted []string
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				mounted = append(mounted, v.PersistentVolumeClaim.ClaimName)
			}
		}
		require.ElementsMatch(t, []string{"data-vol1-" + name + "-" + id, "data-vol2-" + name + "-" + id}, mounted)
	}
	waitProgressing(ctx, t, f, name, condAvailable)

	deleteAll := func() {
		t.Helper()
		for _, p := range cloneSetPods(ctx, t, f, name) {
			require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
		}
	}
	allAvailable := func(cs *v1beta1.CloneSet) bool {
		return cs.Status.Replicas == 4 && cs.Status.UpdatedAvailableReplicas == 4
	}

	// Reuse: the same PVCs, so the same instance IDs and pod names.
	deleteAll()
	waitCloneSet(ctx, t, f, name, "4 pods back and available", allAvailable)
	waitProgressing(ctx, t, f, name, condAvailable)
	require.Equal(t, claims, waitClaims(ctx, t, f, name, 8), "enablePVCReuse: the replacements take the old PVCs")

	// No reuse: fresh PVCs, the old ones deleted.
	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.ScaleStrategy.EnablePVCReuse = false })
	waitCloneSet(ctx, t, f, name, "the change observed", func(*v1beta1.CloneSet) bool { return true })
	deleteAll()
	waitCloneSet(ctx, t, f, name, "4 pods back and available", allAvailable)
	waitProgressing(ctx, t, f, name, condAvailable)
	fresh := waitClaims(ctx, t, f, name, 8)
	for _, c := range fresh {
		require.NotContains(t, claims, c, "enablePVCReuse false: every PVC is new")
	}

	// Scale-in: the CloneSet deletes the pods' PVCs with them.
	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Replicas = ptr.To[int32](2) })
	waitCloneSet(ctx, t, f, name, "2 ready", settled(2, 2))
	waitClaims(ctx, t, f, name, 4)
}

// TestCloneSetPreparingUpdateAsUpdate ports OpenKruise's "CloneSet regard
// preparing-update pod as update when scaling" (gate
// PreparingUpdateAsUpdate, on in the e2e deployment): partition 99% of 2
// picks one pod, which the inPlaceUpdate hook holds in PreparingUpdate;
// a rebuilt pod and a scale-up pod take the current revision because the
// held pod counts as updated. The progress deadline is 30 s instead of
// OpenKruise's 120 s, to keep the run short.
func TestCloneSetPreparingUpdateAsUpdate(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name, hook = "prepupdate", "preparing-update-hook"
	cs := testCloneSet(f, name, 2)
	cs.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateCloneSetStrategy{
		PodUpdatePolicy: v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType,
		MaxUnavailable:  ptr.To(intstr.FromString("50%")),
		Partition:       ptr.To(intstr.FromString("99%")),
	}
	cs.Spec.Lifecycle = &pub.Lifecycle{InPlaceUpdate: &pub.LifecycleHook{LabelsHandler: map[string]string{hook: "true"}}}
	cs.Spec.Template.Labels[hook] = "true"
	cs.Spec.MinReadySeconds, cs.Spec.ProgressDeadlineSeconds = 10, ptr.To[int32](30)
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, name, "2 ready", settled(2, 2))
	waitProgressing(ctx, t, f, name, condAvailable)

	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2") })
	cs = waitCloneSet(ctx, t, f, name, "the new revision observed", func(cs *v1beta1.CloneSet) bool {
		return cs.Status.UpdateRevision != cs.Status.CurrentRevision
	})
	// group: pods at the update revision, at another, and those held in
	// PreparingUpdate.
	group := func() (updated, current, held []corev1.Pod) {
		for _, p := range cloneSetPods(ctx, t, f, name) {
			if p.Labels[wellknown.LabelControllerRevisionHash] == cs.Status.UpdateRevision {
				updated = append(updated, p)
			} else {
				current = append(current, p)
			}
			if p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingUpdate) {
				held = append(held, p)
			}
		}
		return updated, current, held
	}
	waitGroups := func(what string, wantUpdated, wantCurrent, wantHeld int) []corev1.Pod {
		t.Helper()
		var u, c, h []corev1.Pod
		err := framework.WaitFor(ctx, cloneSetTimeout, func(context.Context) (bool, error) {
			u, c, h = group()
			return len(u) == wantUpdated && len(c) == wantCurrent && len(h) == wantHeld, nil
		})
		require.NoError(t, err, "%s: want %d updated, %d current, %d held; have %d, %d, %d", what, wantUpdated, wantCurrent, wantHeld, len(u), len(c), len(h))
		return c
	}
	current := waitGroups("one pod held in PreparingUpdate", 0, 2, 1)

	// Rebuild the old pod that is not held: it comes back at the current
	// revision (the held one counts as updated).
	victim := current[0]
	if victim.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingUpdate) {
		victim = current[1]
	}
	require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}))
	err = framework.WaitFor(ctx, cloneSetTimeout, func(context.Context) (bool, error) {
		for _, p := range cloneSetPods(ctx, t, f, name) {
			if p.UID == victim.UID {
				return false, nil
			}
		}
		return len(cloneSetPods(ctx, t, f, name)) == 2, nil
	})
	require.NoError(t, err, "the deleted pod is replaced")
	waitGroups("the rebuilt pod is at the current revision", 0, 2, 1)

	exceeded := waitProgressing(ctx, t, f, name, condExceeded(cs.Status.UpdateRevision))

	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) { cs.Spec.Replicas = ptr.To[int32](3) })
	waitGroups("the scale-up pod is at the current revision", 0, 3, 1)

	// Let the held pod go: it is updated in place.
	_, _, held := group()
	require.Len(t, held, 1)
	patchPodLabels(ctx, t, f, held[0].Name, map[string]any{hook: nil})
	waitGroups("the released pod is updated", 1, 2, 0)

	// No partition, maxUnavailable 100%: both old pods are held, then
	// released and updated.
	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) {
		cs.Spec.UpdateStrategy.RollingUpdate.Partition = nil
		cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	})
	for _, p := range waitGroups("both old pods held", 1, 2, 2) {
		patchPodLabels(ctx, t, f, p.Name, map[string]any{hook: nil})
	}
	waitGroups("every pod updated", 3, 0, 0)
	cs, err = f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, progressing(exceeded), progressing(cs), "still exceeded until the updated pods are available")
}

// patchPodLabels merge-patches the pod's labels (nil removes one).
func patchPodLabels(ctx context.Context, t *testing.T, f *framework.Framework, name string, labels map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	require.NoError(t, err)
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "patch the labels of pod %s", name)
}
