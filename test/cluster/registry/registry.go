// Package registry runs the local cluster's image registry: the OCI
// distribution registry of go-containerregistry, over plain HTTP.
//
// Blobs are stored on disk, so image layers survive a restart and are not
// uploaded again. go-containerregistry keeps manifests and tags in memory
// only (it has no disk option for them), so after a restart the images must
// be pushed again; images.BuildAndPushAll does that, and since the blobs are
// still on disk only the small manifests travel. Serve itself restores
// nothing.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// shutdownTimeout bounds how long Serve waits for requests in flight once
// its context is done; connections still open then are closed.
const shutdownTimeout = 5 * time.Second

// NewHandler returns the registry's HTTP handler with blobs stored under dir,
// which it creates if needed. opts are passed on to go-containerregistry
// (registry.Logger, for example).
func NewHandler(dir string, opts ...ggcrregistry.Option) (http.Handler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create registry blob dir: %w", err)
	}
	opts = append([]ggcrregistry.Option{ggcrregistry.WithBlobHandler(ggcrregistry.NewDiskBlobHandler(dir))}, opts...)
	return ggcrregistry.New(opts...), nil
}

// Serve runs the registry with blobs stored under dir, listening on each of
// addrs (host:port) until ctx is done. It returns nil once ctx is done, or
// the first error of binding or serving. When ctx is done it waits up to 5s
// for requests in flight, then closes every connection.
func Serve(ctx context.Context, addrs []string, dir string) error {
	var listeners []net.Listener
	for _, addr := range addrs {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return fmt.Errorf("registry listen on %s: %w", addr, err)
		}
		listeners = append(listeners, l)
	}
	return ServeListeners(ctx, listeners, dir)
}

// ServeListeners is Serve on listeners that are already bound; it closes
// them before returning.
func ServeListeners(ctx context.Context, listeners []net.Listener, dir string) error {
	handler, err := NewHandler(dir)
	if err != nil {
		for _, l := range listeners {
			_ = l.Close()
		}
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}

	errs := make(chan error, len(listeners))
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Go(func() {
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("registry serve on %s: %w", l.Addr(), err)
			}
		})
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errs:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close() // cut off what is still running
	}
	wg.Wait()
	return serveErr
}
