package controller

import (
	"testing"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// adoptedDriftCluster: one drifted node Karpenter launched (no launch
// intent, no instance in raft) whose pod fits nowhere else.
func adoptedDriftCluster(t *testing.T) *cluster {
	return driftedNode(t, "karp", (*cluster).addAdoptedNode)
}

// A drifted node Karpenter launched is replaced like Joiner's own: its
// termination intent commits although raft never recorded the instance
// (it used to be refused as an unknown instance, so every attempt rolled
// back and adopted nodes could never be disrupted), and a new leader
// resumes the command from raft and the NodeClaim's provider ID.
func TestAdoptedDriftedNodeIsReplaced(t *testing.T) {
	c := adoptedDriftCluster(t)
	repl := launchReplacement(t, c, c.controller(nil), "karp")
	if terms := c.fsm.Terminations(); len(terms) != 1 || terms[0].InstanceID != "i-karp" || terms[0].State != fsm.TerminationPending {
		t.Fatalf("terminations = %+v", terms)
	}
	// Leadership moves while the replacement boots.
	resumeAfterLeaderChange(t, c, repl, "karp")
}

// A new leader that finds an adopted node's disruption committed without
// a replacement rolls it back (before, the intent was never matched to its
// node: the node stayed marked for deletion and held the budget forever).
func TestNewLeaderRollsBackAdoptedDisruptionWithoutReplacement(t *testing.T) {
	rollBackWithoutReplacement(t, adoptedDriftCluster(t), "karp", "i-karp")
}
