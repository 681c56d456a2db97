package podunavailablebudget

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
)

// API groups of the workloads Shoal follows from its own informers.
const (
	groupApps   = "apps"
	groupKruise = "apps.kruise.io"
)

// ref names a workload by API group, kind and name (the version does not
// matter: a CloneSet is the same object at v1alpha1 and v1beta1).
type ref struct {
	group, kind, name string
	uid               types.UID
}

func (r ref) groupKind() schema.GroupKind { return schema.GroupKind{Group: r.group, Kind: r.kind} }

func (r ref) same(o ref) bool { return r.group == o.group && r.kind == o.kind && r.name == o.name }

func (r ref) String() string {
	if r.group == "" {
		return r.kind + " " + r.name
	}
	return r.kind + "." + r.group + " " + r.name
}

// refOf is an owner reference as a ref.
func refOf(o *metav1.OwnerReference) ref {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return ref{group: gv.Group, kind: o.Kind, name: o.Name, uid: o.UID}
}

// targetOf is a budget's targetRef as a ref.
func targetOf(t *policyv1alpha1.TargetReference) ref {
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	return ref{group: gv.Group, kind: t.Kind, name: t.Name}
}

// scaledWorkload is what a budget needs of a workload: its identity, replicas
// and whether it is going away.
type scaledWorkload struct {
	ref
	replicas int32
	deleting bool
}

// informerOf returns the informer holding a kind Shoal watches, nil for
// any other kind.
func (w *Workloads) informerOf(gk schema.GroupKind) cache.SharedIndexInformer {
	switch gk {
	case schema.GroupKind{Group: groupApps, Kind: "Deployment"}:
		return w.Deployments
	case schema.GroupKind{Group: groupApps, Kind: "ReplicaSet"}:
		return w.ReplicaSets
	case schema.GroupKind{Group: groupApps, Kind: "StatefulSet"}:
		return w.StatefulSets
	case schema.GroupKind{Group: groupKruise, Kind: "CloneSet"}:
		return w.CloneSets
	case schema.GroupKind{Group: groupKruise, Kind: "StatefulSet"}:
		return w.AdvancedStatefulSets
	}
	return nil
}

// cached returns the informer's object of namespace and name, nil if
// there is none (or no informer).
func cached(inf cache.SharedIndexInformer, namespace, name string) (metav1.Object, error) {
	if inf == nil {
		return nil, nil
	}
	obj, exists, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s from the cache: %w", namespace, name, err)
	}
	if !exists {
		return nil, nil
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in the cache", obj)
	}
	return m, nil
}

// replicasOf reads spec.replicas (unset is 1) of a cached workload.
func replicasOf(obj metav1.Object) int32 {
	var r *int32
	switch w := obj.(type) {
	case *appsv1.Deployment:
		r = w.Spec.Replicas
	case *appsv1.ReplicaSet:
		r = w.Spec.Replicas
	case *appsv1.StatefulSet:
		r = w.Spec.Replicas
	case *v1beta1.CloneSet:
		r = w.Spec.Replicas
	case *v1beta1.StatefulSet:
		r = w.Spec.Replicas
	}
	if r == nil {
		return 1
	}
	return *r
}

// lookup returns the workload of namespace that r names, nil if it does
// not exist; kinds Shoal does not watch are read through their scale
// subresource (Options.Scales, once per sync through memo).
func (c *Controller) lookup(ctx context.Context, namespace string, r ref, memo map[ref]*scaledWorkload) (*scaledWorkload, error) {
	key := ref{group: r.group, kind: r.kind, name: r.name}
	if w, ok := memo[key]; ok {
		return w, nil
	}
	w, err := c.w.lookupUncached(ctx, namespace, r)
	if err != nil {
		return nil, err
	}
	if memo != nil {
		memo[key] = w
	}
	return w, nil
}

