package api

import (
	"context"
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
// the authenticator's answer to 200, 401, 403, 429 or 503.
func TestStatusBearerTokens(t *testing.T) {
	statusAuth := func(_ context.Context, token string) (Identity, error) {
		switch token {
		case "alice":
			return Identity{User: "alice"}, nil
		case "bob":
			return Identity{}, fmt.Errorf("%w: user \"bob\" may not list nodeclaims.karpenter.sh", ErrForbidden)
		case "busy":
			return Identity{}, ErrBusy
		case "broken":
			return Identity{}, errors.New("the coordinator's ServiceAccount may not create subjectaccessreviews")
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
		{name: "no token", code: http.StatusUnauthorized, body: "or a Kubernetes bearer token"},
		{name: "not a bearer token", header: "Authorization", value: "Basic YWxpY2U6eA==", code: http.StatusUnauthorized},
		{name: "unknown token", header: ProxiedAuthorizationHeader, value: "Bearer mallory", code: http.StatusUnauthorized, body: "token not recognised"},
		{name: "not allowed", header: "Authorization", value: "Bearer bob", code: http.StatusForbidden, body: "may not list nodeclaims.karpenter.sh"},
		{name: "busy", header: "Authorization", value: "Bearer busy", code: http.StatusTooManyRequests},
		{name: "review failed", header: "Authorization", value: "Bearer broken", code: http.StatusServiceUnavailable, body: "may not create subjectaccessreviews"},
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
