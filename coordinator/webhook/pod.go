package webhook

import (
	"context"
	"encoding/json"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// PodMutatePath serves the pod CREATE webhook of the optional
// MutatingWebhookConfiguration shoal-pods
// (deploy/components/kruise-pod-readiness-gate).
const PodMutatePath = "/mutate-pod"

// PodReadinessGate returns the pod CREATE handler of OpenKruise's
// KruisePodReadinessGate option: when enabled it adds the KruisePodReady
// readiness gate to every pod that lacks it (the podreadiness controller
// then sets the condition), so that a ContainerRecreateRequest's
// unreadyGracePeriodSeconds can hold any pod not ready. When disabled, or
// for anything but a pod CREATE, it allows the request unchanged. It never
// denies a pod.
func PodReadinessGate(enabled bool) Handler {
	return func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		allowed := &admissionv1.AdmissionResponse{Allowed: true}
		if !enabled || req.Operation != admissionv1.Create || req.SubResource != "" || len(req.Object.Raw) == 0 {
			return allowed
		}
		pod := &corev1.Pod{}
		if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
			return allowed // the apiserver's own validation answers for it
		}
		gate := corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateKruisePodReady}
		if slices.Contains(pod.Spec.ReadinessGates, gate) {
			return allowed
		}
		op := jsonPatchOp{Op: "add", Path: "/spec/readinessGates/-", Value: gate}
		if len(pod.Spec.ReadinessGates) == 0 {
			op = jsonPatchOp{Op: "add", Path: "/spec/readinessGates", Value: []corev1.PodReadinessGate{gate}}
		}
		patch, err := json.Marshal([]jsonPatchOp{op})
		if err != nil {
			return allowed
		}
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
	}
}
