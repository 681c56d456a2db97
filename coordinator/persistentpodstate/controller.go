// Package persistentpodstate is the coordinator's PersistentPodState
// controller (apps.kruise.io/v1alpha1, its storage version). For each
// PersistentPodState whose targetRef names a StatefulSet (apps/v1) or an
// Advanced StatefulSet (apps.kruise.io, either version) it records in
// status.podStates, for every Ready pod of the target, the node the pod
// runs on, that node's values of the topology keys of
// requiredPersistentTopology and preferredPersistentTopology, and the
// pod's values of persistentPodAnnotations. The pod webhook
// (coordinator/webhook, PersistentPodStateAdmission) gives a pod that
// replaces a recorded one the same placement and annotations.
//
// Records stay while their pods are away; with the retention policy
// WhenScaled (the default) the record of an ordinal the target scaled away
// is dropped once its pod is gone. When the target is deleted, the records
// are cleared, and a PersistentPodState generated for it is deleted.
//
// The controller also generates PersistentPodStates: a StatefulSet of
// either kind annotated kruise.io/auto-generate-persistent-pod-state
// "true" with kruise.io/required-persistent-topology and/or
// kruise.io/preferred-persistent-topology (comma-separated node label
// keys; kruise.io/persistent-pod-annotations adds pod annotation keys)
// gets a PersistentPodState of its own name, controlled by it; removing
// the annotation deletes it.
//
// Only the leader writes. Events go on the PersistentPodStates.
package persistentpodstate

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Shoal creates, updates and deletes PersistentPodStates and writes
	// their status.
	Shoal shoalclient.Interface
	// States (v1alpha1), Pods, Nodes, StatefulSets (apps/v1) and
	// AdvancedStatefulSets (v1beta1, their storage version) are shared
	// informers.
	States, Pods, Nodes, StatefulSets, AdvancedStatefulSets cache.SharedIndexInformer
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on PersistentPodStates.
	Recorder events.EventRecorder
}

// Controller reconciles PersistentPodStates. Its embedded Loop's queue
// holds PersistentPodState keys; a second queue holds the StatefulSets
// whose generated PersistentPodState to reconcile.
type Controller struct {
	workload.Loop
	o Options
	// generate holds workload keys "<group>|<namespace>/<name>".
	generate syncloop.Queue
}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	c := &Controller{
		o:        o,
		Loop:     workload.Loop{Queue: syncloop.NewQueue("persistentpodstate", nil), Workloads: o.States.GetIndexer()},
		generate: syncloop.NewQueue("persistentpodstate-generate", nil),
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.States, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.stateEvent,
			UpdateFunc: func(_, obj any) { c.stateEvent(obj) },
			DeleteFunc: c.stateEvent,
		}, "PersistentPodStates"},
		{o.Pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.podEvent,
			UpdateFunc: func(old, obj any) { c.podUpdate(old, obj) },
			DeleteFunc: c.podEvent,
		}, "pods"},
		{o.StatefulSets, c.workloadHandler(GroupApps), "StatefulSets"},
		{o.AdvancedStatefulSets, c.workloadHandler(GroupKruise), "Advanced StatefulSets"},
		// Nodes are read from the cache when a pod is recorded; their
		// events need no handler, but the cache must be synced.
		{o.Nodes, cache.ResourceEventHandlerFuncs{}, "nodes"},
	} {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Resync queues every PersistentPodState and every StatefulSet of either
// kind; the coordinator calls it when this replica starts leading.
func (c *Controller) Resync() {
	c.Loop.Resync()
	for _, obj := range c.o.StatefulSets.GetIndexer().List() {
		c.enqueueWorkload(GroupApps, obj)
	}
	for _, obj := range c.o.AdvancedStatefulSets.GetIndexer().List() {
		c.enqueueWorkload(GroupKruise, obj)
	}
}

// Run processes both queues until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { syncloop.Run(ctx, c.generate, 1, "generated PersistentPodState", c.syncGenerated) })
	syncloop.Run(ctx, c.Queue, 2, "PersistentPodState", c.sync)
	wg.Wait()
	return nil
}

// stateEvent queues a PersistentPodState and, when a StatefulSet controls
// it (generated), that StatefulSet's generation too: a generated object
// deleted or edited by someone is put back.
func (c *Controller) stateEvent(obj any) {
	c.Enqueue(obj)
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pps, ok := obj.(*v1alpha1.PersistentPodState)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(pps); ref != nil {
		if group, ok := TargetGroup(ref.APIVersion, ref.Kind); ok {
			c.generate.Add(generateKey(group, pps.Namespace, ref.Name))
		}
	}
}

// podEvent queues the PersistentPodStates targeting the pod's StatefulSet.
func (c *Controller) podEvent(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return
	}
	group, ok := TargetGroup(ref.APIVersion, ref.Kind)
	if !ok {
		return
	}
	c.enqueueStatesOf(group, p.Namespace, ref.Name)
}

