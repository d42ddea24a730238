// Package raftmem configures the in-memory raft nodes of tests. Test code
// only.
package raftmem

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config is the configuration of a test raft node id: raft's default
// timeouts (CI is a shared 2-core machine, and a lease lost to a slow
// heartbeat is not what the tests check), a short commit timeout and no
// logging.
func Config(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	Steady(c)
	c.CommitTimeout = 5 * time.Millisecond
	c.Logger = hclog.NewNullLogger()
	return c
}

// Steady sets raft's default election timings on c.
func Steady(c *raft.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
}
