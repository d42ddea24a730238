package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Timings of multi-node test clusters. CI is a shared 2-core machine at
// load ~15: raft's production defaults are 1 s; the tests keep them (a
// shorter lease turns a slow heartbeat into a lost leadership the test
// did not ask for), and wait for events with waitFor's generous deadline.
const testWait = 90 * time.Second

// steadyRaft keeps raft's default timeouts but a shorter commit timeout
// and no snapshot churn.
func steadyRaft(c *raft.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
}

// eventually polls cond until it holds, failing t after testWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// commitOnLeader commits cmd on whichever of rafts leads, retrying while
// leadership moves (an election under load is not what the tests check).
// Only commands that are no-ops when applied twice may be passed: a lost
// answer of a committed entry is retried.
func commitOnLeader(t *testing.T, rafts func() []*raft.Raft, cmd []byte) {
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
				if rerr, ok := resp.(error); ok {
					t.Fatalf("command refused: %v", rerr)
				}
				return
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
