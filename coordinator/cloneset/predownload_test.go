package cloneset

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestPreDownloadSkip(t *testing.T) {
	tmpl := func(image string, env ...corev1.EnvVar) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Image: image, Env: env}, {Name: "sidecar", Image: "busybox:1"},
		}}}
	}
	inPlace := func(replicas int32, mutate func(*v1beta1.RollingUpdateCloneSetStrategy)) *v1beta1.CloneSet {
		return cloneSet(replicas, func(cs *v1beta1.CloneSet) {
			cs.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType
			if mutate != nil {
				mutate(cs.Spec.UpdateStrategy.RollingUpdate)
			}
		})
	}
	for _, tc := range []struct {
		name string
		cs   *v1beta1.CloneSet
		to   *corev1.PodTemplateSpec
		want string // "" pre-downloads; else part of the reason
	}{
		{"in place, 5 replicas, 20%: pre-download", inPlace(5, nil), tmpl("app:2"), ""},
		{"ReCreate", cloneSet(5, nil), tmpl("app:2"), "ReCreate"},
		{"3 replicas", inPlace(3, nil), tmpl("app:2"), "3 replicas"},
		{"all in one batch", inPlace(5, func(r *v1beta1.RollingUpdateCloneSetStrategy) { r.MaxUnavailable = ptr.To(intstr.FromString("100%")) }),
			tmpl("app:2"), "one batch"},
		{"all in one batch unless a partition holds some back", inPlace(5, func(r *v1beta1.RollingUpdateCloneSetStrategy) {
			r.MaxUnavailable = ptr.To(intstr.FromString("100%"))
			r.Partition = ptr.To(intstr.FromInt32(1))
		}), tmpl("app:2"), ""},
		{"not in place", inPlace(5, nil), tmpl("app:2", corev1.EnvVar{Name: "A", Value: "b"}), "spec.containers[app].env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := preDownloadSkip(tc.cs, tmpl("app:1"), tc.to, "web-2")
			if tc.want == "" {
				require.Empty(t, got)
			} else {
				require.Contains(t, got, tc.want)
			}
		})
	}
}
