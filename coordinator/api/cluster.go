package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/joiner-dev/joiner/coordinator/cluster"
)

// RaftCluster adapts a *raft.Raft to Cluster.
type RaftCluster struct {
	Raft *raft.Raft
	// ID is this replica's raft server ID (readiness: it must be a voter).
	ID raft.ServerID
	// Timeout bounds the wait to enqueue an entry (default 30 s).
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

// Commit commits cmd through cluster.RaftProposer, returning the entry's
// index; an error the FSM returned is returned as is.
func (c RaftCluster) Commit(ctx context.Context, cmd []byte) (uint64, error) {
	index, resp, err := cluster.RaftProposer{Raft: c.Raft, Timeout: c.Timeout}.Commit(ctx, cmd)
	if err != nil {
		return 0, err
	}
	if ferr, ok := resp.(error); ok && ferr != nil {
		return index, ferr
	}
	return index, nil
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
