// Package termination is the leader's termination controller: Karpenter's
// karpenter.sh/termination finalizer on NodeClaims and Nodes.
//
// When a NodeClaim with the finalizer is deleted, the controller, one step
// at a time and resumable by a new leader (all progress lives in the API
// objects and the raft FSM):
//
//  1. cancels its launch intent if it is still pending, or waits while the
//     launcher has an attempt in flight;
//  2. sets the DisruptionReason condition and commits a TerminationIntent ("term-"+instance ID) with the reason from
//     the joiner.io/disruption-reason annotation (default "deleted");
//  3. taints the linked Node karpenter.sh/disrupted:NoSchedule and drains it
//     through the eviction API (agent/drain: PDBs hold, DaemonSet and mirror
//     pods stay) until the NodeClaim's terminationGracePeriod, then sets the
//     NodeClaim condition Drained;
//  4. waits for the VolumeAttachments of the drained pods' volumes to go
//     (condition VolumesDetached: Unknown while waiting, True, or False
//     when the terminationGracePeriod ended the wait), so the volumes can
//     attach elsewhere (Karpenter's awaitVolumeDetachment; Deps.Volumes);
//  5. terminates the instance, sets InstanceTerminating and commits the
//     TerminationResult;
//  6. deletes the Node and removes the finalizer from it;
//  7. waits until the cloud has the instance terminated (or no longer
//     knows it), terminating it again while it is still up, as Karpenter's
//     NodeClaim finalizer does: the NodeClaim (in its pool's resources and
//     limits, not its disruption budget) and its EC2NodeClass's deletion
//     wait until then;
//  8. removes the finalizer from the NodeClaim.
//
// A Node deleted while its NodeClaim lives gets its NodeClaim deleted (the
// NodeClaim's termination then removes the Node); a deleted Node with the
// finalizer and no NodeClaim is drained, waits for its volumes to detach
// and is released.
//
// Decide and DecideNode are the pure core: given the objects and the raft
// records they name the next step; the Controller performs it.
package termination

import (
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/events"
)

// DefaultReason is the disruption reason of a NodeClaim deleted without
// one (whoever deletes a NodeClaim on purpose sets
// karpv1.AnnotationDisruptionReason first).
const DefaultReason = "deleted"

// TerminationID is the ID of the TerminationIntent of an instance.
func TerminationID(instanceID string) string { return "term-" + instanceID }

// Reason is the NodeClaim's disruption reason, DefaultReason when unset.
func Reason(nc *karpv1.NodeClaim) string {
	if r := nc.Annotations[karpv1.AnnotationDisruptionReason]; r != "" {
		return r
	}
	return DefaultReason
}

// Step is the next thing to do for one NodeClaim or Node.
type Step int

// Steps, in the order a NodeClaim's termination takes them.
const (
	// StepNone: nothing to do (not deleting, not ours, or done).
	StepNone Step = iota
	// StepCancelIntent: commit IntentCancel for the still-pending launch.
	StepCancelIntent
	// StepWaitLaunch: a launch attempt is in flight; look again later.
	StepWaitLaunch
	// StepMarkDisrupting: set the DisruptionReason condition (and say so
	// in an Event) once.
	StepMarkDisrupting
	// StepCommitTermination: commit the TerminationIntent.
	StepCommitTermination
	// StepTaint: taint the Node karpenter.sh/disrupted:NoSchedule.
	StepTaint
	// StepDrain: evict the Node's pods (asynchronous).
	StepDrain
	// StepAwaitVolumes: VolumeAttachments of drained pods remain; look
	// again when they change (VolumesDetached Unknown meanwhile).
	StepAwaitVolumes
	// StepVolumesDetached: record VolumesDetached (True, or False when the
	// grace period ended the wait).
	StepVolumesDetached
	// StepTerminate: terminate the instance, commit TerminationResult.
	StepTerminate
	// StepDeleteNode: delete the Node and remove its finalizer.
	StepDeleteNode
	// StepAwaitInstance: the instance is still shutting down; look again
	// at the next pass.
	StepAwaitInstance
	// StepRemoveFinalizer: release the NodeClaim (or, for a lone Node, the Node).
	StepRemoveFinalizer
	// StepDeleteClaim: a Node was deleted; delete its NodeClaim.
	StepDeleteClaim
	// StepWaitClaim: the Node's NodeClaim is terminating and will remove it.
	StepWaitClaim
)

var stepNames = [...]string{"none", "cancel-intent", "wait-launch", "mark-disrupting", "commit-termination", "taint", "drain",
	"await-volumes", "volumes-detached", "terminate", "delete-node", "await-instance", "remove-finalizer", "delete-nodeclaim", "wait-nodeclaim"}

func (s Step) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "step-?"
}

