package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

type emptyRaft struct{}

func (emptyRaft) RaftStatus() (RaftStatus, error) { return RaftStatus{ID: "c-0", State: "Leader"}, nil }

type emptyState struct{}

func (emptyState) Intents() []fsm.LaunchIntent             { return nil }
func (emptyState) Instances() []fsm.Instance               { return nil }
func (emptyState) Interruptions() []fsm.InterruptionReport { return nil }
func (emptyState) Terminations() []fsm.TerminationIntent   { return nil }
func (emptyState) LastIndex() uint64                       { return 7 }
func (emptyState) Interruption(string) (fsm.InterruptionReport, bool) {
	return fsm.InterruptionReport{}, false
}

// TestStatusBearerTokens: without a coordinator certificate, /v1/status
// takes a bearer token from Authorization or, through the API server's
// proxy (which drops Authorization), from X-Joiner-Authorization, and maps
// the authenticator's answer to 200, 401, 403, 429 or 503; a review that
// failed is logged, never shown to the caller.
func TestStatusBearerTokens(t *testing.T) {
	statusAuth := func(_ context.Context, token string) (Identity, error) {
		switch token {
		case "alice":
			return Identity{User: "alice"}, nil
		case "bob":
			return Identity{}, fmt.Errorf("%w: user \"bob\" is not the status ServiceAccount", ErrForbidden)
		case "busy":
			return Identity{}, ErrBusy
		case "broken":
			return Identity{}, errors.New("the coordinator's ServiceAccount may not create tokenreviews.authentication.k8s.io")
		}
		return Identity{}, fmt.Errorf("%w: token not recognised", ErrUnauthenticated)
	}
	agentsOnly := func(context.Context, string) (Identity, error) { return Identity{}, ErrUnauthenticated }
	tests := []struct {
		name     string
		noTokens bool // StatusAuthenticate not wired
		header   string
		value    string
		code     int
		body     string
	}{
		{name: "Authorization", header: "Authorization", value: "Bearer alice", code: http.StatusOK, body: `"servedBy":"c-0"`},
		{name: "through the proxy", header: ProxiedAuthorizationHeader, value: "Bearer alice", code: http.StatusOK, body: `"servedBy":"c-0"`},
		{name: "no token", code: http.StatusUnauthorized, body: "or a status token for audience joiner-status"},
		{name: "not a bearer token", header: "Authorization", value: "Basic YWxpY2U6eA==", code: http.StatusUnauthorized},
		{name: "unknown token", header: ProxiedAuthorizationHeader, value: "Bearer mallory", code: http.StatusUnauthorized, body: "token not recognised"},
		{name: "not allowed", header: "Authorization", value: "Bearer bob", code: http.StatusForbidden, body: "is not the status ServiceAccount"},
		{name: "busy", header: "Authorization", value: "Bearer busy", code: http.StatusTooManyRequests},
		{name: "review failed", header: "Authorization", value: "Bearer broken", code: http.StatusServiceUnavailable, body: `{"error":"cannot check the caller now, retry"}`},
		{name: "certificates only", noTokens: true, header: "Authorization", value: "Bearer alice", code: http.StatusUnauthorized,
			body: "status needs a client certificate from the coordinators' CA\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Cluster: &fakeCluster{leader: true}, Reports: emptyState{}, Raft: emptyRaft{}, State: emptyState{},
				Authenticate: agentsOnly, StatusAuthenticate: statusAuth}
			if tt.noTokens {
				cfg.StatusAuthenticate = nil
			}
			req := httptest.NewRequest(http.MethodGet, StatusPath, nil)
			if tt.header != "" {
				req.Header.Set(tt.header, tt.value)
			}
			rec := httptest.NewRecorder()
			New(cfg, zap.NewNop()).ServeHTTP(rec, req)
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
				t.Fatalf("got %d %s, want %d with %q", rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
}

// TestReportsIgnoreProxiedAuthorization: a report is authenticated by its
// Authorization header alone. A token in X-Joiner-Authorization (what the
// API server's proxy passes on, e.g. a status token) is never read for
// POST /v1/interruptions, whatever the status authenticator would say.
func TestReportsIgnoreProxiedAuthorization(t *testing.T) {
	var seen []string
	auth := func(ctx context.Context, token string) (Identity, error) {
		seen = append(seen, token)
		return testAuthenticate(ctx, token)
	}
	anyone := func(context.Context, string) (Identity, error) { return Identity{User: "status-reader"}, nil }
	c := &fakeCluster{leader: true}
	s := New(Config{Cluster: c, Reports: noReports{}, Authenticate: auth, StatusAuthenticate: anyone, NodeInstance: testNodeInstance}, zap.NewNop())
	send := func(header string) int {
		body, _ := json.Marshal(notice("i-1"))
		req := httptest.NewRequest(http.MethodPost, "/v1/interruptions", strings.NewReader(string(body)))
		req.Header.Set(header, "Bearer "+tokenOf("ip-i-1"))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := send(ProxiedAuthorizationHeader); code != http.StatusUnauthorized {
		t.Fatalf("report with %s only: %d, want 401", ProxiedAuthorizationHeader, code)
	}
	if len(seen) != 1 || seen[0] != "" || c.commits != 0 {
		t.Fatalf("authenticator saw %q, %d commits: want one empty token, nothing committed", seen, c.commits)
	}
	if code := send("Authorization"); code != http.StatusOK || c.commits != 1 {
		t.Fatalf("the same token in Authorization: %d, %d commits", code, c.commits)
	}
}
