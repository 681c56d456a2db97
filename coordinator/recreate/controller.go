package recreate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// byPodUID indexes requests by the pod UID label the webhook sets.
const byPodUID = "crr.apps.kruise.io/pod-uid"

// userAgent is who holds a pod's KruisePodReady condition False, in the
// condition's message (OpenKruise's format, which tools parse).
const userAgent = "ContainerRecreateRequest"

// Options wire a Controller.
type Options struct {
	// Client writes pods' conditions; Shoal writes the requests.
	Client kubernetes.Interface
	Shoal  shoalclient.Interface
	// Requests and Pods are the shared informers of
	// ContainerRecreateRequests and pods (not started yet: New adds an
	// index).
	Requests, Pods cache.SharedIndexInformer
	// Store holds the nodes' work.
	Store *dispatch.Store
	// Writer paces the status writes.
	Writer statuswriter.Enqueuer
	// IsLeader tells whether this replica may write to the API; a standby
	// keeps its work store warm but writes nothing.
	IsLeader func() bool
	// Recorder records Events on requests and pods; nil records none.
	Recorder events.EventRecorder
	// Clock is the coordinator's clock; nil means the real one.
	Clock clock.Clock
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Controller drives ContainerRecreateRequests: it gathers what decide
// needs, hands the work to the pod's node, and writes status, labels, the
// pod's readiness condition, Events and TTL deletions.
type Controller struct {
	o        Options
	clock    clock.Clock
	queue    workqueue.TypedRateLimitingInterface[string]
	requests cache.Indexer
	pods     cache.Indexer

	mu         sync.Mutex
	nodes      map[string]string    // work item id -> node holding it
	dispatched map[string]time.Time // item id -> when this leader first put it
	// finished holds the Completed statuses this leader decided and that
	// the informer does not show yet: until it does, the request counts as
	// completed (its work and report are gone from the store, and deciding
	// again from the stale copy would dispatch it once more).
	finished map[string]v1alpha1.ContainerRecreateRequestStatus
	// reported and finalAt time the stages: whether the node reported on
	// the item yet, and when its final report came.
	reported map[string]bool
	finalAt  map[string]time.Time

	completedTotal *prometheus.CounterVec
	duration       prometheus.Histogram
	stages         *prometheus.HistogramVec

	requestsReg, podsReg cache.ResourceEventHandlerRegistration
}

// New wires a controller to its informers.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o:          o,
		clock:      o.Clock,
		queue:      syncloop.NewQueue("containerrecreaterequest", nil),
		requests:   o.Requests.GetIndexer(),
		pods:       o.Pods.GetIndexer(),
		nodes:      map[string]string{},
		dispatched: map[string]time.Time{},
		finished:   map[string]v1alpha1.ContainerRecreateRequestStatus{},
		reported:   map[string]bool{},
		finalAt:    map[string]time.Time{},
		completedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_crr_completed_total",
			Help: "ContainerRecreateRequests completed, by result (succeeded, failed, deadline, pod_gone, no_response).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shoal_coordinator_crr_duration_seconds",
			Help:    "Time from a ContainerRecreateRequest's creation to its completion.",
			Buckets: []float64{0.5, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89},
		}),
	}
	c.stages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "shoal_coordinator_crr_stage_seconds",
		Help: "Where a ContainerRecreateRequest's time goes, by stage: dispatch (work handed to the node -> its first report), " +
			"prestop, stop and restart (per container, timed by the node: the preStop hook, StopContainer, the stop -> the new " +
			"instance running), report (the node's final report -> the Completed status written).",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32},
	}, []string{"stage"})
	// Every series exists from the start, at zero: a series that appears
	// with its first observation has no earlier sample, and rate() would
	// miss that observation.
	for _, stage := range []string{"dispatch", "prestop", "stop", "restart", "report"} {
		c.stages.WithLabelValues(stage)
	}
	for _, result := range []string{"succeeded", "failed", "deadline", "pod_gone", "no_response"} {
		c.completedTotal.WithLabelValues(result)
	}
	if o.Registerer != nil {
		for _, m := range []prometheus.Collector{c.completedTotal, c.duration, c.stages} {
			if err := o.Registerer.Register(m); err != nil {
				return nil, fmt.Errorf("register CRR metrics: %w", err)
			}
		}
	}
	if err := o.Requests.AddIndexers(cache.Indexers{byPodUID: func(obj any) ([]string, error) {
		crr, ok := obj.(*v1alpha1.ContainerRecreateRequest)
		if !ok || crr.Labels[wellknown.LabelCRRPodUID] == "" {
			return nil, nil
		}
		return []string{crr.Labels[wellknown.LabelCRRPodUID]}, nil
	}}); err != nil {
		return nil, fmt.Errorf("index ContainerRecreateRequests by pod: %w", err)
	}
	o.Store.HandleReports(nodework.KindRecreate, c.onReport)
	var err error
	c.requestsReg, err = o.Requests.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueueRequest(obj, false) },
		DeleteFunc: func(obj any) { c.enqueueRequest(obj, true) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch ContainerRecreateRequests: %w", err)
	}
	c.podsReg, err = o.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePod,
		UpdateFunc: func(_, obj any) { c.enqueuePod(obj) },
		DeleteFunc: c.enqueuePod,
	})
	if err != nil {
		return nil, fmt.Errorf("watch pods for ContainerRecreateRequests: %w", err)
	}
	return c, nil
}

