package disruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

const od, spot = karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot

func decide(t *testing.T, in *Input) *Result {
	t.Helper()
	r, err := Decide(in)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return r
}

func wantDecision(t *testing.T, r *Result, m Method, nodes ...string) *Decision {
	t.Helper()
	if r.Decision == nil {
		t.Fatalf("no decision, want %s of %v; skipped: %+v", m, nodes, r.Skipped)
	}
	if r.Decision.Method != m || !slices.Equal(names(r.Decision.Candidates), nodes) {
		t.Fatalf("decision %s of %v, want %s of %v", r.Decision.Method, names(r.Decision.Candidates), m, nodes)
	}
	return r.Decision
}

func wantSkip(t *testing.T, r *Result, node, substr string) {
	t.Helper()
	for _, s := range skipsOf(r, node) {
		if strings.Contains(s, substr) {
			return
		}
	}
	t.Fatalf("node %s: no skip containing %q; got %q", node, substr, skipsOf(r, node))
}

// dsPod is a DaemonSet's pod. Its owner reference carries the API version
// as the API server's do: DaemonSet ownership is matched by group,
// version and kind, as Karpenter matches it.
func dsPod(name string) *corev1.Pod {
	p := testPod(name, "100m")
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds"}}
	return p
}

func TestExpirationIsForceful(t *testing.T) {
	pool := testPool("default", od)
	pool.Spec.Template.Spec.ExpireAfter = karpv1.NewDuration(time.Hour)
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	p := testPod("web", "1")
	p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	old := testNode("old", "default", od, 4, p)
	old.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
	young := testNode("young", "default", od, 4, testPod("api", "1"))
	young.NodeClaim.CreationTimestamp = metav1.NewTime(t0.Add(90 * time.Minute))
	in := testInput(t0.Add(2*time.Hour), []*karpv1.NodePool{pool}, old, young)
	in.PDBs = append(in.PDBs, testPDB("web", 0, "web"))
	d := wantDecision(t, decide(t, in), MethodExpiration, "old")
	if d.Reason != "" {
		t.Errorf("expiration has budget reason %q, want none", d.Reason)
	}
	// NodeClaim's own expireAfter wins over the pool's; Never disables.
	old.NodeClaim.Spec.ExpireAfter = karpv1.NeverDuration()
	if r := decide(t, in); r.Decision != nil && r.Decision.Method == MethodExpiration {
		t.Fatalf("expireAfter Never expired %v", names(r.Decision.Candidates))
	}
}

func TestEmptiness(t *testing.T) {
	pool := testPool("default", od)
	pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	pool.Spec.Disruption.ConsolidateAfter = karpv1.NewDuration(10 * time.Minute)
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "2"}}
	now := t0.Add(time.Hour)
	a := testNode("a", "default", od, 2, dsPod("ds-a"))
	b := testNode("b", "default", od, 2)
	c := testNode("c", "default", od, 2)
	recent := testNode("recent", "default", od, 2)
	recent.NodeClaim.Status.LastPodEventTime = metav1.NewTime(now.Add(-5 * time.Minute))
	busy := testNode("busy", "default", od, 8, testPod("x", "1"))
	r := decide(t, testInput(now, []*karpv1.NodePool{pool}, a, b, c, recent, busy))
	d := wantDecision(t, r, MethodEmptiness, "a", "b")
	if d.Reason != karpv1.DisruptionReasonEmpty || d.Savings != 2*2*odPrice {
		t.Errorf("reason %s savings %v", d.Reason, d.Savings)
	}
	wantSkip(t, r, "c", "budget of nodepool default for reason Empty allows no more")
	wantSkip(t, r, "recent", "Not consolidatable until")

	// An Empty-only budget of 0 blocks emptiness, and WhenEmpty keeps the
	// busy node from consolidation.
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}, {Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}}}
	r = decide(t, testInput(now, []*karpv1.NodePool{pool}, a, b, busy))
	if r.Decision != nil {
		t.Fatalf("decision %s of %v despite Empty budget 0 and WhenEmpty", r.Decision.Method, names(r.Decision.Candidates))
	}
	wantSkip(t, r, "busy", "has consolidation policy WhenEmpty, but node is not empty")
}

