package podunavailablebudget

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Workloads finds the workloads of pods and reads their replicas from the
// shared informers of the kinds Shoal watches (any other kind through its
// scale subresource). The budget controller uses it, and so does the
// WorkloadSpread controller.
type Workloads struct {
	// ReplicaSets, Deployments and StatefulSets (apps/v1), CloneSets and
	// AdvancedStatefulSets (apps.kruise.io/v1beta1) are shared informers;
	// a nil one is a kind read through Scales.
	ReplicaSets, Deployments, StatefulSets, CloneSets, AdvancedStatefulSets cache.SharedIndexInformer
	// Scales reads the replicas of other kinds; nil: only the kinds
	// above are known.
	Scales Scales
}

// Workload is what the caches, or the scale subresource, tell of a
// workload.
type Workload struct {
	// UID of the workload.
	UID types.UID
	// Replicas is its spec.replicas (unset is 1).
	Replicas int32
	// Deleting says it has a deletionTimestamp.
	Deleting bool
	// Object is the cached object (shared: not to be changed); nil when
	// read through the scale subresource.
	Object metav1.Object
}

// ControllerRef names a controller in a pod's chain of controllers.
type ControllerRef struct {
	// GroupKind is the controller's API group and kind (the version does
	// not matter).
	schema.GroupKind
	// Name of the controller, in the pod's namespace.
	Name string
	// UID of the controller, as its dependent's owner reference says.
	UID types.UID
}

// Controllers returns the pod's chain of controllers as far as the caches
// tell: its controller and, when that is a ReplicaSet, StatefulSet,
// CloneSet or Advanced StatefulSet in the caches, that one's controller
// (a ReplicaSet's Deployment, for instance). Nil for a pod without a
// controller.
func (w *Workloads) Controllers(pod *corev1.Pod) []ControllerRef {
	chain := w.owners(pod)
	out := make([]ControllerRef, 0, len(chain))
	for _, r := range chain {
		out = append(out, ControllerRef{GroupKind: r.groupKind(), Name: r.name, UID: r.uid})
	}
	return out
}

// OwnerCached reports whether Controllers can tell the pod's whole chain
// of controllers: the pod has no controller, its controller is of a kind
// without an informer (its own controller is not followed), or the
// controller is in its informer's cache. A ReplicaSet a Deployment has
// just created may not be cached yet when its first pods are admitted.
func (w *Workloads) OwnerCached(pod *corev1.Pod) bool {
	o := metav1.GetControllerOf(pod)
	if o == nil {
		return true
	}
	first := refOf(o)
	inf := w.informerOf(first.groupKind())
	if inf == nil {
		return true
	}
	obj, err := cached(inf, pod.Namespace, first.name)
	return err == nil && obj != nil && obj.GetUID() == first.uid
}

// Lookup returns the workload of kind gk named name in namespace, nil
// when it does not exist. For a kind Shoal has no informer for it reads
// the scale subresource; the error wraps ErrNoScale when that kind has
// none (or Scales is nil).
func (w *Workloads) Lookup(ctx context.Context, namespace string, gk schema.GroupKind, name string) (*Workload, error) {
	if inf := w.informerOf(gk); inf != nil {
		obj, err := cached(inf, namespace, name)
		if err != nil || obj == nil {
			return nil, err
		}
		return &Workload{UID: obj.GetUID(), Replicas: replicasOf(obj), Deleting: obj.GetDeletionTimestamp() != nil, Object: obj}, nil
	}
	s, err := w.lookupUncached(ctx, namespace, ref{group: gk.Group, kind: gk.Kind, name: name})
	if err != nil || s == nil {
		return nil, err
	}
	return &Workload{UID: s.uid, Replicas: s.replicas, Deleting: s.deleting}, nil
}
