package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/shoal-io/shoal/coordinator/advancedcronjob"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// AdvancedCronJobValidatePath serves ValidateAdvancedCronJob.
const AdvancedCronJobValidatePath = "/validate-advancedcronjob"

// ValidateAdvancedCronJob handles CREATE and UPDATE of an AdvancedCronJob
// (matched at every served version, decoded at v1beta1): it denies a
// schedule that does not parse, an unknown timeZone, and a template with
// other than exactly one of its three kinds, each naming the field.
func ValidateAdvancedCronJob(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	acj := &v1beta1.AdvancedCronJob{}
	if err := json.Unmarshal(req.Object.Raw, acj); err != nil {
		return badRequest(fmt.Sprintf("could not decode the AdvancedCronJob: %v", err))
	}
	if problems := advancedcronjob.Validate(acj); len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}
