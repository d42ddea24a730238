package termination

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/drain"
)

var t0 = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

type claimOpt func(*karpv1.NodeClaim)

func claim(opts ...claimOpt) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde",
		Finalizers:  []string{karpv1.TerminationFinalizer},
		Annotations: map[string]string{karpv1.AnnotationLaunchID: "intent-1"}}}
	nc.Status.ProviderID = "aws:///us-east-1a/i-0123"
	for _, o := range opts {
		o(nc)
	}
	return nc
}

func deleting(nc *karpv1.NodeClaim) {
	nc.DeletionTimestamp = &metav1.Time{Time: t0}
	setCondition(nc, karpv1.ConditionDisruptionReason, "deleted", "deleted", t0)
}

// fresh: deleting, not yet marked disrupting.
func fresh(nc *karpv1.NodeClaim)       { nc.DeletionTimestamp = &metav1.Time{Time: t0} }
func noFinalizer(nc *karpv1.NodeClaim) { nc.Finalizers = nil }
func cond(typ string) claimOpt {
	return func(nc *karpv1.NodeClaim) { setCondition(nc, typ, typ, "", t0) }
}
func tgp(d time.Duration) claimOpt {
	return func(nc *karpv1.NodeClaim) { v := karpv1.NewDuration(d); nc.Spec.TerminationGracePeriod = &v }
}

type nodeOpt func(*corev1.Node)

func node(opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1", Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123"}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func tainted(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule})
}
func nodeDeleting(n *corev1.Node)    { n.DeletionTimestamp = &metav1.Time{Time: t0} }
func nodeNoFinalizer(n *corev1.Node) { n.Finalizers = []string{"other.io/keep"} }
func nodeDrained(n *corev1.Node) {
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: drain.ConditionType, Status: corev1.ConditionTrue, Reason: "Drained"})
}

func intent(s fsm.IntentState) *fsm.LaunchIntent {
	return &fsm.LaunchIntent{ID: "intent-1", State: s, InstanceID: map[bool]string{true: "i-0123"}[s == fsm.IntentLaunched]}
}

func term(s fsm.TerminationState) *fsm.TerminationIntent {
	return &fsm.TerminationIntent{ID: TerminationID("i-0123"), InstanceID: "i-0123", State: s}
}

