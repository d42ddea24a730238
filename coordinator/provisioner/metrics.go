package provisioner

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

type metrics struct {
	pending            prometheus.Gauge
	schedulingDuration prometheus.Histogram
	nodeClaimsCreated  *prometheus.CounterVec
	launchErrors       *prometheus.CounterVec
	// karp are Karpenter's metrics (shared by the loops of one registry).
	karp *karpmetrics.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "joiner_pods_pending",
			Help: "Pods that need capacity at the last provisioning pass (unschedulable and not nominated, plus pods of disrupted nodes)."}),
		schedulingDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "joiner_scheduling_duration_seconds",
			Help: "Time the scheduler took to plan one batch of pending pods.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		nodeClaimsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_nodeclaims_created_total",
			Help: "NodeClaims created, by nodepool, reason (provisioning or a disruption replacement) and whether minValues was relaxed."},
			[]string{"nodepool", "reason", "min_values_relaxed"}),
		launchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_provisioning_errors_total",
			Help: "Planned NodeClaims that could not be committed, by stage (prepare, commit)."}, []string{"stage"}),
	}
	var err error
	if m.karp, err = karpmetrics.For(reg); err != nil {
		return nil, err
	}
	return m, telemetry.Register(reg, "provisioner", m.pending, m.schedulingDuration, m.nodeClaimsCreated, m.launchErrors)
}