func (w *Workloads) lookupUncached(ctx context.Context, namespace string, r ref) (*scaledWorkload, error) {
	if inf := w.informerOf(r.groupKind()); inf != nil {
		obj, err := cached(inf, namespace, r.name)
		if err != nil || obj == nil {
			return nil, err
		}
		return &scaledWorkload{ref: ref{group: r.group, kind: r.kind, name: r.name, uid: obj.GetUID()},
			replicas: replicasOf(obj), deleting: obj.GetDeletionTimestamp() != nil}, nil
	}
	if w.Scales == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoScale, r)
	}
	s, err := w.Scales.Scale(ctx, namespace, r.groupKind(), r.name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the replicas of %s in %s: %w", r, namespace, err)
	}
	return &scaledWorkload{ref: ref{group: r.group, kind: r.kind, name: r.name, uid: s.UID},
		replicas: s.Spec.Replicas, deleting: s.DeletionTimestamp != nil}, nil
}

// owners is the pod's chain of controllers as far as the caches tell: its
// controller and, when that is a ReplicaSet, StatefulSet, CloneSet or
// Advanced StatefulSet Shoal watches, that one's controller (a
// Deployment, a UnitedDeployment, an Argo Rollout, ...).
func (w *Workloads) owners(pod *corev1.Pod) []ref {
	o := metav1.GetControllerOf(pod)
	if o == nil {
		return nil
	}
	first := refOf(o)
	chain := []ref{first}
	obj, err := cached(w.informerOf(first.groupKind()), pod.Namespace, first.name)
	if err != nil || obj == nil || obj.GetUID() != first.uid {
		return chain
	}
	if up := metav1.GetControllerOf(obj); up != nil {
		chain = append(chain, refOf(up))
	}
	return chain
}

// ownedBy reports whether target is in the pod's chain of controllers.
func (c *Controller) ownedBy(pod *corev1.Pod, target ref) bool {
	return slices.ContainsFunc(c.w.owners(pod), target.same)
}

// selects reports whether a selector budget covers the pod: a selector
// that is empty or invalid covers nothing.
func selects(pub *policyv1alpha1.PodUnavailableBudget, pod *corev1.Pod) bool {
	if pub.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pub.Spec.Selector)
	if err != nil || sel.Empty() {
		return false
	}
	return sel.Matches(labels.Set(pod.Labels))
}

// covers reports whether pub covers the pod: its targetRef (which wins
// over a selector) is in the pod's chain of controllers, or its selector
// matches the pod's labels.
func (c *Controller) covers(pub *policyv1alpha1.PodUnavailableBudget, pod *corev1.Pod) bool {
	if pub.Namespace != pod.Namespace {
		return false
	}
	if t := pub.Spec.TargetReference; t != nil {
		return c.ownedBy(pod, targetOf(t))
	}
	return selects(pub, pod)
}

