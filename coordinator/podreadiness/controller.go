// Package podreadiness gives every pod that declares the KruisePodReady or
// the InPlaceUpdateReady readiness gate that condition, True, as soon as
// the pod lacks it, so that the gate does not hold the pod not ready
// forever.
//
// Pods of Kruise workloads carry the gates (and so may any manifest
// written for OpenKruise); the controllers that hold a pod not ready for a
// while (a ContainerRecreateRequest's unreadyGracePeriodSeconds, lifecycle
// hooks with markPodNotReady, an in-place update) turn the condition False
// and back. This controller
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

// Controller adds KruisePodReady=True and InPlaceUpdateReady=True to pods
// with that readiness gate and no such condition.
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
			Help: "KruisePodReady and InPlaceUpdateReady conditions added (True) to pods with that readiness gate that had none.",
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

// gates are the readiness gates whose conditions this controller adds
// (True) to pods that declare them and lack them.
var gates = []corev1.PodConditionType{wellknown.ReadinessGateKruisePodReady, wellknown.ReadinessGateInPlaceUpdateReady}

// MissingConditions lists the readiness gates of pod (KruisePodReady,
// InPlaceUpdateReady) that it declares and has no condition for; a pod
// being deleted needs none.
func MissingConditions(pod *corev1.Pod) []corev1.PodConditionType {
	if pod.DeletionTimestamp != nil {
		return nil
	}
	var missing []corev1.PodConditionType
	for _, g := range gates {
		declared := slices.ContainsFunc(pod.Spec.ReadinessGates, func(r corev1.PodReadinessGate) bool { return r.ConditionType == g })
		has := slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == g })
		if declared && !has {
			missing = append(missing, g)
		}
	}
	return missing
}

// NeedsCondition reports whether pod lacks the condition of one of the
// readiness gates it declares (see MissingConditions).
func NeedsCondition(pod *corev1.Pod) bool { return len(MissingConditions(pod)) > 0 }

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
	missing := MissingConditions(pod)
	conds := make([]corev1.PodCondition, 0, len(missing))
	for _, t := range missing {
		conds = append(conds, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.o.Clock.Now())})
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID, "resourceVersion": pod.ResourceVersion},
		"status":   map[string]any{"conditions": conds},
	})
	if err != nil {
		return err
	}
	_, err = c.o.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("add %v to pod %s: changed meanwhile, will retry: %w", missing, key, err)
	case err != nil:
		return fmt.Errorf("add %v to pod %s: %w", missing, key, err)
	}
	c.added.Add(float64(len(missing)))
	klog.FromContext(ctx).V(2).Info("Added readiness conditions", "pod", klog.KObj(pod), "conditions", missing)
	return nil
}
