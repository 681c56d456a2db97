// Package daemonset is the coordinator's Advanced DaemonSet controller
// (the kind at its storage version, apps.kruise.io/v1beta1): one pod on
// every node that should run it, rolled to the newest template node by
// node.
//
// Placement follows the upstream DaemonSet: a node should run a pod when
// the template's nodeName, nodeSelector and required node affinity select
// it and its NoSchedule and NoExecute taints are tolerated (with the
// tolerations the upstream controller adds to daemon pods: not-ready,
// unreachable, pressure and unschedulable nodes keep their daemon); a pod
// stays on a node while it is selected and its NoExecute taints are
// tolerated. Pods are pinned by node affinity (package placement), failed
// pods are replaced, and pods on nodes that should not run them are
// deleted.
//
// Rolling update (updateStrategy.type RollingUpdate): rollingUpdateType
// Standard deletes an old pod and creates its replacement, within
// maxUnavailable; with maxSurge, a new pod starts next to the old one,
// which goes once the new one is available (minReadySeconds).
// InPlaceIfPossible updates a pod in place when only images and metadata
// changed (the shared engine in coordinator/workload/inplace, with the
// InPlaceUpdateReady readiness gate on every pod), and recreates it
// otherwise. rollingUpdate.selector limits the update to the nodes it
// picks, partition keeps that many nodes (the first by name) at the old
// revision, paused stops it. OnDelete leaves old pods until someone
// deletes them. Deleting a pod goes through the preDelete lifecycle hook
// (PreparingDelete); the preNormal hook holds new pods in
// PreparingNormal. ControllerRevisions keep the history
// (revisionHistoryLimit); status.updateRevision is the template's hash,
// the pods' controller-revision-hash.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/features"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/coordinator/workload/expectations"
	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/coordinator/workload/lifecycle"
	"github.com/shoal-io/shoal/coordinator/workload/placement"
	"github.com/shoal-io/shoal/coordinator/workload/podops"
	"github.com/shoal-io/shoal/coordinator/workload/predownload"
	"github.com/shoal-io/shoal/coordinator/workload/revision"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Client writes pods and ControllerRevisions.
	Client kubernetes.Interface
	// Shoal writes DaemonSet status.
	Shoal shoalclient.Interface
	// DaemonSets (v1beta1), Pods, Nodes and Revisions (apps/v1
	// ControllerRevisions) are shared informers.
	DaemonSets, Pods, Nodes, Revisions cache.SharedIndexInformer
	// Jobs is the shared ImagePullJob informer (v1alpha1), to find the
	// pre-download jobs a DaemonSet owns; nil leaves finished rollouts'
	// jobs to their TTL.
	Jobs cache.SharedIndexInformer
	// Features are the coordinator's feature gates (package features);
	// nil is their defaults.
	Features featuregate.FeatureGate
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on DaemonSets.
	Recorder events.EventRecorder
	// Clock times availability; nil is the real one.
	Clock clock.Clock
}

// Controller reconciles Advanced DaemonSets.
type Controller struct {
	workload.Loop
	o Options
	// ops deletes, updates in place and moves along the pods.
	ops *podops.Ops
	// claimer adopts orphan pods the selector matches.
	claimer workload.Claimer
	// preDownloads creates and deletes the pre-download ImagePullJobs.
	preDownloads *predownload.Manager
	// backoff holds, by DaemonSet key and node, when a node whose daemon
	// pod failed may get a new one, and the last delay (doubled at each
	// failure, as the upstream controller backs off).
	backoffMu sync.Mutex
	backoff   map[string]map[string]failedBackoff
	pods      cache.Indexer
	nodes     cache.Indexer
	revs      cache.Indexer
}

// byOwner indexes pods and revisions by their DaemonSet's UID.
const byOwner = "daemonset-owner"

// failedBackoff is a node's backoff after a failed daemon pod.
type failedBackoff struct {
	until time.Time
	delay time.Duration
}

// Backoff bounds after a failed daemon pod, as the upstream controller's.
const (
	backoffInitial = time.Second
	backoffMax     = 15 * time.Minute
)

// kind is the owner kind of the pods and revisions.
var kind = v1beta1.SchemeGroupVersion.WithKind("DaemonSet")

