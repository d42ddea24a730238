package disruption

import (
	"errors"
	"maps"
	"slices"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// NodeStatus is how the disruption methods see one managed node at
// Input.Now, whether or not a method acts on it this pass: what the leader
// writes as NodeClaim conditions (Drifted, Empty, Consolidatable) and
// counts as eligible nodes.
type NodeStatus struct {
	Node *Node
	// Expired: past expireAfter (forceful).
	Expired bool
	// Drifted says why the node is drifted ("" when it is not);
	// DriftReason is Karpenter's name for it (NodePoolDrifted, AMIDrift, ...).
	Drifted, DriftReason string
	// Empty: no pod that costs anything to reschedule (none, or only pods
	// with a negative eviction cost: Karpenter v1.14.1's emptiness).
	Empty bool
	// Static: the node's pool is static (spec.replicas): never empty or
	// consolidatable, only drifted or expired.
	Static bool
	// Consolidatable: consolidateAfter has passed since the last pod event
	// (or initialization); ConsolidatableAt is when (zero with Never).
	Consolidatable   bool
	ConsolidatableAt time.Time
	// Blocker says why emptiness and consolidation leave the node alone
	// (do-not-disrupt, a PDB, not initialized, ...); DriftBlocker the same
	// for drift, which a terminationGracePeriod lets past pod-level blocks.
	Blocker, DriftBlocker string
	// Underutilized: the pool's policy lets consolidation replace or remove
	// a node that is not empty.
	Underutilized bool
}

// Eligible says whether method m may act on the node (budgets and the
// simulation aside): Expiration, Drift, Emptiness, or Consolidation (both
// single- and multi-node).
func (s *NodeStatus) Eligible(m Method) bool {
	switch m {
	case MethodExpiration:
		return s.Expired
	case MethodDrift:
		return s.Drifted != "" && s.DriftBlocker == ""
	case MethodStaticDrift:
		return s.Static && s.Drifted != "" && s.DriftBlocker == ""
	case MethodEmptiness:
		return !s.Static && s.Empty && s.Consolidatable && s.Blocker == ""
	case MethodSingleNode, MethodMultiNode, methodConsolidation:
		return !s.Static && s.Consolidatable && s.Blocker == "" && s.Underutilized && !s.Empty
	}
	return false
}

// MethodConsolidation names both consolidation methods in metrics.
const MethodConsolidation = methodConsolidation

// Status reports every managed node that is not marked for deletion, in
// input order. Like Decide it does no I/O and reads no clock.
func Status(in *Input) []NodeStatus {
	d := newDecider(in)
	// A PDB index that fails to build blocks everything, like Decide's
	// error does.
	pdbs, pdbErr := podutil.NewPDBs(in.PDBs)
	d.pdbs = pdbs
	var out []NodeStatus
	for _, n := range in.Nodes {
		if n.NodeClaim == nil || d.deleting(n) {
			continue
		}
		s := NodeStatus{Node: n, Empty: isEmpty(n)}
		if exp, ok := d.expireAfter(n); ok {
			s.Expired = !in.Now.Before(n.NodeClaim.CreationTimestamp.Add(exp))
		}
		pool := d.pools[n.Pool()]
		if pool == nil {
			s.Blocker = "nodepool " + n.Pool() + " not found"
			s.DriftBlocker = s.Blocker
			out = append(out, s)
			continue
		}
		s.DriftReason, s.Drifted = d.drifted(n)
		if pdbErr != nil {
			s.Blocker, s.DriftBlocker = pdbErr.Error(), pdbErr.Error()
		} else {
			s.Blocker, s.DriftBlocker = d.gracefulBlocker(n, false), d.gracefulBlocker(n, true)
		}
		if isStatic(pool) {
			// consolidateAfter and consolidationPolicy do not apply.
			s.Static = true
			out = append(out, s)
			continue
		}
		if at, ok := consolidatableAt(n, pool); ok {
			s.ConsolidatableAt = at
			s.Consolidatable = n.Initialized && !in.Now.Before(at)
		}
		s.Underutilized = pool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty
		out = append(out, s)
	}
	return out
}

// AllowedByPool is AllowedDisruptions for every pool of in for reason,
// counting the pool's initialized nodes and those being disrupted (deleting
// or NotReady) as Decide does; NodeClaims whose instance is terminating
// count for neither. A pool whose budgets do not parse allows 0; the error
// joins what is wrong with each such pool (the map is complete either way).
func AllowedByPool(in *Input, reason karpv1.DisruptionReason) (map[string]int, error) {
	bs := PoolBudgets(in, reason)
	out := make(map[string]int, len(bs))
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(bs)) {
		out[name] = bs[name].Allowed
		if bs[name].Err != nil {
			errs = append(errs, bs[name].Err)
		}
	}
	return out, errors.Join(errs...)
}

// PoolBudget is one pool's disruption budget for one reason at Input.Now.
type PoolBudget struct {
	// Nodes are the pool's nodes the budget's percentages scale
	// (initialized, managed, instance not terminating); Disrupting those
	// of them being disrupted (deleting or NotReady).
	Nodes, Disrupting int
	// Budget is what the pool's active budgets allow of Nodes (Unbounded
	// when none covers the reason, 0 when they do not parse: Karpenter's
	// karpenter_nodepools_allowed_disruptions); Allowed is Budget less
	// Disrupting, never below 0 (what Decide spends).
	Budget, Allowed int
	// Err says why the pool's budgets do not parse (nil when they do); the
	// pool then allows nothing, for every reason.
	Err error
}

// Blocking: the pool has nodes and its budgets allow none of them to be
// disrupted for the reason (Karpenter then leaves a DisruptionBlocked
// Event on the NodePool).
func (b PoolBudget) Blocking() bool { return b.Nodes > 0 && b.Budget == 0 }

// PoolBudgets is PoolBudget for every pool of in for reason.
func PoolBudgets(in *Input, reason karpv1.DisruptionReason) map[string]PoolBudget {
	d := newDecider(in)
	out := make(map[string]PoolBudget, len(d.pools))
	for name, p := range d.pools {
		b := PoolBudget{Nodes: d.poolNodes[name], Disrupting: d.disrupting[name]}
		b.Budget, b.Err = AllowedDisruptions(p, reason, b.Nodes, 0, in.Now)
		b.Allowed = max(0, b.Budget-b.Disrupting)
		out[name] = b
	}
	return out
}
