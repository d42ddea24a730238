package events

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Karpenter's reasons (kubernetes-sigs/karpenter v1.14 pkg/events and the
// AWS provider's event files), recorded by Joiner for the same happenings.
const (
	// provisioning
	Nominated                 = "Nominated"
	FailedScheduling          = "FailedScheduling"
	NoCompatibleInstanceTypes = "NoCompatibleInstanceTypes"
	// disruption
	DisruptionBlocked          = "DisruptionBlocked"
	DisruptionLaunching        = "DisruptionLaunching"
	DisruptionTerminating      = "DisruptionTerminating"
	DisruptionWaitingReadiness = "DisruptionWaitingReadiness"
	Unconsolidatable           = "Unconsolidatable"
	ConsolidationApproved      = "ConsolidationApproved"
	ConsolidationCandidate     = "ConsolidationCandidate"
	ConsolidationRejected      = "ConsolidationRejected"
	// node termination
	Evicted                        = "Evicted"
	Disrupted                      = "Disrupted"
	FailedDraining                 = "FailedDraining"
	AwaitingVolumeDetachment       = "AwaitingVolumeDetachment"
	TerminationGracePeriodExpiring = "TerminationGracePeriodExpiring"
	// nodeclaim lifecycle
	InsufficientCapacityError = "InsufficientCapacityError"
	NodeClassNotReady         = "NodeClassNotReady"
	UnregisteredTaintMissing  = "UnregisteredTaintMissing"
	FailedConsistencyCheck    = "FailedConsistencyCheck"
	// status conditions (awslabs/operatorpkg): the reason is the
	// condition's type (Launched, Registered, Initialized, Ready, ...).
	Finalized = "Finalized"
	// interruption (AWS provider)
	SpotInterrupted                        = "SpotInterrupted"
	SpotRebalanceRecommendation            = "SpotRebalanceRecommendation"
	CapacityReservationInstanceInterrupted = "CapacityReservationInstanceInterrupted"
	InstanceStopping                       = "InstanceStopping"
	InstanceTerminating                    = "InstanceTerminating"
	InstanceUnhealthy                      = "InstanceUnhealthy"
	TerminatingOnInterruption              = "TerminatingOnInterruption"
	// EC2NodeClass (AWS provider)
	WaitingOnNodeClaimTermination = "WaitingOnNodeClaimTermination"
)

// Joiner's own reasons, for what Karpenter does not do.
const (
	// Cordoned: the node agent (or termination) tainted and cordoned a node.
	Cordoned = "Cordoned"
	// Draining: a drain of the node started, with its deadline.
	Draining = "Draining"
	// Drained: every evictable pod left the node.
	Drained = "Drained"
)

// karpenterReasons are the reasons above that are Karpenter's (tests check
// each has a constructor case).
var karpenterReasons = []string{
	Nominated, FailedScheduling, NoCompatibleInstanceTypes,
	DisruptionBlocked, DisruptionLaunching, DisruptionTerminating, DisruptionWaitingReadiness, Unconsolidatable, ConsolidationApproved,
	ConsolidationCandidate, ConsolidationRejected, Evicted, FailedDraining, AwaitingVolumeDetachment, TerminationGracePeriodExpiring,
	InsufficientCapacityError, NodeClassNotReady, UnregisteredTaintMissing, Finalized,
	SpotInterrupted, SpotRebalanceRecommendation, CapacityReservationInstanceInterrupted, InstanceStopping,
	InstanceTerminating, InstanceUnhealthy, TerminatingOnInterruption, WaitingOnNodeClaimTermination,
}

// onBoth is the same Event on a Node (when there is one) and its NodeClaim,
// NodeClaim first, as the AWS provider's interruption Events are.
func onBoth(node *corev1.Node, nc *karpv1.NodeClaim, typ, reason, msg string) []Event {
	return []Event{{Object: nc, Type: typ, Reason: reason, Message: msg}, {Object: node, Type: typ, Reason: reason, Message: msg}}
}

