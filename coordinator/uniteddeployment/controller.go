// Package uniteddeployment is the coordinator's UnitedDeployment
// controller (apps.kruise.io/v1alpha1, its storage version): one
// workload per topology subset, made from the UnitedDeployment's template
// (StatefulSet, Advanced StatefulSet, CloneSet or Deployment) and pinned to
// the subset's nodes, with the replicas split over the subsets (alloc.go)
// and the manual update's partitions passed to each subset's workload.
//
// Each subset's workload is named <unitedDeployment>-<subset>, labelled
// apps.kruise.io/subset-name, and controlled by the UnitedDeployment; it
// is rewritten only when what the UnitedDeployment asks of it changes
// (AnnotationSubsetHash), and deleted when its subset goes. The
// controller never deletes pods: each subset's own controller runs them.
// Under the Adaptive schedule strategy it reads the subsets' pods and
// labels reserved ones (adaptive.go).
package uniteddeployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Dynamic writes the subsets' workloads, of whichever kind.
	Dynamic dynamic.Interface
	// Shoal writes UnitedDeployment status.
	Shoal shoalclient.Interface
	// Kube labels reserved pods (Adaptive schedule strategy).
	Kube kubernetes.Interface
	// Pods is the shared pod informer: the Adaptive strategy reads the
	// subsets' pods.
	Pods cache.SharedIndexInformer
	// UnitedDeployments (v1alpha1) is the shared informer of the kind.
	UnitedDeployments cache.SharedIndexInformer
	// StatefulSets (apps/v1), AdvancedStatefulSets and CloneSets (v1beta1)
	// and Deployments (apps/v1) are the shared informers of the kinds a
	// subset can be.
	StatefulSets, AdvancedStatefulSets, CloneSets, Deployments cache.SharedIndexInformer
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on UnitedDeployments.
	Recorder events.EventRecorder
	// Clock stamps conditions; nil is the real one.
	Clock clock.Clock
}

// Controller reconciles UnitedDeployments.
type Controller struct {
	o     Options
	queue syncloop.Queue
	// kinds are the subset informers' indexers, by the kind's write
	// resource.
	kinds map[schema.GroupVersionResource]cache.Indexer
	regs  []cache.ResourceEventHandlerRegistration
}

// byOwner indexes subset workloads by their UnitedDeployment's UID.
const byOwner = "uniteddeployment-owner"

// owner finds the workloads of UnitedDeployments.
var owner = workload.Owner{Kind: "UnitedDeployment", Group: v1alpha1.SchemeGroupVersion.Group}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{o: o, queue: syncloop.NewQueue("uniteddeployment", nil), kinds: map[schema.GroupVersionResource]cache.Indexer{}}
	enqueueOwner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == owner.Kind {
			c.queue.Add(m.GetNamespace() + "/" + ref.Name)
		}
	}
	for _, k := range []struct {
		inf  cache.SharedIndexInformer
		kind workloadKind
	}{{o.StatefulSets, statefulSetKind}, {o.AdvancedStatefulSets, advancedStatefulSetKind}, {o.CloneSets, cloneSetKind}, {o.Deployments, deploymentKind}} {
		if err := k.inf.AddIndexers(owner.Indexers(byOwner)); err != nil {
			return nil, fmt.Errorf("index %s by UnitedDeployment owner: %w", k.kind.Write.Resource, err)
		}
		c.kinds[k.kind.Write] = k.inf.GetIndexer()
		reg, err := k.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueOwner, UpdateFunc: func(_, obj any) { enqueueOwner(obj) }, DeleteFunc: enqueueOwner,
		})
		if err != nil {
			return nil, fmt.Errorf("watch %s for UnitedDeployments: %w", k.kind.Write.Resource, err)
		}
		c.regs = append(c.regs, reg)
	}
	reg, err := o.UnitedDeployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { syncloop.Enqueue(c.queue, obj) }, UpdateFunc: func(_, obj any) { syncloop.Enqueue(c.queue, obj) },
		DeleteFunc: func(obj any) { syncloop.Enqueue(c.queue, obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch UnitedDeployments: %w", err)
	}
	c.regs = append(c.regs, reg)
	return c, nil
}

