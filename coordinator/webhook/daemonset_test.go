package webhook

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestValidateDaemonSet(t *testing.T) {
	ds := func(mutate func(*v1beta1.DaemonSet)) *v1beta1.DaemonSet {
		d := &v1beta1.DaemonSet{}
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}
		d.Spec.Template.Labels = map[string]string{"app": "agent"}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		ds   *v1beta1.DaemonSet
		deny []string
	}{
		{"valid", ds(nil), nil},
		{"selector does not match", ds(func(d *v1beta1.DaemonSet) { d.Spec.Template.Labels = map[string]string{"app": "other"} }),
			[]string{"spec.template.metadata.labels:", "does not match spec.selector", "add the selector's labels"}},
		{"restartPolicy Never", ds(func(d *v1beta1.DaemonSet) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			[]string{`spec.template.spec.restartPolicy: "Never" is not supported; a DaemonSet's pods run until replaced`}},
		{"activeDeadlineSeconds", ds(func(d *v1beta1.DaemonSet) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](10) }),
			[]string{"spec.template.spec.activeDeadlineSeconds: must not be set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.ds)
			require.NoError(t, err)
			resp := ValidateDaemonSet(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}})
			require.Equal(t, len(tc.deny) == 0, resp.Allowed)
			for _, want := range tc.deny {
				require.Contains(t, resp.Result.Message, want)
			}
		})
	}
}
