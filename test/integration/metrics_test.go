package integration

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/joiner-dev/joiner/test/harness"
	"github.com/joiner-dev/joiner/test/testenv"
)

// TestKarpenterDashboardMetrics provisions nodes for a few pods, scales them
// away so emptiness consolidation removes the nodes, and reads the leader's
// /metrics with the pods running and at the end: every metric name
// Karpenter's published dashboards query (coordinator/karpmetrics/testdata)
// is there.
func TestKarpenterDashboardMetrics(t *testing.T) {
	want := dashboardMetricNames(t)
	h, ctx := harness.StartReady(t, harness.Options{BootDelay: time.Second, Kubelet: true}, 10*time.Minute)
	if _, err := h.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	objs := examples(t, 4)
	for _, o := range objs {
		if o.GetKind() == "NodePool" {
			if err := unstructured.SetNestedField(o.Object, "0s", "spec", "disruption", "consolidateAfter"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.Apply(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	// scrape adds the series names on the leader's /metrics to served.
	scrape := func() {
		leader, err := h.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		body, err := h.Metrics(ctx, leader)
		if err != nil {
			t.Fatalf("metrics of %s: %v", leader.Name, err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, _, _ := strings.Cut(line, " ")
			name, _, _ = strings.Cut(name, "{")
			served[name] = true
		}
	}
	// Gauges of nodes and pods while there are some; the counters of their
	// end after consolidation.
	waitFor(ctx, t, h, "every pod running", nil, func(s *harness.State) bool { return s.Pods == 4 && s.Running == 4 })
	scrape()
	if err := h.ScaleDeployment(ctx, namespace, "inflate", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, h, "no nodeclaim left", nil, func(s *harness.State) bool { return s.Pods == 0 && len(s.NodeClaims) == 0 })
	scrape()
	for _, name := range want {
		if !served[name] {
			t.Errorf("%s: queried by Karpenter's dashboards, not on the leader's /metrics", name)
		}
	}
}

// dashboardMetricNames are the names of
// coordinator/karpmetrics/testdata/karpenter-dashboard-metrics.txt that
// must be served (lines without an exemption).
func dashboardMetricNames(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "coordinator", "karpmetrics", "testdata", "karpenter-dashboard-metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.ContainsAny(line, " \t") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
