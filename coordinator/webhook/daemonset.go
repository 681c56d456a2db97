package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// DaemonSetValidatePath serves ValidateDaemonSet.
const DaemonSetValidatePath = "/validate-daemonset"

// ValidateDaemonSet handles CREATE and UPDATE of an Advanced DaemonSet
// (matched at every served version, decoded at v1beta1). It denies, each
// with the field and the fix, a selector that does not select the
// template's labels, a template restartPolicy other than Always, and any
// activeDeadlineSeconds. The update strategy's rules are the CRD's CEL
// rules. Status updates and deletes are allowed.
func ValidateDaemonSet(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ds := &v1beta1.DaemonSet{}
	if err := json.Unmarshal(req.Object.Raw, ds); err != nil {
		return badRequest(fmt.Sprintf("could not decode the DaemonSet: %v", err))
	}
	if problems := checkWorkloadTemplate(ds.Spec.Selector, &ds.Spec.Template, "a DaemonSet's"); len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}
