// Package advancedcronjob is the coordinator's AdvancedCronJob controller
// (apps.kruise.io/v1beta1): on spec.schedule, in spec.timeZone, it starts
// a Job, a BroadcastJob or an ImageListPullJob from spec.template.
//
// As the CronJob controller does: each run is named <cronjob>-<slot in
// Unix minutes>, so a slot never runs twice, and carries the
// apps.kruise.io/scheduled-at annotation; after an outage only the latest
// missed slot runs, and not at all if it is older than
// startingDeadlineSeconds; concurrencyPolicy Allow, Forbid (skip the slot
// while a run is active) or Replace (delete the active runs first); paused
// starts nothing; finished runs beyond successfulJobsHistoryLimit (default
// 3) and failedJobsHistoryLimit (default 1) are deleted, oldest first.
// Status: the template's type, the active runs and lastScheduleTime.
package advancedcronjob

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Client creates and deletes Jobs.
	Client kubernetes.Interface
	// Shoal creates and deletes BroadcastJobs and ImageListPullJobs and
	// writes AdvancedCronJob status.
	Shoal shoalclient.Interface
	// CronJobs (v1beta1), Jobs (batch/v1), BroadcastJobs (v1beta1) and
	// ImageListPullJobs (v1alpha1) are shared informers.
	CronJobs, Jobs, BroadcastJobs, ImageListPullJobs cache.SharedIndexInformer
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on the cron jobs.
	Recorder events.EventRecorder
	// Clock tells the schedule's time; nil is the real one.
	Clock clock.Clock
}

// Controller reconciles AdvancedCronJobs.
type Controller struct {
	workload.Loop
	o Options
}

// byOwner indexes the runs by their AdvancedCronJob's UID.
const byOwner = "advancedcronjob-owner"

var (
	kind  = v1beta1.SchemeGroupVersion.WithKind(v1beta1.AdvancedCronJobKind)
	owner = workload.Owner{Kind: kind.Kind, Group: kind.Group}
)

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{o: o, Loop: workload.Loop{Queue: syncloop.NewQueue("advancedcronjob", nil), Workloads: o.CronJobs.GetIndexer()}}
	runEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == kind.Kind {
			c.Queue.Add(m.GetNamespace() + "/" + ref.Name)
		}
	}
	runs := cache.ResourceEventHandlerFuncs{AddFunc: runEvent, UpdateFunc: func(_, obj any) { runEvent(obj) }, DeleteFunc: runEvent}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.CronJobs, c.WorkloadHandler(), "AdvancedCronJobs"},
		{o.Jobs, runs, "Jobs of AdvancedCronJobs"},
		{o.BroadcastJobs, runs, "BroadcastJobs of AdvancedCronJobs"},
		{o.ImageListPullJobs, runs, "ImageListPullJobs of AdvancedCronJobs"},
	} {
		if h.inf != o.CronJobs {
			if err := h.inf.AddIndexers(owner.Indexers(byOwner)); err != nil {
				return nil, fmt.Errorf("index %s: %w", h.what, err)
			}
		}
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, 2, "AdvancedCronJob", c.sync)
	return nil
}

// run is one run of a cron job, of whichever kind.
type run struct {
	obj       metav1.Object
	ref       corev1.ObjectReference
	finished  bool
	succeeded bool
}

