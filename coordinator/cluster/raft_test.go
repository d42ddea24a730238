package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestOpenPersistsAndAdvertisesDNS: a single node on loopback advertises a
// DNS name (localhost:port), keeps its UUID across restarts, and recovers
// its state from BoltDB and snapshots.
func TestOpenPersistsAndAdvertisesDNS(t *testing.T) {
	cfg := fastLoneConfig(t, nil)
	f := fsm.New()
	n, err := Open(cfg, f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if has, _ := n.HasState(); has {
		t.Fatal("fresh node reports state")
	}
	bootstrapAlone(t, n)
	if addr, _ := n.Raft.LeaderWithID(); addr != raft.ServerAddress(cfg.Advertise) {
		t.Fatalf("leader address %q, want the DNS name %q", addr, cfg.Advertise)
	}
	cmd := testPlan("i1")
	if _, err := (RaftProposer{Raft: n.Raft}).Propose(context.Background(), fsm.MustEncode(fsm.PlanCommitType, cmd)); err != nil {
		t.Fatal(err)
	}
	if err := n.Raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	id := n.ID
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	f2 := fsm.New()
	n2, err := Open(cfg, f2, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if n2.ID != id {
		t.Fatalf("node id changed across restart: %s -> %s", id, n2.ID)
	}
	if has, _ := n2.HasState(); !has {
		t.Fatal("restarted node reports no state: it would bootstrap again")
	}
	waitState(t, n2.Raft, raft.Leader)
	if err := n2.Raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f2.Intent("i1"); !ok {
		t.Fatal("intent lost across restart")
	}
}

func TestNodeIDRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	id, err := NodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := NodeID(dir); again != id {
		t.Fatalf("node id not stable: %s vs %s", id, again)
	}
	bad := t.TempDir()
	if err := writeFile(bad+"/node-id", "not-a-uuid"); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeID(bad); err == nil {
		t.Fatal("garbage node id accepted")
	}
}

func waitState(t *testing.T, r *raft.Raft, want raft.RaftState) {
	t.Helper()
	for range 500 {
		if r.State() == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("raft state %v, want %v", r.State(), want)
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }

// fastLoneConfig is a node on a free loopback port that advertises a DNS
// name (localhost:port), in a data dir of its own, with raft's heartbeat,
// election and lease timeouts cut to 100ms; tune, when set, changes more.
func fastLoneConfig(t *testing.T, tune func(*raft.Config)) Config {
	port := freePort(t)
	return Config{
		DataDir: t.TempDir(), Bind: fmt.Sprintf("127.0.0.1:%d", port), Advertise: fmt.Sprintf("localhost:%d", port),
		Tune: func(c *raft.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
			if tune != nil {
				tune(c)
			}
		},
	}
}

// bootstrapAlone makes n a cluster of one and waits until it leads.
func bootstrapAlone(t *testing.T, n *Node) {
	t.Helper()
	if err := n.Raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: n.ID, Address: n.Addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitState(t, n.Raft, raft.Leader)
}

// TestRestartReplaysTheLog: a node restarted on the same data dir with no
// snapshot taken rebuilds its state from the entries its log store kept.
func TestRestartReplaysTheLog(t *testing.T) {
	cfg := fastLoneConfig(t, func(c *raft.Config) { c.SnapshotThreshold, c.SnapshotInterval = 1<<30, time.Hour })
	n, err := Open(cfg, fsm.New(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	bootstrapAlone(t, n)
	for _, id := range []string{"i1", "i2", "i3"} {
		if _, err := (RaftProposer{Raft: n.Raft}).Propose(context.Background(), fsm.MustEncode(fsm.PlanCommitType, testPlan(id))); err != nil {
			t.Fatal(err)
		}
	}
	last := n.Raft.LastIndex()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if snaps, _ := os.ReadDir(cfg.DataDir + "/snapshots"); len(snaps) != 0 {
		t.Fatalf("a snapshot was taken (%d): the test would not exercise the log", len(snaps))
	}

	f := fsm.New()
	n2, err := Open(cfg, f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if got := n2.Raft.LastIndex(); got < last {
		t.Fatalf("restarted log ends at %d, before %d", got, last)
	}
	waitState(t, n2.Raft, raft.Leader)
	if err := n2.Raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i1", "i2", "i3"} {
		if _, ok := f.Intent(id); !ok {
			t.Fatalf("intent %s lost across restart", id)
		}
	}
}
