// Package sidecarterminator is the coordinator's side of the Job sidecar
// terminator (OpenKruise's SidecarTerminator): the sidecar containers of a
// Job or BroadcastJob pod (env KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true)
// are stopped once its main containers have finished, so that the pod and
// its Job can complete.
//
// # Node first
//
// OpenKruise's controller waits until the pod's status shows the main
// containers finished and then creates a ContainerRecreateRequest that
// kruise-daemon carries out. Here the node agent does the watching: as
// soon as an interesting pod runs on a node with an agent, the controller
// hands that node a sidecar-terminate work item (main and sidecar
// container names, restart policy, grace). The agent watches the main
// containers through the CRI (container events, with a short poll as the
// fallback) and stops the sidecars with CRI StopContainer and the pod's
// terminationGracePeriodSeconds as soon as they have finished: restart
// policy Never, when every main container has exited; OnFailure, when
// every one has exited 0. That takes well under the 2 s the kubelet's
// status alone would need to reach the coordinator; the controller only
// records the Events (StoppingSidecars, SidecarTerminated, or
// SidecarTerminationFailed) from the agent's reports and removes the work
// when the pod is gone or finished. Pods with restartPolicy Always, pods
// with native sidecars (init containers with restartPolicy Always) and
// pods being deleted are left alone.
//
// # Ignore-exit-code sidecars and the kubelet
//
// A sidecar with KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true as well may
// exit non-zero when stopped, which would make a Never pod Failed. As in
// OpenKruise the terminator then writes the pod's phase itself, through
// the pods/status subresource: Succeeded when every main container exited
// 0, else Failed, with the condition SidecarTerminated=True ("Terminated by
// Sidecar Terminator"), once the main containers have finished and the
// other sidecars have exited. The order matters because of the kubelet's
// status rules: when the kubelet computes a pod's phase it keeps a
// terminal phase the API shows ("pods are not allowed to transition out of
// terminal phases": a different computed phase is forced back to the
// API's), and it reads that phase from its own watch of the pod. If the
// sidecar exited before the kubelet's watch delivered the new phase, the
// kubelet would compute Failed from the sidecar's exit code and write it.
// So:
//
//  1. the agent stops the normal sidecars and reports the main
//     containers' exit codes (stage AWAITING_GO_AHEAD); the
//     ignore-exit-code sidecars keep running;
//  2. the controller patches phase and condition (from the report, or
//     from the pod's status when that shows it first);
//  3. only once its own watch shows the new phase does it give the agent
//     the go-ahead (stop_ignore_exit_code, a new generation of the item);
//     the kubelet's watch delivers the same change about as fast, and
//     the kubelet then starts terminating the pod itself, stopping the
//     remaining sidecars with the pod's grace;
//  4. the agent waits a moment more (5 s) and stops whatever of those
//     sidecars still runs. From then on the kubelet keeps the phase
//     written in step 2, whatever the sidecars' exit codes.
//
// # Virtual-kubelet nodes
//
// A node labelled type=virtual-kubelet (or tainted
// virtual-kubelet.io/provider) has no agent. There, as in OpenKruise, the
// sidecars with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE=<image>
// get that image by an in-place update of the pod's spec once its status
// shows the main containers finished; normal sidecars are ignored there,
// and image sidecars are ignored on other nodes.
//
// The feature is on unless Options.Disabled. Only the leader writes to the
// API and records Events; a standby keeps the work store warm.
package sidecarterminator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Event reasons on the pod.
const (
	// ReasonStoppingSidecars: the node agent started stopping sidecars.
	ReasonStoppingSidecars = "StoppingSidecars"
	// ReasonSidecarTerminated: every sidecar has exited after the agent
	// stopped them.
	ReasonSidecarTerminated = "SidecarTerminated"
	// ReasonSidecarTerminationFailed: the agent gave up (the message says
	// why).
	ReasonSidecarTerminationFailed = "SidecarTerminationFailed"
	// ReasonPodPhaseSet: the terminator set the pod's phase for its
	// ignore-exit-code sidecars.
	ReasonPodPhaseSet = "SidecarTerminatorSetPhase"
	// ReasonSidecarImageReplaced: sidecars on a virtual-kubelet node got
	// their exit image.
	ReasonSidecarImageReplaced = "SidecarImageReplaced"
)

// Options wire a Controller.
type Options struct {
	// Client writes pods (status, and spec on virtual-kubelet nodes).
	Client kubernetes.Interface
	// Pods and Nodes are the shared informers.
	Pods, Nodes cache.SharedIndexInformer
	// Store holds the nodes' work.
	Store *dispatch.Store
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records Events on pods; nil records none.
	Recorder events.EventRecorder
	// Registerer takes the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Clock stamps the SidecarTerminated condition; nil means the real
	// one.
	Clock clock.Clock
	// Disabled turns the sidecar terminator off (it is on by default):
	// New then watches nothing and Run only waits.
	Disabled bool
}

