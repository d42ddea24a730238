package controller

import (
	"strings"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// adoptedDriftCluster: one drifted node Karpenter launched (no launch
// intent, no instance in raft) whose pod fits nowhere else.
func adoptedDriftCluster(t *testing.T) *cluster {
	c := newCluster(t)
	c.pools = []*karpv1.NodePool{testPool("default")}
	c.hashes["default"] = "old"
	c.addAdoptedNode("karp", "default", 4, testPod("web", "3"))
	c.hashes["default"] = "new"
	return c
}

// A drifted node Karpenter launched is replaced like Joiner's own: its
// termination intent commits although raft never recorded the instance
// (it used to be refused as an unknown instance, so every attempt rolled
// back and adopted nodes could never be disrupted), and a new leader
// resumes the command from raft and the NodeClaim's provider ID.
func TestAdoptedDriftedNodeIsReplaced(t *testing.T) {
	c := adoptedDriftCluster(t)
	old := c.controller(nil)
	c.reconcile(old)
	ops := c.takeOps()
	if len(ops) != 3 || ops[0] != "commit term-i-karp" || !strings.HasPrefix(ops[1], "launch default-r") || ops[2] != "taint karp" {
		t.Fatalf("ops = %q, want commit, launch, taint", ops)
	}
	repl := strings.TrimPrefix(ops[1], "launch ")
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
