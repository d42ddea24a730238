package kubetest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/test/testenv"
)

// StartMetricsRBAC starts a kube-apiserver authorizing as EKS does (Node
// and RBAC) and sets up SetUpMetricsRBAC in namespace ns: the setup of a
// test of a /metrics guard that reviews through the real API server. The
// context ends after timeout or with the test.
func StartMetricsRBAC(t *testing.T, timeout time.Duration, ns string) (context.Context, MetricsScrapers) {
	t.Helper()
	env := testenv.Start(t, testenv.Options{APIServerArgs: testenv.NodeAuthorization})
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx, SetUpMetricsRBAC(ctx, t, env.Client, env.Config, ns)
}

// Scrape gets url with c, sending token as a bearer token unless it is
// empty, and returns the response's status code and body.
func Scrape(ctx context.Context, t testing.TB, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
