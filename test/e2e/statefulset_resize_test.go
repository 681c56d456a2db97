//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The Resize PVC tests port OpenKruise's "VolumeExpansion v1beta1" cases
// (test/e2e/apps/v1beta1/statefulset.go) with their assertions: an
// Advanced StatefulSet with volumeClaimUpdateStrategy OnPodRollingUpdate
// (the coordinator runs with StatefulSetAutoResizePVCGate in e2e, as
// OpenKruise's job does) expands its PVCs to a bigger template, or the
// webhook refuses the template when its storage class does not allow
// expansion.
//
// OpenKruise runs them on the kubernetes-csi hostpath driver and its
// external-resizer. The local cluster provisions with the in-tree
// host-path provisioner, which cannot expand: kube-controller-manager
// leaves such PVCs to an external resizer, and runResizer plays that part
// for the test's namespace (it grows the PV and the PVC's status capacity
// to the request, which is all a resize of a host directory amounts to).
// Everything Shoal does is real.

const (
	// canExpandClass and cannotExpandClass are OpenKruise's two storage
	// classes, host-path here, with allowVolumeExpansion true and false.
	canExpandClass    = "allow-volume-expansion"
	cannotExpandClass = "disallow-volume-expansion"
	// resizeNewSize is the size the cases grow templates to.
	resizeNewSize = "2Gi"
)

// ensureExpansionClasses creates the two storage classes unless they
// exist, and deletes those it created when t ends.
func ensureExpansionClasses(ctx context.Context, t *testing.T, f *framework.Framework) {
	t.Helper()
	for name, expand := range map[string]bool{canExpandClass: true, cannotExpandClass: false} {
		sc := &storagev1.StorageClass{
			ObjectMeta:           metav1.ObjectMeta{Name: name},
			Provisioner:          "kubernetes.io/host-path",
			ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
			AllowVolumeExpansion: ptr.To(expand),
		}
		_, err := f.Kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			have, err := f.Kube.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			require.True(t, have.Provisioner == sc.Provisioner && ptr.Deref(have.AllowVolumeExpansion, false) == expand,
				"storage class %s exists with provisioner %s and allowVolumeExpansion %v, not as these cases need (%s, %v): delete it (kubectl delete storageclass %s)",
				name, have.Provisioner, have.AllowVolumeExpansion, sc.Provisioner, expand, name)
			continue
		}
		require.NoError(t, err, "create storage class %s", name)
		t.Cleanup(func() {
			if err := f.Kube.StorageV1().StorageClasses().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete storage class %s: %v", name, err)
			}
		})
	}
}

// runResizer stands in for an external resizer in namespace ns until t
// ends: every 200 ms, each bound PVC of canExpandClass whose request is
// above its capacity gets its PV's capacity, then its own status
// capacity, raised to the request.
func runResizer(t *testing.T, f *framework.Framework, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				pvc := &list.Items[i]
				want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
				have := pvc.Status.Capacity[corev1.ResourceStorage]
				if ptr.Deref(pvc.Spec.StorageClassName, "") != canExpandClass || pvc.Status.Phase != corev1.ClaimBound || have.Cmp(want) >= 0 {
					continue
				}
				capacity := fmt.Appendf(nil, `{"spec":{"capacity":{"storage":%q}}}`, want.String())
				if _, err := f.Kube.CoreV1().PersistentVolumes().Patch(ctx, pvc.Spec.VolumeName, types.MergePatchType, capacity, metav1.PatchOptions{}); err != nil {
					continue
				}
				status := fmt.Appendf(nil, `{"status":{"capacity":{"storage":%q}}}`, want.String())
				_, _ = f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, pvc.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status")
			}
		}
	})
}

