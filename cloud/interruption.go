package cloud

import "time"

// InterruptionKind is what an interruption queue message says about its
// instances. The values are Karpenter's message kinds, and the values of
// karpenter_interruption_received_messages_total{message_type}.
type InterruptionKind string

// Interruption kinds.
const (
	// InterruptionSpot: EC2 Spot Instance Interruption Warning (the
	// instance is reclaimed two minutes after the event).
	InterruptionSpot InterruptionKind = "spot_interrupted"
	// InterruptionRebalance: EC2 Instance Rebalance Recommendation (the
	// spot instance is at elevated risk of interruption).
	InterruptionRebalance InterruptionKind = "rebalance_recommendation"
	// InterruptionCapacityReservation: EC2 Capacity Reservation Instance
	// Interruption Warning (the owner of the interruptible reservation the
	// instance runs in reclaims it; the instance goes two minutes later).
	InterruptionCapacityReservation InterruptionKind = "capacity_reservation_interrupted"
	// InterruptionScheduledChange: an AWS Health scheduledChange event of
	// EC2 (instance retirement, maintenance) naming the instances.
	InterruptionScheduledChange InterruptionKind = "scheduled_change"
	// InterruptionStopped: EC2 Instance State-change Notification to
	// stopping or stopped.
	InterruptionStopped InterruptionKind = "instance_stopped"
	// InterruptionTerminated: EC2 Instance State-change Notification to
	// shutting-down or terminated.
	InterruptionTerminated InterruptionKind = "instance_terminated"
	// InterruptionNoOp: a message nobody acts on (another event type, a
	// state Joiner does not react to, a body that does not parse).
	InterruptionNoOp InterruptionKind = "no_op"
)

// InterruptionMessage is one message of the interruption queue, parsed.
type InterruptionMessage struct {
	// ID is the queue's message ID; Receipt deletes the message.
	ID      string
	Receipt string
	// EventID is the EventBridge event's id ("" when the body has none).
	EventID string
	Kind    InterruptionKind
	// Time is the event's time (the queue's send time when the body has
	// none): how long the message waited is measured from it.
	Time time.Time
	// Events are the instances the message names, one event each (a
	// scheduled change may name several); none for a no-op.
	Events []InterruptionEvent
	// Err says why the body did not parse (Kind is then no_op).
	Err error
}

// InterruptionEvent is what a message says about one instance.
type InterruptionEvent struct {
	InstanceID string
	Kind       InterruptionKind
	// Time is the event's time.
	Time time.Time
	// Deadline is when the instance is expected to go (spot: two minutes
	// after the warning; scheduled change: its start; a state change: at
	// once); zero when the event gives none (rebalance).
	Deadline time.Time
	// Detail is the spot or reservation instance-action, the health event
	// type code or the instance state.
	Detail string
}
