// Package podunavailablebudget is the coordinator's PodUnavailableBudget
// controller (policy.kruise.io/v1alpha1). For each budget it finds the
// pods it covers and keeps its status current, as OpenKruise's
// controller does:
//   - the pods: those of the workload its targetRef names (a Deployment,
//     ReplicaSet, StatefulSet, CloneSet, Advanced StatefulSet, or any
//     kind with a scale subresource, through the pods' chain of
//     controllers), or, without a targetRef, those its selector matches;
//   - totalReplicas: the workload's spec.replicas, the sum of the
//     replicas of the selected pods' workloads (1 per pod without one),
//     or the pub.kruise.io/protect-total-replicas annotation;
//   - desiredAvailable from maxUnavailable (it wins) or minAvailable,
//     with OpenKruise's rounding (DesiredAvailable);
//   - currentAvailable: the covered pods that are ready and consistent,
//     not labelled unavailable-pod.kruise.io/*, and not recorded in
//     disruptedPods or unavailablePods;
//   - unavailableAllowed = currentAvailable - desiredAvailable, never
//     below 0;
//   - the records: a pod whose deletion or eviction the webhook allowed
//     stays in disruptedPods until it is gone, or for DeletionTimeout
//     (then a NotDeleted event says it was not deleted); a pod whose
//     update was allowed stays in unavailablePods until it is gone, or
//     ready and consistent again after UpdateCheckDelay.
//
// The pod webhook (coordinator/webhook, PodUnavailableBudgetAdmission)
// asks BudgetFor which budget covers a pod and spends unavailableAllowed.
// Every replica serves BudgetFor from its informers; only the leader
// writes status. Events go on the budgets (and NotDeleted on the pods).
package podunavailablebudget

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Shoal writes the budgets' status.
	Shoal shoalclient.Interface
	// Budgets (policy.kruise.io/v1alpha1), Pods, ReplicaSets,
	// Deployments and StatefulSets (apps/v1), CloneSets and
	// AdvancedStatefulSets (apps.kruise.io/v1beta1, their storage version)
	// are shared informers.
	Budgets, Pods, ReplicaSets, Deployments, StatefulSets, CloneSets, AdvancedStatefulSets cache.SharedIndexInformer
	// Scales reads the replicas of targetRefs of other kinds; nil: only
	// the kinds above are followed.
	Scales Scales
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on budgets and pods.
	Recorder events.EventRecorder
	// Clock is the time of the records' expiry; nil is the real clock.
	Clock clock.PassiveClock
	// OnFreed, if set, is called with a budget's namespace after a status
	// write raised its unavailableAllowed: a workload controller whose
	// pod update or delete the budget refused can try again at once
	// instead of after its retry back-off (Requeue builds one).
	OnFreed func(namespace string)
}

// Requeue returns an Options.OnFreed that queues every workload of the
// namespace in each of loops (the CloneSet, Advanced StatefulSet and
// Advanced DaemonSet controllers).
func Requeue(loops ...*workload.Loop) func(namespace string) {
	return func(namespace string) {
		for _, l := range loops {
			objs, err := l.Workloads.ByIndex(cache.NamespaceIndex, namespace)
			if err != nil {
				continue
			}
			for _, o := range objs {
				l.Enqueue(o)
			}
		}
	}
}

// Controller keeps the status of PodUnavailableBudgets. Its embedded
// Loop's queue holds budget keys.
type Controller struct {
	workload.Loop
	o Options
	w Workloads
}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o: o,
		w: Workloads{ReplicaSets: o.ReplicaSets, Deployments: o.Deployments, StatefulSets: o.StatefulSets,
			CloneSets: o.CloneSets, AdvancedStatefulSets: o.AdvancedStatefulSets, Scales: o.Scales},
		Loop: workload.Loop{Queue: syncloop.NewQueue("podunavailablebudget", nil), Workloads: o.Budgets.GetIndexer()},
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.Budgets, c.WorkloadHandler(), "PodUnavailableBudgets"},
		{o.Pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podEvent(nil, obj) },
			UpdateFunc: c.podEvent,
			DeleteFunc: func(obj any) { c.podEvent(nil, obj) },
		}, "pods"},
		{o.ReplicaSets, c.workloadHandler(), "ReplicaSets"},
		{o.Deployments, c.workloadHandler(), "Deployments"},
		{o.StatefulSets, c.workloadHandler(), "StatefulSets"},
		{o.CloneSets, c.workloadHandler(), "CloneSets"},
		{o.AdvancedStatefulSets, c.workloadHandler(), "Advanced StatefulSets"},
	} {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run syncs budgets until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, 2, "PodUnavailableBudget", c.sync)
	return nil
}

// podEvent queues the budgets covering the pod before or after the
// change, unless nothing a budget counts changed.
func (c *Controller) podEvent(old, obj any) {
	p, ok := workload.Unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	pubs, err := c.Budgets(p.Namespace)
	if err != nil || len(pubs) == 0 {
		return
	}
	o, _ := workload.Unwrap(old).(*corev1.Pod)
	if o != nil && !podChanged(o, p) {
		return
	}
	for _, pub := range pubs {
		if c.covers(pub, p) || o != nil && c.covers(pub, o) {
			c.Enqueue(pub)
		}
	}
}

// podChanged reports whether an update can change a budget's view of the
// pod: its labels, controller, availability or deletion.
func podChanged(o, n *corev1.Pod) bool {
	oc, nc := metav1.GetControllerOf(o), metav1.GetControllerOf(n)
	return !maps.Equal(o.Labels, n.Labels) || (oc == nil) != (nc == nil) || oc != nil && oc.UID != nc.UID ||
		Active(o) != Active(n) || Available(o) != Available(n) || PodReady(o) != PodReady(n) || o.UID != n.UID
}

