package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// kubeletAPIVersion is the version string kubelet sends in CRI Version
// requests; runtimes ignore it, but it is sent for parity with kubelet.
const kubeletAPIVersion = "0.1.0"

// Runtime is a connection to the node's CRI runtime: its runtime and image
// services plus what the runtime said about itself.
type Runtime struct {
	endpoint   Endpoint
	name       string
	version    string
	apiVersion string
	rs         internalapi.RuntimeService
	is         internalapi.ImageManagerService
}

// Connect dials the CRI runtime and image services at ep and asks the
// runtime for its name and version. timeout bounds connecting and, as in
// kubelet's CRI client, each later call made through the services.
func Connect(ctx context.Context, ep Endpoint, timeout time.Duration) (*Runtime, error) {
	logger := klog.FromContext(ctx)
	rs, err := remote.NewRemoteRuntimeService(ctx, ep.Address, timeout, nil, false)
	if err != nil {
		return nil, fmt.Errorf("connect to CRI runtime service at %s: %w", ep.Address, err)
	}
	is, err := remote.NewRemoteImageService(ctx, ep.Address, timeout, nil, false)
	if err != nil {
		closeErr := rs.Close(ctx)
		return nil, errors.Join(fmt.Errorf("connect to CRI image service at %s: %w", ep.Address, err), closeErr)
	}
	rt, err := NewRuntime(ctx, ep, rs, is)
	if err != nil {
		return nil, errors.Join(err, rs.Close(ctx), is.Close(ctx))
	}
	logger.Info("Connected to container runtime", "endpoint", ep.Address,
		"runtime", rt.Name(), "version", rt.Version(), "apiVersion", rt.APIVersion())
	return rt, nil
}

// NewRuntime wraps already connected services (or fakes) in a Runtime,
// asking rs for the runtime's name and version. The Runtime owns the
// services: Close closes them.
func NewRuntime(ctx context.Context, ep Endpoint, rs internalapi.RuntimeService, is internalapi.ImageManagerService) (*Runtime, error) {
	v, err := rs.Version(ctx, kubeletAPIVersion)
	if err != nil {
		return nil, fmt.Errorf("CRI Version from %s: %w", ep.Address, err)
	}
	return &Runtime{
		endpoint:   ep,
		name:       v.GetRuntimeName(),
		version:    v.GetRuntimeVersion(),
		apiVersion: v.GetRuntimeApiVersion(),
		rs:         rs,
		is:         is,
	}, nil
}

// Endpoint returns the endpoint the runtime was reached at.
func (r *Runtime) Endpoint() Endpoint { return r.endpoint }

// Name returns the runtime's own name, such as "containerd" or "cri-o".
func (r *Runtime) Name() string { return r.name }

// Version returns the runtime's version exactly as it reports it, such as
// "1.6.20" or "v1.7.2".
func (r *Runtime) Version() string { return r.version }

// APIVersion returns the CRI API version the runtime speaks, such as "v1".
func (r *Runtime) APIVersion() string { return r.apiVersion }

// RuntimeService returns the CRI runtime service.
func (r *Runtime) RuntimeService() internalapi.RuntimeService { return r.rs }

// ImageService returns the CRI image service.
func (r *Runtime) ImageService() internalapi.ImageManagerService { return r.is }

// Inventory reads the pods and containers on the node; see ReadInventory.
func (r *Runtime) Inventory(ctx context.Context) (Inventory, error) {
	return ReadInventory(ctx, r.rs)
}

// Close closes the runtime and image service connections.
func (r *Runtime) Close(ctx context.Context) error {
	var errs []error
	if err := r.rs.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close CRI runtime service: %w", err))
	}
	if err := r.is.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close CRI image service: %w", err))
	}
	return errors.Join(errs...)
}
