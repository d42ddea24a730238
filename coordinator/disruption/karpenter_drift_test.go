package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestKarpenterDrift ports Karpenter v1.14.1's
// pkg/controllers/disruption/drift_test.go: drifted nodes are replaced one
// at a time (empty ones first, then by how long they have been drifted),
// within the Drifted budget, unless something blocks their eviction.
func TestKarpenterDrift(t *testing.T) {
	const file = "pkg/controllers/disruption/drift_test.go"
	// As in Karpenter's suite the nodes are not consolidatable, so only
	// drift acts on them.
	pool := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool {
		return kPools(kPool("default", append([]func(*karpv1.NodePool){withConsolidateAfter(karpv1.NeverDuration())}, opts...)...))
	}
	// big is a 32-vCPU node with a 1-vCPU pod of each name in pods.
	big := func(name string, pods ...string) *Node {
		ps := make([]*corev1.Pod, len(pods))
		for i, p := range pods {
			ps[i] = rsPod(p, "1")
		}
		return testNode(name, "default", od, 32, ps...)
	}

	runKarpenterCases(t, []karpCase{
		{
			name: "budget 30% of ten allows three drifted nodes",
			from: file + ` Drift/Budgets "should only consider 3 nodes allowed to be disrupted because of budgets"`,
			in: func() *Input {
				return kIn(pool(withNodesBudget("30%")), kNodes("n", 10, func(n string, _ int) *Node { return driftedNode(big(n)) })...)
			},
			want: allows(karpv1.DisruptionReasonDrifted, "default", 3),
		},
		{
			name: "budget 30% of ten: three drifted nodes over passes, counting those in progress",
			from: file + ` Drift/Budgets "should disrupt 3 nodes, taking into account commands in progress"`,
			in: func() *Input {
				return kIn(pool(withNodesBudget("30%")), kNodes("n", 10, func(n string, i int) *Node {
					if i < 5 {
						return driftedNode(big(n, "p-"+n))
					}
					return big(n)
				})...)
			},
			want: disruptedInPasses(5, 3, nil),
		},
		{
			name: "a budget of one per pool: one drifted node of each of ten pools",
			from: file + ` Drift/Budgets "should respect budgets for multiple nodepools"`,
			in: func() *Input {
				var pools []*karpv1.NodePool
				var nodes []*Node
				want := map[string]int{}
				for i := range 10 {
					name := fmt.Sprintf("pool-%d", i)
					want[name] = 1
					pools = append(pools, kPool(name, withConsolidateAfter(karpv1.NeverDuration()), withNodesBudget("1")))
					nodes = append(nodes, kNodes(name, 3, func(n string, j int) *Node {
						if j < 2 {
							return driftedNode(testNode(n, name, od, 32, rsPod("p-"+n, "1")))
						}
						return driftedNode(testNode(n, name, od, 32))
					})...)
				}
				return kIn(pools, nodes...)
			},
			want: disruptedInPasses(30, 10, map[string]int{"pool-0": 1, "pool-4": 1, "pool-9": 1}),
		},
		{
			name: "a drifted node whose pods fit nowhere is passed over for the next",
			from: file + ` Drift/Drift "should continue to the next drifted node if the first cannot reschedule all pods"`,
			in: func() *Input {
				huge := testNode("huge", "default", od, 32, rsPod("giant", "40"))
				return kIn(pool(), driftedNode(huge), driftedNode(createdAt(testNode("small", "default", od, 1, rsPod("p", "1")), t0.Add(time.Minute))))
			},
			want: decides(MethodDrift, "small"),
		},
		{
			name: "a node whose hash is current is not drifted",
			from: file + ` Drift/Drift "should ignore nodes without the drifted status condition"`,
			in:   func() *Input { return kIn(pool(), big("n", "p")) },
			want: decidesNothing(),
		},
		{
			name: "a node is not judged drifted while the pool's current hash is unknown",
			from: file + ` Drift/Drift "should ignore nodes with the drifted status condition set to false"`,
			in: func() *Input {
				in := kIn(pool(), driftedNode(big("n", "p")))
				in.NodePoolHashes = nil
				return in
			},
			want: decidesNothing(),
		},
		{
			name: "do-not-disrupt=true on the node keeps a drifted node",
			from: file + ` Drift/Drift "should ignore nodes with the karpenter.sh/do-not-disrupt annotation set to true"`,
			in: func() *Input {
				return kIn(pool(), nodeAnnotated(driftedNode(big("n", "p")), karpv1.AnnotationDoNotDisrupt, "true"))
			},
			want: decidesNothing(),
		},
		{
			name: "do-not-disrupt=false on the node does not keep a drifted node",
			from: file + ` Drift/Drift "should delete drifted nodes with the karpenter.sh/do-not-disrupt annotation set to false"`,
			in: func() *Input {
				return kIn(pool(), nodeAnnotated(driftedNode(big("n", "p")), karpv1.AnnotationDoNotDisrupt, "false"), big("other"))
			},
			want: allOf(decides(MethodDrift, "n"), replacing(0)),
		},
		{
			name: "a do-not-disrupt pod keeps a drifted node",
			from: file + ` Drift/Drift "should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt annotation set to true"`,
			in: func() *Input {
				return kIn(pool(), driftedNode(testNode("n", "default", od, 32, withDoNotDisrupt(rsPod("p", "1"), "true"))))
			},
			want: allOf(decidesNothing(), skipsWith("n", "do-not-disrupt")),
		},
		{
			name: "with a terminationGracePeriod a drifted node with a fully PDB-blocked pod goes without a replacement",
			from: file + ` Drift/Drift "should not create replacements for drifted nodes that have pods with the blocking PDBs when the NodePool's TerminationGracePeriod is not nil" (helpers.go SimulateScheduling leaves fully blocked pods out)`,
			in: func() *Input {
				in := kIn(pool(), withTGP(driftedNode(testNode("n", "default", od, 32, rsPod("web", "1")))))
				in.PDBs = append(in.PDBs, maxUnavailableZeroPDB("web", "web"))
				return in
			},
			want: allOf(decides(MethodDrift, "n"), replacing(0)),
		},
		{
			name: "with a terminationGracePeriod a drifted node with a do-not-disrupt pod goes without a replacement",
			from: `pkg/controllers/disruption/suite_test.go Candidate Filtering "should consider candidates that have do-not-disrupt pods scheduled with a terminationGracePeriod set for eventual disruption" with ` + file + ` "should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt annotation set to true" (helpers.go SimulateScheduling: IsCurrentlyReschedulable)`,
			in: func() *Input {
				return kIn(pool(), withTGP(driftedNode(testNode("n", "default", od, 32, withDoNotDisrupt(rsPod("p", "1"), "true")))))
			},
			want: allOf(decides(MethodDrift, "n"), replacing(0)),
		},
		{
			name: "with a terminationGracePeriod a pod whose PDB merely allows no disruption now is still rescheduled",
			from: file + ` Drift/Drift blocking-PDB cases, contrasted by pkg/utils/pdb IsCurrentlyReschedulable (only fully blocking PDBs keep a pod out of the simulation)`,
			in: func() *Input {
				in := kIn(pool(), withTGP(driftedNode(testNode("n", "default", od, 32, rsPod("web", "1")))))
				in.PDBs = append(in.PDBs, testPDB("web", 0, "web"))
				return in
			},
			want: allOf(decides(MethodDrift, "n"), replacing(1)),
		},
		{
			name: "an active duration do-not-disrupt blocks drift until it elapses",
			from: file + ` Drift/Drift "should not drift nodes with pods that have a duration-based do-not-disrupt annotation that is still active"`,
			in: func() *Input {
				return kIn(pool(), driftedNode(testNode("n", "default", od, 32, podStartedAt(withDoNotDisrupt(rsPod("p", "1"), "2m"), kNow))))
			},
			want: allOf(decidesNothing(), afterwards(clockAt(kNow.Add(3*time.Minute)), decides(MethodDrift, "n"))),
		},
		{
			name: "an invalid do-not-disrupt value does not block drift",
			from: file + ` Drift/Drift "should drift nodes with pods that have an invalid do-not-disrupt annotation format"`,
			in: func() *Input {
				return kIn(pool(), driftedNode(testNode("n", "default", od, 32, withDoNotDisrupt(rsPod("p", "1"), "invalid-format"))), big("other"))
			},
			want: decides(MethodDrift, "n"),
		},
		{
			name: "drift waits for the longest do-not-disrupt duration on the node",
			from: file + ` Drift/Drift "should not drift nodes until the longest duration-based do-not-disrupt grace period expires across multiple pods"`,
			in: func() *Input {
				return kIn(pool(), driftedNode(testNode("n", "default", od, 32,
					podStartedAt(withDoNotDisrupt(rsPod("a", "1"), "1m"), kNow), podStartedAt(withDoNotDisrupt(rsPod("b", "1"), "3m"), kNow))))
			},
			want: allOf(decidesNothing(),
				afterwards(clockAt(kNow.Add(2*time.Minute)), decidesNothing()),
				afterwards(clockAt(kNow.Add(4*time.Minute)), decides(MethodDrift, "n"))),
		},
		{
			name: "a drifted node is replaced when its pods need a new node",
			from: file + ` Drift/Drift "should replace drifted nodes"`,
			in:   func() *Input { return kIn(pool(), driftedNode(big("n", "p"))) },
			want: allOf(decides(MethodDrift, "n"), replacing(1)),
		},
		{
			name: "a drifted node is deleted when its pods fit elsewhere",
			from: file + ` Drift/Drift "should delete drifted nodes"`,
			in:   func() *Input { return kIn(pool(), driftedNode(big("n", "p")), big("other")) },
			want: allOf(decides(MethodDrift, "n"), replacing(0)),
		},
		{
			name: "an empty drifted node is deleted by drift when consolidation is disabled",
			from: file + ` Drift/Drift "should delete drifted nodes when they are empty and consolidation is disabled"`,
			in:   func() *Input { return kIn(pool(), driftedNode(big("n"))) },
			want: allOf(decides(MethodDrift, "n"), replacing(0)),
		},
		{
			name: "empty drifted nodes go before non-empty ones",
			from: file + ` Drift/Drift "should drift empty nodes before non-empty nodes" (drift.go ComputeCommands)`,
			in: func() *Input {
				return kIn(pool(), driftedNode(big("busy", "p")), driftedNode(createdAt(big("idle"), t0.Add(time.Minute))))
			},
			want: allOf(decides(MethodDrift, "idle"), replacing(0)),
		},
		{
			name: "an empty drifted consolidatable node is deleted without a replacement",
			from: file + ` Drift/Drift "should delete drifted nodes when they are empty and consolidatable"`,
			in: func() *Input {
				return kIn(kPools(kPool("default")), driftedNode(big("n")))
			},
			want: allOf(disrupts("n"), replacing(0)),
		},
		{
			name: "a drifted node may be replaced by several nodes",
			from: file + ` Drift/Drift "can replace drifted nodes with multiple nodes"`,
			in: func() *Input {
				n := testNode("n", "default", od, 8, rsPod("a", "2"), rsPod("b", "2"), rsPod("c", "2"))
				ofType(driftedNode(n), "current", 0.5)
				return withTypes(kIn(pool(), n),
					kType("current", 8, kOffering("zone-a", od, 0.5, false)),
					kType("replacement", 3, kOffering("zone-a", od, 0.3, true)))
			},
			want: allOf(decides(MethodDrift, "n"), replacing(3)),
		},
		{
			name: "drifted nodes go one at a time, the longest drifted first",
			from: file + ` Drift/Drift "should drift one non-empty node at a time, starting with the earliest drift" (drift.go sorts by the Drifted condition's transition time)`,
			in: func() *Input {
				a := driftedSince(testNode("a", "default", od, 32, rsPod("pa", "30")), kNow.Add(-10*time.Minute))
				b := driftedSince(createdAt(testNode("b", "default", od, 32, rsPod("pb", "30")), t0.Add(time.Minute)), kNow.Add(-time.Hour))
				return kIn(pool(), a, b)
			},
			want: allOf(decides(MethodDrift, "b"), replacing(1)),
		},
		{
			name: "drifted nodes of a static pool are left to static drift",
			from: file + ` Drift/Static NodePool "should not consider static nodepool for drift"`,
			in: func() *Input {
				p := kPool("static", withReplicas(2))
				return kIn(kPools(p), driftedNode(testNode("s-0", "static", od, 2, rsPod("a", "100m"))), driftedNode(testNode("s-1", "static", od, 2, rsPod("b", "100m"))))
			},
			want: noMethod(MethodDrift),
		},
		{
			name: "a drifted node nothing blocks is reported eligible for drift, a blocked one is not",
			from: file + ` Drift/Metrics "should correctly report eligible drifted nodes"`,
			in: func() *Input {
				return kIn(pool(), driftedNode(big("free", "p")), driftedNode(testNode("held", "default", od, 32, withDoNotDisrupt(rsPod("q", "1"), "true"))))
			},
			want: allOf(eligibleFor("free", MethodDrift, true), eligibleFor("held", MethodDrift, false)),
		},
	})
}
