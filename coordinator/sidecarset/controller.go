// Package sidecarset is the coordinator's SidecarSet controller (the kind
// at its storage version, apps.kruise.io/v1beta1). The pod webhook
// (webhook.SidecarSetInjector) injects sidecars when pods are created;
// this controller keeps the pods it injected up to date afterwards.
//
// For each SidecarSet it:
//   - records the set's revisions as ControllerRevisions in the
//     coordinator's namespace, labelled kruise.io/sidecarset-name (the
//     webhook injects an older one when injectionStrategy.revision asks),
//     keeping revisionHistoryLimit of them (10) besides those pods use;
//   - counts the pods injected with the set that it still selects:
//     status matchedPods, updatedPods (at the set's hash), readyPods
//     (ready, every sidecar on the container instance its last update
//     asked for) and updatedReadyPods, with latestRevision;
//   - unless updateStrategy.type is NotUpdate or paused is set, updates
//     pods in place when only sidecar images changed (the kubelet
//     restarts a container whose image changes), within
//     updateStrategy.selector, partition and maxUnavailable, in the
//     priority and scatter order. A pod whose sidecars changed in more
//     than images gets the condition SidecarSetUpgradable=False
//     (UpdateImmutableField) and keeps its sidecars;
//   - runs hot upgrades: the new image goes to the idle container of a
//     <name>-1/<name>-2 pair, which becomes the working one; once it is
//     consistent and ready, the old one goes back to the empty image (the
//     "flip"), so the sidecar's service never stops.
//
// Pod writes go through the apiserver, so a PodUnavailableBudget on the
// pods holds updates back as it does for any in-place update.
package sidecarset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Client writes pods and ControllerRevisions.
	Client kubernetes.Interface
	// Shoal writes SidecarSet status.
	Shoal shoalclient.Interface
	// SidecarSets (v1beta1), Pods, Namespaces and Revisions (apps/v1
	// ControllerRevisions) are shared informers.
	SidecarSets, Pods, Namespaces, Revisions cache.SharedIndexInformer
	// Namespace is where the SidecarSets' revisions live: the
	// coordinator's own.
	Namespace string
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on SidecarSets.
	Recorder events.EventRecorder
	// Clock stamps updates; nil is the real one.
	Clock clock.Clock
}

// Controller reconciles SidecarSets.
type Controller struct {
	o     Options
	queue syncloop.Queue
	regs  []cache.ResourceEventHandlerRegistration
	sets  cache.Indexer
	pods  cache.Indexer
	nss   cache.Indexer
	revs  cache.Indexer

	// pending holds, per SidecarSet, the pods this controller wrote and
	// the resourceVersion each write returned, until the informer shows
	// them: the set is not acted on from an older copy meanwhile.
	mu      sync.Mutex
	pending map[string]map[types.UID]pendingWrite
}

// pendingWrite is a pod write not yet seen in the informer.
type pendingWrite struct {
	resourceVersion string
	at              time.Time
}

// pendingTimeout is how long an unseen write holds a set back.
const pendingTimeout = 30 * time.Second

