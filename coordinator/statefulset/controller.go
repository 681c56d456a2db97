// Package statefulset is the coordinator's Advanced StatefulSet controller
// (apps.kruise.io StatefulSet at its storage version, v1beta1; v1alpha1
// objects are the same resource): the upstream StatefulSet's stable pod
// identities and PVCs, with OpenKruise's additions.
//
// Pods are named <set>-<ordinal> from ordinals.start up, skipping
// reserveOrdinals, each with hostname, subdomain (serviceName) and the
// pod-name and pod-index labels, and its own PVCs (pvc.go). OrderedReady
// creates them one at a time, each after its predecessors are available,
// and deletes in reverse; Parallel does everything at once, within
// scaleStrategy.maxUnavailable when set. The rolling update (plan.go)
// goes from the highest ordinal down, keeps partition pods at the current
// revision, updates up to maxUnavailable at once (Parallel), in place
// when podUpdatePolicy and the change allow (the shared engine in
// coordinator/workload/inplace, with the InPlaceUpdateReady readiness
// gate on every pod) and by recreating the pod otherwise; paused stops
// it, OnDelete leaves it to the user. Deletes go through the preDelete
// lifecycle hook, in-place updates through the inPlaceUpdate hook
// (package podops). Orphan pods the selector matches are adopted, owned
// ones it no longer matches released. New images are pre-downloaded on
// the nodes of the pods about to update (package predownload).
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Client writes pods, PVCs and ControllerRevisions.
	Client kubernetes.Interface
	// Shoal writes StatefulSet status.
	Shoal shoalclient.Interface
	// StatefulSets (v1beta1), Pods, Revisions (apps/v1
	// ControllerRevisions) and Claims (PVCs) are shared informers.
	StatefulSets, Pods, Revisions, Claims cache.SharedIndexInformer
	// Jobs is the shared ImagePullJob informer (v1alpha1), to find the
	// pre-download jobs a set owns; nil leaves them to their TTL.
	Jobs cache.SharedIndexInformer
	// Features are the coordinator's feature gates; nil is their defaults.
	Features featuregate.FeatureGate
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on StatefulSets.
	Recorder events.EventRecorder
	// Clock times availability; nil is the real one.
	Clock clock.Clock
}

// Controller reconciles Advanced StatefulSets.
type Controller struct {
	workload.Loop
	o            Options
	ops          *podops.Ops
	claimer      workload.Claimer
	preDownloads *predownload.Manager
	pods         cache.Indexer
	revs         cache.Indexer
	claims       cache.Indexer
}

// byOwner indexes pods and revisions by their StatefulSet's UID.
const byOwner = "statefulset-owner"

// kind is the owner kind of the pods, revisions and PVCs.
var kind = v1beta1.SchemeGroupVersion.WithKind("StatefulSet")

// owner finds the pods and revisions of Advanced StatefulSets (not of
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
			Queue: syncloop.NewQueue("statefulset", nil), Expect: expect,
			Owner: owner, Workloads: o.StatefulSets.GetIndexer(),
		},
		o: o,
		ops: &podops.Ops{
			Client: o.Client, Recorder: o.Recorder, Expect: expect, Clock: o.Clock, Kind: "StatefulSet",
			Update: &inplace.Updater{Client: o.Client, Clock: o.Clock, Restart: inplace.RestartWithCRR(o.Shoal)},
		},
		claimer: workload.Claimer{Client: o.Client, Recorder: o.Recorder, Kind: kind},
		pods:    o.Pods.GetIndexer(), revs: o.Revisions.GetIndexer(), claims: o.Claims.GetIndexer(),
		preDownloads: &predownload.Manager{Client: o.Client, Shoal: o.Shoal, Recorder: o.Recorder, Index: byOwner},
	}
	informers := []cache.SharedIndexInformer{o.Pods, o.Revisions}
	if o.Jobs != nil {
		informers = append(informers, o.Jobs)
		c.preDownloads.Jobs = o.Jobs.GetIndexer()
	}
	for _, inf := range informers {
		if err := inf.AddIndexers(owner.Indexers(byOwner)); err != nil {
			return nil, fmt.Errorf("index by Advanced StatefulSet owner: %w", err)
		}
	}
	pods := c.OrphanHandler(c.PodHandler(), func(obj any) *metav1.LabelSelector { return obj.(*v1beta1.StatefulSet).Spec.Selector })
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.StatefulSets, c.WorkloadHandler(), "Advanced StatefulSets"},
		{o.Pods, pods, "pods for Advanced StatefulSets"},
		{o.Claims, c.resizedClaimHandler(), "PVCs resized by Advanced StatefulSets"},
	} {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// HasSynced reports whether the informers' initial lists went through the
// controller's handlers, and the revisions and PVCs are listed.
func (c *Controller) HasSynced() bool {
	return c.Loop.HasSynced() && c.o.Revisions.HasSynced() && c.o.Claims.HasSynced()
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, workload.Workers, "StatefulSet", c.sync)
	return nil
}

