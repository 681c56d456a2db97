package sidecarcontrol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// Hashes returns the two hashes OpenKruise keeps for a SidecarSet: hash
// covers spec.containers, and hashWithoutImage the same with every image
// blanked. When at least one init container is a native sidecar
// (restartPolicy Always), all of spec.initContainers are covered as well,
// because native sidecars are upgraded in place like containers; plain
// init containers only run at pod start and do not count otherwise.
// Nothing else of the spec (volumes, patchPodMetadata, strategies) is
// covered. The result is deterministic: a sha256 of the JSON encoding,
// written in the alphabet Kubernetes uses for generated names.
//
// A pod whose recorded hashWithoutImage equals the SidecarSet's differs
// from it in images only, so its sidecars can be updated in place.
func Hashes(set *appsv1beta1.SidecarSet) (hash, hashWithoutImage string, err error) {
	if set == nil {
		return "", "", fmt.Errorf("hash SidecarSet: nil SidecarSet")
	}
	hash, err = hashContainers(set.Spec.Containers, set.Spec.InitContainers)
	if err != nil {
		return "", "", fmt.Errorf("hash SidecarSet %s: %w", set.Name, err)
	}
	hashWithoutImage, err = hashContainers(withoutImages(set.Spec.Containers), withoutImages(set.Spec.InitContainers))
	if err != nil {
		return "", "", fmt.Errorf("hash SidecarSet %s without images: %w", set.Name, err)
	}
	return hash, hashWithoutImage, nil
}

// hashContainers hashes containers, and initContainers when one of them is
// a native sidecar.
func hashContainers(containers, initContainers []appsv1beta1.SidecarContainer) (string, error) {
	// A map encodes with sorted keys, so the encoding is stable.
	m := map[string]any{"containers": containers}
	for i := range initContainers {
		if IsNativeSidecar(&initContainers[i].Container) {
			m["initContainers"] = initContainers
			break
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return utilrand.SafeEncodeString(hex.EncodeToString(sum[:])), nil
}

// withoutImages copies cs with every image blanked.
func withoutImages(cs []appsv1beta1.SidecarContainer) []appsv1beta1.SidecarContainer {
	if cs == nil {
		return nil
	}
	out := make([]appsv1beta1.SidecarContainer, len(cs))
	for i := range cs {
		cs[i].DeepCopyInto(&out[i])
		out[i].Image = ""
	}
	return out
}

// IsNativeSidecar reports whether c, an init container, is a native
// sidecar: one with restartPolicy Always, which keeps running next to the
// pod's containers.
func IsNativeSidecar(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
