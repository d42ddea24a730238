package karpmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// labelCode is the eviction request's HTTP status code.
const labelCode = "code"

// evictionMetrics are karpenter_pods_eviction_requests_total and
// karpenter_pods_drained_total (the coordinator's drains).
type evictionMetrics struct {
	requests, drained *prometheus.CounterVec
}

func newEvictionMetrics() evictionMetrics {
	return evictionMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_pods_eviction_requests_total",
			Help: "The total number of pod eviction requests made by Karpenter, labeled by response code"}, []string{labelCode}),
		drained: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_pods_drained_total",
			Help: "The total number of pods drained during node termination by Karpenter, labeled by reason"}, []string{labelReason}),
	}
}

func (e evictionMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.requests, e.drained}
}

// EvictionRequest counts an eviction request by its response code as
// Karpenter counts it (drain.Observer's code: 200 for an eviction made, the
// error's status otherwise); 0 (no eviction request answered with a
// status) is not counted.
func (m *Metrics) EvictionRequest(code int) {
	if m == nil || code == 0 {
		return
	}
	m.evictions.requests.WithLabelValues(strconv.Itoa(code)).Inc()
}

// PodDrained counts a pod evicted (its eviction made) by a drain, with
// Karpenter's reason (drain.DrainedReason: Empty, Drifted, Underutilized or
// Forceful Termination).
func (m *Metrics) PodDrained(reason string) {
	if m == nil {
		return
	}
	m.evictions.drained.WithLabelValues(reason).Inc()
}
