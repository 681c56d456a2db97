package blobserver

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, for dashboards and tests.
const (
	// MetricServedBytes counts body bytes sent, by role and source.
	MetricServedBytes = "shoal_agent_blob_served_bytes_total"
	// MetricRequests counts blob-endpoint requests, by role and status code.
	MetricRequests = "shoal_agent_blob_requests_total"
	// MetricUploadsInFlight is the number of peer uploads being served.
	MetricUploadsInFlight = "shoal_agent_blob_uploads_in_flight"
	// MetricAborted counts responses cut short after their headers.
	MetricAborted = "shoal_agent_blob_responses_aborted_total"
	// MetricPullThrough counts runtime requests for blobs absent from the
	// node, by result (started: fetched for the runtime; refused: 404).
	MetricPullThrough = "shoal_agent_blob_pull_through_total"
	// MetricSpreadRefused counts peer requests refused to spread pieces.
	MetricSpreadRefused = "shoal_agent_blob_spread_refused_total"
)

// Sources of served bytes (the "source" label).
const (
	sourceStore   = "store"   // a verified blob of the agent's store
	sourceRuntime = "runtime" // the runtime's content store (BlobSource)
	sourcePartial = "partial" // present pieces of a blob being fetched
)

type metrics struct {
	served   *prometheus.CounterVec
	requests *prometheus.CounterVec
	inFlight prometheus.Gauge
	aborted  *prometheus.CounterVec
	// pullThrough counts PullThrough calls by result.
	pullThrough *prometheus.CounterVec
	// spreadRefused counts peer requests refused by SpreadWindow.
	spreadRefused prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricServedBytes,
			Help: "Blob bytes sent, by role (peer, runtime) and source (store: verified blob of the agent; runtime: the runtime's content store; partial: pieces of a blob being fetched).",
		}, []string{"role", "source"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Requests to the registry endpoint, by role (peer, runtime) and HTTP status code.",
		}, []string{"role", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricUploadsInFlight,
			Help: "Blob uploads to peers being served now (capped by the upload limit).",
		}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAborted,
			Help: "Blob responses cut short after the headers were sent (client gone, piece stalled, read error), by role.",
		}, []string{"role"}),
		pullThrough: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPullThrough,
			Help: "Runtime requests for blobs the node did not hold, by result (started: fetched through the swarm while streaming; refused: answered 404 so the runtime goes upstream).",
		}, []string{"result"}),
		spreadRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricSpreadRefused,
			Help: "Peer requests for pieces of a blob still being fetched that this node had just given another peer (answered 404: take it from that peer).",
		}),
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.served, m.requests, m.inFlight, m.aborted, m.pullThrough, m.spreadRefused} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering blob server metrics: %w", err)
		}
	}
	return nil
}