// sync reconciles one StatefulSet.
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
		return 0, nil
	}
	set := obj.(*v1beta1.StatefulSet)
	log := klog.FromContext(ctx).WithValues("statefulset", key)
	ctx = klog.NewContext(ctx, log)

	// Expectations before pods: see the CloneSet controller's sync.
	satisfied, waiting := c.Expect.Satisfied(key)
	pods, err := c.claimPods(ctx, set)
	if err != nil {
		return 0, err
	}
	revObjs, err := c.revs.ByIndex(byOwner, string(set.UID))
	if err != nil {
		return 0, err
	}
	revs := make([]*appsv1.ControllerRevision, 0, len(revObjs))
	names := map[string]bool{}
	for _, o := range revObjs {
		r := o.(*appsv1.ControllerRevision)
		revs = append(revs, r)
		names[r.Name] = true
	}
	inUse := map[string]bool{set.Status.CurrentRevision: true}
	for _, p := range pods {
		inUse[revisionOf(p)] = true
	}
	update, err := revision.Sync(ctx, c.o.Client, revision.Owner{
		Object: set, Kind: kind, Template: &set.Spec.Template, CollisionCount: set.Status.CollisionCount,
		Labels: set.Spec.Selector.MatchLabels, HistoryLimit: int(ptr.Deref(set.Spec.RevisionHistoryLimit, 10)),
	}, revs, inUse)
	if err != nil {
		return 0, err
	}
	current := set.Status.CurrentRevision
	if !names[current] {
		current = update.Name
	}
	in := input{set: set, pods: pods, current: current, update: update.Name, now: c.o.Clock.Now(), updatesSeen: satisfied}
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.PodUpdatePolicy != "" && ru.PodUpdatePolicy != v1beta1.RecreatePodUpdateStrategyType {
		in.inPlace = func(pod *corev1.Pod) (*inplace.Spec, error) { return c.inPlaceSpec(set, pod, update.Name) }
	}
	in.claim = func(name string) *corev1.PersistentVolumeClaim {
		pvc, _ := c.claim(set.Namespace, name)
		return pvc
	}
	in.resizeClaims = features.Enabled(c.o.Features, features.StatefulSetAutoResizePVCGate) &&
		set.Spec.VolumeClaimUpdateStrategy.Type == v1beta1.OnPodRollingUpdateVolumeClaimUpdateStrategyType
	p, err := newPlan(in)
	if err != nil {
		c.o.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", "%v", err)
		return 0, err
	}
	if p.claimProblem != "" {
		c.o.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "FailedUpdatePVC", "Update", "%s", p.claimProblem)
		p.failedUpdate = p.claimProblem
	}
	if p.failedUpdate != "" {
		p.status.Conditions = setCondition(set.Status.Conditions, p.status.Conditions, v1beta1.FailedUpdatePod, p.failedUpdate, in.now)
	}
	var errs []error
	if !satisfied {
		log.V(2).Info("Waiting for the informer to show earlier changes", "pending", waiting)
		p.waitFor(c.Expect.NextExpiry(key))
	} else if set.DeletionTimestamp == nil {
		errs = append(errs, c.act(ctx, set, key, p, pods, update.Name))
		if err := c.preDownload(ctx, set, update, pods); err != nil {
			log.Info("Image pre-download failed", "err", err.Error())
		}
	}
	if err := c.writeStatus(ctx, set, p); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if p.blocked != "" {
		log.V(2).Info("Step held", "why", p.blocked)
	}
	return p.requeueAfter, nil
}

// claimPods returns the set's pods (terminating ones included) after
// adopting the orphans its selector matches and releasing the pods it no
// longer matches.
func (c *Controller) claimPods(ctx context.Context, set *v1beta1.StatefulSet) ([]*corev1.Pod, error) {
	objs, err := c.pods.ByIndex(cache.NamespaceIndex, set.Namespace)
	if err != nil {
		return nil, err
	}
	return c.claimer.Pods(ctx, set, set.Spec.Selector, objs)
}

