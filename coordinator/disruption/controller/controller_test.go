package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/fixture"
	"github.com/joiner-dev/joiner/test/observe"
)

// index is the position of op in ops, failing when absent.
func index(t *testing.T, ops []string, op string) int {
	t.Helper()
	i := slices.Index(ops, op)
	if i < 0 {
		t.Fatalf("op %q not in %q", op, ops)
	}
	return i
}

func TestEmptyNodeIsCommittedThenTaintedThenDeleted(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addNode("busy", "default", 2, testPod("web", "1500m"))
	c.addNode("idle", "default", 2)
	ctl := c.controller(nil)
	c.reconcile(ctl)
	ops := c.takeOps()
	commit, taint, annotate, del := index(t, ops, "commit term-i-idle"), index(t, ops, "taint idle"), index(t, ops, "annotate idle Empty"), index(t, ops, "delete idle")
	if !(commit < taint && taint < annotate && annotate < del) {
		t.Fatalf("ops out of order: %q", ops)
	}
	if slices.ContainsFunc(ops, func(s string) bool { return strings.HasSuffix(s, "busy") }) {
		t.Fatalf("busy node touched: %q", ops)
	}
	terms := c.fsm.Terminations()
	if len(terms) != 1 || terms[0].Reason != "Emptiness" || terms[0].InstanceID != "i-idle" {
		t.Fatalf("terminations = %+v", terms)
	}
	if cond := condition(c.claims["idle"], karpv1.ConditionDisruptionReason); cond == nil || cond.Reason != "Empty" {
		t.Fatalf("DisruptionReason condition = %+v", cond)
	}
	// The next pass does not touch it again, nor adopt its intent.
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("second pass acted: %q", ops)
	}
}

// driftCluster: one drifted node whose pod fits nowhere else, so drift
// needs a replacement.
func driftCluster(t *testing.T) *cluster { return driftedNode(t, "old", (*cluster).addNode) }

// driftedNode is a cluster with the one node name, added by add, that
// drifts with a pod that fits nowhere else.
func driftedNode(t *testing.T, name string, add func(c *cluster, name, pool string, cpu int64, pods ...*corev1.Pod) *corev1.Node) *cluster {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.hashes["default"] = "old"
	add(c, name, "default", 4, testPod("web", "3"))
	c.hashes["default"] = "new"
	return c
}

// launchReplacement makes a pass that must commit the drifted node's
// termination, launch its replacement and taint it; it returns the
// replacement NodeClaim.
func launchReplacement(t *testing.T, c *cluster, ctl *Controller, node string) string {
	t.Helper()
	c.reconcile(ctl)
	ops := c.takeOps()
	if len(ops) != 3 || ops[0] != "commit term-i-"+node || !strings.HasPrefix(ops[1], "launch default-r") || ops[2] != "taint "+node {
		t.Fatalf("ops = %q, want commit, launch, taint", ops)
	}
	return strings.TrimPrefix(ops[1], "launch ")
}

// passes advances the clock a minute before each of n passes.
func (c *cluster) passes(ctl *Controller, n int) {
	for range n {
		c.now = c.now.Add(time.Minute)
		c.reconcile(ctl)
	}
}

func TestDriftLaunchesReplacementFirstAndWaitsForIt(t *testing.T) {
	c := driftCluster(t)
	rec := &eventLog{}
	ctl := c.controller(rec)
	repl := launchReplacement(t, c, ctl, "old")
	if got := c.fsm.NominatedPods()["default/web"]; got != "intent-"+repl {
		t.Fatalf("web nominated to %q, want the replacement", got)
	}
	// Waiting: passes do nothing until the replacement is initialized.
	c.passes(ctl, 2)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted before the replacement initialized: %q", ops)
	}
	// Karpenter's Events on the replacement, once each.
	for _, want := range []string{
		"NodeClaim/" + repl + " DisruptionLaunching: Launching NodeClaim: Drifted",
		"NodeClaim/" + repl + " DisruptionWaitingReadiness: Waiting on readiness to continue disruption",
	} {
		if n := countLines(rec.got, want); n != 1 {
			t.Errorf("%d Events %q, want 1:\n%s", n, want, strings.Join(rec.got, "\n"))
		}
	}
	rec.take()
	c.initialize(repl)
	c.reconcile(ctl)
	if ops := c.takeOps(); !slices.Equal(ops, []string{"annotate old Drifted", "delete old"}) {
		t.Fatalf("ops = %q, want the drifted claim annotated and deleted", ops)
	}
	for _, want := range []string{"Node/old DisruptionTerminating: Disrupting Node: Drifted", "NodeClaim/old DisruptionTerminating: Disrupting NodeClaim: Drifted"} {
		if n := countLines(rec.got, want); n != 1 {
			t.Errorf("%d Events %q, want 1:\n%s", n, want, strings.Join(rec.got, "\n"))
		}
	}
	if c.launchCalls != 1 {
		t.Fatalf("%d launches", c.launchCalls)
	}
	// The termination controller finishes; the replacement is left alone
	// (its pod moved there).
	c.terminate("old", repl)
	c.passes(ctl, 3)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("replacement disrupted: %q", ops)
	}
}