// ClaimInput is what Decide looks at for one NodeClaim.
type ClaimInput struct {
	Claim *karpv1.NodeClaim
	// Node is the linked Node (same provider ID), nil when there is none.
	Node *corev1.Node
	// Intent is the NodeClaim's launch intent, nil when unknown.
	Intent *fsm.LaunchIntent
	// InstanceID is the instance to terminate ("" when nothing launched).
	InstanceID string
	// Instance reports whether the FSM has a record of InstanceID: the
	// termination commits a TerminationIntent only for one it has (an
	// adopted NodeClaim's instance, which Karpenter launched, is tracked by
	// the InstanceTerminating condition, unless a disruption committed an
	// intent for it first).
	Instance bool
	// Termination is the instance's TerminationIntent, nil when none.
	Termination *fsm.TerminationIntent
	// VolumesChecked: the Node's VolumeAttachments were looked at
	// (Attachments); false skips the wait for volume detachment.
	VolumesChecked bool
	// Attachments are the VolumeAttachments that hold the instance
	// (PendingAttachments).
	Attachments []string
	// InstanceChecked: the instance was looked at after its termination
	// (InstanceGone: the cloud has it terminated or does not know it;
	// InstanceState: its state when the cloud was asked this pass).
	InstanceChecked, InstanceGone bool
	InstanceState                 string
	Now                           time.Time
}

// Decide names the next termination step of a NodeClaim.
func Decide(in ClaimInput) Step {
	nc := in.Claim
	if nc == nil || nc.DeletionTimestamp == nil || !hasFinalizer(nc.Finalizers) {
		return StepNone
	}
	if in.Intent != nil {
		switch in.Intent.State {
		case fsm.IntentPending:
			return StepCancelIntent
		case fsm.IntentLaunching:
			return StepWaitLaunch
		}
	}
	if (in.InstanceID != "" || nodeLive(in.Node)) && !conditionTrue(nc, karpv1.ConditionDisruptionReason) {
		return StepMarkDisrupting
	}
	if in.InstanceID != "" && in.Instance && in.Termination == nil {
		return StepCommitTermination
	}
	lost := instanceLost(in)
	if nodeLive(in.Node) && !conditionTrue(nc, karpv1.ConditionDrained) && !GraceElapsed(nc, in.Now) && !lost {
		if !Tainted(in.Node) {
			return StepTaint
		}
		return StepDrain
	}
	if in.InstanceID != "" && !terminated(in) {
		if in.VolumesChecked && nodeLive(in.Node) && volumesUndecided(nc) && !lost {
			if len(in.Attachments) > 0 && !GraceElapsed(nc, in.Now) {
				return StepAwaitVolumes
			}
			return StepVolumesDetached
		}
		return StepTerminate
	}
	if in.Node != nil && !nodeReleased(in.Node) {
		return StepDeleteNode
	}
	if in.InstanceID != "" && in.InstanceChecked && !in.InstanceGone {
		return StepAwaitInstance
	}
	return StepRemoveFinalizer
}

// kubeletDown says whether the NodeClaim's Node is still to be drained
// while its kubelet is not Ready: the cloud should be asked whether the
// instance is still there (ClaimInput.InstanceChecked; see instanceLost).
func kubeletDown(in ClaimInput) bool {
	return in.InstanceID != "" && nodeLive(in.Node) && !nodeReady(in.Node) && !conditionTrue(in.Claim, karpv1.ConditionDrained)
}

// instanceLost: the Node's kubelet is not Ready and the cloud no longer
// has its instance, so there is nothing to drain (its pods could only go
// stuck terminating, or wait for ever on a budget) nor volumes to wait
// for: the termination goes straight on, as Karpenter's node termination
// removes such a Node's finalizer at once. A Ready kubelet is still
// running whatever the cloud says.
func instanceLost(in ClaimInput) bool {
	return in.InstanceChecked && in.InstanceGone && nodeLive(in.Node) && !nodeReady(in.Node)
}

// nodeReady: the Node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AwaitsInstance says whether the termination has come to the point where
// it waits for the instance to be gone: the cloud should be asked
// (ClaimInput.InstanceChecked).
func AwaitsInstance(in ClaimInput) bool {
	return in.InstanceID != "" && terminated(in) && (in.Node == nil || nodeReleased(in.Node))
}

// NodeInput is what DecideNode looks at for one Node.
type NodeInput struct {
	Node *corev1.Node
	// Claim is the Node's NodeClaim (same provider ID), nil when none.
	Claim *karpv1.NodeClaim
	// Attachments are the VolumeAttachments that hold the Node's release
	// (PendingAttachments).
	Attachments []string
}

// DecideNode names the next step for a Node with the termination finalizer.
func DecideNode(in NodeInput) Step {
	n := in.Node
	if n == nil || n.DeletionTimestamp == nil || !hasFinalizer(n.Finalizers) {
		return StepNone
	}
	if in.Claim != nil {
		if in.Claim.DeletionTimestamp == nil {
			return StepDeleteClaim
		}
		return StepWaitClaim
	}
	if !NodeDrained(n) {
		if !Tainted(n) {
			return StepTaint
		}
		return StepDrain
	}
	if len(in.Attachments) > 0 {
		return StepAwaitVolumes
	}
	return StepRemoveFinalizer
}

