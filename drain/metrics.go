package drain

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// KarpenterCounters are Karpenter's eviction metrics for the drains of one
// process: karpenter_pods_eviction_requests_total (eviction requests by
// response code) and karpenter_pods_drained_total (pods evicted, by
// drained reason). The coordinator's termination and every node agent
// serve them for their own drains, so sums over all scrape targets count
// every eviction Joiner makes. Its Eviction method is an Observer.
type KarpenterCounters struct {
	requests, drained *prometheus.CounterVec
}

// NewKarpenterCounters returns unregistered counters (Collectors).
func NewKarpenterCounters() *KarpenterCounters {
	return &KarpenterCounters{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_pods_eviction_requests_total",
			Help: "The total number of pod eviction requests made by Karpenter, labeled by response code"}, []string{"code"}),
		drained: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_pods_drained_total",
			Help: "The total number of pods drained during node termination by Karpenter, labeled by reason"}, []string{"reason"}),
	}
}

// Collectors are the counters to register.
func (k *KarpenterCounters) Collectors() []prometheus.Collector {
	return []prometheus.Collector{k.requests, k.drained}
}

// Eviction implements Observer as Karpenter counts: an eviction request by
// its response code (200 for an eviction made, the error's status
// otherwise; 0, no request answered with a status, is not counted) and an
// evicted pod by its drained reason (DrainedReason). Safe on nil.
func (k *KarpenterCounters) Eviction(result string, code int, reason string) {
	if k == nil {
		return
	}
	if code != 0 {
		k.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	}
	if result == ResultEvicted {
		k.drained.WithLabelValues(reason).Inc()
	}
}
