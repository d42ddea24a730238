package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// MessageType is the first byte of every raft log entry the FSM applies.
type MessageType uint8

// Command types. Values are persisted in the raft log: never renumber.
const (
	PlanCommitType          MessageType = 2
	LaunchAttemptStartType  MessageType = 3
	LaunchResultType        MessageType = 4
	IntentCancelType        MessageType = 5
	InstanceStatusType      MessageType = 6
	InterruptionReportType  MessageType = 7
	InterruptionHandledType MessageType = 8
	TerminationIntentType   MessageType = 9
	TerminationResultType   MessageType = 10
	// 11 was AgentUpsert, never committed by any release; do not reuse.
	TerminationCancelType MessageType = 12
	// PruneType removes finished records older than a cutoff (Prune). The
	// leader proposes it with IgnoreUnknownTypeFlag: a replica that predates
	// it skips it, and the next prune after the upgrade removes the same
	// records (pruning by cutoff converges).
	PruneType MessageType = 13

	// IgnoreUnknownTypeFlag marks a command an older replica may skip
	// rather than reject (Nomad's convention).
	IgnoreUnknownTypeFlag MessageType = 128
)

var typeNames = map[MessageType]string{
	PlanCommitType: "plan-commit", LaunchAttemptStartType: "launch-attempt-start", LaunchResultType: "launch-result",
	IntentCancelType: "intent-cancel", InstanceStatusType: "instance-status", InterruptionReportType: "interruption-report",
	InterruptionHandledType: "interruption-handled", TerminationIntentType: "termination-intent",
	TerminationResultType: "termination-result", TerminationCancelType: "termination-cancel", PruneType: "prune",
}

// String names the command type ("type-N" for an unknown one; the
// IgnoreUnknownTypeFlag is shown as a "+ignorable" suffix).
func (t MessageType) String() string {
	suffix := ""
	if t&IgnoreUnknownTypeFlag != 0 {
		t, suffix = t&^IgnoreUnknownTypeFlag, "+ignorable"
	}
	if n, ok := typeNames[t]; ok {
		return n + suffix
	}
	return fmt.Sprintf("type-%d%s", uint8(t), suffix)
}

// Bounds on the interruption reports table: whoever can post a report
// (any agent, or anyone with its credential) must not be able to grow the
// replicated state without limit.
const (
	// MaxReportField is the longest ID, instance ID, node name or kind a
	// report may carry, in bytes (a node name is at most 253); those fields
	// are printable ASCII other than " \ < > &, which JSON would escape.
	MaxReportField = 256
	// MaxUnhandledReportsPerInstance is how many unhandled reports one
	// instance ID may have; a new one evicts the instance's oldest
	// unhandled report (lowest ModifyIndex: receipt order, which a
	// reporter cannot forge the way it can a notice time).
	MaxUnhandledReportsPerInstance = 8
	// MaxReports is how many reports the table holds. At the limit a new
	// report evicts the oldest handled one (lowest ModifyIndex), and is
	// refused with ErrTooManyReports when every report is unhandled.
	MaxReports = 8192
)

// Sentinel errors returned (as the Apply response) when a command's
// precondition does not hold. State is unchanged when one is returned.
var (
	ErrUnknownIntent      = errors.New("unknown launch intent")
	ErrUnknownInstance    = errors.New("unknown instance")
	ErrUnknownReport      = errors.New("unknown interruption report")
	ErrUnknownTermination = errors.New("unknown termination intent")
	// ErrAttemptOutOfOrder: LaunchAttemptStart n where n != last+1, or the
	// intent is not in a state that may start an attempt.
	ErrAttemptOutOfOrder = errors.New("launch attempt out of order")
	// ErrStaleAttempt: a LaunchResult for an attempt that is not the
	// current one. The result is ignored.
	ErrStaleAttempt = errors.New("stale launch attempt")
	// ErrPodNominated: PlanCommit nominated one pod to two intents.
	ErrPodNominated = errors.New("pod already nominated to a live intent")
	// ErrNotPending: IntentCancel of an intent that is no longer pending.
	ErrNotPending = errors.New("launch intent not pending")
	// ErrBackwardTransition: InstanceStatus would move an instance backward.
	ErrBackwardTransition = errors.New("instance status transition backward")
	// ErrInvalidCommand: the entry is malformed (empty, unknown type,
	// undecodable payload, missing or oversized fields). It is rejected,
	// state unchanged, and counted (FSM.Rejected).
	ErrInvalidCommand = errors.New("invalid command")
	// ErrTooManyReports: an InterruptionReport would exceed MaxReports and
	// no handled report can make room.
	ErrTooManyReports = errors.New("too many interruption reports")
	// ErrTerminationNotPending: TerminationCancel of a termination intent
	// that is already done.
	ErrTerminationNotPending = errors.New("termination intent not pending")
)

// NewIntent is one intent in a PlanCommit. Pods are the pods nominated to
// it; a static pool's launch has none (and must name its pool and
// NodeClaim).
type NewIntent struct {
	ID   string     `json:"id"`
	Spec LaunchSpec `json:"spec"`
	Pods []string   `json:"pods"`
}

