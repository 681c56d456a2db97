package conversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// csFillMeta gives metadata the label and annotations that CloneSet
// conversion turns into fields. Random keys never hit them, so without
// this the fuzz test would not try the rule; labels and annotations take
// any string, so the values are unrestricted: convertible ones, ones that
// are not (sign, leading zero, a percentage where only an integer fits, a
// negative number, empty), and random ones.
func csFillMeta(meta *metav1.ObjectMeta, c randfill.Continue) {
	values := map[string][]string{
		wellknown.AnnotationImagePreDownloadParallelism:         {"3", "25%", "0", "007", "+3", "-1", "150%", "x", ""},
		wellknown.AnnotationImagePreDownloadTimeoutSeconds:      {"600", "1", "0", "-5", "09", "1.5", ""},
		wellknown.AnnotationImagePreDownloadMinUpdatedReadyPods: {"3", "0", "20%", "-1", "03", ""},
	}
	for key, vs := range values {
		switch c.Intn(3) {
		case 0:
			meta.Annotations = csSetKey(meta.Annotations, key, pick(c, vs...))
		case 1:
			meta.Annotations = csSetKey(meta.Annotations, key, c.String(4))
		}
	}
	switch c.Intn(4) {
	case 0:
		meta.Labels = csSetKey(meta.Labels, wellknown.LabelCloneSetScalingExcludePreparingDelete, "true")
	case 1:
		meta.Labels = csSetKey(meta.Labels, wellknown.LabelCloneSetScalingExcludePreparingDelete, pick(c, "false", "", "True"))
	}
}

// cloneSetFillFuncs fill the CloneSet enums with the values each version's
// schema admits, and the pre-download fields and settings carried in
// metadata with values that exercise the conversion rules.
func cloneSetFillFuncs() []any {
	return []any{
		func(s *v1alpha1.CloneSetUpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.RecreateCloneSetUpdateStrategyType,
				v1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType, v1alpha1.InPlaceOnlyCloneSetUpdateStrategyType)
		},
		func(s *v1beta1.CloneSetUpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.RollingUpdateCloneSetUpdateStrategyType, v1beta1.OnDeleteCloneSetUpdateStrategyType)
		},
		func(s *v1beta1.CloneSetPodUpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.RecreateCloneSetPodUpdateStrategyType,
				v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType, v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType)
		},
		// Random IntOrStrings and int32s are rarely values the annotation
		// form fits; mix in ones that do (and an empty strategy).
		func(s *pub.InPlaceUpdateStrategy, c randfill.Continue) {
			c.FillNoCustom(s)
			if c.Intn(5) == 0 {
				*s = pub.InPlaceUpdateStrategy{}
				return
			}
			switch c.Intn(3) {
			case 0:
				s.ImagePreDownloadParallelism = pick(c, nil, ptr.To(intstr.FromInt32(4)), ptr.To(intstr.FromString("50%")), ptr.To(intstr.FromString("4")))
			case 1:
				s.ImagePreDownloadParallelism = nil
			}
			switch c.Intn(3) {
			case 0:
				s.ImagePreDownloadTimeoutSeconds = pick(c, nil, ptr.To[int32](300), ptr.To[int32](0))
			case 1:
				s.ImagePreDownloadTimeoutSeconds = nil
			}
			switch c.Intn(3) {
			case 0:
				s.ImagePreDownloadMinUpdatedReadyPods = pick(c, nil, ptr.To[int32](2), ptr.To[int32](-2))
			case 1:
				s.ImagePreDownloadMinUpdatedReadyPods = nil
			}
		},
		func(o *v1alpha1.CloneSet, c randfill.Continue) {
			c.FillNoCustom(o)
			csFillMeta(&o.ObjectMeta, c)
		},
		func(o *v1beta1.CloneSet, c randfill.Continue) {
			c.FillNoCustom(o)
			csFillMeta(&o.ObjectMeta, c)
			if c.Intn(4) == 0 {
				o.Spec.UpdateStrategy.RollingUpdate = pick(c, nil, &v1beta1.RollingUpdateCloneSetStrategy{})
			}
		},
	}
}

func TestCloneSetRoundTrip(t *testing.T) {
	roundTrip(t, "CloneSet", cloneSetToV1beta1, cloneSetToV1alpha1, cloneSetFillFuncs()...)
}

