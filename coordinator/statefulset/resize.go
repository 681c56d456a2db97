package statefulset

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// Automatic PVC resizing (volumeClaimUpdateStrategy OnPodRollingUpdate,
// gate StatefulSetAutoResizePVCGate), as OpenKruise does it: when a
// volumeClaimTemplate asks for more storage than a pod's PVC has, the
// rolling update first raises that PVC's request (the storage driver's
// resizer grows the volume), waits until its capacity follows (or only the
// node's filesystem resize is left, which the kubelet does on mount), and
// only then updates or recreates the pod, which keeps its PVC. It goes pod
// by pod, highest ordinal first, within partition and maxUnavailable; a
// PVC still growing makes its pod unavailable. A template change alone
// makes no new revision, so such a change resizes PVCs without touching
// the pods. PVCs are never shrunk, and never recreated: one whose storage
// class or access modes differ from its template stops the update until
// it is deleted.

// claimFit is how a PVC compares with its volume claim template.
type claimFit int

const (
	// claimMatches: the template's storage class and access modes, and
	// at least its storage request.
	claimMatches claimFit = iota
	// claimTooSmall: compatible, with less storage than the template asks.
	claimTooSmall
	// claimIncompatible: another storage class or other access modes,
	// which no resize changes.
	claimIncompatible
)

// fitOf compares pvc with tmpl. A storage class left unset on either side
// (the cluster's default then applies) is not a difference.
func fitOf(pvc, tmpl *corev1.PersistentVolumeClaim) claimFit {
	if a, b := pvc.Spec.StorageClassName, tmpl.Spec.StorageClassName; a != nil && b != nil && *a != *b {
		return claimIncompatible
	}
	if !slices.Equal(pvc.Spec.AccessModes, tmpl.Spec.AccessModes) {
		return claimIncompatible
	}
	if have, want := storageOf(pvc.Spec.Resources.Requests), storageOf(tmpl.Spec.Resources.Requests); have.Cmp(want) < 0 {
		return claimTooSmall
	}
	return claimMatches
}

// storageOf is the storage quantity in l, zero when there is none.
func storageOf(l corev1.ResourceList) resource.Quantity {
	return l[corev1.ResourceStorage]
}

// claimReady reports whether the PVC's capacity has reached its request.
func claimReady(pvc *corev1.PersistentVolumeClaim) bool {
	capacity, request := storageOf(pvc.Status.Capacity), storageOf(pvc.Spec.Resources.Requests)
	return capacity.Cmp(request) >= 0
}

// resizeDone reports whether nothing is left of a resize but what the
// kubelet does when it mounts the volume.
func resizeDone(pvc *corev1.PersistentVolumeClaim) bool {
	if claimReady(pvc) {
		return true
	}
	return slices.ContainsFunc(pvc.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
		return c.Type == corev1.PersistentVolumeClaimFileSystemResizePending
	})
}

// templateClaim is a PVC of one ordinal and its template.
type templateClaim struct {
	tmpl *corev1.PersistentVolumeClaim
	pvc  *corev1.PersistentVolumeClaim
}

// claimsOf returns the bound PVCs of ordinal ord that claim finds, with
// their templates. Missing PVCs and PVCs being deleted are left out (they
// are created again from the template as they are), and so are unbound
// ones: they have no capacity yet, and the apiserver resizes bound claims
// only.
func claimsOf(set *v1beta1.StatefulSet, ord int, claim func(name string) *corev1.PersistentVolumeClaim) []templateClaim {
	var out []templateClaim
	for i := range set.Spec.VolumeClaimTemplates {
		tmpl := &set.Spec.VolumeClaimTemplates[i]
		pvc := claim(claimName(tmpl.Name, set, ord))
		if pvc != nil && pvc.DeletionTimestamp == nil && pvc.Status.Phase == corev1.ClaimBound {
			out = append(out, templateClaim{tmpl: tmpl, pvc: pvc})
		}
	}
	return out
}

// claimResize is a PVC whose storage request the plan raises to its
// template's.
type claimResize struct {
	pvc     *corev1.PersistentVolumeClaim
	storage resource.Quantity
	// pod is the pod the PVC belongs to, for the event.
	pod string
}

// claimWait is how long a plan that waits on PVCs looks again at the
// latest: a PVC it did not resize itself wakes nobody when it changes.
const claimWait = 10 * time.Second

// volumeClaimStatus counts, per template, the wanted ordinals whose PVC
// matches it, and of those the ones whose capacity has followed.
func volumeClaimStatus(set *v1beta1.StatefulSet, ords []int, claim func(name string) *corev1.PersistentVolumeClaim) []v1beta1.VolumeClaimStatus {
	if len(set.Spec.VolumeClaimTemplates) == 0 {
		return nil
	}
	out := make([]v1beta1.VolumeClaimStatus, len(set.Spec.VolumeClaimTemplates))
	for i := range set.Spec.VolumeClaimTemplates {
		out[i].VolumeClaimName = set.Spec.VolumeClaimTemplates[i].Name
	}
	for _, ord := range ords {
		for i := range set.Spec.VolumeClaimTemplates {
			tmpl := &set.Spec.VolumeClaimTemplates[i]
			pvc := claim(claimName(tmpl.Name, set, ord))
			if pvc == nil || pvc.DeletionTimestamp != nil || fitOf(pvc, tmpl) != claimMatches {
				continue
			}
			out[i].CompatibleReplicas++
			if claimReady(pvc) {
				out[i].CompatibleReadyReplicas++
			}
		}
	}
	return out
}

// expandClaims plans the resize of the PVCs of pod (ordinal ord) that ask
// for less storage than their templates. pending is true while one of its
// PVCs is still to grow; stop is true, with p.claimProblem set, when a PVC
// can never match its template.
func (p *plan) expandClaims(in input, pod *corev1.Pod, ord int) (pending, stop bool) {
	for _, c := range claimsOf(in.set, ord, in.claim) {
		switch fitOf(c.pvc, c.tmpl) {
		case claimIncompatible:
			p.claimProblem = fmt.Sprintf("PVC %s of pod %s differs from volumeClaimTemplate %s in storage class or access modes, which a resize cannot change; delete the PVC and then pod %s (both come back from the templates, without the old data), or set volumeClaimUpdateStrategy.type OnDelete",
				c.pvc.Name, pod.Name, c.tmpl.Name, pod.Name)
			p.blocked = p.claimProblem
			p.waitFor(claimWait)
			return true, true
		case claimTooSmall:
			p.resizes = append(p.resizes, claimResize{pvc: c.pvc, storage: storageOf(c.tmpl.Spec.Resources.Requests), pod: pod.Name})
			pending = true
		default:
			pending = pending || !resizeDone(c.pvc)
		}
	}
	if pending {
		p.waitFor(claimWait)
	}
	return pending, false
}

// claimsGrowing reports whether a PVC of ordinal ord is still being
// resized (its pod counts as unavailable meanwhile).
func claimsGrowing(in input, ord int) bool {
	return slices.ContainsFunc(claimsOf(in.set, ord, in.claim), func(c templateClaim) bool { return !resizeDone(c.pvc) })
}
