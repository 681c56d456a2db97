// Package resourcedistribution is the coordinator's ResourceDistribution
// controller (cluster-scoped, apps.kruise.io/v1alpha1): it copies one
// Secret or ConfigMap into the namespaces a distribution targets and
// keeps the copies as the manifest says.
//
// Targets: includedNamespaces, plus the namespaces namespaceLabelSelector
// matches (an empty selector matches none), plus with allNamespaces every
// namespace but kube-system and kube-public; less excludedNamespaces. An
// included namespace that does not exist is reported in the
// NamespaceNotExists condition. Each copy carries the from, hashcode and
// distributed-timestamp annotations OpenKruise writes, Shoal's
// resourcedistribution.shoal.io/name label (the coordinator watches only
// labelled Secrets and ConfigMaps) and a controller reference to the
// distribution, so deleting the distribution deletes its copies. A copy
// edited or deleted by someone else is written back; a copy in a namespace
// no longer targeted is deleted. An object of the same name the
// distribution did not write is never touched: the namespace goes into the
// ConflictOccurred condition. Status: desired (targeted namespaces that
// exist), succeeded, failed, and the six conditions, always present.
package resourcedistribution

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Options wire a Controller.
type Options struct {
	// Client writes Secrets and ConfigMaps.
	Client kubernetes.Interface
	// Shoal writes ResourceDistribution status.
	Shoal shoalclient.Interface
	// Distributions (v1alpha1) and Namespaces are shared informers;
	// Secrets and ConfigMaps are informers of the labelled copies only
	// (label selector wellknown.LabelResourceDistribution).
	Distributions, Namespaces, Secrets, ConfigMaps cache.SharedIndexInformer
	// IsLeader tells whether this replica may write to the API.
	IsLeader func() bool
	// Recorder records events on distributions.
	Recorder events.EventRecorder
	// Clock stamps the copies; nil is the real one.
	Clock clock.Clock
}

// Controller reconciles ResourceDistributions.
type Controller struct {
	workload.Loop
	o Options
}

// New returns a controller over the informers; Run starts it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{o: o, Loop: workload.Loop{Queue: syncloop.NewQueue("resourcedistribution", nil), Workloads: o.Distributions.GetIndexer()}}
	all := func(any) { c.Resync() }
	copyEvent := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		// The from annotation names the distribution in full (the label
		// may be a hash of a long name).
		if from := m.GetAnnotations()[wellknown.AnnotationResourceDistributionFrom]; from != "" {
			c.Queue.Add(from)
		}
	}
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
		what    string
	}{
		{o.Distributions, c.WorkloadHandler(), "ResourceDistributions"},
		{o.Namespaces, cache.ResourceEventHandlerFuncs{
			AddFunc: all, DeleteFunc: all,
			UpdateFunc: func(old, obj any) {
				o, ok1 := old.(*corev1.Namespace)
				n, ok2 := obj.(*corev1.Namespace)
				if !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
					c.Resync()
				}
			},
		}, "namespaces"},
		{o.Secrets, cache.ResourceEventHandlerFuncs{AddFunc: copyEvent, UpdateFunc: func(_, obj any) { copyEvent(obj) }, DeleteFunc: copyEvent}, "distributed Secrets"},
		{o.ConfigMaps, cache.ResourceEventHandlerFuncs{AddFunc: copyEvent, UpdateFunc: func(_, obj any) { copyEvent(obj) }, DeleteFunc: copyEvent}, "distributed ConfigMaps"},
	} {
		if err := c.Watch(h.inf, h.handler, h.what); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run processes the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	syncloop.Run(ctx, c.Queue, 2, "ResourceDistribution", c.sync)
	return nil
}

