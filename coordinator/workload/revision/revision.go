// Package revision keeps a workload's ControllerRevisions, shared by the
// CloneSet and Advanced DaemonSet controllers: one revision per pod
// template, named <workload>-<hash>, owned by the workload, storing the
// template under spec.template (as OpenKruise and the upstream DaemonSet
// store it); history trimmed to revisionHistoryLimit, never dropping a
// revision a pod still runs.
package revision

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// AnnotationChangeCause is the annotation (set by users or by kubectl's
// --record) that says why the template changed; a new revision keeps it.
const AnnotationChangeCause = "kubernetes.io/change-cause"

// data is what a ControllerRevision stores: the pod template, under
// spec.template.
type data struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// Hash is the hash of a pod template and the workload's collision count,
// in the safe alphabet Kubernetes uses for revision names.
func Hash(t *corev1.PodTemplateSpec, collisionCount *int32) (string, error) {
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

// Template decodes a revision's pod template.
func Template(r *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var d data
	if err := json.Unmarshal(r.Data.Raw, &d); err != nil {
		return nil, fmt.Errorf("decode ControllerRevision %s/%s: %w", r.Namespace, r.Name, err)
	}
	return &d.Spec.Template, nil
}

// Owner is the workload a revision belongs to.
type Owner struct {
	// Object is the workload.
	Object metav1.Object
	// Kind is its group, version and kind (for the owner reference).
	Kind schema.GroupVersionKind
	// Template is its current pod template.
	Template *corev1.PodTemplateSpec
	// CollisionCount is its status.collisionCount.
	CollisionCount *int32
	// Labels go on a new revision (the workload's selector labels).
	Labels map[string]string
	// HistoryLimit is how many revisions besides those in use are kept.
	HistoryLimit int
}

// Sync makes sure the revision of o's template exists among revs (o's
// revisions, as an informer shows them), creating it with the next
// revision number, and deletes the oldest revisions beyond o.HistoryLimit
// that are not in inUse. It returns the revision of the template.
func Sync(ctx context.Context, client kubernetes.Interface, o Owner, revs []*appsv1.ControllerRevision, inUse map[string]bool) (*appsv1.ControllerRevision, error) {
	ns := o.Object.GetNamespace()
	hash, err := Hash(o.Template, o.CollisionCount)
	if err != nil {
		return nil, err
	}
	name := o.Object.GetName() + "-" + hash
	var update *appsv1.ControllerRevision
	var maxNumber int64
	for _, r := range revs {
		maxNumber = max(maxNumber, r.Revision)
		if r.Name == name {
			update = r
		}
	}
	if update == nil {
		// A revision another controller wrote for the same template
		// (OpenKruise's, whose hash differs from ours) is this template's
		// revision: its pods are up to date and keep running.
		update, err = adoptEqual(ctx, client, o.Template, revs, maxNumber)
		if err != nil {
			return nil, err
		}
	}
	if update == nil {
		want, err := newRevision(o, hash, maxNumber+1)
		if err != nil {
			return nil, err
		}
		update, err = client.AppsV1().ControllerRevisions(ns).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			update, err = client.AppsV1().ControllerRevisions(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("create ControllerRevision %s: %w", name, err)
		}
		revs = append(revs, update)
	}
	keep := maps.Clone(inUse)
	if keep == nil {
		keep = map[string]bool{}
	}
	keep[update.Name] = true
	sorted := append([]*appsv1.ControllerRevision(nil), revs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Revision > sorted[j].Revision })
	kept := 0
	for _, r := range sorted {
		if keep[r.Name] {
			continue
		}
		if kept < o.HistoryLimit {
			kept++
			continue
		}
		err := client.AppsV1().ControllerRevisions(ns).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete old ControllerRevision %s: %w", r.Name, err)
		}
	}
	return update, nil
}

// adoptEqual returns the newest of revs whose stored template equals
// template, or nil. When it is not the newest revision, its number moves
// past every other's (as the upstream controllers do with an equal
// revision), so that history and rollback see it as the latest.
func adoptEqual(ctx context.Context, client kubernetes.Interface, template *corev1.PodTemplateSpec, revs []*appsv1.ControllerRevision, maxNumber int64) (*appsv1.ControllerRevision, error) {
	var equal *appsv1.ControllerRevision
	for _, r := range revs {
		t, err := Template(r)
		if err != nil || !apiequality.Semantic.DeepEqual(t, template) {
			continue
		}
		if equal == nil || r.Revision > equal.Revision {
			equal = r
		}
	}
	if equal == nil || equal.Revision == maxNumber {
		return equal, nil
	}
	moved := equal.DeepCopy()
	moved.Revision = maxNumber + 1
	got, err := client.AppsV1().ControllerRevisions(moved.Namespace).Update(ctx, moved, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("renumber ControllerRevision %s/%s: %w", moved.Namespace, moved.Name, err)
	}
	return got, nil
}

// newRevision is the ControllerRevision of o's template, named
// <workload>-<hash>.
func newRevision(o Owner, hash string, number int64) (*appsv1.ControllerRevision, error) {
	var d data
	d.Spec.Template = *o.Template
	raw, err := json.Marshal(&d)
	if err != nil {
		return nil, fmt.Errorf("encode revision of %s/%s: %w", o.Object.GetNamespace(), o.Object.GetName(), err)
	}
	labels := map[string]string{wellknown.LabelControllerRevisionHash: hash}
	maps.Copy(labels, o.Labels)
	var annotations map[string]string
	if cause, ok := o.Object.GetAnnotations()[AnnotationChangeCause]; ok {
		// kubectl kruise rollout history shows it.
		annotations = map[string]string{AnnotationChangeCause: cause}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Object.GetName() + "-" + hash, Namespace: o.Object.GetNamespace(), Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(o.Object, o.Kind)},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}, nil
}
