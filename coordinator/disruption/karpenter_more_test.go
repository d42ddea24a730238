package disruption

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// TestKarpenterNotMarkedConsolidated ports the "should not mark ...
// consolidated" cases of Karpenter v1.14.1's consolidation Budgets context.
// Karpenter remembers a cluster state it found nothing to do in
// (IsConsolidated) and skips methods until it changes; a pass that found
// nothing only because budgets allowed nothing must not be remembered so.
// Joiner keeps no such memory: every pass decides afresh. What it pins is
// the same: the nodes are left alone for their budget (Skip.Budget), and
// consolidation goes ahead as soon as the budget opens, nothing else
// having changed.
func TestKarpenterNotMarkedConsolidated(t *testing.T) {
	const file = "pkg/controllers/disruption/consolidation_test.go Consolidation/Budgets"
	// ten are 10 nodes of one pool with budget 0%, each with pods.
	ten := func(pods int) *Input {
		return kIn(kPools(kPool("default", withNodesBudget("0%"))), kNodes("n", 10, func(n string, _ int) *Node {
			ps := make([]*corev1.Pod, pods)
			for i := range ps {
				ps[i] = rsPod(fmt.Sprintf("%s-%d", n, i), "1")
			}
			return testNode(n, "default", od, 32, ps...)
		})...)
	}
	// pools are 10 pools of 3 nodes each, budget 0%, each node with pods.
	pools := func(pods int) *Input {
		in := tenPools(32, withNodesBudget("0%"))
		for _, n := range in.Nodes {
			for i := range pods {
				addPod(n, rsPod(fmt.Sprintf("%s-%d", n.Name(), i), "1"))
			}
		}
		return in
	}
	open := func(in *Input) {
		for _, p := range in.NodePools {
			p.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
		}
	}
	runKarpenterCases(t, []karpCase{
		{
			name: "empty nodes held by a 0% budget: left for their budget, deleted once it opens",
			from: file + ` "should not mark empty node consolidated if the candidates can't be disrupted due to budgets with one nodepool"`,
			in:   func() *Input { return ten(0) },
			want: allOf(decidesNothing(), budgetSkipped(MethodEmptiness), afterwards(open, decides(MethodEmptiness, names(ten(0).Nodes)...))),
		},
		{
			name: "empty nodes of ten pools held by 0% budgets: left for their budgets, deleted once they open",
			from: file + ` "should not mark empty node consolidated if all candidates can't be disrupted due to budgets with many nodepools"`,
			in:   func() *Input { return pools(0) },
			want: allOf(decidesNothing(), budgetSkipped(MethodEmptiness), afterwards(open, disruptedInPasses(1, 30, perPool(3)))),
		},
		{
			name: "multi-node: nodes held by a 0% budget are left for their budget, merged once it opens",
			from: file + ` "should not mark multi node consolidated if the candidates can't be disrupted due to budgets with one nodepool"`,
			in:   func() *Input { return ten(1) },
			want: allOf(decidesNothing(), budgetSkipped(MethodMultiNode), afterwards(open, decides(MethodMultiNode, names(ten(1).Nodes)...))),
		},
		{
			name: "multi-node: nodes of ten pools held by 0% budgets are left for their budgets, merged once they open",
			from: file + ` "should not mark multi node consolidated if all candidates can't be disrupted due to budgets with many nodepools"`,
			in:   func() *Input { return pools(1) },
			want: allOf(decidesNothing(), budgetSkipped(MethodMultiNode), afterwards(open, noMethodOtherThan(MethodMultiNode))),
		},
		{
			name: "single-node: nodes held by a 0% budget are left for their budget, consolidated once it opens",
			from: file + ` "should not mark single node consolidated if the candidates can't be disrupted due to budgets with one nodepool"`,
			in:   func() *Input { return ten(1) },
			want: allOf(decidesNothing(), budgetSkipped(MethodSingleNode), afterwards(open, noMethodOtherThan(MethodMultiNode, MethodSingleNode))),
		},
		{
			name: "single-node: nodes of ten pools held by 0% budgets are left for their budgets, consolidated once they open",
			from: file + ` "should not mark single node consolidated if all candidates can't be disrupted due to budgets with many nodepools"`,
			in:   func() *Input { return pools(1) },
			want: allOf(decidesNothing(), budgetSkipped(MethodSingleNode), afterwards(open, noMethodOtherThan(MethodMultiNode, MethodSingleNode))),
		},
	})
}

