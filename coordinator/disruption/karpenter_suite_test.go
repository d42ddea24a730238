package disruption

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestKarpenterCandidateFiltering ports the "Candidate Filtering" context of
// Karpenter v1.14.1's pkg/controllers/disruption/suite_test.go
// (NewCandidate, statenode.go ValidateNodeDisruptable and
// ValidatePodsDisruptable): which nodes may be disrupted gracefully
// (emptiness, consolidation) and eventually (drift, where a NodeClaim's
// terminationGracePeriod lets it past pod-level blocks). Status reports
// both: Blocker for graceful, DriftBlocker for eventual.
func TestKarpenterCandidateFiltering(t *testing.T) {
	const file = "pkg/controllers/disruption/suite_test.go Candidate Filtering"
	one := func(n *Node) func() *Input { return func() *Input { return kIn(kPools(kPool("default")), n) } }
	node := func(pods ...*corev1.Pod) *Node { return testNode("n", "default", od, 4, pods...) }
	withPDBs := func(n *Node, pdbs ...string) func() *Input {
		return func() *Input {
			in := kIn(kPools(kPool("default")), n)
			for _, name := range pdbs {
				in.PDBs = append(in.PDBs, maxUnavailableZeroPDB(name, "test"))
			}
			return in
		}
	}
	labelled := func(p *corev1.Pod) *corev1.Pod { return podLabelled(p, "app", "test") }
	dnd := func(p *corev1.Pod) *corev1.Pod { return withDoNotDisrupt(p, "true") }

	runKarpenterCases(t, []karpCase{
		{
			name: "a do-not-disrupt pod blocks graceful disruption",
			from: file + ` "should not consider candidates that have do-not-disrupt pods scheduled and no terminationGracePeriod"`,
			in:   one(node(dnd(rsPod("p", "1")))),
			want: blockers("n", "do-not-disrupt", "*"),
		},
		{
			name: "a do-not-disrupt mirror pod blocks graceful disruption",
			from: file + ` "should not consider candidates that have do-not-disrupt mirror pods scheduled" (utils/pod IsDisruptable: only inactive pods are exempt)`,
			in:   one(node(dnd(mirrorPod("static", "n")))),
			want: blockers("n", "*", "*"),
		},
		{
			name: "a do-not-disrupt DaemonSet pod blocks graceful disruption",
			from: file + ` "should not consider candidates that have do-not-disrupt daemonset pods scheduled"`,
			in:   one(node(dnd(daemonPod("ds-n")))),
			want: blockers("n", "*", "*"),
		},
		{
			name: "with a terminationGracePeriod a do-not-disrupt pod does not block eventual disruption",
			from: file + ` "should consider candidates that have do-not-disrupt pods scheduled with a terminationGracePeriod set for eventual disruption"`,
			in:   one(withTGP(node(dnd(rsPod("p", "1"))))),
			want: blockers("n", "*", ""),
		},
		{
			name: "with a terminationGracePeriod a blocking PDB does not block eventual disruption",
			from: file + ` "should consider candidates that have PDB-blocked pods scheduled with a terminationGracePeriod set for eventual disruption"`,
			in:   withPDBs(withTGP(node(labelled(rsPod("p", "1")))), "test"),
			want: blockers("n", "*", ""),
		},
		{
			name: "with a terminationGracePeriod a do-not-disrupt pod still blocks graceful disruption",
			from: file + ` "should not consider candidates that have do-not-disrupt pods scheduled with a terminationGracePeriod set for graceful disruption"`,
			in:   one(withTGP(node(dnd(rsPod("p", "1"))))),
			want: blockers("n", "do-not-disrupt", ""),
		},
		{
			name: "with a terminationGracePeriod a blocking PDB still blocks graceful disruption",
			from: file + ` "should not consider candidates that have PDB-blocked pods scheduled with a terminationGracePeriod set for graceful disruption"`,
			in:   withPDBs(withTGP(node(labelled(rsPod("p", "1")))), "test"),
			want: blockers("n", "PodDisruptionBudget=[default/test]", ""),
		},
		{
			name: "without a terminationGracePeriod a do-not-disrupt pod blocks eventual disruption",
			from: file + ` "should not consider candidates that have do-not-disrupt pods scheduled without a terminationGracePeriod set for eventual disruption"`,
			in:   one(node(dnd(rsPod("p", "1")))),
			want: blockers("n", "*", "do-not-disrupt"),
		},
		{
			name: "without a terminationGracePeriod a blocking PDB blocks eventual disruption",
			from: file + ` "should not consider candidates that have PDB-blocked pods scheduled without a terminationGracePeriod set for eventual disruption"`,
			in:   withPDBs(node(labelled(rsPod("p", "1"))), "test"),
			want: blockers("n", "*", "PodDisruptionBudget=[default/test]"),
		},
		{
			name: "a terminating do-not-disrupt pod does not block",
			from: file + ` "should consider candidates that have do-not-disrupt terminating pods"`,
			in:   one(node(podDeleting(dnd(rsPod("p", "1"))))),
			want: blockers("n", "", ""),
		},
		{
			name: "terminal do-not-disrupt pods do not block",
			from: file + ` "should consider candidates that have do-not-disrupt terminal pods"`,
			in:   one(node(podPhase(dnd(rsPod("ok", "1")), corev1.PodSucceeded), podPhase(dnd(rsPod("ko", "1")), corev1.PodFailed))),
			want: blockers("n", "", ""),
		},
		{
			name: "do-not-disrupt=true on the node blocks both",
			from: file + ` "should not consider candidates that have do-not-disrupt on nodes"`,
			in:   one(nodeAnnotated(node(), karpv1.AnnotationDoNotDisrupt, "true")),
			want: blockers("n", "do-not-disrupt", "do-not-disrupt"),
		},
		{
			name: "a pod selected by two PDBs blocks",
			from: file + ` "should not consider candidates that have multiple PDBs on the same pod"`,
			in:   withPDBs(node(labelled(rsPod("p", "1"))), "pdb1", "pdb2"),
			want: blockers("n", "multiple PDBs", "multiple PDBs"),
		},
		{
			name: "a fully blocking PDB blocks",
			from: file + ` "should not consider candidates that have fully blocking PDBs"`,
			in:   withPDBs(node(labelled(rsPod("p", "1"))), "test"),
			want: blockers("n", "PodDisruptionBudget=[default/test]", "PodDisruptionBudget=[default/test]"),
		},
		{
			name: "a fully blocking PDB on a DaemonSet pod blocks",
			from: file + ` "should not consider candidates that have fully blocking PDBs on daemonset pods"`,
			in:   withPDBs(node(labelled(daemonPod("ds-n"))), "test"),
			want: blockers("n", "PodDisruptionBudget=[default/test]", "PodDisruptionBudget=[default/test]"),
		},
		{
			name: "an empty node whose DaemonSet pod is do-not-disrupt is kept",
			from: file + ` "should not consider candidates that have do-not-disrupt daemonset pods scheduled", with pkg/controllers/disruption/emptiness_test.go "will consider a node with a DaemonSet pod as empty"`,
			in:   one(node(dnd(daemonPod("ds-n")))),
			want: decidesNothing(),
		},
		{
			name: "an empty node whose DaemonSet pod is held by a fully blocking PDB is kept",
			from: file + ` "should not consider candidates that have fully blocking PDBs on daemonset pods", with pkg/controllers/disruption/emptiness_test.go "will consider a node with a DaemonSet pod as empty"`,
			in:   withPDBs(node(labelled(daemonPod("ds-n"))), "test"),
			want: decidesNothing(),
		},
		{
			name: "a fully blocking PDB on a mirror pod does not block",
			from: file + ` "should consider candidates that have fully blocking PDBs on mirror pods"`,
			in:   withPDBs(node(labelled(mirrorPod("static", "n"))), "test"),
			want: blockers("n", "", ""),
		},
		{
			name: "without a terminationGracePeriod a do-not-disrupt pod keeps the node from consolidation",
			from: file + ` "should not consider candidates that have do-not-disrupt pods without a terminationGracePeriod set for graceful disruption"`,
			in:   one(testNode("n", "default", od, 32, dnd(rsPod("p", "1")))),
			want: allOf(decidesNothing(), skipsWith("n", "do-not-disrupt")),
		},
		{
			name: "without a terminationGracePeriod a fully blocking PDB keeps the node from consolidation",
			from: file + ` "should not consider candidates that have fully blocking PDBs without a terminationGracePeriod set for graceful disruption"`,
			in:   withPDBs(testNode("n", "default", od, 32, labelled(rsPod("p", "1"))), "test"),
			want: allOf(decidesNothing(), skipsWith("n", "PodDisruptionBudget=[default/test]")),
		},
		{
			name: "a fully blocking PDB on terminal pods does not block",
			from: file + ` "should consider candidates that have fully blocking PDBs on terminal pods"`,
			in: withPDBs(node(podPhase(labelled(rsPod("ok", "1")), corev1.PodSucceeded), podPhase(labelled(rsPod("ko", "1")), corev1.PodFailed)),
				"test"),
			want: blockers("n", "", ""),
		},
		{
			name: "a fully blocking PDB on a terminating pod does not block",
			from: file + ` "should consider candidates that have fully blocking PDBs on terminating pods"`,
			in:   withPDBs(node(podDeleting(labelled(rsPod("p", "1")))), "test"),
			want: blockers("n", "", ""),
		},
		{
			name: "a node without a NodeClaim is never a candidate",
			from: file + ` "should not consider candidates that has just a Node representation"`,
			in:   func() *Input { return kIn(kPools(kPool("default")), unmanagedNode("n", 32, rsPod("p", "1"))) },
			want: allOf(notInStatus("n"), decidesNothing()),
		},
		{
			name: "a node nominated for a pending pod is not a candidate",
			from: file + ` "should not consider candidates that are nominated"`,
			in: func() *Input {
				n := node(rsPod("p", "1"))
				n.Nominated = true
				return kIn(kPools(kPool("default")), n)
			},
			want: allOf(blockers("n", "nominated", "nominated"), decidesNothing()),
		},
		{
			name: "a node whose NodeClaim is being deleted is not a candidate",
			from: file + ` "should not consider candidates that are deleting"`,
			in: func() *Input {
				n := beingDeleted(node(rsPod("p", "1")))
				n.NodeClaim.DeletionTimestamp = &metav1.Time{Time: kNow}
				return kIn(kPools(kPool("default")), n)
			},
			want: allOf(notInStatus("n"), decidesNothing()),
		},
		{
			name: "a node marked for deletion is not a candidate",
			from: file + ` "should not consider candidates that are MarkedForDeletion"`,
			in:   one(beingDeleted(driftedNode(node(rsPod("p", "1"))))),
			want: allOf(notInStatus("n"), decidesNothing()),
		},
		{
			name: "a node that is not initialized is not a candidate",
			from: file + ` "should not consider candidates that aren't yet initialized"`,
			in:   one(uninitializedNode(driftedNode(node(rsPod("p", "1"))))),
			want: allOf(blockers("n", "isn't initialized", "isn't initialized"), decidesNothing()),
		},
		{
			name: "a node without the nodepool label is not a candidate",
			from: file + ` "should not consider candidates that are not owned by a NodePool (no karpenter.sh/nodepool label)"`,
			in:   one(withoutNodeLabel(driftedNode(node(rsPod("p", "1"))), karpv1.LabelNodePool)),
			want: allOf(blockers("n", "*", "*"), decidesNothing()),
		},
		{
			name: "a node of a NodePool that does not exist is not a candidate",
			from: file + ` "should not consider candidates that are have a non-existent NodePool"`,
			in:   one(testNode("n", "gone", od, 32, rsPod("p", "1"))),
			want: allOf(blockers("n", "*", "*"), decidesNothing()),
		},
		{
			name: "a node without the capacity-type label is still a candidate",
			from: file + ` "should consider candidates that do not have the karpenter.sh/capacity-type label"`,
			in:   one(withoutNodeLabel(node(rsPod("p", "1")), karpv1.LabelCapacityType)),
			want: blockers("n", "", ""),
		},
		{
			name: "a node without the zone label is still a candidate",
			from: file + ` "should consider candidates that do not have the topology.kubernetes.io/zone label"`,
			in:   one(withoutNodeLabel(node(rsPod("p", "1")), karpv1.LabelZone)),
			want: blockers("n", "", ""),
		},
		{
			name: "a node without the instance-type label is still a candidate",
			from: file + ` "should consider candidates that do not have the node.kubernetes.io/instance-type label"`,
			in:   one(withoutNodeLabel(node(rsPod("p", "1")), karpv1.LabelInstanceType)),
			want: blockers("n", "", ""),
		},
		{
			name: "a node whose instance type cannot be resolved is still a candidate",
			from: file + ` "should consider candidates that have an instance type that cannot be resolved"`,
			in:   one(ofType(node(rsPod("p", "1")), "t-unknown", 0.2)),
			want: blockers("n", "", ""),
		},
	})
}