// HasSynced reports whether the informers' first lists went through the
// controller's handlers.
func (c *Controller) HasSynced() bool {
	for _, r := range c.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// Resync queues every UnitedDeployment (a new leader's first look).
func (c *Controller) Resync() {
	for _, obj := range c.o.UnitedDeployments.GetStore().List() {
		syncloop.Enqueue(c.queue, obj)
	}
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.queue, workload.Workers, "UnitedDeployment", c.sync)
	return nil
}

// sync reconciles one UnitedDeployment.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.UnitedDeployments.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	ud := obj.(*v1alpha1.UnitedDeployment)
	if ud.DeletionTimestamp != nil {
		return 0, nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("unitedDeployment", key))
	status := ud.Status.DeepCopy()
	status.ObservedGeneration = ud.Generation
	if sel, err := metav1.LabelSelectorAsSelector(ud.Spec.Selector); err == nil {
		status.LabelSelector = sel.String()
	}
	requeue, err := c.reconcile(ctx, ud, status)
	if err != nil {
		c.o.Recorder.Eventf(ud, nil, corev1.EventTypeWarning, "FailedProvision", "Provision", "%v", err)
		c.setCondition(status, corev1.ConditionFalse, "Error", err.Error())
	} else {
		c.setCondition(status, corev1.ConditionTrue, "", "")
	}
	if !apiequality.Semantic.DeepEqual(&ud.Status, status) {
		next := ud.DeepCopy()
		next.Status = *status
		_, werr := c.o.Shoal.AppsV1alpha1().UnitedDeployments(ud.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
		err = errors.Join(err, workload.IgnoreStale(werr, "write the status of UnitedDeployment %s", key))
	}
	return requeue, err
}

// setCondition sets SubsetProvisioned.
func (c *Controller) setCondition(st *v1alpha1.UnitedDeploymentStatus, status corev1.ConditionStatus, reason, message string) {
	i := slices.IndexFunc(st.Conditions, func(x v1alpha1.UnitedDeploymentCondition) bool { return x.Type == v1alpha1.SubsetProvisioned })
	cond := v1alpha1.UnitedDeploymentCondition{Type: v1alpha1.SubsetProvisioned, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(c.o.Clock.Now())}
	switch {
	case i < 0:
		st.Conditions = append(st.Conditions, cond)
	case st.Conditions[i].Status != status || st.Conditions[i].Message != message:
		if st.Conditions[i].Status == status {
			cond.LastTransitionTime = st.Conditions[i].LastTransitionTime
		}
		st.Conditions[i] = cond
	}
}