func TestReplacementNotDisruptedWhileItsPodsAreOnTheirWay(t *testing.T) {
	c := driftCluster(t)
	ctl := c.controller(nil)
	repl := launchReplacement(t, c, ctl, "old")
	c.initialize(repl)
	c.reconcile(ctl)
	if ops := c.takeOps(); !slices.Equal(ops, []string{"annotate old Drifted", "delete old"}) {
		t.Fatalf("ops = %q, want only old deleted", ops)
	}
	// The old node drains slowly; the empty replacement must not go.
	c.passes(ctl, 5)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted on the replacement while old still drains: %q", ops)
	}
}

func TestReplacementFailureRollsBackAndCoolsDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(c *cluster, repl string)
	}{
		{"nodeclaim deleted", func(c *cluster, repl string) {
			nc := c.claims[repl].DeepCopy()
			now := metav1.NewTime(c.now)
			nc.DeletionTimestamp = &now
			c.claims[repl] = nc
		}},
		{"launch failed", func(c *cluster, repl string) {
			c.mustPropose(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "intent-" + repl, Attempt: 1, At: c.now})
			c.mustPropose(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent-" + repl, Attempt: 1, At: c.now,
				Failed: &fsm.Failed{Reason: "InsufficientInstanceCapacity"}})
		}},
		{"timeout", func(c *cluster, repl string) { c.now = c.now.Add(11 * time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := driftCluster(t)
			rec := record.NewFakeRecorder(100)
			reg := prometheus.NewRegistry()
			ctl, err := New(Config{ValidationDelay: -1, Now: c.Now}, c.deps(reg, rec))
			if err != nil {
				t.Fatal(err)
			}
			repl := launchReplacement(t, c, ctl, "old")
			// Karpenter's markDisrupted: the condition comes with the taint,
			// while the command waits for its replacement...
			if cond := meta.FindStatusCondition(c.claims["old"].Status.Conditions, karpv1.ConditionDisruptionReason); cond == nil || cond.Reason != "Drifted" {
				t.Fatalf("DisruptionReason while waiting = %+v, want Drifted", cond)
			}
			tc.fail(c, repl)
			c.reconcile(ctl)
			// ...and goes with the rollback.
			if cond := meta.FindStatusCondition(c.claims["old"].Status.Conditions, karpv1.ConditionDisruptionReason); cond != nil {
				t.Fatalf("DisruptionReason after the rollback = %+v, want none", cond)
			}
			ops := c.takeOps()
			if !slices.Equal(ops, []string{"untaint old", "cancel term-i-old"}) {
				t.Fatalf("ops = %q, want untaint then cancel", ops)
			}
			// Karpenter's queue counts the replacements that never
			// initialized: the one.
			if got, _ := observe.Sample(t, reg, "karpenter_voluntary_disruption_queue_failures_total",
				map[string]string{"decision": "replace", "reason": "drifted"}); got != 1 {
				t.Errorf("queue failures = %v, want 1", got)
			}
			if p := c.pendingTerminations(); len(p) != 0 {
				t.Fatalf("pending terminations %v", p)
			}
			if inst, _ := c.fsm.Instance("i-old"); inst.State != fsm.InstanceReady {
				t.Fatalf("instance state %s, want ready again", inst.State)
			}
			if !strings.Contains(observe.EventsText(rec), "DisruptionRolledBack") {
				t.Fatal("no DisruptionRolledBack event")
			}
			// Cooling down: no new attempt for 5 minutes.
			c.now = c.now.Add(4 * time.Minute)
			c.reconcile(ctl)
			if ops := c.takeOps(); len(ops) != 0 {
				t.Fatalf("acted during the cool-down: %q", ops)
			}
			c.now = c.now.Add(2 * time.Minute)
			c.reconcile(ctl)
			if ops := c.takeOps(); len(ops) == 0 || ops[0] != "commit term-i-old" {
				t.Fatalf("after the cool-down ops = %q, want a new attempt", ops)
			}
		})
	}
}