// workloadHandler queues every budget of a workload's namespace when the
// workload appears, goes, starts being deleted or changes its replicas or
// controller: totals follow workload scaling (a scale-down is not held up
// by a budget computed for more replicas) and deletion.
func (c *Controller) workloadHandler() cache.ResourceEventHandlerFuncs {
	all := func(obj any) {
		if m, ok := workload.Unwrap(obj).(metav1.Object); ok {
			c.enqueueNamespace(m.GetNamespace())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: all,
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(metav1.Object)
			n, ok2 := obj.(metav1.Object)
			if ok1 && ok2 && replicasOf(o) == replicasOf(n) && (o.GetDeletionTimestamp() == nil) == (n.GetDeletionTimestamp() == nil) &&
				o.GetUID() == n.GetUID() && controllerUID(o) == controllerUID(n) {
				return
			}
			all(obj)
		},
		DeleteFunc: all,
	}
}

// controllerUID is the UID of obj's controller, "" without one.
func controllerUID(obj metav1.Object) string {
	if r := metav1.GetControllerOf(obj); r != nil {
		return string(r.UID)
	}
	return ""
}

// enqueueNamespace queues every budget of a namespace.
func (c *Controller) enqueueNamespace(namespace string) {
	pubs, err := c.Budgets(namespace)
	if err != nil {
		return
	}
	for _, pub := range pubs {
		c.Enqueue(pub)
	}
}

// sync writes one budget's status.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.Budgets.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	pub := obj.(*policyv1alpha1.PodUnavailableBudget)
	if pub.DeletionTimestamp != nil {
		return 0, nil
	}
	m, err := c.match(ctx, pub)
	if err != nil {
		return 0, fmt.Errorf("PodUnavailableBudget %s: %w", key, err)
	}
	var warnings []string
	total := m.total
	if override, ok, err := TotalReplicasOverride(pub); err != nil {
		warnings = append(warnings, err.Error()+"; it is ignored")
	} else if ok {
		total = override
	}
	if m.unscalable != nil {
		ref := pub.Spec.TargetReference
		warnings = append(warnings, fmt.Sprintf("spec.targetRef %s %s/%s: %v: the budget covers no pods; target a Deployment, ReplicaSet, StatefulSet, CloneSet, Advanced StatefulSet or a workload whose CRD declares subresources.scale",
			ref.Kind, ref.APIVersion, ref.Name, m.unscalable))
	}
	now := c.o.Clock.Now()
	out, err := computeStatus(pub, m.pods, total, now)
	if err != nil {
		// The CRD's validation keeps such a spec out; nothing to retry.
		c.o.Recorder.Eventf(pub, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", "cannot compute the budget: %v", err)
		return 0, nil
	}
	var after time.Duration
	if !out.recheck.IsZero() {
		after = max(out.recheck.Sub(now)+100*time.Millisecond, 100*time.Millisecond)
	}
	if apiequality.Semantic.DeepEqual(pub.Status, out.status) {
		return after, nil
	}
	next := pub.DeepCopy()
	next.Status = out.status
	if _, err := c.o.Shoal.PolicyV1alpha1().PodUnavailableBudgets(pub.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		// A conflict is a webhook's (or another writer's) newer status:
		// its informer event brings the budget back.
		return 0, workload.IgnoreStale(err, "write the status of PodUnavailableBudget %s", key)
	}
	st := out.status
	if c.o.OnFreed != nil && st.UnavailableAllowed > pub.Status.UnavailableAllowed {
		c.o.OnFreed(pub.Namespace)
	}
	for _, w := range warnings {
		c.o.Recorder.Eventf(pub, nil, corev1.EventTypeWarning, "InvalidTarget", "Sync", "%s", w)
	}
	if len(m.pods) == 0 {
		c.o.Recorder.Eventf(pub, nil, corev1.EventTypeNormal, "NoPods", "Sync", "No matching pods found")
	}
	for _, name := range out.notDeleted {
		for _, p := range m.pods {
			if p.Name == name {
				c.o.Recorder.Eventf(p, pub, corev1.EventTypeWarning, "NotDeleted", "Disrupt",
					"Pod was expected by PUB %s/%s to be deleted but it wasn't", pub.Namespace, pub.Name)
			}
		}
	}
	if pub.Status.UnavailableAllowed > 0 && st.UnavailableAllowed == 0 || pub.Status.UnavailableAllowed == 0 && st.UnavailableAllowed > 0 ||
		pub.Status.ObservedGeneration != st.ObservedGeneration {
		c.o.Recorder.Eventf(pub, nil, corev1.EventTypeNormal, "BudgetUpdated", "Sync",
			"unavailableAllowed %d (currentAvailable %d, desiredAvailable %d, totalReplicas %d)%s",
			st.UnavailableAllowed, st.CurrentAvailable, st.DesiredAvailable, st.TotalReplicas, recordsNote(st))
	}
	return after, nil
}

// recordsNote lists the pods a status counts as disrupted, for events.
func recordsNote(st policyv1alpha1.PodUnavailableBudgetStatus) string {
	var parts []string
	if len(st.DisruptedPods) > 0 {
		parts = append(parts, "disrupted: "+strings.Join(sortedKeys(st.DisruptedPods), ", "))
	}
	if len(st.UnavailablePods) > 0 {
		parts = append(parts, "updating: "+strings.Join(sortedKeys(st.UnavailablePods), ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

func sortedKeys(m map[string]metav1.Time) []string { return slices.Sorted(maps.Keys(m)) }
