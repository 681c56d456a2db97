package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// SidecarSetMutatePath serves the SidecarSet defaulting webhook.
const SidecarSetMutatePath = "/mutate-sidecarset"

// DefaultSidecarSet handles CREATE and UPDATE of a SidecarSet (at
// v1beta1): it fills in each sidecar's podInjectPolicy the way OpenKruise
// does, BeforeAppContainer for containers and AfterAppContainer for init
// containers. The CRD schema defaults every other field; this one cannot
// be a schema default because both lists share one type.
func DefaultSidecarSet(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || req.SubResource != "" || len(req.Object.Raw) == 0 {
		return allowed
	}
	set := &v1beta1.SidecarSet{}
	if err := json.Unmarshal(req.Object.Raw, set); err != nil {
		return allowed // the apiserver's own decoding answers for it
	}
	var ops []jsonPatchOp
	for _, list := range []struct {
		path       string
		containers []v1beta1.SidecarContainer
		policy     v1beta1.PodInjectPolicyType
	}{
		{"/spec/containers", set.Spec.Containers, v1beta1.BeforeAppContainerType},
		{"/spec/initContainers", set.Spec.InitContainers, v1beta1.AfterAppContainerType},
	} {
		for i, c := range list.containers {
			if c.PodInjectPolicy == "" {
				ops = append(ops, jsonPatchOp{Op: "add", Path: fmt.Sprintf("%s/%d/podInjectPolicy", list.path, i), Value: list.policy})
			}
		}
	}
	if len(ops) == 0 {
		return allowed
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return allowed
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}
