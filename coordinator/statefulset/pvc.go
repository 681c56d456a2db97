package statefulset

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Each pod gets one PVC per volumeClaimTemplate, named
// <template>-<set>-<ordinal> as upstream names them, created before the
// pod and never deleted with it: a pod recreated at the same ordinal finds
// its data again. persistentVolumeClaimRetentionPolicy decides, through
// owner references the garbage collector acts on, when they go:
//   - whenDeleted Delete: each PVC is owned by the StatefulSet, so it is
//     deleted with the set;
//   - whenScaled Delete: the PVCs of a condemned ordinal are owned by its
//     pod alone before the pod is deleted, so they go with the pod.
// Retain (the default for both) leaves them.

// claimName is the PVC of template tmpl for ordinal ord of set.
func claimName(tmpl string, set *v1beta1.StatefulSet, ord int) string {
	return fmt.Sprintf("%s-%s-%d", tmpl, set.Name, ord)
}

// retention returns the set's PVC retention policy, defaults filled in.
func retention(set *v1beta1.StatefulSet) (whenDeleted, whenScaled v1beta1.PersistentVolumeClaimRetentionPolicyType) {
	whenDeleted, whenScaled = v1beta1.RetainPersistentVolumeClaimRetentionPolicyType, v1beta1.RetainPersistentVolumeClaimRetentionPolicyType
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		if p.WhenDeleted != "" {
			whenDeleted = p.WhenDeleted
		}
		if p.WhenScaled != "" {
			whenScaled = p.WhenScaled
		}
	}
	return whenDeleted, whenScaled
}

// wantOwners returns refs with the set's (and, when pod is condemned and
// given, the pod's) owner references added or removed as the retention
// policy asks. Other owners stay.
func wantOwners(refs []metav1.OwnerReference, set *v1beta1.StatefulSet, pod *corev1.Pod, condemned bool) []metav1.OwnerReference {
	whenDeleted, whenScaled := retention(set)
	out := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool {
		return r.UID == set.UID || (pod != nil && r.UID == pod.UID)
	})
	if condemned && pod != nil && whenScaled == v1beta1.DeletePersistentVolumeClaimRetentionPolicyType {
		// The pod alone: the garbage collector deletes a dependent only
		// once all its owners are gone.
		return append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID})
	}
	if whenDeleted == v1beta1.DeletePersistentVolumeClaimRetentionPolicyType {
		out = append(out, metav1.OwnerReference{
			APIVersion: kind.GroupVersion().String(), Kind: kind.Kind, Name: set.Name, UID: set.UID,
			BlockOwnerDeletion: ptr.To(true),
		})
	}
	return out
}

// sameOwners compares owner references by UID.
func sameOwners(a, b []metav1.OwnerReference) bool {
	ua := make([]types.UID, 0, len(a))
	for _, r := range a {
		ua = append(ua, r.UID)
	}
	ub := make([]types.UID, 0, len(b))
	for _, r := range b {
		ub = append(ub, r.UID)
	}
	slices.Sort(ua)
	slices.Sort(ub)
	return slices.Equal(ua, ub)
}

// claim looks up a PVC in the informer.
func (c *Controller) claim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	obj, exists, err := c.claims.GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	return pvc, ok
}

// ensureClaims creates the missing PVCs of ordinal ord. It returns false
// (and no error) when one of them is still being deleted: the pod must
// wait for a fresh one rather than bind to a claim about to go.
func (c *Controller) ensureClaims(ctx context.Context, set *v1beta1.StatefulSet, ord int) (bool, error) {
	for _, tmpl := range set.Spec.VolumeClaimTemplates {
		name := claimName(tmpl.Name, set, ord)
		if pvc, ok := c.claim(set.Namespace, name); ok {
			if pvc.DeletionTimestamp != nil {
				return false, nil
			}
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: set.Namespace,
				Labels: maps.Clone(tmpl.Labels), Annotations: maps.Clone(tmpl.Annotations),
			},
			Spec: *tmpl.Spec.DeepCopy(),
		}
		if pvc.Labels == nil {
			pvc.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			maps.Copy(pvc.Labels, set.Spec.Selector.MatchLabels)
		}
		pvc.OwnerReferences = wantOwners(nil, set, nil, false)
		_, err := c.o.Client.CoreV1().PersistentVolumeClaims(set.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			c.o.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "create PVC %s: %v", name, err)
			return false, fmt.Errorf("create PVC %s for pod %s-%d: %w", name, set.Name, ord, err)
		}
		if err == nil {
			c.o.Recorder.Eventf(set, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created PVC %s for pod %s-%d", name, set.Name, ord)
		}
	}
	return true, nil
}