func TestSingleNodeDelete(t *testing.T) {
	pool := testPool("default", od)
	keep := testNode("keep", "default", od, 4, testPod("k", "1"))
	keep.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
	small := testNode("small", "default", od, 2, testPod("s", "1"))
	r := decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, keep, small))
	d := wantDecision(t, r, MethodSingleNode, "small")
	if len(d.Replacements) != 0 || d.Savings != 2*odPrice {
		t.Errorf("replacements %d savings %v, want delete saving %v", len(d.Replacements), d.Savings, 2*odPrice)
	}
	wantSkip(t, r, "keep", `Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation`)
}

// TestReplacementMinValuesOnOfferingKeys: minValues on capacity type or
// zone count the values of the options' offerings (Karpenter's
// SatisfiesMinValues reads them from the types' requirements), so the
// price filter keeps a replacement whose types offer spot and on-demand;
// under BestEffort a zone minValues the one zone cannot meet is relaxed
// to that zone.
func TestReplacementMinValuesOnOfferingKeys(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    karpv1.NodeSelectorRequirementWithMinValues
		policy scheduler.MinValuesPolicy
	}{
		{"capacity type", karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn,
			Values: []string{od, spot}, MinValues: new(2)}, scheduler.MinValuesStrict},
		{"zone relaxed", karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelZone, Operator: karpv1.OpExists,
			MinValues: new(2)}, scheduler.MinValuesBestEffort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testPool("default", od)
			if tc.req.Key == karpv1.LabelCapacityType {
				pool.Spec.Template.Spec.Requirements[0] = tc.req
			} else {
				pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements, tc.req)
			}
			big := testNode("big", "default", od, 8, testPod("a", "500m"), testPod("b", "500m"))
			in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, big)
			in.MinValuesPolicy = tc.policy
			d := wantDecision(t, decide(t, in), MethodSingleNode, "big")
			if len(d.Replacements) != 1 || d.Savings <= 0 {
				t.Fatalf("replacements %+v savings %v, want one cheaper", d.Replacements, d.Savings)
			}
		})
	}
}

func TestSingleNodeReplaceCheaper(t *testing.T) {
	pool := testPool("default", od)
	big := testNode("big", "default", od, 8, testPod("a", "500m"), testPod("b", "500m"))
	r := decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, big))
	d := wantDecision(t, r, MethodSingleNode, "big")
	if len(d.Replacements) != 1 || d.Replacements[0].InstanceType != "t-1" || d.Savings <= 0 {
		t.Fatalf("replacements %+v savings %v, want one t-1 cheaper", d.Replacements, d.Savings)
	}
	// The replacement may only launch types cheaper than the node it replaces.
	if got := d.Replacements[0].InstanceTypes; !slices.Equal(got, []string{"t-1", "t-2", "t-3", "t-4", "t-5", "t-6", "t-7"}) {
		t.Errorf("replacement instance types %v, want t-1..t-7", got)
	}
	// A node already of the cheapest fitting type stays (its pod needs 5 GiB,
	// the 1-vCPU type has 4; the full node's free memory passes the cheap
	// capacity bound, so the scheduler decides).
	c := testPod("c", "900m")
	c.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("5Gi")
	snug := testNode("snug", "default", od, 2, c)
	full := testNode("full", "default", od, 1, testPod("f", "1"))
	full.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
	r = decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, snug, full))
	if r.Decision != nil {
		t.Fatalf("unexpected decision %+v", r.Decision)
	}
	wantSkip(t, r, "snug", "Can't replace with a cheaper node")
}

// Spot-to-spot consolidation is Karpenter's SpotToSpotConsolidation
// feature gate, off by default: without it a spot node is never replaced
// by spot; with it a single node needs 15 cheaper types.
func TestSpotToSpotNeedsFifteenCheaperTypes(t *testing.T) {
	pool := testPool("default", spot)
	huge := testNode("huge", "default", spot, 32, testPod("a", "1"))
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, huge)
	r := decide(t, in)
	if r.Decision != nil {
		t.Fatalf("spot-to-spot without the gate decided %+v", r.Decision)
	}
	wantSkip(t, r, "huge", "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node")
	in.FeatureGates.SpotToSpotConsolidation = true
	d := wantDecision(t, decide(t, in), MethodSingleNode, "huge")
	if rep := d.Replacements[0]; rep.CapacityType != spot || len(rep.InstanceTypes) != MinSpotToSpotTypes {
		t.Fatalf("replacement %s %v, want spot of the %d cheapest types", rep.CapacityType, rep.InstanceTypes, MinSpotToSpotTypes)
	}

	mid := testNode("mid", "default", spot, 8, testPod("a", "1"))
	in = testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, mid)
	in.FeatureGates.SpotToSpotConsolidation = true
	r = decide(t, in)
	if r.Decision != nil {
		t.Fatalf("spot-to-spot with 7 cheaper types decided %+v", r.Decision)
	}
	wantSkip(t, r, "mid", "requires 15 cheaper instance type options than the current candidate to consolidate, got 7")
}

