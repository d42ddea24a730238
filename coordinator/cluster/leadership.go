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

// RaftProposer commits commands through a raft node.
type RaftProposer struct {
	Raft *raft.Raft
	// Timeout bounds the wait to enqueue an entry (default 30 s, Nomad's).
	Timeout time.Duration
}

// Propose implements launcher.Proposer: it applies cmd and returns the FSM's
// response. A raft error (not leader, leadership lost, shutdown) means the
// entry may or may not commit; callers re-read state before acting again.
func (p RaftProposer) Propose(ctx context.Context, cmd []byte) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	f := p.Raft.Apply(cmd, timeout)
	// Wait for the commit, or stop waiting when ctx ends (leadership lost):
	// the entry may still commit, and callers re-read state before acting.
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("applying raft command: %w", err)
		}
		return f.Response(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("applying raft command: %w", ctx.Err())
	}
}