func TestCloneSetMapping(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "shop"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}},
	}
	meta := func(labels, annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "shop", Namespace: "retail", Labels: labels, Annotations: annotations}
	}
	num := func(v int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(v)) }
	str := func(v string) *intstr.IntOrString { return ptr.To(intstr.FromString(v)) }
	parallelism := wellknown.AnnotationImagePreDownloadParallelism
	timeout := wellknown.AnnotationImagePreDownloadTimeoutSeconds
	minReady := wellknown.AnnotationImagePreDownloadMinUpdatedReadyPods
	exclude := wellknown.LabelCloneSetScalingExcludePreparingDelete

	tests := []struct {
		name  string
		alpha v1alpha1.CloneSet
		beta  v1beta1.CloneSet
	}{
		{
			name: "updateStrategy.type InPlaceIfPossible is type RollingUpdate with rollingUpdate.podUpdatePolicy InPlaceIfPossible; the rolling settings move into rollingUpdate",
			alpha: v1alpha1.CloneSet{
				ObjectMeta: meta(nil, nil),
				Spec: v1alpha1.CloneSetSpec{
					Replicas: ptr.To[int32](5), Selector: sel, Template: pod,
					ScaleStrategy: v1alpha1.CloneSetScaleStrategy{PodsToDelete: []string{"shop-x7k2p"}, MaxUnavailable: num(1)},
					UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{
						Type:                  v1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType,
						Partition:             num(3),
						MaxUnavailable:        str("20%"),
						MaxSurge:              num(0),
						InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{GracePeriodSeconds: 10},
					},
					MinReadySeconds: 30,
				},
			},
			beta: v1beta1.CloneSet{
				ObjectMeta: meta(nil, nil),
				Spec: v1beta1.CloneSetSpec{
					Replicas: ptr.To[int32](5), Selector: sel, Template: pod,
					ScaleStrategy: v1beta1.CloneSetScaleStrategy{PodsToDelete: []string{"shop-x7k2p"}, MaxUnavailable: num(1), EnablePVCReuse: true},
					UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
						Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
						RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{
							PodUpdatePolicy:       v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType,
							Partition:             num(3),
							MaxUnavailable:        str("20%"),
							MaxSurge:              num(0),
							InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{GracePeriodSeconds: 10},
						},
					},
					MinReadySeconds: 30,
				},
			},
		},
		{
			name: "type ReCreate is podUpdatePolicy ReCreate; paused, priorityStrategy and scatterStrategy move into rollingUpdate",
			alpha: v1alpha1.CloneSet{
				ObjectMeta: meta(nil, nil),
				Spec: v1alpha1.CloneSetSpec{
					Selector: sel, Template: pod,
					UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{
						Type:   v1alpha1.RecreateCloneSetUpdateStrategyType,
						Paused: true,
						PriorityStrategy: &pub.UpdatePriorityStrategy{
							OrderPriority: []pub.UpdatePriorityOrderTerm{{OrderedKey: "shop/rank"}},
						},
						ScatterStrategy: pub.UpdateScatterStrategy{{Key: "zone", Value: "east"}},
					},
				},
			},
			beta: v1beta1.CloneSet{
				ObjectMeta: meta(nil, nil),
				Spec: v1beta1.CloneSetSpec{
					Selector: sel, Template: pod,
					ScaleStrategy: v1beta1.CloneSetScaleStrategy{EnablePVCReuse: true},
					UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
						Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
						RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{
							PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType,
							Paused:          true,
							PriorityStrategy: &pub.UpdatePriorityStrategy{
								OrderPriority: []pub.UpdatePriorityOrderTerm{{OrderedKey: "shop/rank"}},
							},
							ScatterStrategy: pub.UpdateScatterStrategy{{Key: "zone", Value: "east"}},
						},
					},
				},
			},
		},
		{
			name: "scaleStrategy.disablePVCReuse true is enablePVCReuse false (v1beta1's default)",
			alpha: v1alpha1.CloneSet{
				ObjectMeta: meta(nil, nil),
				Spec: v1alpha1.CloneSetSpec{
					Selector: sel, Template: pod,
					ScaleStrategy:  v1alpha1.CloneSetScaleStrategy{DisablePVCReuse: true},
					UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{Type: v1alpha1.RecreateCloneSetUpdateStrategyType},
				},
			},
			beta: v1beta1.CloneSet{
				ObjectMeta: meta(nil, nil),
				Spec: v1beta1.CloneSetSpec{
					Selector: sel, Template: pod,
					UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
						Type:          v1beta1.RollingUpdateCloneSetUpdateStrategyType,
						RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType},
					},
				},
			},
		},
		{
			name: "label apps.kruise.io/cloneset-scaling-exclude-preparing-delete: \"true\" is scaleStrategy.excludePreparingDelete: true",
			alpha: v1alpha1.CloneSet{
				ObjectMeta: meta(map[string]string{exclude: "true", "team": "retail"}, nil),
				Spec: v1alpha1.CloneSetSpec{
					Selector: sel, Template: pod,
					UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{Type: v1alpha1.InPlaceOnlyCloneSetUpdateStrategyType},
				},
			},
			beta: v1beta1.CloneSet{
				ObjectMeta: meta(map[string]string{"team": "retail"}, nil),
				Spec: v1beta1.CloneSetSpec{
					Selector: sel, Template: pod,
					ScaleStrategy: v1beta1.CloneSetScaleStrategy{EnablePVCReuse: true, ExcludePreparingDelete: true},
					UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
						Type:          v1beta1.RollingUpdateCloneSetUpdateStrategyType,
						RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType},
					},
				},
			},
		},
		{
			name: "pre-download annotations are rollingUpdate.inPlaceUpdateStrategy fields",
			alpha: v1alpha1.CloneSet{
				ObjectMeta: meta(nil, map[string]string{parallelism: "10", timeout: "600", minReady: "3", "owner": "retail"}),
				Spec: v1alpha1.CloneSetSpec{
					Selector: sel, Template: pod,
					UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{Type: v1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType},
				},
			},
			beta: v1beta1.CloneSet{
				ObjectMeta: meta(nil, map[string]string{"owner": "retail"}),
				Spec: v1beta1.CloneSetSpec{
					Selector: sel, Template: pod,
					ScaleStrategy: v1beta1.CloneSetScaleStrategy{EnablePVCReuse: true},
					UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
						Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
						RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{
							PodUpdatePolicy: v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType,
							InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{
								ImagePreDownloadParallelism:         num(10),
								ImagePreDownloadTimeoutSeconds:      ptr.To[int32](600),
								ImagePreDownloadMinUpdatedReadyPods: ptr.To[int32](3),
							},
						},
					},
				},
			},
		},
		{
			name: "a percentage parallelism is a field too; a percentage min-updated-ready-pods has no field form and stays an annotation",
			alpha: v1alpha1.CloneSet{
				ObjectMeta: meta(nil, map[string]string{parallelism: "50%", minReady: "20%"}),
				Spec: v1alpha1.CloneSetSpec{
					Selector: sel, Template: pod,
					UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{
						Type:                  v1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType,
						InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{GracePeriodSeconds: 5},
					},
				},
			},
			beta: v1beta1.CloneSet{
				ObjectMeta: meta(nil, map[string]string{minReady: "20%"}),
				Spec: v1beta1.CloneSetSpec{
					Selector: sel, Template: pod,
					ScaleStrategy: v1beta1.CloneSetScaleStrategy{EnablePVCReuse: true},
					UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
						Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
						RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{
							PodUpdatePolicy: v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType,
							InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{
								GracePeriodSeconds:          5,
								ImagePreDownloadParallelism: str("50%"),
							},
						},
					},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.CloneSet
			require.NoError(t, cloneSetToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)

			var alpha v1alpha1.CloneSet
			require.NoError(t, cloneSetToV1alpha1(&tc.beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}
}

// TestCloneSetOnDelete checks that v1beta1's OnDelete, which v1alpha1 has
// no type for, is paused in v1alpha1 and comes back while it stays paused.
func TestCloneSetOnDelete(t *testing.T) {
	beta := v1beta1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "jobs"},
		Spec: v1beta1.CloneSetSpec{
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
				Type:          v1beta1.OnDeleteCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType},
			},
			ScaleStrategy: v1beta1.CloneSetScaleStrategy{EnablePVCReuse: true},
		},
	}
	var alpha v1alpha1.CloneSet
	require.NoError(t, cloneSetToV1alpha1(&beta, &alpha))
	require.Equal(t, v1alpha1.CloneSetUpdateStrategy{Type: v1alpha1.RecreateCloneSetUpdateStrategyType, Paused: true}, alpha.Spec.UpdateStrategy)
	require.JSONEq(t, `{"updateStrategyType":"OnDelete","paused":false}`, alpha.Annotations[StashAnnotationPrefix+"v1beta1"])

	var back v1beta1.CloneSet
	require.NoError(t, cloneSetToV1beta1(&alpha, &back))
	require.Equal(t, beta, back)

	// Unpaused in v1alpha1: a rolling update from then on.
	alpha.Spec.UpdateStrategy.Paused = false
	require.NoError(t, cloneSetToV1beta1(&alpha, &back))
	require.Equal(t, v1beta1.CloneSetUpdateStrategy{
		Type:          v1beta1.RollingUpdateCloneSetUpdateStrategyType,
		RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType},
	}, back.Spec.UpdateStrategy)
}