func TestLaunchErrorRollsBack(t *testing.T) {
	c := driftCluster(t)
	c.launchErr = errBoom
	reg := prometheus.NewRegistry()
	ctl, err := New(Config{ValidationDelay: -1, Now: c.Now}, c.deps(reg, nil))
	if err != nil {
		t.Fatal(err)
	}
	c.reconcile(ctl)
	ops := c.takeOps()
	if !slices.Equal(ops, []string{"commit term-i-old", "cancel term-i-old"}) {
		t.Fatalf("ops = %q, want commit then cancel (never tainted)", ops)
	}
	// Karpenter's StartCommand fails before its queue: no queue failure.
	if got, _ := observe.Sample(t, reg, "karpenter_voluntary_disruption_queue_failures_total", nil); got != 0 {
		t.Errorf("queue failures = %v, want none", got)
	}
}

func TestCommitFailureActsOnNothing(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addNode("busy", "default", 4, testPod("web", "2"))
	c.addNode("idle", "default", 2)
	c.proposeErr[fsm.TerminationIntentType] = errBoom
	ctl := c.controller(nil)
	if err := ctl.Reconcile(t.Context()); err == nil {
		t.Fatal("no error from a failed commit")
	}
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted without a commit: %q", ops)
	}
}

func TestNewLeaderResumesWaitingDisruption(t *testing.T) {
	c := driftCluster(t)
	repl := launchReplacement(t, c, c.controller(nil), "old")
	resumeAfterLeaderChange(t, c, repl, "old")
}

// resumeAfterLeaderChange: a fresh controller (a new leader with empty
// memory) waits for the replacement repl the old one launched, then
// finishes the disruption of node.
func resumeAfterLeaderChange(t *testing.T, c *cluster, repl, node string) {
	t.Helper()
	ctl := c.controller(nil)
	c.passes(ctl, 1)
	if ops := c.takeOps(); len(ops) != 0 || c.launchCalls != 1 {
		t.Fatalf("new leader acted before the replacement initialized: %q (%d launches)", ops, c.launchCalls)
	}
	c.initialize(repl)
	c.reconcile(ctl)
	if ops := c.takeOps(); !slices.Equal(ops, []string{"annotate " + node + " Drifted", "delete " + node}) {
		t.Fatalf("ops = %q, want %s annotated and deleted", ops, node)
	}
}

func TestNewLeaderRollsBackDisruptionWithoutReplacement(t *testing.T) {
	rollBackWithoutReplacement(t, driftCluster(t), "old", "i-old")
}

