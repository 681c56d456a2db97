package endpointauth

import "github.com/prometheus/client_golang/prometheus"

// RequestsCounter is the guard's request counter of result, for tests.
func (g *Guard) RequestsCounter(result string) prometheus.Counter {
	return g.requests.WithLabelValues(result)
}

// Cached is the number of cached decisions, for tests.
func (g *Guard) Cached() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cache)
}
