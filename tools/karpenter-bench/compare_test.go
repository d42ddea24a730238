//go:build test_performance

// Package karpbench runs Karpenter v1.14's scheduler, as its own
// scheduling benchmark sets it up (400 fake instance types, one NodePool
// without requirements), on the pods Joiner's benchmark uses (written by
// test/cmd/joiner-workload), and reports what its benchmark does not: CPU
// time, the plan's price and whether the final layout keeps the pods'
// spread constraints. The speed figures of record come from Karpenter's own
// BenchmarkScheduling<N>, run unmodified from the module cache (see
// BENCHMARKS.md); this test is only for price and layout.
package karpbench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"
)

func init() { log.SetLogger(logging.NopLogger) }

// TestKarpenterPlans reads the PodList files named by KARPENTER_BENCH_PODS
// (comma-separated) and prints one JSON line per file.
func TestKarpenterPlans(t *testing.T) {
	files := os.Getenv("KARPENTER_BENCH_PODS")
	if files == "" {
		t.Skip("KARPENTER_BENCH_PODS not set")
	}
	for _, f := range strings.Split(files, ",") {
		pods := readPods(t, f)
		ctx := options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
		nodePool := test.NodePool(v1.NodePool{Spec: v1.NodePoolSpec{Limits: v1.Limits{
			corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}}})
		cp := fake.NewCloudProvider()
		its := fake.InstanceTypes(400)
		cp.InstanceTypes = its
		client := fakecr.NewFakeClient()
		clk := &clock.RealClock{}
		cluster := state.NewCluster(clk, client, cp)
		byPool := map[string][]*cloudprovider.InstanceType{nodePool.Name: its}
		topology, err := scheduling.NewTopology(ctx, client, cluster, nil, []*v1.NodePool{nodePool}, byPool, pods,
			scheduling.NumConcurrentReconciles(5))
		if err != nil {
			t.Fatal(err)
		}
		s := scheduling.NewScheduler(ctx, client, []*v1.NodePool{nodePool}, cluster, nil, topology, byPool, nil,
			events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, scheduling.NumConcurrentReconciles(5))

		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cpu0 := cpuSeconds()
		start := time.Now()
		res, err := s.Solve(ctx, pods)
		wall := time.Since(start)
		cpu := cpuSeconds() - cpu0
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]any{
			"pods": len(pods), "unschedulable": len(res.PodErrors), "nodes": len(res.NewNodeClaims),
			"wall_s": wall.Seconds(), "cpu_s": cpu, "alloc_bytes": after.TotalAlloc - before.TotalAlloc,
			"allocs": after.Mallocs - before.Mallocs,
		}
		// By UID: the scheduler's NodeClaims may hold copies of the pods.
		price, zoneOf := 0.0, map[types.UID]string{}
		hostOf := map[types.UID]int{}
		for i, nc := range res.NewNodeClaims {
			best := math.Inf(1)
			zone := ""
			for _, it := range nc.InstanceTypeOptions {
				if o := it.Offerings.Available().Compatible(nc.Requirements).Cheapest(); o != nil && o.Price < best {
					best, zone = o.Price, o.Requirements.Get(corev1.LabelTopologyZone).Any()
				}
			}
			price += best
			for _, p := range nc.Pods {
				zoneOf[p.UID], hostOf[p.UID] = zone, i
			}
		}
		out["price_per_hour"] = price
		hostMax, zoneSkew := spreadCheck(pods, zoneOf, hostOf, len(res.NewNodeClaims))
		out["hostname_spread_max_per_node"] = hostMax
		out["zone_spread_max_skew"] = zoneSkew
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	}
}

// spreadCheck measures the final layout against the pods' DoNotSchedule
// spread constraints, counting every pod their selectors match: the most
// matching pods on one node for hostname spreads (maxSkew 1 allows 1 where
// any node has none), and the largest zone skew over the three zones for
// zone spreads. A claim's zone is its cheapest offering's.
func spreadCheck(pods []*corev1.Pod, zoneOf map[types.UID]string, hostOf map[types.UID]int, nodes int) (int, int) {
	hostMax, zoneSkew := 0, 0
	seen := map[string]bool{}
	for _, p := range pods {
		for _, c := range p.Spec.TopologySpreadConstraints {
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				continue
			}
			key := c.TopologyKey + "|" + sel.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			perHost := make([]int, nodes)
			perZone := map[string]int{"test-zone-1": 0, "test-zone-2": 0, "test-zone-3": 0}
			for _, q := range pods {
				if q.Namespace != p.Namespace || !sel.Matches(labels.Set(q.Labels)) {
					continue
				}
				if h, ok := hostOf[q.UID]; ok {
					perHost[h]++
				}
				if z, ok := zoneOf[q.UID]; ok {
					perZone[z]++
				}
			}
			switch c.TopologyKey {
			case corev1.LabelHostname:
				for _, n := range perHost {
					hostMax = max(hostMax, n)
				}
			case corev1.LabelTopologyZone:
				lo, hi := math.MaxInt, 0
				for _, n := range perZone {
					lo, hi = min(lo, n), max(hi, n)
				}
				zoneSkew = max(zoneSkew, hi-lo)
			}
		}
	}
	return hostMax, zoneSkew
}

func readPods(t *testing.T, path string) []*corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		p.UID = types.UID(fmt.Sprintf("pod-%06d", i))
		// As Karpenter's test.Pod does: pending and unschedulable.
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		out[i] = p
	}
	return out
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
