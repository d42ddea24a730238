package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/events"
)

// eligibleMethods are the joiner_nodes_eligible_for_disruption labels.
var eligibleMethods = []disruption.Method{disruption.MethodExpiration, disruption.MethodDrift, disruption.MethodEmptiness, disruption.MethodConsolidation}

// report refreshes the metrics and the NodeClaims' Drifted, Empty and
// Consolidatable conditions from this pass's input.
func (c *Controller) report(ctx context.Context, v *pass, in *disruption.Input) {
	statuses := disruption.Status(in)
	for _, m := range eligibleMethods {
		n := 0
		for i := range statuses {
			if statuses[i].Eligible(m) {
				n++
			}
		}
		c.metrics.eligible.WithLabelValues(string(m)).Set(float64(n))
		c.metrics.karp.Eligible(string(m), n)
	}
	// Budget series are replaced in place and the stale ones deleted
	// after: a scrape never finds them missing between two passes.
	series := map[budgetSeries]bool{}
	blocking := map[string]bool{}
	invalid := map[string]string{}
	for _, r := range karpv1.DisruptionReasons {
		for pool, b := range disruption.PoolBudgets(in, r) {
			if b.Err != nil {
				invalid[pool] = b.Err.Error()
			}
			c.metrics.budget.WithLabelValues(pool, string(r)).Set(float64(b.Allowed))
			c.metrics.karp.Budget(pool, r, b.Budget, b.Disrupting)
			series[budgetSeries{pool, r}] = true
			if b.Blocking() {
				blocking[pool+"/"+string(r)] = true
			}
		}
	}
	for k := range c.budgetSeries {
		if !series[k] {
			c.metrics.budget.DeleteLabelValues(k.pool, string(k.reason))
			c.metrics.karp.DeleteBudget(k.pool, k.reason)
		}
	}
	c.budgetSeries = series
	c.budgetEvents(in, blocking)
	c.logInvalidBudgets(in, invalid)
	for i := range statuses {
		c.writeConditions(ctx, &statuses[i], v.now)
	}
}

// writeConditions updates a NodeClaim's disruption conditions when they
// changed (only initialized claims: the lifecycle owns the earlier ones).
func (c *Controller) writeConditions(ctx context.Context, s *disruption.NodeStatus, now time.Time) {
	cached := s.Node.NodeClaim
	if !s.Node.Initialized || cached.DeletionTimestamp != nil {
		return
	}
	nc := cached.DeepCopy()
	t := metav1.NewTime(now)
	set := func(typ string, ok bool, reason, msg, notReason, notMsg string) bool {
		cond := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: t, ObservedGeneration: nc.Generation}
		if !ok {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, notReason, notMsg
		}
		return meta.SetStatusCondition(&nc.Status.Conditions, cond)
	}
	changed := false
	if s.Drifted != "" {
		changed = set(karpv1.ConditionDrifted, true, s.DriftReason, s.Drifted, "", "") || changed
	} else {
		changed = meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionDrifted) || changed
	}
	changed = set(karpv1.ConditionEmpty, s.Empty, "Empty", "no pod with a positive eviction cost to reschedule", "NotEmpty", "has pods to reschedule") || changed
	notReason, notMsg := "ConsolidateAfterNotPassed", "consolidatable at "+s.ConsolidatableAt.UTC().Format(time.RFC3339)
	if s.ConsolidatableAt.IsZero() {
		notReason, notMsg = "ConsolidateAfterNever", "the nodepool's consolidateAfter is Never"
	}
	if s.Static {
		// Static pools are never consolidated: Karpenter does not set
		// the condition on their NodeClaims.
		changed = meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionConsolidatable) || changed
	} else {
		changed = set(karpv1.ConditionConsolidatable, s.Consolidatable, "Consolidatable", "consolidateAfter has passed since the last pod event",
			notReason, notMsg) || changed
	}
	if !changed {
		return
	}
	if _, err := c.d.Kube.UpdateNodeClaimStatus(ctx, nc); err != nil {
		c.log.Debug("updating disruption conditions", zap.String("nodeclaim", nc.Name), zap.Error(err))
	}
}

