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

	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/fakeclock"
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
	n, err := Open(Config{DataDir: t.TempDir(), Bind: fmt.Sprintf("127.0.0.1:%d", port), Advertise: fmt.Sprintf("127.0.0.1:%d", port), Tune: steadyRaft}, f, zap.NewNop())
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
// to voter once healthy and stable. Every coordinator runs autopilot while
// it leads (as the binary does), so an election under load changes who
// acts, not the outcome.
func TestAutopilotRemovesDeadServerAndAddsReplacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 raft nodes and memberlist on loopback; skipped under -short")
	}
	clock := fakeclock.New(time.Unix(1_000_000, 0)) // for the dead-server threshold
	var mu sync.Mutex
	byID := map[raft.ServerID]*gossipNode{}
	current := map[*gossipNode]*Autopilot{} // autopilot of each node's current term
	stopped := map[*gossipNode]bool{}
	var nodes []*gossipNode
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		for _, n := range nodes {
			if !stopped[n] {
				n.stop()
			}
		}
	}()
	stats := func(_ context.Context, id raft.ServerID, _ raft.ServerAddress) (autopilot.ServerStats, error) {
		mu.Lock()
		n, ok := byID[id]
		down := stopped[n]
		mu.Unlock()
		if !ok || down {
			return autopilot.ServerStats{}, fmt.Errorf("server %s does not answer", id)
		}
		return LocalStats(n.node.Raft), nil
	}
	// add starts a node and its leadership monitor (before it can lead).
	add := func(seed string) *gossipNode {
		n := startGossipNode(t, seed)
		mu.Lock()
		byID[n.node.ID] = n
		nodes = append(nodes, n)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			MonitorLeadership(ctx, n.node.Raft, testWait, func(lctx context.Context) {
				ap := &Autopilot{Raft: n.node.Raft, ID: n.node.ID, Members: n.disc, Log: zap.NewNop(), Stats: stats,
					Config: AutopilotConfig{DeadServerAfter: time.Minute, MinQuorum: 2, ServerStabilizationTime: 200 * time.Millisecond,
						ReconcileInterval: 50 * time.Millisecond, UpdateInterval: 50 * time.Millisecond, Now: clock.Now}}
				mu.Lock()
				current[n] = ap
				mu.Unlock()
				_ = ap.Run(lctx)
			}, zap.NewNop())
		}()
		return n
	}
	for i := range 3 {
		seed := ""
		if i > 0 {
			seed = nodes[0].disc.Addr()
		}
		add(seed)
	}
	var cfg raft.Configuration
	for _, n := range nodes {
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: n.node.ID, Address: n.node.Addr})
	}
	for _, n := range nodes {
		if err := n.node.Raft.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// leader is the current leader among the running nodes, with its
	// autopilot (nil until the term's autopilot started).
	leader := func() (*gossipNode, *Autopilot) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range nodes {
			if !stopped[n] && n.node.Raft.State() == raft.Leader {
				return n, current[n]
			}
		}
		return nil, nil
	}
	eventually(t, "a leader running autopilot", func() bool { _, ap := leader(); return ap != nil })
	eventually(t, "gossip sees 3 coordinators", func() bool { l, _ := leader(); return l != nil && len(l.disc.Servers()) == 3 })

	l, _ := leader()
	var victim *gossipNode
	for _, n := range nodes {
		if n != l {
			victim = n
			break
		}
	}
	victim.stop()
	mu.Lock()
	stopped[victim] = true
	mu.Unlock()
	eventually(t, "gossip to drop the stopped server", func() bool {
		l, _ := leader()
		return l != nil && len(l.disc.Servers()) == 2
	})

	// Within the threshold the server is failed, not removed.
	eventually(t, "the stopped server reported failed", func() bool {
		_, ap := leader()
		if ap == nil {
			return false
		}
		s, ok := ap.KnownServers()[victim.node.ID]
		return ok && s.NodeStatus == autopilot.NodeFailed
	})
	if l, _ := leader(); l != nil {
		if _, ok := servers(l.node.Raft)[victim.node.ID]; !ok {
			t.Fatal("server removed before the dead-server threshold")
		}
	}

	// Past the threshold it is removed. (A leader elected meanwhile times
	// the absence from when it noticed it: the clock keeps moving.)
	eventually(t, "autopilot to remove the dead server from raft", func() bool {
		clock.Add(time.Minute)
		l, _ := leader()
		if l == nil {
			return false
		}
		s := servers(l.node.Raft)
		_, still := s[victim.node.ID]
		return !still && len(s) == 2
	})

	// A replacement coordinator joins gossip: added, then promoted.
	l, _ = leader()
	fresh := add(l.disc.Addr())
	eventually(t, "the new server promoted to voter", func() bool {
		l, _ := leader()
		return l != nil && servers(l.node.Raft)[fresh.node.ID] == raft.Voter
	})
	// It replicates like any voter.
	cmd := testPlan("i1")
	commitOnLeader(t, func() []*raft.Raft {
		mu.Lock()
		defer mu.Unlock()
		var out []*raft.Raft
		for _, n := range nodes {
			if !stopped[n] {
				out = append(out, n.node.Raft)
			}
		}
		return out
	}, fsm.MustEncode(fsm.PlanCommitType, cmd))
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

