package lifecycle

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/events"
)

// Condition reasons the lifecycle writes.
const (
	ReasonLaunched             = "Launched"
	ReasonLaunchFailed         = "LaunchFailed"
	ReasonRegistered           = "Registered"
	ReasonInitialized          = "Initialized"
	ReasonReady                = "Ready"
	ReasonNotLaunched          = "NotLaunched"
	ReasonNotRegistered        = "NotRegistered"
	ReasonNotInitialized       = "NotInitialized"
	ReasonConditionsNotAllTrue = "ConditionsNotAllTrue"
)

// condition returns the condition of type t, or nil.
func condition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// isTrue reports whether condition t is True.
func isTrue(conds []metav1.Condition, t string) bool {
	c := condition(conds, t)
	return c != nil && c.Status == metav1.ConditionTrue
}

// setCondition sets condition t and reports whether anything changed. The
// transition time moves only when the status does, so re-setting the same
// condition is a no-op (every write of the loop is idempotent).
func setCondition(conds *[]metav1.Condition, t string, status metav1.ConditionStatus, reason, message string,
	generation int64, now metav1.Time) bool {
	if c := condition(*conds, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message && c.ObservedGeneration == generation {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.ObservedGeneration = status, reason, message, generation
		return true
	}
	*conds = append(*conds, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: now})
	return true
}

// setReady derives Ready from Launched, Registered and Initialized
// (Karpenter's root condition): True when all three are, False when one is
// False, Unknown otherwise.
func setReady(nc *karpv1.NodeClaim, now metav1.Time) bool {
	status, reason := metav1.ConditionTrue, ReasonReady
	for _, t := range []string{karpv1.ConditionLaunched, karpv1.ConditionRegistered, karpv1.ConditionInitialized} {
		c := condition(nc.Status.Conditions, t)
		switch {
		case c != nil && c.Status == metav1.ConditionFalse:
			status, reason = metav1.ConditionFalse, ReasonConditionsNotAllTrue
		case (c == nil || c.Status != metav1.ConditionTrue) && status == metav1.ConditionTrue:
			status, reason = metav1.ConditionUnknown, ReasonConditionsNotAllTrue
		}
	}
	return setCondition(&nc.Status.Conditions, karpv1.ConditionReady, status, reason, "", nc.Generation, now)
}

// transitions are the Events Karpenter's status controller records for the
// conditions that changed from before to nc's: one per condition whose
// status changed, a condition that was not there counting as Unknown (as
// Karpenter initialises them).
func transitions(before []metav1.Condition, nc *karpv1.NodeClaim) []events.Event {
	var out []events.Event
	for _, c := range nc.Status.Conditions {
		from := metav1.ConditionUnknown
		if old := condition(before, c.Type); old != nil {
			from = old.Status
		}
		if from != c.Status {
			out = append(out, events.ConditionTransitioned(nc, c.Type, string(from), string(c.Status), c.Reason, c.Message))
		}
	}
	return out
}
