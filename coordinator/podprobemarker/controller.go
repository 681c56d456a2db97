// Package podprobemarker is the coordinator's PodProbeMarker controller.
//
// OpenKruise routes custom probes through one NodePodProbe object per
// node, written by both its manager and its daemon; at a thousand pods
// its updates mostly conflict (kruise#2075). Shoal has no per-node
// object. For each pod that PodProbeMarkers select (active, scheduled,
// initialized, with an IP) the controller puts one work item,
// probe/<namespace>/<pod>, on the pod's node (coordinator/dispatch); the
// node's agent runs the probes (package probes) and reports only changes.
// From each report the controller patches the pod: the probe's
// podConditionType condition (True when Succeeded, else False, with the
// probe's message and times) through the status subresource, and the
// labels and annotations of the marker policy of the probe's state
// (removing the keys of the marker's other policies) as a merge patch of
// the metadata. Both are patches of the keys it owns, never a
// read-modify-write update, so they cannot conflict with anyone. A pod
// that already shows the reported states is not written.
//
// Each PodProbeMarker gets status.matchedPods and the finalizer
// kruise.io/node-pod-probe-cleanup, removed once its probes are off the
// nodes' work.
package podprobemarker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Options wire a Controller.
type Options struct {
	// Client patches pods.
	Client kubernetes.Interface
	// Shoal writes PodProbeMarker status and finalizers.
	Shoal shoalclient.Interface
	// Markers (PodProbeMarkers, v1alpha1) and Pods are shared informers.
	Markers, Pods cache.SharedIndexInformer
	// Store holds the nodes' work.
	Store *dispatch.Store
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records Events on pods whose markers change.
	Recorder events.EventRecorder
	// Registerer takes the controller's metrics; nil skips them.
	Registerer prometheus.Registerer
	// Clock times the wait for the informer; nil is the real one.
	Clock clock.PassiveClock
}

// Controller reconciles PodProbeMarkers and their pods.
type Controller struct {
	o       Options
	pods    syncloop.Queue
	markers syncloop.Queue
	regs    []cache.ResourceEventHandlerRegistration

	// placement keeps each pod's probe item on the pod's node.
	placement *dispatch.Placement

	mu sync.Mutex
	// written maps a pod key to the update it was last sent, until the
	// informer shows it, so a stale copy does not send it again.
	written map[string]written

	writes  *prometheus.CounterVec
	changes *prometheus.CounterVec
}

// written is an update sent to a pod.
type written struct {
	resourceVersion string
	update          string
	at              time.Time
}

// writtenTTL bounds how long a sent update suppresses the same one.
const writtenTTL = 30 * time.Second

// matchedPodsDelay is how long after a pod change a marker's matchedPods
// is counted again.
const matchedPodsDelay = time.Second

// New returns a controller over the informers and registers its report
// handler on the store (before the node-work server starts); Run starts
// it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o:         o,
		pods:      syncloop.NewQueue("podprobemarker-pods", nil),
		markers:   syncloop.NewQueue("podprobemarker", nil),
		placement: dispatch.NewPlacement(o.Store), written: map[string]written{},
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_podprobe_pod_writes_total",
			Help: "Pod patches made to show PodProbeMarker probe states (one per pod change: conditions, labels and annotations together), by result.",
		}, []string{"result"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_podprobe_state_changes_total",
			Help: "Probe states reported by agents that differ from what the pod showed, by state.",
		}, []string{"state"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(c.writes, c.changes)
	}
	enqueueNamespacePods := func(namespace string) {
		objs, err := o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			return
		}
		for _, obj := range objs {
			syncloop.Enqueue(c.pods, obj)
		}
	}
	markerEvent := func(obj any) {
		syncloop.Enqueue(c.markers, obj)
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(*v1alpha1.PodProbeMarker); ok {
			enqueueNamespacePods(m.Namespace)
		}
	}
	podEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		key := pod.Namespace + "/" + pod.Name
		placed := c.placement.Node(nodework.ProbeID(pod.Namespace, pod.Name)) != ""
		markers, _ := o.Markers.GetIndexer().ByIndex(cache.NamespaceIndex, pod.Namespace)
		if placed || len(markers) > 0 {
			c.pods.Add(key)
		}
		for _, obj := range markers {
			// matchedPods: a second later, so that a burst of pod changes
			// costs one recount.
			if m, ok := obj.(*v1alpha1.PodProbeMarker); ok {
				c.markers.AddAfter(m.Namespace+"/"+m.Name, matchedPodsDelay)
			}
		}
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.Markers, cache.ResourceEventHandlerFuncs{AddFunc: markerEvent, UpdateFunc: func(_, obj any) { markerEvent(obj) }, DeleteFunc: markerEvent}, "PodProbeMarkers"},
		{o.Pods, cache.ResourceEventHandlerFuncs{AddFunc: podEvent, UpdateFunc: func(_, obj any) { podEvent(obj) }, DeleteFunc: podEvent}, "pods for PodProbeMarkers"},
	} {
		reg, err := h.inf.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", h.what, err)
		}
		c.regs = append(c.regs, reg)
	}
	o.Store.HandleReports(nodework.KindProbe, func(_ string, item *nodeworkv1.WorkItem, _ *nodeworkv1.WorkReport) {
		if s := item.GetProbe(); s != nil {
			c.pods.Add(s.GetPodNamespace() + "/" + s.GetPodName())
		}
	})
	return c, nil
}