// title upper-cases the first letter of each word (Karpenter title-cases a
// disruption reason in its messages: "Underutilized", "Drifted").
func title(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// list names up to five items, then a count ("a, b, c, d, e and 2 other(s)").
func list(items []string) string {
	const show = 5
	if len(items) <= show {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d other(s)", strings.Join(items[:show], ", "), len(items)-show)
}

// --- provisioning ---

// NominatedPod: the provisioner planned pod onto a NodeClaim (new or in
// flight) and/or an existing Node; give the names that apply.
func NominatedPod(pod *corev1.Pod, nodeClaim, node string) Event {
	var on []string
	if nodeClaim != "" {
		on = append(on, "nodeclaim/"+nodeClaim)
	}
	if node != "" {
		on = append(on, "node/"+node)
	}
	return Event{Object: pod, Type: corev1.EventTypeNormal, Reason: Nominated, Message: "Pod should schedule on: " + strings.Join(on, ", ")}
}

// PodFailedToSchedule: no NodePool can take pod, for why.
func PodFailedToSchedule(pod *corev1.Pod, why string) Event {
	return Event{Object: pod, Type: corev1.EventTypeWarning, Reason: FailedScheduling, Message: "Failed to schedule pod, " + why}
}

// PoolHasNoInstanceTypes: a NodePool's requirements leave no available
// instance type (minValues: because of its minValues).
func PoolHasNoInstanceTypes(pool *karpv1.NodePool, minValues bool) Event {
	msg := "NodePool requirements filtered out all compatible available instance types"
	if minValues {
		msg += " due to minValues incompatibility"
	}
	return Event{Object: pool, Type: corev1.EventTypeWarning, Reason: NoCompatibleInstanceTypes, Message: msg}
}

// --- disruption ---

// Launching: a replacement NodeClaim was launched for a disruption for
// reason (Empty, Drifted, Underutilized, ...).
func Launching(nc *karpv1.NodeClaim, reason string) Event {
	return Event{Object: nc, Type: corev1.EventTypeNormal, Reason: DisruptionLaunching, Message: "Launching NodeClaim: " + title(reason)}
}

// WaitingOnReadiness: a disruption waits for its replacement nc to be ready.
func WaitingOnReadiness(nc *karpv1.NodeClaim) Event {
	return Event{Object: nc, Type: corev1.EventTypeNormal, Reason: DisruptionWaitingReadiness, Message: "Waiting on readiness to continue disruption"}
}

// Terminating: a disruption for reason deletes the NodeClaim of node.
func Terminating(node *corev1.Node, nc *karpv1.NodeClaim, reason string) []Event {
	return []Event{
		{Object: node, Type: corev1.EventTypeNormal, Reason: DisruptionTerminating, Message: "Disrupting Node: " + title(reason)},
		{Object: nc, Type: corev1.EventTypeNormal, Reason: DisruptionTerminating, Message: "Disrupting NodeClaim: " + title(reason)},
	}
}

// NodeUnconsolidatable: consolidation leaves node alone, for why.
func NodeUnconsolidatable(node *corev1.Node, nc *karpv1.NodeClaim, why string) []Event {
	return []Event{
		{Object: node, Type: corev1.EventTypeNormal, Reason: Unconsolidatable, Message: why},
		{Object: nc, Type: corev1.EventTypeNormal, Reason: Unconsolidatable, Message: why},
	}
}

// Blocked: node may not be disrupted at all now, for why.
func Blocked(node *corev1.Node, nc *karpv1.NodeClaim, why string) []Event {
	return []Event{
		{Object: node, Type: corev1.EventTypeNormal, Reason: DisruptionBlocked, Message: why},
		{Object: nc, Type: corev1.EventTypeNormal, Reason: DisruptionBlocked, Message: why},
	}
}

// PoolBlockedFor: pool's budgets allow no disruption for reason now.
func PoolBlockedFor(pool *karpv1.NodePool, reason karpv1.DisruptionReason) Event {
	return Event{Object: pool, Type: corev1.EventTypeNormal, Reason: DisruptionBlocked,
		Message: fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", reason)}
}

// scoreMessage is Karpenter's wording of a Balanced consolidation score
// that passed: score, threshold (1/k), k, and the move's savings and
// disruption as percentages of its pool's.
func scoreMessage(score, threshold float64, k int, savingsPct, disruptionPct float64) string {
	return fmt.Sprintf("score %.2f >= threshold %.2f (k: %d, savings %.1f%%, disruption %.1f%%)", score, threshold, k, savingsPct, disruptionPct)
}

// Approved: Balanced consolidation approved a move of one node (node
// and nc), with its score.
func Approved(node *corev1.Node, nc *karpv1.NodeClaim, score, threshold float64, k int, savingsPct, disruptionPct float64) []Event {
	msg := scoreMessage(score, threshold, k, savingsPct, disruptionPct)
	return []Event{
		{Object: node, Type: corev1.EventTypeNormal, Reason: ConsolidationApproved, Message: msg},
		{Object: nc, Type: corev1.EventTypeNormal, Reason: ConsolidationApproved, Message: msg},
	}
}

// PoolApproved: Balanced consolidation approved a move of several nodes;
// pool's share of it scored so.
func PoolApproved(pool *karpv1.NodePool, score, threshold float64, k int, savingsPct, disruptionPct float64) Event {
	return Event{Object: pool, Type: corev1.EventTypeNormal, Reason: ConsolidationApproved,
		Message: scoreMessage(score, threshold, k, savingsPct, disruptionPct)}
}

// Command spells a consolidation command as Karpenter's Command.String
// does before the command has a method and an ID (as in the Events it
// records): "replace: [n1, n2] -> [1 replacement]", or "delete: [n1]".
func Command(decision string, nodes []string, replacements int) string {
	out := fmt.Sprintf("%s: [%s]", decision, strings.Join(nodes, ", "))
	if replacements > 0 {
		plural := "replacements"
		if replacements == 1 {
			plural = "replacement"
		}
		out += fmt.Sprintf(" -> [%d %s]", replacements, plural)
	}
	return out
}

// CommandForNode is Karpenter's StringForNode: the whole command for a
// one-node command, else the node's part of it.
func CommandForNode(command, decision, node string, nodes int) string {
	if nodes == 1 {
		return command
	}
	return fmt.Sprintf("%s: [%s] (part of %d-node consolidation)", decision, node, nodes)
}

// Candidate: consolidation chose node (and nc) for command, which saves
// savings per hour; the command now waits for its validation.
func Candidate(node *corev1.Node, nc *karpv1.NodeClaim, command string, savings float64) []Event {
	msg := fmt.Sprintf("Consolidation candidate: %s (savings: $%.2f)", command, savings)
	return []Event{
		{Object: node, Type: corev1.EventTypeNormal, Reason: ConsolidationCandidate, Message: msg},
		{Object: nc, Type: corev1.EventTypeNormal, Reason: ConsolidationCandidate, Message: msg},
	}
}

// Rejected: the consolidation command for node (and nc) failed its
// validation for reason (Karpenter's budget, scheduling, churn).
func Rejected(node *corev1.Node, nc *karpv1.NodeClaim, command, reason string, savings float64) []Event {
	msg := fmt.Sprintf("Consolidation rejected: %s, reason: %s (savings: $%.2f)", command, reason, savings)
	return []Event{
		{Object: node, Type: corev1.EventTypeNormal, Reason: ConsolidationRejected, Message: msg},
		{Object: nc, Type: corev1.EventTypeNormal, Reason: ConsolidationRejected, Message: msg},
	}
}

// PoolBlocked: pool's budgets allow no disruption at all now.
func PoolBlocked(pool *karpv1.NodePool) Event {
	return Event{Object: pool, Type: corev1.EventTypeNormal, Reason: DisruptionBlocked, Message: "No allowed disruptions due to blocking budget"}
}

// --- node termination ---

// PodEvicted: pod was evicted from a node being terminated for reason (the
// NodeClaim's DisruptionReason).
func PodEvicted(pod *corev1.Pod, reason string) Event {
	return Event{Object: pod, Type: corev1.EventTypeNormal, Reason: Evicted, Message: "Evicted pod: " + reason}
}

// PodDeletedForTermination: pod was deleted, bypassing its PDB and
// do-not-disrupt, so that it gets as much of its grace period as the
// node's termination time leaves: grace seconds of its own (Karpenter's
// message, the time printed as Go prints it, to the second, in UTC).
func PodDeletedForTermination(pod *corev1.Pod, grace int64, terminationTime time.Time) Event {
	var own int64
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		own = *pod.Spec.TerminationGracePeriodSeconds
	}
	return Event{Object: pod, Type: corev1.EventTypeNormal, Reason: Disrupted, Message: fmt.Sprintf("Deleting the pod to accommodate the terminationTime %s of the node. "+
		"The pod was granted %d seconds of grace-period of its %d terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
		terminationTime.UTC().Truncate(time.Second).String(), grace, own)}
}

// DrainFailed: draining node failed (or is blocked), for err.
func DrainFailed(node *corev1.Node, err error) Event {
	return Event{Object: node, Type: corev1.EventTypeWarning, Reason: FailedDraining, Message: fmt.Sprintf("Failed to drain node, %s", err)}
}

// PDBBlocksEviction is the error a FailedDraining Event names when a
// PodDisruptionBudget forbids evicting pod (namespace/name) now.
func PDBBlocksEviction(pod string) error {
	return fmt.Errorf("evicting pod violates a PDB (Pod=%s)", pod)
}

// AwaitingVolumes: node's termination waits for its VolumeAttachments.
func AwaitingVolumes(node *corev1.Node, attachments []string) Event {
	return Event{Object: node, Type: corev1.EventTypeNormal, Reason: AwaitingVolumeDetachment,
		Message: "Awaiting deletion of bound volumeattachments (" + list(attachments) + ")"}
}

// GracePeriodExpiring: the pods of obj (a Node, or its NodeClaim) are
// deleted by terminationTime, the end of the NodeClaim's
// terminationGracePeriod as its karpenter.sh/nodeclaim-termination-timestamp
// annotation writes it (RFC 3339). Karpenter tells the annotation's value
// as it is, before parsing it.
func GracePeriodExpiring(obj runtime.Object, terminationTime string) Event {
	return Event{Object: obj, Type: corev1.EventTypeWarning, Reason: TerminationGracePeriodExpiring,
		Message: "All pods will be deleted by " + terminationTime}
}

// --- nodeclaim lifecycle ---

// NoCapacity: nc's launch failed for lack of capacity (err).
func NoCapacity(nc *karpv1.NodeClaim, err error) Event {
	return Event{Object: nc, Type: corev1.EventTypeWarning, Reason: InsufficientCapacityError, Message: claimMessage(nc, err)}
}

// ClassNotReady: nc cannot launch because its EC2NodeClass is not ready.
func ClassNotReady(nc *karpv1.NodeClaim, err error) Event {
	return Event{Object: nc, Type: corev1.EventTypeWarning, Reason: NodeClassNotReady, Message: claimMessage(nc, err)}
}

// TaintMissing: nc's Node registered without the karpenter.sh/unregistered taint.
func TaintMissing(nc *karpv1.NodeClaim) Event {
	return Event{Object: nc, Type: corev1.EventTypeWarning, Reason: UnregisteredTaintMissing,
		Message: "Missing " + karpv1.TaintUnregisteredKey + " taint which prevents registration related race conditions on Karpenter-managed nodes"}
}

// ConsistencyIssue: nc's Node is not what nc expected (Karpenter's
// FailedConsistencyCheckEvent; the message is the issue).
func ConsistencyIssue(nc *karpv1.NodeClaim, issue string) Event {
	return Event{Object: nc, Type: corev1.EventTypeWarning, Reason: FailedConsistencyCheck, Message: issue}
}

// claimMessage is Karpenter's "NodeClaim <name> event: <error>", an
// error of 300 characters or more cut to 300 and "...".
func claimMessage(nc *karpv1.NodeClaim, err error) string {
	msg := err.Error()
	if len(msg) >= 300 {
		msg = msg[:300] + "..."
	}
	return fmt.Sprintf("NodeClaim %s event: %s", nc.Name, msg)
}

// ConditionTransitioned: obj's condition typ went from status from to
// to, with reason and message (message may be empty). The Event's reason
// is the condition's type.
func ConditionTransitioned(obj runtime.Object, typ, from, to, reason, message string) Event {
	msg := fmt.Sprintf("Status condition transitioned, Type: %s, Status: %s -> %s, Reason: %s", typ, from, to, reason)
	if message != "" {
		msg += ", Message: " + message
	}
	return Event{Object: obj, Type: corev1.EventTypeNormal, Reason: typ, Message: msg}
}

// FinalizerRemoved: finalizer left obj.
func FinalizerRemoved(obj runtime.Object, finalizer string) Event {
	return Event{Object: obj, Type: corev1.EventTypeNormal, Reason: Finalized, Message: "Finalized " + finalizer}
}

// --- interruption (AWS provider) ---

// SpotInterruption: an EC2 spot interruption warning for nc's instance.
func SpotInterruption(node *corev1.Node, nc *karpv1.NodeClaim) []Event {
	return onBoth(node, nc, corev1.EventTypeWarning, SpotInterrupted, "Spot interruption warning was triggered")
}

// RebalanceRecommendation: an EC2 rebalance recommendation for nc's instance.
func RebalanceRecommendation(node *corev1.Node, nc *karpv1.NodeClaim) []Event {
	return onBoth(node, nc, corev1.EventTypeNormal, SpotRebalanceRecommendation, "Spot rebalance recommendation was triggered")
}

// ReservationInterruption: the capacity reservation of nc's instance is
// being reclaimed.
func ReservationInterruption(node *corev1.Node, nc *karpv1.NodeClaim) []Event {
	return onBoth(node, nc, corev1.EventTypeWarning, CapacityReservationInstanceInterrupted, "Capacity Reservation interruption warning was triggered")
}

// Stopping: nc's instance is stopping.
func Stopping(node *corev1.Node, nc *karpv1.NodeClaim) []Event {
	return onBoth(node, nc, corev1.EventTypeWarning, InstanceStopping, "Instance is stopping")
}

// InstanceGoingAway: nc's instance is terminating.
func InstanceGoingAway(node *corev1.Node, nc *karpv1.NodeClaim) []Event {
	return onBoth(node, nc, corev1.EventTypeWarning, InstanceTerminating, "Instance is terminating")
}

// Unhealthy: a scheduled change or health event for nc's instance.
func Unhealthy(node *corev1.Node, nc *karpv1.NodeClaim) []Event {
	return onBoth(node, nc, corev1.EventTypeWarning, InstanceUnhealthy, "An unhealthy warning was triggered for the instance")
}

// InterruptionTerminates: an interruption deletes nc (and its node).
func InterruptionTerminates(node *corev1.Node, nc *karpv1.NodeClaim) []Event {
	return []Event{
		{Object: nc, Type: corev1.EventTypeWarning, Reason: TerminatingOnInterruption, Message: "Interruption triggered termination for the NodeClaim"},
		{Object: node, Type: corev1.EventTypeWarning, Reason: TerminatingOnInterruption, Message: "Interruption triggered termination for the Node"},
	}
}

// --- EC2NodeClass (AWS provider) ---

// ClassWaitsForClaims: class's deletion waits for the NodeClaims named.
func ClassWaitsForClaims(class *awsv1.EC2NodeClass, nodeClaims []string) Event {
	return Event{Object: class, Type: corev1.EventTypeNormal, Reason: WaitingOnNodeClaimTermination,
		Message: "Waiting on NodeClaim termination for " + list(nodeClaims)}
}

// --- Joiner's own: the drain ---

// NodeCordoned: node was tainted and cordoned for reason (a notice kind or
// a deletion reason), msg saying why.
func NodeCordoned(node *corev1.Node, reason, msg string) Event {
	return Event{Object: node, Type: corev1.EventTypeWarning, Reason: Cordoned, Message: fmt.Sprintf("Cordoned (%s): %s", reason, msg)}
}

// NodeDraining: a drain of node started; it must end by deadline.
func NodeDraining(node *corev1.Node, deadline time.Time, msg string) Event {
	return Event{Object: node, Type: corev1.EventTypeWarning, Reason: Draining,
		Message: fmt.Sprintf("Draining before %s: %s", deadline.UTC().Format(time.RFC3339), msg)}
}

// NodeDrained: every evictable pod left node; msg counts them.
func NodeDrained(node *corev1.Node, msg string) Event {
	return Event{Object: node, Type: corev1.EventTypeNormal, Reason: Drained, Message: msg}
}