// owner finds the pods and revisions of Advanced DaemonSets (not of
// upstream ones).
var owner = workload.Owner{Kind: kind.Kind, Group: kind.Group}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	expect := expectations.New(o.Clock, 0)
	c := &Controller{
		Loop: workload.Loop{
			Queue: syncloop.NewQueue("daemonset", nil), Expect: expect,
			Owner: owner, Workloads: o.DaemonSets.GetIndexer(),
		},
		o: o,
		ops: &podops.Ops{
			Client: o.Client, Recorder: o.Recorder, Expect: expect, Clock: o.Clock, Kind: "DaemonSet",
			Update: &inplace.Updater{Client: o.Client, Clock: o.Clock, Restart: inplace.RestartWithCRR(o.Shoal)},
		},
		claimer: workload.Claimer{Client: o.Client, Recorder: o.Recorder, Kind: kind},
		pods:    o.Pods.GetIndexer(), nodes: o.Nodes.GetIndexer(), revs: o.Revisions.GetIndexer(),
		preDownloads: &predownload.Manager{Client: o.Client, Shoal: o.Shoal, Recorder: o.Recorder, Index: byOwner},
	}
	informers := []cache.SharedIndexInformer{o.Pods, o.Revisions}
	if o.Jobs != nil {
		informers = append(informers, o.Jobs)
		c.preDownloads.Jobs = o.Jobs.GetIndexer()
	}
	for _, inf := range informers {
		if err := inf.AddIndexers(owner.Indexers(byOwner)); err != nil {
			return nil, fmt.Errorf("index by Advanced DaemonSet owner: %w", err)
		}
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.DaemonSets, c.WorkloadHandler(), "Advanced DaemonSets"},
		{o.Pods, c.OrphanHandler(c.PodHandler(), func(obj any) *metav1.LabelSelector { return obj.(*v1beta1.DaemonSet).Spec.Selector }),
			"pods for Advanced DaemonSets"},
		{o.Nodes, cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { c.Resync() },
			UpdateFunc: func(old, obj any) {
				if workload.NodePlacementChanged(old, obj) {
					c.Resync()
				}
			},
			DeleteFunc: func(any) { c.Resync() },
		}, "nodes for Advanced DaemonSets"},
	} {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// HasSynced reports whether the informers' initial lists went through the
// controller's handlers, and the revisions are listed.
func (c *Controller) HasSynced() bool {
	return c.Loop.HasSynced() && c.o.Revisions.HasSynced()
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, workload.Workers, "DaemonSet", c.sync)
	return nil
}

