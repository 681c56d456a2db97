package predownload

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
)

func TestSettingsOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		strategy    *pub.InPlaceUpdateStrategy
		want        Settings
		off         bool
	}{
		{"defaults", nil, nil, Settings{Parallelism: intstr.FromInt32(1), TimeoutSeconds: DefaultTimeoutSeconds}, false},
		{"v1alpha1 annotations", map[string]string{
			"apps.kruise.io/image-predownload-parallelism":            "10",
			"apps.kruise.io/image-predownload-timeout-seconds":        "60",
			"apps.kruise.io/image-predownload-min-updated-ready-pods": "2",
		}, nil, Settings{Parallelism: intstr.FromInt32(10), TimeoutSeconds: 60, MinUpdatedReadyPods: 2}, false},
		{"v1beta1 fields win", map[string]string{"apps.kruise.io/image-predownload-parallelism": "10"},
			&pub.InPlaceUpdateStrategy{ImagePreDownloadParallelism: ptr.To(intstr.FromString("50%"))},
			Settings{Parallelism: intstr.FromString("50%"), TimeoutSeconds: DefaultTimeoutSeconds}, false},
		{"parallelism 0 turns it off", map[string]string{"apps.kruise.io/image-predownload-parallelism": "0"}, nil,
			Settings{Parallelism: intstr.FromInt32(0), TimeoutSeconds: DefaultTimeoutSeconds}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SettingsOf(tc.annotations, tc.strategy)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.off, got.Off())
		})
	}
}

func TestChangedImages(t *testing.T) {
	tmpl := func(containers ...corev1.Container) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}
	}
	from := tmpl(corev1.Container{Name: "app", Image: "app:1"}, corev1.Container{Name: "side", Image: "side:1"})
	require.Equal(t, map[string]string{"app": "app:2"}, ChangedImages(from, tmpl(corev1.Container{Name: "app", Image: "app:2"}, corev1.Container{Name: "side", Image: "side:1"})))
	require.Equal(t, map[string]string{"new": "new:1"}, ChangedImages(from, tmpl(corev1.Container{Name: "app", Image: "app:1"}, corev1.Container{Name: "new", Image: "new:1"})))
}
