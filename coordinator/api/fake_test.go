package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// fakeCluster is a hand-written Cluster: leader or follower of a fixed
// leader address, committing with a fixed error.
type fakeCluster struct {
	leader    bool
	leaderAdr string
	commitErr error
	commits   int
}

func (c *fakeCluster) IsLeader() bool { return c.leader }
func (c *fakeCluster) Leader() string { return c.leaderAdr }
func (c *fakeCluster) Ready() error   { return nil }
func (c *fakeCluster) Commit(context.Context, []byte) (uint64, error) {
	c.commits++
	return 7, c.commitErr
}

type noReports struct{}

func (noReports) Interruption(string) (fsm.InterruptionReport, bool) {
	return fsm.InterruptionReport{}, false
}

// TestErrorMapping: commit and forwarding failures map to the answers the
// agent's contract defines.
func TestErrorMapping(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // connection refused
	body, _ := json.Marshal(notice("i-1"))
	tests := []struct {
		name      string
		cluster   *fakeCluster
		resolve   map[string]string
		forwarded bool
		code      int
		inBody    string
	}{
		{name: "leadership lost during commit", cluster: &fakeCluster{leader: true, commitErr: cluster.ErrNotLeader}, code: 503, inBody: "leadership changed"},
		{name: "fsm rejects", cluster: &fakeCluster{leader: true, commitErr: fsm.ErrInvalidCommand}, code: 400, inBody: "invalid command"},
		{name: "raft error", cluster: &fakeCluster{leader: true, commitErr: errors.New("disk full")}, code: 500, inBody: "retry"},
		{name: "committed", cluster: &fakeCluster{leader: true}, code: 200, inBody: `"index":7`},
		{name: "forwarded to a non-leader", cluster: &fakeCluster{leaderAdr: "a:1"}, resolve: map[string]string{"a:1": down.URL}, forwarded: true, code: 503, inBody: "not the leader"},
		{name: "leader without HTTP address", cluster: &fakeCluster{leaderAdr: "a:1"}, code: 503, inBody: "no known HTTP address"},
		{name: "leader unreachable", cluster: &fakeCluster{leaderAdr: "a:1"}, resolve: map[string]string{"a:1": down.URL}, code: 503, inBody: "forwarding to the leader"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Cluster: tc.cluster, Reports: noReports{}, Resolve: func(a string) (string, bool) {
				u, ok := tc.resolve[a]
				return u, ok
			}}, zap.NewNop())
			req := httptest.NewRequest(http.MethodPost, "/v1/interruptions", strings.NewReader(string(body)))
			if tc.forwarded {
				req.Header.Set(forwardedHeader, "1")
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.inBody) {
				t.Fatalf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tc.code, tc.inBody)
			}
			if tc.code == 503 && rec.Header().Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		})
	}
}

// TestReportsThrottledPerNode: one node's flood is answered 429 past its
// burst; another node is not affected; a node unknown to the cache yet is
// told to retry; an authenticator that cannot answer is 503, busy is 429.
func TestReportsThrottledPerNode(t *testing.T) {
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	c := &fakeCluster{leader: true}
	s := New(Config{Cluster: c, Reports: noReports{}, Authenticate: testAuthenticate, NodeInstance: testNodeInstance,
		ReportsPerSecond: 1, ReportBurst: 3, Now: func() time.Time { return now }}, zap.NewNop())
	send := func(srv *Server, instance, token string) int {
		body, _ := json.Marshal(notice(instance))
		req := httptest.NewRequest(http.MethodPost, "/v1/interruptions", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	var codes []int
	for range 5 {
		codes = append(codes, send(s, "i-1", tokenOf("ip-i-1")))
	}
	if !slices.Equal(codes, []int{200, 200, 200, 429, 429}) {
		t.Fatalf("codes %v, want three accepted then 429", codes)
	}
	if code := send(s, "i-2", tokenOf("ip-i-2")); code != 200 {
		t.Fatalf("another node got %d", code)
	}
	now = now.Add(time.Second)
	if code := send(s, "i-1", tokenOf("ip-i-1")); code != 200 {
		t.Fatalf("after a second: %d", code)
	}
	if c.commits != 5 {
		t.Fatalf("%d commits, want 5", c.commits)
	}

	unknown := New(Config{Cluster: c, Reports: noReports{}, Authenticate: testAuthenticate,
		NodeInstance: func(string) (string, bool) { return "", false }}, zap.NewNop())
	if code := send(unknown, "i-1", tokenOf("ip-i-1")); code != 503 {
		t.Fatalf("unknown node: %d, want 503", code)
	}
	for _, tc := range []struct {
		err  error
		code int
	}{{ErrBusy, 429}, {errors.New("apiserver down"), 503}, {ErrUnauthenticated, 401}} {
		srv := New(Config{Cluster: c, Reports: noReports{}, NodeInstance: testNodeInstance,
			Authenticate: func(context.Context, string) (Identity, error) { return Identity{}, tc.err }}, zap.NewNop())
		if code := send(srv, "i-1", tokenOf("ip-i-1")); code != tc.code {
			t.Fatalf("authenticator error %v: %d, want %d", tc.err, code, tc.code)
		}
	}
}