// PlanCommit records new launch intents as pending. A nomination is a hint
// with a lifetime: a pod the command nominates that a live intent already
// holds moves to the new intent (the planner re-planned it because the old
// nomination went stale: its node had no room, or kube-scheduler did not
// bind it in time), and a pending intent left with no pod is cancelled. The
// command is refused as a whole (ErrPodNominated, nothing committed) only
// when it nominates one pod twice. Re-committing an existing intent ID is a
// no-op.
type PlanCommit struct {
	Intents []NewIntent `json:"intents"`
	At      time.Time   `json:"at"`
}

// LaunchAttemptStart fences attempt n of an intent: accepted only when
// n == intent.Attempt+1 and the intent is pending or launching.
type LaunchAttemptStart struct {
	IntentID string    `json:"intentID"`
	Attempt  int       `json:"attempt"`
	At       time.Time `json:"at"`
}

// Launched is the success half of a LaunchResult.
type Launched struct {
	InstanceID   string    `json:"instanceID"`
	InstanceType string    `json:"instanceType"`
	Zone         string    `json:"zone"`
	CapacityType string    `json:"capacityType"`
	Price        float64   `json:"price"`
	LaunchedAt   time.Time `json:"launchedAt"`
}

// Failed is the failure half of a LaunchResult.
type Failed struct {
	Reason    string `json:"reason"`
	Retryable bool   `json:"retryable"`
	// NoCapacity: every candidate offering was out of capacity (Karpenter
	// counts the NodeClaim it gives up as insufficient_capacity).
	NoCapacity bool `json:"noCapacity,omitempty"`
}

// LaunchResult records the outcome of attempt n. Exactly one of Launched and
// Failed is set. Results for any attempt other than the current one are
// ignored (ErrStaleAttempt); a repeated result is a no-op.
type LaunchResult struct {
	IntentID string    `json:"intentID"`
	Attempt  int       `json:"attempt"`
	Launched *Launched `json:"launched,omitempty"`
	Failed   *Failed   `json:"failed,omitempty"`
	At       time.Time `json:"at"`
}

// IntentCancel cancels a pending intent (its pods went away).
type IntentCancel struct {
	IntentID string    `json:"intentID"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// InstanceStatus moves an instance forward in its lifecycle.
type InstanceStatus struct {
	InstanceID string        `json:"instanceID"`
	State      InstanceState `json:"state"`
	NodeName   string        `json:"nodeName,omitempty"`
	At         time.Time     `json:"at"`
}

// InterruptionReportCmd upserts a report by its notice ID.
type InterruptionReportCmd struct {
	Report InterruptionReport `json:"report"`
}

// InterruptionHandled marks a report handled.
type InterruptionHandled struct {
	ReportID string    `json:"reportID"`
	At       time.Time `json:"at"`
}

// TerminationIntentCmd records a decision to terminate an instance, moves
// the instance to terminating and releases the pods its launch intent
// nominated (they need a new home). An instance the FSM has no record of
// (one Karpenter launched, adopted with its NodeClaim) gets the intent
// alone. Idempotent by ID, except that it re-opens a cancelled intent.
type TerminationIntentCmd struct {
	ID         string    `json:"id"`
	InstanceID string    `json:"instanceID"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// TerminationCancel withdraws a pending termination intent (a disruption
// rolled back because its replacement failed): the intent becomes
// cancelled (a later TerminationIntentCmd with the same ID re-opens it) and
// the instance returns to the state it had before the intent. The pods the
// instance's launch intent nominated stay released. Cancelling an unknown
// intent returns ErrUnknownTermination, a done one ErrTerminationNotPending;
// cancelling a cancelled one is a no-op.
type TerminationCancel struct {
	ID     string    `json:"id"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Prune removes finished records last changed before Cutoff, which the
// leader chooses (its clock minus the retention period); nothing in flight
// is ever removed:
//   - interruption reports handled before Cutoff (never an unhandled one);
//   - launch intents that failed or were cancelled before Cutoff;
//   - a launched intent together with its instance, once the instance is
//     terminated or lost, both last changed before Cutoff and no pending
//     termination intent names the instance;
//   - termination intents done or cancelled before Cutoff whose instance
//     is no longer recorded (or goes in the same prune), so no remaining
//     launch intent's nominations depend on them.
//
// A zero Cutoff is invalid. Prunable reports what a Prune would remove.
type Prune struct {
	Cutoff time.Time `json:"cutoff"`
}

// TerminationResult records that the cloud terminated the instance.
type TerminationResult struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// Encode renders a command as a log entry: the type byte then the JSON
// payload. encoding/json is deterministic for these types (struct fields in
// declaration order, map keys sorted).
func Encode(t MessageType, cmd any) ([]byte, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encoding command %d: %w", t, err)
	}
	buf := make([]byte, 0, len(body)+1)
	buf = append(buf, byte(t))
	return append(buf, body...), nil
}

// MustEncode is Encode for commands that cannot fail to encode.
func MustEncode(t MessageType, cmd any) []byte {
	b, err := Encode(t, cmd)
	if err != nil {
		panic(err)
	}
	return b
}
