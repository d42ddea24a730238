package disruption

import (
	"fmt"
	"slices"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/internal/podresources"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Karpenter's reasons for a failed validation (its
// getValidationFailureReason), the label of ConsolidationRejected.
const (
	RejectedBudget     = "budget"
	RejectedChurn      = "churn"
	RejectedScheduling = "scheduling"
)

// Rejection is what Revalidate found against a decision.
type Rejection struct {
	// Reason is RejectedBudget, RejectedChurn or RejectedScheduling when
	// the decision is turned down ("" when it stands, perhaps with fewer
	// candidates).
	Reason string
	// Failed is how many candidates count in Karpenter's
	// karpenter_voluntary_disruption_failed_validations_total.
	Failed int
	// Detail says what failed, for logs.
	Detail string
}

// Revalidate checks an emptiness or consolidation decision made one
// validation delay ago against in, as Karpenter's validation does once its
// wait is over (validation.go): every candidate must still be a candidate
// of the decision's method (not nominated, not blocked) and within its
// pool's budget; a consolidation must still simulate to the same action,
// and every instance type the decision's replacement allowed must still be
// allowed by the new simulation (so the move has not become a dearer one).
// An emptiness decision keeps the candidates that pass. It returns the
// decision to execute, built from in (nil when rejected), and what failed.
// Where Karpenter then launches the replacement it computed before the
// wait, the returned decision carries the new simulation's (the pods as
// they are now; its types, too, cheaper than the candidates). Other
// methods are not validated and are returned as they are. The error is
// Decide's: input it cannot trust.
func Revalidate(in *Input, dec *Decision) (*Decision, Rejection, error) {
	if dec.Method != MethodEmptiness && dec.Method != MethodSingleNode && dec.Method != MethodMultiNode {
		return dec, Rejection{}, nil
	}
	d := newDecider(in)
	var err error
	if d.pdbs, err = podutil.NewPDBs(in.PDBs); err != nil {
		return nil, Rejection{}, err
	}
	budget := d.budgets(dec.Reason)
	if dec.Method == MethodEmptiness {
		return d.revalidateEmptiness(dec, budget)
	}
	return d.revalidateConsolidation(dec, budget)
}

// candidatesWhere are the consolidation candidates keep accepts, by name.
func (d *decider) candidatesWhere(keep func(*Node) bool) map[string]*Node {
	out := map[string]*Node{}
	for _, n := range d.consolidationCandidates(false) {
		if keep(n) {
			out[n.Name()] = n
		}
	}
	return out
}

// revalidateEmptiness keeps the candidates still empty, each while its
// pool's Empty budget allows. As in Karpenter, candidates that are no
// longer empty count as failed only when none is left (churn); one over
// its budget counts on its own.
func (d *decider) revalidateEmptiness(dec *Decision, budget map[string]int) (*Decision, Rejection, error) {
	empty := d.candidatesWhere(isEmpty)
	var still []*Node
	for _, c := range dec.Candidates {
		if n := empty[c.Name()]; n != nil {
			still = append(still, n)
		}
	}
	if len(still) == 0 {
		return nil, Rejection{Reason: RejectedChurn, Failed: len(dec.Candidates), Detail: "no candidate is still empty and consolidatable"}, nil
	}
	var rej Rejection
	var kept []*Node
	for _, n := range still {
		if budget[n.Pool()] <= 0 {
			rej.Failed++
			continue
		}
		budget[n.Pool()]--
		kept = append(kept, n)
	}
	if len(kept) == 0 {
		rej.Reason, rej.Detail = RejectedBudget, "no candidate's pool budget allows a disruption"
		return nil, rej, nil
	}
	return &Decision{Method: MethodEmptiness, Reason: karpv1.DisruptionReasonEmpty, Candidates: kept, Savings: totalPrice(kept),
		Message: fmt.Sprintf("%d empty node(s)", len(kept)), Approvals: dec.Approvals}, rej, nil
}

// revalidateConsolidation turns the whole decision down when a candidate
// changed (churn: all candidates count), ran out of budget (budget: all
// count) or the simulation now decides otherwise (scheduling: none count,
// as in Karpenter).
func (d *decider) revalidateConsolidation(dec *Decision, budget map[string]int) (*Decision, Rejection, error) {
	current := d.candidatesWhere(func(n *Node) bool {
		pool := d.pools[n.Pool()]
		return !isEmpty(n) && d.unpriceable(n, pool) == "" && pool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty
	})
	all := len(dec.Candidates)
	cands := make([]*Node, 0, all)
	for _, c := range dec.Candidates {
		n := current[c.Name()]
		if n == nil {
			return nil, Rejection{Reason: RejectedChurn, Failed: all, Detail: fmt.Sprintf("node %s is no longer a consolidation candidate: %s", c.Name(), d.noLongerCandidate(c.Name()))}, nil
		}
		cands = append(cands, n)
	}
	for _, n := range cands {
		if budget[n.Pool()] <= 0 {
			return nil, Rejection{Reason: RejectedBudget, Failed: all,
				Detail: fmt.Sprintf("the disruption budget of nodepool %s for reason Underutilized allows no more disruptions", n.Pool())}, nil
		}
		budget[n.Pool()]--
	}
	now, why := d.consolidation(dec.Method, cands)
	switch {
	case now == nil:
		return nil, Rejection{Reason: RejectedScheduling, Detail: why}, nil
	case len(now.Replacements) != len(dec.Replacements):
		return nil, Rejection{Reason: RejectedScheduling, Detail: "the simulation now " + now.Message}, nil
	case len(dec.Replacements) > 0 && !subset(dec.Replacements[0].InstanceTypes, now.simulated):
		return nil, Rejection{Reason: RejectedScheduling, Detail: "the simulation no longer allows every instance type of the replacement: " + replacementChange(dec.Replacements[0], now)}, nil
	}
	now.Approvals = dec.Approvals
	return now, Rejection{}, nil
}

// noLongerCandidate says why the node named is not a consolidation
// candidate (for a churn rejection's detail).
func (d *decider) noLongerCandidate(name string) string {
	i := slices.IndexFunc(d.in.Nodes, func(n *Node) bool { return n.Name() == name })
	if i < 0 {
		return "it is gone"
	}
	n := d.in.Nodes[i]
	if n.NodeClaim == nil {
		return "it has no NodeClaim"
	}
	if _, why := d.notConsolidatable(n); why != "" {
		return why
	}
	pool := d.pools[n.Pool()]
	switch {
	case isEmpty(n):
		return "it is empty (emptiness removes it)"
	case pool.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty:
		return "its NodePool consolidates only when empty"
	}
	return d.unpriceable(n, pool)
}

// replacementChange says how the simulation's replacement changed since
// the decision: the types it no longer allows and the pods and requests
// it carried then and now (for the rejection's detail).
func replacementChange(was scheduler.NodeClaim, now *Decision) string {
	allowed := make(map[string]bool, len(now.simulated))
	for _, t := range now.simulated {
		allowed[t] = true
	}
	var gone []string
	for _, t := range was.InstanceTypes {
		if !allowed[t] {
			gone = append(gone, t)
		}
	}
	if len(gone) > 3 {
		gone = append(gone[:3], fmt.Sprintf("and %d other(s)", len(gone)-3))
	}
	is := now.Replacements[0]
	return fmt.Sprintf("%s no longer allowed; it carried %d pod(s) (%s), now %d (%s)",
		strings.Join(gone, ", "), len(was.Pods), podresources.Format(was.Requests), len(is.Pods), podresources.Format(is.Requests))
}

// subset: every name in a is in b.
func subset(a, b []string) bool {
	in := make(map[string]bool, len(b))
	for _, s := range b {
		in[s] = true
	}
	for _, s := range a {
		if !in[s] {
			return false
		}
	}
	return true
}
