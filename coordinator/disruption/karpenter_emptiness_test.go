package disruption

import (
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestKarpenterEmptiness ports Karpenter v1.14.1's
// pkg/controllers/disruption/emptiness_test.go: which nodes count as empty,
// what keeps an empty node, and how budgets cap one emptiness command.
func TestKarpenterEmptiness(t *testing.T) {
	const file = "pkg/controllers/disruption/emptiness_test.go"
	whenEmpty := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool {
		return kPools(kPool("default", append([]func(*karpv1.NodePool){withPolicy(karpv1.ConsolidationPolicyWhenEmpty)}, opts...)...))
	}
	empty := func(name string) *Node { return testNode(name, "default", od, 2) }
	// manyPools are 10 WhenEmpty pools of 3 empty nodes each with budget.
	manyPools := func(budget string) *Input {
		return tenPools(2, withPolicy(karpv1.ConsolidationPolicyWhenEmpty),
			withConsolidateAfter(karpv1.NewDuration(30*time.Second)), withNodesBudget(budget))
	}
	tenEmpty := func(budget string) *Input {
		return kIn(whenEmpty(withNodesBudget(budget)), kNodes("n", 10, func(n string, _ int) *Node { return empty(n) })...)
	}

	runKarpenterCases(t, []karpCase{
		{
			name: "an empty node is deleted",
			from: file + ` Emptiness/Emptiness "can delete empty nodes"`,
			in:   func() *Input { return kIn(whenEmpty(), empty("n")) },
			want: allOf(decides(MethodEmptiness, "n"), replacing(0)),
		},
		{
			name: "every empty node goes in one command",
			from: file + ` Emptiness "can delete multiple empty nodes"`,
			in:   func() *Input { return kIn(whenEmpty(), empty("a"), empty("b")) },
			want: decides(MethodEmptiness, "a", "b"),
		},
		{
			name: "an empty drifted node is deleted without a replacement",
			from: file + ` Emptiness/Emptiness "can delete empty and drifted nodes"`,
			in:   func() *Input { return kIn(whenEmpty(), driftedNode(empty("n"))) },
			want: allOf(disrupts("n"), replacing(0)),
		},
		{
			name: "an empty node initialized within consolidateAfter is not consolidatable yet",
			from: file + ` Emptiness/Emptiness "should ignore nodes without the consolidatable status condition"`,
			in: func() *Input {
				return kIn(whenEmpty(withConsolidateAfter(karpv1.NewDuration(10*time.Minute))), initializedAt(empty("n"), kNow.Add(-5*time.Minute)))
			},
			want: allOf(decidesNothing(), skipsWith("n", "Not consolidatable until")),
		},
		{
			name: "an empty node whose last pod left within consolidateAfter is not consolidatable yet",
			from: file + ` Emptiness/Emptiness "should ignore nodes with the consolidatable status condition set to false"`,
			in: func() *Input {
				return kIn(whenEmpty(withConsolidateAfter(karpv1.NewDuration(10*time.Minute))), lastPodEventAt(empty("n"), kNow.Add(-5*time.Minute)))
			},
			want: allOf(decidesNothing(), afterwards(clockAt(kNow.Add(6*time.Minute)), decides(MethodEmptiness, "n"))),
		},
		{
			name: "do-not-disrupt=true on the node keeps it",
			from: file + ` Emptiness/Emptiness "should ignore nodes with the karpenter.sh/do-not-disrupt annotation"`,
			in: func() *Input {
				return kIn(whenEmpty(), nodeAnnotated(empty("n"), karpv1.AnnotationDoNotDisrupt, "true"))
			},
			want: decidesNothing(),
		},
		{
			name: "do-not-disrupt=false on the node does not keep it",
			from: file + ` Emptiness/Emptiness "should delete nodes with the karpenter.sh/do-not-disrupt annotation set to false"`,
			in: func() *Input {
				return kIn(whenEmpty(), nodeAnnotated(empty("n"), karpv1.AnnotationDoNotDisrupt, "false"))
			},
			want: decides(MethodEmptiness, "n"),
		},
		{
			name: "a node with a pod is not empty",
			from: file + ` Emptiness/Emptiness "should ignore nodes that have pods"`,
			in:   func() *Input { return kIn(whenEmpty(), testNode("n", "default", od, 2, rsPod("web", "100m"))) },
			want: decidesNothing(),
		},
		{
			name: "a node with only a DaemonSet pod is empty",
			from: file + ` Emptiness "will consider a node with a DaemonSet pod as empty"`,
			in:   func() *Input { return kIn(whenEmpty(), testNode("n", "default", od, 2, daemonPod("ds-n"))) },
			want: decides(MethodEmptiness, "n"),
		},
		{
			name: "a node with only terminating Deployment pods is empty",
			from: file + ` Emptiness "will consider a node with terminating Deployment pods as empty"`,
			in: func() *Input {
				return kIn(whenEmpty(), testNode("n", "default", od, 2,
					podDeleting(rsPod("a", "100m")), podDeleting(rsPod("b", "100m")), podDeleting(rsPod("c", "100m"))))
			},
			want: decides(MethodEmptiness, "n"),
		},
		{
			name: "a terminating StatefulSet pod keeps its node from being empty",
			from: file + ` Emptiness "will not consider a node with a terminating StatefulSet pod as empty" (pkg/utils/pod IsReschedulable)`,
			in: func() *Input {
				return kIn(whenEmpty(), testNode("n", "default", od, 2, podDeleting(stsPod("db-0", "100m"))))
			},
			want: decidesNothing(),
		},
		{
			name: "budget 100% lets all ten empty nodes go",
			from: file + ` Emptiness/Budgets "should allow all empty nodes to be disrupted"`,
			in:   func() *Input { return tenEmpty("100%") },
			want: allOf(allows(karpv1.DisruptionReasonEmpty, "default", 10), disruptedInPasses(1, 10, nil)),
		},
		{
			name: "budget 0% lets no empty node go",
			from: file + ` Emptiness/Budgets "should allow no empty nodes to be disrupted"`,
			in:   func() *Input { return tenEmpty("0%") },
			want: allOf(allows(karpv1.DisruptionReasonEmpty, "default", 0), decidesNothing()),
		},
		{
			name: "budget 30% of ten lets three empty nodes go",
			from: file + ` Emptiness/Budgets "should only allow 3 empty nodes to be disrupted"`,
			in:   func() *Input { return tenEmpty("30%") },
			want: allOf(allows(karpv1.DisruptionReasonEmpty, "default", 3), disruptedInPasses(1, 3, nil)),
		},
		{
			name: "budget 50% of three rounds up to two per pool",
			from: file + ` Emptiness/Budgets "should allow 2 nodes from each nodePool to be deleted"`,
			in:   func() *Input { return manyPools("50%") },
			want: allOf(allows(karpv1.DisruptionReasonEmpty, "pool-3", 2), disruptedInPasses(1, 20, perPool(2))),
		},
		{
			name: "budget 100% lets every pool's empty nodes go at once",
			from: file + ` Emptiness/Budgets "should allow all nodes from each nodePool to be deleted"`,
			in:   func() *Input { return manyPools("100%") },
			want: disruptedInPasses(1, 30, perPool(3)),
		},
		{
			name: "empty nodes of a static pool are not consolidated",
			from: file + ` Emptiness/Static NodePool "should not consolidate static NodePool nodes"`,
			in: func() *Input {
				pool := kPool("static", withReplicas(2))
				return kIn(kPools(pool), testNode("s-0", "static", od, 2), testNode("s-1", "static", od, 2))
			},
			want: allOf(decidesNothing(), eligibleFor("s-0", MethodEmptiness, false), eligibleFor("s-1", MethodConsolidation, false)),
		},
		{
			name: "empty consolidatable nodes are reported eligible for emptiness",
			from: file + ` Emptiness/Metrics "should correctly report eligible nodes"`,
			in:   func() *Input { return kIn(whenEmpty(), empty("a"), empty("b")) },
			want: allOf(eligibleFor("a", MethodEmptiness, true), eligibleFor("b", MethodEmptiness, true)),
		},
	})
}