// rollBackWithoutReplacement: the old leader committed the disruption of
// node (instance) and died before launching; the new leader cancels the
// orphan intent and never deletes the node.
func rollBackWithoutReplacement(t *testing.T, c *cluster, node, instance string) {
	t.Helper()
	c.mustPropose(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-" + instance, InstanceID: instance, Reason: "Drift", At: c.now})
	ctl := c.controller(nil)
	c.reconcile(ctl)
	ops := c.takeOps()
	if len(ops) < 1 || ops[0] != "cancel term-"+instance {
		t.Fatalf("ops = %q, want the orphan cancelled first", ops)
	}
	if slices.Contains(ops, "delete "+node) {
		t.Fatalf("deleted a node whose pods had no replacement: %q", ops)
	}
}

func TestNewLeaderFinishesEmptyAndExpiredNodes(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.pools[0].Spec.Disruption.ConsolidateAfter = karpv1.NeverDuration()
	c.addNode("busy", "default", 4, testPod("web", "2"))
	c.addNode("idle", "default", 2)
	c.mustPropose(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-idle", InstanceID: "i-idle", Reason: "Emptiness", At: c.now})
	c.mustPropose(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-busy", InstanceID: "i-busy", Reason: "Expiration", At: c.now})
	// Not ours: an interruption's intent is left alone.
	c.addNode("spot", "default", 2)
	c.mustPropose(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-spot", InstanceID: "i-spot", Reason: "interruption", At: c.now})
	ctl := c.controller(nil)
	c.reconcile(ctl)
	ops := c.takeOps()
	for _, want := range []string{"taint idle", "delete idle", "taint busy", "annotate busy Expired", "delete busy"} {
		index(t, ops, want)
	}
	if slices.ContainsFunc(ops, func(s string) bool { return strings.HasSuffix(s, "spot") }) {
		t.Fatalf("touched the interrupted node: %q", ops)
	}
}

func TestExpirationIsForcefulDespitePDBAndBudget(t *testing.T) {
	c := newCluster(t)
	pool := testPool("default")
	pool.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(time.Hour)
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	c.pools = []*karpv1.NodePool{pool}
	c.addNode("n1", "default", 4, testPod("web", "2"))
	c.pdbs = []*policyv1.PodDisruptionBudget{pdb("web", 0)}
	ctl := c.controller(nil)
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted before expiry: %q", ops)
	}
	c.now = c.now.Add(2 * time.Hour)
	c.reconcile(ctl)
	ops := c.takeOps()
	if !slices.Equal(ops, []string{"commit term-i-n1", "taint n1", "annotate n1 Expired", "delete n1"}) {
		t.Fatalf("ops = %q", ops)
	}
}

// Expiration is Karpenter's own controller: a consolidation waiting for
// its validation does not hold it up.
func TestExpirationDuringValidation(t *testing.T) {
	c := newCluster(t)
	pool := testPool("default")
	pool.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(time.Hour)
	c.pools = []*karpv1.NodePool{pool}
	c.addNode("aging", "default", 4, testPod("web", "3"))
	c.now = c.now.Add(time.Hour - 5*time.Second)
	c.addNode("idle", "default", 2)
	ctl := c.controllerWith(Config{}, nil)
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted before validation: %q", ops)
	}
	c.now = c.now.Add(10 * time.Second)
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) == 0 || ops[0] != "commit term-i-aging" || slices.Contains(ops, "commit term-i-idle") {
		t.Fatalf("ops = %q, want aging (only) expired during the wait", ops)
	}
	c.now = c.now.Add(6 * time.Second)
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) == 0 || ops[0] != "commit term-i-idle" {
		t.Fatalf("ops = %q, want idle deleted once validated", ops)
	}
}

func pdb(app string, allowed int32) *policyv1.PodDisruptionBudget {
	return fixture.PDB(app, allowed, app)
}

func TestConditionsEventsAndMetrics(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.pools[0].Spec.Disruption.ConsolidateAfter = karpv1.NewDuration(10 * time.Minute)
	c.hashes["default"] = "old"
	c.addNode("a", "default", 2, testPod("web", "1"))
	c.hashes["default"] = "new"
	c.addNode("b", "default", 4, testPod("api", "3"))
	c.pdbs = []*policyv1.PodDisruptionBudget{pdb("web", 0)}
	rec := record.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	ctl, err := New(Config{Now: c.Now, ValidationDelay: -1}, c.deps(reg, rec))
	if err != nil {
		t.Fatal(err)
	}
	c.reconcile(ctl)
	a, b := c.claims["a"], c.claims["b"]
	if cond := condition(a, karpv1.ConditionDrifted); cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "nodepool default changed") {
		t.Fatalf("a Drifted = %+v", cond)
	}
	if condition(b, karpv1.ConditionDrifted) != nil {
		t.Fatal("b has a Drifted condition")
	}
	for _, nc := range []*karpv1.NodeClaim{a, b} {
		if cond := condition(nc, karpv1.ConditionEmpty); cond == nil || cond.Status != metav1.ConditionFalse {
			t.Fatalf("%s Empty = %+v", nc.Name, cond)
		}
		if cond := condition(nc, karpv1.ConditionConsolidatable); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "ConsolidateAfterNotPassed" {
			t.Fatalf("%s Consolidatable = %+v", nc.Name, cond)
		}
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	if !slices.ContainsFunc(events, func(e string) bool {
		return strings.Contains(e, "DisruptionBlocked") && strings.Contains(e, "Pdb prevents pod evictions (PodDisruptionBudget=[default/web])")
	}) {
		t.Fatalf("no pdb event in %q", events)
	}
	// Same reasons next pass: no new Events.
	c.reconcile(ctl)
	if n := len(rec.Events); n != 0 {
		t.Fatalf("%d repeated events", n)
	}
	c.now = c.now.Add(11 * time.Minute)
	c.reconcile(ctl)
	if cond := condition(c.claims["b"], karpv1.ConditionConsolidatable); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("b Consolidatable after consolidateAfter = %+v", cond)
	}
	if got := testutil.ToFloat64(ctl.metrics.eligible.WithLabelValues("Drift")); got != 0 {
		// a is drifted but its pod's PDB blocks it.
		t.Fatalf("eligible Drift = %v", got)
	}
	if got := testutil.ToFloat64(ctl.metrics.budget.WithLabelValues("default", "Drifted")); got != 2 {
		t.Fatalf("budget allowed = %v, want 2 (100%% of 2 nodes)", got)
	}
	if n, err := testutil.GatherAndCount(reg, "joiner_disruption_decisions_total", "joiner_disruption_budget_allowed", "joiner_nodes_eligible_for_disruption"); err != nil || n == 0 {
		t.Fatalf("gathered %d series: %v", n, err)
	}
}