// TestKarpenterConsolidationMore ports the remaining cases of Karpenter
// v1.14.1's pkg/controllers/disruption/consolidation_test.go that decide
// on a cluster as it is (see TestKarpenterConsolidation for the rest).
func TestKarpenterConsolidationMore(t *testing.T) {
	const file = "pkg/controllers/disruption/consolidation_test.go"
	pool := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool { return kPools(kPool("default", opts...)) }
	spread := func(name string) *corev1.Pod {
		p := podLabelled(rsPod(name, "500m"), "app", "spread")
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: karpv1.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
		}}
		return p
	}
	inZone := func(n *Node, zone string) *Node { return withNodeLabel(n, karpv1.LabelZone, zone) }
	// reservedOf adds a reservation of 10 instances to type it of types in
	// zone-a, at its on-demand price / 10^6 (Karpenter's test offering).
	reservedOf := func(types []*catalog.InstanceType, it string) []*catalog.InstanceType {
		for _, t := range types {
			if t.Name == it {
				var odp float64
				for _, o := range t.Offerings {
					if o.CapacityType == od {
						odp = o.Price
					}
				}
				t.Offerings = append(t.Offerings, catalog.Offering{Zone: "zone-a", CapacityType: karpv1.CapacityTypeReserved,
					Price: odp / 1e6, Available: true, ReservationID: "r-" + it, ReservationCapacity: 10})
			}
		}
		return types
	}
	allCTs := withCapacityTypes(od, spot, karpv1.CapacityTypeReserved)

	runKarpenterCases(t, []karpCase{
		{
			name: "a merge whose only cheaper types fall short of minValues once the candidates' own type is removed is not made; one node is deleted instead",
			from: file + ` Consolidation/Replace "should handle failing filterOutSameInstanceType correctly (without a panic) when minValues isn't satisfied"`,
			in: func() *Input {
				p := kPool("default")
				p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: karpv1.OpExists, MinValues: new(2)})
				mk := func(name string, pods ...*corev1.Pod) *Node {
					return ofType(testNode(name, "default", od, 4, pods...), "current", 0.5)
				}
				in := kIn(kPools(p),
					mk("n-0", rsPod("p-0", "2")), mk("n-1", rsPod("p-1", "2")), mk("n-2", rsPod("p-2", "2"), rsPod("p-3", "2")))
				return withTypes(in, kType("current", 4, kOffering("zone-a", od, 0.5, true)), kType("other", 4, kOffering("zone-a", od, 0.4, true)))
			},
			want: allOf(noMethod(MethodMultiNode), replacing(0), overPasses(3, func(t *testing.T, ds []*Decision) {
				if len(ds) != 1 || len(ds[0].Candidates) != 1 || ds[0].Candidates[0].Name() == "n-2" {
					t.Errorf("got %d decision(s), want one deleting n-0 or n-1", len(ds))
				}
			})),
		},
		{
			name: "a pool without a node class does not stop a deletion",
			from: file + ` Consolidation/Delete "can delete nodes if another nodePool has no node template"`,
			in: func() *Input {
				bare := kPool("bare")
				bare.Spec.Template.Spec.NodeClassRef = nil
				return kIn(kPools(kPool("default"), bare),
					testNode("a", "default", od, 1, rsPod("a-0", "250m"), rsPod("a-1", "250m")), testNode("b", "default", od, 1, rsPod("b-0", "250m")))
			},
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},
		{
			name: "a node is replaced in its own zone so the pods' zonal spread holds",
			from: file + ` Consolidation/Topology Consideration "can replace node maintaining zonal topology spread"`,
			in: func() *Input {
				a := ofType(inZone(testNode("a", "default", od, 1, spread("s-a")), "zone-a"), "small", 0.05)
				b := ofType(inZone(testNode("b", "default", od, 2, spread("s-b")), "zone-b"), "dear", 0.5)
				c := ofType(inZone(testNode("c", "default", od, 1, spread("s-c")), "zone-c"), "small", 0.05)
				return withTypes(kIn(pool(), a, b, c),
					kType("small", 1, kOffering("zone-a", od, 0.05, true), kOffering("zone-b", od, 0.05, true), kOffering("zone-c", od, 0.05, true)),
					kType("dear", 2, kOffering("zone-b", od, 0.5, true)))
			},
			want: allOf(decides(MethodSingleNode, "b"), replacementIn("small", "zone-b", od)),
		},
		{
			name: "a reserved node is replaced by a cheaper reservation",
			from: file + ` Consolidation/Reserved Capacity "can consolidate from one reserved offering to another"`,
			in: func() *Input {
				n := ofType(testNode("n", "default", karpv1.CapacityTypeReserved, 32, rsPod("p", "1")), "t-32", 32*odPrice/1e6)
				withNodeLabel(n, karpv1.LabelCapacityReservationID, "r-t-32")
				return withTypes(kIn(pool(allCTs), n), reservedOf(reservedOf(testTypes(32), "t-32"), "t-1")...)
			},
			want: allOf(decides(MethodSingleNode, "n"), replacementIn("t-1", "zone-a", karpv1.CapacityTypeReserved)),
		},
		{
			name: "an on-demand node is replaced by a reservation of its own type",
			from: file + ` Consolidation/Reserved Capacity "can consolidate into reserved capacity for the same instance pool" (from on-demand)`,
			in: func() *Input {
				return withTypes(kIn(pool(allCTs), testNode("n", "default", od, 32, rsPod("p", "1"))), reservedOf(testTypes(32), "t-32")...)
			},
			want: allOf(decides(MethodSingleNode, "n"), replacementIn("t-32", "zone-a", karpv1.CapacityTypeReserved)),
		},
		{
			name: "a spot node is replaced by a reservation of its own type",
			from: file + ` Consolidation/Reserved Capacity "can consolidate into reserved capacity for the same instance pool" (from spot)`,
			in: func() *Input {
				return withTypes(kIn(pool(allCTs), testNode("n", "default", spot, 32, rsPod("p", "1"))), reservedOf(testTypes(32), "t-32")...)
			},
			want: allOf(decides(MethodSingleNode, "n"), replacementIn("t-32", "zone-a", karpv1.CapacityTypeReserved)),
		},
		{
			name: "BestEffort does not relax minValues for a consolidation",
			from: file + ` Consolidation/MinValuesPolicy "should not consolidate a node by relaxing min values when policy is set to BestEffort"`,
			in: func() *Input {
				p := kPool("default")
				p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn, Values: []string{"t-1", "t-32"}, MinValues: new(3)})
				in := withTypes(kIn(kPools(p), testNode("n", "default", od, 32, rsPod("p", "100m"))), testTypes(32)[0], testTypes(32)[31])
				in.MinValuesPolicy = scheduler.MinValuesBestEffort
				return in
			},
			want: allOf(decidesNothing(), skipsWith("n", "minValues")),
		},
		{
			name: "a node launched for pods still pending is not consolidated while they wait",
			from: file + ` Consolidation/Parallelization "should not consolidate a node that is launched for pods on a deleting node"`,
			in: func() *Input {
				old := beingDeleted(testNode("old", "default", od, 5))
				fresh := testNode("fresh", "default", od, 5, rsPod("p-0", "1"), rsPod("p-1", "1"))
				in := kIn(pool(), old, fresh)
				for i := 2; i < 5; i++ {
					in.PendingPods = append(in.PendingPods, rsPod(fmt.Sprintf("p-%d", i), "1"))
				}
				return in
			},
			want: decidesNothing(),
		},
		{
			name: "a node that will take a deleting node's pods is not consolidated",
			from: file + ` Consolidation/Parallelization "should not consolidate a node that is launched for pods on a deleting node" (the pods still on the deleting node)`,
			in: func() *Input {
				old := beingDeleted(testNode("old", "default", od, 5, rsPod("p-2", "1"), rsPod("p-3", "1"), rsPod("p-4", "1")))
				fresh := testNode("fresh", "default", od, 5, rsPod("p-0", "1"), rsPod("p-1", "1"))
				return kIn(pool(), old, fresh)
			},
			want: decidesNothing(),
		},
	})
}