// Index names.
const (
	// byInjectedSet indexes pods by the SidecarSets they were injected
	// with (the keys of their hash annotation).
	byInjectedSet = "sidecarset-injected"
	// bySetName indexes ControllerRevisions by their SidecarSet label.
	bySetName = "sidecarset-name"
)

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o: o, queue: syncloop.NewQueue("sidecarset", nil),
		sets: o.SidecarSets.GetIndexer(), pods: o.Pods.GetIndexer(), nss: o.Namespaces.GetIndexer(), revs: o.Revisions.GetIndexer(),
		pending: map[string]map[types.UID]pendingWrite{},
	}
	if err := o.Pods.AddIndexers(cache.Indexers{byInjectedSet: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		return injectedSets(pod), nil
	}}); err != nil {
		return nil, fmt.Errorf("index pods by SidecarSet: %w", err)
	}
	if err := o.Revisions.AddIndexers(cache.Indexers{bySetName: func(obj any) ([]string, error) {
		r, ok := obj.(*appsv1.ControllerRevision)
		if !ok || r.Namespace != o.Namespace {
			return nil, nil
		}
		if name := r.Labels[wellknown.LabelSidecarSetName]; name != "" {
			return []string{name}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index revisions by SidecarSet: %w", err)
	}
	enqueueSet := func(obj any) { syncloop.Enqueue(c.queue, obj) }
	podEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		for _, name := range injectedSets(pod) {
			c.queue.Add(name)
		}
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.SidecarSets, cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueSet, UpdateFunc: func(_, obj any) { enqueueSet(obj) }, DeleteFunc: enqueueSet,
		}, "SidecarSets"},
		{o.Pods, cache.ResourceEventHandlerFuncs{
			AddFunc: podEvent, UpdateFunc: func(_, obj any) { podEvent(obj) }, DeleteFunc: podEvent,
		}, "pods for SidecarSets"},
		{o.Namespaces, cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, obj any) {
				a, b := old.(*corev1.Namespace), obj.(*corev1.Namespace)
				if a != nil && b != nil && !apiequality.Semantic.DeepEqual(a.Labels, b.Labels) {
					c.Resync()
				}
			},
		}, "namespaces for SidecarSets"},
	} {
		reg, err := h.inf.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", h.what, err)
		}
		c.regs = append(c.regs, reg)
	}
	return c, nil
}

// injectedSets returns the names of the SidecarSets pod was injected with.
func injectedSets(pod *corev1.Pod) []string {
	specs := sidecarcontrol.PodUpgradeSpecs(pod, wellknown.AnnotationSidecarSetHash)
	names := make([]string, 0, len(specs))
	for name := range specs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// HasSynced reports whether the informers' initial lists went through the
// controller's handlers, and the revisions are listed.
func (c *Controller) HasSynced() bool {
	for _, r := range c.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return c.o.Revisions.HasSynced()
}

// Resync queues every SidecarSet; the coordinator calls it when this
// replica starts leading.
func (c *Controller) Resync() {
	for _, obj := range c.sets.List() {
		syncloop.Enqueue(c.queue, obj)
	}
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.queue, 4, "SidecarSet", c.sync)
	return nil
}

// sync reconciles one SidecarSet.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.sets.GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		c.mu.Lock()
		delete(c.pending, key)
		c.mu.Unlock()
		return 0, nil
	}
	set := obj.(*v1beta1.SidecarSet)
	if set.DeletionTimestamp != nil {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("sidecarset", key)
	ctx = klog.NewContext(ctx, log)

	hash, hashWithoutImage, err := sidecarcontrol.Hashes(set)
	if err != nil {
		return 0, fmt.Errorf("hash SidecarSet %s: %w", key, err)
	}
	pods, err := c.matchedPods(set)
	if err != nil {
		return 0, err
	}
	latest, err := c.syncRevisions(ctx, set, pods)
	if err != nil {
		return 0, err
	}
	if err := c.syncSetHashes(ctx, set, hash, hashWithoutImage); err != nil {
		return 0, err
	}
	t := &target{set: set, hash: hash, hashWithoutImage: hashWithoutImage, revision: latest.Name}
	states := make([]podState, 0, len(pods))
	for _, p := range pods {
		states = append(states, classify(t, p))
	}
	if err := c.writeStatus(ctx, set, computeStatus(t, states)); err != nil {
		return 0, err
	}
	if wait := c.waitForInformer(key, pods); wait > 0 {
		log.V(2).Info("Waiting for the informer to show earlier pod updates")
		return wait, nil
	}
	if set.Spec.UpdateStrategy.Type == v1beta1.NotUpdateSidecarSetStrategyType || set.Spec.UpdateStrategy.Paused {
		return 0, nil
	}
	if flipped, err := c.flip(ctx, set, pods); err != nil || flipped {
		return 0, err
	}
	held, err := c.update(ctx, t, states)
	if held && err == nil {
		// A PodUnavailableBudget refused some updates: try again soon,
		// without the error backoff (budgets free up as pods recover).
		return budgetRetry, nil
	}
	return 0, err
}

