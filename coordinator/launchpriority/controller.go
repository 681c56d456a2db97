// Package launchpriority is the coordinator's container launch priority
// controller. The pod webhook (webhook.LaunchPriority) gives each
// container of a prioritized pod an env KRUISE_CONTAINER_BARRIER from key
// p_<priority> of the ConfigMap <pod>-barrier; the kubelet cannot start a
// container until its key exists. This controller writes the keys: the
// highest priority among the containers not ready yet, so each priority
// starts once those above it are ready. When the lowest key is written
// the pod is annotated apps.kruise.io/container-launch-priority-completed
// and left alone. The ConfigMap is owned by the pod and lives as long as
// it does (a restarted container needs its key again).
package launchpriority

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Options wire a Controller.
type Options struct {
	// Client writes the barrier ConfigMaps and the pods' annotation.
	Client kubernetes.Interface
	// Pods is the shared pod informer.
	Pods cache.SharedIndexInformer
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
}

// Controller writes barrier ConfigMaps.
type Controller struct {
	o     Options
	queue syncloop.Queue
	reg   cache.ResourceEventHandlerRegistration
}

// New returns a controller over the pod informer; Run starts it.
func New(o Options) (*Controller, error) {
	c := &Controller{o: o, queue: syncloop.NewQueue("launchpriority", nil)}
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && waiting(pod) {
			syncloop.Enqueue(c.queue, pod)
		}
	}
	reg, err := o.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	if err != nil {
		return nil, fmt.Errorf("watch pods for launch priorities: %w", err)
	}
	c.reg = reg
	return c, nil
}

// HasSynced reports whether the pod informer's first list went through
// the handler.
func (c *Controller) HasSynced() bool { return c.reg.HasSynced() }

// Resync queues every pod still waiting on its barrier.
func (c *Controller) Resync() {
	for _, obj := range c.o.Pods.GetStore().List() {
		if pod, ok := obj.(*corev1.Pod); ok && waiting(pod) {
			syncloop.Enqueue(c.queue, pod)
		}
	}
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.queue, 2, "launch priority", c.sync)
	return nil
}

// waiting reports whether the pod has barriers and is not done with them.
func waiting(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Annotations[wellknown.AnnotationContainerLaunchPriorityCompleted] == "true" {
		return false
	}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == wellknown.EnvContainerBarrier {
				return true
			}
		}
	}
	return false
}

// nextKeys decides the barrier keys the pod needs now: the highest
// priority among its containers that are not ready, and whether the
// lowest priority's key is among the keys written (then the pod is done).
func nextKeys(pod *corev1.Pod, written map[string]string) (key string, done bool) {
	prio := inplace.Priorities(pod)
	ready := map[string]bool{}
	for _, s := range pod.Status.ContainerStatuses {
		ready[s.Name] = s.Ready
	}
	highest, lowest, any := 0, 0, false
	first := true
	for name, p := range prio {
		if first || p < lowest {
			lowest = p
		}
		first = false
		if !ready[name] && (!any || p > highest) {
			highest, any = p, true
		}
	}
	_, done = written[fmt.Sprintf("%s%d", wellknown.ContainerLaunchBarrierKeyPrefix, lowest)]
	if any {
		key = fmt.Sprintf("%s%d", wellknown.ContainerLaunchBarrierKeyPrefix, highest)
	}
	return key, done
}

// sync writes the next key of one pod's barrier.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.Pods.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	pod := obj.(*corev1.Pod)
	if !waiting(pod) {
		return 0, nil
	}
	name := pod.Name + wellknown.ContainerLaunchBarrierConfigMapSuffix
	cms := c.o.Client.CoreV1().ConfigMaps(pod.Namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm, err = nil, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get barrier ConfigMap %s/%s: %w", pod.Namespace, name, err)
	}
	var data map[string]string
	if cm != nil {
		data = cm.Data
	}
	next, done := nextKeys(pod, data)
	if next != "" {
		if _, ok := data[next]; !ok {
			if err := c.writeKey(ctx, pod, cm, name, next); err != nil {
				return 0, err
			}
			data = maps.Clone(data)
			if data == nil {
				data = map[string]string{}
			}
			data[next] = "true"
			_, done = nextKeys(pod, data)
		}
	}
	if !done {
		return 0, nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, wellknown.AnnotationContainerLaunchPriorityCompleted)
	_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return 0, workload.IgnoreStale(err, "mark pod %s/%s's launch priorities completed", pod.Namespace, pod.Name)
}

// writeKey adds key to the pod's barrier ConfigMap, creating it (owned by
// the pod) when cm is nil.
func (c *Controller) writeKey(ctx context.Context, pod *corev1.Pod, cm *corev1.ConfigMap, name, key string) error {
	cms := c.o.Client.CoreV1().ConfigMaps(pod.Namespace)
	if cm == nil {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pod.Namespace, OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
			}},
			Data: map[string]string{key: "true"},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create barrier ConfigMap %s/%s: %w", pod.Namespace, name, err)
		}
		return nil
	}
	next := cm.DeepCopy()
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	next.Data[key] = "true"
	if _, err := cms.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		// A conflict is retried: no other event may come for this pod.
		return fmt.Errorf("add key %s to barrier ConfigMap %s/%s: %w", key, pod.Namespace, name, err)
	}
	return nil
}
