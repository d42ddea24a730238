package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/test/observe"
)

// eventLog records Events with the kind and name of the object they are on.
type eventLog struct{ got []string }

func (e *eventLog) Event(obj runtime.Object, _, reason, message string) {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
	name := ""
	if o, err := meta.Accessor(obj); err == nil {
		name = o.GetName()
	}
	e.got = append(e.got, fmt.Sprintf("%s/%s %s: %s", kind, name, reason, message))
}

func (e *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	e.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (e *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	e.Eventf(obj, typ, reason, format, args...)
}

// has says whether an Event on kind/name has reason and a message
// containing substr.
func (e *eventLog) has(kind, name, reason, substr string) bool {
	prefix := kind + "/" + name + " " + reason + ": "
	return slices.ContainsFunc(e.got, func(s string) bool { return strings.HasPrefix(s, prefix) && strings.Contains(s, substr) })
}

func (e *eventLog) take() []string {
	out := e.got
	e.got = nil
	return out
}

// Every node left alone for a reason the user can act on gets Karpenter's
// Event on its NodeClaim and its Node: DisruptionBlocked for a PDB or a
// budget, Unconsolidatable for consolidateAfter or no cheaper replacement;
// a NodePool whose budget allows nothing gets DisruptionBlocked. Events are
// not repeated while the reason stays.
func TestEventsSayWhyNodesAreLeftAlone(t *testing.T) {
	c := newCluster(t)
	frozen := testPool("frozen")
	frozen.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	settling := testPool("settling")
	settling.Spec.Disruption.ConsolidateAfter = karpv1.NewDuration(10 * time.Minute)
	c.pools = []*karpv1.NodePool{testPool("default"), frozen, settling}
	c.addNode("held", "default", 2, testPod("web", "1500m"))
	c.addNode("snug", "default", 1, testPod("db", "900m"))
	c.addNode("cold", "frozen", 4, testPod("batch", "3500m"))
	// fresh has room for db, but is inside its consolidateAfter window.
	c.addNode("fresh", "settling", 4, testPod("api", "1"))
	c.pdbs = []*policyv1.PodDisruptionBudget{pdb("web", 0)}
	rec := &eventLog{}
	ctl := c.controller(rec)
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted: %q", ops)
	}
	for _, want := range []struct{ kind, name, reason, msg string }{
		{"NodeClaim", "held", disruption.EventDisruptionBlocked, "Pdb prevents pod evictions (PodDisruptionBudget=[default/web])"},
		{"Node", "held", disruption.EventDisruptionBlocked, "Pdb prevents pod evictions (PodDisruptionBudget=[default/web])"},
		{"NodeClaim", "snug", disruption.EventUnconsolidatable, "Can't replace with a cheaper node"},
		{"Node", "snug", disruption.EventUnconsolidatable, "Can't replace with a cheaper node"},
		{"NodeClaim", "cold", disruption.EventDisruptionBlocked, "budget of nodepool frozen for reason Underutilized"},
		{"NodePool", "frozen", disruption.EventDisruptionBlocked, "No allowed disruptions for disruption reason Underutilized due to blocking budget"},
		{"NodePool", "frozen", disruption.EventDisruptionBlocked, "No allowed disruptions for disruption reason Drifted due to blocking budget"},
		{"NodeClaim", "fresh", disruption.EventUnconsolidatable, "Not consolidatable until"},
		{"Node", "fresh", disruption.EventUnconsolidatable, "consolidateAfter 10m"},
	} {
		if !rec.has(want.kind, want.name, want.reason, want.msg) {
			t.Errorf("no %s Event on %s/%s saying %q in:\n%s", want.reason, want.kind, want.name, want.msg, strings.Join(rec.got, "\n"))
		}
	}
	if rec.has("NodePool", "default", disruption.EventDisruptionBlocked, "") {
		t.Errorf("budget Event on a pool whose budget allows disruptions: %q", rec.got)
	}
	rec.take()
	c.now = c.now.Add(time.Minute)
	c.reconcile(ctl)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("Events repeated: %q", got)
	}
	// The budget opens, then blocks again: the pool's Event comes again.
	frozen.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted: %q", ops)
	}
	if rec.has("NodePool", "frozen", disruption.EventDisruptionBlocked, "") {
		t.Fatalf("budget Event after the budget opened: %q", rec.got)
	}
	frozen.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	c.reconcile(ctl)
	if !rec.has("NodePool", "frozen", disruption.EventDisruptionBlocked, "reason Empty due to blocking budget") {
		t.Fatalf("no budget Event once the budget blocks again: %q", rec.got)
	}
}

