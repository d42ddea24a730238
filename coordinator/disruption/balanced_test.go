package disruption

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// The cases of Karpenter v1.14.1's balanced_test.go and
// balanced_scoring_test.go (ScoreMove), in its numbers: the RFC's pool of
// eight m7i.xlarge ($4.84/day) and two m7i.2xlarge ($9.68/day), $58.08/day,
// 80 pods, disruption cost 90 (10 nodes + 80 pods).
func TestScoreMove(t *testing.T) {
	rfc := PoolTotals{Cost: 58.08, Disruption: 90}
	uniform := PoolTotals{Cost: 48.40, Disruption: 90}
	hetero := PoolTotals{Cost: 58.08, Disruption: 117}
	hundred := PoolTotals{Cost: 100, Disruption: 100}
	inf := math.Inf(1)
	cases := []struct {
		name                 string
		savings, disruption  float64
		totals               PoolTotals
		k                    int
		wantScore            float64 // NaN: do not check
		wantApproved         bool
		wantSavings, wantDis float64 // fractions (NaN: do not check)
	}{
		{"oversized node replaced (2xlarge -> large)", 7.26, 4, rfc, 2, (7.26 / 58.08) / (4.0 / 90), true, 7.26 / 58.08, 4.0 / 90},
		{"spare capacity delete", 4.84, 5, rfc, 2, (4.84 / 58.08) / (5.0 / 90), true, math.NaN(), math.NaN()},
		{"marginal move", 2.42, 9, rfc, 2, (2.42 / 58.08) / (9.0 / 90), false, math.NaN(), math.NaN()},
		{"well-packed node, nothing saved", 0, 11, rfc, 2, 0, false, math.NaN(), math.NaN()},
		{"replace in a uniform pool (exactly the threshold)", 2.42, 9, uniform, 2, 0.5, true, math.NaN(), math.NaN()},
		{"low-disruption node", 4.84, 5, hetero, 2, (4.84 / 58.08) / (5.0 / 117), true, math.NaN(), math.NaN()},
		{"high-disruption node", 4.84, 32, hetero, 2, (4.84 / 58.08) / (32.0 / 117), false, math.NaN(), math.NaN()},
		{"scale invariance: 100 nodes", 7.26, 4, PoolTotals{Cost: 580.80, Disruption: 900}, 2, (7.26 / 58.08) / (4.0 / 90), true, math.NaN(), math.NaN()},
		{"nothing disrupted: +Inf", 4.84, 0, rfc, 2, inf, true, math.NaN(), math.NaN()},
		{"nothing saved or disrupted", 0, 0, rfc, 2, 0, false, math.NaN(), math.NaN()},
		{"pool cost zero", 4.84, 5, PoolTotals{Disruption: 90}, 2, 0, false, 0, 0},
		{"pool disruption zero", 4.84, 5, PoolTotals{Cost: 58.08}, 2, 0, false, 0, 0},
		{"marginal move at k=3", 2.42, 9, rfc, 3, math.NaN(), true, math.NaN(), math.NaN()},
		{"marginal move at k=1", 2.42, 9, rfc, 1, math.NaN(), false, math.NaN(), math.NaN()},
		{"on-demand pool delete", 4.84, 4, PoolTotals{Cost: 48.40, Disruption: 90}, 2, (4.84 / 48.40) / (4.0 / 90), true, math.NaN(), math.NaN()},
		{"spot pool delete, same fractions", 1.45, 4, PoolTotals{Cost: 14.50, Disruption: 90}, 2, (4.84 / 48.40) / (4.0 / 90), true, math.NaN(), math.NaN()},
		// balanced_scoring_test.go's table, pool totals 100/100.
		{"high savings low disruption", 20, 5, hundred, 2, 4, true, math.NaN(), math.NaN()},
		{"equal fractions", 10, 10, hundred, 2, 1, true, math.NaN(), math.NaN()},
		{"low savings high disruption", 5, 50, hundred, 2, 0.1, false, math.NaN(), math.NaN()},
		{"zero disruption cost", 10, 0, hundred, 2, inf, true, math.NaN(), math.NaN()},
		{"zero savings", 0, 10, hundred, 2, 0, false, math.NaN(), math.NaN()},
		{"negative savings", -5, 10, hundred, 2, 0, false, math.NaN(), math.NaN()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ScoreMove(c.savings, c.disruption, c.totals, c.k)
			if got := s.Value(); !math.IsNaN(c.wantScore) && !(got == c.wantScore || math.Abs(got-c.wantScore) < 0.01) {
				t.Errorf("score %v, want %v", got, c.wantScore)
			}
			if s.Approved() != c.wantApproved {
				t.Errorf("approved %v at score %v threshold %v, want %v", s.Approved(), s.Value(), s.Threshold(), c.wantApproved)
			}
			if !math.IsNaN(c.wantSavings) && math.Abs(s.SavingsFraction-c.wantSavings) > 0.001 {
				t.Errorf("savings fraction %v, want %v", s.SavingsFraction, c.wantSavings)
			}
			if !math.IsNaN(c.wantDis) && math.Abs(s.DisruptionFraction-c.wantDis) > 0.001 {
				t.Errorf("disruption fraction %v, want %v", s.DisruptionFraction, c.wantDis)
			}
			if s.K != c.k || s.Threshold() != 1/float64(c.k) {
				t.Errorf("k %d threshold %v", s.K, s.Threshold())
			}
		})
	}
}