// Idle reports whether the controller has no key waiting or being synced:
// once it has synced, the work store holds the node work of every object
// it has seen.
func (c *Controller) Idle() bool { return syncloop.Idle(c.queue) }

// HasSynced reports whether both informers' initial lists went through
// the controller's handlers.
func (c *Controller) HasSynced() bool { return c.requestsReg.HasSynced() && c.podsReg.HasSynced() }

// Resync queues every request again; the coordinator calls it when this
// replica starts leading, so that deadlines and timeouts count from now.
func (c *Controller) Resync() {
	c.mu.Lock()
	clear(c.dispatched)
	clear(c.finished)
	c.mu.Unlock()
	for _, key := range c.requests.ListKeys() {
		c.queue.Add(key)
	}
}

// Run processes the queue with a few workers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.queue, 4, "ContainerRecreateRequest", c.sync)
	return nil
}

func (c *Controller) enqueue(obj any) { syncloop.Enqueue(c.queue, obj) }

// enqueueRequest queues a request and, once it completed or is gone, the
// requests queued behind it for the same pod.
func (c *Controller) enqueueRequest(obj any, deleted bool) {
	c.enqueue(obj)
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	crr, ok := obj.(*v1alpha1.ContainerRecreateRequest)
	if !ok || (!deleted && !completed(crr)) || crr.Labels[wellknown.LabelCRRPodUID] == "" {
		return
	}
	objs, err := c.requests.ByIndex(byPodUID, crr.Labels[wellknown.LabelCRRPodUID])
	if err != nil {
		return
	}
	for _, o := range objs {
		c.enqueue(o)
	}
}

func (c *Controller) enqueuePod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	objs, err := c.requests.ByIndex(byPodUID, string(pod.UID))
	if err != nil {
		return
	}
	for _, o := range objs {
		c.enqueue(o)
	}
}

func (c *Controller) onReport(_ string, _ *nodeworkv1.WorkItem, r *nodeworkv1.WorkReport) {
	// recreate/<namespace>/<name>
	rest, ok := strings.CutPrefix(r.GetId(), nodework.KindRecreate+"/")
	if !ok || strings.Count(rest, "/") != 1 {
		return
	}
	c.timeStages(r.GetId(), r)
	c.queue.Add(rest)
}

