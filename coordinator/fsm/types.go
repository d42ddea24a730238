// Package fsm is the coordinator's replicated state machine: the tables that
// must outlive a leader (launch intents, instances, interruption reports,
// termination intents) and the commands that change them.
//
// Apply is pure: it does no I/O, reads no clock and starts no goroutine.
// Timestamps travel inside commands, stamped by the leader before it
// proposes them, so every replica computes the same state from the same log.
//
// Apply never panics on input. An entry that is empty, of an unknown type
// (without IgnoreUnknownTypeFlag), undecodable or has invalid fields is
// rejected: the response is an error wrapping ErrInvalidCommand that names
// the raft index and type, the state is unchanged, and the rejection is
// counted (Rejected) and passed to the OnReject hook, which the wiring uses
// to log. A poison entry therefore cannot crash-loop the replicas. Restore
// of a corrupt snapshot is an error too.
//
// The state is bounded. Prune (proposed by the leader's retention loop
// with a cutoff of its clock minus the retention period) removes handled
// interruption reports, finished launch intents with their gone
// instances, and finished termination intents, never anything in flight.
// Interruption reports, which agents post, are bounded as they arrive:
// fields of at most MaxReportField bytes, MaxUnhandledReportsPerInstance
// unhandled reports per instance (the newest kept) and MaxReports in all
// (the oldest handled one evicted first, then ErrTooManyReports).
package fsm

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// IntentState is where a launch intent is in the fenced launch protocol.
type IntentState string

// Launch intent states.
const (
	// IntentPending: committed by PlanCommit (or a retryable failure); the
	// next LaunchAttemptStart may begin.
	IntentPending IntentState = "pending"
	// IntentLaunching: attempt n committed; a cloud call with token n may be
	// in flight. A new leader adopts by tag or retries with the same token.
	IntentLaunching IntentState = "launching"
	// IntentLaunched: the instance is recorded.
	IntentLaunched IntentState = "launched"
	// IntentFailed: a non-retryable failure; the pods go back to planning.
	IntentFailed IntentState = "failed"
	// IntentCancelled: cancelled while pending (its pods went away).
	IntentCancelled IntentState = "cancelled"
)

// Live reports whether the intent still holds (or may yet hold) capacity:
// its pods count as nominated and its instance, if any, is wanted.
func (s IntentState) Live() bool {
	return s == IntentPending || s == IntentLaunching || s == IntentLaunched
}

// LaunchSpec is the launch frozen when the intent is committed (the cloud
// request every attempt sends) plus what the NodeClaim object needs, so a
// new leader that must recreate it after a failover recreates the same one.
type LaunchSpec struct {
	cloud.LaunchSpec
	// Labels of the planned node (the scheduler's view of in-flight
	// capacity).
	Labels map[string]string `json:"labels,omitempty"`
	// The NodeClaim object's requirements, requests and annotations (drift
	// hashes).
	Requirements     []karpv1.NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
	Requests         corev1.ResourceList                           `json:"requests,omitempty"`
	ClaimAnnotations map[string]string                             `json:"claimAnnotations,omitempty"`
}

// LaunchIntent is a decision to launch one instance for a set of pods.
type LaunchIntent struct {
	ID    string      `json:"id"`
	Spec  LaunchSpec  `json:"spec"`
	Pods  []string    `json:"pods"` // nominated pod keys (UID or namespace/name), sorted
	State IntentState `json:"state"`
	// Attempt is the last committed attempt number (0: none yet).
	Attempt    int    `json:"attempt"`
	InstanceID string `json:"instanceID,omitempty"`
	LastError  string `json:"lastError,omitempty"`
	// NoCapacity: the last failed attempt found no capacity on any
	// candidate (Failed.NoCapacity).
	NoCapacity bool      `json:"noCapacity,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// ModifyIndex is the raft index of the last change.
	ModifyIndex uint64 `json:"modifyIndex"`
}

// InstanceState is the lifecycle of a launched instance. Transitions only
// move forward through this order.
type InstanceState string

// Instance states, in order.
const (
	InstanceLaunched    InstanceState = "launched"
	InstanceRegistered  InstanceState = "registered"
	InstanceReady       InstanceState = "ready"
	InstanceDraining    InstanceState = "draining"
	InstanceTerminating InstanceState = "terminating"
	InstanceTerminated  InstanceState = "terminated"
	InstanceLost        InstanceState = "lost"
)

var instanceOrder = map[InstanceState]int{
	InstanceLaunched: 0, InstanceRegistered: 1, InstanceReady: 2, InstanceDraining: 3,
	InstanceTerminating: 4, InstanceTerminated: 5, InstanceLost: 5,
}

// Terminal reports whether the instance is gone.
func (s InstanceState) Terminal() bool { return s == InstanceTerminated || s == InstanceLost }

// Instance is a cloud instance Joiner launched.
type Instance struct {
	ID           string        `json:"id"`
	IntentID     string        `json:"intentID"`
	Attempt      int           `json:"attempt"`
	InstanceType string        `json:"instanceType"`
	Zone         string        `json:"zone"`
	CapacityType string        `json:"capacityType"`
	Price        float64       `json:"price"`
	NodeName     string        `json:"nodeName,omitempty"`
	State        InstanceState `json:"state"`
	LaunchedAt   time.Time     `json:"launchedAt"`
	UpdatedAt    time.Time     `json:"updatedAt"`
	ModifyIndex  uint64        `json:"modifyIndex"`
}

// InterruptionReport is a notice an agent (or the SQS backstop) reported.
type InterruptionReport struct {
	// ID is the notice ID (instance/kind/notice time); retries reuse it.
	ID          string    `json:"id"`
	InstanceID  string    `json:"instanceID"`
	NodeName    string    `json:"nodeName,omitempty"`
	Kind        string    `json:"kind"`
	NoticeTime  time.Time `json:"noticeTime"`
	Deadline    time.Time `json:"deadline,omitempty"`
	ReceivedAt  time.Time `json:"receivedAt"`
	Handled     bool      `json:"handled"`
	HandledAt   time.Time `json:"handledAt,omitempty"`
	ModifyIndex uint64    `json:"modifyIndex"`
}

// TerminationState is the state of a termination intent.
type TerminationState string

// Termination states.
const (
	TerminationPending TerminationState = "pending"
	TerminationDone    TerminationState = "done"
	// TerminationCancelled: withdrawn by TerminationCancel; committing the
	// same ID again re-opens it.
	TerminationCancelled TerminationState = "cancelled"
)

// TerminationIntent is a decision to terminate an instance.
type TerminationIntent struct {
	ID         string           `json:"id"`
	InstanceID string           `json:"instanceID"`
	Reason     string           `json:"reason"`
	State      TerminationState `json:"state"`
	// PriorState is the instance's state before the intent moved it to
	// terminating ("" when it did not move it); TerminationCancel restores it.
	PriorState  InstanceState `json:"priorState,omitempty"`
	CreatedAt   time.Time     `json:"createdAt"`
	DoneAt      time.Time     `json:"doneAt,omitempty"`
	ModifyIndex uint64        `json:"modifyIndex"`
}
