package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// LaunchPriorityPath serves LaunchPriority.
const LaunchPriorityPath = "/mutate-pod-launch-priority"

// LaunchPriority handles pod CREATE for container launch priority, as
// OpenKruise's pod webhook does: a pod whose containers have different
// priorities (KRUISE_CONTAINER_PRIORITY on containers, or the annotation
// apps.kruise.io/container-launch-priority: Ordered, first container
// highest) gets, on every container, an env KRUISE_CONTAINER_BARRIER from
// key p_<priority> of the ConfigMap <pod>-barrier. The kubelet cannot
// start a container until its key exists; the launch-priority controller
// writes the keys, highest priority first, each once the containers above
// are ready. A pod with a generateName and no name is named here, since
// the ConfigMap's name needs it. It never denies a pod.
func LaunchPriority(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Create || req.SubResource != "" || len(req.Object.Raw) == 0 {
		return allowed
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil || len(pod.Spec.Containers) < 2 {
		return allowed
	}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == wellknown.EnvContainerBarrier {
				return allowed // injected already
			}
		}
	}
	prio := inplace.Priorities(pod)
	if len(prio) == 0 || allEqual(prio) {
		return allowed
	}
	var ops []jsonPatchOp
	name := pod.Name
	if name == "" {
		if pod.GenerateName == "" {
			return allowed // the apiserver refuses it anyway
		}
		name = pod.GenerateName + utilrand.String(5)
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/name", Value: name})
	}
	for i, c := range pod.Spec.Containers {
		env := corev1.EnvVar{Name: wellknown.EnvContainerBarrier, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name + wellknown.ContainerLaunchBarrierConfigMapSuffix},
			Key:                  fmt.Sprintf("%s%d", wellknown.ContainerLaunchBarrierKeyPrefix, prio[c.Name]),
		}}}
		if len(c.Env) == 0 {
			ops = append(ops, jsonPatchOp{Op: "add", Path: fmt.Sprintf("/spec/containers/%d/env", i), Value: []corev1.EnvVar{env}})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: fmt.Sprintf("/spec/containers/%d/env/-", i), Value: env})
		}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return allowed
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// allEqual reports whether every container has the same priority.
func allEqual(prio map[string]int) bool {
	first, seen := 0, false
	for _, p := range prio {
		if seen && p != first {
			return false
		}
		first, seen = p, true
	}
	return true
}