// TestKarpenterBudgetMapping ports the "BuildDisruptionBudgetMapping"
// context of Karpenter v1.14.1's pkg/controllers/disruption/suite_test.go:
// which nodes a pool's budget counts and which use it up.
func TestKarpenterBudgetMapping(t *testing.T) {
	const file = "pkg/controllers/disruption/suite_test.go BuildDisruptionBudgetMapping"
	ten := func(budget string, extra ...*Node) *Input {
		nodes := kNodes("n", 10, func(n string, _ int) *Node { return testNode(n, "default", od, 32) })
		return kIn(kPools(kPool("default", withNodesBudget(budget))), append(nodes, extra...)...)
	}
	runKarpenterCases(t, []karpCase{
		{
			name: "nodes Joiner does not manage are not counted",
			from: file + ` "should not consider nodes that are not managed as part of disruption count"`,
			in:   func() *Input { return ten("100%", unmanagedNode("foreign", 32)) },
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "nodes not initialized are not counted",
			from: file + ` "should not consider nodes that are not initialized as part of disruption count"`,
			in:   func() *Input { return ten("100%", uninitializedNode(testNode("fresh", "default", od, 32))) },
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "nodes whose instance is terminating are not counted",
			from: file + ` "should not consider nodes that have the terminating status condition as part of disruption count"`,
			in: func() *Input {
				n := testNode("ending", "default", od, 32)
				n.NodeClaim.Status.Conditions = append(n.NodeClaim.Status.Conditions, metav1.Condition{
					Type: karpv1.ConditionInstanceTerminating, Status: metav1.ConditionTrue, Reason: "InstanceTerminating", LastTransitionTime: metav1.NewTime(kNow),
				})
				return ten("100%", n)
			},
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "the allowance never goes below zero",
			from: file + ` "should not return a negative disruption value"`,
			in: func() *Input {
				in := ten("10%")
				for _, n := range in.Nodes {
					beingDeleted(n)
				}
				return in
			},
			want: allowedForAllReasons("default", 0),
		},
		{
			name: "nodes being deleted use up the budget",
			from: file + ` "should consider nodes with a deletion timestamp set and MarkedForDeletion to the disruption count"`,
			in: func() *Input {
				in := ten("100%")
				beingDeleted(in.Nodes[0]).NodeClaim.DeletionTimestamp = &metav1.Time{Time: kNow}
				beingDeleted(in.Nodes[1])
				return in
			},
			want: allowedForAllReasons("default", 8),
		},
		{
			name: "NotReady nodes use up the budget",
			from: file + ` "should consider not ready nodes to the disruption count"`,
			in: func() *Input {
				in := ten("100%")
				in.Nodes[0].Ready, in.Nodes[1].Ready = false, false
				return in
			},
			want: allowedForAllReasons("default", 8),
		},
	})
}