// timeStages records the dispatch stage at an item's first report, and
// the node's own timings at its final one.
func (c *Controller) timeStages(id string, r *nodeworkv1.WorkReport) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.dispatched[id]; ok && !c.reported[id] {
		c.stages.WithLabelValues("dispatch").Observe(now.Sub(at).Seconds())
	}
	c.reported[id] = true
	if !terminal(r) || !c.finalAt[id].IsZero() {
		return
	}
	c.finalAt[id] = now
	for _, s := range r.GetRecreate().GetContainers() {
		if !s.GetIsKilled() {
			continue
		}
		c.stages.WithLabelValues("prestop").Observe(float64(s.GetPreStopMillis()) / 1000)
		c.stages.WithLabelValues("stop").Observe(float64(s.GetStopMillis()) / 1000)
		if s.GetRestartMillis() > 0 {
			c.stages.WithLabelValues("restart").Observe(float64(s.GetRestartMillis()) / 1000)
		}
	}
}

// sync brings one request's world in line with its plan and returns when
// to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	id := nodework.RecreateID(ns, name)
	obj, exists, err := c.requests.GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		c.drop(id)
		c.mu.Lock()
		delete(c.finished, id)
		delete(c.finalAt, id)
		c.mu.Unlock()
		return 0, nil
	}
	crr := obj.(*v1alpha1.ContainerRecreateRequest)
	c.mu.Lock()
	if st, ok := c.finished[id]; ok {
		if completed(crr) {
			delete(c.finished, id)
		} else {
			crr = crr.DeepCopy()
			crr.Status = st
		}
	}
	c.mu.Unlock()
	now := c.clock.Now()
	in := input{crr: crr, now: now}
	if p, ok, _ := c.pods.GetByKey(ns + "/" + crr.Spec.PodName); ok {
		in.pod = p.(*corev1.Pod)
	}
	if uid := crr.Labels[wellknown.LabelCRRPodUID]; uid != "" {
		objs, err := c.requests.ByIndex(byPodUID, uid)
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			in.queue = append(in.queue, o.(*v1alpha1.ContainerRecreateRequest))
		}
	}
	c.mu.Lock()
	node := c.nodes[id]
	in.dispatchedAt = c.dispatched[id]
	c.mu.Unlock()
	if node != "" {
		in.placed = true
		_, in.report = c.o.Store.Item(node, id)
	}
	if crr.DeletionTimestamp != nil {
		// Deleted before it completed: stop the work, release the pod.
		c.drop(id)
		return 0, c.release(ctx, crr, in.pod)
	}

	p := decide(in)
	leader := c.o.IsLeader()
	if leader && in.dispatchedAt.IsZero() && p.spec != nil {
		// Before the work is in the store: the node may answer at once.
		c.mu.Lock()
		c.dispatched[id] = now
		c.mu.Unlock()
		if p.requeueAfter <= 0 || p.requeueAfter > noResponseTimeout {
			p.requeueAfter = noResponseTimeout
		}
	}
	c.place(id, p)
	if !leader {
		return p.requeueAfter, nil
	}
	if !apiequality.Semantic.DeepEqual(crr.Status, p.status) {
		c.writeStatus(key, p.status)
		c.recordTransition(crr, in.pod, p.status)
	}
	if p.status.Phase == v1alpha1.ContainerRecreateRequestCompleted && !completed(obj.(*v1alpha1.ContainerRecreateRequest)) {
		c.mu.Lock()
		c.finished[id] = p.status
		c.mu.Unlock()
	}
	switch {
	case p.holdUnready:
		if err := c.holdUnready(ctx, crr, in.pod); err != nil {
			return 0, err
		}
	case p.status.Phase == v1alpha1.ContainerRecreateRequestCompleted:
		if err := c.release(ctx, crr, in.pod); err != nil {
			return 0, err
		}
	}
	if p.status.Phase != v1alpha1.ContainerRecreateRequestCompleted || !completed(crr) {
		// Labels and TTL follow the status the API has, not the one on its way.
		return p.requeueAfter, nil
	}
	return c.finish(ctx, crr, now)
}