// budgetRetry is how soon pod updates a PodUnavailableBudget refused are
// tried again.
const budgetRetry = 2 * time.Second

// matchedPods returns the active pods injected with set that it still
// selects.
func (c *Controller) matchedPods(set *v1beta1.SidecarSet) ([]*corev1.Pod, error) {
	objs, err := c.pods.ByIndex(byInjectedSet, set.Name)
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, o := range objs {
		pod := o.(*corev1.Pod)
		if !active(pod) || !injected(set, pod) {
			continue
		}
		nsObj, ok, err := c.nss.GetByKey(pod.Namespace)
		if err != nil || !ok {
			continue
		}
		match, err := sidecarcontrol.Matches(set, pod, nsObj.(*corev1.Namespace))
		if err != nil {
			return nil, fmt.Errorf("match pods of SidecarSet %s: %w", set.Name, err)
		}
		if match {
			pods = append(pods, pod)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return pods, nil
}

// syncRevisions makes the set's current spec the newest of its
// ControllerRevisions (an equal older one is renumbered, as a rollback),
// copies spec.customVersion to its label, and deletes the oldest beyond
// revisionHistoryLimit that neither pods nor injectionStrategy.revision
// use. It returns the newest.
func (c *Controller) syncRevisions(ctx context.Context, set *v1beta1.SidecarSet, pods []*corev1.Pod) (*appsv1.ControllerRevision, error) {
	objs, err := c.revs.ByIndex(bySetName, set.Name)
	if err != nil {
		return nil, err
	}
	revs := make([]*appsv1.ControllerRevision, 0, len(objs))
	for _, o := range objs {
		revs = append(revs, o.(*appsv1.ControllerRevision))
	}
	slices.SortFunc(revs, func(a, b *appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	next := int64(1)
	if len(revs) > 0 {
		next = revs[len(revs)-1].Revision + 1
	}
	want, err := sidecarcontrol.NewRevision(set, c.o.Namespace, next, set.Status.CollisionCount)
	if err != nil {
		return nil, fmt.Errorf("build revision of SidecarSet %s: %w", set.Name, err)
	}
	revisions := c.o.Client.AppsV1().ControllerRevisions(c.o.Namespace)
	var latest *appsv1.ControllerRevision
	for i := len(revs) - 1; i >= 0; i-- {
		if apiequality.Semantic.DeepEqual(revs[i].Data.Raw, want.Data.Raw) {
			latest = revs[i]
			break
		}
	}
	switch {
	case latest == nil:
		latest, err = revisions.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			latest, err = revisions.Get(ctx, want.Name, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("create revision %s of SidecarSet %s: %w", want.Name, set.Name, err)
		}
		revs = append(revs, latest)
		c.o.Recorder.Eventf(set, nil, corev1.EventTypeNormal, "RevisionCreated", "Sync", "Recorded revision %s", latest.Name)
	case latest != revs[len(revs)-1]:
		// Back to an older spec: its revision becomes the newest.
		name := latest.Name
		patch := fmt.Appendf(nil, `{"revision":%d}`, next)
		if latest, err = revisions.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("renumber revision %s of SidecarSet %s: %w", name, set.Name, err)
		}
	}
	if v := set.Spec.CustomVersion; v != "" && latest.Labels[v1beta1.SidecarSetCustomVersionLabel] != v {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{v1beta1.SidecarSetCustomVersionLabel: v}}})
		if err != nil {
			return nil, err
		}
		name := latest.Name
		if latest, err = revisions.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("label revision %s of SidecarSet %s with its custom version: %w", name, set.Name, err)
		}
	}
	return latest, c.truncateHistory(ctx, set, pods, revs, latest)
}