// TestKarpenterDecisionKinds ports the "Metrics" context of Karpenter
// v1.14.1's pkg/controllers/disruption/suite_test.go: which decision
// (delete or replace), reason and consolidation type each scenario makes
// (karpenter_voluntary_disruption_decisions_total's labels; the controller
// counts them from the decision's method, reason and replacements).
func TestKarpenterDecisionKinds(t *testing.T) {
	const file = "pkg/controllers/disruption/suite_test.go Metrics"
	pool := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool { return kPools(kPool("default", opts...)) }
	never := withConsolidateAfter(karpv1.NeverDuration())
	withPods := func(n *Node, pods int) *Node {
		for i := range pods {
			addPod(n, rsPod(fmt.Sprintf("%s-%d", n.Name(), i), "250m"))
		}
		return n
	}
	runKarpenterCases(t, []karpCase{
		{
			name: "an empty node: delete, reason empty",
			from: file + ` "should fire metrics for single node empty disruption"`,
			in:   func() *Input { return kIn(pool(), testNode("n", "default", od, 32)) },
			want: allOf(decides(MethodEmptiness, "n"), replacing(0), reasonIs(karpv1.DisruptionReasonEmpty)),
		},
		{
			name: "a drifted node whose pods fit elsewhere: delete, reason drifted",
			from: file + ` "should fire metrics for single node delete disruption"`,
			in: func() *Input {
				return kIn(pool(never), withPods(driftedNode(testNode("a", "default", od, 32)), 2), withPods(testNode("b", "default", od, 32), 2))
			},
			want: allOf(decides(MethodDrift, "a"), replacing(0), reasonIs(karpv1.DisruptionReasonDrifted)),
		},
		{
			name: "a drifted node alone: replace, reason drifted",
			from: file + ` "should fire metrics for single node replace disruption"`,
			in:   func() *Input { return kIn(pool(), withPods(driftedNode(testNode("n", "default", od, 32)), 4)) },
			want: allOf(decides(MethodDrift, "n"), replacing(1), reasonIs(karpv1.DisruptionReasonDrifted)),
		},
		{
			name: "three empty nodes: one delete, reason empty",
			from: file + ` "should fire metrics for multi-node empty disruption"`,
			in: func() *Input {
				return kIn(pool(), testNode("x", "default", od, 32), testNode("y", "default", od, 32), testNode("z", "default", od, 32))
			},
			want: allOf(decides(MethodEmptiness, "x", "y", "z"), replacing(0), reasonIs(karpv1.DisruptionReasonEmpty)),
		},
		{
			name: "three of the cheapest nodes with a pod each: a multi-node delete of two, reason underutilized",
			from: file + ` "should fire metrics for multi-node delete disruption"`,
			in: func() *Input {
				return kIn(pool(), withPods(testNode("x", "default", od, 1), 1), withPods(testNode("y", "default", od, 1), 1), withPods(testNode("z", "default", od, 1), 1))
			},
			want: allOf(noMethodOtherThan(MethodMultiNode), replacing(0), reasonIs(karpv1.DisruptionReasonUnderutilized), overPasses(1, func(t *testing.T, ds []*Decision) {
				if len(ds) != 1 || len(ds[0].Candidates) != 2 {
					t.Errorf("want one decision of two nodes, got %d", len(ds))
				}
			})),
		},
		{
			name: "three large nodes with few pods: a multi-node replace, reason underutilized",
			from: file + ` "should fire metrics for multi-node replace disruption"`,
			in: func() *Input {
				return kIn(pool(), withPods(testNode("x", "default", od, 32), 1), withPods(testNode("y", "default", od, 32), 1), withPods(testNode("z", "default", od, 32), 2))
			},
			want: allOf(decides(MethodMultiNode, "x", "y", "z"), replacing(1), reasonIs(karpv1.DisruptionReasonUnderutilized)),
		},
	})
}