// manyPods are n pods of cpu each (pod-deletion-cost and priority unset:
// eviction cost 1 each).
func manyPods(prefix string, n int, cpu string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = testPod(prefix+"-"+strconv.Itoa(i), cpu)
	}
	return out
}

func balancedPool(name string) *karpv1.NodePool {
	p := testPool(name, od)
	p.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced
	return p
}

// Karpenter's computeNodePoolTotals cases: every node of the pool counts
// (candidates their reschedulable pods, the others every non-DaemonSet
// pod), a node without a price adds disruption but no cost, a NaN price
// does not poison the totals.
func TestPoolTotals(t *testing.T) {
	pool := balancedPool("b")
	var nodes []*Node
	for i := range 5 {
		nodes = append(nodes, testNode("n"+strconv.Itoa(i), "b", od, 2, testPod("p"+strconv.Itoa(i), "100m")))
	}
	nodes[1].Price = 0
	nodes[2].Price = math.NaN()
	nodes[3].Annotations[karpv1.AnnotationDoNotDisrupt] = "true" // not a candidate: still counted
	nodes[3].Node.Pods = append(nodes[3].Node.Pods, dsPod("ds"))
	neg := testPod("cheap", "100m")
	neg.Annotations = map[string]string{podDeletionCost: "-2147483647"}
	nodes[4].Node.Pods = append(nodes[4].Node.Pods, neg)
	d := &decider{in: testInput(t0, []*karpv1.NodePool{pool}, nodes...), pools: map[string]*karpv1.NodePool{"b": pool}}
	got := d.poolTotals()["b"]
	if want := 3 * 2 * odPrice; math.Abs(got.Cost-want) > 1e-9 {
		t.Errorf("cost %v, want %v (two nodes without a price)", got.Cost, want)
	}
	// 5 nodes x (1 + 1 pod); the DaemonSet pod and the negative one add 0.
	if got.Disruption != 10 {
		t.Errorf("disruption %v, want 10", got.Disruption)
	}
	if s := ScoreMove(4.84, 2, got, BalancedK); math.IsNaN(s.Value()) {
		t.Error("NaN score")
	}
}

