package workload

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
)

// Object is a workload object: metadata for owner references, an object
// for Events.
type Object interface {
	metav1.Object
	runtime.Object
}

// Claimer adopts and releases pods the way the upstream controllers' ref
// manager does: a workload owns the pods its selector matches that have
// no controller (an orphaning delete of another workload left them, or
// `kubectl kruise migrate` did), and lets go of the pods it controls that
// its selector no longer matches.
type Claimer struct {
	// Client writes the pods' owner references.
	Client kubernetes.Interface
	// Recorder records a ClaimPod Event per pod adopted or released.
	Recorder events.EventRecorder
	// Kind is the workload's (for the controller reference).
	Kind schema.GroupVersionKind
}

// Pods returns the pods of candidates (the pods of w's namespace) that w
// controls after adopting and releasing, terminating ones included.
func (c Claimer) Pods(ctx context.Context, w Object, selector *metav1.LabelSelector, candidates []any) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	var errs []error
	for _, o := range candidates {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		ref := metav1.GetControllerOf(pod)
		matches := !sel.Empty() && sel.Matches(labels.Set(pod.Labels))
		switch {
		case ref != nil && ref.UID == w.GetUID() && matches:
			out = append(out, pod)
		case ref != nil && ref.UID == w.GetUID():
			errs = append(errs, c.setController(ctx, w, pod, nil, "released: its labels no longer match the selector"))
		case ref == nil && matches && pod.DeletionTimestamp == nil && w.GetDeletionTimestamp() == nil:
			if err := c.setController(ctx, w, pod, metav1.NewControllerRef(w, c.Kind), "adopted: its labels match the selector"); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, pod)
		}
	}
	return out, errors.Join(errs...)
}

// setController writes pod's controller reference to ref (nil removes
// w's).
func (c Claimer) setController(ctx context.Context, w Object, pod *corev1.Pod, ref *metav1.OwnerReference, why string) error {
	refs := slices.DeleteFunc(slices.Clone(pod.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == w.GetUID() })
	if ref != nil {
		refs = append(refs, *ref)
	}
	next := pod.DeepCopy()
	next.OwnerReferences = refs
	if _, err := c.Client.CoreV1().Pods(pod.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return IgnoreStale(err, "set the controller of pod %s", pod.Name)
	}
	c.Recorder.Eventf(w, pod, corev1.EventTypeNormal, "ClaimPod", "Claim", "pod %s %s", pod.Name, why)
	return nil
}

// OrphanHandler wraps a pod event handler: an added or updated pod
// without a controller also queues the workloads of its namespace whose
// selector (from selectorOf) matches it, to adopt it.
func (l *Loop) OrphanHandler(h cache.ResourceEventHandlerFuncs, selectorOf func(obj any) *metav1.LabelSelector) cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || metav1.GetControllerOf(pod) != nil || pod.DeletionTimestamp != nil {
			return
		}
		workloads, err := l.Workloads.ByIndex(cache.NamespaceIndex, pod.Namespace)
		if err != nil {
			return
		}
		for _, w := range workloads {
			if sel, err := metav1.LabelSelectorAsSelector(selectorOf(w)); err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
				l.Enqueue(w)
			}
		}
	}
	add, update := h.AddFunc, h.UpdateFunc
	h.AddFunc = func(obj any) {
		add(obj)
		enqueue(obj)
	}
	h.UpdateFunc = func(old, obj any) {
		update(old, obj)
		enqueue(obj)
	}
	return h
}