// TestKarpenterSuiteMore ports the remaining pure cases of Karpenter
// v1.14.1's pkg/controllers/disruption/suite_test.go (Simulate Scheduling,
// Disruption Taints, Candidate Filtering) and drift_test.go.
func TestKarpenterSuiteMore(t *testing.T) {
	const file = "pkg/controllers/disruption/suite_test.go"
	never := withConsolidateAfter(karpv1.NeverDuration())
	runKarpenterCases(t, []karpCase{
		{
			name: "nodes being deleted do not keep a candidate's pods from a new node",
			from: file + ` Simulate Scheduling "should allow pods on deleting nodes to reschedule to uninitialized nodes"`,
			in: func() *Input {
				return kIn(kPools(kPool("default", never)), kNodes("n", 10, func(n string, i int) *Node {
					if i == 0 {
						return driftedNode(testNode(n, "default", od, 3, rsPod("p", "2")))
					}
					return beingDeleted(testNode(n, "default", od, 3))
				})...)
			},
			want: allOf(decides(MethodDrift, "n-0"), replacing(1)),
		},
		{
			name: "drifted nodes are replaced one after another up to the budget",
			from: file + ` Simulate Scheduling "should allow multiple replace operations to happen successively"`,
			in: func() *Input {
				p := kPool("default", never, withNodesBudget("3"))
				p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: "test-partition", Operator: karpv1.OpExists})
				return kIn(kPools(p), kNodes("n", 10, func(n string, i int) *Node {
					part := fmt.Sprint(i)
					return withNodeLabel(driftedNode(testNode(n, "default", od, 3, podSelecting(rsPod("p-"+part, "100m"), "test-partition", part))), "test-partition", part)
				})...)
			},
			want: overPassesLaunching(5, func(t *testing.T, ds []*Decision) {
				if len(ds) != 3 {
					t.Errorf("%d decisions, want 3", len(ds))
				}
				for _, d := range ds {
					if d.Method != MethodDrift || len(d.Candidates) != 1 || len(d.Replacements) != 1 {
						t.Errorf("got %s of %v with %d replacement(s), want a drift replacing one node", d.Method, names(d.Candidates), len(d.Replacements))
					}
				}
			}),
		},
		{
			name: "a NodeClaim without a Node is not a candidate",
			from: file + ` Candidate Filtering "should not consider candidate that has just a NodeClaim representation" (an in-flight NodeClaim: capacity only)`,
			in: func() *Input {
				inflight := &Node{Node: &scheduler.Node{Name: "nc", InFlight: true, Labels: map[string]string{karpv1.LabelNodePool: "default"}}}
				return kIn(kPools(kPool("default")), inflight)
			},
			want: allOf(notInStatus("nc"), decidesNothing()),
		},
		{
			name: "a node whose command is in progress is not a candidate",
			from: file + ` Candidate Filtering "should not consider candidates that are actively being processed in the queue" (a committed termination intent marks the node for deletion)`,
			in: func() *Input {
				return kIn(kPools(kPool("default")), beingDeleted(testNode("n", "default", od, 32, rsPod("p", "1"))))
			},
			want: allOf(notInStatus("n"), decidesNothing()),
		},
		{
			name: "a NodePool's terminationGracePeriod does not let drift past a do-not-disrupt pod: only the NodeClaim's does",
			from: `pkg/controllers/disruption/drift_test.go Drift "should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt annotation set to true when the NodePool's TerminationGracePeriod is not nil" (its NodeClaim has none)`,
			in: func() *Input {
				p := kPool("default", never)
				p.Spec.Template.Spec.TerminationGracePeriod = dur("5m")
				return kIn(kPools(p), driftedNode(testNode("n", "default", od, 32, withDoNotDisrupt(rsPod("p", "1"), "true"))))
			},
			want: allOf(decidesNothing(), skipsWith("n", "do-not-disrupt")),
		},
	})
}