// Idle reports whether the controller has no key waiting or being synced:
// once it has synced, the work store holds the node work of every object
// it has seen.
func (c *Controller) Idle() bool { return syncloop.Idle(c.pods, c.markers) }

// HasSynced reports whether the informers' initial lists went through the
// controller's handlers.
func (c *Controller) HasSynced() bool {
	for _, r := range c.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// Resync queues every PodProbeMarker and every pod in their namespaces;
// the coordinator calls it when this replica starts leading.
func (c *Controller) Resync() {
	seen := map[string]bool{}
	for _, obj := range c.o.Markers.GetIndexer().List() {
		m := obj.(*v1alpha1.PodProbeMarker)
		syncloop.Enqueue(c.markers, m)
		if seen[m.Namespace] {
			continue
		}
		seen[m.Namespace] = true
		pods, _ := c.o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, m.Namespace)
		for _, p := range pods {
			syncloop.Enqueue(c.pods, p)
		}
	}
}

// Run processes the queues until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { syncloop.Run(ctx, c.pods, 4, "pod of PodProbeMarkers", c.syncPod) })
	wg.Go(func() { syncloop.Run(ctx, c.markers, 1, "PodProbeMarker", c.syncMarker) })
	wg.Wait()
	return nil
}

// markersIn lists the PodProbeMarkers of a namespace.
func (c *Controller) markersIn(namespace string) []*v1alpha1.PodProbeMarker {
	objs, _ := c.o.Markers.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	out := make([]*v1alpha1.PodProbeMarker, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*v1alpha1.PodProbeMarker))
	}
	return out
}

// syncPod places the pod's probe work on its node (every replica, so a
// new leader has it) and, as the leader, makes the pod show the states
// its node reported.
func (c *Controller) syncPod(ctx context.Context, key string) (time.Duration, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	id := nodework.ProbeID(namespace, name)
	obj, exists, err := c.o.Pods.GetIndexer().GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		c.place(id, "", nil)
		c.forget(key)
		return 0, nil
	}
	pod := obj.(*corev1.Pod)
	markers := c.markersIn(namespace)
	spec, skipped := podProbes(markers, pod)
	log := klog.FromContext(ctx).WithValues("pod", key)
	if len(skipped) > 0 {
		log.V(2).Info("Some probes cannot run", "skipped", skipped)
	}
	c.place(id, pod.Spec.NodeName, spec)
	if spec == nil || !c.o.IsLeader() {
		return 0, nil
	}
	_, rep := c.o.Store.Item(pod.Spec.NodeName, id)
	status := rep.GetProbe()
	if status == nil || status.GetPodUid() != string(pod.UID) {
		return 0, nil
	}
	results := map[string]*nodeworkv1.ProbeResult{}
	for _, r := range status.GetProbes() {
		results[r.GetName()] = r
	}
	u := changes(markers, pod, results)
	if u.empty() {
		c.forget(key)
		return 0, nil
	}
	return 0, c.write(ctx, pod, u)
}

