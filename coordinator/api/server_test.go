package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/agent/report"
	agentv1 "github.com/joiner-dev/joiner/api/agent/v1"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/raftmem"
)

// The test PKI: one CA; every replica serves TLS with its own leaf and
// forwards with it; agentClient trusts the CA and presents nothing (an
// agent), peerClient presents a leaf (a coordinator or `joiner status`).
var (
	testCA      = mustCA()
	agentClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testCA.Pool()}}}
	peerClient  = &http.Client{Transport: &http.Transport{TLSClientConfig: mustTLS("peer").HTTPClientConfig()}}
)

func mustCA() *cluster.CA {
	ca, err := cluster.NewCA("test-ca", time.Now())
	if err != nil {
		panic(err)
	}
	return ca
}

func mustTLS(name string) *cluster.TLS {
	t, err := cluster.TLSFromCA(testCA, name, []string{"127.0.0.1"})
	if err != nil {
		panic(err)
	}
	return t
}

// tokenOf is an agent's bearer token for node; the test authenticator
// maps it back (the coordinator's real one asks the API server).
func tokenOf(node string) string { return "agent-of-" + node }

const devToken = "dev-any-node"

func testAuthenticate(_ context.Context, token string) (Identity, error) {
	if token == devToken {
		return Identity{User: "dev", AnyNode: true}, nil
	}
	node, ok := strings.CutPrefix(token, "agent-of-")
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	return Identity{User: "system:serviceaccount:kube-system:joiner-agent", Node: node}, nil
}

// testNodeInstance: node ip-<instance> runs <instance>.
func testNodeInstance(node string) (string, bool) {
	return strings.CutPrefix(node, "ip-")
}

type replica struct {
	id    raft.ServerID
	trans *raft.InmemTransport
	fsm   *fsm.FSM
	raft  *raft.Raft
	reg   *prometheus.Registry
	srv   *httptest.Server
}