// sync reconciles one distribution.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	if !c.o.IsLeader() {
		return 0, nil
	}
	obj, exists, err := c.o.Distributions.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return 0, err // deleted: the garbage collector takes the copies
	}
	rd := obj.(*v1alpha1.ResourceDistribution)
	if rd.DeletionTimestamp != nil {
		return 0, nil
	}
	res, err := decode(rd)
	if err != nil {
		c.o.Recorder.Eventf(rd, nil, corev1.EventTypeWarning, "InvalidResource", "Sync", "%v", err)
		return 0, nil // the manifest must change first
	}
	var namespaces []*corev1.Namespace
	for _, o := range c.o.Namespaces.GetIndexer().List() {
		if ns, ok := o.(*corev1.Namespace); ok {
			namespaces = append(namespaces, ns)
		}
	}
	targets, missing, err := TargetNamespaces(rd, namespaces)
	if err != nil {
		c.o.Recorder.Eventf(rd, nil, corev1.EventTypeWarning, "InvalidTargets", "Sync", "%v", err)
		return 0, nil
	}
	f := failures{v1alpha1.ResourceDistributionNamespaceNotExists: missing}
	succeeded := 0
	var errs []error
	for _, ns := range targets {
		kind, err := c.apply(ctx, rd, res, ns)
		switch {
		case kind == "":
			succeeded++
		default:
			f[kind] = append(f[kind], ns)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, ns := range c.copyNamespaces(rd, res) {
		if slices.Contains(targets, ns) {
			continue
		}
		if err := c.deleteCopy(ctx, rd, res, ns); err != nil {
			f[v1alpha1.ResourceDistributionDeleteResourceFailed] = append(f[v1alpha1.ResourceDistributionDeleteResourceFailed], ns)
			errs = append(errs, err)
		}
	}
	st := status(rd, targets, succeeded, f, metav1.NewTime(c.o.Clock.Now()))
	if !apiequality.Semantic.DeepEqual(rd.Status, st) {
		next := rd.DeepCopy()
		next.Status = st
		_, err := c.o.Shoal.AppsV1alpha1().ResourceDistributions().UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("write the status of ResourceDistribution %s: %w", rd.Name, err))
		}
	}
	if len(f[v1alpha1.ResourceDistributionConflictOccurred]) > 0 {
		klog.FromContext(ctx).V(2).Info("Same-named objects the distribution does not own are left alone",
			"distribution", rd.Name, "namespaces", f[v1alpha1.ResourceDistributionConflictOccurred])
	}
	return 0, errors.Join(errs...)
}

// copyNamespaces lists the namespaces holding a copy of rd (as the
// labelled-copy informer shows them).
func (c *Controller) copyNamespaces(rd *v1alpha1.ResourceDistribution, res resource) []string {
	inf := c.o.ConfigMaps
	if res.secret != nil {
		inf = c.o.Secrets
	}
	var out []string
	for _, o := range inf.GetIndexer().List() {
		if m, ok := o.(metav1.Object); ok && m.GetLabels()[wellknown.LabelResourceDistribution] == labelValue(rd.Name) && m.GetName() == res.name() {
			out = append(out, m.GetNamespace())
		}
	}
	return out
}

// apply makes ns's copy what rd wants. It returns the failure kind ("" on
// success) and, for API errors, the error.
func (c *Controller) apply(ctx context.Context, rd *v1alpha1.ResourceDistribution, res resource, ns string) (v1alpha1.ResourceDistributionConditionType, error) {
	now := c.o.Clock.Now().UTC().Format(time.RFC3339)
	if res.secret != nil {
		want := &corev1.Secret{ObjectMeta: copyMeta(rd, res.secret.ObjectMeta, ns), Type: res.secret.Type, Data: res.secret.Data,
			StringData: res.secret.StringData, Immutable: res.secret.Immutable}
		want.Annotations[wellknown.AnnotationResourceDistributionDistributedTimestamp] = now
		have, err := c.cached(c.o.Secrets, ns, res.name())
		if err != nil {
			return v1alpha1.ResourceDistributionGetResourceFailed, err
		}
		secrets := c.o.Client.CoreV1().Secrets(ns)
		if have == nil {
			return c.create(ctx, rd, func() error { _, err := secrets.Create(ctx, want, metav1.CreateOptions{}); return err },
				func() (metav1.Object, error) { return secrets.Get(ctx, res.name(), metav1.GetOptions{}) }, ns)
		}
		cur := have.(*corev1.Secret)
		// stringData is write-only: the copy's data holds it merged.
		wantData := maps.Clone(want.Data)
		if wantData == nil && len(want.StringData) > 0 {
			wantData = map[string][]byte{}
		}
		for k, v := range want.StringData {
			wantData[k] = []byte(v)
		}
		wantType := want.Type
		if wantType == "" {
			wantType = corev1.SecretTypeOpaque // the API's default
		}
		if sameContent(want.ObjectMeta, cur.ObjectMeta, []any{wantType, wantData}, []any{cur.Type, cur.Data}) {
			return "", nil
		}
		want.ResourceVersion = cur.ResourceVersion
		return c.update(ctx, rd, ns, func() error { _, err := secrets.Update(ctx, want, metav1.UpdateOptions{}); return err })
	}
	want := &corev1.ConfigMap{ObjectMeta: copyMeta(rd, res.cm.ObjectMeta, ns), Data: res.cm.Data, BinaryData: res.cm.BinaryData, Immutable: res.cm.Immutable}
	want.Annotations[wellknown.AnnotationResourceDistributionDistributedTimestamp] = now
	have, err := c.cached(c.o.ConfigMaps, ns, res.name())
	if err != nil {
		return v1alpha1.ResourceDistributionGetResourceFailed, err
	}
	cms := c.o.Client.CoreV1().ConfigMaps(ns)
	if have == nil {
		return c.create(ctx, rd, func() error { _, err := cms.Create(ctx, want, metav1.CreateOptions{}); return err },
			func() (metav1.Object, error) { return cms.Get(ctx, res.name(), metav1.GetOptions{}) }, ns)
	}
	cur := have.(*corev1.ConfigMap)
	if sameContent(want.ObjectMeta, cur.ObjectMeta, []any{want.Data, want.BinaryData}, []any{cur.Data, cur.BinaryData}) {
		return "", nil
	}
	want.ResourceVersion = cur.ResourceVersion
	return c.update(ctx, rd, ns, func() error { _, err := cms.Update(ctx, want, metav1.UpdateOptions{}); return err })
}

