package disruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestRevalidate ports the cases of Karpenter v1.14.1's consolidation
// "TTL" context (pkg/controllers/disruption/consolidation_test.go) and its
// validation rules (validation.go) to the pure core: a decision is made,
// the cluster changes during the wait (during), and Revalidate judges the
// decision against the cluster as it is then.
func TestRevalidate(t *testing.T) {
	now := t0.Add(time.Hour)
	pool := func() *karpv1.NodePool { return testPool("default", od) }
	type cluster struct {
		pools []*karpv1.NodePool
		nodes []*Node
		in    *Input
	}
	// Cluster builders: each call builds fresh objects.
	emptyPair := func() *cluster {
		c := &cluster{pools: []*karpv1.NodePool{pool()}}
		c.nodes = []*Node{testNode("e1", "default", od, 2), testNode("e2", "default", od, 2)}
		return c
	}
	oneBig := func() *cluster {
		c := &cluster{pools: []*karpv1.NodePool{pool()}}
		c.nodes = []*Node{testNode("big", "default", od, 8, testPod("web", "1"))}
		return c
	}
	oneSmall := func() *cluster { // its pod fits on keep: a deletion
		c := &cluster{pools: []*karpv1.NodePool{pool()}}
		keep := testNode("keep", "default", od, 8, testPod("k", "1"))
		keep.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
		c.nodes = []*Node{keep, testNode("small", "default", od, 2, testPod("s", "1"))}
		return c
	}
	threeSmall := func() *cluster { // multi-node: three replaced by one
		c := &cluster{pools: []*karpv1.NodePool{pool()}}
		c.nodes = []*Node{testNode("a", "default", od, 4, testPod("pa", "1")), testNode("b", "default", od, 4, testPod("pb", "1")),
			testNode("c", "default", od, 4, testPod("pc", "1"))}
		return c
	}
	node := func(c *cluster, name string) *Node {
		for _, n := range c.nodes {
			if n.Name() == name {
				return n
			}
		}
		t.Fatalf("no node %s", name)
		return nil
	}
	for _, tc := range []struct {
		name, from string
		build      func() *cluster
		method     Method
		during     func(c *cluster)
		// want: the candidates of the decision that stands (nil: turned
		// down with reason).
		want   []string
		reason string
		failed int
		// detail is a part of the rejection's detail, when set.
		detail string
	}{
		{
			name: "an unchanged emptiness decision stands", build: emptyPair, method: MethodEmptiness,
			during: func(*cluster) {}, want: []string{"e1", "e2"},
		},
		{
			name: "an empty node that gets a pod drops out; the other is still deleted", build: emptyPair, method: MethodEmptiness,
			during: func(c *cluster) { addPod(node(c, "e1"), testPod("late", "100m")) }, want: []string{"e2"},
		},
		{
			name:  "emptiness with no candidate left fails as churn, every candidate counted",
			from:  `"should not consolidate if the action becomes invalid during the node TTL wait"`,
			build: emptyPair, method: MethodEmptiness,
			during: func(c *cluster) {
				addPod(node(c, "e1"), testPod("late1", "100m"))
				addPod(node(c, "e2"), testPod("late2", "100m"))
			},
			reason: RejectedChurn, failed: 2,
		},
		{
			name: "emptiness keeps what the budget allows; the rest count as failed", build: emptyPair, method: MethodEmptiness,
			during: func(c *cluster) { c.pools[0].Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}} },
			want:   []string{"e1"}, failed: 1,
		},
		{
			name: "emptiness with no budget left fails for its budget", build: emptyPair, method: MethodEmptiness,
			during: func(c *cluster) { c.pools[0].Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}} },
			reason: RejectedBudget, failed: 2,
		},
		{
			name: "an unchanged replacement stands", build: oneBig, method: MethodSingleNode,
			during: func(*cluster) {}, want: []string{"big"},
		},
		{
			name:  "a do-not-disrupt pod on the candidate of a replacement: churn",
			from:  `"should not replace node if a pod schedules with karpenter.sh/do-not-disrupt set to true during the TTL wait"`,
			build: oneBig, method: MethodSingleNode,
			during: func(c *cluster) { addPod(node(c, "big"), withDoNotDisrupt(testPod("pinned", "100m"), "true")) },
			reason: RejectedChurn, failed: 1,
		},
		{
			name:  "a pod behind a blocking PDB on the candidate of a replacement: churn",
			from:  `"should not replace node if a pod schedules with a blocking PDB during the TTL wait"`,
			build: oneBig, method: MethodSingleNode,
			during: func(c *cluster) {
				addPod(node(c, "big"), testPod("guarded", "100m"))
				c.in.PDBs = append(c.in.PDBs, testPDB("guard", 0, "guarded"))
			},
			reason: RejectedChurn, failed: 1,
		},
		{
			name:  "pods that need a dearer replacement: scheduling, nothing counted",
			from:  `"should not consolidate if the action picks different instance types after the node TTL wait"`,
			build: oneBig, method: MethodSingleNode,
			during: func(c *cluster) { addPod(node(c, "big"), testPod("more", "1500m")) },
			reason: RejectedScheduling, detail: "no longer allowed; it carried 1 pod(s) ({cpu: 1",
		},
		{
			name: "a deletion whose pods now need a new node: scheduling", build: oneSmall, method: MethodSingleNode,
			during: func(c *cluster) { addPod(node(c, "keep"), testPod("filler", "6500m")) },
			reason: RejectedScheduling,
		},
		{
			name: "a replacement that could now be a deletion: scheduling (decided afresh)", build: oneBig, method: MethodSingleNode,
			during: func(c *cluster) {
				roomy := testNode("roomy", "default", od, 8, testPod("r", "1"))
				roomy.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
				c.in.Nodes = append(c.in.Nodes, roomy)
			},
			reason: RejectedScheduling,
		},
		{
			name: "the pool's budget drops to 0: budget, every candidate counted", build: threeSmall, method: MethodMultiNode,
			during: func(c *cluster) { c.pools[0].Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}} },
			reason: RejectedBudget, failed: 3,
		},
		{
			name:  "a do-not-disrupt pod on one of a multi-node move's candidates: churn, every candidate counted",
			from:  `"should not delete node if pods schedule with karpenter.sh/do-not-disrupt set to true during the TTL wait"`,
			build: threeSmall, method: MethodMultiNode,
			during: func(c *cluster) { addPod(node(c, "b"), withDoNotDisrupt(testPod("pinned", "100m"), "true")) },
			reason: RejectedChurn, failed: 3, detail: `node b is no longer a consolidation candidate: pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/pinned)`,
		},
		{
			name: "a candidate nominated for a pending pod: churn", build: threeSmall, method: MethodMultiNode,
			during: func(c *cluster) { node(c, "a").Nominated = true },
			reason: RejectedChurn, failed: 3, detail: "node a is no longer a consolidation candidate: node is nominated for a pending pod",
		},
		{
			name: "a candidate gone: churn", build: threeSmall, method: MethodMultiNode,
			during: func(c *cluster) { c.in.Nodes = c.in.Nodes[1:] },
			reason: RejectedChurn, failed: 3, detail: "node a is no longer a consolidation candidate: it is gone",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.build()
			dec := wantMethod(t, decide(t, testInput(now, before.pools, before.nodes...)), tc.method)
			c := tc.build()
			c.in = testInput(now.Add(15*time.Second), c.pools, c.nodes...)
			tc.during(c)
			got, rej, err := Revalidate(c.in, dec)
			if err != nil {
				t.Fatal(err)
			}
			if (rej.Detail != "") != (tc.reason != "") {
				t.Errorf("detail %q with reason %q", rej.Detail, rej.Reason)
			}
			if !strings.Contains(rej.Detail, tc.detail) {
				t.Errorf("detail %q, want it to say %q", rej.Detail, tc.detail)
			}
			if rej.Reason != tc.reason || rej.Failed != tc.failed {
				t.Errorf("rejection %+v, want reason %q, %d failed", rej, tc.reason, tc.failed)
			}
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("decision %s of %v stands, want it turned down", got.Method, names(got.Candidates))
			case tc.want != nil && got == nil:
				t.Fatalf("turned down (%+v), want %v", rej, tc.want)
			case got == nil:
				return
			}
			if got.Method != tc.method || !slices.Equal(names(got.Candidates), tc.want) {
				t.Fatalf("decision %s of %v, want %s of %v", got.Method, names(got.Candidates), tc.method, tc.want)
			}
			// The decision stands as the cluster is now: its candidates
			// are the new pass's nodes.
			for _, n := range got.Candidates {
				if !slices.Contains(c.in.Nodes, n) {
					t.Errorf("candidate %s is the old pass's node", n.Name())
				}
			}
			if len(got.Replacements) != len(dec.Replacements) {
				t.Errorf("%d replacements, want %d", len(got.Replacements), len(dec.Replacements))
			}
		})
	}
}

