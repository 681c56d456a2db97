package dispatch

import "github.com/prometheus/client_golang/prometheus"

// serverMetrics are the node-work server's Prometheus metrics.
type serverMetrics struct {
	connected      prometheus.GaugeFunc
	connects       *prometheus.CounterVec
	reconnects     prometheus.Counter
	protocolErrors prometheus.Counter
	reports        *prometheus.CounterVec
	reviews        *prometheus.CounterVec
	peerCerts      *prometheus.CounterVec
	workItems      *workItemsCollector
}

func newServerMetrics(s *Server) *serverMetrics {
	return &serverMetrics{
		connected: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shoal_coordinator_connected_agents",
			Help: "Agents with a live node-work stream to this replica.",
		}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(len(s.sessions))
		}),
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_agent_connects_total",
			Help: "Agent stream attempts by result: accepted, unauthenticated, forbidden, unavailable, protocol, not_leader.",
		}, []string{"result"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shoal_coordinator_agent_reconnects_total",
			Help: "Accepted streams from nodes that had connected to this replica before.",
		}),
		protocolErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shoal_coordinator_protocol_errors_total",
			Help: "Agent streams ended because a message broke the node-work protocol.",
		}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_work_reports_total",
			Help: "Work reports received from agents, by work kind.",
		}, []string{"kind"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_endpoint_access_reviews_total",
			Help: "Reviews of tokens presented to agent endpoints, by result: allowed, denied, unauthenticated_client; or the asking agent's refusal (unauthenticated, forbidden, unavailable), or error (the apiserver could not review).",
		}, []string{"result"}),
		peerCerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_peer_certificates_total",
			Help: "Agents' peer certificate requests by result: issued, bad_request, error (no CA yet); or the asking agent's refusal (unauthenticated, forbidden, unavailable).",
		}, []string{"result"}),
		workItems: &workItemsCollector{store: s.opts.Store, desc: prometheus.NewDesc(
			"shoal_coordinator_work_items",
			"Work items held for nodes, by kind and by the state the node last reported (dispatched: no report yet).",
			[]string{"kind", "state"}, nil)},
	}
}

func (m *serverMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.connected, m.connects, m.reconnects, m.protocolErrors, m.reports, m.reviews, m.peerCerts, m.workItems}
}

func (m *serverMetrics) refused(reason string) { m.connects.WithLabelValues(reason).Inc() }

func (m *serverMetrics) reviewed(result string) { m.reviews.WithLabelValues(result).Inc() }

func (m *serverMetrics) issued(result string) { m.peerCerts.WithLabelValues(result).Inc() }

func (m *serverMetrics) accepted(reconnect bool) {
	m.connects.WithLabelValues("accepted").Inc()
	if reconnect {
		m.reconnects.Inc()
	}
}

// workItemsCollector reads the store's counts at scrape time.
type workItemsCollector struct {
	store *Store
	desc  *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *workItemsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *workItemsCollector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.store.Counts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
