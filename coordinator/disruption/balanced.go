package disruption

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Balanced consolidation (Karpenter v1.14.1, designs/balanced-consolidation.md):
// a consolidation move of a pool with consolidationPolicy Balanced is made
// only when
//
//	(savings / pool cost) / (disruption / pool disruption) >= 1/k, k = 2
//
// where a node's disruption is 1 (draining it at all) plus the positive
// eviction costs of its pods, the pool's the sum over all its nodes.
// Emptiness and drift are not scored; other policies always pass.

// BalancedK is Karpenter's scoring parameter for Balanced: a move passes
// when its score is at least 1/BalancedK.
const BalancedK = 2

// perNodeDisruptionCost is what draining any node costs, pods aside
// (Karpenter's PerNodeBaseDisruptionCost).
const perNodeDisruptionCost = 1.0

// Score is a consolidation move's Balanced score against one pool.
type Score struct {
	// SavingsFraction is the move's savings over the pool's cost;
	// DisruptionFraction its disruption over the pool's disruption cost.
	SavingsFraction, DisruptionFraction float64
	K                                   int
}

// Value is SavingsFraction / DisruptionFraction: 0 when nothing is saved,
// +Inf when nothing is disrupted.
func (s Score) Value() float64 {
	if s.SavingsFraction <= 0 {
		return 0
	}
	if s.DisruptionFraction == 0 {
		return math.Inf(1)
	}
	return s.SavingsFraction / s.DisruptionFraction
}

// Threshold is 1/K.
func (s Score) Threshold() float64 { return 1 / float64(s.K) }

// Approved says whether the move passes.
func (s Score) Approved() bool { return s.Value() >= s.Threshold() }

// PoolTotals are a pool's cost (per hour, all its nodes) and disruption
// cost (all its nodes), the denominators of the score.
type PoolTotals struct {
	Cost, Disruption float64
}

// ScoreMove scores a move saving savings per hour at disruption cost
// disruption against a pool's totals. Totals of zero score 0 (rejected).
func ScoreMove(savings, disruption float64, t PoolTotals, k int) Score {
	if t.Cost <= 0 || t.Disruption <= 0 {
		return Score{K: k}
	}
	return Score{SavingsFraction: savings / t.Cost, DisruptionFraction: disruption / t.Disruption, K: k}
}

// PodDisruptionCost is a pod's share of its node's disruption cost: its
// eviction cost, or 0 when that is negative.
func PodDisruptionCost(p *corev1.Pod) float64 { return math.Max(0, EvictionCost(p)) }

// rescheduleCost is a candidate's disruption cost: 1 plus its
// reschedulable pods' (Karpenter's Candidate.RescheduleDisruptionCost).
func rescheduleCost(n *Node) float64 {
	c := perNodeDisruptionCost
	for _, p := range n.Node.Pods {
		if podutil.Reschedulable(p) {
			c += PodDisruptionCost(p)
		}
	}
	return c
}

// isEmpty: no pod on the node costs anything to reschedule (Karpenter
// v1.14.1's Candidate.IsEmpty). A node whose pods all have a negative
// eviction cost is empty: emptiness removes it, consolidation does not.
func isEmpty(n *Node) bool { return rescheduleCost(n) <= perNodeDisruptionCost }

// savingsRatio ranks consolidation candidates, highest first: price per
// unit of disruption (Karpenter's Candidate.SavingsRatio).
func savingsRatio(n *Node) float64 { return nodePrice(n) / rescheduleCost(n) }

// nodePrice is the node's price, 0 when unknown (NaN), so one bad price
// does not poison a pool's totals.
func nodePrice(n *Node) float64 {
	if math.IsNaN(n.Price) {
		return 0
	}
	return n.Price
}

// stateDisruptionCost is the disruption cost of a node that is not a
// candidate: 1 plus its pods' that DaemonSets do not own (Karpenter's
// StateNode.DisruptionCost).
func stateDisruptionCost(n *Node) float64 {
	c := perNodeDisruptionCost
	for _, p := range n.Node.Pods {
		if !podutil.OwnedByDaemonSet(p) {
			c += PodDisruptionCost(p)
		}
	}
	return c
}