// sync reconciles one cron job and returns when to look again (the next
// slot).
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.CronJobs.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	acj := obj.(*v1beta1.AdvancedCronJob)
	if acj.DeletionTimestamp != nil {
		return 0, nil
	}
	log := klog.FromContext(ctx).WithValues("advancedcronjob", key)
	templateKind, err := kindOf(acj)
	if err != nil {
		c.o.Recorder.Eventf(acj, nil, corev1.EventTypeWarning, "InvalidTemplate", "Sync", "%v", err)
		return 0, nil
	}
	sched, err := parseSchedule(acj)
	if err != nil {
		c.o.Recorder.Eventf(acj, nil, corev1.EventTypeWarning, "InvalidSchedule", "Sync", "%v", err)
		return 0, nil
	}
	runs, err := c.runs(acj, templateKind)
	if err != nil {
		return 0, err
	}
	var errs []error
	st := acj.Status.DeepCopy()
	st.Type = templateKind
	now := c.o.Clock.Now()

	since := acj.CreationTimestamp.Time
	if st.LastScheduleTime != nil {
		since = st.LastScheduleTime.Time
	}
	slot, missed, next := sched.due(since, now)
	switch {
	case slot.IsZero():
	case ptr.Deref(acj.Spec.Paused, false):
		log.V(2).Info("Paused: the slot does not run", "slot", slot)
	case acj.Spec.StartingDeadlineSeconds != nil && now.Sub(slot) > time.Duration(*acj.Spec.StartingDeadlineSeconds)*time.Second:
		c.o.Recorder.Eventf(acj, nil, corev1.EventTypeWarning, "MissSchedule", "Schedule",
			"missed the slot of %s by more than startingDeadlineSeconds (%ds)", slot.Format(time.RFC3339), *acj.Spec.StartingDeadlineSeconds)
		st.LastScheduleTime = &metav1.Time{Time: slot}
	default:
		if missed > maxMissed {
			c.o.Recorder.Eventf(acj, nil, corev1.EventTypeWarning, "TooManyMissedTimes", "Schedule",
				"%d slots were missed; only the latest, %s, runs", missed, slot.Format(time.RFC3339))
		}
		started, err := c.startRun(ctx, acj, templateKind, slot, runs)
		if err != nil {
			errs = append(errs, err)
		} else {
			st.LastScheduleTime = &metav1.Time{Time: slot}
			if started != nil {
				runs = append(runs, *started)
			}
		}
	}

	st.Active = nil
	for _, r := range runs {
		if !r.finished {
			st.Active = append(st.Active, r.ref)
		}
	}
	errs = append(errs, c.trimHistory(ctx, acj, templateKind, runs))
	if !apiequality.Semantic.DeepEqual(&acj.Status, st) {
		next := acj.DeepCopy()
		next.Status = *st
		_, err := c.o.Shoal.AppsV1beta1().AdvancedCronJobs(acj.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
		errs = append(errs, workload.IgnoreStale(err, "write the status of AdvancedCronJob %s", key))
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return max(next.Sub(now), 0) + 100*time.Millisecond, nil
}

// kindOf is the kind of run the template describes; exactly one must be
// set.
func kindOf(acj *v1beta1.AdvancedCronJob) (v1beta1.TemplateKind, error) {
	t := acj.Spec.Template
	var kinds []v1beta1.TemplateKind
	if t.JobTemplate != nil {
		kinds = append(kinds, v1beta1.JobTemplate)
	}
	if t.BroadcastJobTemplate != nil {
		kinds = append(kinds, v1beta1.BroadcastJobTemplate)
	}
	if t.ImageListPullJobTemplate != nil {
		kinds = append(kinds, v1beta1.ImageListPullJobTemplate)
	}
	if len(kinds) != 1 {
		return "", fmt.Errorf("spec.template: set exactly one of jobTemplate, broadcastJobTemplate and imageListPullJobTemplate (%d set)", len(kinds))
	}
	return kinds[0], nil
}

// runName is the name of the run of slot: <cronjob>-<slot in Unix
// minutes>, as the CronJob controller names its Jobs; a slot that is not
// on a whole minute (an @every schedule of seconds) uses Unix seconds, so
// that each slot has its own name.
func runName(acj *v1beta1.AdvancedCronJob, slot time.Time) string {
	if slot.Unix()%60 != 0 {
		return fmt.Sprintf("%s-%d", acj.Name, slot.Unix())
	}
	return fmt.Sprintf("%s-%d", acj.Name, slot.Unix()/60)
}

// runs lists the cron job's runs of its current kind.
func (c *Controller) runs(acj *v1beta1.AdvancedCronJob, k v1beta1.TemplateKind) ([]run, error) {
	var inf cache.SharedIndexInformer
	var gvk schema.GroupVersionKind
	switch k {
	case v1beta1.JobTemplate:
		inf, gvk = c.o.Jobs, batchv1.SchemeGroupVersion.WithKind("Job")
	case v1beta1.BroadcastJobTemplate:
		inf, gvk = c.o.BroadcastJobs, v1beta1.SchemeGroupVersion.WithKind("BroadcastJob")
	default:
		inf, gvk = c.o.ImageListPullJobs, v1alpha1.SchemeGroupVersion.WithKind("ImageListPullJob")
	}
	objs, err := inf.GetIndexer().ByIndex(byOwner, string(acj.UID))
	if err != nil {
		return nil, err
	}
	var out []run
	for _, o := range objs {
		r := run{}
		switch x := o.(type) {
		case *batchv1.Job:
			r.obj = x
			for _, cond := range x.Status.Conditions {
				if cond.Status == corev1.ConditionTrue && (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) {
					r.finished, r.succeeded = true, cond.Type == batchv1.JobComplete
				}
			}
		case *v1beta1.BroadcastJob:
			r.obj = x
			for _, cond := range x.Status.Conditions {
				if cond.Status == corev1.ConditionTrue && (cond.Type == v1beta1.JobComplete || cond.Type == v1beta1.JobFailed) {
					r.finished, r.succeeded = true, cond.Type == v1beta1.JobComplete
				}
			}
		case *v1alpha1.ImageListPullJob:
			r.obj = x
			r.finished = x.Status.CompletionTime != nil
			r.succeeded = r.finished && len(x.Status.FailedImageStatuses) == 0
		default:
			continue
		}
		if r.obj.GetDeletionTimestamp() != nil {
			continue
		}
		r.ref = corev1.ObjectReference{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Namespace: r.obj.GetNamespace(), Name: r.obj.GetName(), UID: r.obj.GetUID(), ResourceVersion: r.obj.GetResourceVersion(),
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].obj.GetCreationTimestamp(), out[j].obj.GetCreationTimestamp()
		return a.Before(&b)
	})
	return out, nil
}

