// Package persistentpodstate is the coordinator's PersistentPodState
// controller (apps.kruise.io/v1alpha1, its storage version). For each
// PersistentPodState whose targetRef names a StatefulSet (apps/v1), an
// Advanced StatefulSet (apps.kruise.io, either version) or a white-listed
// StatefulSet-like kind, it records in
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
// StatefulSet-like kinds of other operators are followed the same way
// when the kruise-configuration ConfigMap's
// PPS_Watch_Custom_Workload_WhiteList names them (custom.go): a dynamic
// informer per kind, started and stopped as the list changes. Their pods
// are named <workload>-<ordinal> and controlled by the workload, whose
// spec.replicas counts them.
//
// Only the leader writes. Events go on the PersistentPodStates.
package persistentpodstate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
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
	// Config is an informer of the kruise-configuration ConfigMap (in the
	// coordinator's namespace), whose PPS_Watch_Custom_Workload_WhiteList
	// names StatefulSet-like kinds to follow too; nil follows only the
	// StatefulSets. Unlike OpenKruise, which reads the list once at start,
	// a change takes effect at once.
	Config cache.SharedIndexInformer
	// Dynamic and Mapper read the white-listed kinds (Config set).
	Dynamic dynamic.Interface
	// Mapper finds the resource of a white-listed kind; it is reset when a
	// kind is not found, so a CRD installed later is found.
	Mapper meta.ResettableRESTMapper
}

