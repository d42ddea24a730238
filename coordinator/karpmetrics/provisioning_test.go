package karpmetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/observe"
	"github.com/joiner-dev/joiner/test/poll"
)

const (
	provUnbound   = "karpenter_pods_provisioning_unbound_time_seconds"
	provUnstarted = "karpenter_pods_provisioning_unstarted_time_seconds"
	provBound     = "karpenter_pods_provisioning_bound_duration_seconds"
	provStartup   = "karpenter_pods_provisioning_startup_duration_seconds"
)

// provPodAt is the pod web-0 in one of its states, its conditions' times at.
type provPodAt func(at time.Time) *corev1.Pod

func provPod(uid types.UID, phase corev1.PodPhase, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: uid, CreationTimestamp: metav1.NewTime(provT0)},
		Status: corev1.PodStatus{Phase: phase, Conditions: conds}}
}

func provCond(typ corev1.PodConditionType, status corev1.ConditionStatus, at time.Time) corev1.PodCondition {
	return corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(at)}
}

var (
	provT0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	provUnschedulable provPodAt = func(at time.Time) *corev1.Pod {
		p := provPod("uid-1", corev1.PodPending)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		return p
	}
	provScheduledUnknown provPodAt = func(at time.Time) *corev1.Pod {
		return provPod("uid-1", corev1.PodPending, provCond(corev1.PodScheduled, corev1.ConditionUnknown, at))
	}
	provBoundPending provPodAt = func(at time.Time) *corev1.Pod {
		p := provPod("uid-1", corev1.PodPending, provCond(corev1.PodScheduled, corev1.ConditionTrue, at))
		p.Spec.NodeName = "n-1"
		return p
	}
	// provRunning was bound 30 s before at.
	provRunning provPodAt = func(at time.Time) *corev1.Pod {
		p := provPod("uid-1", corev1.PodRunning, provCond(corev1.PodScheduled, corev1.ConditionTrue, at.Add(-30*time.Second)))
		p.Spec.NodeName = "n-1"
		return p
	}
	provReadyUnknown provPodAt = func(at time.Time) *corev1.Pod {
		p := provRunning(at)
		p.Status.Conditions = append(p.Status.Conditions, provCond(corev1.PodReady, corev1.ConditionUnknown, at))
		return p
	}
	provReady provPodAt = func(at time.Time) *corev1.Pod {
		p := provRunning(at)
		p.Status.Conditions = append(p.Status.Conditions, provCond(corev1.PodReady, corev1.ConditionTrue, at))
		return p
	}
	provFinished = func(phase corev1.PodPhase) provPodAt {
		return func(at time.Time) *corev1.Pod {
			p := provRunning(at)
			p.Status.Phase = phase
			p.Status.Conditions = append(p.Status.Conditions, provCond(corev1.PodReady, corev1.ConditionFalse, at))
			return p
		}
	}
	// provReplaced is another pod of the same name (a StatefulSet's).
	provReplaced provPodAt = func(at time.Time) *corev1.Pod {
		p := provUnschedulable(at)
		p.UID = "uid-2"
		return p
	}
)

// provStep: at minutes after provT0 the pod is in state (nil: deleted), a
// plan may run (placed, unplaced, or none), then the observer passes; want
// the provisioning gauges (-1: no series) and histograms (observations,
// sum of seconds) so far.
type provStep struct {
	min                float64
	pod                provPodAt
	plan               string // provPlaced, provUnplaced or ""
	unbound, unstarted float64
	bound, startup     provHist
}

type provHist struct {
	n   uint64
	sum float64
}

const (
	provPlaced   = "placed"
	provUnplaced = "unplaced"
	provNone     = -1
)

