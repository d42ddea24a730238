package termination

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/internal/telemetry"
)

type metrics struct {
	terminated *prometheus.CounterVec
	duration   prometheus.Histogram
	drained    prometheus.Counter
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
	}
	return m, telemetry.Register(reg, "termination", m.terminated, m.duration, m.drained)
}