// inPlaceSpec is the in-place update of pod to revision rev (the set's
// template), or why it cannot be done in place.
func (c *Controller) inPlaceSpec(set *v1beta1.StatefulSet, pod *corev1.Pod, rev string) (*inplace.Spec, error) {
	if !slices.Contains(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}) {
		// Created before the in-place policy: without the gate it would
		// stay Ready while its containers restart.
		return nil, fmt.Errorf("the pod has no %s readiness gate", wellknown.ReadinessGateInPlaceUpdateReady)
	}
	from, err := c.revisionTemplate(set, revisionOf(pod))
	if err != nil {
		return nil, err
	}
	return inplace.Calculate(from, &set.Spec.Template, rev)
}

// revisionTemplate is the pod template of the set's revision name.
func (c *Controller) revisionTemplate(set *v1beta1.StatefulSet, name string) (*corev1.PodTemplateSpec, error) {
	obj, exists, err := c.revs.GetByKey(set.Namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("ControllerRevision %s not found", name)
	}
	return revision.Template(obj.(*appsv1.ControllerRevision))
}

// act carries out the plan: lifecycle and in-place progress of every pod,
// the PVC retention policy, then deletes, creates and in-place updates
// (to revision update).
func (c *Controller) act(ctx context.Context, set *v1beta1.StatefulSet, key string, p *plan, pods []*corev1.Pod, update string) error {
	var errs []error
	condemned := map[types.UID]bool{}
	for _, pod := range p.condemned {
		condemned[pod.UID] = true
	}
	for _, pod := range pods {
		ord := ordinalOf(set.Name, pod)
		if ord < 0 || pod.DeletionTimestamp != nil {
			continue
		}
		after, err := c.ops.Progress(ctx, set, set.Spec.Lifecycle, pod, revisionOf(pod))
		p.waitFor(after)
		errs = append(errs, err, c.retain(ctx, set, pod, ord, condemned[pod.UID]))
		if pod.Status.Phase == corev1.PodPending && !condemned[pod.UID] {
			// A pending pod whose PVC someone deleted waits for it for
			// ever: create it again, as upstream does.
			_, err := c.ensureClaims(ctx, set, ord)
			errs = append(errs, err)
		}
	}
	for _, r := range p.resizes {
		errs = append(errs, c.resize(ctx, set, r))
	}
	for _, d := range p.deletes {
		_, err := c.ops.Retire(ctx, set, key, set.Spec.Lifecycle, d.pod, d.why)
		errs = append(errs, err)
	}
	for _, cr := range p.creates {
		if err := c.createPod(ctx, set, key, cr, update); err != nil {
			p.status.Conditions = setCondition(set.Status.Conditions, p.status.Conditions, v1beta1.FailedCreatePod, err.Error(), c.o.Clock.Now())
			errs = append(errs, err)
		}
	}
	var grace int32
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.InPlaceUpdateStrategy != nil {
		grace = ru.InPlaceUpdateStrategy.GracePeriodSeconds
	}
	for _, u := range p.updates {
		err := c.ops.StartInPlace(ctx, set, key, set.Spec.Lifecycle, u.pod, u.spec, update, grace, func(pod *corev1.Pod) {
			pod.Labels[wellknown.LabelControllerRevisionHash] = update
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// setCondition sets a True condition of type t with message in conds,
// keeping its transition time from old when it was True there already.
func setCondition(old, conds []appsv1.StatefulSetCondition, t appsv1.StatefulSetConditionType, message string, now time.Time) []appsv1.StatefulSetCondition {
	at := metav1.NewTime(now)
	if i := slices.IndexFunc(old, func(c appsv1.StatefulSetCondition) bool { return c.Type == t && c.Status == corev1.ConditionTrue }); i >= 0 {
		at = old[i].LastTransitionTime
	}
	conds = slices.DeleteFunc(conds, func(c appsv1.StatefulSetCondition) bool { return c.Type == t })
	return append(conds, appsv1.StatefulSetCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: at, Message: message})
}

// createPod creates the pod of ordinal cr.ordinal at revision
// cr.revision (the template's when that is update), after its PVCs.
func (c *Controller) createPod(ctx context.Context, set *v1beta1.StatefulSet, key string, cr create, update string) error {
	tmpl := &set.Spec.Template
	if cr.revision != update {
		t, err := c.revisionTemplate(set, cr.revision)
		if err != nil {
			return fmt.Errorf("pod %s-%d at revision %s: %w", set.Name, cr.ordinal, cr.revision, err)
		}
		tmpl = t
	}
	ready, err := c.ensureClaims(ctx, set, cr.ordinal)
	if err != nil || !ready {
		return err
	}
	pod := newPod(set, tmpl, cr.ordinal, cr.revision, c.o.Clock.Now())
	c.Expect.Expect(key, expectations.Create, pod.Name)
	if _, err := c.o.Client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		if !workload.WriteMayHaveHappened(err) {
			c.Expect.Observe(key, expectations.Create, pod.Name)
		}
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) || apierrors.IsAlreadyExists(err) {
			return nil
		}
		c.o.Recorder.Eventf(set, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "create pod %s: %v", pod.Name, err)
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	c.o.Recorder.Eventf(set, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created pod %s (revision %s)", pod.Name, cr.revision)
	return nil
}

// newPod is the set's pod of ordinal ord from tmpl (revision rev).
func newPod(set *v1beta1.StatefulSet, tmpl *corev1.PodTemplateSpec, ord int, rev string, now time.Time) *corev1.Pod {
	t := tmpl.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	pod.Name, pod.Namespace, pod.GenerateName = fmt.Sprintf("%s-%d", set.Name, ord), set.Namespace, ""
	pod.Labels = maps.Clone(pod.Labels)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[wellknown.LabelControllerRevisionHash] = rev
	pod.Labels[wellknown.LabelStatefulSetPodName] = pod.Name
	pod.Labels[wellknown.LabelPodIndex] = strconv.Itoa(ord)
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, kind)}
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	for _, ct := range set.Spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: ct.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(ct.Name, set, ord)},
		}}
		if i := slices.IndexFunc(pod.Spec.Volumes, func(x corev1.Volume) bool { return x.Name == ct.Name }); i >= 0 {
			pod.Spec.Volumes[i] = v
		} else {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && (ru.PodUpdatePolicy == v1beta1.InPlaceIfPossiblePodUpdateStrategyType ||
		ru.PodUpdatePolicy == v1beta1.InPlaceOnlyPodUpdateStrategyType) {
		gate := corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}
		if !slices.Contains(pod.Spec.ReadinessGates, gate) {
			pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, gate)
		}
	}
	state := wellknown.LifecycleStateNormal
	if set.Spec.Lifecycle != nil && set.Spec.Lifecycle.PreNormal != nil {
		state = lifecycle.Initial()
	}
	lifecycle.SetState(pod, state, now)
	return pod
}