// podUpdate queues on the changes that matter to a record: readiness,
// phase, node, deletion and annotations.
func (c *Controller) podUpdate(old, obj any) {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := obj.(*corev1.Pod)
	if ok1 && ok2 && o.Spec.NodeName == n.Spec.NodeName && o.Status.Phase == n.Status.Phase &&
		recordable(o) == recordable(n) && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) &&
		maps.Equal(o.Annotations, n.Annotations) {
		return
	}
	c.podEvent(obj)
}

// workloadHandler queues, on every event of a StatefulSet of group, its
// generation and the PersistentPodStates targeting it (status-only
// updates excepted).
func (c *Controller) workloadHandler(group string) cache.ResourceEventHandlerFuncs {
	both := func(obj any) {
		c.enqueueWorkload(group, obj)
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			c.enqueueStatesOf(group, m.GetNamespace(), m.GetName())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: both,
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(metav1.Object)
			n, ok2 := obj.(metav1.Object)
			if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && maps.Equal(o.GetAnnotations(), n.GetAnnotations()) &&
				(o.GetDeletionTimestamp() == nil) == (n.GetDeletionTimestamp() == nil) && o.GetUID() == n.GetUID() {
				return
			}
			both(obj)
		},
		DeleteFunc: both,
	}
}

// generateKey is the generation queue's key of a workload.
func generateKey(group, namespace, name string) string {
	return group + "|" + namespace + "/" + name
}

// enqueueWorkload queues a StatefulSet's generation.
func (c *Controller) enqueueWorkload(group string, obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.generate.Add(group + "|" + key)
	}
}

// enqueueStatesOf queues the PersistentPodStates in namespace targeting
// the StatefulSet of group and name.
func (c *Controller) enqueueStatesOf(group, namespace, name string) {
	for _, pps := range c.statesIn(namespace) {
		if Targets(pps.Spec.TargetReference, group, name) {
			c.Enqueue(pps)
		}
	}
}

// statesIn lists the cached PersistentPodStates of a namespace.
func (c *Controller) statesIn(namespace string) []*v1alpha1.PersistentPodState {
	objs, err := c.o.States.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil { // no namespace index: filter the whole list
		objs = nil
		for _, o := range c.o.States.GetIndexer().List() {
			if m, ok := o.(metav1.Object); ok && m.GetNamespace() == namespace {
				objs = append(objs, o)
			}
		}
	}
	var out []*v1alpha1.PersistentPodState
	for _, o := range objs {
		if pps, ok := o.(*v1alpha1.PersistentPodState); ok {
			out = append(out, pps)
		}
	}
	return out
}

// target returns the cached workload a targetRef names, nil if it does not
// exist; ok is false for a targetRef Shoal does not follow.
func (c *Controller) target(namespace string, ref v1alpha1.TargetReference) (w *statefulSet, ok bool, err error) {
	group, ok := TargetGroup(ref.APIVersion, ref.Kind)
	if !ok {
		return nil, false, nil
	}
	return c.workloadOf(group, namespace, ref.Name)
}

// workloadOf returns the cached StatefulSet of group, nil if none.
func (c *Controller) workloadOf(group, namespace, name string) (*statefulSet, bool, error) {
	inf := c.o.StatefulSets
	if group == GroupKruise {
		inf = c.o.AdvancedStatefulSets
	}
	obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, true, fmt.Errorf("read %s StatefulSet %s/%s from the cache: %w", group, namespace, name, err)
	}
	if !exists {
		return nil, true, nil
	}
	switch s := obj.(type) {
	case *appsv1.StatefulSet:
		return fromStatefulSet(s), true, nil
	case *v1beta1.StatefulSet:
		return fromAdvanced(s), true, nil
	}
	return nil, true, fmt.Errorf("unexpected %T in the %s StatefulSet cache", obj, group)
}

// podsOf lists the cached pods the workload controls, those being deleted
// included.
func (c *Controller) podsOf(w *statefulSet) []*corev1.Pod {
	objs, err := c.o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, w.namespace)
	if err != nil {
		objs = c.o.Pods.GetIndexer().List()
	}
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == w.namespace && w.ownsPod(p) {
			out = append(out, p)
		}
	}
	return out
}

// node returns a cached node, nil if unknown.
func (c *Controller) node(name string) *corev1.Node {
	obj, exists, err := c.o.Nodes.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return n
}