// The SpotToSpotConsolidation gate reaches the decision: off (Karpenter's
// default) a spot node is left alone with an Unconsolidatable Event; on, it
// is replaced by a cheaper spot node.
func TestSpotToSpotGate(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("gate=", on), func(t *testing.T) {
			c := newCluster(t)
			c.types = testTypes(16)
			for _, it := range c.types {
				it.Offerings = append(it.Offerings, it.Offerings[0])
				it.Offerings[1].CapacityType = karpv1.CapacityTypeSpot
				it.Offerings[1].Price /= 2
			}
			pool := testPool("default")
			pool.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot}
			c.pools = []*karpv1.NodePool{pool}
			c.addNode("big", "default", 16, testPod("web", "500m"))
			for _, obj := range []map[string]string{c.nodes["big"].Labels, c.claims["big"].Labels} {
				obj[karpv1.LabelCapacityType] = karpv1.CapacityTypeSpot
			}
			rec := &eventLog{}
			ctl := c.controllerWith(Config{ValidationDelay: -1, FeatureGates: disruption.FeatureGates{SpotToSpotConsolidation: on}}, rec)
			c.reconcile(ctl)
			ops := c.takeOps()
			launched := slices.ContainsFunc(ops, func(op string) bool { return strings.HasPrefix(op, "launch ") })
			if launched != on {
				t.Fatalf("ops %q (replacement launched: %v, want %v)", ops, launched, on)
			}
			if !on && !rec.has("NodeClaim", "big", disruption.EventUnconsolidatable, "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node") {
				t.Fatalf("no Unconsolidatable Event in %q", rec.got)
			}
		})
	}
}

// The view's pending pods join the simulation (Input.PendingPods): a node
// whose room a pending pod needs is not replaced by a smaller one, and the
// copies of disrupted nodes' pods the view also lists are not counted
// twice.
func TestPendingPodsJoinTheSimulation(t *testing.T) {
	for _, withPending := range []bool{false, true} {
		t.Run(fmt.Sprint("pending=", withPending), func(t *testing.T) {
			c := newCluster(t)
			c.pools = []*karpv1.NodePool{testPool("default")}
			c.addNode("n", "default", 4, testPod("web", "1"))
			if withPending {
				p := testPod("big", "2500m")
				p.Status.Phase = corev1.PodPending
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
				c.pending = append(c.pending, p)
			}
			// A running pod of a disrupted node, as the view lists it for
			// the provisioner: not a pending pod for disruption.
			moving := testPod("moving", "3")
			moving.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
			c.pending = append(c.pending, moving)
			ctl := c.controller(nil)
			c.reconcile(ctl)
			launched := slices.ContainsFunc(c.takeOps(), func(op string) bool { return strings.HasPrefix(op, "launch ") })
			if launched == withPending {
				t.Fatalf("replacement launched: %v, want %v", launched, !withPending)
			}
		})
	}
}

// A consolidation its Balanced pool scores gets Karpenter's
// ConsolidationApproved with the score: here a move of several nodes, on
// the pool (a one-node move has it on the Node and NodeClaim). The
// decision made again after a failed validation does not repeat it within
// two minutes.
func TestConsolidationApprovedEvents(t *testing.T) {
	c := newCluster(t)
	pool := testPool("default")
	pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced
	c.pools = []*karpv1.NodePool{pool}
	c.addWebNodes("a", "b", "c")
	rec := &eventLog{}
	ctl := c.controllerWith(Config{ValidationDelay: time.Minute}, rec)
	approved := func() []string {
		var out []string
		for _, e := range rec.take() {
			if strings.Contains(e, events.ConsolidationApproved) {
				out = append(out, e)
			}
		}
		return out
	}
	c.reconcile(ctl)
	want := []string{"NodePool/default ConsolidationApproved: score 0.75 >= threshold 0.50 (k: 2, savings 75.0%, disruption 100.0%)"}
	if got := approved(); !slices.Equal(got, want) {
		t.Fatalf("ConsolidationApproved Events %q, want %q", got, want)
	}
	// The budget runs out during the wait (the validation fails, nothing
	// is decided), then comes back: the same move is made again.
	budgets := pool.Spec.Disruption.Budgets
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	c.now = c.now.Add(61 * time.Second)
	c.reconcile(ctl)
	pool.Spec.Disruption.Budgets = budgets
	c.reconcile(ctl)
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted: %q", ops)
	}
	if got := approved(); len(got) != 0 {
		t.Fatalf("repeated within the dedupe window: %q", got)
	}
}

