package disruption

import (
	"fmt"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestKarpenterValidation ports the cases of Karpenter v1.14.1's
// consolidation and emptiness suites that change the cluster while a
// command waits out its validation delay (validation_test.go's test
// validators: blockingBudget, churn, nominated) and the TTL-wait cases
// revalidate_test.go does not already cover. Each is decided on the input
// as given, the change is made, and Revalidate judges the decision 15 s
// later, as the controller does.
func TestKarpenterValidation(t *testing.T) {
	const file = "pkg/controllers/disruption/consolidation_test.go"
	pool := func(opts ...func(*karpv1.NodePool)) []*karpv1.NodePool { return kPools(kPool("default", opts...)) }
	// The three clusters of the Metrics tables: one empty node, one node
	// a cheaper one can replace, two nodes one cheaper node can replace.
	empty := func() *Input { return kIn(pool(), testNode("n", "default", od, 32)) }
	single := func() *Input { return kIn(pool(), testNode("n", "default", od, 8, rsPod("p", "1"))) }
	multi := func() *Input {
		return kIn(pool(), testNode("x", "default", od, 8, rsPod("p-x", "1")), testNode("y", "default", od, 8, rsPod("p-y", "1")))
	}
	// Karpenter's validator changes: the pool's budget goes to 0%; a pod
	// lands on the first node and it is nominated; every node is
	// nominated.
	blockingBudget := func(in *Input) { in.NodePools[0].Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0%"}} }
	churn := func(in *Input) {
		addPod(in.Nodes[0], rsPod("churn", "100m"))
		in.Nodes[0].Nominated = true
	}
	nominated := func(in *Input) {
		for _, n := range in.Nodes {
			n.Nominated = true
		}
	}
	const invalidated = file + ` Consolidation/Metrics "should correctly report invalidated commands for %s disruption" (%s)`
	from := func(kind, entry string) string { return fmt.Sprintf(invalidated, kind, entry) }

	runKarpenterCases(t, []karpCase{
		{
			name: "emptiness: a budget closing during the wait turns the command down",
			from: from("emptiness", "when a candidate is blocked by budgets"),
			in:   empty,
			want: validated(MethodEmptiness, blockingBudget, RejectedBudget, 1),
		},
		{
			name: "emptiness: a pod arriving during the wait turns the command down",
			from: from("emptiness", "when candidates are filtered out due to pod churn"),
			in:   empty,
			want: validated(MethodEmptiness, churn, RejectedChurn, 1),
		},
		{
			name: "emptiness: a nomination during the wait turns the command down",
			from: from("emptiness", "when candidates are filtered out due to candidate being nominated"),
			in:   empty,
			want: validated(MethodEmptiness, nominated, RejectedChurn, 1),
		},
		{
			name: "multi-node: a budget closing during the wait turns the command down, both candidates counted",
			from: from("multi node", "when candidates are blocked by budgets"),
			in:   multi,
			want: validated(MethodMultiNode, blockingBudget, RejectedBudget, 2),
		},
		{
			name: "multi-node: pod churn on one candidate turns the command down, both candidates counted",
			from: from("multi node", "when candidates are filtered out due to pod churn"),
			in:   multi,
			want: validated(MethodMultiNode, churn, RejectedChurn, 2),
		},
		{
			name: "multi-node: a nomination during the wait turns the command down, both candidates counted",
			from: from("multi node", "when candidates are filtered out due to candidate being nominated"),
			in:   multi,
			want: validated(MethodMultiNode, nominated, RejectedChurn, 2),
		},
		{
			name: "single-node: a budget closing during the wait turns the command down",
			from: from("single node", "when a candidate is blocked by budgets"),
			in:   single,
			want: validated(MethodSingleNode, blockingBudget, RejectedBudget, 1),
		},
		{
			name: "single-node: pod churn during the wait turns the command down",
			from: from("single node", "when candidates are filtered out due to pod churn"),
			in:   single,
			want: validated(MethodSingleNode, churn, RejectedChurn, 1),
		},
		{
			name: "single-node: a nomination during the wait turns the command down",
			from: from("single node", "when candidates are filtered out due to candidate being nominated"),
			in:   single,
			want: validated(MethodSingleNode, nominated, RejectedChurn, 1),
		},
		{
			name: "emptiness: the node that got a pod drops out, the other is still deleted",
			from: file + ` Consolidation/Delete "does not delete nodes with pod churn, deletes nodes without pod churn"`,
			in:   func() *Input { return kIn(pool(), testNode("a", "default", od, 32), testNode("b", "default", od, 32)) },
			want: validated(MethodEmptiness, churn, "", 0, "b"),
		},
		{
			name: "a deletion whose candidate gets a fully PDB-blocked pod during the wait is turned down",
			from: file + ` Consolidation/TTL "should not delete node if pods schedule with a blocking PDB during the TTL wait"`,
			in: func() *Input {
				return kIn(pool(), testNode("a", "default", od, 1, rsPod("a-0", "250m")), testNode("b", "default", od, 1, rsPod("b-0", "250m")))
			},
			want: validated(MethodSingleNode, func(in *Input) {
				for _, n := range in.Nodes {
					addPod(n, podLabelled(rsPod("guarded-"+n.Name(), "100m"), "app", "test"))
				}
				in.PDBs = append(in.PDBs, maxUnavailableZeroPDB("test", "test"))
			}, RejectedChurn, 1),
		},
		{
			name: "a merge turned down after the wait lets single-node consolidation go on: on-demand",
			from: file + ` Consolidation/Multi-NodeClaim "should continue to single nodeclaim consolidation when multi-nodeclaim consolidation fails validation after the node ttl" (if the candidate is on-demand node)`,
			in: func() *Input {
				return kIn(pool(), testNode("a", "default", od, 4, rsPod("p-a", "1")), testNode("b", "default", od, 4, rsPod("p-b", "1")),
					testNode("c", "default", od, 4, rsPod("p-c", "1")))
			},
			want: goesOnAfter(MethodMultiNode, moreOnAAndB, allOf(decides(MethodSingleNode, "c"), replacing(0))),
		},
		{
			name: "a merge turned down after the wait lets single-node consolidation go on: spot",
			from: file + ` Consolidation/Multi-NodeClaim "should continue to single nodeclaim consolidation when multi-nodeclaim consolidation fails validation after the node ttl" (if the candidate is spot node)`,
			in: func() *Input {
				in := kIn(pool(withCapacityTypes(spot)), testNode("a", "default", spot, 4, rsPod("p-a", "1")), testNode("b", "default", spot, 4, rsPod("p-b", "1")),
					testNode("c", "default", spot, 4, rsPod("p-c", "1")))
				in.FeatureGates.SpotToSpotConsolidation = true
				return in
			},
			want: goesOnAfter(MethodMultiNode, moreOnAAndB, allOf(decides(MethodSingleNode, "c"), replacing(0))),
		},
		{
			name: "an empty node still empty after the wait is deleted",
			from: `pkg/controllers/disruption/emptiness_test.go Emptiness "should wait for the node TTL for empty nodes before consolidating"`,
			in:   empty,
			want: validated(MethodEmptiness, func(*Input) {}, "", 0, "n"),
		},
	})
}

// validated: Decide's decision on in is method m; after during changes the
// cluster and the validation delay passes, Revalidate turns it down for
// reason with failed candidates counted, or (reason "") lets it stand with
// exactly keep.
func validated(m Method, during func(in *Input), reason string, failed int, keep ...string) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		got, rej := revalidateAfter(t, in, m, during)
		if rej.Reason != reason || rej.Failed != failed {
			t.Errorf("rejection %+v, want reason %q with %d failed", rej, reason, failed)
		}
		switch {
		case reason != "" && got != nil:
			t.Errorf("decision of %v stands, want it turned down", names(got.Candidates))
		case reason == "" && (got == nil || !sameSet(names(got.Candidates), keep)):
			t.Errorf("got %v, want the decision to stand with %v", got, keep)
		}
	}
}

