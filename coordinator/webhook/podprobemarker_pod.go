package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// PodProbeMarkerPodMutatePath serves PodProbeMarkerInjector.Mutate.
const PodProbeMarkerPodMutatePath = "/mutate-pod-podprobe"

// PodProbeMarkerInjector records, on pod CREATE, the PodProbeMarker probes
// that apply to the new pod, as OpenKruise's pod webhook does for runtimes
// that run the probes themselves (serverless and virtual-kubelet nodes,
// OpenKruise's EnablePodProbeMarkerOnServerless gate: register it only when
// that behaviour is wanted).
type PodProbeMarkerInjector struct {
	markers func(namespace string) ([]*v1alpha1.PodProbeMarker, error)
}

// NewPodProbeMarkerInjector returns the pod mutation. markers lists the
// PodProbeMarkers of a namespace, for example from an informer's lister.
func NewPodProbeMarkerInjector(markers func(namespace string) ([]*v1alpha1.PodProbeMarker, error)) *PodProbeMarkerInjector {
	return &PodProbeMarkerInjector{markers: markers}
}

var _ Handler = (*PodProbeMarkerInjector)(nil).Mutate

// Mutate handles pod CREATE. For the PodProbeMarkers of the pod's namespace
// whose selector matches the pod's labels (a missing, empty or malformed
// selector matches nothing; PodProbeMarkers being deleted are skipped), it
// sets two annotations, replacing values already there:
//   - kruise.io/podprobe: a JSON list of the probes that have a
//     podConditionType and whose containerName is a container or a
//     restartable init container of the pod, each as in the
//     PodProbeMarker (name, containerName, probe, podConditionType) with
//     markerPolicy left out. PodProbeMarkers are taken in name order; a
//     probe whose condition type, or whose container and name, an earlier
//     probe has already taken is skipped;
//   - kruise.io/podprobemarker-list: the sorted, comma-separated names of
//     the PodProbeMarkers that contributed a probe.
//
// A pod no probe applies to is allowed unchanged. It never denies a pod:
// if the PodProbeMarkers cannot be listed, the pod is created unchanged.
func (i *PodProbeMarkerInjector) Mutate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Create || req.SubResource != "" || len(req.Object.Raw) == 0 {
		return allowed
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return allowed // the apiserver's own validation answers for it
	}
	namespace := cmp.Or(pod.Namespace, req.Namespace)
	markers, err := i.markers(namespace)
	if err != nil {
		klog.FromContext(ctx).Error(err, "List PodProbeMarkers; the pod is created without the kruise.io/podprobe annotation",
			"pod", klog.KRef(namespace, cmp.Or(pod.Name, pod.GenerateName)))
		return allowed
	}
	probes, names := ppmPodProbes(pod, namespace, markers)
	if len(probes) == 0 {
		return allowed
	}
	body, err := json.Marshal(probes)
	if err != nil {
		return allowed
	}
	ops := mapEntryOps("/metadata/annotations", pod.Annotations == nil, map[string]string{
		wellknown.AnnotationPodProbe:           string(body),
		wellknown.AnnotationPodProbeMarkerList: strings.Join(names, ","),
	})
	patch, err := json.Marshal(ops)
	if err != nil {
		return allowed
	}
	klog.FromContext(ctx).V(3).Info("Recorded PodProbeMarker probes on the pod", "pod", klog.KRef(namespace, cmp.Or(pod.Name, pod.GenerateName)),
		"podProbeMarkers", names, "probes", len(probes))
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// ppmPodProbes returns the probes of markers that apply to pod (see
// Mutate), markerPolicy cleared, and the sorted names of the markers they
// come from.
func ppmPodProbes(pod *corev1.Pod, namespace string, markers []*v1alpha1.PodProbeMarker) ([]v1alpha1.PodContainerProbe, []string) {
	containers := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		containers[c.Name] = true
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers[c.Name] = true
		}
	}
	sorted := slices.DeleteFunc(slices.Clone(markers), func(m *v1alpha1.PodProbeMarker) bool {
		return m == nil || m.DeletionTimestamp != nil || (m.Namespace != "" && m.Namespace != namespace)
	})
	slices.SortFunc(sorted, func(a, b *v1alpha1.PodProbeMarker) int { return cmp.Compare(a.Name, b.Name) })

	var probes []v1alpha1.PodContainerProbe
	var names []string
	conditions, keys := map[string]bool{}, map[string]bool{}
	podLabels := labels.Set(pod.Labels)
	for _, m := range sorted {
		if m.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(m.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(podLabels) {
			continue
		}
		for _, p := range m.Spec.Probes {
			key := fmt.Sprintf("%s/%s", p.ContainerName, p.Name)
			if p.PodConditionType == "" || conditions[p.PodConditionType] || keys[key] || !containers[p.ContainerName] {
				continue
			}
			conditions[p.PodConditionType], keys[key] = true, true
			p.MarkerPolicy = nil
			probes = append(probes, p)
			if !slices.Contains(names, m.Name) {
				names = append(names, m.Name)
			}
		}
	}
	return probes, names
}
