package interruption

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/internal/telemetry"
)

type metrics struct {
	received *prometheus.CounterVec
	actions  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_interruptions_received_total",
			Help: "Interruption reports handled, by notice kind (spot-interruption, rebalance-recommendation, scheduled-event, ...)."},
			[]string{"kind"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_interruption_actions_total",
			Help: "What interruption reports led to: delete (the NodeClaim), event (recorded only), unknown-instance."},
			[]string{"action"}),
	}
	return m, telemetry.Register(reg, "interruption", m.received, m.actions)
}
