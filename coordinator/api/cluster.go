package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// ErrNotLeader means this replica cannot commit (it is not, or no longer,
// the leader): the request may be retried on the leader.
var ErrNotLeader = errors.New("not the raft leader")

// RaftCluster adapts a *raft.Raft to Cluster.
type RaftCluster struct {
	Raft *raft.Raft
	// ID is this replica's raft server ID (readiness: it must be a voter).
	ID raft.ServerID
	// Timeout bounds the wait to enqueue an entry (default 10 s).
	Timeout time.Duration
}

// IsLeader reports whether this replica is the leader.
func (c RaftCluster) IsLeader() bool { return c.Raft.State() == raft.Leader }

// Leader returns the leader's raft address, or "" when none is known.
func (c RaftCluster) Leader() string {
	addr, _ := c.Raft.LeaderWithID()
	return string(addr)
}

// Ready reports nil when a leader is known and this replica is a voter.
func (c RaftCluster) Ready() error {
	if c.Leader() == "" {
		return errors.New("no raft leader known")
	}
	f := c.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("reading raft configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == c.ID {
			if s.Suffrage != raft.Voter {
				return fmt.Errorf("server %s is a %s, not a voter", c.ID, s.Suffrage)
			}
			return nil
		}
	}
	return fmt.Errorf("server %s is not in the raft configuration", c.ID)
}

// Commit applies cmd and waits for its commit, returning the entry's index.
// An error returned by the FSM is returned as is; raft errors that mean
// "not here" wrap ErrNotLeader.
func (c RaftCluster) Commit(ctx context.Context, cmd []byte) (uint64, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	f := c.Raft.Apply(cmd, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown),
			errors.Is(err, raft.ErrEnqueueTimeout):
			return 0, fmt.Errorf("%w: %w", ErrNotLeader, err)
		case err != nil:
			return 0, fmt.Errorf("applying raft command: %w", err)
		}
		if ferr, ok := f.Response().(error); ok && ferr != nil {
			return f.Index(), ferr
		}
		return f.Index(), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("applying raft command: %w", ctx.Err())
	}
}

// PortResolver maps a raft address (host:raftPort, a stable DNS name) to
// the HTTP base URL of the same replica by the chart's convention: same
// host, every replica serves HTTP on the same port.
func PortResolver(scheme, port string) func(raftAddr string) (string, bool) {
	return func(raftAddr string) (string, bool) {
		host, _, err := net.SplitHostPort(raftAddr)
		if err != nil || host == "" {
			return "", false
		}
		return scheme + "://" + net.JoinHostPort(host, port), true
	}
}
