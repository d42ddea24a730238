package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/poll"
	"github.com/joiner-dev/joiner/test/raftmem"
)

// testPlan is a PlanCommit of one intent per ID, each for the pod
// "pod-<id>" of NodePool default.
func testPlan(ids ...string) fsm.PlanCommit {
	var p fsm.PlanCommit
	for _, id := range ids {
		p.Intents = append(p.Intents, fsm.NewIntent{ID: id, Pods: []string{"pod-" + id},
			Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default"}}})
	}
	return p
}

// Timings of multi-node test clusters. CI is a shared 2-core machine at
// load ~15: raft's production defaults are 1 s; the tests keep them (a
// shorter lease turns a slow heartbeat into a lost leadership the test
// did not ask for), and wait for events with waitFor's generous deadline.
const testWait = 90 * time.Second

// steadyRaft keeps raft's default timeouts.
var steadyRaft = raftmem.Steady

// eventually polls cond until it holds, failing t after testWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, testWait, 20*time.Millisecond, what, cond)
}

// commitOnLeader commits cmd on whichever of rafts leads (see
// proposeOnLeader) and fails t when the FSM refuses it.
func commitOnLeader(t *testing.T, rafts func() []*raft.Raft, cmd []byte) {
	t.Helper()
	if rerr, ok := proposeOnLeader(t, rafts, cmd).(error); ok {
		t.Fatalf("command refused: %v", rerr)
	}
}

// proposeOnLeader commits cmd on whichever of rafts leads, retrying while
// leadership moves (an election under load is not what the tests check),
// and returns the FSM's response. Only commands that are no-ops when
// applied twice may be passed: a lost answer of a committed entry is
// retried.
func proposeOnLeader(t *testing.T, rafts func() []*raft.Raft, cmd []byte) any {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		var err error
		for _, r := range rafts() {
			if r == nil || r.State() != raft.Leader {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var resp any
			resp, err = RaftProposer{Raft: r}.Propose(ctx, cmd)
			cancel()
			if err == nil {
				return resp
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("committing: %v", err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader committed the command in %s (last: %v)", testWait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