// Controller is the Job sidecar terminator.
type Controller struct {
	o       Options
	clock   clock.Clock
	queue   syncloop.Queue
	pods    cache.Indexer
	nodes   cache.Indexer
	podsReg cache.ResourceEventHandlerRegistration

	mu sync.Mutex
	// placement keeps each pod's work item on the pod's node.
	placement *dispatch.Placement
	// phaseSet holds, by pod key, the pod whose phase this leader wrote
	// and its watch does not show yet.
	phaseSet map[string]phaseWrite
	// recorded holds, by pod key, the Events recorded for the pod's
	// current UID.
	recorded map[string]*recordedEvents

	stopDelay prometheus.Histogram
	actions   *prometheus.CounterVec
}

// phaseWrite is a phase written for the pod uid at a time.
type phaseWrite struct {
	uid types.UID
	at  time.Time
}

// phaseRetry is how long a written phase may take to show in the watch
// before it is written again (the kubelet may have overwritten it before
// it saw it).
const phaseRetry = 10 * time.Second

// recordedEvents remembers which Events one pod got.
type recordedEvents struct {
	uid                     string
	stopping, stopped, fail bool
	phaseSet, imageReplaced bool
}

// New wires a controller to its informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o:         o,
		clock:     o.Clock,
		queue:     syncloop.NewQueue("sidecarterminator", nil),
		placement: dispatch.NewPlacement(o.Store),
		phaseSet:  map[string]phaseWrite{},
		recorded:  map[string]*recordedEvents{},
		stopDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shoal_coordinator_sidecarterminator_stop_delay_seconds",
			Help:    "Time from the last main container of a Job pod exiting to its node agent asking the runtime to stop the sidecars (node clock).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16},
		}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_sidecarterminator_actions_total",
			Help: "Sidecar terminator actions, by action (sidecars_stopped, phase_set, image_replaced, failed).",
		}, []string{"action"}),
	}
	if o.Registerer != nil {
		for _, m := range []prometheus.Collector{c.stopDelay, c.actions} {
			if err := o.Registerer.Register(m); err != nil {
				return nil, fmt.Errorf("register sidecar terminator metrics: %w", err)
			}
		}
	}
	if o.Disabled {
		return c, nil
	}
	c.pods, c.nodes = o.Pods.GetIndexer(), o.Nodes.GetIndexer()
	o.Store.HandleReports(nodework.KindSidecarTerminate, c.onReport)
	var err error
	c.podsReg, err = o.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePod,
		UpdateFunc: func(_, obj any) { c.enqueuePod(obj) },
		DeleteFunc: c.enqueuePod,
	})
	if err != nil {
		return nil, fmt.Errorf("watch pods for the sidecar terminator: %w", err)
	}
	return c, nil
}

// Idle reports whether the controller has no key waiting or being synced:
// once it has synced, the work store holds the node work of every object
// it has seen.
func (c *Controller) Idle() bool { return syncloop.Idle(c.queue) }

// HasSynced reports whether the pod informer's first list went through
// the controller's handler.
func (c *Controller) HasSynced() bool { return c.o.Disabled || c.podsReg.HasSynced() }

// Resync queues every pod with sidecars again; the coordinator calls it
// when this replica starts leading.
func (c *Controller) Resync() {
	if c.o.Disabled {
		return
	}
	c.mu.Lock()
	clear(c.phaseSet)
	c.mu.Unlock()
	for _, obj := range c.pods.List() {
		c.enqueuePod(obj)
	}
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if c.o.Disabled {
		<-ctx.Done()
		return nil
	}
	syncloop.Run(ctx, c.queue, 2, "sidecar terminator", c.sync)
	return nil
}

// hasSidecars reports whether any container of pod carries a sidecar
// terminator env: no other pod ever gets work.
func hasSidecars(pod *corev1.Pod) bool {
	for i := range pod.Spec.Containers {
		for _, e := range pod.Spec.Containers[i].Env {
			switch e.Name {
			case wellknown.EnvTerminateSidecarWhenJobExit, wellknown.EnvTerminateSidecarWhenJobExitWithImage:
				return true
			}
		}
	}
	return false
}

func (c *Controller) enqueuePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if t, tomb := obj.(cache.DeletedFinalStateUnknown); tomb {
		pod, ok = t.Obj.(*corev1.Pod)
	}
	if ok && hasSidecars(pod) {
		syncloop.Enqueue(c.queue, obj)
	}
}