// resizeSet is OpenKruise's set for these cases: replicas testservers,
// one 1Gi volumeClaimTemplate data<i> on /data<i> per storage class in
// classes, volumeClaimUpdateStrategy OnPodRollingUpdate, and, inPlace,
// podUpdatePolicy InPlaceIfPossible with the InPlaceUpdateReady gate.
func resizeSet(f *framework.Framework, name string, replicas int32, inPlace bool, classes ...string) *v1beta1.StatefulSet {
	sts := newStatefulSet(f, name, replicas)
	for i, class := range classes {
		withDataClaim(sts, fmt.Sprintf("data%d", i), fmt.Sprintf("/data%d", i))
		sts.Spec.VolumeClaimTemplates[i].Spec.StorageClassName = ptr.To(class)
	}
	if inPlace {
		sts.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{PodUpdatePolicy: v1beta1.InPlaceIfPossiblePodUpdateStrategyType}
		sts.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}}
	}
	sts.Spec.VolumeClaimUpdateStrategy.Type = v1beta1.OnPodRollingUpdateVolumeClaimUpdateStrategyType
	return sts
}

// resizeTemplates sets the storage request of the first n templates.
func resizeTemplates(s *v1beta1.StatefulSet, size string, n int) {
	for i := range min(n, len(s.Spec.VolumeClaimTemplates)) {
		s.Spec.VolumeClaimTemplates[i].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	}
}

// tryUpdateStatefulSet applies change and returns the update's error,
// retrying only conflicts.
func tryUpdateStatefulSet(ctx context.Context, t *testing.T, f *framework.Framework, name string, change func(*v1beta1.StatefulSet)) error {
	t.Helper()
	sets := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace)
	var last error
	err := framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		s, err := sets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(s)
		_, last = sets.Update(ctx, s, metav1.UpdateOptions{})
		return !apierrors.IsConflict(last), nil
	})
	require.NoError(t, err, "update StatefulSet %s", name)
	return last
}

// setClaims lists the PVCs of the set's templates, by name.
func setClaims(ctx context.Context, t *testing.T, f *framework.Framework, s *v1beta1.StatefulSet) []corev1.PersistentVolumeClaim {
	t.Helper()
	list, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.PersistentVolumeClaim
	for _, pvc := range list.Items {
		for _, tmpl := range s.Spec.VolumeClaimTemplates {
			if strings.HasPrefix(pvc.Name, tmpl.Name+"-"+s.Name+"-") {
				out = append(out, pvc)
			}
		}
	}
	return out
}

// templateOf is the template a PVC of the set was made from.
func templateOf(s *v1beta1.StatefulSet, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	for i := range s.Spec.VolumeClaimTemplates {
		if strings.HasPrefix(pvc.Name, s.Spec.VolumeClaimTemplates[i].Name+"-"+s.Name+"-") {
			return &s.Spec.VolumeClaimTemplates[i]
		}
	}
	return nil
}

// resizeTimeout bounds a wait that spans a resize of every PVC of a set,
// pod after pod.
const resizeTimeout = 4 * time.Minute

// resizeConcurrency is how many Resize PVC table cases run at once.
const resizeConcurrency = 6

// waitClaimCapacity waits, as OpenKruise's waitForPVCCapacity, until
// every PVC of the set (one per replica and template) has a capacity
// equal to its request, and ok accepts its capacity against its
// template's request (Cmp: -1, 0, 1). It returns the PVCs whose capacity
// differs from their template's.
func waitClaimCapacity(ctx context.Context, t *testing.T, f *framework.Framework, name string, ok func(cmp int) bool) []string {
	t.Helper()
	var differ, problems []string
	err := framework.WaitFor(ctx, resizeTimeout, func(ctx context.Context) (bool, error) {
		s, err := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		differ, problems = nil, nil
		claims := setClaims(ctx, t, f, s)
		if want := int(ptr.Deref(s.Spec.Replicas, 1)) * len(s.Spec.VolumeClaimTemplates); len(claims) != want {
			problems = append(problems, fmt.Sprintf("%d PVCs, want %d", len(claims), want))
		}
		for _, pvc := range claims {
			capacity, request := pvc.Status.Capacity[corev1.ResourceStorage], pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			want := templateOf(s, &pvc).Spec.Resources.Requests[corev1.ResourceStorage]
			cmp := capacity.Cmp(want)
			if cmp != 0 {
				differ = append(differ, pvc.Name)
			}
			if capacity.Cmp(request) != 0 || !ok(cmp) {
				problems = append(problems, fmt.Sprintf("%s: capacity %s, request %s, template %s", pvc.Name, capacity.String(), request.String(), want.String()))
			}
		}
		return len(problems) == 0, nil
	})
	require.NoError(t, err, "StatefulSet %s: PVC capacities; %v", name, problems)
	slices.Sort(differ)
	return differ
}