// TestKarpenterPodEvictionCost ports the "Pod Eviction Cost" context of
// Karpenter v1.14.1's pkg/controllers/disruption/suite_test.go
// (pkg/utils/disruption EvictionCost).
func TestKarpenterPodEvictionCost(t *testing.T) {
	const file = "pkg/controllers/disruption/suite_test.go Pod Eviction Cost"
	withCost := func(c string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{podDeletionCost: c}}}
	}
	withPriority := func(p int32) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Priority: &p}} }
	cost := EvictionCost
	for _, tc := range []struct {
		name, from string
		ok         bool
	}{
		{"no priority nor deletion cost costs 1", `"should have a standard disruptionCost for a pod with no priority or disruptionCost specified"`,
			cost(&corev1.Pod{}) == 1},
		{"a positive deletion cost costs more", `"should have a higher disruptionCost for a pod with a positive deletion disruptionCost"`,
			cost(withCost("100")) > 1},
		{"a negative deletion cost costs less", `"should have a lower disruptionCost for a pod with a positive deletion disruptionCost"`,
			cost(withCost("-100")) < 1},
		{"higher deletion costs cost more", `"should have higher costs for higher deletion costs"`,
			cost(withCost("101")) > cost(withCost("100")) && cost(withCost("100")) > cost(withCost("99"))},
		{"a higher priority costs more", `"should have a higher disruptionCost for a pod with a higher priority"`,
			cost(withPriority(1)) > 1},
		{"a lower priority costs less", `"should have a lower disruptionCost for a pod with a lower priority"`,
			cost(withPriority(-1)) < 1},
		{"the cost is clamped to [-10, 10]", `(pkg/utils/disruption EvictionCost clamps)`,
			cost(withCost("2147483647")) <= 10 && cost(withPriority(math.MinInt32)) >= -10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("Karpenter v1.14.1 %s %s does not hold", file, tc.from)
			}
		})
	}
}

