// Package broadcastjob is the coordinator's BroadcastJob controller (the
// kind at its storage version, apps.kruise.io/v1beta1): it runs one pod
// of the job's template to completion on every eligible node.
//
// A node is eligible when the template's nodeName, nodeSelector and
// required node affinity select it and it has no NoSchedule or NoExecute
// taint the template does not tolerate (so cordoned and not-ready nodes
// are left out). Each pod is pinned to its node with a required node
// affinity on metadata.name, as a DaemonSet does, so the scheduler still
// checks resources and ports. The controller keeps at most
// spec.parallelism pods running (a percentage of the eligible nodes,
// rounded up); spec.paused holds back new pods.
//
// Completion: with completionPolicy Always (the default) the job is
// Complete once every eligible node has run its pod, and Failed when
// activeDeadlineSeconds passes; ttlSecondsAfterFinished then deletes it.
// With Never the job does not end, and nodes that become eligible later
// get a pod. Failures, by failurePolicy: FailFast (the default) fails the
// job at the first failed pod; Continue counts it and goes on; Pause sets
// spec.paused. A pod of restartPolicy OnFailure whose containers restarted
// more than restartLimit times counts as failed. When the job fails, its
// running pods are deleted.
package broadcastjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/coordinator/workload/expectations"
	"github.com/shoal-io/shoal/coordinator/workload/placement"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Client writes pods.
	Client kubernetes.Interface
	// Shoal writes BroadcastJobs (status, spec.paused, deletion).
	Shoal shoalclient.Interface
	// Jobs (BroadcastJobs at v1beta1), Pods and Nodes are shared
	// informers.
	Jobs, Pods, Nodes cache.SharedIndexInformer
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on jobs.
	Recorder events.EventRecorder
	// Clock times deadlines and TTLs; nil is the real one.
	Clock clock.Clock
}

// Controller reconciles BroadcastJobs.
type Controller struct {
	workload.Loop
	o     Options
	pods  cache.Indexer
	nodes cache.Indexer
}

// byOwner indexes pods by their BroadcastJob's UID.
const byOwner = "broadcastjob-owner"

// owner finds the pods of BroadcastJobs.
var owner = workload.Owner{Kind: "BroadcastJob", Group: v1beta1.SchemeGroupVersion.Group}

// maxCreatesPerSync bounds the pods one sync creates.
const maxCreatesPerSync = 100

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		Loop: workload.Loop{
			Queue: syncloop.NewQueue("broadcastjob", nil), Expect: expectations.New(o.Clock, 0),
			Owner: owner, Workloads: o.Jobs.GetIndexer(),
		},
		o: o, pods: o.Pods.GetIndexer(), nodes: o.Nodes.GetIndexer(),
	}
	if err := o.Pods.AddIndexers(owner.Indexers(byOwner)); err != nil {
		return nil, fmt.Errorf("index pods by BroadcastJob: %w", err)
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.Jobs, c.WorkloadHandler(), "BroadcastJobs"},
		{o.Pods, c.PodHandler(), "pods for BroadcastJobs"},
		{o.Nodes, cache.ResourceEventHandlerFuncs{
			AddFunc: c.nodeEvent,
			UpdateFunc: func(old, obj any) {
				if workload.NodePlacementChanged(old, obj) {
					c.nodeEvent(obj)
				}
			},
			DeleteFunc: c.nodeEvent,
		}, "nodes for BroadcastJobs"},
	} {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, 2, "BroadcastJob", c.sync)
	return nil
}

// nodeEvent queues every job that is not finished: a node that appears
// or goes may change which nodes are eligible.
func (c *Controller) nodeEvent(any) {
	for _, obj := range c.Workloads.List() {
		if job, ok := obj.(*v1beta1.BroadcastJob); ok && !finishedJob(job) {
			c.Enqueue(job)
		}
	}
}

