package karpmetrics_test

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/loop"
)

// dashboardNames reads testdata/karpenter-dashboard-metrics.txt: the names
// to serve, and the exempt ones with why.
func dashboardNames(t *testing.T) (served []string, exempt map[string]string) {
	t.Helper()
	f, err := os.Open("testdata/karpenter-dashboard-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exempt = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, _ := strings.Cut(line, " ")
		if why = strings.TrimSpace(why); why != "" {
			exempt[name] = why
			continue
		}
		served = append(served, name)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(served) == 0 {
		t.Fatal("no metric names in testdata/karpenter-dashboard-metrics.txt")
	}
	return served, exempt
}

// coordinatorRegistry registers what the coordinator registers for
// Karpenter's names (karpmetrics.For, the Collector, the loop pass metrics,
// build info) and exercises every event once with the fixtures, so each
// family has a series.
func coordinatorRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	m, reg := registered(t)
	fx := newFixtures()
	if err := reg.Register(karpmetrics.NewCollector(karpmetrics.CollectorConfig{Cache: fx.cache, Classes: fx.classes,
		Now: func() time.Time { return fx.now }})); err != nil {
		t.Fatal(err)
	}
	if err := loop.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := karpmetrics.RegisterBuildInfo(reg, "v0.0.0-test", "abc123"); err != nil {
		t.Fatal(err)
	}
	// One pass of a loop (the pass ends the loop's term).
	ctx, cancel := context.WithCancel(context.Background())
	_ = loop.Run(ctx, loop.Spec{Name: "dashboard-test", Pass: func(context.Context) error { cancel(); return nil }})

	nc := fx.cache.ClaimList[0]
	node := fx.cache.NodeList[0]
	m.NodeClaimCreated(nc, "provisioning")
	m.NodeRegistered(nc)
	m.Scheduled("provisioner", 20*time.Millisecond, 0)
	m.Eligible("Emptiness", 1)
	m.Budget("default", "Empty", 1, 0)
	m.Evaluated("Emptiness", time.Millisecond)
	m.Decision("Emptiness", "delete", []string{"default"})
	m.NodeClaimDisrupted(nc, "empty")
	m.NodeDrained("default")
	m.NodeTerminated(node, fx.now.Add(-time.Minute), fx.now)
	m.NodeClaimTerminated(nc, time.Minute)
	// A pod seen pending, then ready: its start-up is observed.
	pods := karpmetrics.NewPods(fx.cache, m, nil)
	started := fx.cache.PodList[0]
	fx.cache.PodList[0] = pendingCopy(started)
	pods.Pass()
	fx.cache.PodList[0] = started
	pods.Pass()
	return reg
}

// seriesNames are the names a scrape shows for the families (histograms'
// _bucket, _sum and _count; summaries' _sum and _count).
func seriesNames(fams []*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		n := f.GetName()
		out[n] = f
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[n+"_bucket"], out[n+"_sum"], out[n+"_count"] = f, f, f
		case dto.MetricType_SUMMARY:
			out[n+"_sum"], out[n+"_count"] = f, f
		}
	}
	return out
}

// TestDashboardMetricsServed: every metric name the PromQL of Karpenter's
// published dashboards uses is served, with the labels the dashboards
// select and group by.
func TestDashboardMetricsServed(t *testing.T) {
	served, exempt := dashboardNames(t)
	fams, err := coordinatorRegistry(t).Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := seriesNames(fams)
	for _, name := range served {
		if have[name] == nil {
			t.Errorf("%s: used by Karpenter's dashboards, not served", name)
		}
	}
	for name, why := range exempt {
		if have[name] != nil {
			t.Errorf("%s: listed as exempt (%s) but served: list it as served", name, why)
		}
	}
	// The labels the dashboards' queries select, group by or template on.
	nodeLabels := []string{"arch", "capacity_type", "instance_type", "nodepool", "zone", "resource_type", "node_name"}
	for name, labels := range map[string][]string{
		"karpenter_nodes_allocatable":                     nodeLabels,
		"karpenter_nodes_total_pod_requests":              nodeLabels,
		"karpenter_nodes_total_daemon_requests":           nodeLabels,
		"karpenter_pods_state":                            {"arch", "capacity_type", "instance_type", "namespace", "node", "nodepool", "zone", "phase"},
		"karpenter_nodepools_usage":                       {"nodepool", "resource_type"},
		"karpenter_nodepools_limit":                       {"nodepool", "resource_type"},
		"karpenter_nodes_created_total":                   {"nodepool"},
		"karpenter_nodes_terminated_total":                {"nodepool"},
		"karpenter_nodeclaims_disrupted_total":            {"nodepool"},
		"karpenter_voluntary_disruption_decisions_total":  {"consolidation_type", "decision"},
		"karpenter_voluntary_disruption_eligible_nodes":   {"reason"},
		"controller_runtime_reconcile_total":              {"controller"},
		"controller_runtime_reconcile_errors_total":       {"controller"},
		"controller_runtime_reconcile_time_seconds":       {"controller"},
		"workqueue_depth":                                 {"name"},
		"karpenter_nodes_termination_duration_seconds":    {"nodepool"},
		"karpenter_pods_startup_duration_seconds":         nil,
		"karpenter_cloudprovider_instance_type_cpu_cores": {"instance_type"},
	} {
		f := have[name]
		if f == nil {
			t.Errorf("%s: not served", name)
			continue
		}
		got := map[string]bool{}
		for _, lp := range f.GetMetric()[0].GetLabel() {
			got[lp.GetName()] = true
		}
		for _, l := range labels {
			if !got[l] {
				t.Errorf("%s: no label %s (the dashboards read it)", name, l)
			}
		}
	}
	// The performance dashboard reads quantiles 0, 0.5, 0.9, 0.99 and 1.
	for _, name := range []string{"karpenter_nodes_termination_duration_seconds", "karpenter_pods_startup_duration_seconds"} {
		f := have[name]
		if f == nil || f.GetType() != dto.MetricType_SUMMARY {
			t.Errorf("%s: want a summary", name)
			continue
		}
		var qs []float64
		for _, q := range f.GetMetric()[0].GetSummary().GetQuantile() {
			qs = append(qs, q.GetQuantile())
		}
		if !slices.Equal(qs, []float64{0, 0.5, 0.9, 0.99, 1}) {
			t.Errorf("%s: quantiles %v, want 0 0.5 0.9 0.99 1", name, qs)
		}
		if f.GetMetric()[0].GetSummary().GetSampleCount() != 1 {
			t.Errorf("%s: %d observations, want 1", name, f.GetMetric()[0].GetSummary().GetSampleCount())
		}
	}
}
