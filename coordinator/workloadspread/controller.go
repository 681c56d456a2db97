// Package workloadspread is the coordinator's WorkloadSpread controller
// (apps.kruise.io/v1alpha1). The pod webhook (coordinator/webhook,
// WorkloadSpreadAdmission) places each new pod of a workload in a subset
// and records it in the WorkloadSpread's status; this controller keeps
// that status true to the pods the informers show, as OpenKruise's does:
//   - it sorts the workload's pods into subsets (spread.Group): by their
//     matched-workloadspread annotation or, for pods created before the
//     WorkloadSpread, by the labels and taints of their node, and then
//     annotates those pods (with the subset patch's labels and
//     annotations);
//   - it sets controller.kubernetes.io/pod-deletion-cost on the pods of
//     Deployments, ReplicaSets and CloneSets so that scale-in takes pods
//     from the last subsets, and those over a subset's maxReplicas, first
//     (spread.DeletionCosts);
//   - it writes subsetStatuses (replicas, missingReplicas, the webhook's
//     creatingPods and deletingPods records until the informer shows the
//     pods created or gone, or they expire) and observedGeneration
//     (spread.Status);
//   - under the Adaptive strategy it marks a subset Schedulable False
//     while a pod of it stays pending unschedulable past
//     rescheduleCriticalSeconds, and deletes that pod so the workload
//     creates it again, in another subset.
//
// Every replica serves the webhook's lookups (SpreadFor, Spread, Spreads,
// Replicas) from its informers; only the leader writes.
package workloadspread

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/podunavailablebudget"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/coordinator/workloadspread/spread"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Shoal writes the WorkloadSpreads' status.
	Shoal shoalclient.Interface
	// Kube patches pods (annotations) and deletes unschedulable ones.
	Kube kubernetes.Interface
	// WorkloadSpreads (apps.kruise.io/v1alpha1, the storage version),
	// Pods, Nodes, ReplicaSets, Deployments and StatefulSets (apps/v1),
	// Jobs (batch/v1), CloneSets and AdvancedStatefulSets
	// (apps.kruise.io/v1beta1) are shared informers. Nodes may be nil:
	// pods created before their WorkloadSpread then stay in no subset.
	WorkloadSpreads, Pods, Nodes, ReplicaSets, Deployments, StatefulSets, Jobs, CloneSets, AdvancedStatefulSets cache.SharedIndexInformer
	// Scales reads the replicas of custom workloads (the kinds of the
	// white list) through their scale subresource; nil: only the kinds
	// above are followed.
	Scales podunavailablebudget.Scales
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// CustomWorkload reads a target without a scale subresource that the
	// custom workload white list names (kruise-configuration's
	// WorkloadSpread_Watch_Custom_Workload_WhiteList): the object and the
	// white list's replicasPath; found is false for a kind the list does
	// not name. Nil: such targets count 0 replicas.
	CustomWorkload func(ctx context.Context, ws *v1alpha1.WorkloadSpread) (obj map[string]any, replicasPath string, found bool, err error)
	// Recorder records events on WorkloadSpreads.
	Recorder events.EventRecorder
	// Clock is the time of records and conditions; nil is the real clock.
	Clock clock.PassiveClock
}

// Controller keeps the status of WorkloadSpreads and the deletion cost of
// their pods. Its embedded Loop's queue holds WorkloadSpread keys.
type Controller struct {
	workload.Loop
	o Options
	w podunavailablebudget.Workloads
}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o: o,
		w: podunavailablebudget.Workloads{ReplicaSets: o.ReplicaSets, Deployments: o.Deployments, StatefulSets: o.StatefulSets,
			CloneSets: o.CloneSets, AdvancedStatefulSets: o.AdvancedStatefulSets, Scales: o.Scales},
		Loop: workload.Loop{Queue: syncloop.NewQueue("workloadspread", nil), Workloads: o.WorkloadSpreads.GetIndexer()},
	}
	handlers := []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.WorkloadSpreads, c.WorkloadHandler(), "WorkloadSpreads"},
		{o.Pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podEvent(nil, obj) },
			UpdateFunc: c.podEvent,
			DeleteFunc: func(obj any) { c.podEvent(nil, obj) },
		}, "pods"},
	}
	for _, w := range []struct {
		inf  cache.SharedIndexInformer
		what string
	}{
		{o.ReplicaSets, "ReplicaSets"}, {o.Deployments, "Deployments"}, {o.StatefulSets, "StatefulSets"}, {o.Jobs, "Jobs"},
		{o.CloneSets, "CloneSets"}, {o.AdvancedStatefulSets, "Advanced StatefulSets"},
	} {
		if w.inf != nil {
			handlers = append(handlers, struct {
				inf     cache.SharedIndexInformer
				handler cache.ResourceEventHandler
				what    string
			}{w.inf, c.workloadHandler(), w.what})
		}
	}
	for _, h := range handlers {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run syncs WorkloadSpreads until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, 2, "WorkloadSpread", c.sync)
	return nil
}

