package sidecarcontrol

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// UpgradeSpec is one entry of the pod annotations
// kruise.io/sidecarset-hash and kruise.io/sidecarset-hash-without-image,
// which are JSON maps from SidecarSet name to UpgradeSpec. The JSON field
// names are OpenKruise's, so pods injected by either read the same.
type UpgradeSpec struct {
	// UpdateTimestamp is when the sidecars were injected or last updated.
	UpdateTimestamp metav1.Time `json:"updateTimestamp"`
	// Hash is the SidecarSet hash (or hash without images, in the
	// kruise.io/sidecarset-hash-without-image annotation) the pod's
	// sidecars were built from.
	Hash string `json:"hash"`
	// SidecarSetName is the name of the SidecarSet.
	SidecarSetName string `json:"sidecarSetName"`
	// SidecarList are the names of the SidecarSet's containers (and native
	// sidecar init containers) in the pod, as named in the SidecarSet (a
	// hot-upgrade sidecar is listed once, without -1/-2), sorted.
	SidecarList []string `json:"sidecarList"`
	// ControllerRevision is the name of the SidecarSet ControllerRevision
	// the sidecars were built from, when known.
	ControllerRevision string `json:"controllerRevision,omitempty"`
}

// PodUpgradeSpecs reads the annotation (wellknown.AnnotationSidecarSetHash
// or wellknown.AnnotationSidecarSetHashWithoutImage) of pod: SidecarSet
// name to UpgradeSpec. The older format, a map from SidecarSet name to the
// bare hash, is read too. It never returns nil; a missing or unreadable
// annotation gives an empty map.
func PodUpgradeSpecs(pod *corev1.Pod, annotation string) map[string]UpgradeSpec {
	out := map[string]UpgradeSpec{}
	if pod == nil {
		return out
	}
	raw := pod.Annotations[annotation]
	if raw == "" {
		return out
	}
	if err := json.Unmarshal([]byte(raw), &out); err == nil {
		if out == nil { // the annotation was "null"
			out = map[string]UpgradeSpec{}
		}
		return out
	}
	var old map[string]string
	if err := json.Unmarshal([]byte(raw), &old); err != nil {
		return map[string]UpgradeSpec{}
	}
	out = make(map[string]UpgradeSpec, len(old))
	for name, hash := range old {
		out[name] = UpgradeSpec{Hash: hash, SidecarSetName: name}
	}
	return out
}

// SetPodUpgradeSpec writes s under s.SidecarSetName into the annotation
// (wellknown.AnnotationSidecarSetHash or
// wellknown.AnnotationSidecarSetHashWithoutImage) of pod, keeping the
// entries of other SidecarSets. An unreadable annotation is replaced.
func SetPodUpgradeSpec(pod *corev1.Pod, annotation string, s UpgradeSpec) error {
	if pod == nil {
		return fmt.Errorf("set annotation %s: nil pod", annotation)
	}
	if s.SidecarSetName == "" {
		return fmt.Errorf("set annotation %s on pod %s: the entry has no sidecarSetName", annotation, podName(pod))
	}
	specs := PodUpgradeSpecs(pod, annotation)
	specs[s.SidecarSetName] = s
	raw, err := json.Marshal(specs)
	if err != nil {
		return fmt.Errorf("set annotation %s on pod %s: %w", annotation, podName(pod), err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[annotation] = string(raw)
	return nil
}

// InjectedSidecarSets returns the names in the pod annotation
// kruise.io/sidecarset-injected-list, sorted.
func InjectedSidecarSets(pod *corev1.Pod) []string {
	if pod == nil {
		return nil
	}
	return splitList(pod.Annotations[wellknown.AnnotationSidecarSetInjectedList])
}

// splitList splits a comma-separated list, dropping empty items and
// duplicates, sorted.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HotUpgradeNames returns the names of the two pod containers of the
// hot-upgrade sidecar named sidecar: "<sidecar>-1" and "<sidecar>-2".
func HotUpgradeNames(sidecar string) (string, string) {
	return sidecar + wellknown.HotUpgradeContainerSuffix1, sidecar + wellknown.HotUpgradeContainerSuffix2
}

// IsHotUpgrade reports whether c is upgraded with HotUpgrade, that is,
// runs in the pod as a pair of containers.
func IsHotUpgrade(c *appsv1beta1.SidecarContainer) bool {
	return c != nil && c.UpgradeStrategy.UpgradeType == appsv1beta1.SidecarContainerHotUpgrade
}

// WorkingHotUpgradeContainers reads the pod annotation
// kruise.io/sidecarset-working-hotupgrade-container: for each hot-upgrade
// sidecar (by its SidecarSet name), the pod container currently doing the
// work, "<sidecar>-1" or "<sidecar>-2". It never returns nil; a missing or
// unreadable annotation gives an empty map.
func WorkingHotUpgradeContainers(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	if pod == nil {
		return out
	}
	raw := pod.Annotations[wellknown.AnnotationSidecarSetWorkingHotUpgradeContainer]
	if raw == "" {
		return out
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil || out == nil {
		return map[string]string{}
	}
	return out
}

// SetWorkingHotUpgradeContainer records in the pod annotation
// kruise.io/sidecarset-working-hotupgrade-container that container
// ("<sidecar>-1" or "<sidecar>-2") does the work of sidecar, keeping the
// other sidecars' entries.
func SetWorkingHotUpgradeContainer(pod *corev1.Pod, sidecar, container string) error {
	if pod == nil {
		return fmt.Errorf("set working hot-upgrade container of %s: nil pod", sidecar)
	}
	m := WorkingHotUpgradeContainers(pod)
	m[sidecar] = container
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("set working hot-upgrade container of %s in pod %s: %w", sidecar, podName(pod), err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[wellknown.AnnotationSidecarSetWorkingHotUpgradeContainer] = string(raw)
	return nil
}

// VersionAnnotation is the pod annotation holding the version the pod
// container (a "<sidecar>-1" or "<sidecar>-2" of a hot-upgrade pair) runs:
// version.sidecarset.kruise.io/<container>.
func VersionAnnotation(container string) string {
	return wellknown.AnnotationSidecarSetVersionPrefix + container
}

// VersionAltAnnotation is the pod annotation holding the version of the
// other container of container's hot-upgrade pair:
// versionalt.sidecarset.kruise.io/<container>.
func VersionAltAnnotation(container string) string {
	return wellknown.AnnotationSidecarSetVersionAltPrefix + container
}
