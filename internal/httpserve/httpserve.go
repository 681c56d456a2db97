// Package httpserve is how Shoal's programs serve HTTP: the shared
// /metrics, /healthz and /readyz endpoints, and a server that runs until
// its context ends and then shuts down within a bound.
package httpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
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

// ObjectView serves GET prefix + "<namespace>/<name>" as JSON: what get
// returns for the object, 404 when it reports the object unknown (what
// names its kind in the message), and 503 on a replica that is not the
// leader (only the leader hears the agents). Views of per-node state
// (kubectl kruise get ... --nodes, --pods) are read this way through the
// apiserver's service proxy.
func ObjectView(prefix, what string, isLeader func() bool, get func(namespace, name string) (any, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "only GET is served here", http.StatusMethodNotAllowed)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		ns, name, found := strings.Cut(strings.TrimSuffix(rest, "/"), "/")
		if !ok || !found || ns == "" || name == "" || strings.Contains(name, "/") {
			http.Error(w, "want "+prefix+"<namespace>/<name>", http.StatusNotFound)
			return
		}
		if !isLeader() {
			http.Error(w, "this coordinator replica is not the leader; ask through the shoal-coordinator Service", http.StatusServiceUnavailable)
			return
		}
		view, ok := get(ns, name)
		if !ok {
			http.Error(w, what+" "+ns+"/"+name+" not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(view)
	})
}