// place makes the store hold exactly spec as the pod's probe work on node
// (none when spec is nil).
func (c *Controller) place(id, node string, spec *nodeworkv1.ProbeSpec) {
	var item *nodeworkv1.WorkItem
	if spec != nil {
		item = &nodeworkv1.WorkItem{Id: id, Kind: nodework.KindProbe, Spec: &nodeworkv1.WorkItem_Probe{Probe: spec}}
	}
	c.placement.Place(id, node, item)
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	delete(c.written, key)
	c.mu.Unlock()
}

// write patches pod with u, unless the same update was sent to this very
// copy of the pod a moment ago (the informer has not shown it yet).
func (c *Controller) write(ctx context.Context, pod *corev1.Pod, u *podUpdate) error {
	key := pod.Namespace + "/" + pod.Name
	patch, err := u.patch(string(pod.UID))
	if err != nil {
		return err
	}
	fingerprint := string(patch)
	now := c.o.Clock.Now()
	c.mu.Lock()
	w, ok := c.written[key]
	c.mu.Unlock()
	if ok && w.update == fingerprint && w.resourceVersion == pod.ResourceVersion && now.Sub(w.at) < writtenTTL {
		return nil
	}
	for _, cond := range u.conditions {
		c.changes.WithLabelValues(string(cond.Status)).Inc()
	}
	_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	c.count(err)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch the probe states of pod %s: %w", key, err)
	}
	c.mu.Lock()
	c.written[key] = written{resourceVersion: pod.ResourceVersion, update: fingerprint, at: now}
	c.mu.Unlock()
	if len(u.labels)+len(u.annotations) > 0 && c.o.Recorder != nil {
		c.o.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, "ProbeMarkerChanged", "Mark", "%s", u.describe())
	}
	return nil
}

func (c *Controller) count(err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	c.writes.WithLabelValues(result).Inc()
}

// syncMarker keeps a PodProbeMarker's finalizer and matchedPods. A marker
// being deleted no longer selects pods (podProbes skips it), so its
// probes leave the nodes' work with the pods' next sync, which its
// deletion queued; then the finalizer goes.
func (c *Controller) syncMarker(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.Markers.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	m := obj.(*v1alpha1.PodProbeMarker)
	markers := c.o.Shoal.AppsV1alpha1().PodProbeMarkers(m.Namespace)
	has := false
	for _, f := range m.Finalizers {
		has = has || f == wellknown.FinalizerNodePodProbeCleanup
	}
	if m.DeletionTimestamp != nil {
		if !has {
			return 0, nil
		}
		if c.pods.Len() > 0 {
			return 200 * time.Millisecond, nil // let the pods' syncs take its probes off first
		}
		var keep []string
		for _, f := range m.Finalizers {
			if f != wellknown.FinalizerNodePodProbeCleanup {
				keep = append(keep, f)
			}
		}
		return 0, c.patchFinalizers(ctx, markers.Patch, m, keep)
	}
	if !has {
		if err := c.patchFinalizers(ctx, markers.Patch, m, append(m.Finalizers, wellknown.FinalizerNodePodProbeCleanup)); err != nil {
			return 0, err
		}
	}
	var matched int64
	if sel, err := metav1.LabelSelectorAsSelector(m.Spec.Selector); err == nil && !sel.Empty() {
		pods, _ := c.o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, m.Namespace)
		for _, obj := range pods {
			if pod := obj.(*corev1.Pod); sel.Matches(labels.Set(pod.Labels)) && eligible(pod) {
				matched++
			}
		}
	}
	if m.Status.MatchedPods == matched && m.Status.ObservedGeneration == m.Generation {
		return 0, nil
	}
	s := m.DeepCopy()
	s.Status.MatchedPods, s.Status.ObservedGeneration = matched, m.Generation
	if _, err := markers.UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("update status of PodProbeMarker %s: %w", key, err)
	}
	return 0, nil
}

// patchFinalizers sets the marker's finalizers (its resourceVersion as
// the precondition).
func (c *Controller) patchFinalizers(ctx context.Context,
	patch func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1alpha1.PodProbeMarker, error),
	m *v1alpha1.PodProbeMarker, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": m.ResourceVersion}})
	if err != nil {
		return err
	}
	if _, err := patch(ctx, m.Name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("set the finalizers of PodProbeMarker %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}
