// Package imagelistpull is the coordinator's ImageListPullJob controller.
//
// An ImageListPullJob pulls a list of images with one template. The
// controller creates one ImagePullJob (a child) per image, owned by the
// list job, deletes the children of images removed from the list (and
// recreates those whose template changed), and aggregates the children's
// status into the list job's: desired (images), active, completed and
// succeeded (children), the images that failed on some nodes, and the
// start and completion times. A list job of completion type Always
// completes when all its children have; ttlSecondsAfterFinished after
// that the controller deletes it and the garbage collector its children.
// Like every coordinator controller it keeps its informers warm on every
// replica and writes only while this replica leads.
package imagelistpull

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// byOwnerUID indexes ImagePullJobs by the UID of the ImageListPullJob that
// is their controller.
const byOwnerUID = "imagelistpulljob-owner-uid"

// conflictRetry is when a list job whose child's name is taken by an
// ImagePullJob it does not own is looked at again (that job's events do
// not reach it).
const conflictRetry = time.Minute

// Event reasons.
const (
	// ReasonCreated: a child ImagePullJob was created (Normal).
	ReasonCreated = "Created"
	// ReasonDeleted: a child ImagePullJob was deleted because its image
	// left the list or its template changed (Normal).
	ReasonDeleted = "Deleted"
	// ReasonImagePullFailed: a child ImagePullJob has failed nodes
	// (Warning).
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonNameConflict: a child's name is taken by an ImagePullJob the
	// list job does not own (Warning).
	ReasonNameConflict = "NameConflict"
)

// Options wire a Controller.
type Options struct {
	// Shoal creates and deletes ImagePullJobs and writes ImageListPullJobs.
	Shoal shoalclient.Interface
	// Lists and Jobs are the shared informers of ImageListPullJobs and
	// ImagePullJobs, not started yet: New adds an index to Jobs.
	Lists, Jobs cache.SharedIndexInformer
	// Writer paces the status writes.
	Writer statuswriter.Enqueuer
	// IsLeader tells whether this replica may write to the API; a standby
	// writes nothing.
	IsLeader func() bool
	// Recorder records Events on ImageListPullJobs; nil records none.
	Recorder events.EventRecorder
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Clock is the coordinator's clock; nil means the real one.
	Clock clock.WithTicker
}

// Controller drives ImageListPullJobs: it keeps one child ImagePullJob per
// image, aggregates their status, and deletes finished list jobs after
// their TTL.
type Controller struct {
	o     Options
	clock clock.WithTicker
	queue workqueue.TypedRateLimitingInterface[string]
	lists cache.Indexer
	jobs  cache.Indexer

	mu sync.Mutex
	// warned holds, per list job key and child UID, the failed-node
	// message last sent as a Warning, so that a failure is reported once,
	// not at every sync.
	warned map[string]map[types.UID]string

	children  *prometheus.CounterVec
	completed prometheus.Counter

	listsReg, jobsReg cache.ResourceEventHandlerRegistration
}

