// Package podreadiness gives every pod that declares the KruisePodReady
// readiness gate its KruisePodReady condition, True, as soon as the pod
// lacks one, so that the gate does not hold the pod not ready forever.
//
// Pods of Kruise workloads carry the gate (and so may any manifest written
// for OpenKruise); the controllers that hold a pod not ready for a while (a
// ContainerRecreateRequest's unreadyGracePeriodSeconds, lifecycle hooks
// with markPodNotReady) turn the condition False and back. This controller
// only ever adds a missing condition: it never turns a False one True.
//
// While no coordinator leads, a new pod with the gate stays not ready (its
// containers run; Services leave it out) until a leader adds the
// condition, which happens for every such pod when leadership is taken.
package podreadiness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Options wire a Controller.
type Options struct {
	// Client writes the pods' status.
	Client kubernetes.Interface
	// Pods is the shared pod informer.
	Pods cache.SharedIndexInformer
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Registerer takes the controller's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Clock stamps lastTransitionTime; nil means the real one.
	Clock clock.Clock
}

// Controller adds KruisePodReady=True to pods with the KruisePodReady
// readiness gate and no such condition.
type Controller struct {
	o       Options
	queue   syncloop.Queue
	pods    cache.Indexer
	podsReg cache.ResourceEventHandlerRegistration
	added   prometheus.Counter
}

// New returns a controller over o.Pods; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		o:     o,
		queue: syncloop.NewQueue("podreadiness", nil),
		pods:  o.Pods.GetIndexer(),
		added: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shoal_coordinator_pod_readiness_conditions_added_total",
			Help: "KruisePodReady conditions added (True) to pods with the KruisePodReady readiness gate that had none.",
		}),
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(c.added); err != nil {
			return nil, fmt.Errorf("register pod readiness metrics: %w", err)
		}
	}
	var err error
	c.podsReg, err = o.Pods.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			pod, ok := obj.(*corev1.Pod)
			return ok && NeedsCondition(pod)
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch pods for readiness gates: %w", err)
	}
	return c, nil
}

// HasSynced reports whether the informer's initial list went through the
// controller's handler.
func (c *Controller) HasSynced() bool { return c.podsReg.HasSynced() }

// Resync queues every pod that needs the condition; the coordinator calls
// it when this replica starts leading.
func (c *Controller) Resync() {
	for _, obj := range c.pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok && NeedsCondition(pod) {
			c.enqueue(pod)
		}
	}
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.queue, 2, "pod readiness", func(ctx context.Context, key string) (time.Duration, error) {
		return 0, c.sync(ctx, key)
	})
	return nil
}

func (c *Controller) enqueue(obj any) { syncloop.Enqueue(c.queue, obj) }

// NeedsCondition reports whether pod declares the KruisePodReady readiness
// gate, has no KruisePodReady condition, and is not being deleted.
func NeedsCondition(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if !slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool {
		return g.ConditionType == wellknown.ReadinessGateKruisePodReady
	}) {
		return false
	}
	return !slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == wellknown.ConditionKruisePodReady
	})
}

// sync adds the condition to the pod of key if it still needs it. The patch
// carries the cached resourceVersion, so that a condition another
// controller wrote in the meantime (a False one, say) is never overwritten:
// the apiserver refuses the patch with a conflict and the key is retried on
// the newer copy.
func (c *Controller) sync(ctx context.Context, key string) error {
	if !c.o.IsLeader() {
		return nil // Resync queues it again when this replica leads
	}
	obj, exists, err := c.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || !NeedsCondition(pod) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID, "resourceVersion": pod.ResourceVersion},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type:               wellknown.ConditionKruisePodReady,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(c.o.Clock.Now()),
		}}},
	})
	if err != nil {
		return err
	}
	_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("add %s to pod %s: changed meanwhile, will retry: %w", wellknown.ConditionKruisePodReady, key, err)
	case err != nil:
		return fmt.Errorf("add %s to pod %s: %w", wellknown.ConditionKruisePodReady, key, err)
	}
	c.added.Inc()
	klog.FromContext(ctx).V(2).Info("Added readiness condition", "pod", klog.KObj(pod), "condition", wellknown.ConditionKruisePodReady)
	return nil
}
