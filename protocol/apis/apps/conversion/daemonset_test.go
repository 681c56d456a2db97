//lint:file-ignore SA1019 v1alpha1 rollingUpdateType Surging is deprecated, and converting it is this file's job.

package conversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// daemonSetFillFuncs fill the Advanced DaemonSet enums with the values each
// version's schema admits.
func daemonSetFillFuncs() []any {
	return []any{
		func(s *v1alpha1.DaemonSetUpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.RollingUpdateDaemonSetStrategyType, v1alpha1.OnDeleteDaemonSetStrategyType)
		},
		func(s *v1beta1.DaemonSetUpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.RollingUpdateDaemonSetStrategyType, v1beta1.OnDeleteDaemonSetStrategyType)
		},
		func(s *v1alpha1.RollingUpdateType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.StandardRollingUpdateType, v1alpha1.InplaceRollingUpdateType, v1alpha1.DeprecatedSurgingRollingUpdateType)
		},
		func(s *v1beta1.RollingUpdateType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.StandardRollingUpdateType, v1beta1.InplaceRollingUpdateType)
		},
	}
}

func TestDaemonSetRoundTrip(t *testing.T) {
	roundTrip(t, "DaemonSet", daemonSetToV1beta1, daemonSetToV1alpha1, daemonSetFillFuncs()...)
}