func TestDecide(t *testing.T) {
	pending := term(fsm.TerminationPending)
	done := term(fsm.TerminationDone)
	cases := []struct {
		name string
		in   ClaimInput
		want Step
	}{
		{"not deleting", ClaimInput{Claim: claim(), Node: node(), Intent: intent(fsm.IntentLaunched), InstanceID: "i-0123", Instance: true}, StepNone},
		{"deleting without our finalizer", ClaimInput{Claim: claim(deleting, noFinalizer), Intent: intent(fsm.IntentLaunched)}, StepNone},
		{"nil claim", ClaimInput{}, StepNone},
		{"pending launch is cancelled", ClaimInput{Claim: claim(deleting), Intent: intent(fsm.IntentPending)}, StepCancelIntent},
		{"launch in flight: wait", ClaimInput{Claim: claim(deleting), Intent: intent(fsm.IntentLaunching)}, StepWaitLaunch},
		{"cancelled launch, nothing launched: release", ClaimInput{Claim: claim(deleting), Intent: intent(fsm.IntentCancelled)}, StepRemoveFinalizer},
		{"failed launch: release", ClaimInput{Claim: claim(deleting), Intent: intent(fsm.IntentFailed)}, StepRemoveFinalizer},
		{"no intent, no instance: release", ClaimInput{Claim: claim(deleting)}, StepRemoveFinalizer},
		{"launched: mark disrupting first", ClaimInput{Claim: claim(fresh), Node: node(), Intent: intent(fsm.IntentLaunched),
			InstanceID: "i-0123", Instance: true}, StepMarkDisrupting},
		{"termination committed elsewhere: still mark disrupting", ClaimInput{Claim: claim(fresh), Node: node(), Intent: intent(fsm.IntentLaunched),
			InstanceID: "i-0123", Instance: true, Termination: term(fsm.TerminationPending)}, StepMarkDisrupting},
		{"lone node on a claim without an instance: mark disrupting", ClaimInput{Claim: claim(fresh), Node: node()}, StepMarkDisrupting},
		{"nothing launched, nothing to mark: release", ClaimInput{Claim: claim(fresh), Intent: intent(fsm.IntentCancelled)}, StepRemoveFinalizer},
		{"launched and marked: commit termination", ClaimInput{Claim: claim(deleting), Node: node(), Intent: intent(fsm.IntentLaunched),
			InstanceID: "i-0123", Instance: true}, StepCommitTermination},
		{"instance unknown to the FSM: no intent to commit, taint", ClaimInput{Claim: claim(deleting), Node: node(),
			InstanceID: "i-0123"}, StepTaint},
		{"termination committed: taint", ClaimInput{Claim: claim(deleting), Node: node(), Intent: intent(fsm.IntentLaunched),
			InstanceID: "i-0123", Instance: true, Termination: pending}, StepTaint},
		{"tainted: drain", ClaimInput{Claim: claim(deleting), Node: node(tainted), Intent: intent(fsm.IntentLaunched),
			InstanceID: "i-0123", Instance: true, Termination: pending, Now: t0}, StepDrain},
		{"drain within the grace period", ClaimInput{Claim: claim(deleting, tgp(time.Minute)), Node: node(tainted),
			InstanceID: "i-0123", Instance: true, Termination: pending, Now: t0.Add(59 * time.Second)}, StepDrain},
		{"grace period elapsed: terminate without draining", ClaimInput{Claim: claim(deleting, tgp(time.Minute)), Node: node(tainted),
			InstanceID: "i-0123", Instance: true, Termination: pending, Now: t0.Add(time.Minute)}, StepTerminate},
		{"drained: terminate", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), Node: node(tainted),
			InstanceID: "i-0123", Instance: true, Termination: pending}, StepTerminate},
		{"terminate call made but result not committed: terminate again", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained),
			cond(karpv1.ConditionInstanceTerminating)), Node: node(tainted), InstanceID: "i-0123", Instance: true, Termination: pending}, StepTerminate},
		{"no node ever registered: terminate", ClaimInput{Claim: claim(deleting), InstanceID: "i-0123", Instance: true, Termination: pending}, StepTerminate},
		{"terminated: delete the node", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), Node: node(tainted),
			InstanceID: "i-0123", Instance: true, Termination: done}, StepDeleteNode},
		{"node deleting with our finalizer: remove it", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), Node: node(tainted, nodeDeleting),
			InstanceID: "i-0123", Instance: true, Termination: done}, StepDeleteNode},
		{"node deleting, held by someone else: release the claim", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)),
			Node: node(tainted, nodeDeleting, nodeNoFinalizer), InstanceID: "i-0123", Instance: true, Termination: done}, StepRemoveFinalizer},
		{"node deleting without us: no drain", ClaimInput{Claim: claim(deleting), Node: node(nodeDeleting, nodeNoFinalizer),
			InstanceID: "i-0123", Instance: true, Termination: pending}, StepTerminate},
		{"not in the FSM, terminated per condition: delete the node", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained),
			cond(karpv1.ConditionInstanceTerminating)), Node: node(tainted), InstanceID: "i-0123"}, StepDeleteNode},
		{"all done: release", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), InstanceID: "i-0123", Instance: true,
			Termination: done}, StepRemoveFinalizer},
		// Karpenter's NodeClaim finalizer stays until the cloud no longer
		// has the instance (terminated, or not found).
		{"instance still shutting down: wait", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), InstanceID: "i-0123", Instance: true,
			Termination: done, InstanceChecked: true}, StepAwaitInstance},
		{"instance gone: release", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), InstanceID: "i-0123", Instance: true,
			Termination: done, InstanceChecked: true, InstanceGone: true}, StepRemoveFinalizer},
		{"adopted instance terminating per condition, still shutting down: wait", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained),
			cond(karpv1.ConditionInstanceTerminating)), InstanceID: "i-0123", InstanceChecked: true}, StepAwaitInstance},
		{"node still to delete first", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), Node: node(tainted),
			InstanceID: "i-0123", Instance: true, Termination: done, InstanceChecked: true}, StepDeleteNode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Decide(c.in); got != c.want {
				t.Errorf("Decide = %s, want %s", got, c.want)
			}
		})
	}
}

