package controller

import (
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// TestLeftoverDisruptionIsCleared ports Karpenter v1.14.1's disruption
// controller Reconcile, which removes karpenter.sh/disrupted:NoSchedule
// and the DisruptionReason condition from every node not in its
// orchestration queue and not marked for deletion: a taint left by a
// leader that died mid-command (or by Karpenter) goes on the next pass,
// but not while the node is being disrupted or terminated by someone.
func TestLeftoverDisruptionIsCleared(t *testing.T) {
	disruptedAt := metav1.NewTime(t0)
	for _, tc := range []struct {
		name   string
		change func(c *cluster)
		// cleared: the taint and the condition go.
		cleared bool
		// keepCondition: the condition stays even so (uninitialized).
		keepCondition bool
	}{
		{name: "no command, no intent: cleared", change: func(*cluster) {}, cleared: true},
		{name: "uninitialized: the taint goes, the condition stays", change: func(c *cluster) {
			c.claims["busy"].Status.Conditions = slices.DeleteFunc(c.claims["busy"].Status.Conditions, func(cd metav1.Condition) bool {
				return cd.Type == karpv1.ConditionInitialized
			})
		}, cleared: true, keepCondition: true},
		{name: "a pending termination intent holds it", change: func(c *cluster) {
			c.mustPropose(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-busy", InstanceID: "i-busy", Reason: "deleted", At: c.now})
		}},
		{name: "a cancelled termination intent does not", change: func(c *cluster) {
			c.mustPropose(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-busy", InstanceID: "i-busy", Reason: "Drift", At: c.now})
			c.mustPropose(fsm.TerminationCancelType, fsm.TerminationCancel{ID: "term-i-busy", Reason: "rolled back", At: c.now})
		}, cleared: true},
		{name: "nodeclaim being deleted", change: func(c *cluster) { c.claims["busy"].DeletionTimestamp = &disruptedAt }},
		{name: "node being deleted", change: func(c *cluster) { c.nodes["busy"].DeletionTimestamp = &disruptedAt }},
		{name: "instance terminating", change: func(c *cluster) {
			c.claims["busy"].Status.Conditions = append(c.claims["busy"].Status.Conditions, metav1.Condition{Type: karpv1.ConditionInstanceTerminating,
				Status: metav1.ConditionTrue, Reason: "InstanceTerminating", LastTransitionTime: disruptedAt})
		}},
		{name: "the agent's interruption", change: func(c *cluster) {
			c.nodes["busy"].Spec.Taints = append(c.nodes["busy"].Spec.Taints, corev1.Taint{Key: karpv1.TaintInterruptionKey, Value: "spot-interruption", Effect: corev1.TaintEffectNoSchedule})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.pools = []*karpv1.NodePool{testPool("default")}
			// One node whose pod fits nowhere else: nothing to decide.
			c.addNode("busy", "default", 2, testPod("web", "1500m"))
			c.nodes["busy"].Spec.Taints = []corev1.Taint{{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}}
			c.claims["busy"].Status.Conditions = append(c.claims["busy"].Status.Conditions, metav1.Condition{Type: karpv1.ConditionDisruptionReason,
				Status: metav1.ConditionTrue, Reason: "Drifted", LastTransitionTime: disruptedAt})
			tc.change(c)
			ctl := c.controller(nil)
			c.reconcile(ctl)
			ops := c.takeOps()
			untainted := slices.Contains(ops, "untaint busy")
			if untainted != tc.cleared || hasTaint(c.nodes["busy"]) == tc.cleared {
				t.Errorf("ops %q, taints %v; want the taint cleared: %v", ops, c.nodes["busy"].Spec.Taints, tc.cleared)
			}
			wantCond := !tc.cleared || tc.keepCondition
			if got := condition(c.claims["busy"], karpv1.ConditionDisruptionReason) != nil; got != wantCond {
				t.Errorf("DisruptionReason condition present = %v, want %v", got, wantCond)
			}
			// Once cleared, nothing more to do.
			c.reconcile(ctl)
			if ops := c.takeOps(); slices.Contains(ops, "untaint busy") {
				t.Errorf("second pass: %q", ops)
			}
		})
	}
}

// TestCommandTaintIsNotALeftover: the taint of a command in flight (drift
// waiting for its replacement) stays pass after pass.
func TestCommandTaintIsNotALeftover(t *testing.T) {
	c := driftCluster(t)
	ctl := c.controller(nil)
	launchReplacement(t, c, ctl, "old")
	c.passes(ctl, 3)
	if ops := c.takeOps(); slices.Contains(ops, "untaint old") || !hasTaint(c.nodes["old"]) {
		t.Fatalf("the command's taint was removed: %q", ops)
	}
}

// TestBrokenBudgetStopsOnlyItsPool: a pool whose budget schedule does not
// parse ("0 25 * * *" passes the CRD's pattern) allows no disruption, the
// other pools are disrupted as usual, and the error is logged once, not
// every pass (Karpenter's MustGetAllowedDisruptions and
// logInvalidBudgets).
func TestBrokenBudgetStopsOnlyItsPool(t *testing.T) {
	c := newCluster(t)
	broken := testPool("broken")
	hour, err := karpv1.ParseDuration("1h")
	if err != nil {
		t.Fatal(err)
	}
	broken.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}, {Nodes: "1", Schedule: new("0 25 * * *"), Duration: &hour}}
	c.pools = []*karpv1.NodePool{broken, testPool("good")}
	c.addNode("broken-idle", "broken", 2)
	c.addNode("good-idle", "good", 2)
	core, logs := observer.New(zapcore.InfoLevel)
	deps := c.deps(nil, nil)
	deps.Log = zap.New(core)
	ctl, err := New(Config{ValidationDelay: -1, Now: c.Now}, deps)
	if err != nil {
		t.Fatal(err)
	}
	c.reconcile(ctl)
	c.passes(ctl, 2)
	ops := c.takeOps()
	if !slices.Contains(ops, "delete good-idle") || slices.Contains(ops, "delete broken-idle") {
		t.Fatalf("ops %q: want good-idle deleted, broken-idle left alone", ops)
	}
	if n := logs.FilterMessageSnippet("invalid disruption budgets").FilterField(zap.String("nodepool", "broken")).Len(); n != 1 {
		t.Errorf("invalid budgets logged %d times over 3 passes, want once", n)
	}
	broken.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	c.passes(ctl, 2)
	if ops := c.takeOps(); !slices.Contains(ops, "delete broken-idle") {
		t.Errorf("ops %q after the fix: want broken-idle deleted", ops)
	}
	if n := logs.FilterMessageSnippet("disruption budgets valid again").Len(); n != 1 {
		t.Errorf("fixed budgets logged %d times, want once", n)
	}
}
