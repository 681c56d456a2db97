package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_requests_total", Help: "h"}, []string{"result", "code"})
	c.WithLabelValues("ok", "200").Add(3)
	c.WithLabelValues("ok", "204").Add(2)
	c.WithLabelValues("failed", "500").Inc()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_inflight", Help: "h"})
	g.Set(4)
	u := prometheus.NewUntypedFunc(prometheus.UntypedOpts{Name: "test_untyped", Help: "h"}, func() float64 { return 1.5 })
	reg.MustRegister(c, g, u)

	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{name: "all series", metric: "test_requests_total", want: 6},
		{name: "one label", metric: "test_requests_total", labels: map[string]string{"result": "ok"}, want: 5},
		{name: "all labels", metric: "test_requests_total", labels: map[string]string{"result": "ok", "code": "204"}, want: 2},
		{name: "no series matches", metric: "test_requests_total", labels: map[string]string{"result": "refused"}, want: 0},
		{name: "a label the series lack", metric: "test_requests_total", labels: map[string]string{"node": "a"}, want: 0},
		{name: "gauge", metric: "test_inflight", want: 4},
		{name: "untyped", metric: "test_untyped", want: 1.5},
		{name: "no such family", metric: "test_absent", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Sum(t, reg, tc.metric, tc.labels))
		})
	}
}