// claimsReady: every status.volumeClaims entry counts n compatible and n
// compatible-ready replicas (OpenKruise's WaitForStatusPVCReadyReplicas).
func claimsReady(n int32) func(*v1beta1.StatefulSet) bool {
	return func(s *v1beta1.StatefulSet) bool {
		for _, vc := range s.Status.VolumeClaims {
			if vc.CompatibleReplicas != n || vc.CompatibleReadyReplicas != n {
				return false
			}
		}
		return len(s.Status.VolumeClaims) == len(s.Spec.VolumeClaimTemplates)
	}
}

// resizeCase is one row of OpenKruise's "Resize PVC" tables.
type resizeCase struct {
	name string
	// short names the case's set (a revision label must stay within 63
	// characters): the policy and the row, such as "inplace-3".
	short   string
	inPlace bool
	classes []string
	// resize is how many templates, from the first, grow.
	resize int
	// refused: the webhook refuses the update.
	refused bool
}

// resizeCases are OpenKruise's 7 rows per pod update policy.
func resizeCases(recreate, inplace string, names ...string) []resizeCase {
	rows := []resizeCase{
		{classes: []string{canExpandClass}, resize: 2},
		{classes: []string{cannotExpandClass}, resize: 2, refused: true},
		{classes: []string{canExpandClass, canExpandClass}, resize: 2},
		{classes: []string{cannotExpandClass, cannotExpandClass}, resize: 2, refused: true},
		{classes: []string{canExpandClass, cannotExpandClass}, resize: 1},
		{classes: []string{cannotExpandClass, canExpandClass}, resize: 1, refused: true},
		{classes: []string{cannotExpandClass, canExpandClass}, resize: 2, refused: true},
	}
	var out []resizeCase
	for _, policy := range []struct {
		prefix  string
		inPlace bool
	}{{recreate, false}, {inplace, true}} {
		for i, r := range rows {
			r.name, r.inPlace = policy.prefix+names[i], policy.inPlace
			r.short = fmt.Sprintf("%s%d", strings.TrimSuffix(policy.prefix, "_"), i)
			out = append(out, r)
		}
	}
	return out
}