// reconcile creates, updates and deletes the subsets' workloads and fills
// status; it returns when to look again (0: when something changes).
func (c *Controller) reconcile(ctx context.Context, ud *v1alpha1.UnitedDeployment, st *v1alpha1.UnitedDeploymentStatus) (time.Duration, error) {
	kind, _, _, err := template(ud)
	if err != nil {
		return 0, err
	}
	rev, err := revisionOf(ud)
	if err != nil {
		return 0, err
	}
	// The subsets' workloads, of the template's kind; those of another
	// kind (the template changed kind) go.
	existing := map[string]runtime.Object{}
	var errs []error
	for gvr, indexer := range c.kinds {
		objs, err := indexer.ByIndex(byOwner, string(ud.UID))
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			m := o.(metav1.Object)
			if gvr != kind.Write {
				errs = append(errs, c.deleteWorkload(ctx, ud, gvr, m, "the template is of another kind now"))
				continue
			}
			existing[m.GetLabels()[wellknown.LabelSubsetName]] = o.(runtime.Object)
		}
	}
	current := map[string]int32{}
	for name, o := range existing {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err == nil {
			r, _, _ := unstructured.NestedInt64(u, "spec", "replicas")
			current[name] = int32(r)
		}
	}
	// The subsets' statuses so far: the Adaptive strategy keeps its
	// Schedulable conditions there.
	old := map[string]*v1alpha1.UnitedDeploymentSubsetStatus{}
	for i := range st.SubsetStatuses {
		old[st.SubsetStatuses[i].Name] = &st.SubsetStatuses[i]
	}
	for _, s := range ud.Spec.Topology.Subsets {
		if old[s.Name] == nil {
			old[s.Name] = &v1alpha1.UnitedDeploymentSubsetStatus{Name: s.Name}
		}
	}
	adaptive := adaptiveOf(ud)
	var requeue soonest
	var states map[string]*subsetState
	if adaptive.on {
		if states, err = c.observe(ctx, ud, existing, current, old, adaptive, &requeue); err != nil {
			return 0, err
		}
	}
	var alloc map[string]int32
	total := ptr.Deref(ud.Spec.Replicas, 1)
	switch {
	case adaptive.reserve:
		alloc, err = allocateReserved(total, ud.Spec.Topology.Subsets, states)
	case adaptive.on:
		alloc, err = allocateAdaptive(total, ud.Spec.Topology.Subsets, states)
	default:
		alloc, err = allocate(ud, current)
	}
	if err != nil {
		return 0, err
	}
	if adaptive.reserve {
		// A subset that just recovered and grows stays unschedulable
		// until its new pods have been ready long enough: they are
		// reserved from the start, and the temporary pods stay meanwhile.
		now := c.o.Clock.Now()
		for name, s := range states {
			if s.exists && !s.unschedulable && s.wasUnschedulable && alloc[name] > s.replicas {
				setSchedulable(old[name], corev1.ConditionFalse, "Recovering", "scaled up after recovering: new pods are reserved until ready", now)
				requeue.at(time.Second)
			}
		}
	}
	partitions := map[string]int32{}
	if mu := ud.Spec.UpdateStrategy.ManualUpdate; mu != nil {
		for name, p := range mu.Partitions {
			partitions[name] = p
		}
	}

	*st = v1alpha1.UnitedDeploymentStatus{
		ObservedGeneration: st.ObservedGeneration, LabelSelector: st.LabelSelector, Conditions: st.Conditions,
		CollisionCount: st.CollisionCount, CurrentRevision: rev, SubsetReplicas: alloc,
		UpdateStatus: &v1alpha1.UpdateStatus{UpdatedRevision: rev, CurrentPartitions: partitions},
	}
	if adaptive.reserve && st.LabelSelector != "" {
		// The working pods (what a HorizontalPodAutoscaler counts).
		st.LabelSelector += "," + wellknown.LabelUnitedDeploymentReservedPod + "=false"
	}
	wanted := map[string]bool{}
	for i := range ud.Spec.Topology.Subsets {
		s := &ud.Spec.Topology.Subsets[i]
		wanted[s.Name] = true
		var maxUnavailable *int32
		if adaptive.reserve {
			maxUnavailable = reserveMaxUnavailable(states[s.Name])
		}
		want, err := desiredWorkload(ud, s, alloc[s.Name], partitions[s.Name], rev, maxUnavailable)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		have := existing[s.Name]
		errs = append(errs, c.apply(ctx, ud, kind, want, have))
		ss := v1alpha1.UnitedDeploymentSubsetStatus{Name: s.Name, Partition: partitions[s.Name]}
		if adaptive.on {
			ss.Conditions = old[s.Name].Conditions
		}
		if state := states[s.Name]; state != nil {
			ss.ReservedPods = state.reserved
			st.ReservedPods += state.reserved
			st.Replicas -= state.reserved
		}
		if have != nil {
			ws := statusOf(have)
			ss.Replicas, ss.ReadyReplicas = ws.replicas, ws.ready
			st.Replicas += ws.replicas
			st.ReadyReplicas += ws.ready
			if have.(metav1.Object).GetAnnotations()[AnnotationSubsetRevision] == rev {
				st.UpdatedReplicas += ws.updated
				st.UpdatedReadyReplicas += ws.updatedReady
			}
		}
		st.SubsetStatuses = append(st.SubsetStatuses, ss)
	}
	for name, o := range existing {
		if !wanted[name] {
			errs = append(errs, c.deleteWorkload(ctx, ud, kind.Write, o.(metav1.Object), "its subset is gone from spec.topology.subsets"))
		}
	}
	return time.Duration(requeue), errors.Join(errs...)
}

