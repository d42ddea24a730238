package disruption

// Ports of the Karpenter v1.14.1 scenarios that need Input.FeatureGates
// (the SpotToSpotConsolidation gate on) or Input.PendingPods.

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// TestKarpenterSpotToSpot ports the spot-to-spot cases of Karpenter
// v1.14.1's pkg/controllers/disruption/consolidation_test.go (its suite runs
// with the SpotToSpotConsolidation gate on) and consolidation.go
// computeSpotToSpotConsolidation: with the gate, single-node spot-to-spot
// needs at least 15 cheaper instance types and launches the 15 cheapest (or
// as many as minValues needs); multi-node merges need no such count.
func TestKarpenterSpotToSpot(t *testing.T) {
	const file = "pkg/controllers/disruption/consolidation_test.go"
	gate := func(on bool, in *Input) *Input {
		in.FeatureGates.SpotToSpotConsolidation = on
		return in
	}
	spotPool := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool {
		return kPools(kPool("default", append([]func(*karpv1.NodePool){withCapacityTypes(spot)}, opts...)...))
	}
	spotNode := func(name string, cpu int64, pods ...*corev1.Pod) *Node {
		if len(pods) == 0 {
			pods = []*corev1.Pod{rsPod("p-"+name, "1")}
		}
		return testNode(name, "default", spot, cpu, pods...)
	}
	typesUpTo := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("t-%d", i+1)
		}
		return out
	}
	minValues := func(n int) func(*karpv1.NodePool) {
		return func(p *karpv1.NodePool) {
			p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: karpv1.OpExists, MinValues: new(n)})
		}
	}

	runKarpenterCases(t, []karpCase{
		{
			name: "with the gate on a spot node is replaced by a cheaper spot node",
			from: file + ` Consolidation/Replace "can replace node" (if the candidate is spot node)`,
			in:   func() *Input { return gate(true, kIn(spotPool(), spotNode("n", 32))) },
			want: allOf(decides(MethodSingleNode, "n"), replacing(1), replacementCapacityType(spot)),
		},
		{
			name: "with the gate explicitly off a spot node is not replaced by spot",
			from: file + ` Consolidation/Replace "cannot replace spot with spot if the spotToSpotConsolidation is disabled"`,
			in:   func() *Input { return gate(false, kIn(spotPool(), spotNode("n", 32))) },
			want: decidesNothing(),
		},
		{
			name: "with the gate on single-node spot-to-spot needs 15 cheaper types",
			from: file + ` Consolidation/Replace "cannot replace spot with spot if less than minimum InstanceTypes flexibility"`,
			in:   func() *Input { return gate(true, kIn(spotPool(), spotNode("n", 8))) },
			want: allOf(decidesNothing(), skipsWith("n", "15")),
		},
		{
			name: "with the gate on a spot node among the 15 cheapest types is not replaced",
			from: file + ` Consolidation/Replace "cannot replace spot with spot if it is part of the 15 cheapest instance types."`,
			in:   func() *Input { return gate(true, kIn(spotPool(), spotNode("n", 2, rsPod("p", "500m")))) },
			want: decidesNothing(),
		},
		{
			name: "with the gate on the spot replacement launches only the 15 cheapest types",
			from: file + ` Consolidation/Replace "spot to spot consolidation should order the instance types by price before enforcing minimum flexibility." (truncation)`,
			in:   func() *Input { return gate(true, kIn(spotPool(), spotNode("n", 32))) },
			want: replacementTypes(typesUpTo(15)...),
		},
		{
			name: "with the gate on the 15 launched types are the cheapest by price, not by listing order",
			from: file + ` Consolidation/Replace "spot to spot consolidation should order the instance types by price before enforcing minimum flexibility."`,
			in: func() *Input {
				var its []*catalog.InstanceType
				for i := range 18 {
					price := 1.0 + 0.1*float64(i)
					if i == 16 {
						price = 0.001
					}
					its = append(its, kType(fmt.Sprintf("s-%d", i), 4, kOffering("zone-a", spot, price, true)))
				}
				return gate(true, withTypes(kIn(spotPool(), ofType(spotNode("n", 4), "s-17", 2.7)), its...))
			},
			want: replacementTypes("s-16", "s-0", "s-1", "s-2", "s-3", "s-4", "s-5", "s-6", "s-7", "s-8", "s-9", "s-10", "s-11", "s-12", "s-13"),
		},
		{
			name: "with the gate on minValues above 15 widens the launched types to minValues",
			from: file + ` Consolidation/Replace "spot to spot consolidation should consider the max of default and minimum number of instanceTypeOptions from minValues in requirement for truncation if minimum number of instanceTypeOptions from minValues in requirement is greater than 15."`,
			in:   func() *Input { return gate(true, kIn(spotPool(minValues(16)), spotNode("n", 32))) },
			want: replacementTypes(typesUpTo(16)...),
		},
		{
			name: "with the gate on minValues below 15 still launches the 15 cheapest types",
			from: file + ` Consolidation/Replace "spot to spot consolidation should consider the default for truncation if minimum number of instanceTypeOptions from minValues in requirement is less than 15."`,
			in:   func() *Input { return gate(true, kIn(spotPool(minValues(10)), spotNode("n", 32))) },
			want: replacementTypes(typesUpTo(15)...),
		},
		{
			name: "with the gate on three spot nodes are merged into one spot node",
			from: file + ` Consolidation/Multi-NodeClaim "can merge 3 nodes into 1" (if the candidate is spot node)`,
			in: func() *Input {
				return gate(true, kIn(spotPool(), spotNode("x", 8), spotNode("y", 8), spotNode("z", 8)))
			},
			want: allOf(decides(MethodMultiNode, "x", "y", "z"), replacing(1), replacementCapacityType(spot)),
		},
		{
			name: "with the gate on a multi-node spot merge needs no 15 cheaper types",
			from: `pkg/controllers/disruption/consolidation.go computeSpotToSpotConsolidation ("For multi-node consolidation ... exit early"), with ` + file + ` "can merge 3 nodes into 1" (spot)`,
			in: func() *Input {
				return gate(true, kIn(spotPool(), spotNode("x", 4), spotNode("y", 4), spotNode("z", 4)))
			},
			want: allOf(decides(MethodMultiNode, "x", "y", "z"), replacing(1)),
		},
		{
			name: "with the gate on two spot nodes are not merged into one of their own type",
			from: file + ` Consolidation/Multi-NodeClaim "won't merge 2 nodes into 1 of the same type" (if the candidate is spot node)`,
			in: func() *Input {
				a := spotNode("a", 1, rsPod("a-0", "250m"))
				b := spotNode("b", 1, rsPod("b-0", "250m"), rsPod("b-1", "250m"))
				return gate(true, kIn(spotPool(), a, b))
			},
			want: allOf(decides(MethodSingleNode, "a"), replacing(0)),
		},
	})
}