func TestMultiNodeConsolidation(t *testing.T) {
	pool := testPool("default", od)
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool},
		testNode("a", "default", od, 4, testPod("a", "1")),
		testNode("b", "default", od, 4, testPod("b", "1")),
		testNode("c", "default", od, 4, testPod("c", "1")))
	d := wantDecision(t, decide(t, in), MethodMultiNode, "a", "b", "c")
	if len(d.Replacements) != 1 || d.Replacements[0].Price >= 3*4*odPrice {
		t.Fatalf("replacements %+v, want one cheaper node", d.Replacements)
	}
	// A budget of 2 limits the command to two nodes, whose pods then fit
	// on the third.
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "2"}}
	d = wantDecision(t, decide(t, in), MethodMultiNode, "a", "b")
	if len(d.Replacements) != 0 {
		t.Fatalf("replacements %+v, want none", d.Replacements)
	}
}

func TestCandidateFilters(t *testing.T) {
	pool := testPool("default", od)
	now := t0.Add(time.Hour)
	pdbNode := testNode("pdb", "default", od, 8, testPod("web", "1"))
	dnd := testPod("dnd", "1")
	dnd.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}
	dndNode := testNode("dnd", "default", od, 8, dnd)
	ttl := testPod("ttl", "1")
	ttl.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: "30m"}
	ttl.Status.StartTime = &metav1.Time{Time: now.Add(-10 * time.Minute)}
	ttlNode := testNode("ttl", "default", od, 8, ttl)
	uninit := testNode("uninit", "default", od, 8, testPod("u", "1"))
	uninit.Initialized = false
	marked := testNode("marked", "default", od, 8, testPod("m", "1"))
	marked.MarkedForDeletion = true
	multi := testNode("multi", "default", od, 8, testPod("api", "1"))
	in := testInput(now, []*karpv1.NodePool{pool}, pdbNode, dndNode, ttlNode, uninit, marked, multi)
	in.PDBs = append(in.PDBs, testPDB("web", 0, "web"), testPDB("api-a", 1, "api"), testPDB("api-b", 1, "api"))
	r := decide(t, in)
	if r.Decision != nil {
		t.Fatalf("unexpected decision %s of %v", r.Decision.Method, names(r.Decision.Candidates))
	}
	wantSkip(t, r, "pdb", "Pdb prevents pod evictions (PodDisruptionBudget=[default/web])")
	wantSkip(t, r, "dnd", `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/dnd)`)
	wantSkip(t, r, "ttl", `Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/ttl)`)
	wantSkip(t, r, "uninit", "Node isn't initialized")
	wantSkip(t, r, "marked", "Node is deleting or marked for deletion")
	wantSkip(t, r, "multi", "multiple PDBs")

	// The do-not-disrupt duration elapses; the PDB starts allowing one.
	in.Now = now.Add(time.Hour)
	in.PDBs[0].Status.DisruptionsAllowed = 1
	in.Nodes = []*Node{pdbNode, ttlNode}
	if r := decide(t, in); r.Decision == nil {
		t.Fatalf("no decision once the blockers lifted: %+v", r.Skipped)
	}
}