// podEvent queues the WorkloadSpreads of the pod before and after the
// change, unless nothing they look at changed.
func (c *Controller) podEvent(old, obj any) {
	p, ok := workload.Unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	o, _ := workload.Unwrap(old).(*corev1.Pod)
	if o != nil && !podChanged(o, p) {
		return
	}
	spreads, err := c.Spreads(p.Namespace)
	if err != nil || len(spreads) == 0 {
		return
	}
	for _, ws := range spreads {
		if c.owns(ws, p) || o != nil && c.owns(ws, o) {
			c.Enqueue(ws)
		}
	}
}

// podChanged reports whether an update can change a WorkloadSpread's view
// of the pod: its labels, annotations, controller, node, phase,
// conditions, restarts or deletion.
func podChanged(o, n *corev1.Pod) bool {
	return !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		!apiequality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) || o.Spec.NodeName != n.Spec.NodeName ||
		o.Status.Phase != n.Status.Phase || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		!apiequality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions) || restarts(o) != restarts(n)
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// workloadHandler queues the WorkloadSpreads that target a workload (or
// its controller, for a Deployment's ReplicaSet) when it appears, goes or
// changes its spec.
func (c *Controller) workloadHandler() cache.ResourceEventHandlerFuncs {
	queue := func(obj any) {
		m, ok := workload.Unwrap(obj).(metav1.Object)
		if !ok {
			return
		}
		names := []string{m.GetName()}
		if r := metav1.GetControllerOf(m); r != nil {
			names = append(names, r.Name)
		}
		spreads, err := c.Spreads(m.GetNamespace())
		if err != nil {
			return
		}
		for _, ws := range spreads {
			if t := ws.Spec.TargetReference; t != nil && slices.Contains(names, t.Name) {
				c.Enqueue(ws)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: queue,
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(metav1.Object)
			n, ok2 := obj.(metav1.Object)
			if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && o.GetUID() == n.GetUID() &&
				(o.GetDeletionTimestamp() == nil) == (n.GetDeletionTimestamp() == nil) {
				return
			}
			queue(obj)
		},
		DeleteFunc: queue,
	}
}

// Spreads lists the cached WorkloadSpreads of a namespace, by name
// (shared cache objects: not to be changed).
func (c *Controller) Spreads(namespace string) ([]*v1alpha1.WorkloadSpread, error) {
	objs, err := c.o.WorkloadSpreads.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("list the WorkloadSpreads of namespace %s: %w", namespace, err)
	}
	out := make([]*v1alpha1.WorkloadSpread, 0, len(objs))
	for _, o := range objs {
		if ws, ok := o.(*v1alpha1.WorkloadSpread); ok {
			out = append(out, ws)
		}
	}
	slices.SortFunc(out, func(a, b *v1alpha1.WorkloadSpread) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Spread returns the cached WorkloadSpread namespace/name, nil when there
// is none.
func (c *Controller) Spread(namespace, name string) (*v1alpha1.WorkloadSpread, error) {
	obj, exists, err := c.o.WorkloadSpreads.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("read WorkloadSpread %s/%s from the cache: %w", namespace, name, err)
	}
	if !exists {
		return nil, nil
	}
	ws, _ := obj.(*v1alpha1.WorkloadSpread)
	return ws, nil
}

// SpreadFor returns the WorkloadSpread (not being deleted) whose targetRef
// is in the pod's chain of controllers (its controller, or that one's
// controller: a ReplicaSet's Deployment) and whose targetFilter selects
// the pod; nil when none is. Of several (which validation refuses), the
// first by name.
//
// The first pods of a ReplicaSet a Deployment has just created (a
// rollout) may be admitted before the informer has the ReplicaSet, which
// leads to the Deployment: while the pod's namespace has WorkloadSpreads,
// SpreadFor waits up to ownerCacheWait for it (the informer is usually
// milliseconds behind).
func (c *Controller) SpreadFor(ctx context.Context, pod *corev1.Pod) (*v1alpha1.WorkloadSpread, error) {
	spreads, err := c.Spreads(pod.Namespace)
	if err != nil || len(spreads) == 0 {
		return nil, err
	}
	if !c.w.OwnerCached(pod) {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, ownerCacheWait, true, func(context.Context) (bool, error) {
			return c.w.OwnerCached(pod), nil
		})
		if err != nil {
			klog.FromContext(ctx).V(2).Info("The pod's controller is not in the cache; its WorkloadSpread is found from the pod's own controller only",
				"pod", klog.KRef(pod.Namespace, cmp.Or(pod.Name, pod.GenerateName)), "waited", ownerCacheWait)
		}
	}
	for _, ws := range spreads {
		if ws.DeletionTimestamp == nil && c.targets(ws, pod) && selected(ws, pod) {
			return ws, nil
		}
	}
	return nil, nil
}