// TestKarpenterPendingPods ports the Karpenter v1.14.1 cases where pending
// pods join the consolidation simulation (helpers.go SimulateScheduling
// starts from provisioner.GetPendingPods).
func TestKarpenterPendingPods(t *testing.T) {
	pending := func(name, cpu string) *corev1.Pod {
		p := testPod(name, cpu)
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		return p
	}
	runKarpenterCases(t, []karpCase{
		{
			name: "a pending pod that needs the node's room keeps it from being replaced",
			from: `pkg/controllers/disruption/emptiness_test.go Emptiness "considers pending pods when consolidating"`,
			in: func() *Input {
				in := kIn(kPools(kPool("default")), testNode("n", "default", od, 32, rsPod("p", "1")))
				in.PendingPods = append(in.PendingPods, pending("huge", "31"))
				return in
			},
			want: decidesNothing(),
		},
		{
			name: "a pending pod that fits nowhere does not block consolidation",
			from: `pkg/controllers/disruption/consolidation_test.go Consolidation/Delete "can delete nodes with a permanently pending pod"`,
			in: func() *Input {
				in := kIn(kPools(kPool("default")),
					testNode("a", "default", od, 1, rsPod("a-0", "250m"), rsPod("a-1", "250m")),
					testNode("b", "default", od, 1, rsPod("b-0", "250m")))
				in.PendingPods = append(in.PendingPods, podSelecting(pending("stuck", "100m"), "non-existent", "node-label"))
				return in
			},
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},
	})
}
