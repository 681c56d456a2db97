package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// BroadcastJobValidatePath serves ValidateBroadcastJob.
const BroadcastJobValidatePath = "/validate-broadcastjob"

// ValidateBroadcastJob handles CREATE and UPDATE of a BroadcastJob
// (matched at every served version, decoded at v1beta1). It denies, each
// with the field and the fix, a template with no containers and a template
// restartPolicy of Always (a job's pods run to completion). Status updates
// and deletes are allowed.
func ValidateBroadcastJob(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	job := &v1beta1.BroadcastJob{}
	if err := json.Unmarshal(req.Object.Raw, job); err != nil {
		return badRequest(fmt.Sprintf("could not decode the BroadcastJob: %v", err))
	}
	var problems []string
	spec := &job.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		problems = append(problems, "spec.template.spec.containers: the job's pod needs at least one container; add the container to run on each node")
	}
	if spec.RestartPolicy == corev1.RestartPolicyAlways {
		problems = append(problems, "spec.template.spec.restartPolicy: Always is not supported for a job's pods, which run to completion; use Never or OnFailure (the default)")
	}
	if len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}