// TestStatefulSetResizePVC ports "Resize PVC" (an image update and bigger
// templates at once) and "Resize PVC only" (bigger templates alone: no new
// revision, the pods are not touched), 14 rows each, with OpenKruise's
// validateExpandVCT: 3 replicas ready; the update; refused, or every PVC's
// capacity equal to its template and every template's PVCs compatible
// and ready on the 3 replicas. Plus "should perform rolling updates with
// specified-deleted with pvc" and the four "Resize PVC with rollback"
// cases (resizeRollbackCases). One test, so that the storage classes it
// may create outlive every case.
func TestStatefulSetResizePVC(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	ensureExpansionClasses(ctx, t, f)
	runResizer(t, f, f.Namespace)
	newImage := f.Image("testserver:v2")

	// At most resizeConcurrency cases run at once: 28 sets of 3 pods
	// recreated one after another at the same time load the shared
	// cluster more than its other tests can take.
	slots := make(chan struct{}, resizeConcurrency)
	expand := func(t *testing.T, name string, c resizeCase, image bool) {
		slots <- struct{}{}
		defer func() { <-slots }()
		createStatefulSet(ctx, t, f, resizeSet(f, name, 3, c.inPlace, c.classes...))
		waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))
		before := uidsByName(setPods(ctx, t, f, name))
		err := tryUpdateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			if image {
				s.Spec.Template.Spec.Containers[0].Image = newImage
			}
			resizeTemplates(s, resizeNewSize, c.resize)
		})
		if c.refused {
			require.Error(t, err, "the webhook refuses a template its storage class cannot expand")
			require.Contains(t, err.Error(), "storage class "+cannotExpandClass+" does not allow volume expansion")
			return
		}
		require.NoError(t, err)
		waitStatefulSet(ctx, t, f, name, "the update observed", observed)
		waitClaimCapacity(ctx, t, f, name, func(cmp int) bool { return cmp == 0 })
		s := waitStatefulSet(ctx, t, f, name, "3 ready, every PVC compatible and ready", func(s *v1beta1.StatefulSet) bool {
			return s.Status.Replicas == 3 && s.Status.ReadyReplicas == 3 && claimsReady(3)(s)
		})
		if image {
			// Beyond OpenKruise's assertions: the update went through.
			s = waitStatefulSet(ctx, t, f, name, "3 pods at the new revision", settledSet(3))
			requireAllAt(t, setPods(ctx, t, f, name), s.Status.UpdateRevision, newImage)
		} else {
			// Beyond OpenKruise's assertions: the pods are not touched.
			require.Equal(t, s.Status.CurrentRevision, s.Status.UpdateRevision, "a template change alone makes no revision")
			pods := setPods(ctx, t, f, name)
			require.Equal(t, before, uidsByName(pods), "the same pods")
			for _, p := range pods {
				require.Zero(t, p.Status.ContainerStatuses[0].RestartCount, "pod %s not restarted", p.Name)
			}
		}
	}

	for _, c := range resizeCases("recreate_", "inplace_",
		"expand_vct_with_sc_can_expand", "expand_vct_with_sc_cannot_expand",
		"expand_vct_with_2sc_can_expand", "expand_vct_with_2sc_cannot_expand",
		"expand_only_can_expand_vct_with_mixed_sc", "expand_only_cannot_expand_vct_with_mixed_sc",
		"expand_both_cannot_expand_vct_with_mixed_sc") {
		t.Run("Resize PVC "+c.name, func(t *testing.T) {
			t.Parallel()
			expand(t, "resize-"+c.short, c, true)
		})
	}
	for _, c := range resizeCases("recreate_", "inplace_",
		"with_sc_can_expand", "with_sc_cannot_expand", "with_2sc_can_expand", "with_2sc_cannot_expand",
		"expand_only_can_with_mixed_sc", "expand_only_cannot_with_mixed_sc", "expand_both_cannot_with_mixed_sc") {
		t.Run("Resize PVC only "+c.name, func(t *testing.T) {
			t.Parallel()
			expand(t, "only-"+c.short, c, false)
		})
	}

	// OpenKruise: "should perform rolling updates with specified-deleted
	// with pvc": 4 replicas; pod 1 deleted by label; then an image
	// update with partition 2 and a 2Gi template; pods 2 and 1 deleted by
	// label: pods 2 and 3 run the new revision, 0 and 1 the old, and only
	// the PVCs of 2 and 3 grow.
	t.Run("Resize PVC should perform rolling updates with specified-deleted with pvc", func(t *testing.T) {
		t.Parallel()
		const name = "specified"
		createStatefulSet(ctx, t, f, resizeSet(f, name, 4, true, canExpandClass))
		pods := waitSetPods(ctx, t, f, name, "4 running and ready", runningReady(4, 4))
		s := waitStatefulSet(ctx, t, f, name, "4 ready", settledSet(4))
		requireAllAt(t, pods, s.Status.CurrentRevision, "")
		specifiedDelete(ctx, t, f, name, 4, 1)

		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = newImage
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
			resizeTemplates(s, resizeNewSize, 1)
		})
		specifiedDelete(ctx, t, f, name, 4, 2)
		waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
		specifiedDelete(ctx, t, f, name, 4, 1)
		s, pods = waitPartitioned(ctx, t, f, name, nil)
		for i := range pods {
			want := s.Status.CurrentRevision
			if i >= 2 {
				want = s.Status.UpdateRevision
			}
			require.Equal(t, want, revisionOf(&pods[i]), "pod %s", pods[i].Name)
		}
		waitStatefulSet(ctx, t, f, name, "the PVCs of pods 2 and 3 compatible and ready", claimsReady(2))
		differ := waitClaimCapacity(ctx, t, f, name, func(int) bool { return true })
		require.Equal(t, []string{"data0-" + name + "-0", "data0-" + name + "-1"}, differ, "the PVCs below the partition keep 1Gi")
	})

	resizeRollbackCases(ctx, t, f)
}

