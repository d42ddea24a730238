package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

type gossipNode struct {
	node *Node
	fsm  *fsm.FSM
	disc *Discovery
}

func (g *gossipNode) stop() {
	_ = g.disc.Close()
	_ = g.node.Close()
}

// startGossipNode opens a raft node on loopback with a memberlist member
// that joins seed ("" for the first).
func startGossipNode(t *testing.T, seed string) *gossipNode {
	t.Helper()
	port := freePort(t)
	f := fsm.New()
	n, err := Open(Config{DataDir: t.TempDir(), Bind: fmt.Sprintf("127.0.0.1:%d", port), Advertise: fmt.Sprintf("127.0.0.1:%d", port), Tune: fastRaft}, f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	d, err := StartDiscovery(DiscoveryConfig{Name: string(n.ID), BindAddr: "127.0.0.1"},
		Meta{Role: RoleCoordinator, ID: string(n.ID), RaftAddr: string(n.Addr), Expect: 3}, zap.NewNop())
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	if seed != "" {
		if _, err := d.Join([]string{seed}); err != nil {
			t.Fatal(err)
		}
	}
	return &gossipNode{node: n, fsm: f, disc: d}
}

// fakeClock is a settable clock for the dead-server threshold.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func servers(r *raft.Raft) map[raft.ServerID]raft.ServerSuffrage {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	out := map[raft.ServerID]raft.ServerSuffrage{}
	for _, s := range f.Configuration().Servers {
		out[s.ID] = s.Suffrage
	}
	return out
}

// TestAutopilotRemovesDeadServerAndAddsReplacement: three coordinators; a
// follower stops. Before the threshold the leader keeps it (reported
// failed); once the threshold passes autopilot removes it from raft. A
// fresh coordinator that joins gossip is added as a non-voter and promoted
// to voter once healthy and stable.
func TestAutopilotRemovesDeadServerAndAddsReplacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 raft nodes and memberlist on loopback; skipped under -short")
	}
	var nodes []*gossipNode
	for i := range 3 {
		seed := ""
		if i > 0 {
			seed = nodes[0].disc.Addr()
		}
		nodes = append(nodes, startGossipNode(t, seed))
	}
	stopped := map[*gossipNode]bool{}
	defer func() {
		for _, n := range nodes {
			if !stopped[n] {
				n.stop()
			}
		}
	}()
	var cfg raft.Configuration
	for _, n := range nodes {
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: n.node.ID, Address: n.node.Addr})
	}
	for _, n := range nodes {
		if err := n.node.Raft.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatal(err)
		}
	}
	var leader *gossipNode
	eventually(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.node.Raft.State() == raft.Leader {
				leader = n
				return true
			}
		}
		return false
	})
	eventually(t, "gossip sees 3 coordinators", func() bool { return len(leader.disc.Servers()) == 3 })

	var byIDMu sync.Mutex
	byID := map[raft.ServerID]*gossipNode{}
	for _, n := range nodes {
		byID[n.node.ID] = n
	}
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	ap := &Autopilot{
		Raft: leader.node.Raft, ID: leader.node.ID, Members: leader.disc, Log: zap.NewNop(),
		Stats: func(_ context.Context, id raft.ServerID, _ raft.ServerAddress) (autopilot.ServerStats, error) {
			byIDMu.Lock()
			n, ok := byID[id]
			byIDMu.Unlock()
			if !ok {
				return autopilot.ServerStats{}, fmt.Errorf("unknown server %s", id)
			}
			return LocalStats(n.node.Raft), nil
		},
		Config: AutopilotConfig{
			DeadServerAfter: time.Minute, MinQuorum: 2, ServerStabilizationTime: 200 * time.Millisecond,
			ReconcileInterval: 50 * time.Millisecond, UpdateInterval: 50 * time.Millisecond, Now: clock.Now,
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ap.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var victim *gossipNode
	for _, n := range nodes {
		if n != leader {
			victim = n
			break
		}
	}
	victim.stop()
	stopped[victim] = true
	eventually(t, "gossip to drop the stopped server", func() bool { return len(leader.disc.Servers()) == 2 })

	// Within the threshold the server is failed, not removed.
	eventually(t, "the stopped server reported failed", func() bool {
		s, ok := ap.KnownServers()[victim.node.ID]
		return ok && s.NodeStatus == autopilot.NodeFailed
	})
	if _, ok := servers(leader.node.Raft)[victim.node.ID]; !ok {
		t.Fatal("server removed before the dead-server threshold")
	}

	clock.Add(time.Minute)
	eventually(t, "autopilot to remove the dead server from raft", func() bool {
		s := servers(leader.node.Raft)
		_, still := s[victim.node.ID]
		return !still && len(s) == 2
	})

	// A replacement coordinator joins gossip: added, then promoted.
	fresh := startGossipNode(t, leader.disc.Addr())
	nodes = append(nodes, fresh)
	byIDMu.Lock()
	byID[fresh.node.ID] = fresh
	byIDMu.Unlock()
	eventually(t, "the new server added to raft", func() bool {
		_, ok := servers(leader.node.Raft)[fresh.node.ID]
		return ok
	})
	eventually(t, "the new server promoted to voter", func() bool {
		return servers(leader.node.Raft)[fresh.node.ID] == raft.Voter
	})
	// It replicates like any voter.
	cmd := fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: "i1", Pods: []string{"p1"}, Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default"}}}}}
	if _, err := (RaftProposer{Raft: leader.node.Raft}).Propose(ctx, fsm.MustEncode(fsm.PlanCommitType, cmd)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new server to replicate", func() bool { _, ok := fresh.fsm.Intent("i1"); return ok })
}

// TestAutopilotConfig: the threshold switches cleanup on; defaults fill
// the health settings. (MinQuorum and the no-majority rule are enforced by
// raft-autopilot's own removal adjudication.)
func TestAutopilotConfig(t *testing.T) {
	ap := &Autopilot{Config: AutopilotConfig{DeadServerAfter: time.Minute, MinQuorum: 3}}
	c := ap.AutopilotConfig()
	if !c.CleanupDeadServers || c.MinQuorum != 3 || c.ServerStabilizationTime != 10*time.Second ||
		c.LastContactThreshold != 5*time.Second || c.MaxTrailingLogs != 250 {
		t.Fatalf("config %+v", c)
	}
	ap.Config.DeadServerAfter = 0
	if ap.AutopilotConfig().CleanupDeadServers {
		t.Fatal("cleanup enabled with no threshold")
	}
}