// Karpenter's EvaluateBalancedMove cases on a decision of several pools:
// pools other than Balanced are not scored; each Balanced pool is credited
// its share of the savings and must approve on its own.
func TestApproveBalanced(t *testing.T) {
	bal, other, heavy := balancedPool("balanced"), testPool("other", od), balancedPool("heavy")
	var nodes []*Node
	byName := map[string]*Node{}
	add := func(n *Node) {
		nodes = append(nodes, n)
		byName[n.Name()] = n
	}
	for i := range 5 {
		add(testNode("b"+strconv.Itoa(i), "balanced", od, 2, testPod("bp"+strconv.Itoa(i), "100m")))
		add(testNode("o"+strconv.Itoa(i), "other", od, 2, testPod("op"+strconv.Itoa(i), "100m")))
	}
	add(testNode("h0", "heavy", od, 1, manyPods("hp", 40, "10m")...))
	add(testNode("h1", "heavy", od, 1, testPod("light", "10m")))
	pools := []*karpv1.NodePool{bal, other, heavy}
	d := &decider{in: testInput(t0, pools, nodes...), pools: map[string]*karpv1.NodePool{}}
	for _, p := range pools {
		d.pools[p.Name] = p
	}
	del := func(names ...string) *Decision {
		dec := &Decision{Method: MethodMultiNode}
		for _, n := range names {
			dec.Candidates = append(dec.Candidates, byName[n])
		}
		dec.Savings = totalPrice(dec.Candidates)
		return dec
	}
	cases := []struct {
		name string
		dec  *Decision
		ok   bool
		why  string
		// approvals: "pool score" of the approved decision's Approvals
		// (Karpenter's ConsolidationApproved Events).
		approvals []string
		// moves: "pool policy move-verdict [pool-score pool-verdict]" per
		// pool (Karpenter's consolidation_moves_total and _score).
		moves []string
	}{
		// 1/5 of the cost for 2/10 of the disruption: score 1.
		{"one node of a 10-node Balanced pool", del("b0"), true, "", []string{"balanced 1.00"},
			[]string{"balanced Balanced approved 1.00 approved"}},
		{"other pools are not scored", del("o0", "o1", "o2", "o3"), true, "", nil,
			[]string{"other WhenEmptyOrUnderutilized approved"}},
		// The Balanced pool is credited half the savings: still 1/5 of its
		// cost for 2/10 of its disruption.
		{"savings split by source price across pools", del("b0", "o0"), true, "", []string{"balanced 1.00"},
			[]string{"balanced Balanced approved 1.00 approved", "other WhenEmptyOrUnderutilized approved"}},
		// heavy: half its cost for 41/43 of its disruption (0.52) passes;
		// a replacement eating into the savings does not.
		{"heavy node deleted", del("h0"), true, "", []string{"heavy 0.52"},
			[]string{"heavy Balanced approved 0.52 approved"}},
		{"heavy node replaced at 0.8 of its price", func() *Decision { d := del("h0"); d.Savings *= 0.2; return d }(), false, "nodepool heavy (Balanced) scores the move 0.10", nil,
			[]string{"heavy Balanced rejected 0.10 rejected"}},
		// The move is rejected as a whole; each pool's score keeps its own verdict.
		{"every Balanced pool must approve", func() *Decision { d := del("b0", "h0"); d.Savings *= 0.2; return d }(), false, "nodepool heavy", nil,
			[]string{"balanced Balanced rejected 0.20 rejected", "heavy Balanced rejected 0.10 rejected"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why, moves := d.approveBalanced(c.dec)
			if ok != c.ok || !strings.Contains(why, c.why) {
				t.Fatalf("approved %v (%s), want %v (%q)", ok, why, c.ok, c.why)
			}
			var got []string
			for _, a := range c.dec.Approvals {
				got = append(got, fmt.Sprintf("%s %.2f", a.Pool, a.Score.Value()))
			}
			if !slices.Equal(got, c.approvals) {
				t.Errorf("approvals %q, want %q", got, c.approvals)
			}
			if gotMoves := moveLines(moves); !slices.Equal(gotMoves, c.moves) {
				t.Errorf("moves %q, want %q", moveLines(moves), c.moves)
			}
		})
	}
}

// wantMoves checks the moves a pass scored, as moveLines spells them.
func wantMoves(t *testing.T, r *Result, want ...string) {
	t.Helper()
	if got := moveLines(r.Moves); !slices.Equal(got, want) {
		t.Errorf("moves %q, want %q", got, want)
	}
}

// moveLines spells moves "pool policy move-verdict [score pool-verdict]".
func moveLines(moves []Move) []string {
	var out []string
	for _, m := range moves {
		line := fmt.Sprintf("%s %s %s", m.Pool, m.Policy, verdict(m.Approved))
		if m.Scored {
			line += fmt.Sprintf(" %s %s", formatScore(m.Score.Value()), verdict(m.Score.Approved()))
		}
		out = append(out, line)
	}
	return out
}

func verdict(ok bool) string {
	if ok {
		return "approved"
	}
	return "rejected"
}

