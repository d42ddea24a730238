package cluster

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/raftmem"
)

type memNode struct {
	id    raft.ServerID
	store *raft.InmemStore
	snaps *raft.InmemSnapshotStore
	trans *raft.InmemTransport
	fsm   *fsm.FSM
	raft  *raft.Raft
}

// memConfig is raftmem.Config taking snapshots only when asked.
func memConfig(id raft.ServerID) *raft.Config {
	c := raftmem.Config(id)
	c.SnapshotThreshold, c.TrailingLogs = 1<<30, 4
	c.SnapshotInterval = time.Hour
	return c
}

func (n *memNode) start(t *testing.T, peers []*memNode) {
	t.Helper()
	_, n.trans = raft.NewInmemTransport(raft.ServerAddress(n.id))
	for _, p := range peers {
		if p != n && p.raft != nil {
			n.trans.Connect(p.trans.LocalAddr(), p.trans)
			p.trans.Connect(n.trans.LocalAddr(), n.trans)
		}
	}
	n.fsm = fsm.New()
	r, err := raft.NewRaft(memConfig(n.id), n.fsm, n.store, n.store, n.snaps, n.trans)
	if err != nil {
		t.Fatal(err)
	}
	n.raft = r
}

func (n *memNode) stop(peers []*memNode) {
	n.trans.DisconnectAll()
	for _, p := range peers {
		if p != n && p.trans != nil {
			p.trans.Disconnect(n.trans.LocalAddr())
		}
	}
	_ = n.raft.Shutdown().Error()
	n.raft = nil
}

func waitLeader(t *testing.T, nodes []*memNode) *memNode {
	t.Helper()
	var leader *memNode
	eventually(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.raft != nil && n.raft.State() == raft.Leader {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

func dump(f *fsm.FSM) []byte {
	var b bytes.Buffer
	f.WriteTo(&b)
	return b.Bytes()
}

// TestFollowerRestartFromSnapshot: a follower snapshots, stops, misses
// commands while the leader snapshots and compacts its log past them, then
// restarts from its own snapshot and converges (through InstallSnapshot)
// to the leader's byte-identical state.
func TestFollowerRestartFromSnapshot(t *testing.T) {
	var nodes []*memNode
	var cfg raft.Configuration
	for i := range 3 {
		n := &memNode{id: raft.ServerID(fmt.Sprintf("n%d", i)), store: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
		nodes = append(nodes, n)
		cfg.Servers = append(cfg.Servers, raft.Server{ID: n.id, Address: raft.ServerAddress(n.id)})
	}
	for _, n := range nodes {
		n.start(t, nodes)
	}
	defer func() {
		for _, n := range nodes {
			if n.raft != nil {
				n.raft.Shutdown()
			}
		}
	}()
	if err := nodes[0].raft.BootstrapCluster(cfg).Error(); err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, nodes)
	live := func() []*raft.Raft {
		var out []*raft.Raft
		for _, n := range nodes {
			out = append(out, n.raft)
		}
		return out
	}
	apply := func(from, to int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("intent-%03d", i)
			cmd := testPlan(id)
			commitOnLeader(t, live, fsm.MustEncode(fsm.PlanCommitType, cmd))
		}
	}
	apply(0, 20)
	leader = waitLeader(t, nodes) // leadership may have moved under load
	var follower *memNode
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	if err := leader.raft.Barrier(testWait).Error(); err != nil {
		t.Fatal(err)
	}
	waitEqual(t, leader, follower)
	if err := follower.raft.Snapshot().Error(); err != nil {
		t.Fatalf("follower snapshot: %v", err)
	}
	follower.stop(nodes)
	apply(20, 40)
	leader = waitLeader(t, nodes)
	if err := leader.raft.Snapshot().Error(); err != nil {
		t.Fatalf("leader snapshot: %v", err)
	}
	apply(40, 45)
	follower.start(t, nodes)
	// The restarted follower restored its own snapshot before any RPC.
	if n := len(follower.fsm.Intents()); n < 20 {
		t.Fatalf("restarted follower has %d intents, want >= 20 from its snapshot", n)
	}
	waitEqual(t, waitLeader(t, nodes), follower)
	if n := len(follower.fsm.Intents()); n != 45 {
		t.Fatalf("follower has %d intents, want 45", n)
	}
}

func waitEqual(t *testing.T, a, b *memNode) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !bytes.Equal(dump(a.fsm), dump(b.fsm)) {
		if time.Now().After(deadline) {
			t.Fatalf("states differ: %d vs %d intents", len(a.fsm.Intents()), len(b.fsm.Intents()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
