package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/cluster"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/test/kubetest"
)

// TestMetricsScrapers: a coordinator's real HTTPS listener, its /metrics
// guarded as the coordinator wires it (kube.AccessReviewer through a
// ServiceAccount that may create token and subject access reviews), against
// the real kube-apiserver (RBAC): a client certificate from the
// coordinators' CA and a ServiceAccount token whose user may get /metrics
// scrape 200, as does a ServiceAccount allowed through its namespace's
// group (the review passes groups); a ServiceAccount not bound gets 403;
// no credential and a forged token 401; a client certificate from another
// CA fails the handshake. Probes stay open.
func TestMetricsScrapers(t *testing.T) {
	ctx, s := kubetest.StartMetricsRBAC(t, 2*time.Minute, "monitoring")

	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, func() bool { return true }, false)
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Cluster: &fakeCluster{leader: true}, Reports: emptyState{}, Authenticate: testAuthenticate,
		Gatherer: reg, Metrics: m, MetricsAuthorize: (&kube.AccessReviewer{Client: s.Reviewer}).Authorize}, zap.NewNop())
	ln, err := Listen("127.0.0.1:0", DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(h, mustTLS("c-0").HTTPServerConfig(), DefaultLimits, zap.NewNop())
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "https://" + ln.Addr().String()

	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		token  string
		code   int
		inBody string
	}{
		{name: "CA client certificate", client: peerClient, path: "/metrics", code: 200, inBody: "joiner_interruption_reports_total"},
		{name: "metrics reader's token", client: agentClient, path: "/metrics", token: s.Reader, code: 200, inBody: "joiner_interruption_reports_total"},
		{name: "reader by its namespace's group", client: agentClient, path: "/metrics", token: s.GroupReader, code: 200, inBody: "joiner_interruption_reports_total"},
		{name: "unbound ServiceAccount", client: agentClient, path: "/metrics", token: s.Stranger, code: 403, inBody: "may not get /metrics"},
		{name: "no credential", client: agentClient, path: "/metrics", code: 401, inBody: "client certificate from the coordinators' CA, or a bearer token"},
		{name: "forged token", client: agentClient, path: "/metrics", token: "forged", code: 401, inBody: "bearer token rejected"},
		{name: "healthz", client: agentClient, path: "/healthz", code: 200, inBody: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := kubetest.Scrape(ctx, t, tc.client, base+tc.path, tc.token); code != tc.code || !strings.Contains(body, tc.inBody) {
				t.Fatalf("%d %q, want %d containing %q", code, body, tc.code, tc.inBody)
			}
		})
	}

	// A client certificate from another CA: the handshake fails (it is
	// neither admitted as a peer nor ignored for a token).
	otherCA, err := cluster.NewCA("other-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := cluster.TLSFromCA(otherCA, "intruder", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := intruder.HTTPClientConfig()
	cfg.RootCAs = testCA.Pool() // it trusts the coordinator; the coordinator must not trust it
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Reader)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a client certificate from another CA got %d, want a failed TLS handshake", resp.StatusCode)
	}
	if !strings.Contains(err.Error(), "remote error: tls: unknown certificate authority") {
		t.Errorf("client certificate from another CA: %v, want the coordinator to refuse its CA", err)
	}
}

// TestMetricsReviewUnavailable: when no review can be made (the reviewer
// failed), a token-bearing scrape gets 503 with Retry-After and no detail.
func TestMetricsReviewUnavailable(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := New(Config{Cluster: &fakeCluster{leader: true}, Reports: emptyState{}, Authenticate: testAuthenticate, Gatherer: reg,
		MetricsAuthorize: func(context.Context, string) (string, error) {
			return "", errors.New("our ServiceAccount may not create subjectaccessreviews.authorization.k8s.io")
		}}, zap.NewNop())
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer x")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || strings.Contains(rec.Body.String(), "subjectaccessreviews") {
		t.Fatalf("%d %q (Retry-After %q), want 503 retry without detail", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"))
	}
}
