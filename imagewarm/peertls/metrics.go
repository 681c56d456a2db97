package peertls

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, for dashboards and tests.
const (
	// MetricCertificateExpiry is the NotAfter of the current peer
	// certificate, in Unix seconds (0 before the first).
	MetricCertificateExpiry = "shoal_agent_peer_certificate_expiry_timestamp_seconds"
	// MetricRenewals counts attempts to get a peer certificate, the first
	// included, by result (ok, error).
	MetricRenewals = "shoal_agent_peer_certificate_renewals_total"
	// MetricRequests counts the requests Guard saw, by result (allowed,
	// no_certificate, bad_certificate, not_member).
	MetricRequests = "shoal_agent_peer_tls_requests_total"
)

// Values of the "result" labels.
const (
	resultOK    = "ok"
	resultError = "error"

	resultAllowed        = "allowed"
	resultNoCertificate  = "no_certificate"
	resultBadCertificate = "bad_certificate"
	resultNotMember      = "not_member"
)

type metrics struct {
	expiry   prometheus.Gauge
	renewals *prometheus.CounterVec
	requests *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricCertificateExpiry,
			Help: "Expiry (NotAfter, Unix seconds) of the agent's current peer TLS certificate; 0 before the first.",
		}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRenewals,
			Help: "Attempts to get a peer TLS certificate from the coordinator, the first included, by result (ok, error).",
		}, []string{"result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Requests to peer blobs and the tracker, by result of the client certificate check (allowed, no_certificate, bad_certificate, not_member).",
		}, []string{"result"}),
	}
	// Every result is exported from the start, at 0, so that rate() and
	// alerts see the first refusal.
	for _, r := range []string{resultOK, resultError} {
		m.renewals.WithLabelValues(r)
	}
	for _, r := range []string{resultAllowed, resultNoCertificate, resultBadCertificate, resultNotMember} {
		m.requests.WithLabelValues(r)
	}
	return m
}

func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.expiry, m.renewals, m.requests} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering peer TLS metrics: %w", err)
		}
	}
	return nil
}