// startCluster runs n raft replicas on InmemTransport, each with its API
// server; bootstrap=false leaves them without a configuration (no leader).
func startCluster(t *testing.T, n int, bootstrap bool) []*replica {
	t.Helper()
	var rs []*replica
	urls := map[string]string{}
	var mu sync.Mutex
	resolve := func(addr string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		u, ok := urls[addr]
		return u, ok
	}
	var cfg raft.Configuration
	for i := range n {
		r := &replica{id: raft.ServerID(fmt.Sprintf("n%d", i)), fsm: fsm.New(), reg: prometheus.NewRegistry()}
		_, r.trans = raft.NewInmemTransport(raft.ServerAddress(r.id))
		cfg.Servers = append(cfg.Servers, raft.Server{ID: r.id, Address: r.trans.LocalAddr()})
		rs = append(rs, r)
	}
	for _, a := range rs {
		for _, b := range rs {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
	for _, r := range rs {
		store := raft.NewInmemStore()
		rf, err := raft.NewRaft(raftmem.Config(r.id), r.fsm, store, store, raft.NewInmemSnapshotStore(), r.trans)
		if err != nil {
			t.Fatal(err)
		}
		r.raft = rf
		c := RaftCluster{Raft: rf, ID: r.id}
		m, err := NewMetrics(r.reg, c.IsLeader, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := RegisterStateMetrics(r.reg, c, r.fsm); err != nil {
			t.Fatal(err)
		}
		tl := mustTLS(string(r.id))
		r.srv = httptest.NewUnstartedServer(New(Config{Cluster: c, Reports: r.fsm, Raft: c, State: r.fsm,
			Authenticate: testAuthenticate, NodeInstance: testNodeInstance, Resolve: resolve,
			Client:   &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tl.HTTPClientConfig()}},
			Gatherer: r.reg, Metrics: m, ReportBurst: 1000}, zap.NewNop()))
		r.srv.TLS = tl.HTTPServerConfig()
		r.srv.StartTLS()
		mu.Lock()
		urls[string(r.trans.LocalAddr())] = r.srv.URL
		mu.Unlock()
		t.Cleanup(func() {
			r.srv.Close()
			_ = rf.Shutdown().Error()
		})
	}
	if bootstrap {
		if err := rs[0].raft.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

// testWait bounds every wait for the cluster (elections under load).
const testWait = 90 * time.Second

// currentLeader is the replica that leads now (nil during an election).
func currentLeader(rs []*replica) *replica {
	for _, r := range rs {
		if r.raft.State() == raft.Leader {
			return r
		}
	}
	return nil
}

// leaderFSM is the current leader's FSM, waiting out an election.
func leaderFSM(t *testing.T, rs []*replica) *fsm.FSM {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		if l := currentLeader(rs); l != nil {
			return l.fsm
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leaderAndFollower(t *testing.T, rs []*replica) (leader, follower *replica) {
	t.Helper()
	for deadline := time.Now().Add(testWait); time.Now().Before(deadline); {
		for _, r := range rs {
			if r.raft.State() == raft.Leader {
				leader = r
			}
		}
		if leader != nil {
			for _, r := range rs {
				if r != leader {
					if addr, _ := r.raft.LeaderWithID(); addr == leader.trans.LocalAddr() {
						return leader, r
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader known to a follower")
	return nil, nil
}

func notice(instance string) agentv1.Report {
	t0 := time.Date(2026, 11, 21, 12, 2, 0, 0, time.UTC)
	return agentv1.Report{ID: instance + "/spot-interruption/" + t0.Format(time.RFC3339), Kind: "spot-interruption",
		InstanceID: instance, Node: "ip-" + instance, Action: "terminate", NoticeTime: t0, Deadline: t0, ObservedAt: t0.Add(-time.Minute)}
}

func counter(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "joiner_interruption_reports_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestAgentReportsCommitOncePerNotice: the real agent client, sent to a
// follower (forwarded) and to the leader, gets one committed report per
// notice ID; repeats are answered duplicate with the original index.
func TestAgentReportsCommitOncePerNotice(t *testing.T) {
	rs := startCluster(t, 3, true)
	leader, follower := leaderAndFollower(t, rs)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	client := func(base string) *report.Client {
		// A development token: these reports are about several nodes.
		c, err := report.NewClient(zap.NewNop(), report.Options{Endpoints: []string{base}, Token: devToken, HTTPClient: agentClient,
			RetryBase: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	viaFollower, viaLeader := client(follower.srv.URL), client(leader.srv.URL)

	tests := []struct {
		name     string
		c        *report.Client
		rep      agentv1.Report
		wantDup  bool
		firstIdx string // key of an earlier ack whose index must match
	}{
		{name: "new via follower", c: viaFollower, rep: notice("i-1")},
		{name: "repeat via follower", c: viaFollower, rep: notice("i-1"), wantDup: true, firstIdx: "i-1"},
		{name: "repeat via leader", c: viaLeader, rep: notice("i-1"), wantDup: true, firstIdx: "i-1"},
		{name: "new via leader", c: viaLeader, rep: notice("i-2")},
		{name: "repeat of leader's via follower", c: viaFollower, rep: notice("i-2"), wantDup: true, firstIdx: "i-2"},
	}
	// An answer lost when leadership moves mid-commit is retried by the
	// client and answered duplicate: that is the protocol working, so a
	// "new" report may come back duplicate once a replica said unavailable.
	unavailable := func() bool {
		for _, r := range rs {
			if counter(t, r.reg, ResultUnavailable) > 0 {
				return true
			}
		}
		return false
	}
	first := map[string]uint64{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ack, err := tc.c.Deliver(ctx, tc.rep)
			if err != nil {
				t.Fatal(err)
			}
			if ack.ID != tc.rep.ID || (ack.Duplicate != tc.wantDup && !(ack.Duplicate && unavailable())) || ack.Index == 0 {
				t.Fatalf("ack %+v, want id %s duplicate %v", ack, tc.rep.ID, tc.wantDup)
			}
			if tc.firstIdx != "" && ack.Index != first[tc.firstIdx] {
				t.Fatalf("duplicate index %d, want the original %d", ack.Index, first[tc.firstIdx])
			}
			if tc.firstIdx == "" {
				first[tc.rep.InstanceID] = ack.Index
			}
			// Acked only after the commit: the leader's FSM has it at that index.
			got, ok := leaderFSM(t, rs).Interruption(tc.rep.ID)
			if !ok || got.ModifyIndex != ack.Index {
				t.Fatalf("leader FSM has %+v (found %v), want index %d", got, ok, ack.Index)
			}
		})
	}

	// Concurrent repeats of one notice through every replica: one commit.
	var wg sync.WaitGroup
	acks := make(chan agentv1.Ack, 9)
	for i := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ack, err := client(rs[i%3].srv.URL).Deliver(ctx, notice("i-3"))
			if err != nil {
				t.Error(err)
				return
			}
			acks <- ack
		}()
	}
	wg.Wait()
	close(acks)
	var fresh int
	idx := map[uint64]bool{}
	for a := range acks {
		idx[a.Index] = true
		if !a.Duplicate {
			fresh++
		}
	}
	if fresh > 1 || (fresh == 0 && !unavailable()) || len(idx) != 1 {
		t.Fatalf("concurrent repeats: %d non-duplicate acks, indexes %v; want exactly 1 and one index", fresh, idx)
	}
	if n := len(leaderFSM(t, rs).Interruptions()); n != 3 {
		t.Fatalf("%d reports committed, want 3", n)
	}
	committed, forwarded := 0.0, 0.0
	for _, r := range rs {
		committed += counter(t, r.reg, ResultCommitted)
		forwarded += counter(t, r.reg, ResultForwarded)
	}
	if committed != 3 {
		t.Fatalf("committed counters sum to %v, want 3 (one per notice)", committed)
	}
	if forwarded < 3 {
		t.Fatalf("forwarded counters sum to %v, want >= 3", forwarded)
	}
}

func post(t *testing.T, url, auth, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+agentv1.Path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := agentClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRejectsAndUnavailable(t *testing.T) {
	rs := startCluster(t, 3, true)
	leader, follower := leaderAndFollower(t, rs)
	good, _ := json.Marshal(notice("i-9"))
	// The caller's own node, but an instance ID that is not that node's
	// (the attack: another node's instance behind one's own node name).
	f := notice("i-9")
	f.InstanceID = "i-8"
	forged, _ := json.Marshal(f)
	token := tokenOf("ip-i-9")
	lonely := startCluster(t, 1, false)[0] // no configuration: never a leader

	tests := []struct {
		name      string
		url, auth string
		body      string
		code      int
		inBody    string
	}{
		{name: "no token", url: leader.srv.URL, body: string(good), code: 401, inBody: "token"},
		{name: "wrong token", url: follower.srv.URL, auth: "Bearer nope", body: string(good), code: 401, inBody: "token"},
		{name: "not bearer", url: leader.srv.URL, auth: "Basic " + token, body: string(good), code: 401},
		{name: "another node's report", url: leader.srv.URL, auth: "Bearer " + tokenOf("ip-i-8"), body: string(good), code: 403, inBody: "own node"},
		{name: "another node's report via follower", url: follower.srv.URL, auth: "Bearer " + tokenOf("ip-i-8"), body: string(good), code: 403, inBody: "own node"},
		{name: "own node, another instance", url: leader.srv.URL, auth: "Bearer " + tokenOf("ip-i-9"), body: string(forged), code: 403, inBody: "runs instance"},
		{name: "missing id", url: leader.srv.URL, auth: "Bearer " + token, body: `{"kind":"spot-interruption","instanceID":"i-1","node":"n","deadline":"2026-11-21T12:02:00Z"}`, code: 400, inBody: "id: must be set"},
		{name: "missing deadline via follower", url: follower.srv.URL, auth: "Bearer " + token, body: `{"id":"x","kind":"k","instanceID":"i-1","node":"n"}`, code: 400, inBody: "deadline: must be set"},
		{name: "wrong type", url: leader.srv.URL, auth: "Bearer " + token, body: `{"id":7}`, code: 400, inBody: "id: want a string"},
		{name: "bad time", url: leader.srv.URL, auth: "Bearer " + token, body: `{"id":"x","deadline":"tomorrow"}`, code: 400, inBody: "tomorrow"},
		{name: "not json", url: leader.srv.URL, auth: "Bearer " + token, body: `{`, code: 400, inBody: "body:"},
		{name: "no leader", url: lonely.srv.URL, auth: "Bearer " + token, body: string(good), code: 503, inBody: "no raft leader"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, tc.url, tc.auth, tc.body)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.inBody) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tc.code, tc.inBody)
			}
			if tc.code == 503 && resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("Retry-After %q, want 1", resp.Header.Get("Retry-After"))
			}
		})
	}
	if n := len(leader.fsm.Interruptions()); n != 0 {
		t.Fatalf("%d reports committed by rejected requests", n)
	}
}

// TestHealthReadyMetrics: /healthz and /readyz answer anyone (probes);
// /metrics a client with the coordinators' CA certificate, and a caller
// with neither certificate nor token gets 401.
func TestHealthReadyMetrics(t *testing.T) {
	rs := startCluster(t, 3, true)
	lonely := startCluster(t, 1, false)[0]
	// Probes need no certificate; /metrics does (or a token: metricsauth_test).
	get := func(url string) (int, string) {
		c := agentClient
		if strings.HasSuffix(url, "/metrics") {
			c = peerClient
		}
		return kubetest.Scrape(t.Context(), t, c, url, "")
	}
	type check struct {
		url    string
		code   int
		inBody string
	}
	// Who leads is read again on each try: an election under load moves it.
	var failed []string
	for deadline := time.Now().Add(testWait); ; {
		leader, follower := leaderAndFollower(t, rs)
		failed = nil
		for _, tc := range []check{
			{lonely.srv.URL + "/healthz", 200, "ok"},
			{lonely.srv.URL + "/readyz", 503, "no raft leader"},
			{follower.srv.URL + "/readyz", 200, "ok"},
			{leader.srv.URL + "/metrics", 200, "joiner_raft_leader 1"},
			{follower.srv.URL + "/metrics", 200, "joiner_raft_leader 0"},
			{follower.srv.URL + "/metrics", 200, `joiner_interruption_reports_total{result="committed"} 0`},
		} {
			if code, body := get(tc.url); code != tc.code || !strings.Contains(body, tc.inBody) {
				failed = append(failed, fmt.Sprintf("GET %s: %d %q, want %d containing %q", tc.url, code, body, tc.code, tc.inBody))
			}
		}
		if resp, err := agentClient.Get(follower.srv.URL + "/metrics"); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("/metrics without a certificate or token: %v %v, want 401", resp, err)
		} else {
			resp.Body.Close()
		}
		if len(failed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(strings.Join(failed, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPortResolver(t *testing.T) {
	r := PortResolver("http", "8080")
	if got, ok := r("coordinator-1.joiner-coordinator:7000"); !ok || got != "http://coordinator-1.joiner-coordinator:8080" {
		t.Fatalf("got %q %v", got, ok)
	}
	if _, ok := r("n0"); ok {
		t.Fatal("resolved an address without a port")
	}
}

// TestReportFloodThroughRealListeners: one node's agent floods the real
// TLS listeners of a 3-replica cluster with 1300 distinct forged notices
// about its own instance: past its burst it is answered 429 (Retry-After),
// and the replicated state keeps at most fsm.MaxUnhandledReportsPerInstance of
// them, whatever the count.
func TestReportFloodThroughRealListeners(t *testing.T) {
	rs := startCluster(t, 3, true)
	leader, _ := leaderAndFollower(t, rs)
	token := tokenOf("ip-i-1")
	throttled := 0
	for i := range 1300 {
		rep := notice("i-1")
		rep.ID = fmt.Sprintf("i-1/spot-interruption/%d", i)
		body, _ := json.Marshal(rep)
		resp, _ := post(t, leader.srv.URL, "Bearer "+token, string(body))
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			throttled++
		case http.StatusServiceUnavailable: // an election under load
		default:
			t.Fatalf("report %d: %d", i, resp.StatusCode)
		}
	}
	if throttled == 0 {
		t.Fatal("1300 reports from one node in a burst of 1000: none throttled")
	}
	n := 0
	for _, r := range leaderFSM(t, rs).Interruptions() {
		if r.InstanceID == "i-1" && !r.Handled {
			n++
		}
	}
	if n == 0 || n > fsm.MaxUnhandledReportsPerInstance {
		t.Fatalf("%d unhandled reports kept for one instance, want 1..%d", n, fsm.MaxUnhandledReportsPerInstance)
	}
}