func TestDrift(t *testing.T) {
	pool := testPool("default", od)
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, {Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized}}}
	older := testNode("older", "default", od, 2, testPod("a", "2"))
	newer := testNode("newer", "default", od, 2, testPod("b", "2"))
	newer.NodeClaim.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	current := testNode("current", "default", od, 2, testPod("c", "2"))
	for _, n := range []*Node{older, newer} {
		n.NodeClaim.Annotations["karpenter.k8s.aws/ec2nodeclass-hash"] = "ami-1"
	}
	current.NodeClaim.Annotations["karpenter.k8s.aws/ec2nodeclass-hash"] = "ami-2"
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, newer, current, older)
	in.NodeClassHashes = map[string]string{"default": "ami-2"}
	d := wantDecision(t, decide(t, in), MethodDrift, "older")
	if d.Reason != karpv1.DisruptionReasonDrifted || len(d.Replacements) != 1 {
		t.Fatalf("reason %s replacements %d", d.Reason, len(d.Replacements))
	}
	// One already being replaced uses up the budget of 1.
	older.MarkedForDeletion = true
	r := decide(t, in)
	if r.Decision != nil {
		t.Fatalf("drift beyond budget: %+v", names(r.Decision.Candidates))
	}
	wantSkip(t, r, "newer", "reason Drifted allows no more")

	// A PDB blocks drift unless the NodeClaim has a terminationGracePeriod.
	older.MarkedForDeletion = false
	in.PDBs = append(in.PDBs, testPDB("a", 0, "a"))
	in.Nodes = []*Node{older}
	r = decide(t, in)
	if r.Decision != nil {
		t.Fatalf("drift through a blocking PDB without TGP")
	}
	wantSkip(t, r, "older", "Pdb prevents pod evictions (PodDisruptionBudget=[default/a])")
	older.NodeClaim.Spec.TerminationGracePeriod = dur("1h")
	wantDecision(t, decide(t, in), MethodDrift, "older")

	// A NodeClaim without hash annotations is not judged drifted (Karpenter).
	in.PDBs = nil
	delete(older.NodeClaim.Annotations, "karpenter.k8s.aws/ec2nodeclass-hash")
	in.NodePoolHashes = map[string]string{"default": "pool-2"}
	if r := decide(t, in); r.Decision != nil && r.Decision.Method == MethodDrift {
		t.Fatalf("drift without hash annotations: %+v", r.Decision.Message)
	}
}

func TestUnschedulablePodsBlockConsolidation(t *testing.T) {
	pool := testPool("default", od)
	// No instance type matches the pod's nodeSelector: a node whose pods
	// fit nowhere else stays, saying which pod.
	p := testPod("p", "1")
	p.Spec.NodeSelector = map[string]string{karpv1.LabelArch: "arm64"}
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, testNode("lonely", "default", od, 8, p))
	r := decide(t, in)
	if r.Decision != nil {
		t.Fatalf("unexpected decision")
	}
	wantSkip(t, r, "lonely", "Pod default/p cannot be rescheduled")
}

func TestCapacityBoundRejectsWithoutSimulation(t *testing.T) {
	pool := testPool("default", od)
	// Both nodes are full: nothing can move and no on-demand type cheaper
	// than 8 vCPU holds 8 vCPU of pods (spot ones would, but the pool is
	// on-demand only).
	var pa, pb []*corev1.Pod
	for i := range 8 {
		pa = append(pa, testPod(fmt.Sprintf("a%d", i), "1"))
		pb = append(pb, testPod(fmt.Sprintf("b%d", i), "1"))
	}
	r := decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, testNode("a", "default", od, 8, pa...), testNode("b", "default", od, 8, pb...)))
	if r.Decision != nil {
		t.Fatalf("unexpected decision %+v", r.Decision)
	}
	wantSkip(t, r, "a", "Its pods request 8000 cpu, more than the 7000 free")
}

func TestSingleNodeSimulationLimitRotates(t *testing.T) {
	pool := testPool("default", od)
	var nodes []*Node
	for _, name := range []string{"a", "b", "c"} {
		p := testPod(name, "1")
		p.Spec.NodeSelector = map[string]string{karpv1.LabelHostname: name} // can never move
		nodes = append(nodes, testNode(name, "default", od, 8, p))
	}
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, nodes...)
	in.MaxSimulations = 2
	r := decide(t, in)
	if r.Decision != nil || r.NextSingleNodeOffset != 2 {
		t.Fatalf("decision %v next offset %d, want none and 2", r.Decision, r.NextSingleNodeOffset)
	}
	wantSkip(t, r, "a", "cannot be rescheduled")
	wantSkip(t, r, "c", "Not evaluated this pass: the limit of 2 simulations was reached")
	in.SingleNodeOffset = r.NextSingleNodeOffset
	r = decide(t, in)
	wantSkip(t, r, "c", "cannot be rescheduled")
	wantSkip(t, r, "b", "Not evaluated this pass")
	if r.NextSingleNodeOffset != 1 {
		t.Fatalf("next offset %d, want 1", r.NextSingleNodeOffset)
	}
}

