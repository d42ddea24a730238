package karpmetrics_test

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/test/observe"
)

func collectorRegistry(t *testing.T, fx *fixtures, leading func() bool) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(karpmetrics.NewCollector(karpmetrics.CollectorConfig{Cache: fx.cache, Classes: fx.classes, Leading: leading,
		Now: func() time.Time { return fx.now }})); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestCollectorGauges: the gauges' values are Karpenter's (cpu in cores,
// memory in bytes, DaemonSet pods in both pod and daemon requests).
func TestCollectorGauges(t *testing.T) {
	fx := newFixtures()
	reg := collectorRegistry(t, fx, nil)
	node := map[string]string{"node_name": "n-1", "nodepool": "default", "zone": "z-a", "capacity_type": "spot",
		"instance_type": "t-4", "arch": "amd64", "managed": "true"}
	with := func(extra map[string]string) map[string]string { return mergeLabels(node, extra) }
	cpu := with(map[string]string{"resource_type": "cpu"})
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"karpenter_nodes_allocatable", cpu, 3.92},
		{"karpenter_nodes_allocatable", with(map[string]string{"resource_type": "memory"}), 16 << 30},
		{"karpenter_nodes_total_pod_requests", cpu, 1.1},
		{"karpenter_nodes_total_pod_requests", with(map[string]string{"resource_type": "memory"}), 512 << 20},
		{"karpenter_nodes_total_daemon_requests", cpu, 0.1},
		{"karpenter_nodes_system_overhead", cpu, 0.08},
		{"karpenter_nodes_current_lifetime_seconds", node, 3600},
		{"karpenter_cluster_utilization_percent", map[string]string{"resource_type": "cpu"}, 100 * 1.1 / 3.92},
		{"karpenter_pods_state", map[string]string{"name": "p-1", "namespace": "default", "node": "n-1", "nodepool": "default",
			"zone": "z-a", "arch": "amd64", "capacity_type": "spot", "instance_type": "t-4", "phase": "Running", "ready": "true",
			"scheduled": "true", "managed": "true", "owner": "/apis/apps/v1/namespaces/default/replicasets/p"}, 1},
		{"karpenter_pods_state", map[string]string{"name": "p-2", "phase": "Pending", "scheduled": "false", "node": "", "nodepool": ""}, 1},
		{"karpenter_nodepools_usage", map[string]string{"nodepool": "default", "resource_type": "cpu"}, 8},
		{"karpenter_nodepools_usage", map[string]string{"nodepool": "default", "resource_type": "memory"}, 32 << 30},
		{"karpenter_nodepools_limit", map[string]string{"nodepool": "default", "resource_type": "cpu"}, 100},
		{"karpenter_nodepools_cost_total", map[string]string{"nodepool": "default"}, 0.1},
		{"karpenter_cluster_state_node_count", nil, 1},
		{"karpenter_cluster_state_synced", nil, 1},
		{"karpenter_cluster_state_unsynced_time_seconds", nil, 0},
		{"karpenter_cloudprovider_instance_type_offering_available", map[string]string{"instance_type": "t-4", "capacity_type": "spot", "zone": "z-a"}, 1},
		{"karpenter_cloudprovider_instance_type_offering_available", map[string]string{"instance_type": "t-4", "capacity_type": "on-demand", "zone": "z-b"}, 0},
		{"karpenter_cloudprovider_instance_type_offering_price_estimate", map[string]string{"instance_type": "t-4", "capacity_type": "on-demand", "zone": "z-b"}, 0.2},
		{"karpenter_cloudprovider_instance_type_cpu_cores", map[string]string{"instance_type": "t-4"}, 4},
		{"karpenter_cloudprovider_instance_type_memory_bytes", map[string]string{"instance_type": "t-4"}, 16 << 30},
	} {
		got, ok := observe.Sample(t, reg, tc.name, tc.labels)
		if !ok {
			t.Errorf("%s%v: no series", tc.name, tc.labels)
			continue
		}
		if math.Abs(got-tc.want) > 1e-9*math.Max(1, math.Abs(tc.want)) {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// Without DaemonSet pods the node's daemon requests are zero, not
	// absent.
	fx.cache.PodList = fx.cache.PodList[:1]
	if got, ok := observe.Sample(t, reg, "karpenter_nodes_total_daemon_requests", cpu); !ok || got != 0 {
		t.Errorf("daemon cpu requests without DaemonSet pods = %v (found %v), want 0", got, ok)
	}
}

// TestCollectorUnsynced: the unsynced time counts from the first scrape
// that found the cache unsynced, and resets once it syncs.
func TestCollectorUnsynced(t *testing.T) {
	fx := newFixtures()
	fx.cache.synced = false
	reg := collectorRegistry(t, fx, nil)
	for _, step := range []struct {
		advance time.Duration
		synced  bool
		want    float64
	}{{0, false, 0}, {30 * time.Second, false, 30}, {10 * time.Second, true, 0}} {
		fx.now = fx.now.Add(step.advance)
		fx.cache.synced = step.synced
		if got, _ := observe.Sample(t, reg, "karpenter_cluster_state_unsynced_time_seconds", nil); got != step.want {
			t.Errorf("after %v (synced %v): unsynced %v s, want %v", step.advance, step.synced, got, step.want)
		}
	}
}

// TestCollectorLeaderOnly: a replica that does not lead exports none of
// the gauges (sums over replicas count each node once).
func TestCollectorLeaderOnly(t *testing.T) {
	fx := newFixtures()
	leading := false
	reg := collectorRegistry(t, fx, func() bool { return leading })
	if _, ok := observe.Sample(t, reg, "karpenter_nodes_allocatable", map[string]string{"resource_type": "cpu"}); ok {
		t.Error("a follower exports karpenter_nodes_allocatable")
	}
	leading = true
	if _, ok := observe.Sample(t, reg, "karpenter_nodes_allocatable", map[string]string{"resource_type": "cpu"}); !ok {
		t.Error("the leader does not export karpenter_nodes_allocatable")
	}
}