func TestDecisionMetric(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addNode("idle", "default", 2)
	c.addNode("idle-2", "default", 2)
	c.addNode("busy", "default", 4, testPod("web", "2"))
	reg := prometheus.NewRegistry()
	ctl, err := New(Config{ValidationDelay: -1, Now: c.Now}, c.deps(reg, nil))
	if err != nil {
		t.Fatal(err)
	}
	c.reconcile(ctl)
	if ops := c.takeOps(); !slices.Contains(ops, "delete idle") || !slices.Contains(ops, "delete idle-2") {
		t.Fatalf("ops = %q, want both idle nodes deleted in one decision", ops)
	}
	if got := testutil.ToFloat64(ctl.metrics.decisions.WithLabelValues("Emptiness", "delete")); got != 1 {
		t.Fatalf("decisions{Emptiness,delete} = %v", got)
	}
	// One decision with two candidates of one pool counts once for the
	// pool (Karpenter's StartCommand: lo.Uniq of the candidates' pools).
	if got, _ := observe.Sample(t, reg, "karpenter_voluntary_disruption_decisions_by_nodepool_total",
		map[string]string{"nodepool": "default", "decision": "delete", "reason": "empty"}); got != 1 {
		t.Errorf("decisions_by_nodepool{default} = %v, want 1", got)
	}
}

// TestRunPassesOnChangesUntilCancelled: Run makes a pass at start and
// after a cache change, and returns when its context ends.
func TestRunPassesOnChangesUntilCancelled(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addNode("busy", "default", 2, testPod("web", "1500m"))
	ctl, err := New(Config{Now: c.Now, Interval: time.Hour, MinInterval: time.Millisecond}, c.deps(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	waitUntil(t, func() bool { return c.snapshots.Load() >= 1 })
	c.changes <- struct{}{}
	waitUntil(t, func() bool { return c.snapshots.Load() >= 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatal("test ended before the condition held")
		case <-time.After(time.Millisecond):
		}
	}
}

// TestConsolidationIsValidatedBeforeActing: an emptiness decision waits
// ValidationDelay, deciding nothing else meanwhile, and is then validated
// again, as Karpenter's is: a node that got a pod during the wait is left
// alone, the other is deleted. Drift acts at once.
func TestConsolidationIsValidatedBeforeActing(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addNode("busy", "default", 2, testPod("web", "1500m"))
	c.addNode("idle", "default", 2)
	c.addNode("other", "default", 2)
	ctl := c.controllerWith(Config{}, nil)
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted before validation: %q", ops)
	}
	// "other" gets a pod during the wait.
	p := testPod("api", "100m")
	p.Spec.NodeName = "other"
	c.pods = append(c.pods, p)
	c.now = c.now.Add(10 * time.Second)
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted %s into the validation delay: %q", 10*time.Second, ops)
	}
	c.now = c.now.Add(6 * time.Second)
	c.reconcile(ctl)
	ops := c.takeOps()
	if len(ops) == 0 || ops[0] != "commit term-i-idle" || slices.Contains(ops, "commit term-i-other") {
		t.Fatalf("ops = %q, want idle (only) disrupted after validation", ops)
	}

	d := driftCluster(t)
	ctl = d.controllerWith(Config{}, nil)
	d.reconcile(ctl)
	if ops := d.takeOps(); len(ops) == 0 || ops[0] != "commit term-i-old" {
		t.Fatalf("drift delayed: %q", ops)
	}
}