// A consolidation that replaces nodes leaves Karpenter's
// ConsolidationCandidate Event on its candidates when it starts its
// validation; one that fails its validation once the delay has run out
// counts its candidates in
// karpenter_voluntary_disruption_failed_validations_total when they
// changed (churn) or ran out of budget (a single-node one also leaves
// ConsolidationRejected with Karpenter's reason, TestSingleNodeRejected).
// Every move the simulation finds is counted once in
// karpenter_consolidation_moves_total, however many passes find it again.
func TestValidationEventsAndMetrics(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addWebNodes("a", "b", "c")
	rec := &eventLog{}
	reg := prometheus.NewRegistry()
	ctl, err := New(Config{ValidationDelay: time.Minute, Now: c.Now}, c.deps(reg, rec))
	if err != nil {
		t.Fatal(err)
	}
	with := func(reason string) []string {
		var out []string
		for _, e := range rec.got {
			if strings.Contains(e, " "+reason+": ") {
				out = append(out, e)
			}
		}
		return out
	}
	sample := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, _ := observe.Sample(t, reg, name, labels)
		return v
	}
	const failed, moves = "karpenter_voluntary_disruption_failed_validations_total", "karpenter_consolidation_moves_total"
	approved := map[string]string{"decision": "approved", "nodepool": "default", "policy": "WhenEmptyOrUnderutilized"}

	// A pass finds the move, two more wait for its validation; then the
	// budget runs out (a failed validation, nothing decided) and comes
	// back, and a pass finds the same move again: one Event per
	// candidate, one move.
	for range 3 {
		c.reconcile(ctl)
		c.now = c.now.Add(10 * time.Second)
	}
	c.now = c.now.Add(31 * time.Second)
	budgets := c.pools[0].Spec.Disruption.Budgets
	c.pools[0].Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	c.reconcile(ctl)
	if got := sample(failed, map[string]string{"consolidation_type": "multi"}); got != 3 {
		t.Fatalf("failed validations %v, want 3 (budget)", got)
	}
	c.pools[0].Spec.Disruption.Budgets = budgets
	c.reconcile(ctl)
	var want []string
	for _, n := range []string{"a", "b", "c"} {
		for _, kind := range []string{"Node", "NodeClaim"} {
			want = append(want, kind+"/"+n+" ConsolidationCandidate: Consolidation candidate: replace: ["+n+"] (part of 3-node consolidation) (savings: $0.45)")
		}
	}
	if got := with(events.ConsolidationCandidate); !slices.Equal(got, want) {
		t.Fatalf("candidate Events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := sample(moves, approved); got != 1 {
		t.Fatalf("%v moves counted for one move found twice, want 1", got)
	}

	// A pod that may not be disrupted lands on b: the move is not made
	// again (churn, 3 candidates; multi-node consolidation leaves no
	// ConsolidationRejected); the same pass goes on to single-node
	// consolidation, as Karpenter's, which deletes a node, without a
	// ConsolidationCandidate Event.
	p := testPod("pinned", "100m")
	p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	p.Spec.NodeName = "b"
	c.pods = append(c.pods, p)
	rec.got = nil
	c.reconcile(ctl)
	if got := sample(failed, map[string]string{"consolidation_type": "multi"}); got != 3 {
		t.Fatalf("failed validations %v before the delay ran out, want 3", got)
	}
	c.now = c.now.Add(time.Minute)
	c.reconcile(ctl)
	if got := append(with(events.ConsolidationRejected), with(events.ConsolidationCandidate)...); len(got) != 0 {
		t.Fatalf("Events %q, want no rejection (multi-node) and no candidate (a delete)", got)
	}
	if got := sample(failed, map[string]string{"consolidation_type": "multi"}); got != 6 {
		t.Fatalf("failed validations %v, want 6", got)
	}
	if got := sample(moves, approved); got != 2 {
		t.Fatalf("%v moves counted, want 2", got)
	}

	// The pool's budget drops to 0: that move fails for its budget.
	c.pools[0].Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	c.now = c.now.Add(time.Minute)
	c.reconcile(ctl)
	if got := sample(failed, map[string]string{"consolidation_type": "single"}); got != 1 {
		t.Fatalf("single-node failed validations %v, want 1", got)
	}
	if got := sample(failed, map[string]string{"consolidation_type": "multi"}); got != 6 {
		t.Fatalf("multi-node failed validations %v, want still 6", got)
	}
	if n, err := testutil.GatherAndCount(reg, "karpenter_consolidation_score"); err != nil || n != 0 {
		t.Fatalf("%d score series (%v), want none outside Balanced pools", n, err)
	}
}