// TestKarpenterCandidateOrder ports the "Candidate Shuffling" sort cases of
// Karpenter v1.14.1's singlenodeconsolidation_test.go: consolidation
// candidates go highest savings ratio (price per unit of rescheduling
// cost) first.
func TestKarpenterCandidateOrder(t *testing.T) {
	const file = "pkg/controllers/disruption/singlenodeconsolidation_test.go Candidate Shuffling"
	costly := func(p *corev1.Pod, cost string) *corev1.Pod { return podAnnotated(p, podDeletionCost, cost) }
	runKarpenterCases(t, []karpCase{
		{
			name: "candidates go by savings ratio, highest first",
			from: file + ` "should sort candidates by savings ratio descending"`,
			in: func() *Input {
				return kIn(kPools(kPool("default")),
					testNode("cheap", "default", od, 2, rsPod("c", "1")),
					testNode("dear", "default", od, 16, rsPod("d", "1")),
					testNode("mid", "default", od, 8, rsPod("m", "1")))
			},
			want: candidateOrder("dear", "mid", "cheap"),
		},
		{
			name: "a dearer node whose pods cost more to reschedule goes after cheaper ones",
			from: file + ` "should sort candidates by savings ratio with different disruption costs"`,
			in: func() *Input {
				// Price 0.4 at cost 1+1: 0.2; price 0.8 at cost 1+4: 0.16;
				// price 1.6 at cost 1+2*9.5: 0.08 (a pod's eviction cost is
				// 1 + deletion cost / 2^27, at most 10).
				return kIn(kPools(kPool("default")),
					testNode("c20", "default", od, 32, costly(rsPod("c-0", "1"), fmt.Sprint(17<<26)), costly(rsPod("c-1", "1"), fmt.Sprint(17<<26))),
					testNode("c5", "default", od, 16, costly(rsPod("b", "1"), fmt.Sprint(3<<27))),
					testNode("c1", "default", od, 8, rsPod("a", "1")))
			},
			want: candidateOrder("c1", "c5", "c20"),
		},
	})
}

