// Package webhook is the coordinator's admission webhook server: TLS with
// the coordinator's own CA, AdmissionReview v1 decoding, a handler per path,
// and latency metrics. Feature packages register their handlers on it.
package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/internal/httpserve"
)

// Handler decides one admission request. It returns the response without
// UID (the server fills it in).
type Handler func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// maxBody bounds an AdmissionReview body (the apiserver's own request limit
// is 3 MiB of object plus the review envelope).
const maxBody = 8 << 20

// Server serves admission webhooks over TLS.
type Server struct {
	mux      *http.ServeMux
	getCert  func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	serving  atomic.Bool
	duration *prometheus.HistogramVec
}

// NewServer returns a server that takes its certificate from getCert.
func NewServer(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), reg prometheus.Registerer) *Server {
	s := &Server{
		mux:     http.NewServeMux(),
		getCert: getCert,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shoal_coordinator_webhook_duration_seconds",
			Help:    "Admission webhook latency by path and result (allowed, denied, error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"path", "result"}),
	}
	if reg != nil {
		reg.MustRegister(s.duration)
	}
	return s
}

// Handle registers h on path. Call before Run.
func (s *Server) Handle(path string, h Handler) {
	s.mux.Handle(path, s.review(path, h))
}

// Serving reports whether the listener is up.
func (s *Server) Serving() bool { return s.serving.Load() }

// Run serves on addr until ctx ends.
func (s *Server) Run(ctx context.Context, addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for webhooks on %s: %w", addr, err)
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	return httpserve.Serve(ctx, lis, &http.Server{
		Handler:     s.mux,
		TLSConfig:   &tls.Config{GetCertificate: s.getCert, MinVersion: tls.VersionTLS12},
		BaseContext: func(net.Listener) context.Context { return ctx },
	})
}

func (s *Server) review(path string, h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		result := "error"
		defer func() { s.duration.WithLabelValues(path, result).Observe(time.Since(start).Seconds()) }()
		log := klog.FromContext(r.Context()).WithValues("path", path)

		if r.Method != http.MethodPost {
			http.Error(w, "admission reviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			http.Error(w, "admission review unreadable or over 8 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("body is not an admission.k8s.io/v1 AdmissionReview with a request: %v", err), http.StatusBadRequest)
			return
		}
		req := review.Request
		ctx, cancel := answerBy(r)
		defer cancel()
		resp := h(klog.NewContext(ctx, log.WithValues("kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)), req)
		if resp == nil {
			resp = &admissionv1.AdmissionResponse{Allowed: true}
		}
		resp.UID = req.UID
		result = "denied"
		if resp.Allowed {
			result = "allowed"
		}
		review.Request, review.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&review); err != nil {
			log.Error(err, "Write admission response")
		}
	})
}

// answerBy is the request's context, ending a fifth before the timeout the
// apiserver sends in the URL (?timeout=3s): after it the apiserver stops
// waiting and applies the webhook's failurePolicy, so an answer that takes
// longer is lost (and, for a webhook that fails open, the request goes
// through unchecked). Handlers that call the API bound their calls by it.
func answerBy(r *http.Request) (context.Context, context.CancelFunc) {
	d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || d <= 0 {
		return context.WithCancel(r.Context())
	}
	return context.WithTimeout(r.Context(), d-d/5)
}

// Deny builds a denial with an HTTP 422 status and the message.
func Deny(message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: message,
	}}
}

// AllowAll allows every request unchanged: the handler of a webhook whose
// feature is switched off.
func AllowAll(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}