// TestAutopilotIgnoresGossipImpostor: a memberlist member that claims a
// new server ID at a real voter's raft address (the attack that made the
// leader drop that voter) is neither added nor allowed to replace the
// voter, because it cannot answer as that server; and a voter gossip has
// lost sight of, but that still answers, is not removed.
func TestAutopilotIgnoresGossipImpostor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 raft nodes and memberlist on loopback; skipped under -short")
	}
	var nodes []*gossipNode
	for i := range 3 {
		seed := ""
		if i > 0 {
			seed = nodes[0].disc.Addr()
		}
		nodes = append(nodes, startGossipNode(t, seed))
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	var cfg raft.Configuration
	byID := map[raft.ServerID]*gossipNode{}
	for _, n := range nodes {
		cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: n.node.ID, Address: n.node.Addr})
		byID[n.node.ID] = n
	}
	for _, n := range nodes {
		if err := n.node.Raft.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatal(err)
		}
	}
	var l *gossipNode
	eventually(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.node.Raft.State() == raft.Leader {
				l = n
				return true
			}
		}
		return false
	})
	var victim *gossipNode
	for _, n := range nodes {
		if n != l {
			victim = n
			break
		}
	}
	// What the coordinator's StatsFetcher checks: whoever answers at that
	// address (over TLS, with a certificate for its host) is that server.
	stats := func(_ context.Context, id raft.ServerID, addr raft.ServerAddress) (autopilot.ServerStats, error) {
		n, ok := byID[id]
		if !ok || n.node.Addr != addr {
			return autopilot.ServerStats{}, fmt.Errorf("%s does not answer as server %s", addr, id)
		}
		return LocalStats(n.node.Raft), nil
	}
	impostor, err := StartDiscovery(DiscoveryConfig{Name: "impostor", BindAddr: "127.0.0.1"},
		Meta{Role: RoleCoordinator, ID: "00000000-0000-4000-8000-000000000bad", RaftAddr: string(victim.node.Addr), Expect: 3}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	if _, err := impostor.Join([]string{l.disc.Addr()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader's gossip to see the impostor", func() bool { return len(l.disc.Servers()) == 4 })

	ap := &Autopilot{Raft: l.node.Raft, ID: l.node.ID, Members: l.disc, Log: zap.NewNop(), Stats: stats,
		Config: AutopilotConfig{DeadServerAfter: time.Minute, MinQuorum: 2, Now: time.Now}}
	ap.addNewServers(context.Background())
	got := servers(l.node.Raft)
	if len(got) != 3 || got[victim.node.ID] != raft.Voter {
		t.Fatalf("raft servers %v after the impostor's gossip: want the three original voters", got)
	}

	// Gossip loses the victim (say a partition of the gossip port) past
	// the threshold, but it still answers: it stays.
	ap.mu.Lock()
	ap.missing = map[raft.ServerID]time.Time{victim.node.ID: time.Now().Add(-time.Hour)}
	ap.mu.Unlock()
	ap.RemoveFailedServer(&autopilot.Server{ID: victim.node.ID, Address: victim.node.Addr})
	if got := servers(l.node.Raft); got[victim.node.ID] != raft.Voter {
		t.Fatalf("raft servers %v: a voter that still answers was removed because gossip lost it", got)
	}
}