// resizeRollbackCases ports "Resize PVC with rollback", as subtests of t:
// 3 replicas on one 1Gi template of canExpandClass; an image update with
// a 2Gi template and partition 2 (pod 2 and its PVC move, 0 and 1 stay),
// then a roll back of the image (partition 0), each case going on from
// there.
func resizeRollbackCases(ctx context.Context, t *testing.T, f *framework.Framework) {
	oldImage, newImage := f.Image("testserver:latest"), f.Image("testserver:v2")

	// start runs the common part and returns a third image reference (the
	// old image by digest) for the cases that move on to another image.
	start := func(t *testing.T, name string, rollback func(*v1beta1.StatefulSet)) string {
		t.Helper()
		createStatefulSet(ctx, t, f, resizeSet(f, name, 3, false, canExpandClass))
		waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))
		another := imageByDigest(t, f, &setPods(ctx, t, f, name)[0], "testserver")
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = newImage
			resizeTemplates(s, resizeNewSize, 1)
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
		})
		waitStatefulSet(ctx, t, f, name, "3 ready, pod 2's PVC compatible and ready", func(s *v1beta1.StatefulSet) bool {
			return s.Status.ReadyReplicas == 3 && claimsReady(1)(s)
		})
		s, pods := waitPartitioned(ctx, t, f, name, nil)
		requirePartitioned(t, s, pods, oldImage, newImage)
		updateStatefulSet(ctx, t, f, name, rollback)
		waitStatefulSet(ctx, t, f, name, "3 ready after the roll back", func(s *v1beta1.StatefulSet) bool {
			return s.Status.Replicas == 3 && s.Status.ReadyReplicas == 3
		})
		return another
	}
	rollbackImage := func(s *v1beta1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = oldImage
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
	}
	equal := func(cmp int) bool { return cmp == 0 }
	atLeast := func(cmp int) bool { return cmp >= 0 }
	ready := func(n int32) func(*v1beta1.StatefulSet) bool {
		return func(s *v1beta1.StatefulSet) bool {
			return s.Status.Replicas == 3 && s.Status.ReadyReplicas == 3 && claimsReady(n)(s)
		}
	}

	t.Run("Resize PVC with rollback partition 2, rollback only image", func(t *testing.T) {
		t.Parallel()
		const name = "image"
		start(t, name, rollbackImage)
		waitClaimCapacity(ctx, t, f, name, equal)
		waitStatefulSet(ctx, t, f, name, "every PVC compatible and ready", ready(3))
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) { resizeTemplates(s, "3Gi", 1) })
		waitClaimCapacity(ctx, t, f, name, equal)
		waitStatefulSet(ctx, t, f, name, "every PVC at 3Gi, compatible and ready", ready(3))
	})

	t.Run("Resize PVC with rollback partition 2, rollback only image and update to another image", func(t *testing.T) {
		t.Parallel()
		const name = "another"
		another := start(t, name, rollbackImage)
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = another })
		waitClaimCapacity(ctx, t, f, name, equal)
		waitStatefulSet(ctx, t, f, name, "every PVC compatible and ready", ready(3))
	})

	t.Run("Resize PVC with rollback partition 2, rollback image and pvc size", func(t *testing.T) {
		t.Parallel()
		const name = "size"
		another := start(t, name, func(s *v1beta1.StatefulSet) {
			rollbackImage(s)
			resizeTemplates(s, "1Gi", 1)
		})
		waitClaimCapacity(ctx, t, f, name, atLeast)
		waitStatefulSet(ctx, t, f, name, "every PVC compatible and ready", ready(3))
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = another })
		waitClaimCapacity(ctx, t, f, name, atLeast)
		waitStatefulSet(ctx, t, f, name, "every PVC compatible and ready", ready(3))
	})

	t.Run("Resize PVC with rollback partition 2, rollback image and change to OnPVCDelete update strategy", func(t *testing.T) {
		t.Parallel()
		const name = "ondelete"
		another := start(t, name, func(s *v1beta1.StatefulSet) {
			rollbackImage(s)
			s.Spec.VolumeClaimUpdateStrategy.Type = v1beta1.OnPVCDeleteVolumeClaimUpdateStrategyType
		})
		waitStatefulSet(ctx, t, f, name, "only pod 2's PVC compatible and ready", ready(1))
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = another })
		waitStatefulSet(ctx, t, f, name, "3 ready at the other image", func(s *v1beta1.StatefulSet) bool {
			return settledSet(3)(s) && claimsReady(1)(s)
		})
	})
}
