package workload

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload/expectations"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Owner names the kind of workload a controller owns pods (and
// revisions) of. Kruise kinds share names with upstream ones (DaemonSet,
// StatefulSet): Group tells them apart.
type Owner struct {
	// Kind is the owner reference's kind, such as "CloneSet".
	Kind string
	// Group is the API group of the owner reference's apiVersion,
	// "apps.kruise.io".
	Group string
}

// controllerOf returns obj's controller reference if it is of o.
func (o Owner) controllerOf(obj metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != o.Kind {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != o.Group {
		return nil
	}
	return ref
}

// Indexers is an informer index, named name, of objects by the UID of
// their controller of o's kind.
func (o Owner) Indexers(name string) cache.Indexers {
	return cache.Indexers{name: func(obj any) ([]string, error) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return nil, nil
		}
		if ref := o.controllerOf(m); ref != nil {
			return []string{string(ref.UID)}, nil
		}
		return nil, nil
	}}
}

// PodOwner returns the pod of an informer event (a tombstone unwrapped)
// and the namespace/name key of its controller of o's kind; ok is false
// for any other object or pod.
func (o Owner) PodOwner(obj any) (pod *corev1.Pod, key string, ok bool) {
	pod, isPod := Unwrap(obj).(*corev1.Pod)
	if !isPod {
		return nil, "", false
	}
	ref := o.controllerOf(pod)
	if ref == nil {
		return nil, "", false
	}
	return pod, pod.Namespace + "/" + ref.Name, true
}

// Unwrap returns the object of an informer event, a deletion tombstone
// unwrapped.
func Unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// Unschedulable reports whether the scheduler found no node for the pod:
// its PodScheduled condition is False with reason Unschedulable.
func Unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// NodePlacementChanged reports whether a node update can change which
// per-node pods belong on it (its labels, taints or schedulability), not
// a status heartbeat.
func NodePlacementChanged(old, obj any) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := obj.(*corev1.Node)
	return !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) || !apiequality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
		o.Spec.Unschedulable != n.Spec.Unschedulable
}

// IgnoreStale drops the error of a write made on a stale copy (not
// found, or a conflict: a newer copy comes through the informer) and wraps
// any other with what was being done.
func IgnoreStale(err error, format string, args ...any) error {
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// Loop is the queue side every workload controller shares: the work queue
// of workload keys, the expectations of its own pod writes, and the event
// handler registrations whose sync says the controller has seen the
// informers' first lists. A controller embeds it and adds its sync.
type Loop struct {
	// Queue holds namespace/name keys of workloads to sync.
	Queue syncloop.Queue
	// Expect records the pod creates, deletes and updates still to show
	// in the informer.
	Expect *expectations.Expectations
	// Owner finds the workload of a pod.
	Owner Owner
	// Workloads is the informer store of the workloads.
	Workloads cache.Indexer
	// Registrations are the controller's event handlers.
	Registrations []cache.ResourceEventHandlerRegistration
}

// HasSynced reports whether the informers' initial lists went through the
// controller's handlers.
func (l *Loop) HasSynced() bool {
	for _, r := range l.Registrations {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// Resync queues every workload; the coordinator calls it when this
// replica starts leading.
func (l *Loop) Resync() {
	for _, obj := range l.Workloads.List() {
		l.Enqueue(obj)
	}
}

// Enqueue queues a workload of an informer event.
func (l *Loop) Enqueue(obj any) { syncloop.Enqueue(l.Queue, obj) }

// PodEvent observes an expectation (none when observed is "") and queues
// the pod's workload.
func (l *Loop) PodEvent(obj any, observed expectations.Action) {
	p, key, ok := l.Owner.PodOwner(obj)
	if !ok {
		return
	}
	if observed != "" {
		l.Expect.Observe(key, observed, p.Name)
	}
	l.Queue.Add(key)
}

// Watch adds handler to inf and keeps its registration; what names the
// objects for the error.
func (l *Loop) Watch(inf cache.SharedIndexInformer, handler cache.ResourceEventHandler, what string) error {
	reg, err := inf.AddEventHandler(handler)
	if err != nil {
		return fmt.Errorf("watch %s: %w", what, err)
	}
	l.Registrations = append(l.Registrations, reg)
	return nil
}

// PodHandler is the pod event handler of a workload controller: a pod
// that appears observes a Create, one being deleted or gone a Delete, one
// whose controller-revision-hash label changed (an in-place update the
// informer now shows) an Update; each queues the pod's workload.
func (l *Loop) PodHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { l.PodEvent(obj, expectations.Create) },
		UpdateFunc: func(old, obj any) {
			p, ok := obj.(*corev1.Pod)
			o, okOld := old.(*corev1.Pod)
			switch {
			case ok && p.DeletionTimestamp != nil:
				l.PodEvent(obj, expectations.Delete)
			case ok && okOld && o.Labels[wellknown.LabelControllerRevisionHash] != p.Labels[wellknown.LabelControllerRevisionHash]:
				l.PodEvent(obj, expectations.Update)
			default:
				l.PodEvent(obj, "")
			}
		},
		DeleteFunc: func(obj any) { l.PodEvent(obj, expectations.Delete) },
	}
}

// Workers is how many workloads of one kind a controller syncs at once.
// A sync spends most of its time waiting on the API (pod creates pass
// four admission webhooks), so workers cost little CPU. With 2, the e2e
// parallel group's CloneSets waited 153 ms on average for a worker and
// over 2 s for 1% of their syncs (shoal_coordinator_workqueue_*), time
// that delays a pod's create past minReadySeconds. kube-controller-manager
// runs 5 for ReplicaSets and StatefulSets.
const Workers = 4

// WorkloadHandler queues the workload of every event.
func (l *Loop) WorkloadHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: l.Enqueue, UpdateFunc: func(_, obj any) { l.Enqueue(obj) }, DeleteFunc: l.Enqueue}
}

// WriteMayHaveHappened reports whether a failed create or delete may
// still have reached storage (a timeout or a server error): its
// expectation is then kept, so that a stale cache does not make the
// workload do it twice; it expires if the informer never shows it.
func WriteMayHaveHappened(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
}