// targets reports whether ws's targetRef is in the pod's chain of
// controllers.
func (c *Controller) targets(ws *v1alpha1.WorkloadSpread, pod *corev1.Pod) bool {
	t := ws.Spec.TargetReference
	if t == nil || ws.Namespace != pod.Namespace {
		return false
	}
	gk := spread.Target(t)
	return slices.ContainsFunc(c.w.Controllers(pod), func(r podunavailablebudget.ControllerRef) bool {
		return r.GroupKind == gk && r.Name == t.Name
	})
}

// owns reports whether ws counts the pod: its annotation names ws, or ws
// targets its workload and selects it.
func (c *Controller) owns(ws *v1alpha1.WorkloadSpread, pod *corev1.Pod) bool {
	if i := spread.InjectionOf(pod); i != nil && i.Name == ws.Name && ws.Namespace == pod.Namespace {
		return true
	}
	return c.targets(ws, pod) && selected(ws, pod)
}

// selected reports whether ws's targetFilter selects the pod (no filter,
// or no selector, selects all; an invalid selector none).
func selected(ws *v1alpha1.WorkloadSpread, pod *corev1.Pod) bool {
	f := ws.Spec.TargetFilter
	if f == nil || f.Selector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(f.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(pod.Labels))
}

// ownerCacheWait bounds how long SpreadFor waits for a pod's controller
// to reach the informer's cache.
const ownerCacheWait = 1500 * time.Millisecond

// kindJob is the Job kind, followed through the Jobs informer.
var kindJob = schema.GroupKind{Group: batchv1.GroupName, Kind: "Job"}

// target is what the controller needs of a WorkloadSpread's workload.
type target struct {
	replicas int32
	uid      types.UID
	object   metav1.Object
}

// latestVersion is the current revision (pod-template-hash) of ws's
// workload when ws keeps versioned statuses: a ReplicaSet's own, a
// Deployment's newest ReplicaSet's; "" otherwise or when unknown.
func (c *Controller) latestVersion(ws *v1alpha1.WorkloadSpread, t *target) string {
	if t == nil || !spread.Versioned(ws) {
		return ""
	}
	if rs, ok := t.object.(*appsv1.ReplicaSet); ok {
		return rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	}
	if c.o.ReplicaSets == nil {
		return ""
	}
	objs, err := c.o.ReplicaSets.GetIndexer().ByIndex(cache.NamespaceIndex, ws.Namespace)
	if err != nil {
		return ""
	}
	var owned []*appsv1.ReplicaSet
	for _, o := range objs {
		if rs, ok := o.(*appsv1.ReplicaSet); ok {
			if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == t.uid {
				owned = append(owned, rs)
			}
		}
	}
	return spread.LatestVersion(owned)
}