// terminated reports whether the instance's termination is recorded: the
// TerminationResult when the FSM tracks it, else the InstanceTerminating
// condition.
func terminated(in ClaimInput) bool {
	if in.Termination != nil {
		return in.Termination.State == fsm.TerminationDone
	}
	return conditionTrue(in.Claim, karpv1.ConditionInstanceTerminating)
}

// GraceElapsed reports whether the NodeClaim's terminationGracePeriod has
// passed since its deletion: draining stops and the instance goes anyway
// (Karpenter's forceful termination).
func GraceElapsed(nc *karpv1.NodeClaim, now time.Time) bool {
	end, ok := GraceDeadline(nc)
	return ok && !now.Before(end)
}

// GraceDeadline is deletion time + terminationGracePeriod; false when the
// NodeClaim is not deleting or has no grace period (drain forever).
func GraceDeadline(nc *karpv1.NodeClaim) (time.Time, bool) {
	tgp := nc.Spec.TerminationGracePeriod
	if nc.DeletionTimestamp == nil || tgp == nil || tgp.Duration == nil {
		return time.Time{}, false
	}
	return nc.DeletionTimestamp.Add(*tgp.Duration), true
}

// nodeLive: the Node exists and is not already on its way out without us.
func nodeLive(n *corev1.Node) bool { return n != nil && !nodeReleased(n) }

// nodeReleased: the Node is deleting and no longer holds our finalizer
// (someone else's finalizer may keep it a while; that is not ours to wait on).
func nodeReleased(n *corev1.Node) bool {
	return n.DeletionTimestamp != nil && !hasFinalizer(n.Finalizers)
}

// Tainted reports whether the Node carries karpenter.sh/disrupted:NoSchedule.
func Tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.TaintDisruptedKey && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// NodeDrained reports whether agent/drain recorded a finished drain on the
// Node (its joiner.io/Interruption condition with reason Drained).
func NodeDrained(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == drain.ConditionType && c.Status == corev1.ConditionTrue && c.Reason == "Drained" {
			return true
		}
	}
	return false
}

func hasFinalizer(fs []string) bool {
	for _, f := range fs {
		if f == karpv1.TerminationFinalizer {
			return true
		}
	}
	return false
}

func withoutFinalizer(fs []string) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		if f != karpv1.TerminationFinalizer {
			out = append(out, f)
		}
	}
	return out
}

var notConditionReason = regexp.MustCompile(`[^A-Za-z0-9_]`)

// ConditionReason makes a disruption reason a valid condition reason
// (letters, digits and underscores, starting with a letter).
func ConditionReason(reason string) string {
	r := notConditionReason.ReplaceAllString(reason, "_")
	r = strings.TrimRight(r, "_")
	if r == "" || !((r[0] >= 'a' && r[0] <= 'z') || (r[0] >= 'A' && r[0] <= 'Z')) {
		r = "Reason_" + r
	}
	return r
}

func conditionTrue(nc *karpv1.NodeClaim, typ string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, typ)
}

// setCondition sets a True condition on nc; false when it already was.
func setCondition(nc *karpv1.NodeClaim, typ, reason, msg string, now time.Time) bool {
	return putCondition(nc, typ, metav1.ConditionTrue, reason, msg, now)
}

// conditionEvents are the Events Karpenter's status controller
// (awslabs/operatorpkg) records when a write set condition typ of nc,
// which was prior before it (nil when nc had none): one when the status
// changed from one the condition had. A condition that appears records
// none: the termination's conditions (DisruptionReason, Drained,
// VolumesDetached, InstanceTerminating) are not among those a NodeClaim
// starts with, so Karpenter has no earlier status to report.
func conditionEvents(nc *karpv1.NodeClaim, prior *metav1.Condition, typ string) []events.Event {
	now := meta.FindStatusCondition(nc.Status.Conditions, typ)
	if prior == nil || now == nil || prior.Status == now.Status {
		return nil
	}
	return []events.Event{events.ConditionTransitioned(nc, typ, string(prior.Status), string(now.Status), now.Reason, now.Message)}
}

// NodeExpiring is Karpenter's TerminationGracePeriodExpiring Event on the
// Node while the NodeClaim's termination works on it (taint, drain, the
// wait for volumes, the instance's termination) and the NodeClaim carries
// its termination time (karpenter.sh/nodeclaim-termination-timestamp):
// Karpenter's node termination records it on every reconcile, deduplicated
// per Node (events.DefaultDedupeTimeout), with the annotation's value as
// written, before (and whether or not) it parses. None otherwise.
func NodeExpiring(in ClaimInput, step Step) []events.Event {
	switch step {
	case StepTaint, StepDrain, StepAwaitVolumes, StepVolumesDetached, StepTerminate:
	default:
		return nil
	}
	if !nodeLive(in.Node) || in.Claim == nil {
		return nil
	}
	end, ok := in.Claim.Annotations[karpv1.AnnotationTerminationTimestamp]
	if !ok {
		return nil
	}
	return []events.Event{events.GracePeriodExpiring(in.Node, end)}
}

// putCondition sets a condition on nc; false when it already was so.
func putCondition(nc *karpv1.NodeClaim, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) bool {
	return meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}
