package workload

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func TestOwner(t *testing.T) {
	kruiseDS := Owner{Kind: "DaemonSet", Group: "apps.kruise.io"}
	pod := func(apiVersion, kind string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: "agent", UID: "u1", Controller: ptr.To(true),
		}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"Advanced DaemonSet v1beta1", pod("apps.kruise.io/v1beta1", "DaemonSet"), true},
		{"Advanced DaemonSet v1alpha1", pod("apps.kruise.io/v1alpha1", "DaemonSet"), true},
		{"upstream DaemonSet", pod("apps/v1", "DaemonSet"), false},
		{"CloneSet", pod("apps.kruise.io/v1beta1", "CloneSet"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kruiseDS.Indexers("by")["by"](tc.pod)
			require.NoError(t, err)
			_, key, ok := kruiseDS.PodOwner(cache.DeletedFinalStateUnknown{Obj: tc.pod})
			require.Equal(t, tc.want, ok)
			if tc.want {
				require.Equal(t, []string{"u1"}, got)
				require.Equal(t, "ns/agent", key)
			} else {
				require.Empty(t, got)
			}
		})
	}
}

func TestNodePlacementChanged(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "1"}}}
	heartbeat := n.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady}}
	require.False(t, NodePlacementChanged(n, heartbeat))
	relabelled := n.DeepCopy()
	relabelled.Labels["a"] = "2"
	require.True(t, NodePlacementChanged(n, relabelled))
	tainted := n.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	require.True(t, NodePlacementChanged(n, tainted))
}

func TestIgnoreStale(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	require.NoError(t, IgnoreStale(nil, "x"))
	require.NoError(t, IgnoreStale(apierrors.NewNotFound(gr, "p"), "x"))
	require.NoError(t, IgnoreStale(apierrors.NewConflict(gr, "p", errors.New("changed")), "x"))
	require.EqualError(t, IgnoreStale(errors.New("boom"), "delete pod %s", "p"), "delete pod p: boom")
}