// lookup returns ws's workload, nil when it does not exist.
func (c *Controller) lookup(ctx context.Context, ws *v1alpha1.WorkloadSpread) (*target, error) {
	t := ws.Spec.TargetReference
	gk := spread.Target(t)
	if gk == kindJob {
		if c.o.Jobs == nil {
			return nil, fmt.Errorf("%w: %s (no Jobs informer)", podunavailablebudget.ErrNoScale, gk)
		}
		obj, exists, err := c.o.Jobs.GetIndexer().GetByKey(ws.Namespace + "/" + t.Name)
		if err != nil || !exists {
			return nil, err
		}
		job, ok := obj.(*batchv1.Job)
		if !ok {
			return nil, fmt.Errorf("unexpected %T in the Jobs cache", obj)
		}
		r := int32(1)
		if job.Spec.Parallelism != nil {
			r = *job.Spec.Parallelism
		}
		return &target{replicas: r, uid: job.UID, object: job}, nil
	}
	w, err := c.w.Lookup(ctx, ws.Namespace, gk, t.Name)
	if err != nil || w == nil {
		return nil, err
	}
	return &target{replicas: w.Replicas, uid: w.UID, object: w.Object}, nil
}

// Replicas returns the replica count ws's percentages count against: the
// workload's spec.replicas (a Job's parallelism), or the sum of the
// targetFilter's replicasPathList; 0 when the workload does not exist.
func (c *Controller) Replicas(ctx context.Context, ws *v1alpha1.WorkloadSpread) (int32, error) {
	t, err := c.lookup(ctx, ws)
	if errors.Is(err, podunavailablebudget.ErrNoScale) {
		// No scale subresource: a white-listed custom kind (or none).
		return c.customReplicas(ctx, ws)
	}
	if err != nil || t == nil {
		return 0, err
	}
	return replicasOf(ws, t)
}

// replicasOf is ws's replica count given its workload.
func replicasOf(ws *v1alpha1.WorkloadSpread, t *target) (int32, error) {
	f := ws.Spec.TargetFilter
	if f == nil || len(f.ReplicasPathList) == 0 {
		return t.replicas, nil
	}
	if t.object == nil {
		return 0, fmt.Errorf("spec.targetFilter.replicasPathList: the workload is read through its scale subresource, whose only count is spec.replicas")
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t.object)
	if err != nil {
		return 0, fmt.Errorf("convert the workload to read spec.targetFilter.replicasPathList: %w", err)
	}
	var sum int64
	for _, p := range f.ReplicasPathList {
		v, err := nestedInt(obj, p)
		if err != nil {
			return 0, fmt.Errorf("spec.targetFilter.replicasPathList %q: %w", p, err)
		}
		sum += v
	}
	return int32(min(sum, 1<<31-1)), nil
}

// customReplicas is the replica count of a white-listed custom workload:
// the sum of targetFilter.replicasPathList, or else the white list's
// replicasPath, read from the object; 0 without either.
func (c *Controller) customReplicas(ctx context.Context, ws *v1alpha1.WorkloadSpread) (int32, error) {
	if c.o.CustomWorkload == nil {
		return 0, nil
	}
	obj, path, found, err := c.o.CustomWorkload(ctx, ws)
	if err != nil || !found {
		return 0, err
	}
	paths := []string{path}
	if f := ws.Spec.TargetFilter; f != nil && len(f.ReplicasPathList) > 0 {
		paths = f.ReplicasPathList
	}
	var sum int64
	for _, p := range paths {
		if p == "" {
			continue
		}
		v, err := nestedInt(obj, p)
		if err != nil {
			return 0, fmt.Errorf("replicas path %q of %s %s: %w", p, ws.Spec.TargetReference.Kind, ws.Spec.TargetReference.Name, err)
		}
		sum += v
	}
	return int32(min(sum, 1<<31-1)), nil
}