// poolTotals are the score's denominators for every pool that has a
// graceful candidate (Karpenter computes them per pass over all nodes of
// the pools its candidates belong to): cost is the price of every node of
// the pool Joiner manages, disruption the disruption cost of every node
// labelled with the pool (candidates count their reschedulable pods, the
// others every pod a DaemonSet does not own). Computed once per Decide.
func (d *decider) poolTotals() map[string]PoolTotals {
	if d.totals != nil {
		return d.totals
	}
	d.totals = map[string]PoolTotals{}
	candidate := map[*Node]bool{}
	for _, n := range d.in.Nodes {
		if n.NodeClaim != nil && d.pools[n.Pool()] != nil && d.gracefulBlocker(n, false) == "" {
			candidate[n] = true
			d.totals[n.Pool()] = PoolTotals{}
		}
	}
	for _, n := range d.in.Nodes {
		pn := n.Node.Labels[karpv1.LabelNodePool]
		if n.NodeClaim != nil {
			pn = n.Pool()
		}
		t, ok := d.totals[pn]
		if !ok {
			continue
		}
		if n.NodeClaim != nil {
			t.Cost += nodePrice(n)
		}
		switch {
		case candidate[n]:
			t.Disruption += rescheduleCost(n)
		case n.Node.InFlight:
			t.Disruption += perNodeDisruptionCost // no pod bound yet
		default:
			t.Disruption += stateDisruptionCost(n)
		}
		d.totals[pn] = t
	}
	return d.totals
}

func (d *decider) balanced(pool string) bool {
	p := d.pools[pool]
	return p != nil && p.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyBalanced
}

// canPassThreshold says whether deleting n outright (the best move for it:
// full savings, no replacement) would pass its Balanced pool's score; a
// candidate that cannot is not simulated. Other policies, and pools
// without a cost, pass (Karpenter's CanPassThreshold).
func (d *decider) canPassThreshold(n *Node) (bool, Score) {
	pn := n.Pool()
	if !d.balanced(pn) {
		return true, Score{}
	}
	t, ok := d.poolTotals()[pn]
	if !ok || t.Cost <= 0 {
		return true, Score{}
	}
	s := ScoreMove(nodePrice(n), rescheduleCost(n), t, BalancedK)
	return s.Approved(), s
}

// approveBalanced scores a consolidation decision for each Balanced pool
// among its candidates; it passes when every one approves (other pools are
// not scored). With candidates of several pools, each pool is credited
// the share of the savings its candidates' price is of theirs (Karpenter's
// EvaluateBalancedMove). The string says why not; an approved decision
// carries the scores (Approvals). moves are the move as Karpenter's
// consolidation metrics count it: one per pool of its candidates.
func (d *decider) approveBalanced(dec *Decision) (ok bool, why string, moves []Move) {
	byPool := map[string][]*Node{}
	for _, n := range dec.Candidates {
		byPool[n.Pool()] = append(byPool[n.Pool()], n)
	}
	source := totalPrice(dec.Candidates)
	names := slices.Sorted(maps.Keys(byPool))
	key := dec.Key()
	var whys []string
	var approvals []Approval
	for _, pn := range names {
		mv := Move{Key: key, Pool: pn}
		if p := d.pools[pn]; p != nil {
			mv.Policy = p.Spec.Disruption.ConsolidationPolicy
		}
		if !d.balanced(pn) {
			moves = append(moves, mv)
			continue
		}
		cands := byPool[pn]
		savings := dec.Savings
		if len(byPool) > 1 && source > 0 {
			savings *= totalPrice(cands) / source
		}
		disruption := 0.0
		for _, n := range cands {
			disruption += rescheduleCost(n)
		}
		s := ScoreMove(savings, disruption, d.poolTotals()[pn], BalancedK)
		mv.Score, mv.Scored = s, true
		moves = append(moves, mv)
		if !s.Approved() {
			whys = append(whys, fmt.Sprintf("nodepool %s (Balanced) scores the move %s, below %.2f: it saves %.1f%% of the pool's cost for %.1f%% of its disruption cost",
				pn, formatScore(s.Value()), s.Threshold(), 100*s.SavingsFraction, 100*s.DisruptionFraction))
			continue
		}
		approvals = append(approvals, Approval{Pool: pn, Score: s})
	}
	ok = len(whys) == 0
	for i := range moves {
		moves[i].Approved = ok
	}
	if !ok {
		return false, strings.Join(whys, "; "), moves
	}
	dec.Approvals = approvals
	return true, "", moves
}

func formatScore(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%.2f", v)
}
