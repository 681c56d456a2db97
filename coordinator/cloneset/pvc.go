package cloneset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// A CloneSet with volumeClaimTemplates gives each pod one PVC per template,
// named <template>-<cloneset>-<instance id> and labelled with the pod's
// apps.kruise.io/cloneset-instance-id. The CloneSet owns the PVCs (not the
// pod), so they outlive a pod that someone else deletes or evicts:
//   - when the CloneSet deletes a pod (scale-in, specified delete, recreate
//     update), it deletes the pod's PVCs with it;
//   - when a pod disappeared otherwise, its PVCs are "unused": with
//     scaleStrategy.enablePVCReuse the next pod created takes the old
//     instance ID and so the old PVCs; without it they are deleted and the
//     replacement gets fresh ones.

// claimName is the name of the PVC of template tmpl for instance id.
func claimName(tmpl string, cs *v1beta1.CloneSet, id string) string {
	return fmt.Sprintf("%s-%s-%s", tmpl, cs.Name, id)
}

// ownedClaims lists the PVCs cs owns (by owner UID), by name.
func (c *Controller) ownedClaims(cs *v1beta1.CloneSet) ([]*corev1.PersistentVolumeClaim, error) {
	if c.claims == nil {
		return nil, nil
	}
	objs, err := c.claims.ByIndex(byOwner, string(cs.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.PersistentVolumeClaim, 0, len(objs))
	for _, o := range objs {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok {
			out = append(out, pvc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// unusedClaimIDs are the instance IDs of cs's PVCs that no pod of cs (not
// even a terminating one) carries, sorted.
func unusedClaimIDs(claims []*corev1.PersistentVolumeClaim, pods []*corev1.Pod) []string {
	used := map[string]bool{}
	for _, p := range pods {
		used[p.Labels[wellknown.LabelCloneSetInstanceID]] = true
	}
	seen := map[string]bool{}
	var ids []string
	for _, pvc := range claims {
		id := pvc.Labels[wellknown.LabelCloneSetInstanceID]
		if id == "" || used[id] || seen[id] || pvc.DeletionTimestamp != nil {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids
}

// withClaims points the pod's volumes at its instance's PVCs: a template
// volume of the same name is replaced, others are added.
func withClaims(pod *corev1.Pod, cs *v1beta1.CloneSet, id string) {
	for _, t := range cs.Spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(t.Name, cs, id)},
		}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == t.Name {
				pod.Spec.Volumes[i], replaced = v, true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
}

// createClaims creates the PVCs of instance id that do not exist yet.
func (c *Controller) createClaims(ctx context.Context, cs *v1beta1.CloneSet, id string) error {
	for _, t := range cs.Spec.VolumeClaimTemplates {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: claimName(t.Name, cs, id), Namespace: cs.Namespace,
				Labels: map[string]string{}, Annotations: maps.Clone(t.Annotations),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"))},
			},
			Spec: *t.Spec.DeepCopy(),
		}
		maps.Copy(pvc.Labels, t.Labels)
		maps.Copy(pvc.Labels, cs.Spec.Selector.MatchLabels)
		pvc.Labels[wellknown.LabelCloneSetInstanceID] = id
		if c.claims != nil {
			if obj, exists, _ := c.claims.GetByKey(pvc.Namespace + "/" + pvc.Name); exists {
				if old, ok := obj.(*corev1.PersistentVolumeClaim); ok && old.DeletionTimestamp != nil {
					// A pod on a PVC being deleted would hang: wait until
					// it is gone and create it anew.
					return fmt.Errorf("PVC %s is being deleted; the pod waits for it to go", pvc.Name)
				}
				continue
			}
		}
		_, err := c.o.Client.CoreV1().PersistentVolumeClaims(cs.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			c.o.Recorder.Eventf(cs, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "create PVC %s: %v", pvc.Name, err)
			return fmt.Errorf("create PVC %s: %w", pvc.Name, err)
		}
	}
	return nil
}

// deleteClaims deletes cs's PVCs of instance id.
func (c *Controller) deleteClaims(ctx context.Context, cs *v1beta1.CloneSet, claims []*corev1.PersistentVolumeClaim, id, why string) error {
	var errs []error
	for _, pvc := range claims {
		if pvc.Labels[wellknown.LabelCloneSetInstanceID] != id || pvc.DeletionTimestamp != nil {
			continue
		}
		err := c.o.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pvc.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.o.Recorder.Eventf(cs, nil, corev1.EventTypeWarning, "FailedDelete", "Delete", "delete PVC %s (%s): %v", pvc.Name, why, err)
			errs = append(errs, fmt.Errorf("delete PVC %s: %w", pvc.Name, err))
			continue
		}
		if err == nil {
			c.o.Recorder.Eventf(cs, nil, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "deleted PVC %s: %s", pvc.Name, why)
		}
	}
	return errors.Join(errs...)
}