// truncateHistory deletes the oldest revisions beyond the set's history
// limit that no pod and no injectionStrategy.revision uses.
func (c *Controller) truncateHistory(ctx context.Context, set *v1beta1.SidecarSet, pods []*corev1.Pod, revs []*appsv1.ControllerRevision, latest *appsv1.ControllerRevision) error {
	limit := max(1, int(ptr.Deref(set.Spec.RevisionHistoryLimit, 10)))
	extra := len(revs) - limit
	if extra <= 0 {
		return nil
	}
	inUse := map[string]bool{latest.Name: true}
	for _, p := range pods {
		if r := sidecarcontrol.PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHash)[set.Name].ControllerRevision; r != "" {
			inUse[r] = true
		}
	}
	if r := set.Spec.InjectionStrategy.Revision; r != nil {
		if r.RevisionName != nil {
			inUse[*r.RevisionName] = true
		}
		if r.CustomVersion != nil {
			for i := len(revs) - 1; i >= 0; i-- {
				if revs[i].Labels[v1beta1.SidecarSetCustomVersionLabel] == *r.CustomVersion {
					inUse[revs[i].Name] = true
					break
				}
			}
		}
	}
	var errs []error
	for _, r := range revs {
		if extra == 0 {
			break
		}
		if inUse[r.Name] {
			continue
		}
		err := c.o.Client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete revision %s of SidecarSet %s: %w", r.Name, set.Name, err))
			continue
		}
		extra--
	}
	return errors.Join(errs...)
}

// syncSetHashes writes the set's two hashes on the set itself, where
// OpenKruise's tools read them.
func (c *Controller) syncSetHashes(ctx context.Context, set *v1beta1.SidecarSet, hash, hashWithoutImage string) error {
	if set.Annotations[wellknown.AnnotationSidecarSetHash] == hash && set.Annotations[wellknown.AnnotationSidecarSetHashWithoutImage] == hashWithoutImage {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		wellknown.AnnotationSidecarSetHash: hash, wellknown.AnnotationSidecarSetHashWithoutImage: hashWithoutImage,
	}}})
	if err != nil {
		return err
	}
	_, err = c.o.Shoal.AppsV1beta1().SidecarSets().Patch(ctx, set.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotate SidecarSet %s with its hashes: %w", set.Name, err)
	}
	return nil
}

// writeStatus writes status when it changed.
func (c *Controller) writeStatus(ctx context.Context, set *v1beta1.SidecarSet, st v1beta1.SidecarSetStatus) error {
	if apiequality.Semantic.DeepEqual(set.Status, st) {
		return nil
	}
	s := set.DeepCopy()
	s.Status = st
	_, err := c.o.Shoal.AppsV1beta1().SidecarSets().UpdateStatus(ctx, s, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("update status of SidecarSet %s: %w", set.Name, err)
	}
	return nil
}

// waitForInformer returns how long to wait before acting on set when the
// informer does not show a pod write this controller made yet.
func (c *Controller) waitForInformer(key string, pods []*corev1.Pod) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	writes := c.pending[key]
	if len(writes) == 0 {
		return 0
	}
	seen := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		seen[p.UID] = p
	}
	now := c.o.Clock.Now()
	for uid, w := range writes {
		p, ok := seen[uid]
		if !ok || !olderThan(p.ResourceVersion, w.resourceVersion) || now.Sub(w.at) > pendingTimeout {
			delete(writes, uid)
		}
	}
	if len(writes) == 0 {
		delete(c.pending, key)
		return 0
	}
	return 500 * time.Millisecond
}

// olderThan reports whether resourceVersion a is before b. Resource
// versions are etcd revisions in practice; any that do not parse compare
// by equality only.
func olderThan(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return a != b
	}
	return x < y
}

// expectWrite records a pod write of set the informer is to show.
func (c *Controller) expectWrite(key string, pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[key] == nil {
		c.pending[key] = map[types.UID]pendingWrite{}
	}
	c.pending[key][pod.UID] = pendingWrite{resourceVersion: pod.ResourceVersion, at: c.o.Clock.Now()}
}

