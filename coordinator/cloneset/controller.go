// Package cloneset is the coordinator's CloneSet controller (the kind at
// its storage version, apps.kruise.io/v1beta1): it keeps spec.replicas
// pods, each built from the revision of the template it was created at,
// rolls them to the newest revision within partition and maxUnavailable,
// by recreating them or in place, and reports the counts in status.
//
// What it does: scale up and down with expectations (a stale cache never
// creates, deletes or updates twice) and OpenKruise's scale-in order
// (unscheduled, pending, not ready, lower pod-deletion-cost, newer first;
// old revisions first while more than partition are left);
// scaleStrategy.podsToDelete and the specified-delete label;
// scaleStrategy.maxUnavailable on scale-up; ControllerRevisions and
// revisionHistoryLimit; updates with partition (integer or percentage,
// OpenKruise's rounding), maxUnavailable, maxSurge and paused, by
// podUpdatePolicy: ReCreate, InPlaceIfPossible (in place when only images
// and metadata change, else recreate) or InPlaceOnly (in place, or a
// FailedUpdate condition naming the field that prevents it), with
// inPlaceUpdateStrategy.gracePeriodSeconds and container-priority batches
// (the shared engine in coordinator/workload/inplace), in the order of
// priorityStrategy and scatterStrategy (coordinator/workload/updatesort);
// new pods at the current revision while partition asks for old ones;
// status with every count, revisions, observedGeneration and
// labelSelector (the scale subresource); the lifecycle hooks preNormal,
// preDelete and inPlaceUpdate (PreparingNormal, PreparingDelete,
// PreparingUpdate, Updating, Updated), with markPodNotReady;
// volumeClaimTemplates (pvc.go: PVCs per instance ID, deleted with the
// pods the CloneSet deletes, reused by the replacement of a vanished pod
// with scaleStrategy.enablePVCReuse); the scale-in rank of topology spread
// and same-node crowding (coordinator/workload/spreadrank); image
// pre-download (predownload.go); and OpenKruise's gates CloneSetShortHash,
// CloneSetPartitionRollback and PreparingUpdateAsUpdate (package
// features).
package cloneset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	// Shoal writes CloneSet status.
	Shoal shoalclient.Interface
	// CloneSets, Pods and Revisions are shared informers (CloneSets at
	// v1beta1, ControllerRevisions of apps/v1).
	CloneSets, Pods, Revisions cache.SharedIndexInformer
	// Jobs is the shared ImagePullJob informer (v1alpha1), to find the
	// pre-download jobs a CloneSet owns; nil leaves finished rollouts'
	// jobs to their TTL.
	Jobs cache.SharedIndexInformer
	// Claims is the shared PersistentVolumeClaim informer, to find the
	// PVCs of volumeClaimTemplates a CloneSet owns; nil creates PVCs but
	// never reuses or cleans up those of vanished pods.
	Claims cache.SharedIndexInformer
	// Nodes is the shared Node informer, for the node labels topology
	// spread constraints name when a scale-in ranks pods; nil ranks by
	// node name only.
	Nodes cache.SharedIndexInformer
	// Features are the coordinator's feature gates (package features);
	// nil is their defaults.
	Features featuregate.FeatureGate
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on CloneSets.
	Recorder events.EventRecorder
	// Clock times availability (minReadySeconds); nil is the real one.
	Clock clock.Clock
}

// Controller reconciles CloneSets.
type Controller struct {
	workload.Loop
	o Options
	// ops deletes, updates in place and moves along the pods.
	ops  *podops.Ops
	pods cache.Indexer
	revs cache.Indexer
	// preDownloads creates and deletes the pre-download ImagePullJobs.
	preDownloads *predownload.Manager
	claims       cache.Indexer // nil without Options.Claims
	// statusWritten holds when each CloneSet's status was last written
	// (namespace/name -> time.Time).
	statusWritten sync.Map
}

// maxCreatesPerSync bounds the pods one sync creates (a burst bound; the
// rest come with the next sync).
const maxCreatesPerSync = 50

// byOwner indexes pods and revisions by their controller's UID.
const byOwner = "cloneset-owner"

