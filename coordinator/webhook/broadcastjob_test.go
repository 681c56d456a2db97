package webhook

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestValidateBroadcastJob(t *testing.T) {
	job := func(restart corev1.RestartPolicy, containers int) *v1beta1.BroadcastJob {
		j := &v1beta1.BroadcastJob{}
		j.Spec.Template.Spec.RestartPolicy = restart
		for range containers {
			j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers, corev1.Container{Name: "c", Image: "busybox"})
		}
		return j
	}
	for _, tc := range []struct {
		name string
		job  *v1beta1.BroadcastJob
		op   admissionv1.Operation
		deny []string
	}{
		{"Never", job(corev1.RestartPolicyNever, 1), admissionv1.Create, nil},
		{"unset means OnFailure", job("", 1), admissionv1.Create, nil},
		{"Always", job(corev1.RestartPolicyAlways, 1), admissionv1.Create, []string{"spec.template.spec.restartPolicy: Always is not supported", "use Never or OnFailure"}},
		{"no containers, on update too", job(corev1.RestartPolicyNever, 0), admissionv1.Update, []string{"spec.template.spec.containers:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.job)
			require.NoError(t, err)
			resp := ValidateBroadcastJob(t.Context(), &admissionv1.AdmissionRequest{Operation: tc.op, Object: runtime.RawExtension{Raw: raw}})
			require.Equal(t, len(tc.deny) == 0, resp.Allowed)
			for _, want := range tc.deny {
				require.Contains(t, resp.Result.Message, want)
			}
		})
	}
}