func TestDaemonSetMapping(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "log-agent"}}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "log-agent"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "nginx:1.25"}}},
	}
	meta := func(annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "log-agent", Namespace: "ops", Annotations: annotations}
	}
	num := func(v int32) *intstr.IntOrString { x := intstr.FromInt32(v); return &x }
	str := func(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }
	progressive := wellknown.AnnotationDaemonSetProgressiveCreatePod
	tests := []struct {
		name  string
		alpha v1alpha1.DaemonSet
		beta  v1beta1.DaemonSet
	}{
		{
			name: "rollingUpdateType InPlaceIfPossible, partition and paused are the same in v1beta1, partition as a number",
			alpha: v1alpha1.DaemonSet{
				ObjectMeta: meta(nil),
				Spec: v1alpha1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1alpha1.DaemonSetUpdateStrategy{
					Type: v1alpha1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &v1alpha1.RollingUpdateDaemonSet{
						Type: v1alpha1.InplaceRollingUpdateType, MaxUnavailable: str("20%"), Partition: ptr.To[int32](3), Paused: ptr.To(true),
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "canary"}},
					},
				}},
			},
			beta: v1beta1.DaemonSet{
				ObjectMeta: meta(nil),
				Spec: v1beta1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1beta1.DaemonSetUpdateStrategy{
					Type: v1beta1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &v1beta1.RollingUpdateDaemonSet{
						Type: v1beta1.InplaceRollingUpdateType, MaxUnavailable: str("20%"), Partition: num(3), Paused: ptr.To(true),
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "canary"}},
					},
				}},
			},
		},
		{
			name: "deprecated Surging is Standard with maxSurge 1 and maxUnavailable 0 written out",
			alpha: v1alpha1.DaemonSet{
				ObjectMeta: meta(nil),
				Spec: v1alpha1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1alpha1.DaemonSetUpdateStrategy{
					RollingUpdate: &v1alpha1.RollingUpdateDaemonSet{Type: v1alpha1.DeprecatedSurgingRollingUpdateType},
				}},
			},
			beta: v1beta1.DaemonSet{
				ObjectMeta: meta(map[string]string{StashAnnotationPrefix + "v1alpha1": `{"surging":true,"filledMaxSurge":true,"filledMaxUnavailable":true}`}),
				Spec: v1beta1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1beta1.DaemonSetUpdateStrategy{
					RollingUpdate: &v1beta1.RollingUpdateDaemonSet{Type: v1beta1.StandardRollingUpdateType, MaxSurge: num(1), MaxUnavailable: num(0)},
				}},
			},
		},
		{
			name: "Surging with its own maxSurge keeps it",
			alpha: v1alpha1.DaemonSet{
				ObjectMeta: meta(nil),
				Spec: v1alpha1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1alpha1.DaemonSetUpdateStrategy{
					RollingUpdate: &v1alpha1.RollingUpdateDaemonSet{Type: v1alpha1.DeprecatedSurgingRollingUpdateType, MaxSurge: str("10%")},
				}},
			},
			beta: v1beta1.DaemonSet{
				ObjectMeta: meta(map[string]string{StashAnnotationPrefix + "v1alpha1": `{"surging":true,"filledMaxUnavailable":true}`}),
				Spec: v1beta1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1beta1.DaemonSetUpdateStrategy{
					RollingUpdate: &v1beta1.RollingUpdateDaemonSet{Type: v1beta1.StandardRollingUpdateType, MaxSurge: str("10%"), MaxUnavailable: num(0)},
				}},
			},
		},
		{
			name: "annotation progressive-create-pod true is scaleStrategy.partitionedScaling true",
			alpha: v1alpha1.DaemonSet{
				ObjectMeta: meta(map[string]string{progressive: "true", "team": "infra"}),
				Spec:       v1alpha1.DaemonSetSpec{Selector: sel, Template: pod},
			},
			beta: v1beta1.DaemonSet{
				ObjectMeta: meta(map[string]string{"team": "infra"}),
				Spec: v1beta1.DaemonSetSpec{Selector: sel, Template: pod,
					ScaleStrategy: &v1beta1.DaemonSetScaleStrategy{PartitionedScaling: true}},
			},
		},
		{
			name: "annotation progressive-create-pod false is partitionedScaling false",
			alpha: v1alpha1.DaemonSet{
				ObjectMeta: meta(map[string]string{progressive: "false"}),
				Spec:       v1alpha1.DaemonSetSpec{Selector: sel, Template: pod},
			},
			beta: v1beta1.DaemonSet{
				ObjectMeta: meta(nil),
				Spec: v1beta1.DaemonSetSpec{Selector: sel, Template: pod,
					ScaleStrategy: &v1beta1.DaemonSetScaleStrategy{}},
			},
		},
		{
			name: "other values of the annotation stay annotations",
			alpha: v1alpha1.DaemonSet{
				ObjectMeta: meta(map[string]string{progressive: "yes"}),
				Spec:       v1alpha1.DaemonSetSpec{Selector: sel, Template: pod},
			},
			beta: v1beta1.DaemonSet{
				ObjectMeta: meta(map[string]string{progressive: "yes"}),
				Spec:       v1beta1.DaemonSetSpec{Selector: sel, Template: pod},
			},
		},
		{
			name: "status daemonSetHash is updateRevision",
			alpha: v1alpha1.DaemonSet{
				ObjectMeta: meta(nil),
				Spec:       v1alpha1.DaemonSetSpec{Selector: sel, Template: pod},
				Status:     v1alpha1.DaemonSetStatus{DesiredNumberScheduled: 4, NumberReady: 4, UpdatedNumberScheduled: 2, DaemonSetHash: "7d9c5b"},
			},
			beta: v1beta1.DaemonSet{
				ObjectMeta: meta(nil),
				Spec:       v1beta1.DaemonSetSpec{Selector: sel, Template: pod},
				Status:     v1beta1.DaemonSetStatus{DesiredNumberScheduled: 4, NumberReady: 4, UpdatedNumberScheduled: 2, UpdateRevision: "7d9c5b"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.DaemonSet
			require.NoError(t, daemonSetToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)
			var alpha v1alpha1.DaemonSet
			require.NoError(t, daemonSetToV1alpha1(&beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}

	t.Run("a percentage partition has no v1alpha1 form: v1alpha1 sees none, the stash keeps it", func(t *testing.T) {
		beta := v1beta1.DaemonSet{
			ObjectMeta: meta(nil),
			Spec: v1beta1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1beta1.DaemonSetUpdateStrategy{
				RollingUpdate: &v1beta1.RollingUpdateDaemonSet{Partition: str("30%")},
			}},
		}
		var alpha v1alpha1.DaemonSet
		require.NoError(t, daemonSetToV1alpha1(&beta, &alpha))
		require.Equal(t, v1alpha1.DaemonSet{
			ObjectMeta: meta(map[string]string{StashAnnotationPrefix + "v1beta1": `{"partition":"30%"}`}),
			Spec: v1alpha1.DaemonSetSpec{Selector: sel, Template: pod, UpdateStrategy: v1alpha1.DaemonSetUpdateStrategy{
				RollingUpdate: &v1alpha1.RollingUpdateDaemonSet{},
			}},
		}, alpha)
		var back v1beta1.DaemonSet
		require.NoError(t, daemonSetToV1beta1(&alpha, &back))
		require.Equal(t, beta, back)

		// A partition set at v1alpha1 since wins over the stashed one.
		alpha.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2)
		require.NoError(t, daemonSetToV1beta1(&alpha, &back))
		require.Equal(t, num(2), back.Spec.UpdateStrategy.RollingUpdate.Partition)
	})

	t.Run("a v1beta1 object's own progressive-create-pod annotation survives next to scaleStrategy", func(t *testing.T) {
		beta := v1beta1.DaemonSet{
			ObjectMeta: meta(map[string]string{progressive: "false"}),
			Spec: v1beta1.DaemonSetSpec{Selector: sel, Template: pod,
				ScaleStrategy: &v1beta1.DaemonSetScaleStrategy{PartitionedScaling: true}},
		}
		var alpha v1alpha1.DaemonSet
		require.NoError(t, daemonSetToV1alpha1(&beta, &alpha))
		require.Equal(t, map[string]string{progressive: "true", StashAnnotationPrefix + "v1beta1": `{"progressiveAnnotation":"false"}`}, alpha.Annotations)
		var back v1beta1.DaemonSet
		require.NoError(t, daemonSetToV1beta1(&alpha, &back))
		require.Equal(t, beta, back)
	})
}
