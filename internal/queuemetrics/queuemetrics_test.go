package queuemetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// TestQueueMetrics: a named queue made after Register reports its adds,
// depth, waits, syncs and retries under its name. (client-go keeps one
// provider per process, so this is the package's only Register.)
func TestQueueMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, Register("test", reg))
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "widgets"})
	defer q.ShutDown()

	q.Add("a")
	q.Add("b")
	m := gather(t, reg)
	require.InDelta(t, 2, m["test_workqueue_depth"], 0)
	require.InDelta(t, 2, m["test_workqueue_adds_total"], 0)

	key, _ := q.Get()
	q.Done(key)
	q.AddRateLimited(key)
	m = gather(t, reg)
	require.InDelta(t, 1, m["test_workqueue_depth"], 0)
	require.InDelta(t, 1, m["test_workqueue_retries_total"], 0)
	require.InDelta(t, 1, m["test_workqueue_queue_duration_seconds"], 0, "one key taken")
	require.InDelta(t, 1, m["test_workqueue_work_duration_seconds"], 0, "one sync done")
}

// gather returns each metric of queue "widgets" by name: a gauge's or a
// counter's value, a histogram's sample count.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != "widgets" {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				out[f.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[f.GetName()] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[f.GetName()] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
