package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/api"
	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/golden"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// startStatusServer runs a one-node raft (in memory) with a real FSM holding
// a small history, behind the real coordinator API handler.
func startStatusServer(t *testing.T, tlsDir string) *httptest.Server {
	t.Helper()
	return startStatusServerWith(t, tlsDir, statusServerOptions{host: "127.0.0.1"})
}

// statusServerOptions: the address the server listens on (and its
// certificate names), the bearer-token authenticator of /v1/status, and a
// wrapper of its handler.
type statusServerOptions struct {
	host       string
	statusAuth api.Authenticator
	wrap       func(http.Handler) http.Handler
}

func startStatusServerWith(t *testing.T, tlsDir string, o statusServerOptions) *httptest.Server {
	t.Helper()
	f := fsm.New()
	conf := raft.DefaultConfig()
	conf.LocalID = "coordinator-0"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	_, trans := raft.NewInmemTransport("coordinator-0.joiner:7000")
	store := raft.NewInmemStore()
	r, err := raft.NewRaft(conf, f, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: trans.LocalAddr()}}}).Error(); err != nil {
		t.Fatal(err)
	}
	for r.State() != raft.Leader {
		time.Sleep(5 * time.Millisecond)
	}
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	cand := func(ty string, price float64) cloud.Candidate {
		return cloud.Candidate{InstanceType: ty, Zone: "us-east-1a", CapacityType: "spot", Price: price}
	}
	for _, cmd := range [][]byte{
		fsm.MustEncode(fsm.PlanCommitType, fsm.PlanCommit{At: t0, Intents: []fsm.NewIntent{
			{ID: "intent-a", Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-aaaaa", Candidates: []cloud.Candidate{cand("m5.large", 0.0431), cand("m5.xlarge", 0.09)}}}, Pods: []string{"p1", "p2"}},
			{ID: "intent-b", Spec: fsm.LaunchSpec{LaunchSpec: cloud.LaunchSpec{NodePool: "default", NodeClaim: "default-bbbbb", Candidates: []cloud.Candidate{cand("c5.large", 0.04)}}}, Pods: []string{"p3"}},
		}}),
		fsm.MustEncode(fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: "intent-a", Attempt: 1, At: t0}),
		fsm.MustEncode(fsm.LaunchResultType, fsm.LaunchResult{IntentID: "intent-a", Attempt: 1, At: t0, Launched: &fsm.Launched{
			InstanceID: "i-0aaa", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", Price: 0.0431, LaunchedAt: t0}}),
		fsm.MustEncode(fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: "i-0aaa", State: fsm.InstanceReady, NodeName: "ip-10-0-0-1", At: t0}),
	} {
		if err := r.Apply(cmd, 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	c := api.RaftCluster{Raft: r, ID: conf.LocalID}
	ca, err := cluster.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serving, err := cluster.TLSFromCA(ca, "coordinator-0", []string{o.host})
	if err != nil {
		t.Fatal(err)
	}
	auth := func(context.Context, string) (api.Identity, error) { return api.Identity{}, api.ErrUnauthenticated }
	var h http.Handler = api.New(api.Config{Cluster: c, Reports: f, Raft: c, State: f, Authenticate: auth, StatusAuthenticate: o.statusAuth}, zap.NewNop())
	if o.wrap != nil {
		h = o.wrap(h)
	}
	srv := httptest.NewUnstartedServer(h)
	if o.host != "127.0.0.1" {
		ln, err := net.Listen("tcp", net.JoinHostPort(o.host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		_ = srv.Listener.Close()
		srv.Listener = ln
	}
	srv.TLS = serving.HTTPServerConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// What the coordinator writes into its data dir for `joiner status`.
	tool, err := cluster.TLSFromCA(ca, "tool", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.WriteFiles(tlsDir, ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	return srv
}

func runStatus(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newStatusCmd(&globals{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestStatusCommand: `joiner status` against the real API handler and FSM.
func TestStatusCommand(t *testing.T) {
	tlsDir := filepath.Join(t.TempDir(), "tls")
	srv := startStatusServer(t, tlsDir)

	out, err := runStatus(t, "--addr", srv.URL, "--tls-dir", tlsDir)
	if err != nil {
		t.Fatal(err)
	}
	// Columns are aligned as kubectl aligns them; compare with single spaces.
	flat := regexp.MustCompile(` +`).ReplaceAllString(out, " ")
	for _, want := range []string{
		"Served by coordinator-0 (leader)",
		"coordinator-0 coordinator-0.joiner:7000 Voter leader * (this replica)",
		"intent-a default-aaaaa default launched 1 i-0aaa 2 m5.large,m5.xlarge",
		"intent-b default-bbbbb default pending 0 - 1 c5.large",
		"i-0aaa m5.large us-east-1a spot 0.0431 ready ip-10-0-0-1",
		"1 live instance(s) (m5.large x1), $0.0431/hour",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = runStatus(t, "--addr", srv.URL, "--tls-dir", tlsDir, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if out != "launchintent/intent-a\nlaunchintent/intent-b\ninstance/i-0aaa\n" {
		t.Errorf("-o name:\n%s", out)
	}
	out, err = runStatus(t, "--addr", srv.URL, "--tls-dir", tlsDir, "-o", "yaml")
	if err != nil || !strings.Contains(out, "servedBy: coordinator-0") {
		t.Errorf("-o yaml: %v\n%s", err, out)
	}

	out, err = runStatus(t, "--addr", srv.URL, "--tls-dir", tlsDir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	if st.ServedBy != "coordinator-0" || len(st.Intents) != 2 || len(st.Instances) != 1 || st.Raft.LeaderID != "coordinator-0" {
		t.Fatalf("json status %+v", st)
	}

	// Without the client certificate: a clear error naming the directory.
	empty := t.TempDir()
	if _, err := runStatus(t, "--addr", srv.URL, "--tls-dir", empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("no certificate: %v", err)
	}
	if _, err := runStatus(t, "--addr", srv.URL, "--tls-dir", tlsDir, "-o", "xml"); err == nil || !strings.Contains(err.Error(), "-o") {
		t.Fatalf("bad -o: %v", err)
	}
}

func TestStatusUnreachableNamesAddress(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	addr := down.URL
	down.Close()
	_, err := runStatus(t, "--addr", addr)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("error %v, want one naming %s", err, addr)
	}
}

// TestRenderStatusGolden pins the table layout (go test -run
// TestRenderStatusGolden -update rewrites testdata/status.golden).
func TestRenderStatusGolden(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st := api.Status{
		ServedBy: "b", Raft: api.RaftStatus{ID: "b", State: "Follower", LeaderID: "a", LeaderAddress: "coordinator-0.joiner:7000",
			Term: 3, LastIndex: 42, AppliedIndex: 41, Peers: []api.Peer{
				{ID: "a", Address: "coordinator-0.joiner:7000", Suffrage: "Voter", Voter: true, Leader: true},
				{ID: "b", Address: "coordinator-1.joiner:7000", Suffrage: "Voter", Voter: true},
				{ID: "c", Address: "coordinator-2.joiner:7000", Suffrage: "Nonvoter"},
			}},
		Intents: []api.Intent{
			{ID: "i1", NodeClaim: "default-x", NodePool: "default", State: "launched", Attempt: 2, InstanceID: "i-1", Pods: 12, CreatedAt: t0,
				InstanceTypes: []string{"m5.large", "m5a.large", "m6i.large", "c5.xlarge", "r5.large"}},
			{ID: "i2", NodeClaim: "default-y", NodePool: "default", State: "cancelled", LastError: "no capacity"},
		},
		Instances: []api.Instance{
			{ID: "i-1", IntentID: "i1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", Price: 0.0431, State: "ready", Node: "ip-1", LaunchedAt: t0},
			{ID: "i-2", InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: "on-demand", Price: 0.096, State: "terminating", Node: "ip-2"},
			{ID: "i-3", InstanceType: "c5.large", Zone: "us-east-1b", CapacityType: "on-demand", Price: 0.085, State: "terminated"},
		},
		Terminations:           []fsm.TerminationIntent{{ID: "term-i-2", InstanceID: "i-2", Reason: "interrupted", State: fsm.TerminationPending}},
		UnhandledInterruptions: []fsm.InterruptionReport{{ID: "i-2/spot-interruption/t", InstanceID: "i-2", Kind: "spot-interruption", NoticeTime: t0}},
		// Known facts, and the last refresh's error.
		Cluster: &api.ClusterFacts{Name: "demo", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", KubernetesVersion: "1.34",
			ServiceCIDR: "172.20.0.0/16", ClusterDNS: "172.20.0.10", IPFamily: "ipv4", Overridden: []string{"certificate authority"},
			DiscoveredAt: &t0, Error: "describing EKS cluster demo: operation error EKS: DescribeCluster, ThrottlingException: Rate exceeded"},
	}
	for _, tc := range []struct {
		file string
		wide bool
	}{{"status.golden", false}, {"status-wide.golden", true}} {
		var b bytes.Buffer
		if err := renderStatus(&b, st, false, tc.wide); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", tc.file), b.Bytes(), *updateGolden)
	}
}