// podKey is the pod key of a sidecar-terminate work item id.
func podKey(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, nodework.KindSidecarTerminate+"/")
	return rest, ok && strings.Count(rest, "/") == 1
}

// onReport takes an agent's report: it records the pod's Events and
// queues the pod.
func (c *Controller) onReport(node string, item *nodeworkv1.WorkItem, r *nodeworkv1.WorkReport) {
	key, ok := podKey(r.GetId())
	if !ok {
		return
	}
	c.queue.Add(key)
	st := r.GetSidecarTerminate()
	uid := st.GetPodUid()
	if r.GetPhase() == nodeworkv1.Phase_PHASE_UNSUPPORTED {
		// An agent older than this kind (during a rollout): say so once.
		uid = item.GetSidecarTerminate().GetPodUid()
	}
	if uid == "" || !c.o.IsLeader() {
		return
	}
	obj, exists, err := c.pods.GetByKey(key)
	if err != nil || !exists {
		return
	}
	pod := obj.(*corev1.Pod)
	if string(pod.UID) != uid {
		return
	}
	var stopped []string
	for _, s := range st.GetSidecars() {
		if s.GetStops() > 0 {
			stopped = append(stopped, s.GetName())
		}
	}
	c.mu.Lock()
	rec := c.recordedLocked(key, pod.UID)
	stopping := st.GetStopDelayMillis() > 0 && !rec.stopping
	rec.stopping = rec.stopping || stopping
	done := r.GetPhase() == nodeworkv1.Phase_PHASE_SUCCEEDED && len(stopped) > 0 && !rec.stopped
	rec.stopped = rec.stopped || done
	failed := (r.GetPhase() == nodeworkv1.Phase_PHASE_FAILED || r.GetPhase() == nodeworkv1.Phase_PHASE_UNSUPPORTED) && !rec.fail
	rec.fail = rec.fail || failed
	c.mu.Unlock()

	if stopping {
		delay := time.Duration(st.GetStopDelayMillis()) * time.Millisecond
		c.stopDelay.Observe(delay.Seconds())
		c.event(pod, corev1.EventTypeNormal, ReasonStoppingSidecars, "Stop",
			"Stopping sidecar containers on node %s %s after the main containers finished (restartPolicy %s)",
			node, delay, pod.Spec.RestartPolicy)
	}
	if done {
		c.actions.WithLabelValues("sidecars_stopped").Inc()
		c.event(pod, corev1.EventTypeNormal, ReasonSidecarTerminated, "Stop",
			"Stopped sidecar containers %s: every sidecar has exited", strings.Join(stopped, ", "))
	}
	if failed {
		c.actions.WithLabelValues("failed").Inc()
		c.event(pod, corev1.EventTypeWarning, ReasonSidecarTerminationFailed, "Stop", "Could not stop the sidecars on node %s: %s", node, r.GetMessage())
	}
}

// recordedLocked is the Event record of the pod key at uid, new when the
// pod changed. Callers hold c.mu.
func (c *Controller) recordedLocked(key string, uid types.UID) *recordedEvents {
	rec := c.recorded[key]
	if rec == nil || rec.uid != string(uid) {
		rec = &recordedEvents{uid: string(uid)}
		c.recorded[key] = rec
	}
	return rec
}

func (c *Controller) event(pod *corev1.Pod, typ, reason, action, note string, args ...any) {
	if c.o.Recorder != nil {
		c.o.Recorder.Eventf(pod, nil, typ, reason, action, note, args...)
	}
}

// sync brings one pod's work and writes in line with its plan.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	id := nodework.SidecarTerminateID(ns, name)
	obj, exists, err := c.pods.GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		c.place(id, "", nil)
		c.mu.Lock()
		delete(c.phaseSet, key)
		delete(c.recorded, key)
		c.mu.Unlock()
		return 0, nil
	}
	pod := obj.(*corev1.Pod)
	in := input{pod: pod}
	if n, ok, _ := c.nodes.GetByKey(pod.Spec.NodeName); ok && pod.Spec.NodeName != "" {
		in.node = n.(*corev1.Node)
	}
	c.mu.Lock()
	node := c.placement.Node(id)
	if w, ok := c.phaseSet[key]; ok && (w.uid != pod.UID || terminal(pod.Status.Phase) || c.clock.Since(w.at) >= phaseRetry) {
		delete(c.phaseSet, key) // the watch shows it (or another pod), or it is overdue
	}
	w, waitingForPhase := c.phaseSet[key]
	c.mu.Unlock()
	if node != "" {
		if _, rep := c.o.Store.Item(node, id); rep.GetSidecarTerminate().GetPodUid() == string(pod.UID) {
			in.report = rep.GetSidecarTerminate()
		}
	}
	p := decide(in)
	c.place(id, pod.Spec.NodeName, p.spec)
	if !c.o.IsLeader() {
		return 0, nil
	}
	var after time.Duration
	switch {
	case p.setPhase != "" && waitingForPhase:
		after = max(time.Millisecond, phaseRetry-c.clock.Since(w.at))
	case p.setPhase != "":
		if err := c.setPhase(ctx, pod, p.setPhase, p.spec.GetIgnoreExitCodeContainers()); err != nil {
			return 0, err
		}
		after = phaseRetry
	}
	if len(p.images) > 0 {
		if err := c.replaceImages(ctx, pod, p.images); err != nil {
			return 0, err
		}
	}
	return after, nil
}

