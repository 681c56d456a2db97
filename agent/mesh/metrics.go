package mesh

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// membersDesc describes shoal_agent_mesh_members.
var membersDesc = prometheus.NewDesc(
	"shoal_agent_mesh_members",
	"Mesh members this agent knows (itself included), by state (alive, suspect, dead). Dead members are remembered for an hour.",
	[]string{"state"}, nil,
)

// membersCollector computes shoal_agent_mesh_members at scrape time.
type membersCollector struct {
	m *Mesh
}

// Describe implements prometheus.Collector.
func (c membersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- membersDesc }

// Collect implements prometheus.Collector.
func (c membersCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.m.stateCounts()
	for _, st := range []State{StateAlive, StateSuspect, StateDead} {
		ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// registerMetrics registers the mesh's metrics on reg.
func registerMetrics(reg prometheus.Registerer, m *Mesh) error {
	if err := reg.Register(membersCollector{m: m}); err != nil {
		return fmt.Errorf("registering shoal_agent_mesh_members: %w", err)
	}
	if err := reg.Register(m.events); err != nil {
		return fmt.Errorf("registering shoal_agent_mesh_events_total: %w", err)
	}
	return nil
}