// owner finds the pods, revisions, PVCs and pre-download jobs of
// CloneSets.
var owner = workload.Owner{Kind: "CloneSet", Group: v1beta1.SchemeGroupVersion.Group}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	expect := expectations.New(o.Clock, 0)
	c := &Controller{
		Loop: workload.Loop{
			Queue: syncloop.NewQueue("cloneset", nil), Expect: expect,
			Owner: owner, Workloads: o.CloneSets.GetIndexer(),
		},
		o:    o,
		pods: o.Pods.GetIndexer(), revs: o.Revisions.GetIndexer(),
		preDownloads: &predownload.Manager{Client: o.Client, Shoal: o.Shoal, Recorder: o.Recorder, Index: byOwner},
	}
	c.ops = &podops.Ops{
		Client: o.Client, Recorder: o.Recorder, Expect: expect, Clock: o.Clock, Kind: "CloneSet",
		Update:      &inplace.Updater{Client: o.Client, Clock: o.Clock, Restart: inplace.RestartWithCRR(o.Shoal)},
		AfterDelete: c.deletePodClaims,
	}
	informers := []cache.SharedIndexInformer{o.Pods, o.Revisions}
	if o.Jobs != nil {
		informers = append(informers, o.Jobs)
		c.preDownloads.Jobs = o.Jobs.GetIndexer()
	}
	if o.Claims != nil {
		informers = append(informers, o.Claims)
		c.claims = o.Claims.GetIndexer()
	}
	for _, inf := range informers {
		if err := inf.AddIndexers(owner.Indexers(byOwner)); err != nil {
			return nil, fmt.Errorf("index by CloneSet owner: %w", err)
		}
	}
	if err := c.Watch(o.CloneSets, c.WorkloadHandler(), "CloneSets"); err != nil {
		return nil, err
	}
	if err := c.Watch(o.Pods, c.PodHandler(), "pods for CloneSets"); err != nil {
		return nil, err
	}
	return c, nil
}

// HasSynced reports whether the informers' initial lists went through the
// controller's handlers, and the PVCs are listed.
func (c *Controller) HasSynced() bool {
	return (c.o.Claims == nil || c.o.Claims.HasSynced()) && c.Loop.HasSynced()
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, workload.Workers, "CloneSet", c.sync)
	return nil
}

// sync reconciles one CloneSet.
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
		c.statusWritten.Delete(key)
		return 0, nil
	}
	cs := obj.(*v1beta1.CloneSet)
	if cs.DeletionTimestamp != nil {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("cloneset", key)
	ctx = klog.NewContext(ctx, log)

	// Expectations first, pods second: a pod whose creation the informer
	// shows between the two would otherwise be both observed and missing
	// from the list, and be created again (a fifth pod of 3 replicas and
	// a surge of 1, seen in CI).
	satisfied, waiting := c.Expect.Satisfied(key)
	pods, err := c.ownedPods(cs)
	if err != nil {
		return 0, err
	}
	updateRev, currentRev, err := c.syncRevisions(ctx, cs, pods)
	if err != nil {
		return 0, err
	}
	p := newPlan(cs, pods, updateRev.Name, currentRev, c.o.Clock.Now(), c.gates(), c.nodeLabels)
	var actErr error
	if !satisfied {
		log.V(2).Info("Waiting for the informer to show earlier changes", "pending", waiting)
		p.requeueAfter = c.Expect.NextExpiry(key)
	} else {
		// Pods already on their way (lifecycle states, in-place updates)
		// move along; then the plan's new decisions.
		var requeue time.Duration
		requeue, actErr = c.progress(ctx, cs, p)
		if requeue > 0 && (p.requeueAfter == 0 || requeue < p.requeueAfter) {
			p.requeueAfter = requeue
		}
		if actErr == nil {
			actErr = c.act(ctx, cs, p, updateRev, currentRev)
		}
		// Pre-download never holds the rollout back: its errors are
		// logged and retried with the next sync.
		if err := c.preDownload(ctx, cs, updateRev, currentRev, p.updatedReady); err != nil {
			log.Info("Image pre-download failed", "err", err.Error())
		}
		if err := c.trimPodsToDelete(ctx, cs); err != nil {
			log.Info("Trimming scaleStrategy.podsToDelete failed", "err", err.Error())
		}
	}
	if err := c.writeStatus(ctx, cs, p, actErr); err != nil {
		return 0, errors.Join(actErr, err)
	}
	if actErr != nil {
		return 0, actErr
	}
	return p.requeueAfter, nil
}