// place makes the store hold exactly spec as the pod's work on node.
func (c *Controller) place(id, node string, spec *nodeworkv1.SidecarTerminateSpec) {
	var item *nodeworkv1.WorkItem
	if spec != nil {
		item = &nodeworkv1.WorkItem{Id: id, Kind: nodework.KindSidecarTerminate,
			Spec: &nodeworkv1.WorkItem_SidecarTerminate{SidecarTerminate: spec}}
	}
	c.placement.Place(id, node, item)
}

// setPhase writes the pod's phase and SidecarTerminated=True through the
// status subresource (the pod's UID as a precondition), before the
// ignore-exit-code sidecars are stopped.
func (c *Controller) setPhase(ctx context.Context, pod *corev1.Pod, phase corev1.PodPhase, sidecars []string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{
			"phase": phase,
			"conditions": []map[string]any{{
				"type": wellknown.ConditionSidecarTerminated, "status": corev1.ConditionTrue,
				"reason": ReasonSidecarTerminated, "message": terminatedMessage,
				"lastTransitionTime": metav1.NewTime(c.clock.Now()),
			}},
		},
	})
	if err != nil {
		return fmt.Errorf("encode the status patch of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return workload.IgnoreStale(err, "set the phase of pod %s/%s to %s", pod.Namespace, pod.Name, phase)
	}
	key := pod.Namespace + "/" + pod.Name
	c.mu.Lock()
	c.phaseSet[key] = phaseWrite{uid: pod.UID, at: c.clock.Now()}
	rec := c.recordedLocked(key, pod.UID)
	first := !rec.phaseSet
	rec.phaseSet = true
	c.mu.Unlock()
	klog.FromContext(ctx).Info("Set the phase of a Job pod before stopping its ignore-exit-code sidecars",
		"pod", klog.KObj(pod), "phase", phase, "sidecars", sidecars)
	if first {
		c.actions.WithLabelValues("phase_set").Inc()
		c.event(pod, corev1.EventTypeNormal, ReasonPodPhaseSet, "SetPhase",
			"Set the pod's phase to %s (condition %s) before stopping sidecar containers %s, whose exit codes are ignored",
			phase, wellknown.ConditionSidecarTerminated, strings.Join(sidecars, ", "))
	}
	return nil
}

// replaceImages updates the sidecars' images in place (virtual-kubelet
// node), on the live pod, retrying conflicts.
func (c *Controller) replaceImages(ctx context.Context, cached *corev1.Pod, images map[string]string) error {
	var changed []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = changed[:0]
		pod, err := c.o.Client.CoreV1().Pods(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.UID != cached.UID || pod.DeletionTimestamp != nil {
			return nil
		}
		for i := range pod.Spec.Containers {
			ct := &pod.Spec.Containers[i]
			image, ok := images[ct.Name]
			if !ok || ct.Image == image {
				continue
			}
			if s := statusOf(pod, ct.Name); s != nil && s.State.Terminated != nil {
				continue
			}
			ct.Image = image
			changed = append(changed, ct.Name)
		}
		if len(changed) == 0 {
			return nil
		}
		_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return workload.IgnoreStale(err, "replace the sidecar images of pod %s/%s", cached.Namespace, cached.Name)
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	klog.FromContext(ctx).Info("Replaced sidecar images to stop them (virtual-kubelet node)", "pod", klog.KObj(cached),
		"sidecars", changed, "images", maps.Clone(images))
	c.actions.WithLabelValues("image_replaced").Inc()
	c.mu.Lock()
	rec := c.recordedLocked(cached.Namespace+"/"+cached.Name, cached.UID)
	first := !rec.imageReplaced
	rec.imageReplaced = true
	c.mu.Unlock()
	if first {
		c.event(cached, corev1.EventTypeNormal, ReasonSidecarImageReplaced, "Stop",
			"Replacing the images of sidecar containers %s to stop them (virtual-kubelet node)", strings.Join(changed, ", "))
	}
	return nil
}