// startRun starts the run of slot, after concurrencyPolicy: Forbid skips
// it while a run is active, Replace deletes the active runs first. It
// returns the run it started (nil when it skipped or the run exists).
func (c *Controller) startRun(ctx context.Context, acj *v1beta1.AdvancedCronJob, k v1beta1.TemplateKind, slot time.Time, runs []run) (*run, error) {
	var active []run
	for _, r := range runs {
		if !r.finished {
			active = append(active, r)
		}
	}
	switch acj.Spec.ConcurrencyPolicy {
	case v1beta1.ForbidConcurrent:
		if len(active) > 0 {
			c.o.Recorder.Eventf(acj, nil, corev1.EventTypeNormal, "JobAlreadyActive", "Schedule",
				"the slot of %s is skipped: %s is still active and concurrencyPolicy is Forbid", slot.Format(time.RFC3339), active[0].ref.Name)
			return nil, nil
		}
	case v1beta1.ReplaceConcurrent:
		for _, r := range active {
			if err := c.deleteRun(ctx, acj, k, r, "replaced by the run of "+slot.Format(time.RFC3339)); err != nil {
				return nil, err
			}
		}
	}
	name := runName(acj, slot)
	meta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		m = *m.DeepCopy()
		m.Name, m.GenerateName, m.Namespace = name, "", acj.Namespace
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[wellknown.AnnotationScheduledAt] = slot.UTC().Format(time.RFC3339)
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(acj, kind)}
		return m
	}
	var err error
	var created metav1.Object
	var gvk schema.GroupVersionKind
	switch k {
	case v1beta1.JobTemplate:
		t := acj.Spec.Template.JobTemplate
		gvk = batchv1.SchemeGroupVersion.WithKind("Job")
		created, err = c.o.Client.BatchV1().Jobs(acj.Namespace).Create(ctx, &batchv1.Job{ObjectMeta: meta(t.ObjectMeta), Spec: *t.Spec.DeepCopy()}, metav1.CreateOptions{})
	case v1beta1.BroadcastJobTemplate:
		t := acj.Spec.Template.BroadcastJobTemplate
		gvk = v1beta1.SchemeGroupVersion.WithKind("BroadcastJob")
		created, err = c.o.Shoal.AppsV1beta1().BroadcastJobs(acj.Namespace).Create(ctx, &v1beta1.BroadcastJob{ObjectMeta: meta(t.ObjectMeta), Spec: *t.Spec.DeepCopy()}, metav1.CreateOptions{})
	default:
		t := acj.Spec.Template.ImageListPullJobTemplate
		gvk = v1beta1.SchemeGroupVersion.WithKind("ImageListPullJob")
		created, err = c.o.Shoal.AppsV1beta1().ImageListPullJobs(acj.Namespace).Create(ctx, &v1beta1.ImageListPullJob{ObjectMeta: meta(t.ObjectMeta), Spec: *t.Spec.DeepCopy()}, metav1.CreateOptions{})
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil, nil // this slot ran already
	case err != nil:
		c.o.Recorder.Eventf(acj, nil, corev1.EventTypeWarning, "FailedCreate", "Schedule", "start %s %s: %v", k, name, err)
		return nil, fmt.Errorf("start %s %s/%s: %w", k, acj.Namespace, name, err)
	}
	c.o.Recorder.Eventf(acj, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Schedule", "started %s %s for the slot of %s", k, name, slot.Format(time.RFC3339))
	return &run{obj: created, ref: corev1.ObjectReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: acj.Namespace, Name: name, UID: created.GetUID(), ResourceVersion: created.GetResourceVersion(),
	}}, nil
}