// preDownload warms the images of the set's update revision on the nodes
// of its old pods before they are updated (package predownload), and
// deletes its jobs once every pod runs the update revision.
func (c *Controller) preDownload(ctx context.Context, set *v1beta1.StatefulSet, update *appsv1.ControllerRevision, pods []*corev1.Pod) error {
	i := slices.IndexFunc(pods, func(p *corev1.Pod) bool { return revisionOf(p) != update.Name })
	if i < 0 {
		return c.preDownloads.DeleteAll(ctx, set)
	}
	if predownload.Decided(update) || !features.Enabled(c.o.Features, features.PreDownloadImageForInPlaceUpdate) ||
		set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil
	}
	from, err := c.revisionTemplate(set, revisionOf(pods[i]))
	if err != nil {
		return nil // the old revision is gone: nothing to compare
	}
	var strategy *pub.InPlaceUpdateStrategy
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		strategy = ru.InPlaceUpdateStrategy
	}
	settings := predownload.SettingsOf(set.Annotations, strategy)
	if settings.Off() || len(predownload.ChangedImages(from, &set.Spec.Template)) == 0 {
		return c.preDownloads.Skip(ctx, update)
	}
	return c.preDownloads.Create(ctx, predownload.Request{
		Owner: set, Kind: kind, Update: update, Hash: update.Labels[wellknown.LabelControllerRevisionHash],
		From: from, To: &set.Spec.Template, Selector: set.Spec.Selector, Settings: settings,
	})
}

// writeStatus writes the plan's status if it changed.
func (c *Controller) writeStatus(ctx context.Context, set *v1beta1.StatefulSet, p *plan) error {
	if apiequality.Semantic.DeepEqual(set.Status, p.status) {
		return nil
	}
	next := set.DeepCopy()
	next.Status = p.status
	_, err := c.o.Shoal.AppsV1beta1().StatefulSets(set.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return workload.IgnoreStale(err, "write the status of StatefulSet %s/%s", set.Namespace, set.Name)
}
