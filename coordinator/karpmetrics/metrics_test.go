package karpmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/test/observe"
)

// registered is a fresh registry and the Metrics For registered on it.
func registered(t *testing.T) (*karpmetrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := karpmetrics.For(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestCreatedReason(t *testing.T) {
	for in, want := range map[string]string{
		"provisioning":                       "provisioned",
		"disruption/emptiness":               "empty",
		"disruption/drift":                   "drifted",
		"disruption/staticdrift":             "drifted",
		"disruption/multinodeconsolidation":  "underutilized",
		"disruption/singlenodeconsolidation": "underutilized",
		"disruption/somethingnew":            "somethingnew",
		"static":                             "static",
	} {
		if got := karpmetrics.CreatedReason(in); got != want {
			t.Errorf("CreatedReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDisruptionLabels(t *testing.T) {
	for _, tc := range []struct{ method, reason, ctype string }{
		{"Emptiness", "empty", "empty"},
		{"Drift", "drifted", ""},
		{"StaticDrift", "drifted", ""},
		{"MultiNodeConsolidation", "underutilized", "multi"},
		{"SingleNodeConsolidation", "underutilized", "single"},
		{"Consolidation", "underutilized", "single"},
		{"Expiration", "expired", ""},
		{"Unknown", "", ""},
	} {
		if r, c := karpmetrics.DisruptionLabels(tc.method); r != tc.reason || c != tc.ctype {
			t.Errorf("DisruptionLabels(%q) = %q, %q; want %q, %q", tc.method, r, c, tc.reason, tc.ctype)
		}
	}
}

// TestEvents: each event lands in Karpenter's series with its labels;
// expiration is no voluntary disruption method (Karpenter's expiration
// controller deletes directly).
func TestEvents(t *testing.T) {
	m, reg := registered(t)
	if again, err := karpmetrics.For(reg); err != nil || again != m {
		t.Fatalf("For twice on one registry: %p, %v; want the same set", again, err)
	}
	fx := newFixtures()
	nc := fx.cache.ClaimList[0]
	m.NodeClaimCreated(nc, "disruption/multinodeconsolidation")
	m.Decision("MultiNodeConsolidation", "replace", []string{"default", "other", "default"})
	m.Decision("Expiration", "delete", []string{"default"})
	m.DecisionFailed("Drift", "replace", 2)
	m.NodeClaimDisrupted(nc, "underutilized")
	m.NodeTerminated(fx.cache.NodeList[0], time.Time{}, fx.now)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"karpenter_nodeclaims_created_total", map[string]string{"reason": "underutilized", "nodepool": "default", "min_values_relaxed": "false"}, 1},
		{"karpenter_voluntary_disruption_decisions_total", map[string]string{"decision": "replace", "reason": "underutilized", "consolidation_type": "multi"}, 1},
		// Once per pool of the decision, not per candidate.
		{"karpenter_voluntary_disruption_decisions_by_nodepool_total", map[string]string{"nodepool": "default", "decision": "replace"}, 1},
		{"karpenter_voluntary_disruption_decisions_by_nodepool_total", map[string]string{"nodepool": "other", "decision": "replace"}, 1},
		// By the replacements that never initialized.
		{"karpenter_voluntary_disruption_queue_failures_total", map[string]string{"decision": "replace", "reason": "drifted", "consolidation_type": ""}, 2},
		{"karpenter_voluntary_disruption_consolidation_timeouts_total", map[string]string{"consolidation_type": "multi"}, 0},
		{"karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "underutilized", "nodepool": "default", "capacity_type": "spot"}, 1},
		{"karpenter_nodes_terminated_total", map[string]string{"nodepool": "default", "zone": "z-a"}, 1},
		{"karpenter_nodes_lifetime_duration_seconds", map[string]string{"nodepool": "default"}, 1},
	} {
		if got, ok := observe.Sample(t, reg, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := observe.Sample(t, reg, "karpenter_voluntary_disruption_decisions_total", map[string]string{"reason": "expired"}); ok {
		t.Error("an expiration counted as a voluntary disruption decision")
	}
	if _, ok := observe.Sample(t, reg, "karpenter_nodes_termination_duration_seconds", nil); ok {
		t.Error("a node without a deletion time observed in the termination duration")
	}
	// A nil set (no registry wired) takes every event.
	var none *karpmetrics.Metrics
	none.NodeClaimCreated(nc, "provisioning")
	none.NodeTerminated(&corev1.Node{}, fx.now, fx.now)
}

// fakeCloud fails Get with not found and Launch with an unknown error.
type fakeCloud struct {
	cloud.Provider
	marked []cloud.OfferingKey
}

func (fakeCloud) Get(context.Context, string) (cloud.Instance, error) {
	return cloud.Instance{}, fmt.Errorf("instance i-1: %w", cloud.ErrNotFound)
}

func (fakeCloud) Launch(context.Context, cloud.LaunchRequest) (cloud.Instance, error) {
	return cloud.Instance{}, errors.New("boom")
}

func (f *fakeCloud) MarkUnavailable(k cloud.OfferingKey, _ string) { f.marked = append(f.marked, k) }

// TestCloudDecorator: calls are timed by controller, Karpenter's method
// name and provider; errors counted with Karpenter's error type; the
// offering cache still reachable.
func TestCloudDecorator(t *testing.T) {
	m, reg := registered(t)
	inner := &fakeCloud{}
	c := karpmetrics.DecorateCloud(inner, m, "aws")
	ctx := karpmetrics.WithController(context.Background(), "lifecycle")
	_, _ = c.Get(ctx, "i-1")
	_, _ = c.Launch(ctx, cloud.LaunchRequest{})
	c.MarkUnavailable(cloud.OfferingKey{}, "test")
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"karpenter_cloudprovider_duration_seconds", map[string]string{"controller": "lifecycle", "method": "Get", "provider": "aws"}},
		{"karpenter_cloudprovider_duration_seconds", map[string]string{"controller": "lifecycle", "method": "Create", "provider": "aws"}},
		{"karpenter_cloudprovider_errors_total", map[string]string{"method": "Get", "error": "NodeClaimNotFoundError"}},
		{"karpenter_cloudprovider_errors_total", map[string]string{"method": "Create", "error": ""}},
	} {
		if got, ok := observe.Sample(t, reg, tc.name, tc.labels); !ok || got != 1 {
			t.Errorf("%s%v = %v (found %v), want 1", tc.name, tc.labels, got, ok)
		}
	}
	if len(inner.marked) != 1 {
		t.Errorf("MarkUnavailable reached the provider %d times, want 1", len(inner.marked))
	}
	if c.Unwrap() != inner {
		t.Error("Unwrap is not the decorated provider")
	}
}

// TestPodsObserver: a pod seen pending is observed once when it is ready
// and once bound; a pod first seen running (created before the term) is
// not observed.
func TestPodsObserver(t *testing.T) {
	m, reg := registered(t)
	fx := newFixtures()
	running := fx.cache.PodList[0]
	pods := karpmetrics.NewPods(fx.cache, m, nil)
	pods.Pass() // p-1 and ds-1 running already: not observed
	fx.cache.PodList[0] = pendingCopy(running)
	pods.Pass()
	fx.cache.PodList[0] = running
	pods.Pass()
	pods.Pass() // observed once only
	if got, _ := observe.Sample(t, reg, "karpenter_pods_startup_duration_seconds", nil); got != 1 {
		t.Errorf("%v start-ups observed, want 1", got)
	}
	if got, _ := observe.Sample(t, reg, "karpenter_pods_bound_duration_seconds", nil); got != 1 {
		t.Errorf("%v bindings observed, want 1", got)
	}
}

// TestEndTerm: the gauges leader loops set are cleared when a term ends, so
// a replica that stops leading serves none of its last values; counters
// and histograms stay (they only grow).
func TestEndTerm(t *testing.T) {
	m, reg := registered(t)
	m.Scheduled("provisioner", time.Second, 3)
	m.IgnoredPods(2)
	m.Eligible("Drift", 4)
	series := func(name string) int {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				n := 0
				for _, s := range mf.GetMetric() {
					if s.GetGauge().GetValue() != 0 || s.GetHistogram() != nil {
						n++
					}
				}
				return n
			}
		}
		return 0
	}
	for _, name := range []string{"karpenter_scheduler_unschedulable_pods_count", "karpenter_scheduler_ignored_pods_count",
		"karpenter_voluntary_disruption_eligible_nodes"} {
		if series(name) == 0 {
			t.Fatalf("%s not set during the term", name)
		}
	}
	m.EndTerm()
	for _, name := range []string{"karpenter_scheduler_unschedulable_pods_count", "karpenter_scheduler_ignored_pods_count",
		"karpenter_voluntary_disruption_eligible_nodes"} {
		if n := series(name); n != 0 {
			t.Errorf("%s: %d non-zero series after the term ended", name, n)
		}
	}
	if series("karpenter_scheduler_scheduling_duration_seconds") == 0 {
		t.Error("the scheduling histogram was cleared with the gauges")
	}
}
