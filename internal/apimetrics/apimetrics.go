// Package apimetrics counts a program's requests to the Kubernetes API by
// verb, resource and status code, through the client's transport, so that
// operators (and benchmarks) see how many writes a controller makes.
package apimetrics

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// Counter counts API requests.
type Counter struct {
	requests *prometheus.CounterVec
}

// New returns a Counter whose metric, <prefix>_api_requests_total, is
// registered with reg (nil registers nothing).
func New(prefix string, reg prometheus.Registerer) (*Counter, error) {
	c := &Counter{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "_api_requests_total",
		Help: "Requests to the Kubernetes API by verb (the HTTP method; watches are GET), resource (with subresource, e.g. pods/status) and status code.",
	}, []string{"verb", "resource", "code"})}
	if reg != nil {
		if err := reg.Register(c.requests); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Instrument makes the clients built from cfg count their requests.
func (c *Counter) Instrument(cfg *rest.Config) {
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripper{rt: rt, c: c}
	}
}

type roundTripper struct {
	rt http.RoundTripper
	c  *Counter
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	r.c.requests.WithLabelValues(req.Method, Resource(req.URL.Path), code).Inc()
	return resp, err
}

// Resource names the resource of an API path: /api/v1/namespaces/ns/pods/p/status
// is "pods/status", /apis/apps.kruise.io/v1beta1/namespaces/ns/clonesets is
// "clonesets.apps.kruise.io", /api/v1/namespaces/ns is "namespaces". Other
// paths (discovery, /healthz) are "other".
func Resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			parts = parts[:1] // a namespace itself
		} else {
			parts = parts[2:]
		}
	}
	if len(parts) == 0 {
		return "other"
	}
	res := parts[0]
	if group != "" {
		res += "." + group
	}
	if len(parts) >= 3 {
		res += "/" + parts[2]
	}
	return res
}