// sync reconciles one PersistentPodState's status.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.States.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	pps := obj.(*v1alpha1.PersistentPodState)
	if pps.DeletionTimestamp != nil {
		return 0, nil
	}
	w, supported, err := c.target(pps.Namespace, pps.Spec.TargetReference)
	if err != nil {
		return 0, err
	}
	if !supported {
		ref := pps.Spec.TargetReference
		c.o.Recorder.Eventf(pps, nil, corev1.EventTypeWarning, "UnsupportedTarget", "Sync",
			"spec.targetRef %s %s/%s is not a StatefulSet of apps or apps.kruise.io: nothing is recorded", ref.Kind, ref.APIVersion, ref.Name)
		return 0, nil
	}
	if w == nil || w.deleting {
		// The target is gone: a PersistentPodState generated for it goes
		// too (the garbage collector would, unless the target was
		// deleted orphaning its dependents).
		if ref := metav1.GetControllerOf(pps); ref != nil && Targets(pps.Spec.TargetReference, groupOf(ref), ref.Name) &&
			(w == nil || ref.UID == w.uid) {
			return 0, c.deleteState(ctx, pps, "its StatefulSet is gone")
		}
	}
	var pods []*corev1.Pod
	if w != nil {
		pods = c.podsOf(w)
	}
	st, ch := nextStatus(pps, w, pods, c.node)
	if apiequality.Semantic.DeepEqual(pps.Status, st) {
		return 0, nil
	}
	next := pps.DeepCopy()
	next.Status = st
	if _, err := c.o.Shoal.AppsV1alpha1().PersistentPodStates(pps.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		return 0, workload.IgnoreStale(err, "write the status of PersistentPodState %s", key)
	}
	for _, name := range ch.recorded {
		c.o.Recorder.Eventf(pps, nil, corev1.EventTypeNormal, "Recorded", "Record", "pod %s: %s", name, describeState(st.PodStates[name]))
	}
	if len(ch.dropped) > 0 {
		why := "the StatefulSet scaled them away"
		if w == nil || w.deleting {
			why = "the StatefulSet is gone"
		}
		c.o.Recorder.Eventf(pps, nil, corev1.EventTypeNormal, "Dropped", "Record", "dropped the records of %s: %s", strings.Join(ch.dropped, ", "), why)
	}
	return 0, nil
}

// groupOf is the API group of an owner reference's apiVersion.
func groupOf(ref *metav1.OwnerReference) string {
	g, _ := TargetGroup(ref.APIVersion, ref.Kind)
	return g
}

// deleteState deletes a PersistentPodState (this very object: UID
// precondition).
func (c *Controller) deleteState(ctx context.Context, pps *v1alpha1.PersistentPodState, why string) error {
	err := c.o.Shoal.AppsV1alpha1().PersistentPodStates(pps.Namespace).Delete(ctx, pps.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pps.UID},
	})
	if err != nil {
		return workload.IgnoreStale(err, "delete PersistentPodState %s/%s (%s)", pps.Namespace, pps.Name, why)
	}
	klog.FromContext(ctx).V(2).Info("Deleted a generated PersistentPodState", "persistentPodState", klog.KObj(pps), "why", why)
	return nil
}

// syncGenerated reconciles the PersistentPodState generated for one
// StatefulSet.
func (c *Controller) syncGenerated(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	group, nsName, ok := strings.Cut(key, "|")
	namespace, name, ok2 := strings.Cut(nsName, "/")
	if !ok || !ok2 {
		return 0, nil
	}
	w, _, err := c.workloadOf(group, namespace, name)
	if err != nil || w == nil {
		return 0, err // gone: sync removes what was generated for it
	}
	var existing *v1alpha1.PersistentPodState
	if obj, exists, err := c.o.States.GetIndexer().GetByKey(nsName); err != nil {
		return 0, fmt.Errorf("read PersistentPodState %s from the cache: %w", nsName, err)
	} else if exists {
		existing = obj.(*v1alpha1.PersistentPodState)
	}
	desired := generated(w)
	states := c.o.Shoal.AppsV1alpha1().PersistentPodStates(namespace)
	switch decideGeneration(w, desired, existing) {
	case create:
		created, err := states.Create(ctx, desired, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return 0, nil // the informer brings it
		}
		if err != nil {
			return 0, fmt.Errorf("generate PersistentPodState %s for %s StatefulSet %s: %w", nsName, group, name, err)
		}
		c.o.Recorder.Eventf(created, nil, corev1.EventTypeNormal, "Generated", "Create",
			"generated from the annotations of %s StatefulSet %s", group, name)
	case update:
		next := adopt(existing, desired)
		updated, err := states.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return 0, workload.IgnoreStale(err, "update the generated PersistentPodState %s", nsName)
		}
		c.o.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, "Generated", "Update",
			"spec set from the annotations of %s StatefulSet %s", group, name)
	case remove:
		return 0, c.deleteState(ctx, existing, wellknown.AnnotationAutoGeneratePersistentPodState+" removed from its StatefulSet")
	case conflict:
		if desired != nil {
			c.o.Recorder.Eventf(existing, nil, corev1.EventTypeWarning, "GenerateConflict", "Generate",
				"%s StatefulSet %s asks for a generated PersistentPodState of this name, but this one belongs to something else: left alone", group, name)
		}
	}
	return 0, nil
}