// moreOnAAndB binds a 1-vCPU pod to nodes a and b (the first two).
func moreOnAAndB(in *Input) {
	addPod(in.Nodes[0], rsPod("more-a", "1"))
	addPod(in.Nodes[1], rsPod("more-b", "1"))
}

// goesOnAfter: Decide's decision on in is method m; after during changes
// the cluster, Revalidate turns it down, and the same pass, going on with
// the methods after m (Input.After), decides as then wants.
func goesOnAfter(m Method, during func(in *Input), then karpCheck) karpCheck {
	return func(t *testing.T, in *Input) {
		t.Helper()
		got, rej := revalidateAfter(t, in, m, during)
		if got != nil {
			t.Fatalf("decision of %v stands (%+v), want it turned down", names(got.Candidates), rej)
		}
		in.After = m
		then(t, in)
	}
}

// revalidateAfter has Decide make a method m decision on in (fatal if it
// makes none or another), lets during change the cluster and the
// validation delay pass, and returns what Revalidate says of it.
func revalidateAfter(t *testing.T, in *Input, m Method, during func(in *Input)) (*Decision, Rejection) {
	t.Helper()
	r := kDecide(t, in)
	if r.Decision == nil || r.Decision.Method != m {
		t.Fatalf("got %s, want a %s decision to validate", describeResult(r), m)
	}
	during(in)
	in.Now = in.Now.Add(15 * time.Second)
	got, rej, err := Revalidate(in, r.Decision)
	if err != nil {
		t.Fatalf("Revalidate: %v", err)
	}
	return got, rej
}
