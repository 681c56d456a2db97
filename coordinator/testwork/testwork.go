// Package testwork turns labelled ConfigMaps into test-only noop work, so
// end-to-end tests can drive the node-work pipeline (dispatch, agent
// restarts, resume, reconnects) without a real feature. The coordinator
// enables it only with --enable-test-work.
//
// A ConfigMap labelled nodework.shoal.io/test-noop=true in the coordinator's
// namespace with data {node, steps, stepMillis} becomes one noop item for
// that node; the node's reports come back as the ConfigMap's annotations.
package testwork

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Labels and annotations of test work ConfigMaps.
const (
	// LabelNoop marks a ConfigMap as noop work.
	LabelNoop = "nodework.shoal.io/test-noop"
	// AnnotationPhase is the node's last reported phase (lower case).
	AnnotationPhase = "nodework.shoal.io/phase"
	// AnnotationStepsDone is the node's last reported steps_done.
	AnnotationStepsDone = "nodework.shoal.io/steps-done"
	// AnnotationStarts is the node's last reported starts.
	AnnotationStarts = "nodework.shoal.io/starts"
	// AnnotationObservedGeneration is the generation the report was for.
	AnnotationObservedGeneration = "nodework.shoal.io/observed-generation"
	// AnnotationMessage is the report's message.
	AnnotationMessage = "nodework.shoal.io/message"
)

// Controller maps noop ConfigMaps to work items and reports back.
type Controller struct {
	client kubernetes.Interface
	store  *dispatch.Store
	writer statuswriter.Enqueuer

	mu    sync.Mutex
	nodes map[string]string // item id -> node it was put on

	registration cache.ResourceEventHandlerRegistration
}

// HasSynced reports whether the informer's initial list has gone through
// the controller's handlers (so the store holds every item).
func (c *Controller) HasSynced() bool { return c.registration.HasSynced() }

// New wires the controller to a ConfigMap informer that is already scoped
// to the coordinator's namespace and the noop label.
func New(client kubernetes.Interface, informer cache.SharedIndexInformer, store *dispatch.Store, writer statuswriter.Enqueuer) (*Controller, error) {
	c := &Controller{client: client, store: store, writer: writer, nodes: map[string]string{}}
	store.HandleReports(nodework.KindNoop, c.report)
	var err error
	c.registration, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.put(obj) },
		UpdateFunc: func(_, obj any) { c.put(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				c.remove(ItemID(cm))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch test work ConfigMaps: %w", err)
	}
	return c, nil
}

// ItemID is the work item id of a ConfigMap.
func ItemID(cm *corev1.ConfigMap) string {
	return fmt.Sprintf("noop/%s/%s/%s", cm.Namespace, cm.Name, cm.UID)
}

func (c *Controller) put(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	id := ItemID(cm)
	node := cm.Data["node"]
	steps, err1 := strconv.ParseUint(cm.Data["steps"], 10, 32)
	millis, err2 := strconv.ParseUint(cm.Data["stepMillis"], 10, 32)
	item := &nodeworkv1.WorkItem{Id: id, Kind: nodework.KindNoop, Spec: &nodeworkv1.WorkItem_Noop{Noop: &nodeworkv1.NoopSpec{Steps: uint32(steps), StepMillis: uint32(millis)}}}
	if node == "" || err1 != nil || err2 != nil || nodework.ValidateWorkItem("noop", withGen(item)) != nil {
		klog.Background().Info("Ignoring malformed test work ConfigMap", "configmap", klog.KObj(cm), "data", cm.Data)
		c.remove(id)
		return
	}
	c.mu.Lock()
	old := c.nodes[id]
	c.nodes[id] = node
	c.mu.Unlock()
	if old != "" && old != node {
		c.store.Delete(old, id)
	}
	c.store.Put(node, item)
}

// withGen is a copy of it with a generation, for validation (the store
// assigns the real one).
func withGen(it *nodeworkv1.WorkItem) *nodeworkv1.WorkItem {
	cp := proto.Clone(it).(*nodeworkv1.WorkItem)
	cp.Generation = 1
	return cp
}

func (c *Controller) remove(id string) {
	c.mu.Lock()
	node := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if node != "" {
		c.store.Delete(node, id)
	}
}

// report writes a node's report into the ConfigMap's annotations, batched.
func (c *Controller) report(_ string, item *nodeworkv1.WorkItem, r *nodeworkv1.WorkReport) {
	if item == nil {
		return
	}
	parts := strings.Split(item.GetId(), "/") // noop/<namespace>/<name>/<uid>
	if len(parts) != 4 {
		return
	}
	ns, name, uid := parts[1], parts[2], parts[3]
	patch := map[string]any{"metadata": map[string]any{
		"uid": uid, // the patch fails if the ConfigMap was replaced meanwhile
		"annotations": map[string]string{
			AnnotationPhase:              dispatch.PhaseName(r.GetPhase()),
			AnnotationStepsDone:          strconv.FormatUint(uint64(r.GetNoop().GetStepsDone()), 10),
			AnnotationStarts:             strconv.FormatUint(uint64(r.GetNoop().GetStarts()), 10),
			AnnotationObservedGeneration: strconv.FormatInt(r.GetObservedGeneration(), 10),
			AnnotationMessage:            r.GetMessage(),
		},
	}}
	body, err := json.Marshal(patch)
	if err != nil {
		return
	}
	c.writer.Enqueue("configmap/"+ns+"/"+name, func(ctx context.Context) error {
		_, err := c.client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	})
}
