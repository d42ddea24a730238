package karpmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/drain"
)

// evictionMetrics are Karpenter's eviction counters for the coordinator's
// drains (drain.KarpenterCounters; the agents serve their own).
type evictionMetrics struct {
	counters *drain.KarpenterCounters
}

func newEvictionMetrics() evictionMetrics {
	return evictionMetrics{counters: drain.NewKarpenterCounters()}
}

func (e evictionMetrics) collectors() []prometheus.Collector { return e.counters.Collectors() }

// Evictions are Karpenter's eviction counters (a drain.Observer); nil on a
// nil *Metrics (counting nothing).
func (m *Metrics) Evictions() *drain.KarpenterCounters {
	if m == nil {
		return nil
	}
	return m.evictions.counters
}
