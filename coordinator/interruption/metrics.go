package interruption

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.received, m.actions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering interruption metrics: %w", err)
		}
	}
	return m, nil
}
