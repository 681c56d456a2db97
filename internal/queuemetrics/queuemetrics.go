// Package queuemetrics exports client-go's work queue metrics (depth,
// adds, time waiting, time in sync, retries, work in flight) to
// Prometheus, one series per named queue. They show which controller is
// behind: a growing depth, or a queue duration far above the work
// duration, means keys wait for a worker.
package queuemetrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Register creates the metrics <prefix>_workqueue_* in reg and makes them
// client-go's work queue metrics. Queues created before the call are not
// measured, and only the first call in a process takes effect: client-go
// keeps one provider per process.
func Register(prefix string, reg prometheus.Registerer) error {
	p := newProvider(prefix)
	if err := p.register(reg); err != nil {
		return err
	}
	workqueue.SetProvider(p)
	return nil
}

// provider implements workqueue.MetricsProvider.
type provider struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

// buckets span 1 ms to about 65 s.
var buckets = prometheus.ExponentialBuckets(0.001, 2, 17)

func newProvider(prefix string) *provider {
	name := func(s string) string { return prefix + "_workqueue_" + s }
	labels := []string{"name"}
	return &provider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("depth"),
			Help: "Keys waiting in the work queue."}, labels),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("adds_total"),
			Help: "Keys added to the work queue."}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name("queue_duration_seconds"),
			Help: "Time a key waits in the work queue before a worker takes it.", Buckets: buckets}, labels),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name("work_duration_seconds"),
			Help: "Time a worker spends syncing one key.", Buckets: buckets}, labels),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("unfinished_work_seconds"),
			Help: "Seconds of work in flight that has not finished yet; a steady rise means a stuck sync."}, labels),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("longest_running_processor_seconds"),
			Help: "Seconds the longest sync in flight has been running."}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("retries_total"),
			Help: "Keys queued again after a failed sync, with backoff."}, labels),
	}
}

func (p *provider) register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longestRunning, p.retries} {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}

func (p *provider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}

func (p *provider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}

func (p *provider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}

func (p *provider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}

func (p *provider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}

func (p *provider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longestRunning.WithLabelValues(name)
}

func (p *provider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}
