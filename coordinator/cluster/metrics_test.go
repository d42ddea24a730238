package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// The sink is process-wide: every run of the test (-count) reads the one
// registry it was exported to.
var (
	metricsRegOnce sync.Once
	metricsReg     *prometheus.Registry
	metricsRegErr  error
)

func exportedRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	metricsRegOnce.Do(func() {
		metricsReg = prometheus.NewRegistry()
		metricsRegErr = ExportMetrics(metricsReg)
	})
	if metricsRegErr != nil {
		t.Fatal(metricsRegErr)
	}
	return metricsReg
}

// TestRaftAndMemberlistMetricsExported: a raft node that leads and commits
// and two gossiping members show up as joiner_raft_* and
// joiner_memberlist_* series.
func TestRaftAndMemberlistMetricsExported(t *testing.T) {
	reg := exportedRegistry(t)
	port := freePort(t)
	n, err := Open(Config{DataDir: t.TempDir(), Bind: fmt.Sprintf("127.0.0.1:%d", port), Advertise: fmt.Sprintf("localhost:%d", port),
		Tune: steadyRaft}, fsm.New(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	bootstrapAlone(t, n)
	if _, err := (RaftProposer{Raft: n.Raft}).Propose(context.Background(), fsm.MustEncode(fsm.PlanCommitType, testPlan("m1"))); err != nil {
		t.Fatal(err)
	}
	meta := Meta{Role: RoleCoordinator, ID: string(n.ID), RaftAddr: string(n.Addr), Expect: 1}
	a, err := StartDiscovery(DiscoveryConfig{Name: "a", BindAddr: "127.0.0.1"}, meta, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := StartDiscovery(DiscoveryConfig{Name: "b", BindAddr: "127.0.0.1"}, meta, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	var names []string
	eventually(t, "joiner_raft_* and joiner_memberlist_* series", func() bool {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		var r, m bool
		for _, f := range fams {
			names = append(names, f.GetName())
			r = r || strings.HasPrefix(f.GetName(), "joiner_raft_")
			m = m || strings.HasPrefix(f.GetName(), "joiner_memberlist_")
		}
		return r && m
	})
	t.Logf("exported: %s", strings.Join(names, " "))
	for _, name := range names {
		if name == "joiner_raft_peers" {
			t.Error("raft's peer gauge exported as joiner_raft_peers, the API's name (coordinator/api)")
		}
	}
}
