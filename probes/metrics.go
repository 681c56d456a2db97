package probes

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, for dashboards and tests.
const (
	// MetricResults counts probes run, by kind (exec, tcp, http,
	// unsupported) and result (succeeded, failed, or error: no verdict, the
	// previous state was kept).
	MetricResults = "shoal_agent_probe_results_total"
	// MetricStateChanges counts reported state changes, by the new state
	// (Unknown, Succeeded, Failed); a key's first result counts as one.
	MetricStateChanges = "shoal_agent_probe_state_changes_total"
	// MetricWorkers is the number of probe workers running.
	MetricWorkers = "shoal_agent_probe_workers"
)

// Values of the "result" label of MetricResults.
const (
	resultSucceeded = "succeeded"
	resultFailed    = "failed"
	resultError     = "error"
)

type metrics struct {
	results      *prometheus.CounterVec
	stateChanges *prometheus.CounterVec
	workers      prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricResults,
			Help: "PodProbeMarker probes run, by kind (exec, tcp, http, unsupported) and result (succeeded, failed; error: the probe could not be run and the previous state was kept).",
		}, []string{"kind", "result"}),
		stateChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricStateChanges,
			Help: "PodProbeMarker probe state changes, by new state (Unknown, Succeeded, Failed).",
		}, []string{"state"}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricWorkers,
			Help: "PodProbeMarker probe workers running (one per pod, container and probe).",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.results, m.stateChanges, m.workers}
}

func (m *metrics) probed(kind string, st State, err error) {
	result := resultError
	switch {
	case err != nil:
	case st == StateSucceeded:
		result = resultSucceeded
	default:
		result = resultFailed
	}
	m.results.WithLabelValues(kind, result).Inc()
}

func (m *metrics) stateChange(st State) {
	m.stateChanges.WithLabelValues(string(st)).Inc()
}
