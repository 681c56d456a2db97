// Package httpserve is how Shoal's programs serve HTTP: the shared
// /metrics, /healthz and /readyz endpoints, and a server that runs until
// its context ends and then shuts down within a bound.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// shutdownTimeout bounds the graceful shutdown once the context ends.
const shutdownTimeout = 5 * time.Second

// Mux returns a mux serving reg on /metrics, "ok" on /healthz, and on
// /readyz "ok" or, with 503, the error ready returns. Callers add their own
// paths to it.
func Mux(reg *prometheus.Registry, ready func() error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// ListenAndServe serves h over plain HTTP on addr until ctx ends.
func ListenAndServe(ctx context.Context, addr string, h http.Handler) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return Serve(ctx, lis, &http.Server{Handler: h})
}

// Serve serves srv on lis (TLS when srv.TLSConfig is set) until ctx ends,
// then shuts it down gracefully, bounded by a few seconds. A zero
// ReadHeaderTimeout becomes 10 s.
func Serve(ctx context.Context, lis net.Listener, srv *http.Server) error {
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = 10 * time.Second
	}
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(lis, "", "")
			return
		}
		errc <- srv.Serve(lis)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serve HTTP on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stop HTTP server on %s: %w", lis.Addr(), err)
	}
	return nil
}

// Profiling adds Go's runtime profiles (net/http/pprof) under /debug/pprof/
// to mux. Programs call it only when their --profiling flag is set: the
// profiles are unauthenticated and cost CPU while they are taken.
func Profiling(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
