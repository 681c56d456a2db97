package sidecarcontrol

import (
	"fmt"
	"maps"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// PatchPodMetadata applies a SidecarSet's patchPodMetadata to a pod's
// annotations, in order, and reports whether they changed:
//
//   - Retain (and empty) sets only the annotations the pod lacks;
//   - Overwrite sets every annotation;
//   - MergePatchJson merges the value, a JSON object, into the pod's
//     value as a JSON merge patch (RFC 7386), or sets it when the pod has
//     no (or an empty) value.
//
// On an error (a value that is not valid JSON for MergePatchJson) meta is
// left unchanged. Unknown policies are ignored, as in OpenKruise.
func PatchPodMetadata(meta *metav1.ObjectMeta, patches []appsv1beta1.SidecarSetPatchPodMetadata) (bool, error) {
	if meta == nil || len(patches) == 0 {
		return false, nil
	}
	annotations := maps.Clone(meta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	for i, p := range patches {
		switch p.PatchPolicy {
		case appsv1beta1.SidecarSetRetainPatchPolicy, "":
			for k, v := range p.Annotations {
				if _, ok := annotations[k]; !ok {
					annotations[k] = v
				}
			}
		case appsv1beta1.SidecarSetOverwritePatchPolicy:
			maps.Copy(annotations, p.Annotations)
		case appsv1beta1.SidecarSetMergePatchJsonPatchPolicy:
			for k, v := range p.Annotations {
				old := annotations[k]
				if old == "" {
					annotations[k] = v
					continue
				}
				merged, err := jsonpatch.MergePatch([]byte(old), []byte(v))
				if err != nil {
					return false, fmt.Errorf("patchPodMetadata[%d]: merge %q into the pod's annotation %s: %w", i, v, k, err)
				}
				annotations[k] = string(merged)
			}
		}
	}
	if maps.Equal(annotations, meta.Annotations) {
		return false, nil
	}
	meta.Annotations = annotations
	return true, nil
}
