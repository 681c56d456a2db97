package swarm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Fetcher's Prometheus metrics.
type metrics struct {
	fetches         *prometheus.CounterVec
	fetchSeconds    prometheus.Histogram
	pieces          *prometheus.CounterVec
	received        prometheus.Counter
	upstreamBytes   prometheus.Counter
	wasted          prometheus.Counter
	duplicates      prometheus.Counter
	busy            prometheus.Counter
	badPieces       prometheus.Counter
	mismatches      prometheus.Counter
	blacklisted     prometheus.Counter
	leases          prometheus.Counter
	upstreamRetries prometheus.Counter
}

// newMetrics creates the metrics and registers them with reg (if not nil).
// inflight reports the node's piece requests in flight.
func newMetrics(reg prometheus.Registerer, inflight func() float64) (*metrics, error) {
	const ns, sub = "shoal_agent", "swarm"
	m := &metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fetches_total",
			Help: "Blob fetches that ended, by result (verified, failed, cancelled)."}, []string{"result"}),
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "fetch_seconds",
			Help: "Duration of blob fetches.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}),
		pieces: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "pieces_total",
			Help: "Pieces stored, by source (peer, upstream)."}, []string{"source"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "received_bytes_total",
			Help: "Bytes received, from peers and upstream."}),
		upstreamBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "upstream_bytes_total",
			Help: "Bytes received from registries."}),
		wasted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "duplicate_bytes_total",
			Help: "Bytes of pieces that arrived after another copy (endgame and hedging)."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "duplicate_requests_total",
			Help: "Piece requests sent to a second holder (endgame and hedging)."}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "busy_answers_total",
			Help: "429 answers from holders at their upload cap."}),
		badPieces: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "bad_pieces_total",
			Help: "Pieces that did not match their published sha256."}),
		mismatches: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "digest_mismatches_total",
			Help: "Complete blobs whose sha256 did not match their digest (fetched again)."}),
		blacklisted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "blacklistings_total",
			Help: "Times a peer was blacklisted for sending bad data."}),
		leases: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "upstream_leases_total",
			Help: "Upstream leases granted to this node."}),
		upstreamRetries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "upstream_retries_total",
			Help: "Upstream streams retried after a failure (429, 5xx, reset)."}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	requests := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "piece_requests_in_flight",
		Help: "Piece requests to peers in flight, over all fetches (at most the fetcher's MaxInflight)."}, inflight)
	for _, c := range []prometheus.Collector{requests, m.fetches, m.fetchSeconds, m.pieces, m.received, m.upstreamBytes, m.wasted,
		m.duplicates, m.busy, m.badPieces, m.mismatches, m.blacklisted, m.leases, m.upstreamRetries} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
