package sidecarcontrol

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// revisionPatchReplace is the strategic-merge directive OpenKruise records
// in each revision's spec; Shoal writes it too, so that revisions look the
// same to tools that read either.
const revisionPatchReplace = "replace"

// revisionData is what a SidecarSet ControllerRevision stores: the parts
// of the spec that injection uses. The fields are in alphabetical order
// and always present (null when empty), which is the shape OpenKruise
// writes, so equal specs give byte-equal data and equal revision names.
type revisionData struct {
	// Spec is the recorded part of the spec.
	Spec revisionSpec `json:"spec"`
}

// revisionSpec is the recorded part of a SidecarSet spec.
type revisionSpec struct {
	// Patch is the strategic-merge directive "replace".
	Patch string `json:"$patch,omitempty"`
	// Containers is spec.containers.
	Containers []appsv1beta1.SidecarContainer `json:"containers"`
	// ImagePullSecrets is spec.imagePullSecrets.
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets"`
	// InitContainers is spec.initContainers.
	InitContainers []appsv1beta1.SidecarContainer `json:"initContainers"`
	// PatchPodMetadata is spec.patchPodMetadata.
	PatchPodMetadata []appsv1beta1.SidecarSetPatchPodMetadata `json:"patchPodMetadata"`
	// Volumes is spec.volumes.
	Volumes []corev1.Volume `json:"volumes"`
}

// nilIfEmpty maps an empty slice to nil, so that it encodes as null.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// NewRevision returns the ControllerRevision recording set's current spec,
// to be created in namespace (the coordinator's own: SidecarSets are
// cluster-scoped). Like OpenKruise's, it is named "<set>-<hash>", where
// hash covers the recorded data and collisionCount; it carries set's
// labels plus kruise.io/sidecarset-name=<set> and, when set has a
// spec.customVersion, apps.kruise.io/sidecarset-custom-version=<version>;
// set's annotations (except kubectl's last-applied configuration) plus
// both SidecarSet hashes; and a controller owner reference to set. Its
// data is the part of the spec injection uses: containers,
// initContainers, volumes, imagePullSecrets and patchPodMetadata.
//
// Creating it is the caller's business; on an AlreadyExists with other
// data, bump collisionCount and call again.
func NewRevision(set *appsv1beta1.SidecarSet, namespace string, revisionNumber int64, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if set == nil {
		return nil, fmt.Errorf("new SidecarSet revision: nil SidecarSet")
	}
	raw, err := json.Marshal(revisionData{Spec: revisionSpec{
		Patch:            revisionPatchReplace,
		Containers:       nilIfEmpty(set.Spec.Containers),
		ImagePullSecrets: nilIfEmpty(set.Spec.ImagePullSecrets),
		InitContainers:   nilIfEmpty(set.Spec.InitContainers),
		PatchPodMetadata: nilIfEmpty(set.Spec.PatchPodMetadata),
		Volumes:          nilIfEmpty(set.Spec.Volumes),
	}})
	if err != nil {
		return nil, fmt.Errorf("encode the revision of SidecarSet %s: %w", set.Name, err)
	}
	hash, hashWithoutImage, err := Hashes(set)
	if err != nil {
		return nil, err
	}

	labels := maps.Clone(set.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	delete(labels, wellknown.LabelSidecarSetCustomVersion)
	if v := customVersion(set); v != "" {
		labels[wellknown.LabelSidecarSetCustomVersion] = v
	}
	labels[wellknown.LabelSidecarSetName] = set.Name

	annotations := maps.Clone(set.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, corev1.LastAppliedConfigAnnotation)
	annotations[wellknown.AnnotationSidecarSetHash] = hash
	annotations[wellknown.AnnotationSidecarSetHashWithoutImage] = hashWithoutImage

	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            RevisionName(set.Name, raw, collisionCount),
			Namespace:       namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1beta1.SchemeGroupVersion.WithKind("SidecarSet"))},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: revisionNumber,
	}, nil
}

// customVersion is set's custom version: spec.customVersion, or else the
// v1alpha1-style label apps.kruise.io/sidecarset-custom-version on set.
func customVersion(set *appsv1beta1.SidecarSet) string {
	if set.Spec.CustomVersion != "" {
		return set.Spec.CustomVersion
	}
	return set.Labels[wellknown.LabelSidecarSetCustomVersion]
}

// RevisionName is the name of a revision of the SidecarSet setName with
// data raw: "<set>-<hash>", hash being an FNV-32a of raw and
// collisionCount in the alphabet of generated names, as Kubernetes names
// ControllerRevisions. setName is cut to 223 characters so that the name
// stays a valid object name.
func RevisionName(setName string, raw []byte, collisionCount *int32) string {
	h := fnv.New32a()
	_, _ = h.Write(raw)
	if collisionCount != nil {
		_, _ = h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	if len(setName) > 223 {
		setName = setName[:223]
	}
	return setName + "-" + utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// ApplyRevision returns a copy of set whose containers, initContainers,
// volumes, imagePullSecrets and patchPodMetadata are those recorded in
// rev; the rest of the spec is set's own. The copy also carries the
// revision's hashes in its kruise.io/sidecarset-hash and
// kruise.io/sidecarset-hash-without-image annotations (computed from the
// restored spec when rev lacks them) and rev's name in
// status.latestRevision, as OpenKruise's restored SidecarSets do.
func ApplyRevision(set *appsv1beta1.SidecarSet, rev *appsv1.ControllerRevision) (*appsv1beta1.SidecarSet, error) {
	if set == nil || rev == nil {
		return nil, fmt.Errorf("apply SidecarSet revision: nil SidecarSet or ControllerRevision")
	}
	var d revisionData
	if err := json.Unmarshal(rev.Data.Raw, &d); err != nil {
		return nil, fmt.Errorf("decode ControllerRevision %s/%s of SidecarSet %s: %w", rev.Namespace, rev.Name, set.Name, err)
	}
	out := set.DeepCopy()
	out.Spec.Containers = d.Spec.Containers
	out.Spec.InitContainers = d.Spec.InitContainers
	out.Spec.Volumes = d.Spec.Volumes
	out.Spec.ImagePullSecrets = d.Spec.ImagePullSecrets
	out.Spec.PatchPodMetadata = d.Spec.PatchPodMetadata

	hash, hashWithoutImage := rev.Annotations[wellknown.AnnotationSidecarSetHash], rev.Annotations[wellknown.AnnotationSidecarSetHashWithoutImage]
	if hash == "" || hashWithoutImage == "" {
		h, hw, err := Hashes(out)
		if err != nil {
			return nil, err
		}
		if hash == "" {
			hash = h
		}
		if hashWithoutImage == "" {
			hashWithoutImage = hw
		}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[wellknown.AnnotationSidecarSetHash] = hash
	out.Annotations[wellknown.AnnotationSidecarSetHashWithoutImage] = hashWithoutImage
	out.Status.LatestRevision = rev.Name
	return out, nil
}