// addWebNodes adds, for each name, a 4-vCPU node of pool default with one
// 1-vCPU pod web-<name> on it.
func (c *cluster) addWebNodes(names ...string) {
	for _, n := range names {
		c.addNode(n, "default", 4, testPod("web-"+n, "1"))
	}
}

// A consolidation that fails its validation lets the same pass go on with
// the methods after its own, as Karpenter's reconcile does
// (consolidation_test.go "should continue to single nodeclaim
// consolidation when multi-nodeclaim consolidation fails validation after
// the node ttl"): the three nodes' merge is turned down once a and b get
// more pods, and single-node consolidation deletes c instead of a new
// merge of all three being proposed.
func TestFailedValidationGoesOnToTheNextMethod(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addWebNodes("a", "b", "c")
	ctl := c.controllerWith(Config{}, nil)
	c.reconcile(ctl) // the merge of a, b and c waits for its validation
	for _, n := range []string{"a", "b"} {
		p := testPod("more-"+n, "1")
		p.Spec.NodeName = n
		c.pods = append(c.pods, p)
	}
	c.now = c.now.Add(16 * time.Second)
	c.reconcile(ctl) // turned down; single-node decides c, to validate
	c.now = c.now.Add(16 * time.Second)
	c.reconcile(ctl)
	ops := c.takeOps()
	if len(ops) == 0 || ops[0] != "commit term-i-c" || slices.Contains(ops, "commit term-i-a") || slices.Contains(ops, "commit term-i-b") {
		t.Fatalf("ops = %q, want c (only) disrupted by single-node consolidation", ops)
	}
}

// countLines counts the lines of got equal to want.
func countLines(got []string, want string) int {
	n := 0
	for _, g := range got {
		if g == want {
			n++
		}
	}
	return n
}

// An empty node whose NodeClaim names another provider's node class is
// that provider's to disrupt (Karpenter's IsManaged); Joiner's own
// adopted Karpenter nodes are consolidated.
func TestOtherProvidersNodesAreLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  karpv1.NodeClassReference
		want bool // disrupted
	}{
		{"EC2NodeClass", karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}, true},
		{"another provider's class", karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.pools = []*karpv1.NodePool{testPool("default")}
			c.addNode("busy", "default", 2, testPod("web", "1500m"))
			c.addAdoptedNode("idle", "default", 2)
			c.claims["idle"].Spec.NodeClassRef = &tc.ref
			c.reconcile(c.controller(nil))
			ops := c.takeOps()
			if got := slices.Contains(ops, "delete idle"); got != tc.want {
				t.Fatalf("idle deleted %v, want %v (ops %q)", got, tc.want, ops)
			}
		})
	}
}

// After a consolidation deletes a node, the next consolidation waits until
// that node's pods have moved (a decision made meanwhile would fail its
// validation on the pod events they cause), at most SettleMax.
func TestConsolidationWaitsForMovingPods(t *testing.T) {
	for _, tc := range []struct {
		name    string
		moved   bool          // the first node's pods landed on keep
		pending bool          // a pod made since is not bound yet
		elapsed time.Duration // since the first command
		want    bool          // other is deleted
	}{
		{name: "pods still on the deleted node", elapsed: 10 * time.Second},
		{name: "pods moved", moved: true, elapsed: 10 * time.Second, want: true},
		{name: "a new pod not bound yet", moved: true, pending: true, elapsed: 10 * time.Second},
		{name: "waited SettleMax", elapsed: time.Minute, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.pools = []*karpv1.NodePool{testPool("default")}
			keep := c.addNode("keep", "default", 8, testPod("k", "1"))
			keep.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
			c.addNode("small", "default", 2, testPod("s", "1"))
			ctl := c.controller(nil)
			c.reconcile(ctl)
			if ops := c.takeOps(); !slices.Contains(ops, "delete small") {
				t.Fatalf("first pass: %q, want small deleted", ops)
			}
			c.addNode("other", "default", 2, testPod("o", "1"))
			if tc.moved {
				c.terminate("small", "keep")
			}
			c.now = c.now.Add(tc.elapsed)
			if tc.pending {
				p := testPod("s-new", "1") // kube-scheduler has not tried it yet
				p.CreationTimestamp = metav1.NewTime(c.now)
				c.pods = append(c.pods, p)
			}
			c.reconcile(ctl)
			if got := slices.Contains(c.takeOps(), "delete other"); got != tc.want {
				t.Fatalf("other deleted %v, want %v", got, tc.want)
			}
		})
	}
}