// New wires a controller to its informers. Call it before the informers
// start.
func New(o Options) (*Controller, error) {
	if o.Shoal == nil || o.Lists == nil || o.Jobs == nil || o.Writer == nil || o.IsLeader == nil {
		return nil, errors.New("imagelistpull: Options need Shoal, Lists, Jobs, Writer and IsLeader")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o:      o,
		clock:  o.Clock,
		queue:  syncloop.NewQueue("imagelistpulljob", o.Clock),
		lists:  o.Lists.GetIndexer(),
		jobs:   o.Jobs.GetIndexer(),
		warned: map[string]map[types.UID]string{},
		children: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_imagelistpulljob_children_total",
			Help: "ImagePullJobs created and deleted by the ImageListPullJob controller, by operation (create, delete).",
		}, []string{"operation"}),
		completed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shoal_coordinator_imagelistpulljob_completed_total",
			Help: "ImageListPullJobs that completed (completion type Always).",
		}),
	}
	if o.Registerer != nil {
		for _, m := range []prometheus.Collector{c.children, c.completed} {
			if err := o.Registerer.Register(m); err != nil {
				return nil, fmt.Errorf("register ImageListPullJob metrics: %w", err)
			}
		}
	}
	if err := o.Jobs.AddIndexers(cache.Indexers{byOwnerUID: func(obj any) ([]string, error) {
		job, ok := obj.(*v1alpha1.ImagePullJob)
		if !ok {
			return nil, nil
		}
		if ref := listOwner(job); ref != nil {
			return []string{string(ref.UID)}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index ImagePullJobs by ImageListPullJob: %w", err)
	}
	var err error
	c.listsReg, err = o.Lists.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("watch ImageListPullJobs: %w", err)
	}
	c.jobsReg, err = o.Jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueOwner,
		UpdateFunc: func(old, obj any) {
			c.enqueueOwner(obj)
			c.enqueueOwner(old) // in case the ownerReference changed
		},
		DeleteFunc: c.enqueueOwner,
	})
	if err != nil {
		return nil, fmt.Errorf("watch ImagePullJobs for ImageListPullJobs: %w", err)
	}
	return c, nil
}

// HasSynced reports whether both informers' initial lists went through
// the controller's handlers.
func (c *Controller) HasSynced() bool { return c.listsReg.HasSynced() && c.jobsReg.HasSynced() }

// Resync queues every ImageListPullJob again; the coordinator calls it
// when this replica starts leading, since a standby wrote nothing.
func (c *Controller) Resync() {
	for _, key := range c.lists.ListKeys() {
		c.queue.Add(key)
	}
}

// Run processes the queue with a few workers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.queue, 2, "ImageListPullJob", c.sync)
	return nil
}

func (c *Controller) enqueue(obj any) { syncloop.Enqueue(c.queue, obj) }

// enqueueOwner queues the ImageListPullJob controlling an ImagePullJob.
func (c *Controller) enqueueOwner(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	job, ok := obj.(*v1alpha1.ImagePullJob)
	if !ok {
		return
	}
	if ref := listOwner(job); ref != nil {
		c.queue.Add(job.Namespace + "/" + ref.Name)
	}
}

// listOwner returns job's controller reference when an ImageListPullJob
// is its controller.
func listOwner(job *v1alpha1.ImagePullJob) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(job)
	if ref == nil || ref.Kind != "ImageListPullJob" || !strings.HasPrefix(ref.APIVersion, v1alpha1.SchemeGroupVersion.Group+"/") {
		return nil
	}
	return ref
}

// sync brings one list job's children and status in line with its spec
// and returns when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	obj, exists, err := c.lists.GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		c.forget(key)
		return 0, nil // its children go with it (garbage collection)
	}
	job := obj.(*v1alpha1.ImageListPullJob)
	if job.DeletionTimestamp != nil || !c.o.IsLeader() {
		// A standby writes nothing; Resync queues every job when it leads.
		return 0, nil
	}
	now := c.clock.Now()
	if job.Status.CompletionTime != nil {
		// Completed: final, as in OpenKruise; only the TTL is left.
		c.forget(key)
		return c.expire(ctx, job, now)
	}
	owned, err := c.jobs.ByIndex(byOwnerUID, string(job.UID))
	if err != nil {
		return 0, err
	}
	wanted := map[string]string{} // child name -> image
	for _, img := range images(job) {
		wanted[ChildName(job.Name, img)] = img
	}
	live := map[string]*v1alpha1.ImagePullJob{} // current children by name
	var stale []*v1alpha1.ImagePullJob          // to delete
	taken := map[string]bool{}                  // names a child still holds
	for _, o := range owned {
		child := o.(*v1alpha1.ImagePullJob)
		if child.Namespace != job.Namespace {
			continue
		}
		taken[child.Name] = true
		switch {
		case child.DeletionTimestamp != nil:
		case wanted[child.Name] == "" || !current(job, child):
			stale = append(stale, child)
		default:
			live[child.Name] = child
		}
	}
	status := computeStatus(job, live, now)

	var errs []error
	for _, child := range stale {
		errs = append(errs, c.deleteChild(ctx, job, child))
	}
	retry := time.Duration(0)
	for _, img := range images(job) {
		name := ChildName(job.Name, img)
		if taken[name] {
			continue // present, or going: created again once it is gone
		}
		after, err := c.createChild(ctx, job, img)
		errs = append(errs, err)
		if after > 0 && (retry == 0 || after < retry) {
			retry = after
		}
	}
	c.warnFailures(job, live, status)
	if !apiequality.Semantic.DeepEqual(job.Status, status) {
		c.writeStatus(key, job.UID, status)
	}
	return retry, errors.Join(errs...)
}

