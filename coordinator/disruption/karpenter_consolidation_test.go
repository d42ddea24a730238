package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// TestKarpenterConsolidation ports Karpenter v1.14.1's
// pkg/controllers/disruption/consolidation_test.go (single- and multi-node
// consolidation: replace, delete, multi-NodeClaim merges, budgets, the
// consolidateAfter of destinations) with the spot-to-spot feature gate at
// its default, off. The cases that need the gate on, or pending pods, are
// in karpenter_gates_test.go.
func TestKarpenterConsolidation(t *testing.T) {
	const file = "pkg/controllers/disruption/consolidation_test.go"
	pool := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool { return kPools(kPool("default", opts...)) }
	// busy is an on-demand node of cpu vCPU with a 1-vCPU pod.
	busy := func(name string, cpu int64) *Node { return testNode(name, "default", od, cpu, rsPod("p-"+name, "1")) }
	// cheap is a node of the cheapest type (t-1) with pods quarter-vCPU pods.
	cheap := func(name string, pods int) *Node {
		ps := make([]*corev1.Pod, pods)
		for i := range ps {
			ps[i] = rsPod(fmt.Sprintf("%s-%d", name, i), "250m")
		}
		return testNode(name, "default", od, 1, ps...)
	}
	// pair is Karpenter's Delete setup: two nodes of the cheapest type, a
	// with two pods and b with one, so b can go (its pod fits on a) but
	// nothing can be replaced by anything cheaper.
	pair := func(b ...*corev1.Pod) (*Node, *Node) {
		if len(b) == 0 {
			b = []*corev1.Pod{rsPod("b-0", "250m")}
		}
		return cheap("a", 2), testNode("b", "default", od, 1, b...)
	}
	pairIn := func(opts []func(*karpv1.NodePool), b ...*corev1.Pod) *Input {
		na, nb := pair(b...)
		return kIn(pool(opts...), na, nb)
	}
	labelled := func(p *corev1.Pod) *corev1.Pod { return podLabelled(p, "app", "test") }
	worstCase := func(cts []string, rep ...catalog.Offering) *Input {
		n := ofType(testNode("n", "default", od, 4, rsPod("p", "1")), "current", 0.5)
		return withTypes(kIn(pool(withCapacityTypes(cts...)), n),
			kType("current", 4, kOffering("zone-a", od, 0.5, false)),
			kType("replacement", 4, rep...))
	}
	// manyPools are 10 pools of 3 empty nodes with budget.
	manyPools := func(budget string) *Input { return tenPools(32, withNodesBudget(budget)) }
	antiAffine := func(name string) *corev1.Pod {
		p := labelled(rsPod(name, "250m"))
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "test"}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
		return p
	}

	runKarpenterCases(t, []karpCase{
		// Events: what makes a node unconsolidatable.
		{
			name: "a non-empty node of a WhenEmpty pool is not consolidated",
			from: file + ` Consolidation/Events "should fire an event for ConsolidationDisabled when the NodePool has consolidation set to WhenEmpty"`,
			in:   func() *Input { return kIn(pool(withPolicy(karpv1.ConsolidationPolicyWhenEmpty)), busy("n", 8)) },
			want: allOf(decidesNothing(), skipsWith("n", "WhenEmpty")),
		},
		{
			name: "consolidateAfter Never disables consolidation",
			from: file + ` Consolidation/Events "should fire an event for ConsolidationDisabled when the NodePool has consolidateAfter set to 'Never'"`,
			in:   func() *Input { return kIn(pool(withConsolidateAfter(karpv1.NeverDuration())), busy("n", 8)) },
			want: allOf(decidesNothing(), skipsWith("n", `NodePool "default" has consolidation disabled`)),
		},
		{
			name: "a node of a WhenEmptyOrUnderutilized pool is consolidated",
			from: file + ` Consolidation/Events "should not fire an event for ConsolidationDisabled when the NodePool has consolidation set to WhenEmptyOrUnderutilized"`,
			in:   func() *Input { return kIn(pool(), busy("n", 8)) },
			want: decides(MethodSingleNode, "n"),
		},
		{
			name: "a node whose instance type is not in the catalogue is not consolidated",
			from: file + ` Consolidation/Events "should fire an event when a candidate does not have a resolvable instance type" (consolidation.go ShouldDisrupt)`,
			in: func() *Input {
				return kIn(pool(), ofType(createdAt(busy("n", 8), kNow.Add(-30*time.Minute)), "t-unknown", 8*odPrice))
			},
			want: decidesNothing(),
		},
		{
			name: "a node without the capacity-type label is not consolidated",
			from: file + ` Consolidation/Events "should fire an event when a candidate does not have the capacity type label" (consolidation.go ShouldDisrupt)`,
			in:   func() *Input { return kIn(pool(), withoutNodeLabel(busy("n", 8), karpv1.LabelCapacityType)) },
			want: decidesNothing(),
		},
		{
			name: "a node without the zone label is not consolidated",
			from: file + ` Consolidation/Events "should fire an event when a candidate does not have the zone label" (consolidation.go ShouldDisrupt)`,
			in:   func() *Input { return kIn(pool(), withoutNodeLabel(busy("n", 8), karpv1.LabelZone)) },
			want: decidesNothing(),
		},

		// Replace.
		{
			name: "an on-demand node is replaced by a cheaper one, never by its own type",
			from: file + ` Consolidation/Replace "can replace node" (if the candidate is on-demand node)`,
			in:   func() *Input { return kIn(pool(), busy("n", 8)) },
			want: allOf(decides(MethodSingleNode, "n"), replacing(1), replacementExcludes("t-8", "t-9", "t-32")),
		},
		{
			name: "spot-to-spot is off by default: a spot node is not replaced by spot",
			from: file + ` Consolidation/Replace "cannot replace spot with spot if the spotToSpotConsolidation is disabled" (the SpotToSpotConsolidation feature gate defaults to false)`,
			in: func() *Input {
				return kIn(pool(withCapacityTypes(spot)), testNode("n", "default", spot, 32, rsPod("p", "1")))
			},
			want: decidesNothing(),
		},
		{
			name: "a replacement whose worst-case spot launch price is not cheaper is refused",
			from: file + ` Consolidation/Replace "won't replace node if any spot replacement is more expensive" (nodeclaim.go RemoveInstanceTypeOptionsByPriceAndMinValues, WorstLaunchPrice)`,
			in: func() *Input {
				return worstCase([]string{od, spot},
					kOffering("zone-a", spot, 1.0, true), kOffering("zone-b", spot, 0.2, true), kOffering("zone-c", spot, 0.4, true))
			},
			want: decidesNothing(),
		},
		{
			name: "an on-demand replacement dearer than the node is refused",
			from: file + ` Consolidation/Replace "won't replace on-demand node if on-demand replacement is more expensive"`,
			in: func() *Input {
				return worstCase([]string{od},
					kOffering("zone-a", od, 0.6, true), kOffering("zone-b", od, 0.6, true),
					kOffering("zone-b", spot, 0.2, true), kOffering("zone-c", spot, 0.3, true))
			},
			want: decidesNothing(),
		},
		{
			name: "a PDB allowing no eviction keeps the node from replacement",
			from: file + ` Consolidation/Replace "can replace nodes, considers PDB"`,
			in: func() *Input {
				in := kIn(pool(), testNode("n", "default", od, 32, labelled(rsPod("a", "1")), labelled(rsPod("b", "1")), labelled(rsPod("c", "1"))))
				in.PDBs = append(in.PDBs, maxUnavailableZeroPDB("test", "test"))
				return in
			},
			want: decidesNothing(),
		},
		{
			name: "a PDB with unhealthyPodEvictionPolicy AlwaysAllow does not hold unready pods",
			from: file + ` Consolidation/Replace "can replace nodes, considers PDB policy" (pkg/utils/pdb isEvictable)`,
			in: func() *Input {
				in := kIn(pool(), testNode("n", "default", od, 32,
					podUnready(labelled(rsPod("a", "1"))), podUnready(labelled(rsPod("b", "1"))), podUnready(labelled(rsPod("c", "1")))))
				alwaysAllow := policyv1.AlwaysAllow
				in.PDBs = append(in.PDBs, maxUnavailableZeroPDB("test", "test"))
				in.PDBs[0].Spec.UnhealthyPodEvictionPolicy = &alwaysAllow
				return in
			},
			want: allOf(decides(MethodSingleNode, "n"), replacing(1)),
		},
		{
			name: "a PDB of another namespace does not hold the node",
			from: file + ` Consolidation/Replace "can replace nodes, PDB namespace must match"`,
			in: func() *Input {
				in := kIn(pool(), testNode("n", "default", od, 32, labelled(rsPod("a", "1"))))
				pdb := maxUnavailableZeroPDB("test", "test")
				pdb.Namespace = "elsewhere"
				in.PDBs = append(in.PDBs, pdb)
				return in
			},
			want: allOf(decides(MethodSingleNode, "n"), replacing(1)),
		},
		{
			name: "do-not-disrupt=true on the node keeps it from replacement",
			from: file + ` Consolidation/Replace "can replace nodes, considers karpenter.sh/do-not-disrupt set to true on nodes"`,
			in: func() *Input {
				return kIn(pool(), nodeAnnotated(busy("n", 32), karpv1.AnnotationDoNotDisrupt, "true"))
			},
			want: decidesNothing(),
		},
		{
			name: "a do-not-disrupt pod keeps its node from replacement",
			from: file + ` Consolidation/Replace "can replace nodes, considers karpenter.sh/do-not-disrupt set to true on pods"`,
			in: func() *Input {
				return kIn(pool(), testNode("n", "default", od, 32, withDoNotDisrupt(rsPod("p", "1"), "true")))
			},
			want: decidesNothing(),
		},
		{
			name: "a replacement left with fewer instance types than minValues by the price filter is refused",
			from: file + ` Consolidation/Replace "Consolidation should fail if filterByPrice breaks the minimum requirement from the NodePools." (if the candidate is on-demand node)`,
			in: func() *Input {
				p := kPool("default")
				p.Spec.Template.Spec.Requirements = append(p.Spec.Template.Spec.Requirements,
					karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: karpv1.OpExists, MinValues: new(16)})
				return kIn(kPools(p), busy("n", 16))
			},
			want: decidesNothing(),
		},
		{
			name: "a pool without instance types does not stop the others' replacements",
			from: file + ` Consolidation/Replace "can replace nodes if another nodePool returns no instance types"`,
			in: func() *Input {
				other := kPool("other")
				other.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "missing"}
				return kIn(kPools(kPool("default"), other), busy("n", 8))
			},
			want: allOf(decides(MethodSingleNode, "n"), replacing(1)),
		},

		// Delete.
		{
			name: "the node with fewer pods is deleted onto the other",
			from: file + ` Consolidation/Delete "can delete nodes"`,
			in:   func() *Input { return pairIn(nil) },
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},
		{
			name: "pods may move onto a node Joiner does not manage",
			from: file + ` Consolidation/Delete "can delete nodes, when non-Karpenter capacity can fit pods"`,
			in:   func() *Input { return kIn(pool(), unmanagedNode("foreign", 32), cheap("m", 3)) },
			want: allOf(decides(MethodSingleNode, "m"), replacing(0)),
		},
		{
			name: "a node with a PDB-blocked pod stays, the other is deleted onto it",
			from: file + ` Consolidation/Delete "can delete nodes, considers PDB"`,
			in: func() *Input {
				in := pairIn(nil, labelled(rsPod("b-0", "250m")))
				in.PDBs = append(in.PDBs, testPDB("test", 0, "test"))
				return in
			},
			want: allOf(decides(MethodSingleNode, "a"), replacing(0)),
		},
		{
			name: "a node annotated do-not-disrupt stays, the other is deleted onto it",
			from: file + ` Consolidation/Delete "can delete nodes, considers karpenter.sh/do-not-disrupt set to true on nodes"`,
			in: func() *Input {
				in := pairIn(nil)
				nodeAnnotated(in.Nodes[1], karpv1.AnnotationDoNotDisrupt, "true")
				return in
			},
			want: allOf(decides(MethodSingleNode, "a"), replacing(0)),
		},
		{
			name: "a node with a do-not-disrupt pod stays, the other is deleted onto it",
			from: file + ` Consolidation/Delete "can delete nodes, considers karpenter.sh/do-not-disrupt set to true on pods"`,
			in:   func() *Input { return pairIn(nil, withDoNotDisrupt(rsPod("b-0", "250m"), "true")) },
			want: allOf(decides(MethodSingleNode, "a"), replacing(0)),
		},
		{
			name: "a terminationGracePeriod does not let consolidation past do-not-disrupt pods",
			from: file + ` Consolidation/Delete "does not consolidate nodes with karpenter.sh/do-not-disrupt set to true on pods when the NodePool's TerminationGracePeriod is not nil"`,
			in: func() *Input {
				a := withTGP(testNode("a", "default", od, 1, withDoNotDisrupt(rsPod("a-0", "250m"), "true"), withDoNotDisrupt(rsPod("a-1", "250m"), "true")))
				b := withTGP(testNode("b", "default", od, 1, withDoNotDisrupt(rsPod("b-0", "250m"), "true")))
				return kIn(pool(), a, b)
			},
			want: decidesNothing(),
		},
		{
			name: "a terminationGracePeriod does not let consolidation past blocking PDBs",
			from: file + ` Consolidation/Delete "does not consolidate nodes with pods with blocking PDBs when the NodePool's TerminationGracePeriod is not nil"`,
			in: func() *Input {
				a := withTGP(testNode("a", "default", od, 1, labelled(rsPod("a-0", "250m")), labelled(rsPod("a-1", "250m"))))
				b := withTGP(testNode("b", "default", od, 1, labelled(rsPod("b-0", "250m"))))
				in := kIn(pool(), a, b)
				in.PDBs = append(in.PDBs, maxUnavailableZeroPDB("test", "test"))
				return in
			},
			want: decidesNothing(),
		},
		{
			name: "an active duration do-not-disrupt keeps its node, the other is deleted",
			from: file + ` Consolidation/Delete "does not consolidate nodes with pods that have a duration-based do-not-disrupt annotation that is still active"`,
			in:   func() *Input { return pairIn(nil, podStartedAt(withDoNotDisrupt(rsPod("b-0", "250m"), "2m"), kNow)) },
			want: allOf(decides(MethodSingleNode, "a"), replacing(0)),
		},
		{
			name: "nodes are consolidated once every duration do-not-disrupt has elapsed",
			from: file + ` Consolidation/Delete "can consolidate nodes after duration-based do-not-disrupt annotation expires"`,
			in: func() *Input {
				a := testNode("a", "default", od, 1,
					podStartedAt(withDoNotDisrupt(rsPod("a-0", "250m"), "2m"), kNow), podStartedAt(withDoNotDisrupt(rsPod("a-1", "250m"), "2m"), kNow))
				b := testNode("b", "default", od, 1, podStartedAt(withDoNotDisrupt(rsPod("b-0", "250m"), "2m"), kNow))
				return kIn(pool(), a, b)
			},
			want: allOf(decidesNothing(), afterwards(clockAt(kNow.Add(3*time.Minute)), decides(MethodSingleNode, "b"))),
		},
		{
			name: "an invalid do-not-disrupt value does not block consolidation",
			from: file + ` Consolidation/Delete "can delete nodes, considers invalid do-not-disrupt annotation format as not blocking"`,
			in:   func() *Input { return pairIn(nil, withDoNotDisrupt(rsPod("b-0", "250m"), "invalid-format")) },
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},
		{
			name: "a pod without an owner is evicted like any other",
			from: file + ` Consolidation/Delete "can delete nodes, evicts pods without an ownerRef"`,
			in:   func() *Input { return pairIn(nil, testPod("b-0", "250m")) },
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},
		{
			name: "pods are not moved onto a node that is not initialized",
			from: file + ` Consolidation/Delete "won't delete node if it would require pods to schedule on an uninitialized node"`,
			in: func() *Input {
				a, b := pair()
				return kIn(pool(), uninitializedNode(a), b)
			},
			want: decidesNothing(),
		},
		{
			name: "pods are not moved onto a node still inside its consolidateAfter window",
			from: file + ` Consolidation/Delete "should not consolidate pods onto a destination node that is under its consolidateAfter window" (scheduler.go IsConsolidationSimulation, utils/disruption IsUnderConsolidateAfter)`,
			in: func() *Input {
				a, b := pair()
				return kIn(pool(withConsolidateAfter(karpv1.NewDuration(10*time.Minute))), lastPodEventAt(a, kNow.Add(-5*time.Minute)), b)
			},
			want: decidesNothing(),
		},
		{
			name: "once the destination's consolidateAfter window is over the pods move there",
			from: file + ` Consolidation/Delete "should not consolidate pods onto a destination node that is under its consolidateAfter window" (after the clock passes the window)`,
			in: func() *Input {
				a, b := pair()
				return kIn(pool(withConsolidateAfter(karpv1.NewDuration(10*time.Minute))), lastPodEventAt(a, kNow.Add(-20*time.Minute)), b)
			},
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},
		{
			name: "a destination whose pool has consolidateAfter Never takes pods at any time",
			from: file + ` Consolidation/Delete "should consolidate pods onto a destination node with consolidateAfter set to Never"`,
			in: func() *Input {
				keep := kPool("keep", withConsolidateAfter(karpv1.NeverDuration()))
				dest := lastPodEventAt(initializedAt(testNode("dest", "keep", od, 1), kNow), kNow)
				return kIn(kPools(kPool("default"), keep), testNode("src", "default", od, 1, rsPod("p", "250m")), dest)
			},
			want: allOf(decides(MethodSingleNode, "src"), replacing(0)),
		},
		{
			name: "replacing with a new node is not held by consolidateAfter on destinations",
			from: file + ` Consolidation/Delete "should replace a node with a cheaper one even when consolidateAfter has not expired"`,
			in: func() *Input {
				return kIn(pool(withConsolidateAfter(karpv1.NewDuration(time.Minute))), initializedAt(busy("n", 32), kNow.Add(-2*time.Minute)))
			},
			want: allOf(decides(MethodSingleNode, "n"), replacing(1)),
		},
		{
			name: "an initialized destination is used although uninitialized ones have room",
			from: file + ` Consolidation/Delete "should consider initialized nodes before uninitialized nodes"`,
			in: func() *Input {
				nodes := kNodes("fresh", 10, func(n string, _ int) *Node {
					return uninitializedNode(ofType(testNode(n, "default", od, 3, rsPod("p-"+n, "2")), "large", 0.3))
				})
				nodes = append(nodes,
					ofType(testNode("ready", "default", od, 3, rsPod("p-ready", "2")), "large", 0.3),
					ofType(testNode("small", "default", od, 1, rsPod("p-small", "1")), "small", 0.1))
				return withTypes(kIn(pool(), nodes...),
					kType("large", 3, kOffering("zone-a", od, 0.3, true)),
					kType("small", 1, kOffering("zone-a", od, 0.1, true)))
			},
			want: allOf(decides(MethodSingleNode, "small"), replacing(0)),
		},
		{
			name: "a node is kept when one of its pods would fit nowhere",
			from: file + ` Consolidation/Delete "won't delete nodes if it would make a non-pending pod go pending"`,
			in: func() *Input {
				a := withNodeLabel(testNode("a", "default", od, 1, podSelecting(rsPod("a-0", "250m"), "foo", "1"), podSelecting(rsPod("a-1", "250m"), "foo", "1")), "foo", "1")
				b := withNodeLabel(testNode("b", "default", od, 1, podSelecting(rsPod("b-0", "250m"), "foo", "2")), "foo", "2")
				return kIn(pool(), a, b)
			},
			want: decidesNothing(),
		},
		{
			name: "a pool that cannot launch anything does not stop consolidation",
			from: file + ` Consolidation/Delete "can delete nodes while an invalid node pool exists"`,
			in: func() *Input {
				bad := kPool("bad-nodepool")
				bad.Spec.Template.Spec.Requirements = nil
				bad.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "Unknown", Name: "non-existent"}
				a, b := pair()
				return kIn(kPools(kPool("default"), bad), a, b)
			},
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},

		// Multi-NodeClaim.
		{
			name: "three on-demand nodes are merged into one",
			from: file + ` Consolidation/Multi-NodeClaim "can merge 3 nodes into 1" (if the candidate is on-demand node)`,
			in:   func() *Input { return kIn(pool(), busy("x", 8), busy("y", 8), busy("z", 8)) },
			want: allOf(decides(MethodMultiNode, "x", "y", "z"), replacing(1)),
		},
		{
			name: "spot and on-demand nodes are merged into one",
			from: file + ` Consolidation/Multi-NodeClaim "can merge 3 nodes into 1 if the candidates have both spot and on-demand"`,
			in: func() *Input {
				return kIn(pool(withCapacityTypes(od, spot)), busy("x", 8), busy("y", 8), testNode("z", "default", spot, 8, rsPod("p-z", "1")))
			},
			want: allOf(decides(MethodMultiNode, "x", "y", "z"), replacing(1)),
		},
		{
			name: "two nodes are not merged into one of their own type: the emptier is deleted",
			from: file + ` Consolidation/Multi-NodeClaim "won't merge 2 nodes into 1 of the same type" (multinodeconsolidation.go filterOutSameInstanceType)`,
			in:   func() *Input { return kIn(pool(), cheap("a", 1), cheap("b", 2)) },
			want: allOf(decides(MethodSingleNode, "a"), replacing(0)),
		},
		{
			name: "two large nodes are replaced by a single smaller one",
			from: file + ` Consolidation/Multi-NodeClaim "should wait for the node TTL for non-empty nodes before consolidating (multi-node)" (the command it validates)`,
			in: func() *Input {
				return kIn(pool(), testNode("a", "default", od, 32, rsPod("a-0", "1"), rsPod("a-1", "1")), busy("b", 32))
			},
			want: allOf(decides(MethodMultiNode, "a", "b"), replacing(1)),
		},
		{
			name: "several empty nodes all go at once",
			from: file + ` Consolidation/Multi-NodeClaim "should consolidate multiple empty nodes via multi-nodeclaim consolidation"`,
			in: func() *Input {
				return kIn(pool(), testNode("x", "default", od, 32), testNode("y", "default", od, 32), testNode("z", "default", od, 32))
			},
			want: allOf(disrupts("x", "y", "z"), replacing(0)),
		},

		// Ordering.
		{
			name: "the candidate with the best savings per disruption goes first",
			from: file + ` Consolidation/Node Lifetime Consideration "should consolidate the node with best savings ratio first"`,
			in: func() *Input {
				return kIn(pool(withExpireAfter(karpv1.NewDuration(10*time.Hour))), cheap("a", 2), cheap("b", 1))
			},
			want: allOf(decides(MethodSingleNode, "b"), replacing(0)),
		},
		{
			name: "a node is kept when deleting it would break required pod anti-affinity",
			from: file + ` Consolidation/Topology Consideration "won't delete node if it would violate pod anti-affinity"`,
			in: func() *Input {
				return kIn(pool(),
					testNode("a", "default", od, 1, antiAffine("a-0")),
					testNode("b", "default", od, 1, antiAffine("b-0")),
					testNode("c", "default", od, 1, antiAffine("c-0")))
			},
			want: decidesNothing(),
		},

		// Budgets.
		{
			name: "budget 30% of ten caps a multi-node delete at three nodes",
			from: file + ` Consolidation/Budgets "should only allow 3 nodes to be deleted in multi node consolidation delete"`,
			in: func() *Input {
				return kIn(pool(withNodesBudget("30%")), kNodes("n", 10, func(n string, _ int) *Node {
					return testNode(n, "default", od, 32, rsPod("p-"+n, "100m"))
				})...)
			},
			want: allOf(replacing(0), disruptedInPasses(1, 3, nil)),
		},
		{
			name: "budget 30% of ten: three single-node deletes over passes",
			from: file + ` Consolidation/Budgets "should only allow 3 nodes to be deleted in single node consolidation delete"`,
			in: func() *Input {
				return kIn(pool(withNodesBudget("30%")), kNodes("n", 10, func(n string, _ int) *Node {
					return testNode(n, "default", od, 32, rsPod("p-"+n, "15"))
				})...)
			},
			want: disruptedInPasses(5, 3, nil),
		},
		{
			name: "budget 30% of ten empty nodes deletes three",
			from: file + ` Consolidation/Budgets "should only allow 3 empty nodes to be disrupted"`,
			in: func() *Input {
				return kIn(pool(withNodesBudget("30%")), kNodes("n", 10, func(n string, _ int) *Node { return testNode(n, "default", od, 32) })...)
			},
			want: disruptedInPasses(1, 3, nil),
		},
		{
			name: "budget 50% of three rounds up to two nodes of each pool",
			from: file + ` Consolidation/Budgets "should allow 2 nodes from each nodePool to be deleted"`,
			in:   func() *Input { return manyPools("50%") },
			want: allOf(allows(karpv1.DisruptionReasonEmpty, "pool-0", 2), disruptedInPasses(1, 20, perPool(2))),
		},
		{
			name: "budget 100% lets every node of every pool go",
			from: file + ` Consolidation/Budgets "should allow all nodes from each nodePool to be deleted"`,
			in:   func() *Input { return manyPools("100%") },
			want: disruptedInPasses(1, 30, perPool(3)),
		},
		{
			name: "budget 0% lets no node of any pool go",
			from: file + ` Consolidation/Budgets "should allow no nodes from each nodePool to be deleted"`,
			in:   func() *Input { return manyPools("0%") },
			want: decidesNothing(),
		},
	})
}
