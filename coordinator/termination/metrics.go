package termination

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

type metrics struct {
	terminated *prometheus.CounterVec
	duration   prometheus.Histogram
	drained    prometheus.Counter
	volumeWait *prometheus.HistogramVec
	// karp are Karpenter's metrics (shared by the loops of one registry).
	karp *karpmetrics.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		terminated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_nodeclaims_terminated_total",
			Help: "NodeClaims whose termination finished (finalizer removed), by disruption reason."}, []string{"reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "joiner_termination_duration_seconds",
			Help:    "Time from a NodeClaim's deletion to the removal of its finalizer (drain, instance termination, Node deletion).",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14)}),
		drained: prometheus.NewCounter(prometheus.CounterOpts{Name: "joiner_nodes_drained_total",
			Help: "Nodes the termination controller drained."}),
		volumeWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "joiner_termination_volume_detach_wait_seconds",
			Help:    "How long a drained NodeClaim's instance waited for its pods' VolumeAttachments to be deleted; result detached, or grace_elapsed (the terminationGracePeriod ended the wait).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}, []string{"result"}),
	}
	var err error
	if m.karp, err = karpmetrics.For(reg); err != nil {
		return nil, err
	}
	return m, telemetry.Register(reg, "termination", m.terminated, m.duration, m.drained, m.volumeWait)
}

// Eviction implements drain.Observer: Karpenter's
// karpenter_pods_eviction_requests_total counts the drainer's eviction
// requests by response code, karpenter_pods_drained_total the pods it
// evicted by reason.
func (m *metrics) Eviction(result string, code int, reason string) {
	m.karp.Evictions().Eviction(result, code, reason)
}