// nestedInt reads the integer at a dot-separated path of obj, where a
// number indexes a list; 0 when the path does not exist.
func nestedInt(obj map[string]any, path string) (int64, error) {
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			cur = v[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return 0, nil
			}
			cur = v[i]
		default:
			return 0, nil
		}
	}
	switch v := cur.(type) {
	case nil:
		return 0, nil
	case int64:
		return v, nil
	case float64:
		return int64(v), nil
	}
	return 0, fmt.Errorf("%T is not an integer", cur)
}

// podsOf lists the cached pods ws counts: those of its workload its
// targetFilter selects, active or not.
func (c *Controller) podsOf(ws *v1alpha1.WorkloadSpread) []*corev1.Pod {
	objs, err := c.o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, ws.Namespace)
	if err != nil {
		objs = c.o.Pods.GetIndexer().List()
	}
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == ws.Namespace && c.targets(ws, p) && selected(ws, p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// node returns the cached node of a name, nil when unknown.
func (c *Controller) node(name string) *corev1.Node {
	if c.o.Nodes == nil {
		return nil
	}
	obj, exists, err := c.o.Nodes.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return n
}

// sync brings one WorkloadSpread's pods and status up to date.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.WorkloadSpreads.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	ws := obj.(*v1alpha1.WorkloadSpread)
	if ws.DeletionTimestamp != nil || ws.Spec.TargetReference == nil {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("workloadSpread", klog.KObj(ws))
	t, err := c.lookup(ctx, ws)
	// A workload without a replica count (a DaemonSet, a custom kind
	// without a scale subresource) is still spread by the subsets' integer
	// maxReplicas over its pods, as OpenKruise does; percentages count 0.
	noReplicas := errors.Is(err, podunavailablebudget.ErrNoScale)
	if err != nil && !noReplicas {
		return 0, fmt.Errorf("WorkloadSpread %s: %w", key, err)
	}
	var replicas int32
	var pods []*corev1.Pod
	switch {
	case t != nil:
		if replicas, err = replicasOf(ws, t); err != nil {
			c.o.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, "InvalidTargetFilter", "Sync", "%v", err)
			return 0, nil
		}
		pods = c.podsOf(ws)
	case noReplicas:
		pods = c.podsOf(ws)
		if replicas, err = c.customReplicas(ctx, ws); err != nil {
			c.o.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, "InvalidTargetFilter", "Sync", "%v", err)
			return 0, nil
		}
	}
	g := spread.Group(ws, pods, replicas, c.node)
	if err := c.annotateExisting(ctx, ws, g); err != nil {
		return 0, err
	}
	if spread.DeletionCostKind(ws) {
		if err := c.setDeletionCosts(ctx, ws, pods, spread.DeletionCosts(ws, g, replicas, c.latestVersion(ws, t))); err != nil {
			return 0, err
		}
	}
	now := c.o.Clock.Now()
	out, err := spread.Status(ws, g, replicas, now)
	if err != nil {
		// The CRD's validation keeps such a spec out; nothing to retry.
		c.o.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", "cannot compute the subsets' status: %v", err)
		return 0, nil
	}
	if out.Status.VersionedSubsetStatuses, err = spread.VersionedStatus(ws, g, replicas, now, &out); err != nil {
		c.o.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", "cannot compute the subsets' status: %v", err)
		return 0, nil
	}
	var after time.Duration
	if !out.Recheck.IsZero() {
		after = max(out.Recheck.Sub(now)+100*time.Millisecond, 100*time.Millisecond)
	}
	if out.Status.ObservedGeneration != ws.Status.ObservedGeneration ||
		!apiequality.Semantic.DeepEqual(out.Status.SubsetStatuses, ws.Status.SubsetStatuses) ||
		!apiequality.Semantic.DeepEqual(out.Status.VersionedSubsetStatuses, ws.Status.VersionedSubsetStatuses) {
		next := ws.DeepCopy()
		next.Status = out.Status
		if _, err := c.o.Shoal.AppsV1alpha1().WorkloadSpreads(ws.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			// A conflict is the webhook's newer record: its informer event
			// brings the WorkloadSpread back.
			return 0, workload.IgnoreStale(err, "write the status of WorkloadSpread %s", key)
		}
		log.V(2).Info("Wrote the WorkloadSpread status", "subsets", summary(out.Status.SubsetStatuses))
		for _, id := range out.CreateExpired {
			c.o.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, "CreatePodFailed", "Sync",
				"Pod %s/%s was expected to be created but it wasn't", ws.Namespace, id)
		}
		for _, name := range out.DeleteExpired {
			c.o.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, "DeletePodFailed", "Sync",
				"Pod %s/%s was expected to be deleted but it wasn't", ws.Namespace, name)
		}
		for _, name := range out.Recovered {
			c.o.Recorder.Eventf(ws, nil, corev1.EventTypeNormal, "RecoverSchedulable", "Sync",
				"Subset %s of WorkloadSpread %s/%s is recovered from unschedulable to schedulable", name, ws.Namespace, ws.Name)
		}
	}
	for _, p := range out.Reschedule {
		if err := c.reschedule(ctx, ws, p); err != nil {
			return 0, err
		}
	}
	return after, nil
}