func TestRequirementsDrift(t *testing.T) {
	pool := testPool("default", od)
	n := testNode("n", "default", od, 2, testPod("a", "1"))
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, n)
	if r := decide(t, in); r.Decision != nil && r.Decision.Method == MethodDrift {
		t.Fatalf("drift without a change")
	}
	// The pool now only allows spot: the on-demand node drifted.
	pool.Spec.Template.Spec.Requirements[0].Values = []string{spot}
	d := wantDecision(t, decide(t, in), MethodDrift, "n")
	if !strings.Contains(d.Message, "karpenter.sh/capacity-type=on-demand no longer satisfies") {
		t.Errorf("message %q", d.Message)
	}
}

func TestMultiNodeSameTypeMustUndercut(t *testing.T) {
	pool := testPool("default", od)
	// Two 2-vCPU nodes with 1.5 vCPU of pods each: one t-3 (0.15/h) replaces
	// both (0.20/h); t-3 is no candidate's type.
	a := testNode("a", "default", od, 2, testPod("a", "1500m"))
	b := testNode("b", "default", od, 2, testPod("b", "1500m"))
	d := wantDecision(t, decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, a, b)), MethodMultiNode, "a", "b")
	if d.Replacements[0].InstanceType != "t-3" {
		t.Fatalf("replacement %s, want t-3", d.Replacements[0].InstanceType)
	}
	// With a 4-vCPU and a 1-vCPU candidate whose pods need 4 vCPU, the
	// replacement t-4 is of the big candidate's type and not cheaper than
	// it: multi-node declines, deleting fewer nodes is better.
	big := testNode("big", "default", od, 4, testPod("x", "3"))
	small := testNode("small", "default", od, 1, testPod("y", "1"))
	r := decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, big, small))
	if r.Decision != nil && r.Decision.Method == MethodMultiNode {
		t.Fatalf("multi-node replaced %v with %s", names(r.Decision.Candidates), r.Decision.Replacements[0].InstanceType)
	}
}

func TestSimulationHonoursDrainingAndUninitializedNodes(t *testing.T) {
	pool := testPool("default", od)
	pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	// "small"'s pod fits on "roomy" only if the pods of the draining node
	// do not need that room first.
	small := testNode("small", "default", od, 2, testPod("s", "1"))
	roomy := testNode("roomy", "default", od, 4, testPod("r", "2"))
	roomy.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
	draining := testNode("draining", "default", od, 2, testPod("d", "2"))
	draining.MarkedForDeletion = true
	in := testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, small, roomy, draining)
	pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn, Values: []string{"t-2"}})
	r := decide(t, in)
	if r.Decision != nil {
		t.Fatalf("decision %s of %v takes the room the draining node's pods need", r.Decision.Method, names(r.Decision.Candidates))
	}
	// Without the draining node, small goes (its pod fits on roomy).
	in.Nodes = []*Node{small, roomy}
	wantDecision(t, decide(t, in), MethodSingleNode, "small")
	// A not yet initialized node does not count as a home.
	roomy.Initialized = false
	r = decide(t, in)
	if r.Decision != nil && len(r.Decision.Replacements) == 0 {
		t.Fatalf("deleted small onto an uninitialized node")
	}
}

func TestInstanceTypeNotFoundDrift(t *testing.T) {
	pool := testPool("default", od)
	n := testNode("n", "default", od, 40, testPod("a", "1")) // the catalogue stops at t-32
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
		{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonEmpty}}}
	// Karpenter judges a missing type only an hour after creation.
	if r := decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, n)); r.Decision != nil {
		t.Fatalf("decision %s within the first hour", r.Decision.Method)
	}
	d := wantDecision(t, decide(t, testInput(t0.Add(61*time.Minute), []*karpv1.NodePool{pool}, n)), MethodDrift, "n")
	if !strings.Contains(d.Message, "instance type t-40 is no longer offered") {
		t.Errorf("message %q", d.Message)
	}
}

func TestDecideIsDeterministic(t *testing.T) {
	in := benchInput(false, false)
	in.Nodes = in.Nodes[:200]
	first := decide(t, in)
	for range 3 {
		again := decide(t, in)
		if first.Decision == nil || again.Decision == nil ||
			!slices.Equal(names(first.Decision.Candidates), names(again.Decision.Candidates)) ||
			fmt.Sprint(first.Decision.Replacements) != fmt.Sprint(again.Decision.Replacements) ||
			fmt.Sprint(first.Skipped) != fmt.Sprint(again.Skipped) {
			t.Fatalf("decisions differ:\n%+v\n%+v", first.Decision, again.Decision)
		}
	}
}
