package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

func TestBootstrapConfiguration(t *testing.T) {
	m := func(id string, expect int, has bool) Meta {
		return Meta{Role: RoleCoordinator, ID: id, RaftAddr: "coordinator-" + id + ".svc:7000", Expect: expect, HasState: has}
	}
	tests := []struct {
		name    string
		self    Meta
		servers []Meta
		want    int // servers in the configuration; 0: do not bootstrap
	}{
		{"all visible, fresh", m("b", 3, false), []Meta{m("c", 3, false), m("a", 3, false), m("b", 3, false)}, 3},
		{"too few visible", m("a", 3, false), []Meta{m("a", 3, false), m("b", 3, false)}, 0},
		{"self has state", m("a", 3, true), []Meta{m("a", 3, true), m("b", 3, false), m("c", 3, false)}, 0},
		{"a peer has state", m("a", 3, false), []Meta{m("a", 3, false), m("b", 3, true), m("c", 3, false)}, 0},
		{"expect mismatch", m("a", 3, false), []Meta{m("a", 3, false), m("b", 5, false), m("c", 3, false)}, 0},
		{"bootstrap disabled", m("a", 0, false), []Meta{m("a", 0, false)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := BootstrapConfiguration(tc.self, tc.servers)
			if got := len(cfg.Servers); ok != (tc.want > 0) || got != tc.want {
				t.Fatalf("got %d servers (ok=%v), want %d", got, ok, tc.want)
			}
			if ok && cfg.Servers[0].ID != "a" {
				t.Fatalf("configuration not sorted: %v", cfg.Servers)
			}
		})
	}
}

// TestBootstrapExpectOverMemberlist: three coordinators on loopback, raft
// advertising DNS names, find each other over memberlist, bootstrap once
// all three are visible, elect a leader and replicate.
func TestBootstrapExpectOverMemberlist(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 raft nodes and memberlist on loopback; skipped under -short")
	}
	type server struct {
		node *Node
		fsm  *fsm.FSM
		disc *Discovery
		meta Meta
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.disc.Close()
			s.node.Close()
		}
	}()
	for range 3 {
		port := freePort(t)
		f := fsm.New()
		n, err := Open(Config{DataDir: t.TempDir(), Bind: fmt.Sprintf("127.0.0.1:%d", port), Advertise: fmt.Sprintf("localhost:%d", port),
			Tune: steadyRaft}, f, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		meta := Meta{Role: RoleCoordinator, ID: string(n.ID), RaftAddr: string(n.Addr), Expect: 3}
		d, err := StartDiscovery(DiscoveryConfig{Name: string(n.ID), BindAddr: "127.0.0.1"}, meta, zap.NewNop())
		if err != nil {
			n.Close()
			t.Fatal(err)
		}
		servers = append(servers, &server{node: n, fsm: f, disc: d, meta: meta})
	}
	for _, s := range servers[1:] {
		if _, err := s.disc.Join([]string{servers[0].disc.Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = RunBootstrap(ctx, s.node, s.disc, s.meta, 50*time.Millisecond, zap.NewNop())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
	}
	var leader *server
	for leader == nil && ctx.Err() == nil {
		for _, s := range servers {
			if s.node.Raft.State() == raft.Leader {
				leader = s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	cfg := leader.node.Raft.GetConfiguration()
	if err := cfg.Error(); err != nil || len(cfg.Configuration().Servers) != 3 {
		t.Fatalf("configuration %v, %v", cfg.Configuration(), err)
	}
	cmd := testPlan("i1")
	commitOnLeader(t, func() []*raft.Raft {
		var out []*raft.Raft
		for _, s := range servers {
			out = append(out, s.node.Raft)
		}
		return out
	}, fsm.MustEncode(fsm.PlanCommitType, cmd))
	for _, s := range servers {
		for ctx.Err() == nil {
			if _, ok := s.fsm.Intent("i1"); ok {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, ok := s.fsm.Intent("i1"); !ok {
			t.Fatalf("server %s did not replicate", s.meta.ID)
		}
	}
}