// TestCloneSetPreDownloadBothForms checks the settings a v1alpha1 object
// sets both ways: the field wins in both versions, so both are kept as
// they are.
func TestCloneSetPreDownloadBothForms(t *testing.T) {
	alpha := v1alpha1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{wellknown.AnnotationImagePreDownloadParallelism: "2"}},
		Spec: v1alpha1.CloneSetSpec{UpdateStrategy: v1alpha1.CloneSetUpdateStrategy{
			Type: v1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType,
			InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{
				ImagePreDownloadParallelism:    ptr.To(intstr.FromInt32(8)),
				ImagePreDownloadTimeoutSeconds: ptr.To[int32](120),
			},
		}},
	}
	var beta v1beta1.CloneSet
	require.NoError(t, cloneSetToV1beta1(&alpha, &beta))
	require.Equal(t, map[string]string{
		wellknown.AnnotationImagePreDownloadParallelism: "2",
		StashAnnotationPrefix + "v1alpha1":              `{"preDownloadInSpec":["apps.kruise.io/image-predownload-timeout-seconds"]}`,
	}, beta.Annotations)
	require.Equal(t, alpha.Spec.UpdateStrategy.InPlaceUpdateStrategy, beta.Spec.UpdateStrategy.RollingUpdate.InPlaceUpdateStrategy)

	var back v1alpha1.CloneSet
	require.NoError(t, cloneSetToV1alpha1(&beta, &back))
	require.Equal(t, alpha, back)
}