// events reports, once per change, why each node was left alone, as
// Karpenter's Events on the NodeClaim and its Node: DisruptionBlocked (a
// PDB, do-not-disrupt, a budget, pods that fit nowhere) or Unconsolidatable
// (consolidateAfter, policy, no cheaper replacement, ...). Skips with
// nothing to act on leave none. A pass that went on after a failed
// validation ran only some methods (complete false): what the others
// reported last is kept, so it is not told again next pass.
func (c *Controller) events(v *pass, res *disruption.Result, complete bool) {
	seen := map[string]bool{}
	for _, s := range res.Skipped {
		if s.Event == "" {
			continue
		}
		k := s.Node + "/" + string(s.Method)
		seen[k] = true
		if c.lastSkip[k] == s.Event+": "+s.Reason {
			continue
		}
		c.lastSkip[k] = s.Event + ": " + s.Reason
		nc, node := v.snap.NodeClaims[s.Node], c.d.Cache.Node(s.Node)
		if s.Event == disruption.EventDisruptionBlocked {
			events.Publish(c.d.Recorder, events.Blocked(node, nc, s.Reason)...)
		} else {
			events.Publish(c.d.Recorder, events.NodeUnconsolidatable(node, nc, s.Reason)...)
		}
	}
	if !complete {
		return
	}
	for k := range c.lastSkip {
		if !seen[k] {
			delete(c.lastSkip, k)
		}
	}
}

// approvals records Karpenter's ConsolidationApproved for a decision its
// Balanced pools scored: on the Node and NodeClaim of a one-node move, on
// each pool of a move of several nodes; at most one per object every
// events.DefaultDedupeTimeout (a decision failing its validation may be
// made again pass after pass).
func (c *Controller) approvals(v *pass, dec *disruption.Decision) {
	if dec == nil {
		return
	}
	for _, a := range dec.Approvals {
		s := a.Score
		if len(dec.Candidates) == 1 {
			name := dec.Candidates[0].Name()
			nc, node := v.snap.NodeClaims[name], c.d.Cache.Node(name)
			var evs []events.Event
			for _, e := range events.Approved(node, nc, s.Value(), s.Threshold(), s.K, 100*s.SavingsFraction, 100*s.DisruptionFraction) {
				if key := events.ObjectKey(e.Object); key != "" && c.dedupe.Allow(0, e.Reason, key) {
					evs = append(evs, e)
				}
			}
			events.Publish(c.d.Recorder, evs...)
			continue
		}
		if p := v.snap.NodePool(a.Pool); p != nil && c.dedupe.Allow(0, events.ConsolidationApproved, events.ObjectKey(p)) {
			events.Publish(c.d.Recorder, events.PoolApproved(p, s.Value(), s.Threshold(), s.K, 100*s.SavingsFraction, 100*s.DisruptionFraction))
		}
	}
}

// budgetSeries names the budget gauges' series of a pool and reason.
type budgetSeries struct {
	pool   string
	reason karpv1.DisruptionReason
}

// logInvalidBudgets logs, once each time it changes, why a pool's budgets
// do not parse (Karpenter logs it every pass): such a pool allows no
// disruption, the others go on. invalid maps pools to the error.
func (c *Controller) logInvalidBudgets(in *disruption.Input, invalid map[string]string) {
	for _, pool := range slices.Sorted(maps.Keys(invalid)) {
		if c.invalidBudgets[pool] != invalid[pool] {
			c.log.Error("invalid disruption budgets: the nodepool allows no disruption until they are fixed",
				zap.String("nodepool", pool), zap.String("error", invalid[pool]))
		}
	}
	for _, p := range in.NodePools {
		if _, was := c.invalidBudgets[p.Name]; was && invalid[p.Name] == "" {
			c.log.Info("disruption budgets valid again", zap.String("nodepool", p.Name))
		}
	}
	c.invalidBudgets = invalid
}

// budgetEvents leaves Karpenter's DisruptionBlocked Event on a NodePool
// when its budgets start to allow no disruption for a reason while it has
// nodes (blocking holds "pool/reason" keys).
func (c *Controller) budgetEvents(in *disruption.Input, blocking map[string]bool) {
	for _, p := range in.NodePools {
		for _, r := range karpv1.DisruptionReasons {
			k := p.Name + "/" + string(r)
			if blocking[k] && !c.lastBudgetBlock[k] {
				events.Publish(c.d.Recorder, events.PoolBlockedFor(p, r))
			}
		}
	}
	c.lastBudgetBlock = blocking
}
