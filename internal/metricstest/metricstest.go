// Package metricstest reads metrics back from a Prometheus gatherer in
// tests. It is not test code itself, but only tests use it.
package metricstest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// Sum gathers g and sums the values of the series of the metric family
// name whose labels include every name=value pair of labels (a label
// asked for with the value "" matches series without it). It is 0 when no
// series matches. The family must be a counter, a gauge or untyped.
func Sum(t require.TestingT, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	mfs, err := g.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !matches(m, labels) {
				continue
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				sum += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				sum += m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				sum += m.GetUntyped().GetValue()
			default:
				require.Failf(t, "metric type not summed", "%s is a %s", name, mf.GetType())
			}
		}
	}
	return sum
}

// matches reports whether m's labels include every pair of labels.
func matches(m *dto.Metric, labels map[string]string) bool {
	have := make(map[string]string, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		have[lp.GetName()] = lp.GetValue()
	}
	for k, v := range labels {
		if have[k] != v {
			return false
		}
	}
	return true
}