// A single-node consolidation that replaces its node and is not made again
// leaves Karpenter's ConsolidationRejected Event with its reason; a new
// term validates afresh.
func TestSingleNodeRejected(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.addNode("big", "default", 16, testPod("web", "1"))
	rec := &eventLog{}
	ctl, err := New(Config{ValidationDelay: time.Minute, Now: c.Now}, c.deps(nil, rec))
	if err != nil {
		t.Fatal(err)
	}
	c.reconcile(ctl)
	const command = "replace: [big] -> [1 replacement]"
	if !rec.has("NodeClaim", "big", events.ConsolidationCandidate, "Consolidation candidate: "+command+" (savings: $") {
		t.Fatalf("no candidate Event: %q", rec.got)
	}
	p := testPod("pinned", "100m")
	p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	p.Spec.NodeName = "big"
	c.pods = append(c.pods, p)
	c.now = c.now.Add(10 * time.Second)
	c.reconcile(ctl)
	if rec.has("Node", "big", events.ConsolidationRejected, "") {
		t.Fatalf("rejected before the validation delay ran out: %q", rec.got)
	}
	c.now = c.now.Add(time.Minute)
	c.reconcile(ctl)
	if !rec.has("Node", "big", events.ConsolidationRejected, "Consolidation rejected: "+command+", reason: churn (savings: $") {
		t.Fatalf("no rejection for churn: %q", rec.got)
	}

	// The decision is made again, then the leadership changes: the next
	// term (its first pass a minute later) waits the full delay again.
	c.pods = c.pods[:len(c.pods)-1]
	c.reconcile(ctl)
	c.now = c.now.Add(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = ctl.Run(ctx) // one pass, then the term ends
	if ops := c.takeOps(); len(ops) != 0 {
		t.Fatalf("acted at once on a decision validated in an earlier term: %q", ops)
	}
}

// The budget gauges are set in place each pass and a pool's series go
// when the pool does (never all of them between two passes).
func TestBudgetSeriesFollowPools(t *testing.T) {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("a"), testPool("b")}
	c.addNode("a-1", "a", 4, testPod("web-a", "1"))
	c.addNode("b-1", "b", 4, testPod("web-b", "1"))
	reg := prometheus.NewRegistry()
	ctl, err := New(Config{Now: c.Now}, c.deps(reg, &eventLog{}))
	if err != nil {
		t.Fatal(err)
	}
	has := func(pool string) (joiner, karp bool) {
		_, joiner = observe.Sample(t, reg, "joiner_disruption_budget_allowed", map[string]string{"nodepool": pool, "reason": "Drifted"})
		_, karp = observe.Sample(t, reg, "karpenter_nodepools_allowed_disruptions", map[string]string{"nodepool": pool, "reason": "Drifted"})
		return joiner, karp
	}
	c.reconcile(ctl)
	for _, p := range []string{"a", "b"} {
		if j, k := has(p); !j || !k {
			t.Fatalf("pool %s: budget series %v %v, want both", p, j, k)
		}
	}
	c.pools = c.pools[:1]
	c.now = c.now.Add(10 * time.Second)
	c.reconcile(ctl)
	if j, k := has("a"); !j || !k {
		t.Fatalf("kept pool a: budget series %v %v, want both", j, k)
	}
	if j, k := has("b"); j || k {
		t.Fatalf("removed pool b: budget series %v %v, want none", j, k)
	}
}
