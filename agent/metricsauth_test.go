package agent

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/joiner-dev/joiner/agent/imds"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/test/kubetest"
)

// TestMetricsScrapers: an agent's metrics listener on a non-loopback
// address serves HTTPS (a self-signed certificate: scrapers skip
// verification, as the chart's ServiceMonitor does) and /metrics only to a
// token whose user may get /metrics, reviewed through the agent's client
// against the real kube-apiserver (RBAC): the metrics reader 200, a
// ServiceAccount not bound 403, no token or a forged one 401; /healthz
// stays open (the liveness probe), and plain HTTP is not served.
func TestMetricsScrapers(t *testing.T) {
	ctx, s := kubetest.StartMetricsRBAC(t, 2*time.Minute, "monitoring")

	im := &fakeIMDS{bodies: map[string]string{imds.PathInstanceID: "i-1"}}
	a, err := New(Config{NodeName: "node-1", IMDSGetter: im, Interval: 20 * time.Millisecond, MetricsAddr: "0.0.0.0:0",
		MetricsAuthorize: (&kube.AccessReviewer{Client: s.Reviewer}).Authorize}, fake.NewClientset(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() { stop(); <-done }()
	if !strings.HasPrefix(a.MetricsURL(), "https://") {
		t.Fatalf("metrics URL %s: want https on a non-loopback address", a.MetricsURL())
	}
	_, port, _ := net.SplitHostPort(a.MetricsAddr())
	base := "https://127.0.0.1:" + port
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	waitFor(t, func() bool {
		code, _ := kubetest.Scrape(ctx, t, client, base+"/healthz", "")
		return code == http.StatusOK
	},
		"agent healthy over HTTPS without a token")
	for _, tc := range []struct {
		name, token string
		code        int
		inBody      string
	}{
		{name: "metrics reader", token: s.Reader, code: 200, inBody: "joiner_agent_"},
		{name: "unbound ServiceAccount", token: s.Stranger, code: 403, inBody: "may not get /metrics"},
		{name: "no token", code: 401, inBody: "bearer token whose user may get /metrics"},
		{name: "forged token", token: "forged", code: 401, inBody: "bearer token rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := kubetest.Scrape(ctx, t, client, base+"/metrics", tc.token); code != tc.code || !strings.Contains(body, tc.inBody) {
				t.Fatalf("%d %q, want %d containing %q", code, body, tc.code, tc.inBody)
			}
		})
	}
	if resp, err := http.Get("http://127.0.0.1:" + port + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served /metrics on a non-loopback listener")
		}
	}
}

// TestMetricsAddrNeedsAuthentication: a non-loopback metrics address
// without a token reviewer refuses to start, naming the flag and value; a
// loopback one starts without.
func TestMetricsAddrNeedsAuthentication(t *testing.T) {
	im := &fakeIMDS{bodies: map[string]string{imds.PathInstanceID: "i-1"}}
	for addr, wantErr := range map[string]bool{"0.0.0.0:0": true, ":0": true, "127.0.0.1:0": false, "localhost:0": false} {
		a, err := New(Config{NodeName: "node-1", IMDSGetter: im, MetricsAddr: addr}, fake.NewClientset(), zaptest.NewLogger(t))
		if wantErr {
			if err == nil || !strings.Contains(err.Error(), `--metrics-addr "`+addr+`"`) {
				t.Errorf("%s: %v, want an error naming --metrics-addr and the address", addr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		if !strings.HasPrefix(a.MetricsURL(), "http://") {
			t.Errorf("%s: %s, want plain HTTP on loopback", addr, a.MetricsURL())
		}
		_ = a.ln.Close()
	}
}
