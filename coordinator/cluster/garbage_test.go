package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// plainNode is a plaintext raft node on 127.0.0.1 that can be restarted
// from its data dir.
type plainNode struct {
	cfg  Config
	fsm  *fsm.FSM
	node *Node
}

func (p *plainNode) open(t *testing.T) {
	t.Helper()
	p.fsm = fsm.New()
	n, err := Open(p.cfg, p.fsm, zap.NewNop())
	if err != nil {
		t.Fatalf("opening %s: %v", p.cfg.Advertise, err)
	}
	p.node = n
}

func openPlainCluster(t *testing.T, size int) []*plainNode {
	t.Helper()
	var nodes []*plainNode
	var conf raft.Configuration
	for range size {
		port := freePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p := &plainNode{cfg: Config{DataDir: t.TempDir(), Bind: addr, Advertise: addr, Tune: steadyRaft}}
		p.open(t)
		t.Cleanup(func() { _ = p.node.Close() })
		nodes = append(nodes, p)
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: p.node.ID, Address: p.node.Addr})
	}
	for _, p := range nodes {
		if err := p.node.Raft.BootstrapCluster(conf).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

func plainRafts(nodes []*plainNode) []*raft.Raft {
	out := make([]*raft.Raft, len(nodes))
	for i, p := range nodes {
		out[i] = p.node.Raft
	}
	return out
}

// garbageEntries are poison entries a forged AppendEntries (or a bug)
// could commit: empty, unknown types, bad JSON for every known type, a
// valid type with a huge or odd payload.
func garbageEntries() map[string][]byte {
	out := map[string][]byte{
		"empty":                  {},
		"unknown type":           {99, '{', '}'},
		"reserved type 11":       append([]byte{11}, `{"id":"agent"}`...),
		"type byte only":         {byte(fsm.PlanCommitType)},
		"huge report id":         fsm.MustEncode(fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{ID: strings.Repeat("x", 256<<10), InstanceID: "i-1"}}),
		"deeply nested plan":     append([]byte{byte(fsm.PlanCommitType)}, strings.Repeat(`{"intents":[`, 5000)...),
		"plan with one ID twice": fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{Intents: []fsm.NewIntent{{ID: "x", Pods: []string{"a"}}, {ID: "x", Pods: []string{"b"}}}}),
		"launch result both":     fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "x", Launched: &fsm.Launched{InstanceID: "i"}, Failed: &fsm.Failed{}}),
		"prune without cutoff":   fsm.MustEncode(fsm.PruneType, fsm.Prune{}),
	}
	for _, typ := range []fsm.MessageType{fsm.PlanCommitType, fsm.LaunchAttemptStartType, fsm.LaunchResultType, fsm.IntentCancelType,
		fsm.InstanceStatusType, fsm.InterruptionReportType, fsm.InterruptionHandledType, fsm.TerminationIntentType,
		fsm.TerminationResultType, fsm.TerminationCancelType, fsm.PruneType} {
		out["bad json "+typ.String()] = append([]byte{byte(typ)}, `{"at":`...)
		out["wrong shape "+typ.String()] = append([]byte{byte(typ)}, `[1,"two",{}]`...)
	}
	return out
}

// TestGarbageEntriesKeepEveryReplicaServing: garbage committed through the
// leader of a real 3-replica cluster is rejected by every replica (an
// error response, counted), none crashes, a valid command committed
// afterwards is applied on all three with byte-identical state, and a
// replica restarted from its log replays the garbage and catches up.
func TestGarbageEntriesKeepEveryReplicaServing(t *testing.T) {
	if testing.Short() {
		t.Skip("real raft cluster")
	}
	nodes := openPlainCluster(t, 3)
	eventually(t, "a leader", func() bool {
		for _, r := range plainRafts(nodes) {
			if r.State() == raft.Leader {
				return true
			}
		}
		return false
	})
	garbage := garbageEntries()
	for name, e := range garbage {
		resp := proposeOnLeader(t, func() []*raft.Raft { return plainRafts(nodes) }, e)
		if err, _ := resp.(error); !errors.Is(err, fsm.ErrInvalidCommand) {
			t.Fatalf("%s: response %v, want an error wrapping ErrInvalidCommand", name, resp)
		}
	}
	// Ignorable unknown commands are skipped, not rejected.
	if resp := proposeOnLeader(t, func() []*raft.Raft { return plainRafts(nodes) }, []byte{byte(99 | fsm.IgnoreUnknownTypeFlag), '{', '}'}); resp != nil {
		t.Fatalf("ignorable unknown command: %v", resp)
	}

	valid := testPlan("after-garbage")
	commitOnLeader(t, func() []*raft.Raft { return plainRafts(nodes) }, fsm.MustEncode(fsm.PlanCommitType, valid))
	for i, p := range nodes {
		eventually(t, fmt.Sprintf("the valid command on replica %d", i), func() bool { _, ok := p.fsm.Intent("after-garbage"); return ok })
		if st := p.node.Raft.State(); st == raft.Shutdown {
			t.Fatalf("replica %d is %s", i, st)
		}
		// Every replica applied (and rejected) the same entries; a lost
		// answer retried may add a rejection, never remove one.
		if n := p.fsm.Rejected(); n < uint64(len(garbage)) {
			t.Fatalf("replica %d rejected %d entries, want >= %d", i, n, len(garbage))
		}
	}
	want := dump(nodes[0].fsm)
	for i, p := range nodes[1:] {
		eventually(t, fmt.Sprintf("replica %d equal to replica 0", i+1), func() bool { return bytes.Equal(dump(p.fsm), want) })
	}

	// A follower restarted from its data dir replays the garbage from its
	// log (the crash-loop case) and catches up with a later command.
	var follower *plainNode
	for _, p := range nodes {
		if p.node.Raft.State() != raft.Leader {
			follower = p
			break
		}
	}
	if err := follower.node.Close(); err != nil {
		t.Fatal(err)
	}
	follower.open(t)
	more := valid
	more.Intents = []fsm.NewIntent{{ID: "after-restart", Pods: []string{"p2"}, Spec: valid.Intents[0].Spec}}
	commitOnLeader(t, func() []*raft.Raft { return plainRafts(nodes) }, fsm.MustEncode(fsm.PlanCommitType, more))
	eventually(t, "the restarted follower to catch up", func() bool { _, ok := follower.fsm.Intent("after-restart"); return ok })
	if n := follower.fsm.Rejected(); n < uint64(len(garbage)) {
		t.Fatalf("restarted follower rejected %d replayed entries, want >= %d", n, len(garbage))
	}
	for i, p := range nodes {
		eventually(t, fmt.Sprintf("replica %d to apply the last command", i), func() bool { _, ok := p.fsm.Intent("after-restart"); return ok })
	}
}