// Karpenter v1.14.1's sortCandidates cases: consolidation candidates of
// every policy go highest price per unit of disruption first.
func TestCandidatesBySavingsRatio(t *testing.T) {
	for _, policy := range []karpv1.ConsolidationPolicy{karpv1.ConsolidationPolicyBalanced, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized} {
		t.Run(string(policy), func(t *testing.T) {
			pool := testPool("p", od)
			pool.Spec.Disruption.ConsolidationPolicy = policy
			b := testNode("b", "p", od, 1, manyPods("b", 8, "10m")...) // 0.05 / 9
			b.Price = 1
			c := testNode("c", "p", od, 5, manyPods("c", 3, "10m")...) // 5 / 4
			c.Price = 5
			a := testNode("a", "p", od, 10, testPod("a", "10m")) // 10 / 2
			a.Price = 10
			d := &decider{in: testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, b, c, a), pools: map[string]*karpv1.NodePool{"p": pool}}
			d.pdbs, _ = podutil.NewPDBs(d.in.PDBs)
			if got := names(d.consolidationCandidates(false)); !slices.Equal(got, []string{"a", "c", "b"}) {
				t.Fatalf("order %v, want [a c b]", got)
			}
		})
	}
}

// Decide with Balanced pools, after Karpenter's balanced_integration_test.go:
// approve moves with clear savings (replace an oversized node, delete a
// node whose pods fit elsewhere, consolidate several underutilized nodes),
// reject marginal ones, leave other policies alone.
func TestBalancedDecide(t *testing.T) {
	now := t0.Add(time.Hour)

	t.Run("replace an oversized node", func(t *testing.T) {
		pool := balancedPool("b")
		big := testNode("big", "b", od, 32, testPod("web", "500m"))
		r := decide(t, testInput(now, []*karpv1.NodePool{pool}, big))
		d := wantDecision(t, r, MethodSingleNode, "big")
		if len(d.Replacements) != 1 || d.Replacements[0].InstanceType != "t-1" {
			t.Fatalf("replacements %+v", d.Replacements)
		}
	})

	// Two well-packed t-4 nodes: WhenEmptyOrUnderutilized replaces both by
	// one t-7 (saving 1/8 of the pool's cost for all of its disruption), or
	// one of them by a t-3; Balanced makes neither move.
	packed := func(pool string) []*Node {
		a, b := manyPods(pool+"-a", 3, "1"), manyPods(pool+"-b", 4, "900m")
		for _, p := range append(a, b...) {
			p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: pool}
		}
		return []*Node{testNode(pool+"-a", pool, od, 4, a...), testNode(pool+"-b", pool, od, 4, b...)}
	}
	t.Run("reject replacing well-packed nodes", func(t *testing.T) {
		r := decide(t, testInput(now, []*karpv1.NodePool{testPool("p", od)}, packed("p")...))
		wantDecision(t, r, MethodMultiNode, "p-a", "p-b")

		r = decide(t, testInput(now, []*karpv1.NodePool{balancedPool("p")}, packed("p")...))
		if r.Decision != nil {
			t.Fatalf("decision %s of %v", r.Decision.Method, names(r.Decision.Candidates))
		}
		wantSkip(t, r, "p-a", "Nodepool p (Balanced) scores the move 0.28, below 0.50: it saves 12.5% of the pool's cost for 44.4% of its disruption cost")
		// The multi-node search's last rejected move, then each single node.
		wantMoves(t, r, "p Balanced rejected 0.12 rejected", "p Balanced rejected 0.28 rejected", "p Balanced rejected 0.22 rejected")
	})

	t.Run("mixed policies: only the Balanced pool is scored", func(t *testing.T) {
		nodes := append(packed("bal"), packed("def")...)
		r := decide(t, testInput(now, []*karpv1.NodePool{balancedPool("bal"), testPool("def", od)}, nodes...))
		d := wantDecision(t, r, MethodSingleNode, "def-a")
		if len(d.Replacements) != 1 || d.Replacements[0].InstanceType != "t-3" {
			t.Fatalf("replacements %+v", d.Replacements)
		}
		wantSkip(t, r, "bal-a", "Nodepool bal (Balanced) scores the move")
		wantMoves(t, r, "bal Balanced rejected 0.28 rejected", "def WhenEmptyOrUnderutilized approved")
	})

	t.Run("delete a node whose pods fit on another", func(t *testing.T) {
		a := testNode("a", "b", od, 16, testPod("small", "500m"))
		b := testNode("b", "b", od, 4, manyPods("b", 3, "1")...)
		r := decide(t, testInput(now, []*karpv1.NodePool{balancedPool("b")}, a, b))
		d := wantDecision(t, r, MethodSingleNode, "a")
		if len(d.Replacements) != 0 || d.Savings != 16*odPrice {
			t.Fatalf("replacements %d savings %v", len(d.Replacements), d.Savings)
		}
	})

	t.Run("consolidate several underutilized nodes", func(t *testing.T) {
		var nodes []*Node
		for i := range 3 {
			nodes = append(nodes, testNode("n"+strconv.Itoa(i), "b", od, 32, testPod("p"+strconv.Itoa(i), "1")))
		}
		r := decide(t, testInput(now, []*karpv1.NodePool{balancedPool("b")}, nodes...))
		if r.Decision == nil || r.Decision.Method != MethodMultiNode || len(r.Decision.Candidates) < 2 {
			t.Fatalf("decision %+v", r.Decision)
		}
		wantMoves(t, r, "b Balanced approved 0.97 approved")
	})

	t.Run("a node the pool cannot spare is not simulated", func(t *testing.T) {
		// Deleting small outright would save 1/9 of the pool's cost for
		// 11/13 of its disruption.
		big := testNode("big", "b", od, 8, testPod("api", "2"))
		big.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
		small := testNode("small", "b", od, 1, manyPods("s", 10, "50m")...)
		r := decide(t, testInput(now, []*karpv1.NodePool{balancedPool("b")}, big, small))
		if r.Decision != nil {
			t.Fatalf("decision %s of %v", r.Decision.Method, names(r.Decision.Candidates))
		}
		wantSkip(t, r, "small", "would score even its deletion 0.13, below 0.50")
	})

	t.Run("single-node pool: deleting it scores 1", func(t *testing.T) {
		only := testNode("only", "b", od, 2, testPod("x", "100m"))
		other := testNode("other", "o", od, 4)
		other.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
		r := decide(t, testInput(now, []*karpv1.NodePool{balancedPool("b"), testPool("o", od)}, only, other))
		wantDecision(t, r, MethodSingleNode, "only")
	})

	t.Run("a budget of 0 blocks it", func(t *testing.T) {
		pool := balancedPool("b")
		pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0%"}}
		r := decide(t, testInput(now, []*karpv1.NodePool{pool}, testNode("big", "b", od, 32, testPod("web", "500m"))))
		if r.Decision != nil {
			t.Fatalf("decision %s", r.Decision.Method)
		}
	})
}