// sync reconciles one BroadcastJob.
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
	job := obj.(*v1beta1.BroadcastJob)
	if job.DeletionTimestamp != nil {
		return 0, nil
	}
	now := c.o.Clock.Now()
	if finishedJob(job) {
		return c.expire(ctx, job, now)
	}
	if ok, waiting := c.Expect.Satisfied(key); !ok {
		klog.FromContext(ctx).V(2).Info("Waiting for the informer to show earlier changes", "job", key, "pending", waiting)
		return c.Expect.NextExpiry(key), nil
	}
	pods, err := c.ownedPods(job)
	if err != nil {
		return 0, err
	}
	var nodes []*corev1.Node
	for _, o := range c.nodes.List() {
		if n, ok := o.(*corev1.Node); ok && n.DeletionTimestamp == nil {
			nodes = append(nodes, n)
		}
	}
	p, err := newPlan(job, nodes, pods, now)
	if err != nil {
		c.o.Recorder.Eventf(job, nil, corev1.EventTypeWarning, "InvalidSpec", "Sync", "%v", err)
		return 0, err
	}
	var errs []error
	for _, node := range p.create[:min(len(p.create), maxCreatesPerSync)] {
		errs = append(errs, c.createPod(ctx, job, key, node))
	}
	for _, pod := range p.deletes {
		errs = append(errs, c.deletePod(ctx, job, key, pod))
	}
	if p.pause {
		errs = append(errs, c.pause(ctx, job))
	}
	if err := c.writeStatus(ctx, job, p); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if p.finished != "" {
		kind, verb := corev1.EventTypeNormal, "Completed"
		if p.finished != reasonCompleted {
			kind, verb = corev1.EventTypeWarning, "Failed"
		}
		c.o.Recorder.Eventf(job, nil, kind, verb, "Sync", "job %s: %d desired, %d succeeded, %d failed (%s)",
			verb, p.status.Desired, p.status.Succeeded, p.status.Failed, p.finished)
	}
	return p.requeueAfter, nil
}

// ownedPods lists the job's pods that are not being deleted.
func (c *Controller) ownedPods(job *v1beta1.BroadcastJob) ([]*corev1.Pod, error) {
	objs, err := c.pods.ByIndex(byOwner, string(job.UID))
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// createPod creates the job's pod for node.
func (c *Controller) createPod(ctx context.Context, job *v1beta1.BroadcastJob, key, node string) error {
	tmpl := job.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	// The name is chosen here, not by generateName, so the expectation
	// is in place before the informer can show the pod.
	pod.Name, pod.Namespace, pod.GenerateName = job.Name+"-"+utilrand.String(5), job.Namespace, ""
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[wellknown.LabelBroadcastJobName] = job.Name
	pod.Labels[wellknown.LabelBroadcastJobControllerUID] = string(job.UID)
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, v1beta1.SchemeGroupVersion.WithKind("BroadcastJob"))}
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	placement.PinToNode(&pod.Spec, node)
	c.Expect.Expect(key, expectations.Create, pod.Name)
	_, err := c.o.Client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !workload.WriteMayHaveHappened(err) {
			c.Expect.Observe(key, expectations.Create, pod.Name)
		}
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		c.o.Recorder.Eventf(job, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "create pod for node %s: %v", node, err)
		return fmt.Errorf("create pod of BroadcastJob %s for node %s: %w", key, node, err)
	}
	c.o.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "created pod %s for node %s", pod.Name, node)
	return nil
}

// deletePod deletes a pod of the job.
func (c *Controller) deletePod(ctx context.Context, job *v1beta1.BroadcastJob, key string, p *corev1.Pod) error {
	c.Expect.Expect(key, expectations.Delete, p.Name)
	err := c.o.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil {
		c.Expect.Observe(key, expectations.Delete, p.Name)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("delete pod %s of BroadcastJob %s: %w", p.Name, key, err)
	}
	c.o.Recorder.Eventf(job, p, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "deleted pod %s: the job ended, or its node no longer fits", p.Name)
	return nil
}

// pause sets spec.paused (failurePolicy Pause after a failed pod).
func (c *Controller) pause(ctx context.Context, job *v1beta1.BroadcastJob) error {
	next := job.DeepCopy()
	next.Spec.Paused = true
	_, err := c.o.Shoal.AppsV1beta1().BroadcastJobs(job.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // a newer copy comes through the informer
	}
	if err != nil {
		return fmt.Errorf("pause BroadcastJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	c.o.Recorder.Eventf(job, nil, corev1.EventTypeWarning, "Paused", "Pause", "a pod failed and failurePolicy is Pause: the job is paused; set spec.paused to false to go on")
	return nil
}

// writeStatus writes the plan's status if it changed.
func (c *Controller) writeStatus(ctx context.Context, job *v1beta1.BroadcastJob, p *plan) error {
	if apiequality.Semantic.DeepEqual(job.Status, p.status) {
		return nil
	}
	next := job.DeepCopy()
	next.Status = p.status
	_, err := c.o.Shoal.AppsV1beta1().BroadcastJobs(job.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write the status of BroadcastJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// expire deletes a finished job once its ttlSecondsAfterFinished has
// passed, and says when to look again before that.
func (c *Controller) expire(ctx context.Context, job *v1beta1.BroadcastJob, now time.Time) (time.Duration, error) {
	ttl := job.Spec.CompletionPolicy.TTLSecondsAfterFinished
	if ttl == nil || job.Status.CompletionTime == nil {
		return 0, nil
	}
	if left := job.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second).Sub(now); left > 0 {
		return left, nil
	}
	err := c.o.Shoal.AppsV1beta1().BroadcastJobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return 0, fmt.Errorf("delete BroadcastJob %s/%s after its TTL: %w", job.Namespace, job.Name, err)
	}
	return 0, nil
}