// Drift and expiration are not validated: Revalidate returns them as
// they are.
func TestRevalidateLeavesOtherMethods(t *testing.T) {
	dec := &Decision{Method: MethodDrift}
	got, rej, err := Revalidate(&Input{}, dec)
	if err != nil || got != dec || rej != (Rejection{}) {
		t.Fatalf("Revalidate(drift) = %v, %+v, %v; want the decision unchanged", got, rej, err)
	}
}

func wantMethod(t *testing.T, r *Result, m Method) *Decision {
	t.Helper()
	if r.Decision == nil || r.Decision.Method != m {
		t.Fatalf("decision %+v, want %s; skipped %+v", r.Decision, m, r.Skipped)
	}
	return r.Decision
}

// addPod binds p to n.
func addPod(n *Node, p *corev1.Pod) {
	p.Spec.NodeName = n.Name()
	n.Node.Pods = append(n.Node.Pods, p)
}

// While the pods of an earlier command are still moving (Input.Settling),
// multi- and single-node consolidation wait; emptiness does not.
func TestSettlingHoldsConsolidation(t *testing.T) {
	now := t0.Add(time.Hour)
	pool := testPool("default", od)
	for _, tc := range []struct {
		name     string
		nodes    []*Node
		settling string
		want     Method // "" for no decision
	}{
		{name: "multi-node consolidation when settled", want: MethodMultiNode,
			nodes: []*Node{testNode("a", "default", od, 4, testPod("pa", "1")), testNode("b", "default", od, 4, testPod("pb", "1")),
				testNode("c", "default", od, 4, testPod("pc", "1"))}},
		{name: "none while pods move", settling: "pods of node x are still to move",
			nodes: []*Node{testNode("a", "default", od, 4, testPod("pa", "1")), testNode("b", "default", od, 4, testPod("pb", "1")),
				testNode("c", "default", od, 4, testPod("pc", "1"))}},
		{name: "emptiness goes on", settling: "pods of node x are still to move", want: MethodEmptiness,
			nodes: []*Node{testNode("e", "default", od, 2), testNode("a", "default", od, 4, testPod("pa", "1"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := testInput(now, []*karpv1.NodePool{pool}, tc.nodes...)
			in.Settling = tc.settling
			res := decide(t, in)
			var got Method
			if res.Decision != nil {
				got = res.Decision.Method
			}
			if got != tc.want {
				t.Fatalf("decision %q, want %q", got, tc.want)
			}
		})
	}
}

// A pool without a capacity-type requirement may launch spot and
// on-demand: an on-demand node's replacement is pinned to spot (Karpenter
// pins it by the capacity types its NodeClaim carries), so the launch
// cannot fall back to an on-demand type dearer than the node.
func TestReplacementPinnedToSpotWithoutCapacityTypeRequirement(t *testing.T) {
	pool := testPool("default", od)
	pool.Spec.Template.Spec.Requirements = nil
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, testNode("big", "default", od, 8, testPod("web", "1")))
	dec := wantMethod(t, decide(t, in), MethodSingleNode)
	if len(dec.Replacements) != 1 {
		t.Fatalf("decision %s, want one replacement", dec.Message)
	}
	rep := dec.Replacements[0]
	var pinned bool
	for _, r := range rep.Requirements {
		if r.Key == karpv1.LabelCapacityType {
			pinned = slices.Equal(r.Values, []string{karpv1.CapacityTypeSpot}) && r.Operator == corev1.NodeSelectorOpIn
		}
	}
	if !pinned || rep.CapacityType != karpv1.CapacityTypeSpot {
		t.Fatalf("replacement %s %s with requirements %+v, want pinned to spot", rep.CapacityType, rep.InstanceType, rep.Requirements)
	}
}
