// Package cluster wires hashicorp/raft for the coordinator: stores and
// snapshots in the data dir, a persisted UUID server ID, stable DNS
// addresses, bootstrap_expect discovery over memberlist, and the leadership
// monitor that runs leader-only loops with a context cancelled on
// leadership loss.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/internal/defaults"
)

// LeaderFunc runs the leader-only loops. It must return soon after ctx is
// cancelled (leadership lost or shutdown).
type LeaderFunc func(ctx context.Context)

// MonitorLeadership watches r's leadership signal until ctx ends. On gaining
// leadership it runs raft.Barrier so the FSM holds every entry of earlier
// terms, then calls lead with a context cancelled when leadership is lost
// (Nomad's monitorLeadership/leaderLoop shape). If the barrier fails it
// steps down with a leadership transfer rather than lead on stale state.
func MonitorLeadership(ctx context.Context, r *raft.Raft, barrierTimeout time.Duration, lead LeaderFunc, log *zap.Logger) {
	var running *leaderRun
	stop := func() {
		if running != nil {
			running.cancel()
			<-running.done
			running = nil
			log.Info("leader loops stopped")
		}
	}
	defer stop()
	leaderCh := r.LeaderCh()
	for {
		select {
		case <-ctx.Done():
			return
		case isLeader := <-leaderCh:
			// Lost and regained between two signals also restarts, so the
			// barrier covers the new term.
			stop()
			if isLeader {
				running = startLeader(ctx, r, barrierTimeout, lead, log)
			}
		}
	}
}

type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startLeader(ctx context.Context, r *raft.Raft, barrierTimeout time.Duration, lead LeaderFunc, log *zap.Logger) *leaderRun {
	lctx, cancel := context.WithCancel(ctx)
	run := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		if err := r.Barrier(barrierTimeout).Error(); err != nil {
			log.Warn("barrier failed after gaining leadership, stepping down", zap.Error(err))
			if !errors.Is(err, raft.ErrRaftShutdown) {
				_ = r.LeadershipTransfer().Error()
			}
			return
		}
		if lctx.Err() != nil {
			return
		}
		log.Info("leadership established, starting leader loops")
		lead(lctx)
	}()
	return run
}

// ErrNotLeader means this replica cannot commit (it is not, or no longer,
// the leader): the command may be retried on the leader. The entry may
// still have committed when leadership was lost during the wait, so callers
// re-read state before acting again.
var ErrNotLeader = errors.New("not the raft leader")

// RaftProposer is the one way commands are committed through raft.
type RaftProposer struct {
	Raft *raft.Raft
	// Timeout bounds the wait to enqueue an entry (default 30 s, Nomad's).
	Timeout time.Duration
}

// Commit applies cmd and waits for its commit, or stops waiting when ctx
// ends (leadership lost; the entry may still commit). It returns the
// entry's raft index and the FSM's response (nil or an error value). Raft
// errors that mean "not here" (not leader, leadership lost or in transfer,
// shut down, enqueue timeout) wrap ErrNotLeader.
func (p RaftProposer) Commit(ctx context.Context, cmd []byte) (uint64, any, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	timeout := p.Timeout
	defaults.Positive(&timeout, 30*time.Second)
	f := p.Raft.Apply(cmd, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown),
			errors.Is(err, raft.ErrEnqueueTimeout):
			return 0, nil, fmt.Errorf("applying raft command: %w: %w", ErrNotLeader, err)
		case err != nil:
			return 0, nil, fmt.Errorf("applying raft command: %w", err)
		}
		return f.Index(), f.Response(), nil
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("applying raft command: %w", ctx.Err())
	}
}

// Propose implements fsm.Proposer with Commit.
func (p RaftProposer) Propose(ctx context.Context, cmd []byte) (any, error) {
	_, resp, err := p.Commit(ctx, cmd)
	return resp, err
}
