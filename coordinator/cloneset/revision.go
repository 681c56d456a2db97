package cloneset

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// annotationChangeCause is the annotation (set by users or by kubectl's
// --record) that says why the template changed; a new revision keeps it.
const annotationChangeCause = "kubernetes.io/change-cause"

// revisionData is what a CloneSet's ControllerRevision stores: the pod
// template, under spec.template as OpenKruise stores it.
type revisionData struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// templateHash is the hash of a pod template and the CloneSet's collision
// count, in the safe alphabet Kubernetes uses for revision names.
func templateHash(t *corev1.PodTemplateSpec, collisionCount *int32) (string, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("hash the pod template: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write(raw)
	if collisionCount != nil {
		_, _ = h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10)), nil
}

// newRevision is the ControllerRevision of cs's current template, named
// <cloneset>-<hash>.
func newRevision(cs *v1beta1.CloneSet, hash string, number int64) (*appsv1.ControllerRevision, error) {
	var d revisionData
	d.Spec.Template = cs.Spec.Template
	raw, err := json.Marshal(&d)
	if err != nil {
		return nil, fmt.Errorf("encode revision of %s/%s: %w", cs.Namespace, cs.Name, err)
	}
	labels := map[string]string{wellknown.LabelControllerRevisionHash: hash}
	for k, v := range cs.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	var annotations map[string]string
	if cause, ok := cs.Annotations[annotationChangeCause]; ok {
		// kubectl kruise rollout history shows it.
		annotations = map[string]string{annotationChangeCause: cause}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: cs.Name + "-" + hash, Namespace: cs.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"))},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}, nil
}

// templateOf decodes a revision's pod template.
func templateOf(r *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var d revisionData
	if err := json.Unmarshal(r.Data.Raw, &d); err != nil {
		return nil, fmt.Errorf("decode ControllerRevision %s/%s: %w", r.Namespace, r.Name, err)
	}
	return &d.Spec.Template, nil
}