// createChild creates the child pulling image and returns when to look
// again if it cannot be created.
func (c *Controller) createChild(ctx context.Context, job *v1alpha1.ImageListPullJob, image string) (time.Duration, error) {
	child := newChild(job, image)
	jobs := c.o.Shoal.AppsV1alpha1().ImagePullJobs(job.Namespace)
	_, err := jobs.Create(ctx, child, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.children.WithLabelValues("create").Inc()
		c.event(job, corev1.EventTypeNormal, ReasonCreated, "Create", "Created ImagePullJob %s for image %s", child.Name, image)
		klog.FromContext(ctx).V(2).Info("Created ImagePullJob for ImageListPullJob", "imageListPullJob", klog.KObj(job), "imagePullJob", child.Name, "image", image)
		return 0, nil
	case apierrors.IsAlreadyExists(err):
		// The cache has not shown it yet, or someone else's job has the name.
		existing, gerr := jobs.Get(ctx, child.Name, metav1.GetOptions{})
		if gerr != nil {
			if apierrors.IsNotFound(gerr) {
				return 0, fmt.Errorf("create ImagePullJob %s/%s for image %s: it exists, then not: %w", job.Namespace, child.Name, image, err)
			}
			return 0, fmt.Errorf("get ImagePullJob %s/%s after create said it exists: %w", job.Namespace, child.Name, gerr)
		}
		if ref := listOwner(existing); ref != nil && ref.UID == job.UID {
			return 0, nil
		}
		c.event(job, corev1.EventTypeWarning, ReasonNameConflict, "Create",
			"Cannot create ImagePullJob %s for image %s: an ImagePullJob of that name exists and is not owned by this ImageListPullJob; delete it", child.Name, image)
		return conflictRetry, nil
	case apierrors.IsNotFound(err) || (apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)):
		return 0, nil // the namespace is going
	default:
		return 0, fmt.Errorf("create ImagePullJob %s/%s for image %s: %w", job.Namespace, child.Name, image, err)
	}
}

// deleteChild deletes a child whose image left the list or whose template
// is out of date.
func (c *Controller) deleteChild(ctx context.Context, job *v1alpha1.ImageListPullJob, child *v1alpha1.ImagePullJob) error {
	uid := child.UID
	err := c.o.Shoal.AppsV1alpha1().ImagePullJobs(child.Namespace).Delete(ctx, child.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete ImagePullJob %s/%s of ImageListPullJob %s: %w", child.Namespace, child.Name, job.Name, err)
	}
	c.children.WithLabelValues("delete").Inc()
	image := child.Annotations[AnnotationImage]
	if image == "" {
		image = child.Spec.Image
	}
	why := "the image is no longer in spec.images"
	if ChildName(job.Name, image) == child.Name && containsImage(job, image) {
		why = "the template changed; it is created again"
	}
	c.event(job, corev1.EventTypeNormal, ReasonDeleted, "Delete", "Deleted ImagePullJob %s for image %s: %s", child.Name, image, why)
	c.mu.Lock()
	delete(c.warned[cacheKey(job)], child.UID)
	c.mu.Unlock()
	return nil
}

