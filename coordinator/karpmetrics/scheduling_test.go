package karpmetrics

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/test/observe"
)

const (
	decisionName   = "karpenter_pods_scheduling_decision_duration_seconds"
	undecidedName  = "karpenter_pods_provisioning_scheduling_undecided_time_seconds"
	queueName      = "karpenter_scheduler_queue_depth"
	unfinishedName = "karpenter_scheduler_unfinished_work_seconds"
)

// schedulingRig is a registered set whose scrape-time clock the test sets.
type schedulingRig struct {
	reg   *prometheus.Registry
	m     *Metrics
	clock time.Time
}

func newSchedulingRig(t *testing.T) *schedulingRig {
	t.Helper()
	r := &schedulingRig{reg: prometheus.NewRegistry(), clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m, err := For(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	m.scheduling.decisions.now = func() time.Time { return r.clock }
	r.m = m
	return r
}

// family is the gathered family of name (nil: no series).
func (r *schedulingRig) family(t *testing.T, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// decisions are the observed decision count and sum.
func (r *schedulingRig) decisions(t *testing.T) (count uint64, sum float64) {
	t.Helper()
	f := r.family(t, decisionName)
	if f == nil {
		return 0, 0
	}
	h := f.GetMetric()[0].GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// undecided are the undecided times by pod name.
func (r *schedulingRig) undecided(t *testing.T) map[string]float64 {
	t.Helper()
	return gaugesBy(r.family(t, undecidedName), "namespace", "name")
}

// gaugesBy are the values of f's series by their labels a and b ("a/b").
func gaugesBy(f *dto.MetricFamily, a, b string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		out[labels[a]+"/"+labels[b]] = m.GetGauge().GetValue()
	}
	return out
}

func unschedulablePod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
}

func boundPod(name string) *corev1.Pod {
	p := unschedulablePod(name)
	p.Spec.NodeName = "node-1"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	return p
}

// TestSchedulingDecisions: a pod seen provisionable is observed once, at
// its first decision, with the time since it was first seen; until then
// its undecided time grows; a decided, bound or forgotten pod has none.
func TestSchedulingDecisions(t *testing.T) {
	type step struct {
		at     time.Duration // since the rig's start, for the step and the scrape after it
		do     func(m *Metrics, now time.Time)
		count  uint64
		sum    float64
		undec  map[string]float64
		remark string
	}
	ack := func(pods ...*corev1.Pod) func(*Metrics, time.Time) {
		return func(m *Metrics, now time.Time) { m.AckPods(now, pods...) }
	}
	decide := func(keys ...string) func(*Metrics, time.Time) {
		return func(m *Metrics, now time.Time) { m.PodsDecided(now, keys...) }
	}
	retain := func(keys ...string) func(*Metrics, time.Time) {
		return func(m *Metrics, _ time.Time) {
			m.RetainPods(func(k string) bool {
				for _, want := range keys {
					if k == want {
						return true
					}
				}
				return false
			})
		}
	}
	none := map[string]float64{}
	cases := []struct {
		name  string
		steps []step
	}{
		{"observed once at the first decision", []step{
			{0, ack(unschedulablePod("a")), 0, 0, map[string]float64{"ns/a": 0}, "seen"},
			{5 * time.Second, nil, 0, 0, map[string]float64{"ns/a": 5}, "still undecided"},
			{6 * time.Second, decide("ns/a"), 1, 6, none, "decided"},
			{9 * time.Second, decide("ns/a"), 1, 6, none, "decided again: not observed"},
		}},
		{"seen once", []step{
			{0, ack(unschedulablePod("a")), 0, 0, map[string]float64{"ns/a": 0}, "seen"},
			{2 * time.Second, ack(unschedulablePod("a")), 0, 0, map[string]float64{"ns/a": 2}, "seen again: the first time holds"},
			{4 * time.Second, decide("ns/a"), 1, 4, none, "decided"},
		}},
		{"one of two decided", []step{
			{0, ack(unschedulablePod("a"), unschedulablePod("b")), 0, 0, map[string]float64{"ns/a": 0, "ns/b": 0}, "seen"},
			{3 * time.Second, decide("ns/b"), 1, 3, map[string]float64{"ns/a": 3}, "b decided"},
		}},
		{"forgotten when no longer pending", []step{
			{0, ack(unschedulablePod("a"), unschedulablePod("b")), 0, 0, map[string]float64{"ns/a": 0, "ns/b": 0}, "seen"},
			{time.Second, retain("ns/b"), 0, 0, map[string]float64{"ns/b": 1}, "a gone"},
			{2 * time.Second, ack(unschedulablePod("a")), 0, 0, map[string]float64{"ns/a": 0, "ns/b": 2}, "a again is new"},
			{3 * time.Second, decide("ns/a"), 1, 1, map[string]float64{"ns/b": 3}, "a decided since seen again"},
		}},
		{"a decided pod forgotten", []step{
			{0, ack(unschedulablePod("a")), 0, 0, map[string]float64{"ns/a": 0}, "seen"},
			{time.Second, decide("ns/a"), 1, 1, none, "decided"},
			{2 * time.Second, retain(), 1, 1, none, "bound: forgotten"},
			{3 * time.Second, decide("ns/a"), 1, 1, none, "unknown pod decided: not observed"},
		}},
		{"bound pods are not seen", []step{
			{0, ack(boundPod("a")), 0, 0, none, "bound"},
			{time.Second, decide("ns/a"), 0, 0, none, "never seen: not observed"},
		}},
		{"decided before seen", []step{
			{0, decide("ns/a"), 0, 0, none, "decided unseen"},
			{time.Second, ack(unschedulablePod("a")), 0, 0, none, "seen after: already decided"},
			{2 * time.Second, decide("ns/a"), 0, 0, none, "not observed"},
		}},
		{"a term's end forgets", []step{
			{0, ack(unschedulablePod("a")), 0, 0, map[string]float64{"ns/a": 0}, "seen"},
			{time.Second, func(m *Metrics, _ time.Time) { m.endSchedulingTerm() }, 0, 0, none, "term ended"},
			{2 * time.Second, decide("ns/a"), 0, 0, none, "not observed"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newSchedulingRig(t)
			start := r.clock
			for i, s := range tc.steps {
				r.clock = start.Add(s.at)
				if s.do != nil {
					s.do(r.m, r.clock)
				}
				if count, sum := r.decisions(t); count != s.count || sum != s.sum {
					t.Errorf("step %d (%s): %d decisions summing %vs, want %d summing %vs", i, s.remark, count, sum, s.count, s.sum)
				}
				if got := r.undecided(t); !equalTimes(got, s.undec) {
					t.Errorf("step %d (%s): undecided %v, want %v", i, s.remark, got, s.undec)
				}
			}
			if n := len(r.m.scheduling.decisions.pods); n > 2 {
				t.Errorf("%d pods kept", n)
			}
		})
	}
}

func equalTimes(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSolveMetrics: a simulation's queue depth is its pods, then those it
// could not place; its unfinished work grows while it runs and goes when
// it ends; a controller's next simulation replaces its series (a new
// scheduling_id), others' stay.
func TestSolveMetrics(t *testing.T) {
	r := newSchedulingRig(t)
	sample := func(name, controller string) (float64, bool) {
		t.Helper()
		return observe.Sample(t, r.reg, name, map[string]string{"controller": controller})
	}
	id := func(controller string) string {
		t.Helper()
		f := r.family(t, queueName)
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["controller"] == controller {
				return labels["scheduling_id"]
			}
		}
		return ""
	}

	done := r.m.SolveStarted("provisioner", 5)
	if v, ok := sample(queueName, "provisioner"); !ok || v != 5 {
		t.Fatalf("queue depth during the solve %v (%v), want 5", v, ok)
	}
	if v, ok := sample(unfinishedName, "provisioner"); !ok || v != 0 {
		t.Fatalf("unfinished work at the start %v (%v), want 0", v, ok)
	}
	r.clock = r.clock.Add(2 * time.Second)
	if v, _ := sample(unfinishedName, "provisioner"); v != 2 {
		t.Fatalf("unfinished work after 2s: %v", v)
	}
	first := id("provisioner")
	other := r.m.SolveStarted("other", 1)
	done(2)
	if v, ok := sample(queueName, "provisioner"); !ok || v != 2 {
		t.Fatalf("queue depth after the solve %v (%v), want 2 (unplaced)", v, ok)
	}
	if _, ok := sample(unfinishedName, "provisioner"); ok {
		t.Fatal("unfinished work left after the solve")
	}
	if _, ok := sample(unfinishedName, "other"); !ok {
		t.Fatal("another controller's solve in progress lost")
	}
	other(0)

	done = r.m.SolveStarted("provisioner", 3)
	if second := id("provisioner"); second == first || second == "" {
		t.Fatalf("scheduling_id %q after %q: want a new one", second, first)
	}
	done(0)
	if v, ok := sample(queueName, "provisioner"); !ok || v != 0 {
		t.Fatalf("queue depth %v (%v), want one series at 0", v, ok)
	}
	if v, ok := sample(queueName, "other"); !ok || v != 0 {
		t.Fatalf("other controller's queue depth %v (%v)", v, ok)
	}

	// A solve that ends after the term ended sets nothing.
	late := r.m.SolveStarted("provisioner", 4)
	r.m.endSchedulingTerm()
	late(1)
	for _, name := range []string{queueName, unfinishedName} {
		if f := r.family(t, name); f != nil && len(f.GetMetric()) > 0 {
			t.Errorf("%s: %d series after the term ended", name, len(f.GetMetric()))
		}
	}

	// A nil set takes every call.
	var m *Metrics
	m.AckPods(r.clock, unschedulablePod("a"))
	m.PodsDecided(r.clock, "ns/a")
	m.RetainPods(func(string) bool { return false })
	m.SolveStarted("provisioner", 1)(0)
	m.endSchedulingTerm()
}

// Each solve replaces the controller's pending pods by effective zone;
// other controllers' series stay, and the term's end clears them.
func TestPendingByZone(t *testing.T) {
	const name = "karpenter_scheduler_pending_pods_by_effective_zone_count"
	r := newSchedulingRig(t)
	series := func() map[string]float64 { return gaugesBy(r.family(t, name), "controller", "zone") }
	for _, step := range []struct {
		controller string
		counts     map[string]int
		want       map[string]float64
	}{
		{"provisioner", map[string]int{"us-west-2a": 2, "flexible": 3},
			map[string]float64{"provisioner/us-west-2a": 2, "provisioner/flexible": 3}},
		{"other", map[string]int{"none": 1},
			map[string]float64{"provisioner/us-west-2a": 2, "provisioner/flexible": 3, "other/none": 1}},
		{"provisioner", map[string]int{"none": 4},
			map[string]float64{"provisioner/none": 4, "other/none": 1}},
		{"provisioner", nil, map[string]float64{"other/none": 1}},
	} {
		r.m.PendingByZone(step.controller, step.counts)
		if got := series(); !maps.Equal(got, step.want) {
			t.Fatalf("after %s %v: series %v, want %v", step.controller, step.counts, got, step.want)
		}
	}
	r.m.endSchedulingTerm()
	if got := series(); len(got) != 0 {
		t.Fatalf("series after the term ended: %v", got)
	}
	var m *Metrics
	m.PendingByZone("provisioner", map[string]int{"flexible": 1})
}

// A pod recreated under the name of a decided one is a new pod: seen anew,
// undecided until its own decision.
func TestRecreatedPodIsNew(t *testing.T) {
	r := newSchedulingRig(t)
	old := unschedulablePod("web-0")
	old.UID = "uid-1"
	r.m.AckPods(r.clock, old)
	r.m.PodsDecided(r.clock, "ns/web-0")
	if got := r.undecided(t); len(got) != 0 {
		t.Fatalf("undecided %v after the decision", got)
	}
	again := unschedulablePod("web-0")
	again.UID = "uid-2"
	r.m.AckPods(r.clock, again)
	r.clock = r.clock.Add(3 * time.Second)
	if got := r.undecided(t); got["ns/web-0"] != 3 {
		t.Fatalf("undecided %v, want the recreated pod's 3 s", got)
	}
	r.m.PodsDecided(r.clock, "ns/web-0")
	if n, sum := r.decisions(t); n != 2 || sum != 3 {
		t.Fatalf("%d decisions summing %v s, want 2 summing 3 s", n, sum)
	}
}