// place makes the store hold exactly the plan's work for the request.
func (c *Controller) place(id string, p plan) {
	c.mu.Lock()
	old := c.nodes[id]
	if p.spec != nil {
		c.nodes[id] = p.node
	} else {
		delete(c.nodes, id)
		delete(c.dispatched, id)
		delete(c.reported, id)
	}
	c.mu.Unlock()
	if old != "" && (p.spec == nil || old != p.node) {
		c.o.Store.Delete(old, id)
	}
	if p.spec != nil {
		c.o.Store.Put(p.node, &nodeworkv1.WorkItem{Id: id, Kind: nodework.KindRecreate, Spec: &nodeworkv1.WorkItem_Recreate{Recreate: p.spec}})
	}
}

func (c *Controller) drop(id string) { c.place(id, plan{}) }

// writeStatus queues a status write. It writes onto the latest copy the
// informer has, so a later write of the same key replaces this one. A
// Completed status is the final answer: it goes at once, not paced behind
// the progress write before it.
func (c *Controller) writeStatus(key string, status v1alpha1.ContainerRecreateRequestStatus) {
	enqueue := c.o.Writer.Enqueue
	if status.Phase == v1alpha1.ContainerRecreateRequestCompleted {
		enqueue = c.o.Writer.EnqueueFinal
	}
	enqueue("containerrecreaterequest/"+key, func(ctx context.Context) error {
		obj, ok, err := c.requests.GetByKey(key)
		if err != nil || !ok {
			return err
		}
		cp := obj.(*v1alpha1.ContainerRecreateRequest).DeepCopy()
		if completed(cp) && status.Phase != v1alpha1.ContainerRecreateRequestCompleted {
			return nil // never reopen a completed request
		}
		cp.Status = status
		_, err = c.o.Shoal.AppsV1alpha1().ContainerRecreateRequests(cp.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil && status.Phase == v1alpha1.ContainerRecreateRequestCompleted {
			id := nodework.RecreateID(cp.Namespace, cp.Name)
			c.mu.Lock()
			if at := c.finalAt[id]; !at.IsZero() {
				c.stages.WithLabelValues("report").Observe(c.clock.Since(at).Seconds())
			}
			delete(c.finalAt, id)
			c.mu.Unlock()
		}
		return err
	})
}

// recordTransition records an Event when the request's phase changes.
func (c *Controller) recordTransition(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod, s v1alpha1.ContainerRecreateRequestStatus) {
	if c.o.Recorder == nil || crr.Status.Phase == s.Phase {
		return
	}
	names := make([]string, 0, len(crr.Spec.Containers))
	for _, ct := range crr.Spec.Containers {
		names = append(names, ct.Name)
	}
	var related *corev1.Pod
	if pod != nil && string(pod.UID) == crr.Labels[wellknown.LabelCRRPodUID] {
		related = pod
	}
	switch s.Phase {
	case v1alpha1.ContainerRecreateRequestRecreating:
		c.o.Recorder.Eventf(crr, related, corev1.EventTypeNormal, "Recreating", "Recreate", "Recreating containers %s of pod %s", strings.Join(names, ", "), crr.Spec.PodName)
	case v1alpha1.ContainerRecreateRequestCompleted:
		result, typ := c.result(s)
		c.completedTotal.WithLabelValues(result).Inc()
		if !crr.CreationTimestamp.IsZero() {
			c.duration.Observe(c.clock.Since(crr.CreationTimestamp.Time).Seconds())
		}
		note := "Recreated containers " + strings.Join(names, ", ")
		if s.Message != "" {
			note = "Completed: " + s.Message
		}
		if related != nil {
			c.o.Recorder.Eventf(related, crr, typ, "ContainerRecreate"+strings.ToUpper(result[:1])+result[1:], "Recreate", "%s (ContainerRecreateRequest %s)", note, crr.Name)
		}
		c.o.Recorder.Eventf(crr, related, typ, "Completed", "Recreate", "%s", note)
	}
}

// result names how a completed status ended, for metrics and Events.
func (c *Controller) result(s v1alpha1.ContainerRecreateRequestStatus) (string, string) {
	switch s.Message {
	case msgPodGone:
		return "pod_gone", corev1.EventTypeWarning
	case msgNoResponse:
		return "no_response", corev1.EventTypeWarning
	case msgDeadline:
		return "deadline", corev1.EventTypeWarning
	}
	for _, st := range s.ContainerRecreateStates {
		if st.Phase == v1alpha1.ContainerRecreateRequestFailed {
			return "failed", corev1.EventTypeWarning
		}
	}
	return "succeeded", corev1.EventTypeNormal
}

// unreadyKey is one holder in the KruisePodReady message.
type unreadyKey struct {
	UserAgent string `json:"userAgent"`
	Key       string `json:"key"`
}

// holdUnready marks the pod not ready for crr (KruisePodReady False with
// crr as a holder) and records when, with a finalizer so a deleted request
// still releases the pod. The steps run in this order, each skipped once
// done: the finalizer (the pod is never held without it), the pod's
// condition, and only then the acquired time, so the grace period counts
// from a moment the pod was already out of its Services.
func (c *Controller) holdUnready(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod) error {
	if pod == nil {
		return nil
	}
	if !hasFinalizer(crr) {
		if err := c.patchRequest(ctx, crr, map[string]any{"metadata": map[string]any{
			"uid":             crr.UID,
			"resourceVersion": crr.ResourceVersion,
			"finalizers":      append(slices.Clone(crr.Finalizers), wellknown.FinalizerCRRUnreadyAcquired),
		}}); err != nil {
			return err
		}
	}
	me := unreadyKey{UserAgent: userAgent, Key: crr.Namespace + "/" + crr.Name}
	if err := c.setUnreadyHolders(ctx, pod, func(keys []unreadyKey) []unreadyKey {
		if slices.Contains(keys, me) {
			return keys
		}
		return append(keys, me)
	}); err != nil {
		return err
	}
	if _, ok := crr.Annotations[wellknown.AnnotationCRRUnreadyAcquired]; ok {
		return nil
	}
	return c.patchRequest(ctx, crr, map[string]any{"metadata": map[string]any{
		"uid":         crr.UID,
		"annotations": map[string]string{wellknown.AnnotationCRRUnreadyAcquired: acquiredStamp(c.clock.Now())},
	}})
}

// acquiredStamp formats t as OpenKruise writes the unready-acquired time
// (RFC 3339, whole seconds), rounded up rather than down: a stamp earlier
// than the moment the pod was marked would cut the grace period short by
// up to a second.
func acquiredStamp(t time.Time) string {
	if s := t.Truncate(time.Second); !s.Equal(t) {
		t = s.Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

// release drops crr from the pod's unready holders and removes its
// finalizer.
func (c *Controller) release(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod) error {
	if !hasFinalizer(crr) {
		return nil
	}
	me := unreadyKey{UserAgent: userAgent, Key: crr.Namespace + "/" + crr.Name}
	if pod != nil && string(pod.UID) == crr.Labels[wellknown.LabelCRRPodUID] {
		if err := c.setUnreadyHolders(ctx, pod, func(keys []unreadyKey) []unreadyKey {
			out := keys[:0]
			for _, k := range keys {
				if k != me {
					out = append(out, k)
				}
			}
			return out
		}); err != nil {
			return err
		}
	}
	return c.patchRequest(ctx, crr, map[string]any{"metadata": map[string]any{
		"uid":             crr.UID,
		"resourceVersion": crr.ResourceVersion,
		"finalizers":      slicesWithout(crr.Finalizers, wellknown.FinalizerCRRUnreadyAcquired),
	}})
}

func hasFinalizer(crr *v1alpha1.ContainerRecreateRequest) bool {
	for _, f := range crr.Finalizers {
		if f == wellknown.FinalizerCRRUnreadyAcquired {
			return true
		}
	}
	return false
}

func slicesWithout(in []string, s string) []string {
	out := []string{}
	for _, v := range in {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// setUnreadyHolders rewrites the pod's KruisePodReady condition from its
// holders: False with the holders as message while any holds it, True
// otherwise. It reads the pod live (the informer's copy may not show the
// last change yet) and writes only when something changes.
func (c *Controller) setUnreadyHolders(ctx context.Context, cached *corev1.Pod, edit func([]unreadyKey) []unreadyKey) error {
	pod, err := c.o.Client.CoreV1().Pods(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get pod %s/%s: %w", cached.Namespace, cached.Name, err)
	case pod.UID != cached.UID:
		return nil
	}
	var keys []unreadyKey
	var cur *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == wellknown.ConditionKruisePodReady {
			cur = &pod.Status.Conditions[i]
		}
	}
	if cur != nil && cur.Status == corev1.ConditionFalse && cur.Message != "" {
		if err := json.Unmarshal([]byte(cur.Message), &keys); err != nil {
			keys = nil // someone else's message: ours replaces it
		}
	}
	keys = edit(append([]unreadyKey(nil), keys...))
	want := corev1.PodCondition{Type: wellknown.ConditionKruisePodReady, Status: corev1.ConditionTrue}
	if len(keys) > 0 {
		b, err := json.Marshal(keys)
		if err != nil {
			return err
		}
		want.Status, want.Message = corev1.ConditionFalse, string(b)
	}
	if cur != nil && cur.Status == want.Status && cur.Message == want.Message {
		return nil
	}
	if cur == nil && want.Status == corev1.ConditionTrue {
		return nil // never held: nothing to restore
	}
	// A map, not a PodCondition: an empty message must be sent to clear
	// the holders (PodCondition omits it).
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{"conditions": []map[string]any{{
			"type": want.Type, "status": want.Status, "message": want.Message,
			"lastTransitionTime": metav1.NewTime(c.clock.Now()),
		}}},
	})
	if err != nil {
		return err
	}
	_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("set %s on pod %s/%s: %w", wellknown.ConditionKruisePodReady, pod.Namespace, pod.Name, err)
	}
	klog.FromContext(ctx).Info("Set pod readiness condition", "pod", klog.KObj(pod), "condition", want.Type, "status", want.Status, "holders", want.Message)
	return nil
}

func (c *Controller) patchRequest(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.o.Shoal.AppsV1alpha1().ContainerRecreateRequests(crr.Namespace).Patch(ctx, crr.Name, types.MergePatchType, b, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch ContainerRecreateRequest %s/%s: %w", crr.Namespace, crr.Name, err)
	}
	return nil
}

// finish handles a request whose Completed status is in the API: it
// removes the active label and deletes the request once its TTL is over.
func (c *Controller) finish(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, now time.Time) (time.Duration, error) {
	if _, ok := crr.Labels[wellknown.LabelCRRActive]; ok {
		if err := c.patchRequest(ctx, crr, map[string]any{"metadata": map[string]any{
			"uid": crr.UID, "labels": map[string]any{wellknown.LabelCRRActive: nil},
		}}); err != nil {
			return 0, err
		}
	}
	ttl := crr.Spec.TTLSecondsAfterFinished
	if ttl == nil || crr.Status.CompletionTime == nil {
		return 0, nil
	}
	if left := crr.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second).Sub(now); left > 0 {
		return left, nil
	}
	uid := crr.UID
	err := c.o.Shoal.AppsV1alpha1().ContainerRecreateRequests(crr.Namespace).Delete(ctx, crr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("delete ContainerRecreateRequest %s/%s after its TTL: %w", crr.Namespace, crr.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted ContainerRecreateRequest after its TTL", "request", klog.KObj(crr))
	return 0, nil
}
