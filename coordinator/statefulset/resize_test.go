package statefulset

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// claimOf is a bound PVC with a request and a capacity.
func claimOf(name, class, request, capacity string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}},
		},
	}
	if capacity != "" {
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
	return pvc
}

func TestFitOf(t *testing.T) {
	tmpl := claimOf("data", "fast", "2Gi", "")
	other := claimOf("x", "fast", "2Gi", "")
	other.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	unset := claimOf("x", "", "1Gi", "")
	unset.Spec.StorageClassName = nil
	for _, tc := range []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want claimFit
	}{
		{"same size", claimOf("x", "fast", "2Gi", "2Gi"), claimMatches},
		{"bigger is fine", claimOf("x", "fast", "3Gi", "3Gi"), claimMatches},
		{"smaller", claimOf("x", "fast", "1Gi", "1Gi"), claimTooSmall},
		{"another class", claimOf("x", "slow", "2Gi", "2Gi"), claimIncompatible},
		{"other access modes", other, claimIncompatible},
		{"class unset: the default, not a difference", unset, claimTooSmall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, fitOf(tc.pvc, tmpl))
		})
	}
}

// resizeInput is a 3-replica set at revision "new" with one template
// "data" of 2Gi and resizing on, whose PVCs are claims (by ordinal).
func resizeInput(claims map[int]*corev1.PersistentVolumeClaim) input {
	set := testSet(3, appsv1.OrderedReadyPodManagement)
	set.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{*claimOf("data", "fast", "2Gi", "")}
	set.Spec.VolumeClaimUpdateStrategy.Type = v1beta1.OnPodRollingUpdateVolumeClaimUpdateStrategyType
	byName := map[string]*corev1.PersistentVolumeClaim{}
	for ord, pvc := range claims {
		pvc.Name = fmt.Sprintf("data-web-%d", ord)
		byName[pvc.Name] = pvc
	}
	return input{
		set: set, current: "new", update: "new", now: now, updatesSeen: true, resizeClaims: true,
		pods:  []*corev1.Pod{pod(0, "new", true), pod(1, "new", true), pod(2, "new", true)},
		claim: func(name string) *corev1.PersistentVolumeClaim { return byName[name] },
	}
}

func resized(p *plan) []string {
	return names(p.resizes, func(r claimResize) string { return r.pvc.Name + "@" + r.pod })
}

func TestPlanResizesClaims(t *testing.T) {
	small := func() *corev1.PersistentVolumeClaim { return claimOf("", "fast", "1Gi", "1Gi") }
	done := func() *corev1.PersistentVolumeClaim { return claimOf("", "fast", "2Gi", "2Gi") }
	growing := func() *corev1.PersistentVolumeClaim { return claimOf("", "fast", "2Gi", "1Gi") }
	for _, tc := range []struct {
		name    string
		claims  map[int]*corev1.PersistentVolumeClaim
		edit    func(*input)
		resized []string
		deleted []string
		blocked string
		status  []v1beta1.VolumeClaimStatus
	}{
		{
			name:    "template only: the highest ordinal's PVC first, the pod untouched",
			claims:  map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: small()},
			resized: []string{"data-web-2@web-2"},
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data"}},
		},
		{
			name:   "a PVC still growing holds the next (maxUnavailable 1)",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: growing()},
			status: []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data", CompatibleReplicas: 1}},
		},
		{
			name:   "a specified delete waits while another pod's PVC grows (maxUnavailable 1)",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: growing()},
			edit: func(in *input) {
				in.pods[0].Labels[wellknown.LabelSpecifiedDelete] = "true"
			},
			status: []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data", CompatibleReplicas: 1}},
		},
		{
			name:    "grown: the next one",
			claims:  map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: done()},
			resized: []string{"data-web-1@web-1"},
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data", CompatibleReplicas: 1, CompatibleReadyReplicas: 1}},
		},
		{
			name:   "with a new revision: the PVC grows before the pod is recreated",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: small()},
			edit: func(in *input) {
				in.current, in.pods = "old", []*corev1.Pod{pod(0, "old", true), pod(1, "old", true), pod(2, "old", true)}
			},
			resized: []string{"data-web-2@web-2"},
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data"}},
		},
		{
			name:   "grown: then the pod is recreated",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: done()},
			edit: func(in *input) {
				in.current, in.pods = "old", []*corev1.Pod{pod(0, "old", true), pod(1, "old", true), pod(2, "old", true)}
			},
			deleted: []string{"web-2"},
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data", CompatibleReplicas: 1, CompatibleReadyReplicas: 1}},
		},
		{
			name:   "partition 2 keeps ordinals 0 and 1",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: done()},
			edit: func(in *input) {
				in.set.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
			},
			status: []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data", CompatibleReplicas: 1, CompatibleReadyReplicas: 1}},
		},
		{
			name:   "resizing off (OnDelete): nothing, the counts all the same",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: small()},
			edit:   func(in *input) { in.resizeClaims = false },
			status: []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data"}},
		},
		{
			name:   "an unbound PVC is neither resized nor waited for",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: claimOf("", "fast", "1Gi", "")},
			edit: func(in *input) {
				in.current, in.pods = "old", []*corev1.Pod{pod(0, "old", true), pod(1, "old", true), pod(2, "old", true)}
			},
			deleted: []string{"web-2"},
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data"}},
		},
		{
			name: "only the kubelet's filesystem resize left: done",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: func() *corev1.PersistentVolumeClaim {
				c := growing()
				c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
				return c
			}()},
			resized: []string{"data-web-1@web-1"},
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data", CompatibleReplicas: 1}},
		},
		{
			// partition counts the pods kept at the old revision, as in
			// OpenKruise: after a roll back, pods 0 and 1 run the update
			// revision already and pod 2 is the one kept; the update moves
			// on with the PVCs of the pods that run the update revision,
			// highest first.
			name:   "after a roll back under partition 2, the pods at the update revision get their PVCs",
			claims: map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: done()},
			edit: func(in *input) {
				in.set.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
				in.current, in.update = "new", "old"
				in.pods = []*corev1.Pod{pod(0, "old", true), pod(1, "old", true), pod(2, "new", true)}
			},
			resized: []string{"data-web-1@web-1"},
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data", CompatibleReplicas: 1, CompatibleReadyReplicas: 1}},
		},
		{
			name:    "another storage class stops the update",
			claims:  map[int]*corev1.PersistentVolumeClaim{0: small(), 1: small(), 2: claimOf("", "slow", "2Gi", "2Gi")},
			blocked: "PVC data-web-2 of pod web-2 differs from volumeClaimTemplate data in storage class or access modes",
			status:  []v1beta1.VolumeClaimStatus{{VolumeClaimName: "data"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := resizeInput(tc.claims)
			if tc.edit != nil {
				tc.edit(&in)
			}
			p, err := newPlan(in)
			require.NoError(t, err)
			require.Equal(t, tc.resized, nilIfEmpty(resized(p)), "resized")
			require.Equal(t, tc.deleted, nilIfEmpty(deleted(p)), "deleted")
			require.Empty(t, updated(p))
			require.Equal(t, tc.status, p.status.VolumeClaims)
			if tc.blocked != "" {
				require.Contains(t, p.claimProblem, tc.blocked)
			} else {
				require.Empty(t, p.claimProblem)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