// summary describes subset statuses for the log.
func summary(sts []v1alpha1.WorkloadSpreadSubsetStatus) string {
	parts := make([]string, 0, len(sts))
	for _, st := range sts {
		parts = append(parts, fmt.Sprintf("%s: replicas %d, missing %d, creating %d, deleting %d",
			st.Name, st.Replicas, st.MissingReplicas, len(st.CreatingPods), len(st.DeletingPods)))
	}
	return strings.Join(parts, "; ")
}

// annotateExisting writes the matched-workloadspread annotation (and the
// subset patch's labels and annotations) on the pods created before ws
// that Group placed by their node.
func (c *Controller) annotateExisting(ctx context.Context, ws *v1alpha1.WorkloadSpread, g spread.Groups) error {
	for _, name := range slices.Sorted(maps.Keys(g.Assigned)) {
		subset := spread.Subset(ws, g.Assigned[name])
		patch, err := spread.ExistingPodPatch(ws, subset)
		if err != nil {
			return err
		}
		_, err = c.o.Kube.CoreV1().Pods(ws.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err = workload.IgnoreStale(err, "annotate pod %s/%s with subset %s of WorkloadSpread %s", ws.Namespace, name, subset.Name, ws.Name); err != nil {
			return err
		}
	}
	return nil
}

// setDeletionCosts patches the deletion cost of the pods whose annotation
// differs from costs.
func (c *Controller) setDeletionCosts(ctx context.Context, ws *v1alpha1.WorkloadSpread, pods []*corev1.Pod, costs map[string]string) error {
	for _, p := range pods {
		want, ok := costs[p.Name]
		if !ok {
			continue
		}
		cur, has := p.Annotations[wellknown.AnnotationPodDeletionCost]
		if has && cur == want || !has && want == "0" {
			continue
		}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, wellknown.AnnotationPodDeletionCost, want)
		_, err := c.o.Kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.o.Recorder.Eventf(ws, p, corev1.EventTypeWarning, "PatchPodDeletionCostFailed", "Sync",
				"failed to set %s to %s on pod %s: %v", wellknown.AnnotationPodDeletionCost, want, p.Name, err)
			return fmt.Errorf("set the deletion cost of pod %s/%s to %s: %w", p.Namespace, p.Name, want, err)
		}
	}
	return nil
}

// reschedule deletes an unschedulable pod (the one seen, by UID) so that
// its workload creates it again in another subset.
func (c *Controller) reschedule(ctx context.Context, ws *v1alpha1.WorkloadSpread, p *corev1.Pod) error {
	err := c.o.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Deleted an unschedulable pod so it is created in another subset", "workloadSpread", klog.KObj(ws), "pod", klog.KObj(p))
		return nil
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	c.o.Recorder.Eventf(ws, p, corev1.EventTypeWarning, "DeletePodFailed", "Reschedule",
		"Failed to delete unschedulable pod %s/%s of WorkloadSpread %s/%s: %v", p.Namespace, p.Name, ws.Namespace, ws.Name, err)
	return fmt.Errorf("delete unschedulable pod %s/%s: %w", p.Namespace, p.Name, err)
}