// TestKarpenterConsolidatable ports Karpenter v1.14.1's
// pkg/controllers/nodeclaim/disruption/consolidation_test.go ("Underutilized":
// the Consolidatable condition, utils/disruption IsUnderConsolidateAfter):
// consolidateAfter counts from the NodeClaim's last pod event, else from its
// initialization.
func TestKarpenterConsolidatable(t *testing.T) {
	const file = "pkg/controllers/nodeclaim/disruption/consolidation_test.go Underutilized"
	pool := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool {
		return kPools(kPool("default", append([]func(*karpv1.NodePool){withConsolidateAfter(karpv1.NewDuration(time.Minute))}, opts...)...))
	}
	// n's last pod event was 5 minutes ago, as in Karpenter's BeforeEach.
	n := func() *Node {
		return lastPodEventAt(testNode("n", "default", od, 4, rsPod("p", "1")), kNow.Add(-5*time.Minute))
	}
	runKarpenterCases(t, []karpCase{
		{
			name: "a node is consolidatable consolidateAfter after its last pod event",
			from: file + ` "should mark NodeClaims as consolidatable"`,
			in:   func() *Input { return kIn(pool(), lastPodEventAt(n(), kNow)) },
			want: allOf(consolidatableNow("n", false), afterwards(clockAt(kNow.Add(time.Minute)), consolidatableNow("n", true))),
		},
		{
			name: "without pod events consolidateAfter counts from initialization",
			from: file + ` "should mark NodeClaims as consolidatable based on the nodeclaim initialized time"`,
			in: func() *Input {
				nd := n()
				nd.NodeClaim.Status.LastPodEventTime = metav1.Time{}
				return kIn(pool(), initializedAt(nd, kNow))
			},
			want: allOf(consolidatableNow("n", false), afterwards(clockAt(kNow.Add(time.Minute)), consolidatableNow("n", true))),
		},
		{
			name: "a pod event within consolidateAfter makes the node not consolidatable",
			from: file + ` "should remove the status condition from the nodeClaim when lastPodEvent is too recent"`,
			in:   func() *Input { return kIn(pool(), lastPodEventAt(n(), kNow)) },
			want: allOf(consolidatableNow("n", false), decidesNothing()),
		},
		{
			name: "consolidateAfter Never: never consolidatable",
			from: file + ` "should remove the status condition from the nodeClaim when consolidateAfter is never"`,
			in:   func() *Input { return kIn(pool(withConsolidateAfter(karpv1.NeverDuration())), n()) },
			want: allOf(consolidatableNow("n", false), decidesNothing()),
		},
		{
			name: "a node not initialized is not consolidatable",
			from: file + ` "should remove the status condition from the nodeClaim when the nodeClaim is not initialized"`,
			in:   func() *Input { return kIn(pool(), uninitializedNode(n())) },
			want: allOf(consolidatableNow("n", false), decidesNothing()),
		},
		{
			name: "a node Joiner does not manage has no consolidatable status",
			from: file + ` "should ignore NodeClaims not managed by this instance of Karpenter"`,
			in:   func() *Input { return kIn(pool(), unmanagedNode("n", 4, rsPod("p", "1"))) },
			want: notInStatus("n"),
		},
	})
}
