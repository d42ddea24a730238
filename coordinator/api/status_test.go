package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/observe"
	"github.com/joiner-dev/joiner/test/poll"
)

// seedCommands is a small history: two intents (one launched and ready,
// one pending), a second instance terminating, and an unhandled notice.
func seedCommands() [][]byte {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	spec := func(claim string, types ...string) fsm.LaunchSpec {
		s := fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: claim}}
		for _, ty := range types {
			s.Candidates = append(s.Candidates, cloud.Candidate{InstanceType: ty, Zone: "us-east-1a", CapacityType: "spot", Price: 0.1})
		}
		return s
	}
	return [][]byte{
		fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: t0, Intents: []fsm.NewIntent{
			{ID: "intent-a", Spec: spec("default-aaaaa", "m5.large", "m5.xlarge"), Pods: []string{"p1", "p2", "p3"}},
			{ID: "intent-b", Spec: spec("default-bbbbb", "c5.large"), Pods: []string{"p4"}},
			{ID: "intent-c", Spec: spec("default-ccccc", "r5.large"), Pods: []string{"p5"}},
		}}),
		fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "intent-a", Attempt: 1, At: t0}),
		fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent-a", Attempt: 1, At: t0, Launched: &fsm.Launched{
			InstanceID: "i-aaa", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", Price: 0.0431, LaunchedAt: t0}}),
		fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: "i-aaa", State: fsm.InstanceReady, NodeName: "ip-10-0-0-1", At: t0}),
		fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "intent-c", Attempt: 1, At: t0}),
		fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent-c", Attempt: 1, At: t0, Launched: &fsm.Launched{
			InstanceID: "i-ccc", InstanceType: "r5.large", Zone: "us-east-1b", CapacityType: "on-demand", Price: 0.126, LaunchedAt: t0}}),
		fsm.MustEncode(fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-i-ccc", InstanceID: "i-ccc", Reason: "interrupted", At: t0}),
		fsm.MustEncode(fsm.InterruptionReportType, fsm.InterruptionReportCmd{Report: fsm.InterruptionReport{
			ID: "i-ccc/spot-interruption/x", InstanceID: "i-ccc", Kind: "spot-interruption", NoticeTime: t0, ReceivedAt: t0}}),
	}
}