// sync reconciles one DaemonSet.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.Workloads.GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		c.Expect.Forget(key)
		c.backoffMu.Lock()
		delete(c.backoff, key)
		c.backoffMu.Unlock()
		return 0, nil
	}
	ds := obj.(*v1beta1.DaemonSet)
	if ds.DeletionTimestamp != nil {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("daemonset", key)
	ctx = klog.NewContext(ctx, log)

	// Expectations before pods: see the CloneSet controller's sync.
	satisfied, waiting := c.Expect.Satisfied(key)
	candidates, err := c.pods.ByIndex(cache.NamespaceIndex, ds.Namespace)
	if err != nil {
		return 0, err
	}
	all, err := c.claimer.Pods(ctx, ds, ds.Spec.Selector, candidates)
	if err != nil {
		return 0, err
	}
	var pods []*corev1.Pod
	inUse := map[string]bool{}
	for _, p := range all {
		inUse[ds.Name+"-"+hashOf(p)] = true
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	revObjs, err := c.owned(c.revs, ds)
	if err != nil {
		return 0, err
	}
	revs := make([]*appsv1.ControllerRevision, 0, len(revObjs))
	for _, o := range revObjs {
		revs = append(revs, o.(*appsv1.ControllerRevision))
	}
	update, err := revision.Sync(ctx, c.o.Client, revision.Owner{
		Object: ds, Kind: kind, Template: &ds.Spec.Template, CollisionCount: ds.Status.CollisionCount,
		Labels: ds.Spec.Selector.MatchLabels, HistoryLimit: int(ptr.Deref(ds.Spec.RevisionHistoryLimit, 10)),
	}, revs, inUse)
	if err != nil {
		return 0, err
	}
	hash := update.Labels[wellknown.LabelControllerRevisionHash]

	var nodes []*corev1.Node
	for _, o := range c.nodes.List() {
		if n, ok := o.(*corev1.Node); ok && n.DeletionTimestamp == nil {
			nodes = append(nodes, n)
		}
	}
	p, err := newPlan(ds, nodes, pods, hash, c.o.Clock.Now(), c.backoffUntil(key))
	if err != nil {
		c.o.Recorder.Eventf(ds, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", "%v", err)
		return 0, err
	}
	var errs []error
	if !satisfied {
		log.V(2).Info("Waiting for the informer to show earlier changes", "pending", waiting)
		p.requeueAfter = c.Expect.NextExpiry(key)
	} else {
		requeue, err := c.progress(ctx, ds, pods)
		errs = append(errs, err)
		if requeue > 0 && (p.requeueAfter == 0 || requeue < p.requeueAfter) {
			p.requeueAfter = requeue
		}
		errs = append(errs, c.act(ctx, ds, key, p, hash))
		// Pre-download never holds the rollout back: its errors are
		// logged and retried with the next sync.
		if err := c.preDownload(ctx, ds, update, hash, pods); err != nil {
			log.Info("Image pre-download failed", "err", err.Error())
		}
	}
	if err := c.writeStatus(ctx, ds, p); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if p.blocked != "" {
		log.V(2).Info("Rolling update held", "why", p.blocked)
	}
	return p.requeueAfter, nil
}

// owned lists the objects of indexer ds controls.
func (c *Controller) owned(indexer cache.Indexer, ds *v1beta1.DaemonSet) ([]any, error) {
	return indexer.ByIndex(byOwner, string(ds.UID))
}

// progress moves pods along (podops.Ops.Progress): in-place updates to
// InPlaceUpdateReady True, PreparingNormal pods whose preNormal hook is
// all hooked to Normal.
func (c *Controller) progress(ctx context.Context, ds *v1beta1.DaemonSet, pods []*corev1.Pod) (time.Duration, error) {
	var requeue time.Duration
	var errs []error
	for _, pod := range pods {
		after, err := c.ops.Progress(ctx, ds, ds.Spec.Lifecycle, pod, hashOf(pod))
		errs = append(errs, err)
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	return requeue, errors.Join(errs...)
}

// act carries out the plan: deletes (through the preDelete hook), creates
// (at most burstReplicas), then in-place updates.
func (c *Controller) act(ctx context.Context, ds *v1beta1.DaemonSet, key string, p *plan, hash string) error {
	burst := 250
	if b := ds.Spec.BurstReplicas; b != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(b, int(p.status.DesiredNumberScheduled), true); err == nil && n > 0 {
			burst = n
		}
	}
	var errs []error
	for _, d := range p.deletes[:min(len(p.deletes), burst)] {
		if d.pod.Status.Phase == corev1.PodFailed {
			c.failed(key, placement.TargetNode(d.pod))
		}
		errs = append(errs, c.retire(ctx, ds, key, d))
	}
	for _, node := range p.create[:min(len(p.create), burst)] {
		errs = append(errs, c.createPod(ctx, ds, key, node, hash))
	}
	for _, pod := range p.updates {
		errs = append(errs, c.updateInPlace(ctx, ds, key, pod, hash))
	}
	return errors.Join(errs...)
}

// backoffUntil returns, by node, until when the nodes of DaemonSet key
// whose pod failed get no new one.
func (c *Controller) backoffUntil(key string) map[string]time.Time {
	c.backoffMu.Lock()
	defer c.backoffMu.Unlock()
	out := map[string]time.Time{}
	for node, b := range c.backoff[key] {
		out[node] = b.until
	}
	return out
}

// failed records a failed pod on node: the node's next pod waits twice as
// long as after the last failure (from 1 s to 15 min), or 1 s again when
// the last failure is long past.
func (c *Controller) failed(key, node string) {
	c.backoffMu.Lock()
	defer c.backoffMu.Unlock()
	if c.backoff == nil {
		c.backoff = map[string]map[string]failedBackoff{}
	}
	if c.backoff[key] == nil {
		c.backoff[key] = map[string]failedBackoff{}
	}
	now := c.o.Clock.Now()
	b := c.backoff[key][node]
	delay := backoffInitial
	if b.delay > 0 && now.Sub(b.until) < 2*backoffMax {
		delay = min(2*b.delay, backoffMax)
	}
	c.backoff[key][node] = failedBackoff{until: now.Add(delay), delay: delay}
}

// createPod creates ds's pod of revision hash for node.
func (c *Controller) createPod(ctx context.Context, ds *v1beta1.DaemonSet, key, node, hash string) error {
	tmpl := ds.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	// The name is chosen here, not by generateName, so the expectation is
	// in place before the informer can show the pod.
	pod.Name, pod.Namespace, pod.GenerateName = ds.Name+"-"+utilrand.String(5), ds.Namespace, ""
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[wellknown.LabelControllerRevisionHash] = hash
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ds, kind)}
	pod.Spec.Tolerations = daemonTolerations(&pod.Spec)
	placement.PinToNode(&pod.Spec, node)
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Type == v1beta1.InplaceRollingUpdateType {
		gate := corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}
		if !slices.Contains(pod.Spec.ReadinessGates, gate) {
			pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, gate)
		}
	}
	state := wellknown.LifecycleStateNormal
	if ds.Spec.Lifecycle != nil && ds.Spec.Lifecycle.PreNormal != nil {
		state = lifecycle.Initial()
	}
	lifecycle.SetState(pod, state, c.o.Clock.Now())
	c.Expect.Expect(key, expectations.Create, pod.Name)
	if _, err := c.o.Client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		if !workload.WriteMayHaveHappened(err) {
			c.Expect.Observe(key, expectations.Create, pod.Name)
		}
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		c.o.Recorder.Eventf(ds, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "create pod for node %s: %v", node, err)
		return fmt.Errorf("create pod of DaemonSet %s for node %s: %w", key, node, err)
	}
	c.o.Recorder.Eventf(ds, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created pod %s on node %s (revision %s)", pod.Name, node, hash)
	return nil
}