// budgetSkipped: every node is left alone by m, or by the candidate
// filtering all consolidation shares, for its pool's budget.
func budgetSkipped(m Method) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		for _, n := range in.Nodes {
			found := false
			for _, s := range r.Skipped {
				found = found || s.Node == n.Name() && s.Of(m) && s.Budget
			}
			if !found {
				t.Errorf("node %s: no budget skip for %s; got %q", n.Name(), m, skipsOf(r, n.Name()))
			}
		}
	}
}

// noMethodOtherThan: something is decided, by one of ms.
func noMethodOtherThan(ms ...Method) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil {
			t.Errorf("no decision, want one by %v; skipped:%s", ms, skippedSummary(r))
			return
		}
		for _, m := range ms {
			if r.Decision.Method == m {
				return
			}
		}
		t.Errorf("got %s, want one by %v", describeResult(r), ms)
	}
}

// reasonIs: the decision's budget reason.
func reasonIs(reason karpv1.DisruptionReason) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		if r := kDecide(t, in); r.Decision == nil || r.Decision.Reason != reason {
			t.Errorf("got %s, want reason %s", describeResult(r), reason)
		}
	}
}

// replacementIn: one replacement, launching it in zone as ct.
func replacementIn(it, zone, ct string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		r := kDecide(t, in)
		if r.Decision == nil || len(r.Decision.Replacements) != 1 {
			t.Errorf("got %s, want one replacement", describeResult(r))
			return
		}
		rep := r.Decision.Replacements[0]
		if rep.InstanceType != it || rep.Zone != zone || rep.CapacityType != ct {
			t.Errorf("replacement %s %s %s (of %v), want %s %s %s", rep.InstanceType, rep.Zone, rep.CapacityType, rep.InstanceTypes, it, zone, ct)
		}
	}
}

// candidateOrder: the consolidation candidates, in order.
func candidateOrder(want ...string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		d := newDecider(in)
		var err error
		if d.pdbs, err = podutil.NewPDBs(in.PDBs); err != nil {
			t.Fatal(err)
		}
		if got := names(d.consolidationCandidates(false)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("candidates %v, want %v", got, want)
		}
	}
}

// overPassesLaunching is overPasses where each decision's replacements
// also join the cluster as in-flight NodeClaims (as the leader launches
// them before it deletes anything): pods of the nodes being deleted may
// go there.
func overPassesLaunching(n int, check func(t *testing.T, ds []*Decision)) karpCheck {
	return passes(n, func(in *Input, d *Decision) {
		for i, rep := range d.Replacements {
			in.Nodes = append(in.Nodes, inFlight(fmt.Sprintf("%s-replacement-%d", d.Candidates[0].Name(), i), rep))
		}
	}, check)
}