// Karpenter v1.14.1: a node whose pods all have a negative eviction cost
// (a low pod-deletion-cost or priority) is empty, for every policy:
// emptiness deletes it (reason Empty) and consolidation leaves it to
// emptiness.
func TestEmptyByEvictionCost(t *testing.T) {
	for _, policy := range []karpv1.ConsolidationPolicy{karpv1.ConsolidationPolicyWhenEmpty, karpv1.ConsolidationPolicyBalanced,
		karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized} {
		t.Run(string(policy), func(t *testing.T) {
			pool := testPool("p", od)
			pool.Spec.Disruption.ConsolidationPolicy = policy
			cheap := testPod("cheap", "500m")
			cheap.Annotations = map[string]string{podDeletionCost: "-2147483647"}
			low := testPod("low", "500m")
			prio := int32(-1000000000)
			low.Spec.Priority = &prio
			n := testNode("n", "p", od, 4, cheap, low)
			busy := testNode("busy", "p", od, 4, testPod("web", "1"))
			busy.Annotations[karpv1.AnnotationDoNotDisrupt] = "true"
			r := decide(t, testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, n, busy))
			d := wantDecision(t, r, MethodEmptiness, "n")
			if d.Reason != karpv1.DisruptionReasonEmpty {
				t.Fatalf("reason %s", d.Reason)
			}
		})
	}
	// One pod with a positive cost makes it non-empty.
	p := testPod("one", "100m")
	if isEmpty(testNode("n", "p", od, 1, p)) {
		t.Fatal("a node with a default-cost pod is empty")
	}
}