// Budgets lists the cached PodUnavailableBudgets of a namespace, by name
// (shared cache objects: not to be changed).
func (c *Controller) Budgets(namespace string) ([]*policyv1alpha1.PodUnavailableBudget, error) {
	objs, err := c.o.Budgets.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("list the PodUnavailableBudgets of namespace %s: %w", namespace, err)
	}
	out := make([]*policyv1alpha1.PodUnavailableBudget, 0, len(objs))
	for _, o := range objs {
		if pub, ok := o.(*policyv1alpha1.PodUnavailableBudget); ok {
			out = append(out, pub)
		}
	}
	slices.SortFunc(out, func(a, b *policyv1alpha1.PodUnavailableBudget) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// BudgetFor returns the PodUnavailableBudget (not being deleted) that
// covers the pod, nil if none does; of several (which the validating
// webhook refuses to create), the first by name. It reads the informer
// caches only, so the pod webhook can ask on every request.
func (c *Controller) BudgetFor(pod *corev1.Pod) (*policyv1alpha1.PodUnavailableBudget, error) {
	pubs, err := c.Budgets(pod.Namespace)
	if err != nil {
		return nil, err
	}
	for _, pub := range pubs {
		if pub.DeletionTimestamp == nil && c.covers(pub, pod) {
			return pub, nil
		}
	}
	return nil, nil
}

// podsIn lists the cached pods of a namespace.
func (c *Controller) podsIn(namespace string) []*corev1.Pod {
	objs, err := c.o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		objs = c.o.Pods.GetIndexer().List()
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out
}

// matched is what a budget is computed over.
type matched struct {
	// pods are the active pods the budget covers.
	pods []*corev1.Pod
	// total is the replica count the budget is computed against.
	total int32
	// target is the workload of a targetRef, nil when it does not exist
	// (or for a selector).
	target *scaledWorkload
	// unscalable says why the targetRef's replicas cannot be read (a kind
	// without a scale subresource); the budget then covers nothing.
	unscalable error
}

// match finds the pods pub covers and its total replicas:
//   - targetRef: the workload's active pods (those it controls, or whose
//     ReplicaSet, StatefulSet or CloneSet it controls) and its
//     spec.replicas; none and 0 when it does not exist or is being
//     deleted;
//   - selector: the active pods whose labels match and the replicas of
//     their workloads, each counted once (a ReplicaSet's Deployment
//     stands for it; a workload being deleted counts 0), plus 1 per pod
//     without a controller;
//
// and the pub.kruise.io/protect-total-replicas annotation, when set,
// overrides the total.
func (c *Controller) match(ctx context.Context, pub *policyv1alpha1.PodUnavailableBudget) (matched, error) {
	var m matched
	memo := map[ref]*scaledWorkload{}
	if t := pub.Spec.TargetReference; t != nil {
		target := targetOf(t)
		w, err := c.lookup(ctx, pub.Namespace, target, memo)
		if errors.Is(err, ErrNoScale) {
			m.unscalable = err
			return m, nil
		}
		if err != nil {
			return m, err
		}
		if w == nil || w.deleting {
			return m, nil
		}
		m.target, m.total = w, w.replicas
		for _, p := range c.podsIn(pub.Namespace) {
			if Active(p) && c.ownedBy(p, target) {
				m.pods = append(m.pods, p)
			}
		}
	} else {
		for _, p := range c.podsIn(pub.Namespace) {
			if Active(p) && selects(pub, p) {
				m.pods = append(m.pods, p)
			}
		}
		total, err := c.expectedScale(ctx, pub.Namespace, m.pods, memo)
		if err != nil {
			return m, err
		}
		m.total = total
	}
	slices.SortFunc(m.pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return m, nil
}

// expectedScale adds up the replicas of the workloads of pods, each
// counted once: the outermost controller the caches know (a Deployment
// for a ReplicaSet it controls); a pod without a controller, or whose
// controller's replicas cannot be read, counts 1.
func (c *Controller) expectedScale(ctx context.Context, namespace string, pods []*corev1.Pod, memo map[ref]*scaledWorkload) (int32, error) {
	var total int32
	seen := map[ref]bool{}
	for _, p := range pods {
		chain := c.w.owners(p)
		if len(chain) == 0 {
			total++
			continue
		}
		// The outermost controller whose replicas can be read.
		var w *scaledWorkload
		var err error
		for i := len(chain) - 1; i >= 0; i-- {
			if w, err = c.lookup(ctx, namespace, chain[i], memo); !errors.Is(err, ErrNoScale) {
				break
			}
		}
		if errors.Is(err, ErrNoScale) {
			total++ // no controller with replicas to read: the pod counts
			continue
		}
		if err != nil {
			return 0, err
		}
		if w == nil || w.deleting {
			continue // going away: its pods do not count
		}
		key := ref{group: w.group, kind: w.kind, name: w.name}
		if !seen[key] {
			seen[key] = true
			total += w.replicas
		}
	}
	return total, nil
}
