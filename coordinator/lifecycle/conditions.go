package lifecycle

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/events"
)

// Condition reasons the lifecycle writes, Karpenter's: a condition set
// True has its type as reason; the Unknown ones say what is awaited.
const (
	ReasonLaunched    = "Launched"
	ReasonRegistered  = "Registered"
	ReasonInitialized = "Initialized"
	ReasonReady       = "Ready"
	// ReasonLaunchFailed: Launched stays Unknown with the error (Karpenter
	// retries a failed launch; Joiner deletes the claim of a failed
	// intent, as Karpenter does at its launch timeout).
	ReasonLaunchFailed = "LaunchFailed"
	// ReasonAwaitingReconciliation: operatorpkg's reason of a condition
	// nothing has decided yet.
	ReasonAwaitingReconciliation = "AwaitingReconciliation"
	// ReasonNodeNotFound: no Node has the claim's providerID (Registered,
	// or Initialized when the Node went away).
	ReasonNodeNotFound = "NodeNotFound"
	// Initialized waits for: the Node Ready, the claim's startup taints
	// and the known ephemeral taints gone, requested resources registered.
	ReasonNodeNotReady              = "NodeNotReady"
	ReasonStartupTaintsExist        = "StartupTaintsExist"
	ReasonKnownEphemeralTaintsExist = "KnownEphemeralTaintsExist"
	ReasonResourceNotRegistered     = "ResourceNotRegistered"
	// Ready's reasons while a dependent is not True: Unknown while one is
	// Unknown, False when one is False.
	ReasonReconcilingDependents = "ReconcilingDependents"
	ReasonUnhealthyDependents   = "UnhealthyDependents"
	// ReasonConsistencyCheckFailed: ConsistentStateFound False.
	ReasonConsistencyCheckFailed = "ConsistencyCheckFailed"
)

const (
	messageAwaitingReconciliation = "object is awaiting reconciliation"
	messageNodeNotFound           = "Node not registered with cluster"
)

// readyDependents are the conditions Ready is derived from.
var readyDependents = []string{karpv1.ConditionLaunched, karpv1.ConditionRegistered, karpv1.ConditionInitialized}

// condition returns the condition of type t, or nil.
func condition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// isFalse reports whether condition t is False.
func isFalse(conds []metav1.Condition, t string) bool {
	c := condition(conds, t)
	return c != nil && c.Status == metav1.ConditionFalse
}

// unknown reports whether condition t is Unknown or absent (operatorpkg
// initialises an absent one Unknown).
func unknown(conds []metav1.Condition, t string) bool {
	c := condition(conds, t)
	return c == nil || c.Status == metav1.ConditionUnknown
}

// isTrue reports whether condition t is True.
func isTrue(conds []metav1.Condition, t string) bool {
	c := condition(conds, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

// The NodeClaim's conditions are written as Karpenter's condition library
// (awslabs/operatorpkg status.ConditionSet) writes them, so what users,
// their alerts and the operator_nodeclaim_status_condition_* series see is
// Karpenter's:
//   - Ready, Launched, Registered and Initialized always exist: absent ones
//     start Unknown (AwaitingReconciliation) at the claim's creation;
//   - a condition's transition time moves only when its status does; every
//     write records the claim's generation;
//   - after any other condition is set, Ready is recomputed: True when its
//     dependents all are, else Unknown (ReconcilingDependents) or, when one
//     is False, False (UnhealthyDependents), its message listing the
//     dependents that are not True, latest transition first;
//   - the list is kept sorted by transition time, Ready last (for kubectl).
//
// Each function reports whether anything changed; all are idempotent.

// initConditions adds Ready and its dependents where absent.
func initConditions(nc *karpv1.NodeClaim, now metav1.Time) bool {
	changed := false
	for _, t := range append([]string{karpv1.ConditionReady}, readyDependents...) {
		if condition(nc.Status.Conditions, t) == nil {
			setCondition(nc, t, metav1.ConditionUnknown, ReasonAwaitingReconciliation, messageAwaitingReconciliation, now)
			changed = true
		}
	}
	return changed
}

// setCondition sets condition t (then Ready, when t is not Ready).
func setCondition(nc *karpv1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string, now metav1.Time) bool {
	conds := &nc.Status.Conditions
	next := metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: nc.Generation}
	if c := condition(*conds, t); c != nil {
		next.LastTransitionTime = now
		if c.Status == status {
			next.LastTransitionTime = c.LastTransitionTime
		}
		if *c == next {
			return false
		}
		*c = next
	} else {
		// A dependent that was never set was Unknown since creation.
		next.LastTransitionTime = now
		if t == karpv1.ConditionReady || slices.Contains(readyDependents, t) {
			next.LastTransitionTime = nc.CreationTimestamp
		}
		*conds = append(*conds, next)
	}
	slices.SortStableFunc(*conds, func(a, b metav1.Condition) int {
		switch {
		case a.Type == karpv1.ConditionReady && b.Type == karpv1.ConditionReady:
			return 0
		case a.Type == karpv1.ConditionReady:
			return 1
		case b.Type == karpv1.ConditionReady:
			return -1
		}
		return a.LastTransitionTime.Time.Compare(b.LastTransitionTime.Time)
	})
	if t != karpv1.ConditionReady {
		setReady(nc, now)
	}
	return true
}

// setReady recomputes Ready from its dependents.
func setReady(nc *karpv1.NodeClaim, now metav1.Time) bool {
	var unhealthy []metav1.Condition
	for _, c := range nc.Status.Conditions {
		if slices.Contains(readyDependents, c.Type) &&
			(c.Status != metav1.ConditionTrue || c.ObservedGeneration != nc.Generation) {
			unhealthy = append(unhealthy, c)
		}
	}
	if len(unhealthy) == 0 {
		return setCondition(nc, karpv1.ConditionReady, metav1.ConditionTrue, ReasonReady, "", now)
	}
	slices.SortStableFunc(unhealthy, func(a, b metav1.Condition) int {
		return b.LastTransitionTime.Time.Compare(a.LastTransitionTime.Time)
	})
	status, reason := metav1.ConditionUnknown, ReasonReconcilingDependents
	parts := make([]string, len(unhealthy))
	for i, c := range unhealthy {
		parts[i] = c.Type + "=" + string(c.Status)
		if c.Status == metav1.ConditionFalse && c.ObservedGeneration == nc.Generation {
			status, reason = metav1.ConditionFalse, ReasonUnhealthyDependents
		}
	}
	return setCondition(nc, karpv1.ConditionReady, status, reason, strings.Join(parts, ", "), now)
}

// transitions are the Events Karpenter's status controller records for the
// conditions that changed from before to nc's: one per condition whose
// status changed, a missing Ready or dependent counting as Unknown (as
// Karpenter initialises them); another condition's first appearance
// (ConsistentStateFound) is not a transition, as operatorpkg has not
// observed it before.
func transitions(before []metav1.Condition, nc *karpv1.NodeClaim) []events.Event {
	var out []events.Event
	for _, c := range nc.Status.Conditions {
		from := metav1.ConditionUnknown
		if old := condition(before, c.Type); old != nil {
			from = old.Status
		} else if c.Type != karpv1.ConditionReady && !slices.Contains(readyDependents, c.Type) {
			continue
		}
		if from != c.Status {
			out = append(out, events.ConditionTransitioned(nc, c.Type, string(from), string(c.Status), c.Reason, c.Message))
		}
	}
	return out
}