// TestProvisioningMetrics: Karpenter's pod provisioning metrics count from
// when a provisioning plan first placed the pod (its schedulable time),
// for the pods a plan placed only: the unbound and unstarted times while
// the pod waits, the bound and startup durations once it is bound and
// ready. Karpenter's metrics.pod suite, in Joiner's words, with the
// schedulable time Joiner's plans give.
func TestProvisioningMetrics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []provStep
	}{
		{"bound: placed, unbound until bound, frozen while Pending, observed once running", []provStep{
			{min: 0, pod: provUnschedulable, unbound: provNone, unstarted: provNone},
			{min: 60, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 61, pod: provUnschedulable, unbound: 60, unstarted: 60},
			{min: 62, pod: provScheduledUnknown, unbound: 120, unstarted: 120},
			// Bound while still Pending: the unbound time stays as it was.
			{min: 63, pod: provBoundPending, unbound: 120, unstarted: 180},
			{min: 64, pod: provRunning, unbound: provNone, unstarted: 240, bound: provHist{1, 210}},
		}},
		{"startup: unstarted while running unready, observed when ready", []provStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 1, pod: provRunning, unbound: provNone, unstarted: 60, bound: provHist{1, 30}},
			{min: 2, pod: provReadyUnknown, unbound: provNone, unstarted: 120, bound: provHist{1, 30}},
			{min: 3, pod: provReady, unbound: provNone, unstarted: provNone, bound: provHist{1, 30}, startup: provHist{1, 180}},
			{min: 4, pod: provReady, unbound: provNone, unstarted: provNone, bound: provHist{1, 30}, startup: provHist{1, 180}},
		}},
		{"succeeded: no startup observed", []provStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 1, pod: provFinished(corev1.PodSucceeded), unbound: provNone, unstarted: provNone, bound: provHist{1, 30}},
		}},
		{"failed: no startup observed", []provStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 1, pod: provFinished(corev1.PodFailed), unbound: provNone, unstarted: provNone, bound: provHist{1, 30}},
		}},
		{"deleted: series go", []provStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 1, pod: nil, unbound: provNone, unstarted: provNone},
		}},
		{"not placed: no provisioning series", []provStep{
			{min: 0, pod: provUnschedulable, plan: provUnplaced, unbound: provNone, unstarted: provNone},
			{min: 1, pod: provRunning, unbound: provNone, unstarted: provNone},
			{min: 2, pod: provReady, unbound: provNone, unstarted: provNone},
		}},
		{"unplaced later: the schedulable time goes, a new placement starts again", []provStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 1, pod: provUnschedulable, plan: provUnplaced, unbound: provNone, unstarted: provNone},
			{min: 2, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 3, pod: provUnschedulable, unbound: 60, unstarted: 60},
		}},
		{"placed again: the first placement counts", []provStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 1, pod: provUnschedulable, plan: provPlaced, unbound: 60, unstarted: 60},
		}},
		{"a pod of the same name does not inherit the time", []provStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, unbound: 0, unstarted: 0},
			{min: 1, pod: provReplaced, unbound: provNone, unstarted: provNone},
			{min: 2, pod: provReplaced, plan: provPlaced, unbound: 0, unstarted: 0},
		}},
		{"bound pods planned for a replacement are not schedulable", []provStep{
			{min: 0, pod: provBoundPending, plan: provPlaced, unbound: provNone, unstarted: provNone},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := registered(t)
			cache := &fake.Cache{}
			now := provT0
			pods := karpmetrics.NewPods(cache, m, nil)
			karpmetrics.SetPodsClock(pods, func() time.Time { return now })
			for i, s := range tc.steps {
				now = provT0.Add(time.Duration(s.min * float64(time.Minute)))
				cache.PodList = nil
				if s.pod != nil {
					cache.PodList = []*corev1.Pod{s.pod(now)}
				}
				if s.plan != "" {
					m.PodsPlanned(now, provPlan(s.plan, "default/web-0"), provByKey(cache.PodList))
				}
				pods.Pass()
				provGaugeIs(t, i, reg, provUnbound, s.unbound)
				provGaugeIs(t, i, reg, provUnstarted, s.unstarted)
				provHistIs(t, i, reg, provBound, s.bound)
				provHistIs(t, i, reg, provStartup, s.startup)
			}
		})
	}
}