// trimHistory deletes the oldest finished runs beyond the history limits.
func (c *Controller) trimHistory(ctx context.Context, acj *v1beta1.AdvancedCronJob, k v1beta1.TemplateKind, runs []run) error {
	var succeeded, failed []run
	for _, r := range runs {
		switch {
		case !r.finished:
		case r.succeeded:
			succeeded = append(succeeded, r)
		default:
			failed = append(failed, r)
		}
	}
	var errs []error
	for _, h := range []struct {
		runs  []run
		limit int32
	}{{succeeded, ptr.Deref(acj.Spec.SuccessfulJobsHistoryLimit, 3)}, {failed, ptr.Deref(acj.Spec.FailedJobsHistoryLimit, 1)}} {
		for i := 0; i < len(h.runs)-int(h.limit); i++ {
			errs = append(errs, c.deleteRun(ctx, acj, k, h.runs[i], "beyond the history limit"))
		}
	}
	return errors.Join(errs...)
}

// deleteRun deletes a run (its pods with it).
func (c *Controller) deleteRun(ctx context.Context, acj *v1beta1.AdvancedCronJob, k v1beta1.TemplateKind, r run, why string) error {
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground), Preconditions: &metav1.Preconditions{UID: ptr.To(r.obj.GetUID())}}
	var err error
	switch k {
	case v1beta1.JobTemplate:
		err = c.o.Client.BatchV1().Jobs(acj.Namespace).Delete(ctx, r.ref.Name, opts)
	case v1beta1.BroadcastJobTemplate:
		err = c.o.Shoal.AppsV1beta1().BroadcastJobs(acj.Namespace).Delete(ctx, r.ref.Name, opts)
	default:
		err = c.o.Shoal.AppsV1alpha1().ImageListPullJobs(acj.Namespace).Delete(ctx, r.ref.Name, opts)
	}
	if err := workload.IgnoreStale(err, "delete %s %s", k, r.ref.Name); err != nil {
		return err
	}
	if err == nil {
		c.o.Recorder.Eventf(acj, nil, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "deleted %s %s: %s", k, r.ref.Name, why)
	}
	return nil
}