func containsImage(job *v1alpha1.ImageListPullJob, image string) bool {
	for _, img := range job.Spec.Images {
		if img == image {
			return true
		}
	}
	return false
}

// warnFailures records a Warning for each child whose failed nodes
// changed since the last Warning (or since the status the API has).
func (c *Controller) warnFailures(job *v1alpha1.ImageListPullJob, live map[string]*v1alpha1.ImagePullJob, st v1alpha1.ImageListPullJobStatus) {
	had := map[string]string{}
	for _, f := range job.Status.FailedImageStatuses {
		if f != nil {
			had[f.ImagePullJob] = f.Message
		}
	}
	for _, f := range st.FailedImageStatuses {
		child := live[f.ImagePullJob]
		if child == nil {
			continue
		}
		c.mu.Lock()
		warned := c.warned[cacheKey(job)]
		if warned == nil {
			warned = map[types.UID]string{}
			c.warned[cacheKey(job)] = warned
		}
		last, seen := warned[child.UID]
		warned[child.UID] = f.Message
		c.mu.Unlock()
		if last == f.Message || (!seen && had[f.ImagePullJob] == f.Message) {
			continue
		}
		c.event(job, corev1.EventTypeWarning, ReasonImagePullFailed, "Pull", "Image %s (ImagePullJob %s) %s", f.Name, f.ImagePullJob, f.Message)
	}
}

// writeStatus queues a status write onto the latest copy the informer
// has. A completed status is final, and the start time is kept.
func (c *Controller) writeStatus(key string, uid types.UID, status v1alpha1.ImageListPullJobStatus) {
	c.o.Writer.Enqueue("imagelistpulljob/"+key, func(ctx context.Context) error {
		obj, ok, err := c.lists.GetByKey(key)
		if err != nil || !ok {
			return err
		}
		cp := obj.(*v1alpha1.ImageListPullJob).DeepCopy()
		if cp.UID != uid || cp.Status.CompletionTime != nil {
			return nil // another job of that name, or already final
		}
		if cp.Status.StartTime != nil {
			status.StartTime = cp.Status.StartTime
		}
		cp.Status = status
		_, err = c.o.Shoal.AppsV1alpha1().ImageListPullJobs(cp.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("update status of ImageListPullJob %s: %w", key, err)
		}
		if status.CompletionTime != nil {
			c.completed.Inc()
			c.event(cp, corev1.EventTypeNormal, "Completed", "Complete", "All %d ImagePullJobs completed, %d of them on every node", status.Desired, status.Succeeded)
		}
		return nil
	})
}

// expire deletes a completed list job once its TTL is over; the garbage
// collector deletes its children (they are owned by it).
func (c *Controller) expire(ctx context.Context, job *v1alpha1.ImageListPullJob, now time.Time) (time.Duration, error) {
	ttl := job.Spec.CompletionPolicy.TTLSecondsAfterFinished
	if ttl == nil {
		return 0, nil
	}
	if left := job.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second).Sub(now); left > 0 {
		return left, nil
	}
	uid := job.UID
	background := metav1.DeletePropagationBackground
	err := c.o.Shoal.AppsV1alpha1().ImageListPullJobs(job.Namespace).Delete(ctx, job.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &background})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("delete ImageListPullJob %s/%s after its TTL: %w", job.Namespace, job.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted ImageListPullJob after its TTL", "imageListPullJob", klog.KObj(job))
	return 0, nil
}

// forget drops what the controller remembers of the list job at key.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	delete(c.warned, key)
	c.mu.Unlock()
}

func cacheKey(job *v1alpha1.ImageListPullJob) string { return job.Namespace + "/" + job.Name }

// event records an Event on job when there is a recorder.
func (c *Controller) event(job *v1alpha1.ImageListPullJob, typ, reason, action, note string, args ...any) {
	if c.o.Recorder != nil {
		c.o.Recorder.Eventf(job, nil, typ, reason, action, note, args...)
	}
}