// observe reads the existing subsets' pods under the Adaptive strategy:
// it updates their Schedulable conditions in statuses, labels reserved
// pods (reserve mode) and returns what the allocators need. current holds
// the existing workloads' spec.replicas.
func (c *Controller) observe(ctx context.Context, ud *v1alpha1.UnitedDeployment, existing map[string]runtime.Object, current map[string]int32,
	statuses map[string]*v1alpha1.UnitedDeploymentSubsetStatus, a adaptiveSettings, requeue *soonest) (map[string]*subsetState, error) {
	sel, err := metav1.LabelSelectorAsSelector(ud.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	bySubset := map[string][]*corev1.Pod{}
	if c.o.Pods != nil {
		objs, err := c.o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, ud.Namespace)
		if err != nil {
			return nil, fmt.Errorf("list the pods of namespace %s: %w", ud.Namespace, err)
		}
		for _, o := range objs {
			p, ok := o.(*corev1.Pod)
			if !ok || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if name, ok := p.Labels[wellknown.LabelSubsetName]; ok {
				bySubset[name] = append(bySubset[name], p)
			}
		}
	}
	now := c.o.Clock.Now()
	states := map[string]*subsetState{}
	var errs []error
	for _, sub := range ud.Spec.Topology.Subsets {
		s := &subsetState{}
		states[sub.Name] = s
		have := existing[sub.Name]
		if have == nil {
			continue
		}
		s.exists = true
		s.replicas, s.ready, s.pods = current[sub.Name], statusOf(have).ready, bySubset[sub.Name]
		if int32(len(s.pods)) < s.replicas {
			// Pods on their way: their clocks start when they exist.
			requeue.at(2 * time.Second)
		}
		if !a.reserve {
			observeDefault(statuses[sub.Name], s, a, now, requeue)
			continue
		}
		for pod, reserved := range observeReserve(statuses[sub.Name], s, a, now, requeue) {
			errs = append(errs, c.labelReserved(ctx, ud.Namespace, pod, reserved))
		}
	}
	return states, errors.Join(errs...)
}

// labelReserved sets a pod's reserved label.
func (c *Controller) labelReserved(ctx context.Context, namespace, pod string, reserved bool) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"%t"}}}`, wellknown.LabelUnitedDeploymentReservedPod, reserved)
	_, err := c.o.Kube.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{})
	return workload.IgnoreStale(err, "label pod %s reserved=%t", pod, reserved)
}

// apply creates want, or updates have to want when what was asked of it
// changed (the hash annotation).
func (c *Controller) apply(ctx context.Context, ud *v1alpha1.UnitedDeployment, kind workloadKind, want *unstructured.Unstructured, have runtime.Object) error {
	client := c.o.Dynamic.Resource(kind.Write).Namespace(ud.Namespace)
	if have == nil {
		if _, err := client.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", kind.Kind, want.GetName(), err)
		}
		c.o.Recorder.Eventf(ud, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created %s %s for subset %s with %d replicas",
			kind.Kind, want.GetName(), want.GetLabels()[wellknown.LabelSubsetName], replicasOf(want))
		return nil
	}
	m := have.(metav1.Object)
	if m.GetAnnotations()[AnnotationSubsetHash] == want.GetAnnotations()[AnnotationSubsetHash] {
		return nil
	}
	// Keep what others put on the object's metadata.
	labels, annotations := m.GetLabels(), m.GetAnnotations()
	for k, v := range want.GetLabels() {
		labels[k] = v
	}
	for k, v := range want.GetAnnotations() {
		annotations[k] = v
	}
	want.SetLabels(labels)
	want.SetAnnotations(annotations)
	want.SetResourceVersion(m.GetResourceVersion())
	want.SetFinalizers(m.GetFinalizers())
	if _, err := client.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
		return workload.IgnoreStale(err, "update %s %s", kind.Kind, want.GetName())
	}
	c.o.Recorder.Eventf(ud, nil, corev1.EventTypeNormal, "SuccessfulUpdate", "Update", "updated %s %s of subset %s: %d replicas, revision %s",
		kind.Kind, want.GetName(), want.GetLabels()[wellknown.LabelSubsetName], replicasOf(want), want.GetAnnotations()[AnnotationSubsetRevision])
	return nil
}

// replicasOf reads spec.replicas.
func replicasOf(u *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

// deleteWorkload deletes a subset's workload (its pods go with it).
func (c *Controller) deleteWorkload(ctx context.Context, ud *v1alpha1.UnitedDeployment, gvr schema.GroupVersionResource, m metav1.Object, why string) error {
	err := c.o.Dynamic.Resource(gvr).Namespace(m.GetNamespace()).Delete(ctx, m.GetName(), metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(m.GetUID())), PropagationPolicy: new(metav1.DeletePropagationBackground),
	})
	if err != nil {
		return workload.IgnoreStale(err, "delete %s %s", gvr.Resource, m.GetName())
	}
	c.o.Recorder.Eventf(ud, nil, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "deleted %s %s: %s", gvr.Resource, m.GetName(), why)
	return nil
}