// apply commits cmds in order on whichever replica leads. A command whose
// answer was lost to an election is sent again; the FSM refusing the
// repeat as out of order means the first one committed.
func apply(t *testing.T, rs []*replica, cmds [][]byte) {
	t.Helper()
	for _, c := range cmds {
		retried := false
		for deadline := time.Now().Add(testWait); ; {
			l := currentLeader(rs)
			if l == nil {
				if time.Now().After(deadline) {
					t.Fatal("no leader")
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			f := l.raft.Apply(c, 30*time.Second)
			if err := f.Error(); err != nil {
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				retried = true
				continue
			}
			if err, ok := f.Response().(error); ok && err != nil &&
				!(retried && (errors.Is(err, fsm.ErrAttemptOutOfOrder) || errors.Is(err, fsm.ErrStaleAttempt) || errors.Is(err, fsm.ErrBackwardTransition))) {
				t.Fatal(err)
			}
			break
		}
	}
}

// TestStatusFromLeaderAndFollower: every replica answers /v1/status from
// its own FSM, says who served it, lists the raft peers with the leader
// marked, and requires the bearer token.
func TestStatusFromLeaderAndFollower(t *testing.T) {
	rs := startCluster(t, 3, true)
	apply(t, rs, seedCommands())
	// Who leads is read after the commands: an election may have moved it.
	leader, follower := leaderAndFollower(t, rs)
	want := leader.fsm.LastIndex()
	eventually(t, "the follower to apply the history", func() bool { return follower.fsm.LastIndex() >= want })

	ctx := context.Background()
	for _, r := range []*replica{leader, follower} {
		st, err := FetchStatus(ctx, peerClient, r.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if st.ServedBy != string(r.id) || st.ServedByLeader != (r == leader) || st.Raft.ID != string(r.id) {
			t.Fatalf("served by %s (leader %v), want %s (leader %v)", st.ServedBy, st.ServedByLeader, r.id, r == leader)
		}
		if st.Raft.LeaderID != string(leader.id) || st.Raft.LeaderAddress != string(leader.trans.LocalAddr()) {
			t.Fatalf("leader %s at %s, want %s", st.Raft.LeaderID, st.Raft.LeaderAddress, leader.id)
		}
		leaders := 0
		for _, p := range st.Raft.Peers {
			if !p.Voter || p.Suffrage != "Voter" {
				t.Fatalf("peer %+v not a voter", p)
			}
			if p.Leader {
				leaders++
				if p.ID != string(leader.id) {
					t.Fatalf("peer %s marked leader, want %s", p.ID, leader.id)
				}
			}
		}
		if len(st.Raft.Peers) != 3 || leaders != 1 {
			t.Fatalf("peers %+v", st.Raft.Peers)
		}
		if st.Raft.AppliedIndex < want || st.Raft.LastIndex < want {
			t.Fatalf("indexes %+v, want >= %d", st.Raft, want)
		}
		if len(st.Intents) != 3 || st.Intents[0].ID != "intent-a" || st.Intents[0].Pods != 3 || st.Intents[0].State != "launched" ||
			st.Intents[0].NodeClaim != "default-aaaaa" || strings.Join(st.Intents[0].InstanceTypes, ",") != "m5.large,m5.xlarge" ||
			st.Intents[1].State != "pending" || st.Intents[1].Attempt != 0 {
			t.Fatalf("intents %+v", st.Intents)
		}
		if len(st.Instances) != 2 || st.Instances[0].ID != "i-aaa" || st.Instances[0].State != "ready" || st.Instances[0].Node != "ip-10-0-0-1" ||
			st.Instances[1].State != "terminating" || st.Instances[1].CapacityType != "on-demand" {
			t.Fatalf("instances %+v", st.Instances)
		}
		if len(st.Terminations) != 1 || st.Terminations[0].InstanceID != "i-ccc" || len(st.UnhandledInterruptions) != 1 {
			t.Fatalf("terminations %+v, interruptions %+v", st.Terminations, st.UnhandledInterruptions)
		}
	}
	// An agent (no client certificate) does not read the state.
	if _, err := FetchStatus(ctx, agentClient, follower.srv.URL); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("status without a client certificate: %v", err)
	}
	// The autopilot view carries raft only.
	stats, err := StatsFetcher(peerClient, func(string) (string, bool) { return follower.srv.URL, true })(ctx, follower.id, "x")
	if err != nil || stats.LastIndex < want || stats.LastTerm == 0 {
		t.Fatalf("stats %+v, %v", stats, err)
	}
	if _, err := StatsFetcher(peerClient, func(string) (string, bool) { return follower.srv.URL, true })(ctx, leader.id, "x"); err == nil {
		t.Fatal("stats of the wrong server accepted")
	}

	// State gauges, read from each replica's FSM at scrape time.
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"joiner_launch_intents", map[string]string{"state": "launched"}, 2},
		{"joiner_launch_intents", map[string]string{"state": "pending"}, 1},
		{"joiner_launch_intents", map[string]string{"state": "failed"}, 0},
		{"joiner_instances", map[string]string{"state": "ready"}, 1},
		{"joiner_instances", map[string]string{"state": "terminating"}, 1},
		{"joiner_raft_peers", map[string]string{"suffrage": "voter"}, 3},
	} {
		if got, ok := observe.Sample(t, follower.reg, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (served %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if got, ok := observe.Sample(t, follower.reg, "joiner_raft_last_index", nil); !ok || got < float64(want) {
		t.Errorf("joiner_raft_last_index %v (served %v), want >= %d", got, ok, want)
	}
}

func TestFetchStatusUnreachableNamesAddress(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	_, err := FetchStatus(context.Background(), http.DefaultClient, down.URL)
	if err == nil || !strings.Contains(err.Error(), down.URL) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("error %v, want one naming %s", err, down.URL)
	}
}

func TestStatusNotWired(t *testing.T) {
	s := New(Config{Cluster: &fakeCluster{}, Reports: noReports{}}, zap.NewNop())
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, StatusPath, nil))
	if rec.Code != http.StatusNotImplemented {
		t.Fatalf("got %d", rec.Code)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, testWait, 10*time.Millisecond, what, cond)
}