// retain brings the owner references of the PVCs of pod (condemned or a
// replica) in line with the retention policy.
func (c *Controller) retain(ctx context.Context, set *v1beta1.StatefulSet, pod *corev1.Pod, ord int, condemned bool) error {
	for _, tmpl := range set.Spec.VolumeClaimTemplates {
		pvc, ok := c.claim(set.Namespace, claimName(tmpl.Name, set, ord))
		if !ok || pvc.DeletionTimestamp != nil {
			continue
		}
		want := wantOwners(pvc.OwnerReferences, set, pod, condemned)
		if sameOwners(want, pvc.OwnerReferences) {
			continue
		}
		next := pvc.DeepCopy()
		next.OwnerReferences = want
		if _, err := c.o.Client.CoreV1().PersistentVolumeClaims(set.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("set the owners of PVC %s for the retention policy: %w", pvc.Name, err)
		}
	}
	return nil
}

// resize raises r's PVC's storage request to its template's, marking it
// as the set's so that its growth wakes the set (resizedClaimHandler). A
// merge patch of that one field: the apiserver lets nothing else of a
// bound claim's spec change. The storage class must allow volume
// expansion: the apiserver refuses the change otherwise.
func (c *Controller) resize(ctx context.Context, set *v1beta1.StatefulSet, r claimResize) error {
	fail := func(err error) error {
		c.o.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "FailedResize", "Resize", "resize PVC %s of pod %s: %v", r.pvc.Name, r.pod, err)
		return fmt.Errorf("resize PVC %s of pod %s: %w", r.pvc.Name, r.pod, err)
	}
	if name := ptr.Deref(r.pvc.Spec.StorageClassName, ""); name != "" {
		sc, err := c.o.Client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fail(fmt.Errorf("get its storage class: %w", err))
		}
		if !ptr.Deref(sc.AllowVolumeExpansion, false) {
			return fail(fmt.Errorf("storage class %s does not allow volume expansion (allowVolumeExpansion); delete the PVC and then pod %s, or set volumeClaimUpdateStrategy.type OnDelete", name, r.pod))
		}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid":         r.pvc.UID,
			"annotations": map[string]string{wellknown.AnnotationPVCOwnedByAdvancedStatefulSet: set.Name},
		},
		"spec": map[string]any{"resources": map[string]any{"requests": map[string]string{string(corev1.ResourceStorage): r.storage.String()}}},
	})
	if err != nil {
		return fail(err)
	}
	if _, err := c.o.Client.CoreV1().PersistentVolumeClaims(r.pvc.Namespace).Patch(ctx, r.pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: made again from the template
		}
		return fail(err)
	}
	c.o.Recorder.Eventf(set, nil, corev1.EventTypeNormal, "SuccessfulResize", "Resize", "resized PVC %s of pod %s to %s", r.pvc.Name, r.pod, r.storage.String())
	return nil
}

// resizedClaimHandler queues the Advanced StatefulSet named in a changed
// PVC's AnnotationPVCOwnedByAdvancedStatefulSet: its capacity may have
// reached the request the set waits for.
func (c *Controller) resizedClaimHandler() cache.ResourceEventHandlerFuncs {
	queue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pvc, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return
		}
		if set := pvc.Annotations[wellknown.AnnotationPVCOwnedByAdvancedStatefulSet]; set != "" {
			c.Queue.Add(pvc.Namespace + "/" + set)
		}
	}
	return cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) { queue(obj) }, DeleteFunc: queue}
}