// retire deletes a pod, unless the preDelete hook holds it
// (podops.Ops.Retire).
func (c *Controller) retire(ctx context.Context, ds *v1beta1.DaemonSet, key string, d deletion) error {
	_, err := c.ops.Retire(ctx, ds, key, ds.Spec.Lifecycle, d.pod, d.why)
	return err
}

// updateInPlace moves an old pod to revision hash in place, or recreates
// it when more than images and metadata changed.
func (c *Controller) updateInPlace(ctx context.Context, ds *v1beta1.DaemonSet, key string, pod *corev1.Pod, hash string) error {
	var spec *inplace.Spec
	obj, exists, err := c.revs.GetByKey(ds.Namespace + "/" + ds.Name + "-" + hashOf(pod))
	switch {
	case !slices.Contains(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}):
		// Created before InPlaceIfPossible: without the gate it would stay
		// Ready while its containers restart.
		err = fmt.Errorf("the pod has no %s readiness gate", wellknown.ReadinessGateInPlaceUpdateReady)
	case err != nil:
	case !exists:
		err = fmt.Errorf("ControllerRevision %s-%s not found", ds.Name, hashOf(pod))
	default:
		var from *corev1.PodTemplateSpec
		if from, err = revision.Template(obj.(*appsv1.ControllerRevision)); err == nil {
			spec, err = inplace.Calculate(from, &ds.Spec.Template, ds.Name+"-"+hash)
		}
	}
	if err != nil {
		return c.retire(ctx, ds, key, deletion{pod, fmt.Sprintf("recreated at revision %s (not in place: %v)", hash, err)})
	}
	return c.ops.StartInPlace(ctx, ds, key, ds.Spec.Lifecycle, pod, spec, hash, 0, func(p *corev1.Pod) {
		p.Labels[wellknown.LabelControllerRevisionHash] = hash
	})
}

// preDownload warms the images of ds's update revision on the nodes of its
// old pods before they are updated (package predownload), and deletes its
// jobs once every pod runs the update revision.
func (c *Controller) preDownload(ctx context.Context, ds *v1beta1.DaemonSet, update *appsv1.ControllerRevision, hash string, pods []*corev1.Pod) error {
	i := slices.IndexFunc(pods, func(p *corev1.Pod) bool { return hashOf(p) != hash })
	if i < 0 {
		return c.preDownloads.DeleteAll(ctx, ds)
	}
	if predownload.Decided(update) || !features.Enabled(c.o.Features, features.PreDownloadImageForDaemonSetUpdate) ||
		ds.Spec.UpdateStrategy.Type == v1beta1.OnDeleteDaemonSetStrategyType {
		return nil
	}
	obj, exists, err := c.revs.GetByKey(ds.Namespace + "/" + ds.Name + "-" + hashOf(pods[i]))
	if err != nil || !exists {
		return err // the old revision is gone: nothing to compare
	}
	from, err := revision.Template(obj.(*appsv1.ControllerRevision))
	if err != nil {
		return err
	}
	settings := predownload.SettingsOf(ds.Annotations, nil)
	if settings.Off() || len(predownload.ChangedImages(from, &ds.Spec.Template)) == 0 {
		return c.preDownloads.Skip(ctx, update)
	}
	return c.preDownloads.Create(ctx, predownload.Request{
		Owner: ds, Kind: kind, Update: update, Hash: hash,
		From: from, To: &ds.Spec.Template, Selector: ds.Spec.Selector, Settings: settings,
	})
}

// writeStatus writes the plan's status if it changed.
func (c *Controller) writeStatus(ctx context.Context, ds *v1beta1.DaemonSet, p *plan) error {
	if apiequality.Semantic.DeepEqual(ds.Status, p.status) {
		return nil
	}
	next := ds.DeepCopy()
	next.Status = p.status
	_, err := c.o.Shoal.AppsV1beta1().DaemonSets(ds.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return workload.IgnoreStale(err, "write the status of DaemonSet %s/%s", ds.Namespace, ds.Name)
}
