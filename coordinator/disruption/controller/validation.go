package controller

import (
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/events"
)

// consolidates says whether m is a consolidation method (Karpenter's
// ConsolidationCandidate and ConsolidationRejected Events are theirs).
func consolidates(m disruption.Method) bool {
	return m == disruption.MethodSingleNode || m == disruption.MethodMultiNode
}

// failValidation accounts for what disruption.Revalidate found against
// dec, as Karpenter's validation does: the candidates that failed count in
// karpenter_voluntary_disruption_failed_validations_total, and a
// single-node consolidation turned down leaves a ConsolidationRejected
// Event with the reason on its candidate (Karpenter's multi-node
// consolidation records none).
func (c *Controller) failValidation(v *pass, dec *disruption.Decision, rej disruption.Rejection) {
	if rej.Failed > 0 {
		c.metrics.karp.FailedValidation(string(dec.Method), rej.Failed)
	}
	if rej.Reason != "" {
		c.log.Info("disruption decision failed validation", zap.String("method", string(dec.Method)), zap.Strings("node", dec.Nodes()),
			zap.String("reason", rej.Reason), zap.String("detail", rej.Detail))
	}
	if rej.Reason == "" || dec.Method != disruption.MethodSingleNode {
		return
	}
	name := dec.Candidates[0].Name()
	c.publishDeduped(events.Rejected(c.d.Cache.Node(name), v.snap.NodeClaims[name], commandString(dec), rej.Reason, dec.Savings), string(dec.Method), rej.Reason)
}

// candidateEvents leaves Karpenter's ConsolidationCandidate Event on each
// candidate of a consolidation that replaces nodes when it starts its
// validation (Karpenter records none for a consolidation that only
// deletes).
func (c *Controller) candidateEvents(v *pass, val *validation) {
	dec := val.dec
	if !consolidates(dec.Method) || len(dec.Replacements) == 0 {
		return
	}
	command := commandString(dec)
	for _, n := range dec.Candidates {
		name := n.Name()
		forNode := events.CommandForNode(command, decisionOf(dec), name, len(dec.Candidates))
		c.publishDeduped(events.Candidate(c.d.Cache.Node(name), v.snap.NodeClaims[name], forNode, dec.Savings), val.key)
	}
}

// movesRecount is how long an unchanged consolidation move found pass
// after pass counts once: Karpenter computes a move again only when the
// cluster changed or after 5 minutes (its consolidation state's TTL).
const movesRecount = 5 * time.Minute

// countMoves records the pass's consolidation moves in Karpenter's
// karpenter_consolidation_moves_total and _score, each move with the same
// verdict at most once per movesRecount.
func (c *Controller) countMoves(moves []disruption.Move) {
	for _, mv := range moves {
		if !c.moves.Allow(movesRecount, "move", mv.Key, mv.Pool, strconv.FormatBool(mv.Approved)) {
			continue
		}
		c.metrics.karp.ConsolidationMove(karpmetrics.MoveScore{Pool: mv.Pool, Policy: string(mv.Policy), Approved: mv.Approved,
			Scored: mv.Scored, PoolApproved: mv.Score.Approved(), Score: mv.Score.Value()})
	}
}

// publishDeduped records evs, each at most once per object and values
// every events.DefaultDedupeTimeout: a decision that flaps between passes
// would otherwise leave an Event every pass.
func (c *Controller) publishDeduped(evs []events.Event, values ...string) {
	var out []events.Event
	for _, e := range evs {
		if key := events.ObjectKey(e.Object); key != "" && c.dedupe.Allow(0, e.Reason, append([]string{key}, values...)...) {
			out = append(out, e)
		}
	}
	events.Publish(c.d.Recorder, out...)
}

// decisionOf is Karpenter's command decision: delete, or replace when the
// command launches replacements.
func decisionOf(dec *disruption.Decision) string {
	if len(dec.Replacements) > 0 {
		return "replace"
	}
	return "delete"
}

// commandString spells dec as Karpenter's Command.String does for the
// Events it records before the command has a method and an ID: "replace:
// [n1, n2] -> [1 replacement]" or "delete: [n1]".
func commandString(dec *disruption.Decision) string {
	nodes := make([]string, len(dec.Candidates))
	for i, n := range dec.Candidates {
		nodes[i] = n.Name()
	}
	return events.Command(decisionOf(dec), nodes, len(dec.Replacements))
}
