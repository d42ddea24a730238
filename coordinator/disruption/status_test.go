package disruption

import (
	"strings"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func TestStatusAndEligibility(t *testing.T) {
	pool := testPool("od", od)
	pool.Spec.Disruption.ConsolidateAfter = karpv1.NewDuration(10 * time.Minute)
	pool.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(time.Hour)
	emptyOnly := testPool("empty-only", od)
	emptyOnly.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	idle := testNode("idle", "od", od, 2)
	busy := testNode("busy", "od", od, 4, testPod("web", "1"))
	busy.NodeClaim.Annotations[karpv1.AnnotationNodePoolHash] = "old"
	blocked := testNode("blocked", "od", od, 2)
	blocked.Blocked = "cooling down"
	lazy := testNode("lazy", "empty-only", od, 2, testPod("api", "1"))
	gone := testNode("gone", "od", od, 2)
	gone.MarkedForDeletion = true
	in := testInput(t0.Add(5*time.Minute), []*karpv1.NodePool{pool, emptyOnly}, idle, busy, blocked, lazy, gone)
	in.NodePoolHashes = map[string]string{"od": "new"}
	in.PDBs = append(in.PDBs, testPDB("web", 0, "web"))

	st := Status(in)
	if len(st) != 4 {
		t.Fatalf("%d statuses, want 4 (marked nodes left out)", len(st))
	}
	byName := map[string]NodeStatus{}
	for _, s := range st {
		byName[s.Node.Name()] = s
	}
	if s := byName["idle"]; !s.Empty || s.Consolidatable || s.Eligible(MethodEmptiness) || s.ConsolidatableAt != t0.Add(10*time.Minute) {
		t.Fatalf("idle before consolidateAfter: %+v", s)
	}
	if s := byName["busy"]; !strings.Contains(s.Drifted, "nodepool od changed") || !strings.Contains(s.Blocker, "PodDisruptionBudget=[default/web]") || s.Eligible(MethodDrift) {
		t.Fatalf("busy: %+v", s)
	}
	in.Now = t0.Add(11 * time.Minute)
	byName = map[string]NodeStatus{}
	for _, s := range Status(in) {
		byName[s.Node.Name()] = s
	}
	// An empty node is emptiness's, not consolidation's (Karpenter v1.14.1).
	if s := byName["idle"]; !s.Consolidatable || !s.Eligible(MethodEmptiness) || s.Eligible(MethodConsolidation) {
		t.Fatalf("idle after consolidateAfter: %+v", s)
	}
	if s := byName["blocked"]; s.Blocker != "cooling down" || s.Eligible(MethodEmptiness) {
		t.Fatalf("blocked: %+v", s)
	}
	if s := byName["lazy"]; s.Underutilized || s.Eligible(MethodConsolidation) {
		t.Fatalf("WhenEmpty pool node eligible for consolidation: %+v", s)
	}
	in.Now = t0.Add(2 * time.Hour)
	if s := Status(in)[0]; !s.Expired || !s.Eligible(MethodExpiration) {
		t.Fatalf("expired: %+v", s)
	}
	// Blocked keeps graceful methods off but not expiration.
	res, err := Decide(in)
	if err != nil || res.Decision == nil || res.Decision.Method != MethodExpiration {
		t.Fatalf("decide = %+v, %v", res, err)
	}
	in.Now = t0.Add(11 * time.Minute)
	res, err = Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range res.Decision.Candidates {
		if n.Name() == "blocked" {
			t.Fatalf("blocked node taken by %s", res.Decision.Method)
		}
	}
	if got := skipsOf(res, "blocked"); len(got) == 0 || !strings.Contains(got[0], "Cooling down") {
		t.Fatalf("blocked skips = %q", got)
	}
}

func TestAllowedByPool(t *testing.T) {
	pool := testPool("od", od)
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "50%"}}
	a, b, c := testNode("a", "od", od, 2), testNode("b", "od", od, 2), testNode("c", "od", od, 2)
	c.MarkedForDeletion = true
	got, err := AllowedByPool(testInput(t0, []*karpv1.NodePool{pool}, a, b, c), karpv1.DisruptionReasonEmpty)
	if err != nil || got["od"] != 1 {
		t.Fatalf("allowed = %v, %v; want 2 (50%% of 3, rounded up) - 1 disrupting = 1", got, err)
	}
}