// TestPodsPlannedPlacements: a plan places a pod on a new NodeClaim or by
// nomination (an existing node, in-flight capacity); either makes it
// schedulable.
func TestPodsPlannedPlacements(t *testing.T) {
	m, reg := registered(t)
	a, b, c := provUnschedulable(provT0), provUnschedulable(provT0), provUnschedulable(provT0)
	a.Name, a.UID = "a", "uid-a"
	b.Name, b.UID = "b", "uid-b"
	c.Name, c.UID = "c", "uid-c"
	cache := &fake.Cache{PodList: []*corev1.Pod{a, b, c}}
	pods := karpmetrics.NewPods(cache, m, nil)
	karpmetrics.SetPodsClock(pods, func() time.Time { return provT0.Add(time.Minute) })
	m.PodsPlanned(provT0, &scheduler.Plan{NodeClaims: []scheduler.NodeClaim{{Name: "nc-1", Pods: []string{"default/a"}}},
		Nominations:   []scheduler.Nomination{{Pod: "default/b", Node: "n-1"}},
		Unschedulable: []scheduler.Unschedulable{{Pod: "default/c"}}}, provByKey(cache.PodList))
	pods.Pass()
	for name, want := range map[string]float64{"a": 60, "b": 60, "c": provNone} {
		got, ok := observe.Sample(t, reg, provUnbound, map[string]string{"name": name, "namespace": "default"})
		if !ok {
			got = provNone
		}
		if got != want {
			t.Errorf("%s{name=%q} = %v, want %v", provUnbound, name, got, want)
		}
	}
	var nilMetrics *karpmetrics.Metrics
	nilMetrics.PodsPlanned(provT0, &scheduler.Plan{}, nil)
}

// TestPodsRunEndsSeries: when the observer's term ends, its provisioning
// gauges go (a follower serves none).
func TestPodsRunEndsSeries(t *testing.T) {
	m, reg := registered(t)
	cache := &fake.Cache{PodList: []*corev1.Pod{provUnschedulable(provT0)}}
	m.PodsPlanned(time.Now(), provPlan(provPlaced, "default/web-0"), provByKey(cache.PodList))
	pods := karpmetrics.NewPods(cache, m, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pods.Run(ctx) }()
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "provisioning unbound time set", func() bool {
		_, ok := observe.Sample(t, reg, provUnbound, nil)
		return ok
	})
	cancel()
	<-done
	if _, ok := observe.Sample(t, reg, provUnbound, nil); ok {
		t.Errorf("%s still served after the term", provUnbound)
	}
	if _, ok := observe.Sample(t, reg, provUnstarted, nil); ok {
		t.Errorf("%s still served after the term", provUnstarted)
	}
}

func provPlan(kind string, keys ...string) *scheduler.Plan {
	p := &scheduler.Plan{}
	switch kind {
	case provPlaced:
		p.NodeClaims = []scheduler.NodeClaim{{Name: "default-abc", Pods: keys}}
	case provUnplaced:
		for _, k := range keys {
			p.Unschedulable = append(p.Unschedulable, scheduler.Unschedulable{Pod: k, Reason: "no instance type fits"})
		}
	}
	return p
}

func provByKey(pods []*corev1.Pod) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range pods {
		out[p.Namespace+"/"+p.Name] = p
	}
	return out
}

func provGaugeIs(t *testing.T, step int, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	got, ok := observe.Sample(t, reg, name, map[string]string{"name": "web-0", "namespace": "default"})
	if !ok {
		got = provNone
	}
	if got != want {
		t.Errorf("step %d: %s = %v, want %v", step, name, got, want)
	}
}

func provHistIs(t *testing.T, step int, reg *prometheus.Registry, name string, want provHist) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got provHist
	for _, f := range fams {
		if f.GetName() == name {
			h := f.GetMetric()[0].GetHistogram()
			got = provHist{h.GetSampleCount(), h.GetSampleSum()}
		}
	}
	if got != want {
		t.Errorf("step %d: %s = %d observations summing %vs, want %d summing %vs", step, name, got.n, got.sum, want.n, want.sum)
	}
}
