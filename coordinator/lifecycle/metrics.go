package lifecycle

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

type metrics struct {
	launched, registered, initialized *prometheus.CounterVec
	deleted                           *prometheus.CounterVec
	instancesGone                     *prometheus.CounterVec
	initDuration                      prometheus.Histogram
	// karp are Karpenter's metrics (shared by the loops of one registry).
	karp *karpmetrics.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		launched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_nodeclaims_launched_total",
			Help: "NodeClaims marked Launched, by nodepool."}, []string{"nodepool"}),
		registered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_nodeclaims_registered_total",
			Help: "NodeClaims marked Registered (their Node joined), by nodepool."}, []string{"nodepool"}),
		initialized: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_nodeclaims_initialized_total",
			Help: "NodeClaims marked Initialized (their Node is usable), by nodepool."}, []string{"nodepool"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_nodeclaims_lifecycle_deleted_total",
			Help: "NodeClaims the lifecycle deleted, by nodepool and reason (insufficient_capacity, launch_failed, launch_timeout, registration_timeout, orphan, instance_gone)."},
			[]string{"nodepool", "reason"}),
		instancesGone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_instances_gone_total",
			Help: "Instances garbage collection found gone from the cloud, by recorded state (lost, terminated)."}, []string{"state"}),
		initDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "joiner_nodeclaim_initialization_duration_seconds",
			Help:    "Time from NodeClaim creation to Initialized.",
			Buckets: []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900}}),
	}
	var err error
	if m.karp, err = karpmetrics.For(reg); err != nil {
		return nil, err
	}
	return m, telemetry.Register(reg, "lifecycle", m.launched, m.registered, m.initialized, m.deleted, m.instancesGone, m.initDuration)
}

// disruptedReason is Karpenter's karpenter_nodeclaims_disrupted_total
// reason for a deletion of the lifecycle's: garbage_collected for a claim
// whose instance is gone, else the lifecycle's own reason (launch_timeout
// and registration_timeout are Karpenter's too).
func disruptedReason(reason string) string {
	if reason == ReasonInstanceGone {
		return "garbage_collected"
	}
	return reason
}