// flip finishes the hot upgrades that are done: the old container of
// each pair goes back to the empty image. It reports whether it wrote
// any pod; the update waits for the next sync then.
func (c *Controller) flip(ctx context.Context, set *v1beta1.SidecarSet, pods []*corev1.Pod) (bool, error) {
	now := metav1.NewTime(c.o.Clock.Now())
	wrote := false
	var errs []error
	for _, pod := range pods {
		if !needsFlip(set, pod) {
			continue
		}
		p, reset, err := flipped(set, pod, now)
		if err != nil || p == nil {
			errs = append(errs, err)
			continue
		}
		out, err := c.o.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.o.Recorder.Eventf(pod, set, corev1.EventTypeWarning, "ResetContainerFailed", "HotUpgrade",
					"Could not reset %s to the empty image for SidecarSet %s: %v", strings.Join(reset, ", "), set.Name, err)
				errs = append(errs, fmt.Errorf("reset hot-upgrade containers of pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
			continue
		}
		wrote = true
		c.expectWrite(set.Name, out)
		c.o.Recorder.Eventf(pod, set, corev1.EventTypeNormal, "ResetContainerSucceed", "HotUpgrade",
			"Reset %s to the empty image: SidecarSet %s's hot upgrade is done", strings.Join(reset, ", "), set.Name)
	}
	return wrote, errors.Join(errs...)
}

// update updates the pods pick chooses, and marks those that cannot be
// updated in place. held reports that the apiserver refused some updates
// as Forbidden: a PodUnavailableBudget's webhook holding them back.
func (c *Controller) update(ctx context.Context, t *target, states []podState) (held bool, _ error) {
	upgrade, notUpgradable, err := pick(t, states)
	if err != nil {
		c.o.Recorder.Eventf(t.set, nil, corev1.EventTypeWarning, "InvalidSpec", "Update", "%v", err)
		return false, nil
	}
	now := metav1.NewTime(c.o.Clock.Now())
	var errs []error
	for _, pod := range notUpgradable {
		errs = append(errs, c.setUpgradable(ctx, pod, t.set.Name, false, now))
	}
	if len(notUpgradable) > 0 {
		c.o.Recorder.Eventf(t.set, nil, corev1.EventTypeNormal, "NotUpgradablePods", "Update",
			"%d pod(s) need more than an image change to reach this SidecarSet (%s); they keep their sidecars until re-created",
			len(notUpgradable), describe(notUpgradable))
	}
	var done []*corev1.Pod
	for _, pod := range upgrade {
		p, err := upgraded(t, pod, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out, err := c.o.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		switch {
		case apierrors.IsForbidden(err):
			held = true
			klog.FromContext(ctx).V(2).Info("Sidecar update refused", "pod", klog.KObj(pod), "reason", err.Error())
			continue
		case err != nil:
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("update sidecars of pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
			continue
		}
		c.expectWrite(t.set.Name, out)
		done = append(done, out)
		errs = append(errs, c.setUpgradable(ctx, out, t.set.Name, true, now))
	}
	if len(done) > 0 {
		c.o.Recorder.Eventf(t.set, nil, corev1.EventTypeNormal, "UpdatedPods", "Update",
			"Updated the sidecars of %d pod(s) to revision %s: %s", len(done), t.revision, describe(done))
	}
	return held, errors.Join(errs...)
}

// setUpgradable sets setName's entry of the pod's SidecarSetUpgradable
// condition.
func (c *Controller) setUpgradable(ctx context.Context, pod *corev1.Pod, setName string, ok bool, now metav1.Time) error {
	cond, changed := upgradableCondition(pod, setName, ok, now)
	if !changed {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set condition %s of pod %s/%s: %w", wellknown.ConditionSidecarSetUpgradable, pod.Namespace, pod.Name, err)
	}
	return nil
}

// Revisions returns the ControllerRevisions of the SidecarSet named
// setName from the informer: the pod webhook injects one of them when a
// set's injectionStrategy.revision asks (sidecarcontrol.RevisionGetter).
func (c *Controller) Revisions(setName string) ([]*appsv1.ControllerRevision, error) {
	objs, err := c.revs.ByIndex(bySetName, setName)
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.ControllerRevision, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*appsv1.ControllerRevision))
	}
	return out, nil
}
