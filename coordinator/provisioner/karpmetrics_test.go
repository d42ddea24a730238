package provisioner

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/observe"
)

// metricsProvisioner is a provisioner of one pool over pods whose
// metrics go to a registry of their own.
func metricsProvisioner(t *testing.T, pods ...*corev1.Pod) (*rig, *metrics, *prometheus.Registry) {
	t.Helper()
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("general", req(karpv1.LabelArch, "In", "amd64"))},
		ClassList: []*awsv1.EC2NodeClass{class()},
		PodList:   pods,
	}
	r := newTestProvisioner(t, c)
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.p.metrics = m
	return r, m, reg
}

// TestSchedulingDecisionMetrics: a pass decides its pending pods once
// (observing the time since each was first seen), forgets pods no longer
// pending, and leaves the queue depth at the pods it could not place.
func TestSchedulingDecisionMetrics(t *testing.T) {
	r, m, reg := metricsProvisioner(t, pendingPod("a", "100m"), pendingPod("big", "2000"))
	// a and a pod deleted since were seen 5 s before the pass (as a pod
	// watcher acknowledges them).
	m.karp.AckPods(now.Add(-5*time.Second), pendingPod("a", "100m"), pendingPod("gone", "1"))
	undecided := func() map[string]bool {
		t.Helper()
		out := map[string]bool{}
		for _, name := range []string{"a", "big", "gone"} {
			if _, ok := observe.Sample(t, reg, "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
				map[string]string{"name": name, "namespace": "default"}); ok {
				out[name] = true
			}
		}
		return out
	}
	if got := undecided(); !got["a"] || !got["gone"] || len(got) != 2 {
		t.Fatalf("undecided before the pass: %v, want a and gone", got)
	}
	decisions := func() (uint64, float64) {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "karpenter_pods_scheduling_decision_duration_seconds" {
				h := f.GetMetric()[0].GetHistogram()
				return h.GetSampleCount(), h.GetSampleSum()
			}
		}
		return 0, 0
	}
	for pass := range 2 {
		if err := r.p.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(r.w.created) != 1 {
			t.Fatalf("pass %d: %d nodeclaims created, want 1 (for a)", pass, len(r.w.created))
		}
		// a (placed on a new claim) after 5 s, big (unschedulable) at once;
		// the second pass (a nominated, big pending) observes nothing.
		if n, sum := decisions(); n != 2 || sum != 5 {
			t.Errorf("pass %d: %d decisions summing %vs, want 2 summing 5s", pass, n, sum)
		}
		if got := undecided(); len(got) != 0 {
			t.Errorf("pass %d: undecided %v, want none", pass, got)
		}
		if v, ok := observe.Sample(t, reg, "karpenter_scheduler_queue_depth", map[string]string{"controller": "provisioner"}); !ok || v != 1 {
			t.Errorf("pass %d: queue depth %v (%v), want 1 (big)", pass, v, ok)
		}
		if _, ok := observe.Sample(t, reg, "karpenter_scheduler_unfinished_work_seconds", nil); ok {
			t.Errorf("pass %d: unfinished work left after the solve", pass)
		}
	}
}

// A pass sets the provisioner's pending pods by effective zone on the
// pods it planned, replacing the previous pass's.
func TestPendingByEffectiveZone(t *testing.T) {
	pinned := pendingPod("pinned", "100m")
	pinned.Spec.NodeSelector = map[string]string{karpv1.LabelZone: "us-east-1b"}
	r, m, reg := metricsProvisioner(t, pendingPod("a", "100m"), pendingPod("b", "100m"), pinned)
	m.karp.PendingByZone("provisioner", map[string]int{"us-east-1a": 7}) // a previous pass's
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	const name = "karpenter_scheduler_pending_pods_by_effective_zone_count"
	for zone, want := range map[string]float64{"flexible": 2, "us-east-1b": 1} {
		if v, ok := observe.Sample(t, reg, name, map[string]string{"controller": "provisioner", "zone": zone}); !ok || v != want {
			t.Errorf("zone %s: %v (%v), want %v", zone, v, ok, want)
		}
	}
	if _, ok := observe.Sample(t, reg, name, map[string]string{"zone": "us-east-1a"}); ok {
		t.Error("the previous pass's series is still there")
	}
}

// A pass gives the pods it placed their schedulable time, from which
// Karpenter's karpenter_pods_provisioning_* metrics count; a pod it could
// not place has none.
func TestProvisioningSchedulableTime(t *testing.T) {
	r, m, reg := metricsProvisioner(t, pendingPod("a", "100m"), pendingPod("big", "2000"))
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	karpmetrics.NewPods(r.w.cache, m.karp, nil).Pass()
	_, a := observe.Sample(t, reg, "karpenter_pods_provisioning_unbound_time_seconds", map[string]string{"name": "a"})
	_, big := observe.Sample(t, reg, "karpenter_pods_provisioning_unbound_time_seconds", map[string]string{"name": "big"})
	if !a || big {
		t.Errorf("provisioning unbound time: a %v, big %v; want a only", a, big)
	}
}