// Controller reconciles PersistentPodStates. Its embedded Loop's queue
// holds PersistentPodState keys; a second queue holds the StatefulSets
// whose generated PersistentPodState to reconcile.
type Controller struct {
	workload.Loop
	o Options
	// generate holds workload keys "<Kind.group>|<namespace>/<name>".
	generate syncloop.Queue
	// custom follows the white-listed kinds.
	custom *customKinds
}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	c := &Controller{
		o:        o,
		Loop:     workload.Loop{Queue: syncloop.NewQueue("persistentpodstate", nil), Workloads: o.States.GetIndexer()},
		generate: syncloop.NewQueue("persistentpodstate-generate", nil),
	}
	c.custom = newCustomKinds(o.Dynamic, o.Mapper, c.workloadHandler)
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
		{o.StatefulSets, c.workloadHandler(AppsStatefulSet), "StatefulSets"},
		{o.AdvancedStatefulSets, c.workloadHandler(KruiseStatefulSet), "Advanced StatefulSets"},
		// Nodes are read from the cache when a pod is recorded; their
		// events need no handler, but the cache must be synced.
		{o.Nodes, cache.ResourceEventHandlerFuncs{}, "nodes"},
	} {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	if o.Config != nil {
		if err := c.Watch(o.Config, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.configEvent,
			UpdateFunc: func(_, obj any) { c.configEvent(obj) },
			DeleteFunc: func(any) { c.setWhiteList(nil) },
		}, "the kruise-configuration ConfigMap"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WhiteList returns the custom workload kinds followed now (the pod and
// PersistentPodState webhooks read it).
func (c *Controller) WhiteList() WhiteList { return c.custom.list() }

// configEvent reads the white list from the kruise-configuration
// ConfigMap. A list that does not parse is logged and followed as empty.
func (c *Controller) configEvent(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Name != wellknown.ConfigMapKruiseConfiguration {
		return
	}
	list, err := ParseWhiteList(cm.Data[wellknown.ConfigPersistentPodStateWatchCustomWorkloadWhiteList])
	if err != nil {
		klog.Background().Error(err, "Ignoring the PersistentPodState custom workload white list", "configMap", klog.KObj(cm))
	}
	c.setWhiteList(list)
}

// setWhiteList follows the kinds of list from now on, and queues every
// PersistentPodState: a target may have become followed, or no longer.
func (c *Controller) setWhiteList(list WhiteList) {
	if c.custom.set(list) {
		c.Loop.Resync()
	}
}

// Resync queues every PersistentPodState and every StatefulSet of either
// kind; the coordinator calls it when this replica starts leading.
func (c *Controller) Resync() {
	c.Loop.Resync()
	for _, obj := range c.o.StatefulSets.GetIndexer().List() {
		c.enqueueWorkload(AppsStatefulSet, obj)
	}
	for _, obj := range c.o.AdvancedStatefulSets.GetIndexer().List() {
		c.enqueueWorkload(KruiseStatefulSet, obj)
	}
	c.custom.each(c.enqueueWorkload)
}

// Run processes both queues until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { syncloop.Run(ctx, c.generate, 1, "generated PersistentPodState", c.syncGenerated) })
	wg.Go(func() { c.custom.run(ctx) })
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
		if gk, ok := TargetKind(ref.APIVersion, ref.Kind, c.WhiteList()); ok {
			c.generate.Add(generateKey(gk, pps.Namespace, ref.Name))
		}
	}
}

// podEvent queues the PersistentPodStates targeting the pod's workload.
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
	gk, ok := TargetKind(ref.APIVersion, ref.Kind, c.WhiteList())
	if !ok {
		return
	}
	c.enqueueStatesOf(gk, p.Namespace, ref.Name)
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

// workloadHandler queues, on every event of a workload of kind gk, its
// generation and the PersistentPodStates targeting it (status-only
// updates excepted).
func (c *Controller) workloadHandler(gk schema.GroupKind) cache.ResourceEventHandlerFuncs {
	both := func(obj any) {
		c.enqueueWorkload(gk, obj)
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			c.enqueueStatesOf(gk, m.GetNamespace(), m.GetName())
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

// generateKey is the generation queue's key of a workload:
// "<Kind.group>|<namespace>/<name>".
func generateKey(gk schema.GroupKind, namespace, name string) string {
	return gk.String() + "|" + namespace + "/" + name
}

// enqueueWorkload queues a workload's generation.
func (c *Controller) enqueueWorkload(gk schema.GroupKind, obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.generate.Add(gk.String() + "|" + key)
	}
}

// enqueueStatesOf queues the PersistentPodStates in namespace targeting
// the workload of kind gk and name.
func (c *Controller) enqueueStatesOf(gk schema.GroupKind, namespace, name string) {
	for _, pps := range c.statesIn(namespace) {
		if Targets(pps.Spec.TargetReference, gk, name) {
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
	gk, ok := TargetKind(ref.APIVersion, ref.Kind, c.WhiteList())
	if !ok {
		return nil, false, nil
	}
	return c.workloadOf(gk, namespace, ref.Name)
}

// workloadOf returns the cached workload of kind gk, nil if none. For a
// white-listed kind whose cache is not filled yet it returns
// errNotWatched: nothing can be said about the workload until it is.
func (c *Controller) workloadOf(gk schema.GroupKind, namespace, name string) (*statefulSet, bool, error) {
	var inf cache.SharedIndexInformer
	switch gk {
	case AppsStatefulSet:
		inf = c.o.StatefulSets
	case KruiseStatefulSet:
		inf = c.o.AdvancedStatefulSets
	default:
		if inf = c.custom.informer(gk); inf == nil || !inf.HasSynced() {
			return nil, true, fmt.Errorf("%s %s/%s: %w", gk, namespace, name, errNotWatched)
		}
	}
	obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, true, fmt.Errorf("read %s %s/%s from the cache: %w", gk, namespace, name, err)
	}
	if !exists {
		return nil, true, nil
	}
	switch s := obj.(type) {
	case *appsv1.StatefulSet:
		return fromStatefulSet(s), true, nil
	case *v1beta1.StatefulSet:
		return fromAdvanced(s), true, nil
	case *unstructured.Unstructured:
		return fromCustom(gk, s), true, nil
	}
	return nil, true, fmt.Errorf("unexpected %T in the %s cache", obj, gk)
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
	if errors.Is(err, errNotWatched) {
		// Its kind was just white-listed, or its CRD is not installed:
		// records are kept as they are meanwhile.
		klog.FromContext(ctx).V(2).Info("Waiting for the target's kind to be watched", "persistentPodState", key, "reason", err.Error())
		return customRetry, nil
	}
	if err != nil {
		return 0, err
	}
	if !supported {
		ref := pps.Spec.TargetReference
		c.o.Recorder.Eventf(pps, nil, corev1.EventTypeWarning, "UnsupportedTarget", "Sync",
			"spec.targetRef %s %s/%s is neither a StatefulSet of apps or apps.kruise.io nor a kind of %s in ConfigMap %s: nothing is recorded",
			ref.Kind, ref.APIVersion, ref.Name, wellknown.ConfigPersistentPodStateWatchCustomWorkloadWhiteList, wellknown.ConfigMapKruiseConfiguration)
		return 0, nil
	}
	if w == nil || w.deleting {
		// The target is gone: a PersistentPodState generated for it goes
		// too (the garbage collector would, unless the target was
		// deleted orphaning its dependents).
		if ref := metav1.GetControllerOf(pps); ref != nil && Targets(pps.Spec.TargetReference, kindOf(ref), ref.Name) &&
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
		why := "the " + pps.Spec.TargetReference.Kind + " scaled them away"
		if w == nil || w.deleting {
			why = "the " + pps.Spec.TargetReference.Kind + " is gone"
		}
		c.o.Recorder.Eventf(pps, nil, corev1.EventTypeNormal, "Dropped", "Record", "dropped the records of %s: %s", strings.Join(ch.dropped, ", "), why)
	}
	return 0, nil
}

// kindOf is the group and kind of an owner reference.
func kindOf(ref *metav1.OwnerReference) schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
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
// workload.
func (c *Controller) syncGenerated(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	kind, nsName, ok := strings.Cut(key, "|")
	namespace, name, ok2 := strings.Cut(nsName, "/")
	if !ok || !ok2 {
		return 0, nil
	}
	gk := schema.ParseGroupKind(kind)
	if !c.WhiteList().Follows(gk) {
		return 0, nil // no longer white-listed
	}
	w, _, err := c.workloadOf(gk, namespace, name)
	if errors.Is(err, errNotWatched) {
		return customRetry, nil
	}
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
			return 0, fmt.Errorf("generate PersistentPodState %s for %s %s: %w", nsName, gk, name, err)
		}
		c.o.Recorder.Eventf(created, nil, corev1.EventTypeNormal, "Generated", "Create",
			"generated from the annotations of %s %s", gk, name)
	case update:
		next := adopt(existing, desired)
		updated, err := states.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return 0, workload.IgnoreStale(err, "update the generated PersistentPodState %s", nsName)
		}
		c.o.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, "Generated", "Update",
			"spec set from the annotations of %s %s", gk, name)
	case remove:
		return 0, c.deleteState(ctx, existing, wellknown.AnnotationAutoGeneratePersistentPodState+" removed from its "+gk.Kind)
	case conflict:
		if desired != nil {
			c.o.Recorder.Eventf(existing, nil, corev1.EventTypeWarning, "GenerateConflict", "Generate",
				"%s %s asks for a generated PersistentPodState of this name, but this one belongs to something else: left alone", gk, name)
		}
	}
	return 0, nil
}
