package podunavailablebudget

import (
	"context"
	"errors"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
)

// ErrNoScale says a kind is unknown to the API server or has no scale
// subresource, so its replicas cannot be read.
var ErrNoScale = errors.New("no scale subresource")

// Scales reads the scale subresource of workloads of kinds Shoal has no
// informer for: any custom workload that declares one
// (subresources.scale in its CRD) can be a budget's targetRef.
type Scales interface {
	// Scale returns the scale of the workload of kind gk named name in
	// namespace: an error for which apierrors.IsNotFound is true when it
	// does not exist, and one wrapping ErrNoScale when its kind has no
	// scale subresource.
	Scale(ctx context.Context, namespace string, gk schema.GroupKind, name string) (*autoscalingv1.Scale, error)
}

// discoveryScales is Scales over the API server's discovery (cached, and
// refreshed once when a kind is not found: CRDs come and go) and the
// scale client.
type discoveryScales struct {
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	resolver scale.ScaleKindResolver
	client   scale.ScalesGetter
}

// NewScales returns Scales for the cluster of cfg.
func NewScales(cfg *rest.Config) (Scales, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	cachedDiscovery := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cachedDiscovery)
	resolver := scale.NewDiscoveryScaleKindResolver(cachedDiscovery)
	client, err := scale.NewForConfig(rest.CopyConfig(cfg), mapper, dynamic.LegacyAPIPathResolverFunc, resolver)
	if err != nil {
		return nil, fmt.Errorf("scale client: %w", err)
	}
	return &discoveryScales{mapper: mapper, resolver: resolver, client: client}, nil
}

// Scale implements Scales.
func (s *discoveryScales) Scale(ctx context.Context, namespace string, gk schema.GroupKind, name string) (*autoscalingv1.Scale, error) {
	mapping, err := s.mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		s.mapper.Reset()
		mapping, err = s.mapper.RESTMapping(gk)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: kind %s: %w", ErrNoScale, gk, err)
	}
	if _, err := s.resolver.ScaleForResource(mapping.Resource); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoScale, mapping.Resource, err)
	}
	sc, err := s.client.Scales(namespace).Get(ctx, mapping.Resource.GroupResource(), name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the scale of %s %s/%s: %w", mapping.Resource.GroupResource(), namespace, name, err)
	}
	return sc, nil
}
