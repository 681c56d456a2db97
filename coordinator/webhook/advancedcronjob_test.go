package webhook

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestValidateAdvancedCronJob(t *testing.T) {
	acj := func(schedule string, tz *string, job bool) *v1beta1.AdvancedCronJob {
		a := &v1beta1.AdvancedCronJob{Spec: v1beta1.AdvancedCronJobSpec{Schedule: schedule, TimeZone: tz}}
		if job {
			a.Spec.Template.JobTemplate = &batchv1.JobTemplateSpec{}
		}
		return a
	}
	for _, tc := range []struct {
		name string
		acj  *v1beta1.AdvancedCronJob
		deny []string
	}{
		{"valid", acj("*/5 * * * *", ptr.To("Europe/Berlin"), true), nil},
		{"bad schedule", acj("every day", nil, true), []string{`spec.schedule "every day"`, "use five cron fields"}},
		{"unknown zone", acj("@daily", ptr.To("Moon/Base"), true), []string{`spec.timeZone "Moon/Base"`}},
		{"no template", acj("@daily", nil, false), []string{"spec.template: set exactly one of"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.acj)
			require.NoError(t, err)
			resp := ValidateAdvancedCronJob(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}})
			require.Equal(t, len(tc.deny) == 0, resp.Allowed)
			for _, want := range tc.deny {
				require.Contains(t, resp.Result.Message, want)
			}
		})
	}
}