// The wait for the instance asks the cloud only once it is terminated and
// its Node is gone or released.
func TestAwaitsInstance(t *testing.T) {
	done, pending := term(fsm.TerminationDone), term(fsm.TerminationPending)
	drained := claim(deleting, cond(karpv1.ConditionDrained))
	for _, c := range []struct {
		name string
		in   ClaimInput
		want bool
	}{
		{"terminated, node deleted", ClaimInput{Claim: drained, InstanceID: "i-0123", Instance: true, Termination: done}, true},
		{"terminated, node released", ClaimInput{Claim: drained, Node: node(tainted, nodeDeleting, nodeNoFinalizer), InstanceID: "i-0123", Instance: true, Termination: done}, true},
		{"terminated, node still there", ClaimInput{Claim: drained, Node: node(tainted), InstanceID: "i-0123", Instance: true, Termination: done}, false},
		{"not terminated yet", ClaimInput{Claim: drained, InstanceID: "i-0123", Instance: true, Termination: pending}, false},
		{"no instance", ClaimInput{Claim: drained}, false},
	} {
		if got := AwaitsInstance(c.in); got != c.want {
			t.Errorf("%s: AwaitsInstance = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDecideNode(t *testing.T) {
	cases := []struct {
		name string
		in   NodeInput
		want Step
	}{
		{"not deleting", NodeInput{Node: node()}, StepNone},
		{"not ours", NodeInput{Node: node(nodeDeleting, nodeNoFinalizer)}, StepNone},
		{"claim alive: delete it", NodeInput{Node: node(nodeDeleting), Claim: claim()}, StepDeleteClaim},
		{"claim terminating: it removes the node", NodeInput{Node: node(nodeDeleting), Claim: claim(deleting)}, StepWaitClaim},
		{"no claim: taint", NodeInput{Node: node(nodeDeleting)}, StepTaint},
		{"no claim, tainted: drain", NodeInput{Node: node(nodeDeleting, tainted)}, StepDrain},
		{"no claim, drained: release", NodeInput{Node: node(nodeDeleting, tainted, nodeDrained)}, StepRemoveFinalizer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := DecideNode(c.in); got != c.want {
				t.Errorf("DecideNode = %s, want %s", got, c.want)
			}
		})
	}
}

func TestReason(t *testing.T) {
	nc := claim()
	if got := Reason(nc); got != DefaultReason {
		t.Errorf("Reason without annotation = %q, want %q", got, DefaultReason)
	}
	nc.Annotations[karpv1.AnnotationDisruptionReason] = "interrupted"
	if got := Reason(nc); got != "interrupted" {
		t.Errorf("Reason = %q, want interrupted", got)
	}
	if got := TerminationID("i-1"); got != "term-i-1" {
		t.Errorf("TerminationID = %q", got)
	}
}

func TestConditionReason(t *testing.T) {
	for in, want := range map[string]string{"interrupted": "interrupted", "Drifted": "Drifted", "spot-interruption": "spot_interruption",
		"": "Reason_", "1x": "Reason_1x", "a b!": "a_b"} {
		if got := ConditionReason(in); got != want {
			t.Errorf("ConditionReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGraceDeadline(t *testing.T) {
	if _, ok := GraceDeadline(claim(deleting)); ok {
		t.Error("no terminationGracePeriod: want unbounded")
	}
	if _, ok := GraceDeadline(claim(tgp(time.Minute))); ok {
		t.Error("not deleting: want no deadline")
	}
	end, ok := GraceDeadline(claim(deleting, tgp(90*time.Second)))
	if !ok || !end.Equal(t0.Add(90*time.Second)) {
		t.Errorf("GraceDeadline = %s, %v; want %s", end, ok, t0.Add(90*time.Second))
	}
}

// TestNodeExpiring: the Node's TerminationGracePeriodExpiring goes with
// the steps that work on a live Node, once the NodeClaim carries its
// termination time.
func TestNodeExpiring(t *testing.T) {
	annotated := func(v string) claimOpt {
		return func(nc *karpv1.NodeClaim) { nc.Annotations[karpv1.AnnotationTerminationTimestamp] = v }
	}
	const when = "2026-11-22T02:00:00Z"
	cases := []struct {
		name string
		in   ClaimInput
		step Step
		want string
	}{
		{"drain", ClaimInput{Claim: claim(deleting, annotated(when)), Node: node()}, StepDrain,
			"ip-10-0-0-1 Warning TerminationGracePeriodExpiring: All pods will be deleted by " + when},
		{"taint", ClaimInput{Claim: claim(deleting, annotated(when)), Node: node()}, StepTaint,
			"ip-10-0-0-1 Warning TerminationGracePeriodExpiring: All pods will be deleted by " + when},
		{"terminate", ClaimInput{Claim: claim(deleting, annotated(when)), Node: node()}, StepTerminate,
			"ip-10-0-0-1 Warning TerminationGracePeriodExpiring: All pods will be deleted by " + when},
		{"no grace period", ClaimInput{Claim: claim(deleting), Node: node()}, StepDrain, ""},
		{"unreadable time: told as written", ClaimInput{Claim: claim(deleting, annotated("soon")), Node: node()}, StepDrain,
			"ip-10-0-0-1 Warning TerminationGracePeriodExpiring: All pods will be deleted by soon"},
		{"no node", ClaimInput{Claim: claim(deleting, annotated(when))}, StepTerminate, ""},
		{"node released", ClaimInput{Claim: claim(deleting, annotated(when)), Node: node(nodeDeleting, nodeNoFinalizer)}, StepDrain, ""},
		{"other step", ClaimInput{Claim: claim(deleting, annotated(when)), Node: node()}, StepRemoveFinalizer, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := NodeExpiring(tc.in, tc.step)
			got := ""
			for _, e := range evs {
				n, ok := e.Object.(*corev1.Node)
				if !ok {
					t.Fatalf("event on %T, want the Node", e.Object)
				}
				got += n.Name + " " + e.Type + " " + e.Reason + ": " + e.Message
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConditionEvents: a termination condition's write records Karpenter's
// status-transition Event when the status changed from one it had; a
// condition that appears, or keeps its status, records none.
func TestConditionEvents(t *testing.T) {
	with := func(status metav1.ConditionStatus, reason, msg string) *karpv1.NodeClaim {
		nc := claim()
		putCondition(nc, karpv1.ConditionDrained, status, reason, msg, t0)
		return nc
	}
	prior := func(status metav1.ConditionStatus) *metav1.Condition {
		return &metav1.Condition{Type: karpv1.ConditionDrained, Status: status, Reason: "Draining"}
	}
	cases := []struct {
		name  string
		nc    *karpv1.NodeClaim
		prior *metav1.Condition
		want  string
	}{
		{"unknown to true", with(metav1.ConditionTrue, "Drained", ""), prior(metav1.ConditionUnknown),
			"default-abcde Normal Drained: Status condition transitioned, Type: Drained, Status: Unknown -> True, Reason: Drained"},
		{"with a message", with(metav1.ConditionFalse, "TerminationGracePeriodElapsed", "volumes left"), prior(metav1.ConditionUnknown),
			"default-abcde Normal Drained: Status condition transitioned, Type: Drained, Status: Unknown -> False, Reason: TerminationGracePeriodElapsed, Message: volumes left"},
		{"appears", with(metav1.ConditionTrue, "Drained", ""), nil, ""},
		{"same status", with(metav1.ConditionUnknown, "Draining", "other"), prior(metav1.ConditionUnknown), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			for _, e := range conditionEvents(tc.nc, tc.prior, karpv1.ConditionDrained) {
				got += e.Object.(*karpv1.NodeClaim).Name + " " + e.Type + " " + e.Reason + ": " + e.Message
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