// trimPodsToDelete drops from spec.scaleStrategy.podsToDelete the names of
// pods that no longer exist (their deletion is done), as OpenKruise does,
// so the list does not grow for ever. A conflict waits for the next sync.
func (c *Controller) trimPodsToDelete(ctx context.Context, cs *v1beta1.CloneSet) error {
	if len(cs.Spec.ScaleStrategy.PodsToDelete) == 0 {
		return nil
	}
	all, err := c.ownedPodObjects(cs)
	if err != nil {
		return err
	}
	keep, changed := stillToDelete(cs.Spec.ScaleStrategy.PodsToDelete, all)
	if !changed {
		return nil
	}
	next := cs.DeepCopy()
	next.Spec.ScaleStrategy.PodsToDelete = keep
	_, err = c.o.Shoal.AppsV1beta1().CloneSets(cs.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	return workload.IgnoreStale(err, "trim spec.scaleStrategy.podsToDelete of CloneSet %s/%s", cs.Namespace, cs.Name)
}

// stillToDelete keeps the names of podsToDelete that are pods of the
// CloneSet still, and says whether any went.
func stillToDelete(podsToDelete []string, pods []*corev1.Pod) ([]string, bool) {
	exists := map[string]bool{}
	for _, p := range pods {
		exists[p.Name] = true
	}
	var keep []string
	for _, n := range podsToDelete {
		if exists[n] {
			keep = append(keep, n)
		}
	}
	return keep, len(keep) != len(podsToDelete)
}

// ownedPodObjects lists every pod object cs controls (by owner UID),
// finished ones too.
func (c *Controller) ownedPodObjects(cs *v1beta1.CloneSet) ([]*corev1.Pod, error) {
	objs, err := c.pods.ByIndex(byOwner, string(cs.UID))
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// ownedPods lists the pods cs controls (by owner UID) that have not
// finished, oldest first.
func (c *Controller) ownedPods(cs *v1beta1.CloneSet) ([]*corev1.Pod, error) {
	objs, err := c.ownedPodObjects(cs)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, p := range objs {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	return pods, nil
}

// syncRevisions makes sure the ControllerRevision of cs's template exists,
// trims history to revisionHistoryLimit (never a revision a pod uses),
// and returns the update revision and the current revision's name.
func (c *Controller) syncRevisions(ctx context.Context, cs *v1beta1.CloneSet, pods []*corev1.Pod) (*appsv1.ControllerRevision, string, error) {
	objs, err := c.revs.ByIndex(byOwner, string(cs.UID))
	if err != nil {
		return nil, "", err
	}
	revs := make([]*appsv1.ControllerRevision, 0, len(objs))
	for _, o := range objs {
		revs = append(revs, o.(*appsv1.ControllerRevision))
	}
	current := cs.Status.CurrentRevision
	used := map[string]bool{}
	if current != "" {
		used[current] = true
	}
	for _, p := range pods {
		used[revisionOf(p, cs.Name)] = true
	}
	update, err := revision.Sync(ctx, c.o.Client, revision.Owner{
		Object: cs, Kind: v1beta1.SchemeGroupVersion.WithKind("CloneSet"),
		Template: &cs.Spec.Template, CollisionCount: cs.Status.CollisionCount,
		Labels: cs.Spec.Selector.MatchLabels, HistoryLimit: int(ptr.Deref(cs.Spec.RevisionHistoryLimit, 10)),
	}, revs, used)
	if err != nil {
		return nil, "", err
	}
	if current == "" {
		current = update.Name
	}
	return update, current, nil
}

// revisionTemplate returns the pod template of revision name of cs.
func (c *Controller) revisionTemplate(cs *v1beta1.CloneSet, name string) (*corev1.PodTemplateSpec, error) {
	obj, exists, err := c.revs.GetByKey(cs.Namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("ControllerRevision %s/%s not found", cs.Namespace, name)
	}
	return revision.Template(obj.(*appsv1.ControllerRevision))
}

// act carries out the plan: specified deletes, then scale, else update
// (scaling and updating never happen in the same pass).
func (c *Controller) act(ctx context.Context, cs *v1beta1.CloneSet, p *plan, updateRev *appsv1.ControllerRevision, currentRev string) error {
	key := cs.Namespace + "/" + cs.Name
	var errs []error
	for _, pod := range p.leaving {
		if !slices.ContainsFunc(p.deletes, func(d deletion) bool { return d.pod == pod }) {
			errs = append(errs, c.retire(ctx, cs, key, deletion{pod, "its preDelete hook let go"}))
		}
	}
	if len(p.deletes) > 0 {
		for _, d := range p.deletes {
			errs = append(errs, c.retire(ctx, cs, key, d))
		}
		return errors.Join(errs...)
	}
	// A PVC that cannot be deleted is reported, and holds nothing back.
	reuse, waiting, err := c.syncUnusedClaims(ctx, cs, p)
	errs = append(errs, err)
	if waiting > 0 && p.createOld+p.createNew > 0 {
		// Pods that keep a PVC come back under the same name once the
		// old pod is gone; its delete event brings the CloneSet back.
		klog.FromContext(ctx).V(2).Info("Waiting for terminating pods before reusing their PVCs", "instances", waiting)
		skip := min(waiting, p.createNew)
		p.createNew -= skip
		p.createOld -= min(waiting-skip, p.createOld)
	}
	if p.createOld+p.createNew > 0 {
		tmpl := &cs.Spec.Template
		var old *corev1.PodTemplateSpec
		if p.createOld > 0 {
			var err error
			if old, err = c.revisionTemplate(cs, currentRev); err != nil {
				// The old revision is gone: new pods take the update one.
				klog.FromContext(ctx).Info("Creating pods at the update revision: the current one is unavailable", "err", err.Error())
				p.createNew, p.createOld = p.createNew+p.createOld, 0
			}
		}
		nextID := func() string {
			if len(reuse) == 0 {
				return ""
			}
			id := reuse[0]
			reuse = reuse[1:]
			return id
		}
		for range min(p.createOld, maxCreatesPerSync) {
			errs = append(errs, c.createPod(ctx, cs, key, old, currentRev, nextID()))
		}
		for range min(p.createNew, maxCreatesPerSync) {
			errs = append(errs, c.createPod(ctx, cs, key, tmpl, updateRev.Name, nextID()))
		}
		return errors.Join(errs...)
	}
	for _, u := range p.updates {
		errs = append(errs, c.updateInPlace(ctx, cs, key, u, p))
	}
	return errors.Join(errs...)
}

// createPod creates one pod of cs from tmpl at revision rev, with instance
// ID id (a new random one when empty) and its PVCs.
func (c *Controller) createPod(ctx context.Context, cs *v1beta1.CloneSet, key string, tmpl *corev1.PodTemplateSpec, rev, id string) error {
	reused := id != ""
	if !reused {
		id = utilrand.String(5)
	}
	if err := c.createClaims(ctx, cs, id); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Name, pod.Namespace, pod.GenerateName = cs.Name+"-"+id, cs.Namespace, ""
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	setRevisionLabels(pod, cs, rev, features.Enabled(c.o.Features, features.CloneSetShortHash))
	pod.Labels[wellknown.LabelCloneSetInstanceID] = id
	withClaims(pod, cs, id)
	lifecycle.SetState(pod, lifecycle.Initial(), c.o.Clock.Now())
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"))}
	for _, t := range []corev1.PodConditionType{wellknown.ReadinessGateKruisePodReady, wellknown.ReadinessGateInPlaceUpdateReady} {
		gate := corev1.PodReadinessGate{ConditionType: t}
		if !slices.Contains(pod.Spec.ReadinessGates, gate) {
			pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, gate)
		}
	}
	c.Expect.Expect(key, expectations.Create, pod.Name)
	_, err := c.o.Client.CoreV1().Pods(cs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !workload.WriteMayHaveHappened(err) {
			c.Expect.Observe(key, expectations.Create, pod.Name)
		}
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the CloneSet goes with its namespace
		}
		if apierrors.IsAlreadyExists(err) && reused {
			// A finished pod (an evicted one, say) still holds the name of
			// the instance whose PVCs were to be reused: a new instance.
			return c.createPod(ctx, cs, key, tmpl, rev, "")
		}
		c.o.Recorder.Eventf(cs, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "create pod %s: %v", pod.Name, err)
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	c.o.Recorder.Eventf(cs, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created pod %s (revision %s)", pod.Name, rev)
	return nil
}

// retire deletes a pod the plan let go, unless the preDelete lifecycle
// hook holds it: then the pod moves to PreparingDelete (and, with
// markPodNotReady, KruisePodReady False) and waits there until the hook's
// labels and finalizers are gone; its update event brings the CloneSet
// back.
func (c *Controller) retire(ctx context.Context, cs *v1beta1.CloneSet, key string, d deletion) error {
	_, err := c.ops.Retire(ctx, cs, key, cs.Spec.Lifecycle, d.pod, d.why)
	return err
}

// deletePodClaims deletes the PVCs of a pod the CloneSet deleted (they
// stay only for a pod that vanished some other way).
func (c *Controller) deletePodClaims(ctx context.Context, owner runtime.Object, p *corev1.Pod) error {
	cs := owner.(*v1beta1.CloneSet)
	claims, err := c.ownedClaims(cs)
	if err != nil {
		return err
	}
	return c.deleteClaims(ctx, cs, claims, p.Labels[wellknown.LabelCloneSetInstanceID], "its pod "+p.Name+" was deleted by the CloneSet")
}

// syncUnusedClaims handles the PVCs of pods that vanished without the
// CloneSet deleting them. With scaleStrategy.enablePVCReuse it returns
// the instance IDs no pod object carries any more, for the next pods, and
// how many more instances wait for their terminating pod to go (their
// replacement, named after the instance, waits too). Without it, it
// deletes the PVCs no pod object carries.
func (c *Controller) syncUnusedClaims(ctx context.Context, cs *v1beta1.CloneSet, p *plan) (reuse []string, waiting int, err error) {
	claims, err := c.ownedClaims(cs)
	if err != nil || len(claims) == 0 {
		return nil, 0, err
	}
	all, err := c.ownedPodObjects(cs)
	if err != nil {
		return nil, 0, err
	}
	free := unusedClaimIDs(claims, all)
	if !cs.Spec.ScaleStrategy.EnablePVCReuse {
		var errs []error
		for _, id := range free {
			errs = append(errs, c.deleteClaims(ctx, cs, claims, id, "its pod is gone and scaleStrategy.enablePVCReuse is false"))
		}
		return nil, 0, errors.Join(errs...)
	}
	// An instance whose pod is on its way out (terminating, or finished
	// and being deleted) comes back once the pod object is gone.
	var leaving []*corev1.Pod
	for _, pod := range all {
		if pod.DeletionTimestamp != nil {
			leaving = append(leaving, pod)
		}
	}
	return free, len(unusedClaimIDs(claims, p.active)) - len(unusedClaimIDs(claims, append(p.active, leaving...))), nil
}

// nodeLabels returns the labels of node name from the informer, nil when
// it is unknown.
func (c *Controller) nodeLabels(name string) map[string]string {
	if c.o.Nodes == nil {
		return nil
	}
	obj, exists, err := c.o.Nodes.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	if n, ok := obj.(*corev1.Node); ok {
		return n.Labels
	}
	return nil
}

// gates are the feature gates the plan reads.
func (c *Controller) gates() planGates {
	return planGates{
		preparingUpdateAsUpdate: features.Enabled(c.o.Features, features.PreparingUpdateAsUpdate),
		partitionRollback:       features.Enabled(c.o.Features, features.CloneSetPartitionRollback),
	}
}

// setRevisionLabels labels pod with revision rev of cs: controller-revision-hash
// "<cloneset>-<hash>" (only "<hash>" with short), and pod-template-hash
// "<hash>".
func setRevisionLabels(pod *corev1.Pod, cs *v1beta1.CloneSet, rev string, short bool) {
	hash := rev[len(cs.Name)+1:]
	pod.Labels[wellknown.LabelControllerRevisionHash] = rev
	if short {
		pod.Labels[wellknown.LabelControllerRevisionHash] = hash
	}
	pod.Labels[wellknown.LabelPodTemplateHash] = hash
}

// writeStatus writes the plan's counts and conditions if they changed.
// It sets p.requeueAfter sooner if the progress deadline comes first.
func (c *Controller) writeStatus(ctx context.Context, cs *v1beta1.CloneSet, p *plan, actErr error) error {
	st := p.status(cs)
	now := c.o.Clock.Now()
	setCondition(st, v1beta1.CloneSetConditionFailedScale, actErr != nil && p.scaling(), errMessage(actErr), now)
	setCondition(st, v1beta1.CloneSetConditionFailedUpdate, p.updateBlocked != "" || (actErr != nil && !p.scaling()),
		firstNonEmpty(p.updateBlocked, errMessage(actErr)), now)
	if d := setProgressing(cs, st, now); d > 0 && (p.requeueAfter == 0 || d < p.requeueAfter) {
		p.requeueAfter = d
	}
	if apiequality.Semantic.DeepEqual(&cs.Status, st) {
		return nil
	}
	key := cs.Namespace + "/" + cs.Name
	if wait := c.statusWait(key, &cs.Status, st, now); wait > 0 {
		// Only counts moved, and the last write was a moment ago: the
		// next one carries them (a rollout of many pods changes the
		// counts at every pod event).
		if p.requeueAfter == 0 || wait < p.requeueAfter {
			p.requeueAfter = wait
		}
		return nil
	}
	next := cs.DeepCopy()
	next.Status = *st
	_, err := c.o.Shoal.AppsV1beta1().CloneSets(cs.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // a newer copy comes through the informer
	}
	if err == nil {
		c.statusWritten.Store(key, now)
	}
	return err
}

// statusCountsInterval is the shortest time between two status writes of
// one CloneSet that change only counts.
const statusCountsInterval = time.Second

// statusWait is how long to hold a status write back: 0 unless only the
// counts changed and the last write of key was less than
// statusCountsInterval ago.
func (c *Controller) statusWait(key string, old, next *v1beta1.CloneSetStatus, now time.Time) time.Duration {
	if old.ObservedGeneration != next.ObservedGeneration || old.UpdateRevision != next.UpdateRevision ||
		old.CurrentRevision != next.CurrentRevision || old.LabelSelector != next.LabelSelector ||
		!apiequality.Semantic.DeepEqual(old.Conditions, next.Conditions) {
		return 0
	}
	last, ok := c.statusWritten.Load(key)
	if !ok {
		return 0
	}
	return max(last.(time.Time).Add(statusCountsInterval).Sub(now), 0)
}

func errMessage(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// setCondition sets (on) or removes (off) a condition of st.
func setCondition(st *v1beta1.CloneSetStatus, t v1beta1.CloneSetConditionType, on bool, message string, now time.Time) {
	if !on {
		removeCondition(st, t)
		return
	}
	for i, cond := range st.Conditions {
		if cond.Type != t {
			continue
		}
		if cond.Message != message {
			st.Conditions[i].Message = message
			st.Conditions[i].LastUpdateTime = metav1.NewTime(now)
		}
		return
	}
	st.Conditions = append(st.Conditions, v1beta1.CloneSetCondition{
		Type: t, Status: corev1.ConditionTrue, Message: message,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	})
}

// selectorString is the label selector as status.labelSelector shows it.
func selectorString(cs *v1beta1.CloneSet) string {
	sel, err := metav1.LabelSelectorAsSelector(cs.Spec.Selector)
	if err != nil {
		return ""
	}
	return sel.String()
}
