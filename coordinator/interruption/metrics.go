package interruption

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

type metrics struct {
	received *prometheus.CounterVec
	actions  *prometheus.CounterVec
	// karp are Karpenter's metrics (shared by the loops of one registry).
	karp *karpmetrics.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_interruptions_received_total",
			Help: "Interruption reports handled, by notice kind (spot-interruption, rebalance-recommendation, scheduled-event, ...)."},
			[]string{"kind"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_interruption_actions_total",
			Help: "What interruption reports led to: delete (the NodeClaim), event (recorded only), unknown-instance, " +
				"duplicate (the same instance and kind was handled already)."},
			[]string{"action"}),
	}
	var err error
	if m.karp, err = karpmetrics.For(reg); err != nil {
		return nil, err
	}
	return m, telemetry.Register(reg, "interruption", m.received, m.actions)
}

// disruptedReason is Karpenter's karpenter_nodeclaims_disrupted_total
// reason for a NodeClaim deleted on a notice of kind: its interruption
// message kind (spot_interrupted, scheduled_change, instance_stopped,
// instance_terminated, capacity_reservation_interrupted), else the kind in snake case.
func disruptedReason(kind string) string {
	switch kind {
	case KindSpotInterruption:
		return "spot_interrupted"
	case KindScheduledEvent:
		return "scheduled_change"
	case KindInstanceStopping:
		return "instance_stopped"
	case KindInstanceTerminating:
		return "instance_terminated"
	case KindCapacityReservation:
		return "capacity_reservation_interrupted"
	}
	return strings.ReplaceAll(kind, "-", "_")
}

// queueMetrics are Karpenter's interruption queue metrics, by its names.
type queueMetrics struct {
	received *prometheus.CounterVec
	deleted  prometheus.Counter
	latency  prometheus.Histogram
}

func newQueueMetrics(reg prometheus.Registerer) (*queueMetrics, error) {
	m := &queueMetrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_interruption_received_messages_total",
			Help: "Messages received from the interruption queue, by message type (spot_interrupted, rebalance_recommendation, " +
				"scheduled_change, instance_stopped, instance_terminated, capacity_reservation_interrupted, no_op); " +
				"a message that does not parse is deleted uncounted, as in Karpenter."},
			[]string{"message_type"}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "karpenter_interruption_deleted_messages_total",
			Help: "Messages deleted from the interruption queue."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_interruption_message_queue_duration_seconds",
			Help:    "Time from an interruption event until its message was acted on and deleted from the queue.",
			Buckets: karpmetrics.DurationBuckets()}),
	}
	return m, telemetry.Register(reg, "interruption queue", m.received, m.deleted, m.latency)
}