// cached returns the labelled copy ns/name from inf's store, nil if none.
func (c *Controller) cached(inf cache.SharedIndexInformer, ns, name string) (any, error) {
	obj, exists, err := inf.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return nil, err
	}
	return obj, nil
}

// create creates a copy. An object of that name already there is a
// conflict unless rd wrote it (its label lost, say), which then counts as
// done: the informer brings it back for an update.
func (c *Controller) create(ctx context.Context, rd *v1alpha1.ResourceDistribution, create func() error, get func() (metav1.Object, error), ns string) (v1alpha1.ResourceDistributionConditionType, error) {
	err := create()
	switch {
	case err == nil:
		c.o.Recorder.Eventf(rd, nil, corev1.EventTypeNormal, "Distributed", "Create", "copied the resource into namespace %s", ns)
		return "", nil
	case apierrors.IsAlreadyExists(err):
		existing, gerr := get()
		if gerr != nil {
			return v1alpha1.ResourceDistributionGetResourceFailed, gerr
		}
		if existing.GetAnnotations()[wellknown.AnnotationResourceDistributionFrom] != rd.Name {
			return v1alpha1.ResourceDistributionConflictOccurred, nil
		}
		return "", nil
	case apierrors.IsNotFound(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return v1alpha1.ResourceDistributionNamespaceNotExists, nil
	default:
		return v1alpha1.ResourceDistributionCreateResourceFailed, fmt.Errorf("copy into namespace %s: %w", ns, err)
	}
}

// update writes a copy back.
func (c *Controller) update(ctx context.Context, rd *v1alpha1.ResourceDistribution, ns string, update func() error) (v1alpha1.ResourceDistributionConditionType, error) {
	err := update()
	switch {
	case err == nil:
		c.o.Recorder.Eventf(rd, nil, corev1.EventTypeNormal, "Distributed", "Update", "updated the copy in namespace %s", ns)
		return "", nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return "", nil // a newer copy comes through the informer
	default:
		return v1alpha1.ResourceDistributionUpdateResourceFailed, fmt.Errorf("update the copy in namespace %s: %w", ns, err)
	}
}

// deleteCopy deletes rd's copy in a namespace no longer targeted.
func (c *Controller) deleteCopy(ctx context.Context, rd *v1alpha1.ResourceDistribution, res resource, ns string) error {
	var err error
	if res.secret != nil {
		err = c.o.Client.CoreV1().Secrets(ns).Delete(ctx, res.name(), metav1.DeleteOptions{})
	} else {
		err = c.o.Client.CoreV1().ConfigMaps(ns).Delete(ctx, res.name(), metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the copy in namespace %s: %w", ns, err)
	}
	c.o.Recorder.Eventf(rd, nil, corev1.EventTypeNormal, "Withdrawn", "Delete", "deleted the copy in namespace %s, no longer a target", ns)
	return nil
}
