package persistentpodstate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// errNotWatched is the error of a workload whose kind is white-listed but
// whose objects are not in a cache yet: its resource was not found (a CRD
// not installed yet) or its informer has not synced (the coordinator may
// not list it).
var errNotWatched = errors.New("its kind is white-listed but not watched yet")

const (
	// customRetry is how soon a PersistentPodState, or a generation,
	// waiting for its kind's cache looks again.
	customRetry = 2 * time.Second
	// resolveEvery is how often white-listed kinds whose resource was not
	// found are looked up again.
	resolveEvery = 10 * time.Second
)

// customKinds follows the white-listed StatefulSet-like kinds: one dynamic
// informer per kind, started when the kind is listed and its resource
// found, stopped when the kind leaves the list.
type customKinds struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
	// handler is the event handler of a kind's informer.
	handler func(schema.GroupKind) cache.ResourceEventHandlerFuncs

	mu      sync.Mutex
	kinds   WhiteList
	watches map[schema.GroupKind]*customWatch
	// changed wakes run when kinds changes (buffered, 1).
	changed chan struct{}
}

// customWatch is the informer of one white-listed kind.
type customWatch struct {
	gvk      schema.GroupVersionKind
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

func newCustomKinds(dyn dynamic.Interface, mapper meta.ResettableRESTMapper, handler func(schema.GroupKind) cache.ResourceEventHandlerFuncs) *customKinds {
	return &customKinds{dyn: dyn, mapper: mapper, handler: handler,
		watches: map[schema.GroupKind]*customWatch{}, changed: make(chan struct{}, 1)}
}

// list is the white list followed now.
func (k *customKinds) list() WhiteList {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kinds
}

// set replaces the white list and reports whether it changed.
func (k *customKinds) set(l WhiteList) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if slices.Equal(k.kinds, l) {
		return false
	}
	k.kinds = l
	select {
	case k.changed <- struct{}{}:
	default:
	}
	return true
}

// informer is the informer of kind gk, nil while there is none.
func (k *customKinds) informer(gk schema.GroupKind) cache.SharedIndexInformer {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w := k.watches[gk]; w != nil {
		return w.informer
	}
	return nil
}

// each calls fn with every cached object of every white-listed kind.
func (k *customKinds) each(fn func(schema.GroupKind, any)) {
	k.mu.Lock()
	watches := make(map[schema.GroupKind]cache.SharedIndexInformer, len(k.watches))
	for gk, w := range k.watches {
		watches[gk] = w.informer
	}
	k.mu.Unlock()
	for gk, inf := range watches {
		for _, obj := range inf.GetStore().List() {
			fn(gk, obj)
		}
	}
}

// run keeps an informer running for each white-listed kind until ctx
// ends: at once when the list changes, and every resolveEvery for kinds
// whose resource was not found.
func (k *customKinds) run(ctx context.Context) {
	log := klog.FromContext(ctx).WithName("persistentpodstate-custom-kinds")
	ctx = klog.NewContext(ctx, log)
	tick := time.NewTicker(resolveEvery)
	defer tick.Stop()
	for {
		k.reconcile(ctx)
		select {
		case <-ctx.Done():
			k.mu.Lock()
			for _, w := range k.watches {
				w.stop()
			}
			k.mu.Unlock()
			return
		case <-k.changed:
		case <-tick.C:
		}
	}
}

// reconcile stops the informers of kinds no longer listed (or listed at
// another version) and starts those of listed kinds that have none.
func (k *customKinds) reconcile(ctx context.Context) {
	log := klog.FromContext(ctx)
	kinds := k.list()
	k.mu.Lock()
	for gk, w := range k.watches {
		if !slices.Contains(kinds, w.gvk) {
			w.stop()
			delete(k.watches, gk)
			log.Info("Stopped following a custom workload kind", "kind", w.gvk)
		}
	}
	var missing []schema.GroupVersionKind
	for _, gvk := range kinds {
		if k.watches[gvk.GroupKind()] == nil {
			missing = append(missing, gvk)
		}
	}
	k.mu.Unlock()
	if len(missing) == 0 {
		return
	}
	if k.dyn == nil || k.mapper == nil {
		log.Info("Custom workload kinds are white-listed, but this coordinator has no dynamic client: they are not followed", "kinds", missing)
		return
	}
	for _, gvk := range missing {
		mapping, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			k.mapper.Reset() // a CRD installed since the last discovery
			mapping, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			log.Info("A white-listed custom workload kind is not served; looking again later", "kind", gvk, "err", err.Error())
			continue
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(k.dyn, mapping.Resource, metav1.NamespaceAll, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
		if _, err := inf.AddEventHandler(k.handler(gvk.GroupKind())); err != nil {
			log.Error(err, "Watch a custom workload kind", "kind", gvk)
			continue
		}
		resource := mapping.Resource
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
			klog.FromContext(ctx).Error(err, "Cannot watch a white-listed custom workload kind; grant the coordinator's ServiceAccount get, list and watch on it",
				"kind", gvk, "resource", resource)
		})
		wctx, stop := context.WithCancel(ctx)
		k.mu.Lock()
		k.watches[gvk.GroupKind()] = &customWatch{gvk: gvk, informer: inf, stop: stop}
		k.mu.Unlock()
		go inf.RunWithContext(wctx)
		log.Info("Following a custom workload kind", "kind", gvk, "resource", resource)
	}
}