// inFlight is a launched replacement not yet registered: its
// single-valued requirements and cheapest offering as labels, its type's
// allocatable, no NodeClaim (as the controller passes launch intents).
func inFlight(name string, rep scheduler.NodeClaim) *Node {
	labels := map[string]string{karpv1.LabelNodePool: rep.NodePool, karpv1.LabelInstanceType: rep.InstanceType,
		karpv1.LabelZone: rep.Zone, karpv1.LabelCapacityType: rep.CapacityType, karpv1.LabelHostname: name}
	for _, r := range rep.Requirements {
		if _, set := labels[r.Key]; !set && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	return &Node{Node: &scheduler.Node{Name: name, Labels: labels, Capacity: rep.Allocatable, Allocatable: rep.Allocatable, InFlight: true}}
}

// TestKarpenterSpotToSpotMore ports the spot entries of Karpenter v1.14.1's
// consolidation Replace tables (its suite runs with the
// SpotToSpotConsolidation gate on; the on-demand entries are in
// TestKarpenterConsolidation): a spot node of the dearest type has 31
// cheaper spot types, enough for spot-to-spot.
func TestKarpenterSpotToSpotMore(t *testing.T) {
	const file = "pkg/controllers/disruption/consolidation_test.go Consolidation/Replace"
	labelled := func(p *corev1.Pod) *corev1.Pod { return podLabelled(p, "app", "test") }
	// spotIn is a spot pool, the gate on, and n.
	spotIn := func(n *Node, pools ...*karpv1.NodePool) *Input {
		in := kIn(append(kPools(kPool("default", withCapacityTypes(spot))), pools...), n)
		in.FeatureGates.SpotToSpotConsolidation = true
		return in
	}
	node := func(pods ...*corev1.Pod) *Node { return testNode("n", "default", spot, 32, pods...) }
	withPDB := func(in *Input, pdb func() *policyv1.PodDisruptionBudget) *Input {
		in.PDBs = append(in.PDBs, pdb())
		return in
	}
	three := func(f func(*corev1.Pod) *corev1.Pod) []*corev1.Pod {
		return []*corev1.Pod{f(labelled(rsPod("a", "1"))), f(labelled(rsPod("b", "1"))), f(labelled(rsPod("c", "1")))}
	}
	same := func(p *corev1.Pod) *corev1.Pod { return p }
	spotReplacement := allOf(decides(MethodSingleNode, "n"), replacing(1), replacementCapacityType(spot))
	runKarpenterCases(t, []karpCase{
		{
			name: "spot: a pool without instance types does not stop the replacement",
			from: file + ` "can replace nodes if another nodePool returns no instance types" (if the candidate is spot node)`,
			in: func() *Input {
				other := kPool("other", withCapacityTypes(spot))
				other.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "missing"}
				return spotIn(node(rsPod("p", "1")), other)
			},
			want: spotReplacement,
		},
		{
			name: "spot: a PDB allowing no eviction keeps the node",
			from: file + ` "can replace nodes, considers PDB" (if the candidate is spot node)`,
			in: func() *Input {
				return withPDB(spotIn(node(three(same)...)), func() *policyv1.PodDisruptionBudget { return maxUnavailableZeroPDB("test", "test") })
			},
			want: decidesNothing(),
		},
		{
			name: "spot: a PDB with unhealthyPodEvictionPolicy AlwaysAllow does not hold unready pods",
			from: file + ` "can replace nodes, considers PDB policy" (if the candidate is spot node)`,
			in: func() *Input {
				return withPDB(spotIn(node(three(podUnready)...)), func() *policyv1.PodDisruptionBudget {
					p := maxUnavailableZeroPDB("test", "test")
					alwaysAllow := policyv1.AlwaysAllow
					p.Spec.UnhealthyPodEvictionPolicy = &alwaysAllow
					return p
				})
			},
			want: spotReplacement,
		},
		{
			name: "spot: a PDB of another namespace does not hold the node",
			from: file + ` "can replace nodes, PDB namespace must match" (if the candidate is spot node)`,
			in: func() *Input {
				return withPDB(spotIn(node(labelled(rsPod("a", "1")))), func() *policyv1.PodDisruptionBudget {
					p := maxUnavailableZeroPDB("test", "test")
					p.Namespace = "elsewhere"
					return p
				})
			},
			want: spotReplacement,
		},
		{
			name: "spot: do-not-disrupt=true on the node keeps it",
			from: file + ` "can replace nodes, considers karpenter.sh/do-not-disrupt set to true on nodes" (if the candidate is spot node)`,
			in: func() *Input {
				return spotIn(nodeAnnotated(node(rsPod("p", "1")), karpv1.AnnotationDoNotDisrupt, "true"))
			},
			want: decidesNothing(),
		},
		{
			name: "spot: a do-not-disrupt pod keeps its node",
			from: file + ` "can replace nodes, considers karpenter.sh/do-not-disrupt set to true on pods" (if the candidate is spot node)`,
			in:   func() *Input { return spotIn(node(withDoNotDisrupt(rsPod("p", "1"), "true"))) },
			want: decidesNothing(),
		},
		{
			name: "spot: 15 cheaper types are not enough when minValues asks for 16",
			from: file + ` "Consolidation should fail if filterByPrice breaks the minimum requirement from the NodePools." (if the candidate is spot node)`,
			in: func() *Input {
				p := kPool("default", withCapacityTypes(spot))
				p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: karpv1.OpExists, MinValues: new(16)})
				in := kIn(kPools(p), testNode("n", "default", spot, 16, rsPod("p", "1")))
				in.FeatureGates.SpotToSpotConsolidation = true
				return withTypes(in, testTypes(18)...)
			},
			want: decidesNothing(),
		},
	})
}
