package karpmetrics_test

// Karpenter v1.14.1's metrics controller suites (node, nodepool, pod),
// ported as tables: each row names the case it comes from. Karpenter's
// gauges are written by its controllers as objects change; Joiner's node,
// nodepool and pod state gauges are read from the cache at scrape time
// (Collector) and the pods' waiting times set by the pod observer's passes
// (Pods), so "reconciled" here is "scraped" or "passed".

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/observe"
)

var ksT0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// ksCollector is a collector over c at ksT0 + an hour.
func ksCollector(t *testing.T, c *fake.Cache) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(karpmetrics.NewCollector(karpmetrics.CollectorConfig{Cache: &cache{Cache: *c, synced: true},
		Now: func() time.Time { return ksT0.Add(time.Hour) }})); err != nil {
		t.Fatal(err)
	}
	return reg
}

func ksNode(name, providerID string, labels map[string]string, allocatable corev1.ResourceList) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(ksT0)},
		Spec: corev1.NodeSpec{ProviderID: providerID}, Status: corev1.NodeStatus{Capacity: allocatable, Allocatable: allocatable}}
}

// TestNodeMetricsAsKarpenter: Karpenter's metrics/node suite.
func TestNodeMetricsAsKarpenter(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("100"), corev1.ResourceCPU: resource.MustParse("5000"),
		corev1.ResourceMemory: resource.MustParse("32Gi")}
	want := map[string]float64{"pods": 100, "cpu": 5000, "memory": 32 << 30}
	plain := ksNode("plain", "aws:///z-a/i-plain", nil, alloc)
	// A NodeClaim names the managed Node by provider ID; neither carries
	// the nodepool label (Karpenter's test NodeClaim has none).
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: awsv1.Kind, Name: "default"}}}
	claim.Status.ProviderID, claim.Status.Allocatable = "aws:///z-a/i-managed", alloc
	managed := ksNode("managed", claim.Status.ProviderID, nil, alloc)

	t.Run("should update the allocatable metric", func(t *testing.T) {
		reg := ksCollector(t, &fake.Cache{NodeList: []*corev1.Node{plain}})
		for res, v := range want {
			// A plain node with no NodeClaim is not managed.
			got, ok := observe.Sample(t, reg, "karpenter_nodes_allocatable", map[string]string{"node_name": "plain", "resource_type": res, "managed": "false"})
			if !ok || got != v {
				t.Errorf("allocatable %s = %v (found %v), want %v", res, got, ok, v)
			}
		}
	})
	t.Run("should set the managed label on per-node metrics for Karpenter-managed nodes", func(t *testing.T) {
		reg := ksCollector(t, &fake.Cache{NodeList: []*corev1.Node{managed}, ClaimList: []*karpv1.NodeClaim{claim}})
		for res, v := range want {
			got, ok := observe.Sample(t, reg, "karpenter_nodes_allocatable", map[string]string{"node_name": "managed", "resource_type": res, "managed": "true"})
			if !ok || got != v {
				t.Errorf("allocatable %s = %v (found %v), want %v", res, got, ok, v)
			}
		}
	})
	t.Run("should update the node lifetime and cluster utilization metrics", func(t *testing.T) {
		reg := ksCollector(t, &fake.Cache{NodeList: []*corev1.Node{plain}})
		if got, ok := observe.Sample(t, reg, "karpenter_nodes_current_lifetime_seconds", map[string]string{"node_name": "plain", "managed": "false"}); !ok || got < 0 {
			t.Errorf("lifetime = %v (found %v), want >= 0", got, ok)
		}
		for res := range want {
			if got, ok := observe.Sample(t, reg, "karpenter_cluster_utilization_percent", map[string]string{"resource_type": res}); !ok || got != 0 {
				t.Errorf("utilization %s = %v (found %v), want 0", res, got, ok)
			}
		}
	})
	t.Run("should remove the node metric gauge when the node is deleted", func(t *testing.T) {
		c := &cache{Cache: fake.Cache{NodeList: []*corev1.Node{plain}}, synced: true}
		reg := prometheus.NewRegistry()
		reg.MustRegister(karpmetrics.NewCollector(karpmetrics.CollectorConfig{Cache: c}))
		if len(observe.Series(t, reg, "karpenter_nodes_allocatable", map[string]string{"node_name": "plain"})) == 0 {
			t.Fatal("no allocatable series while the node is there")
		}
		c.NodeList = nil
		if n := len(observe.Series(t, reg, "karpenter_nodes_allocatable", map[string]string{"node_name": "plain"})); n != 0 {
			t.Errorf("%d allocatable series after the node went", n)
		}
	})
}

// TestNodePoolMetricsAsKarpenter: Karpenter's metrics/nodepool suite.
func TestNodePoolMetricsAsKarpenter(t *testing.T) {
	list := func(cpu, mem, eph string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
			corev1.ResourceEphemeralStorage: resource.MustParse(eph)}
	}
	values := func(l corev1.ResourceList) map[string]float64 {
		out := map[string]float64{}
		for n, q := range l {
			out[map[corev1.ResourceName]string{corev1.ResourceCPU: "cpu", corev1.ResourceMemory: "memory", corev1.ResourceEphemeralStorage: "ephemeral_storage"}[n]] = q.AsApproximateFloat64()
		}
		return out
	}
	pool := func(limits, usage corev1.ResourceList, ref *karpv1.NodeClassReference) *karpv1.NodePool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		np.Spec.Template.Spec.NodeClassRef = ref
		np.Spec.Limits = karpv1.Limits(limits)
		np.Status.Resources = usage
		return np
	}
	ec2 := &karpv1.NodeClassReference{Group: awsv1.Group, Kind: awsv1.Kind, Name: "default"}
	foreign := &karpv1.NodeClassReference{Group: "karpenter.test.sh", Kind: "UnmanagedNodeClass", Name: "default"}
	limits, usage := list("10", "10Mi", "100Gi"), list("10", "10Mi", "100Gi")
	for _, tc := range []struct {
		name   string
		pool   *karpv1.NodePool
		metric string
		want   map[string]float64 // resource_type -> value; nil: no series
	}{
		{"should update the nodepool limit metrics", pool(limits, nil, ec2), "karpenter_nodepools_limit", values(limits)},
		{"should ignore nodepools not managed by this instance of Karpenter", pool(limits, nil, foreign), "karpenter_nodepools_limit", nil},
		{"should update the nodepool usage metrics", pool(nil, usage, ec2), "karpenter_nodepools_usage", values(usage)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := ksCollector(t, &fake.Cache{PoolList: []*karpv1.NodePool{tc.pool}})
			if tc.want == nil {
				if n := len(observe.Series(t, reg, tc.metric, map[string]string{"nodepool": "default"})); n != 0 {
					t.Errorf("%d %s series for another provider's pool", n, tc.metric)
				}
				return
			}
			for res, v := range tc.want {
				got, ok := observe.Sample(t, reg, tc.metric, map[string]string{"nodepool": "default", "resource_type": res})
				if !ok || math.Abs(got-v) > 1e-9*v {
					t.Errorf("%s %s = %v (found %v), want %v", tc.metric, res, got, ok, v)
				}
			}
		})
	}
	t.Run("should delete the nodepool state metrics on nodepool delete", func(t *testing.T) {
		c := &cache{Cache: fake.Cache{PoolList: []*karpv1.NodePool{pool(list("100", "100Mi", "1000Gi"), usage, ec2)}}, synced: true}
		reg := prometheus.NewRegistry()
		reg.MustRegister(karpmetrics.NewCollector(karpmetrics.CollectorConfig{Cache: c}))
		names := []string{"karpenter_nodepools_limit", "karpenter_nodepools_usage"}
		for _, name := range names {
			if len(observe.Series(t, reg, name, map[string]string{"nodepool": "default"})) == 0 {
				t.Fatalf("no %s series while the pool is there", name)
			}
		}
		c.PoolList = nil
		for _, name := range names {
			if n := len(observe.Series(t, reg, name, map[string]string{"nodepool": "default"})); n != 0 {
				t.Errorf("%d %s series after the pool went", n, name)
			}
		}
	})
}

// TestPodStateAsKarpenter: karpenter_pods_state (Karpenter's metrics/pod
// suite, its pod state cases).
func TestPodStateAsKarpenter(t *testing.T) {
	pod := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(ksT0)},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	// A node with the nodepool label is Karpenter's (its pod suite's test).
	managedNode := ksNode("managed", "", map[string]string{karpv1.LabelNodePool: "default"}, nil)
	unmanagedNode := ksNode("unmanaged", "", nil, nil)
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want []map[string]string // series expected (labels, at least)
		gone []map[string]string // series not expected
	}{
		{name: "should update the pod state metrics", pods: []*corev1.Pod{pod("p", "", corev1.PodPending)},
			want: []map[string]string{{"name": "p", "namespace": "default"}}},
		{name: "should set the managed label based on whether the pod's node is Karpenter-managed",
			pods: []*corev1.Pod{pod("on-managed", "managed", corev1.PodRunning), pod("on-unmanaged", "unmanaged", corev1.PodRunning)},
			want: []map[string]string{{"name": "on-managed", "managed": "true"}, {"name": "on-unmanaged", "managed": "false"}}},
		{name: "should update the pod state metrics with pod phase", pods: []*corev1.Pod{pod("p", "", corev1.PodRunning)},
			want: []map[string]string{{"name": "p", "phase": "Running"}}, gone: []map[string]string{{"name": "p", "phase": "Pending"}}},
		{name: "should delete the pod state metric on pod delete", gone: []map[string]string{{"name": "p", "namespace": "default"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := ksCollector(t, &fake.Cache{PodList: tc.pods, NodeList: []*corev1.Node{managedNode, unmanagedNode}})
			for _, l := range tc.want {
				if len(observe.Series(t, reg, "karpenter_pods_state", l)) != 1 {
					t.Errorf("no karpenter_pods_state%v", l)
				}
			}
			for _, l := range tc.gone {
				if n := len(observe.Series(t, reg, "karpenter_pods_state", l)); n != 0 {
					t.Errorf("%d karpenter_pods_state%v series", n, l)
				}
			}
		})
	}
}

const (
	ksUnbound     = "karpenter_pods_unbound_time_seconds"
	ksUnstarted   = "karpenter_pods_unstarted_time_seconds"
	ksBound       = "karpenter_pods_bound_duration_seconds"
	ksStartup     = "karpenter_pods_startup_duration_seconds"
	ksUndecided   = "karpenter_pods_provisioning_scheduling_undecided_time_seconds"
	ksPodNotFound = -1
)

// ksStep is one step of a pod: its state at min minutes (nil: deleted),
// a provisioning plan placing it (or not) or the decision of a scheduling
// simulation, then an observer pass; then the series of web-0 present and
// absent, those whose value did not move since the step before, and the
// histograms' observations so far.
type ksStep struct {
	min     float64
	pod     provPodAt
	plan    string
	decided bool
	present []string
	absent  []string
	frozen  []string
	seen    map[string]uint64
}

// TestPodMetricsAsKarpenter: the pods' waiting times and durations
// (Karpenter's metrics/pod suite, its other cases), counted from creation
// and, for the provisioning ones, from when a plan placed the pod.
func TestPodMetricsAsKarpenter(t *testing.T) {
	all := []string{ksUnbound, provUnbound, ksUnstarted, provUnstarted}
	unbound, unstarted := []string{ksUnbound, provUnbound}, []string{ksUnstarted, provUnstarted}
	observed := func(names ...string) map[string]uint64 {
		out := map[string]uint64{}
		for _, n := range names {
			out[n] = 1
		}
		return out
	}
	// notYetUnschedulable: created, kube-scheduler has not looked yet
	// (Karpenter's provisioner does not see it: not provisionable).
	notYetUnschedulable := func(time.Time) *corev1.Pod { return provPod("uid-1", corev1.PodPending) }
	for _, tc := range []struct {
		name  string
		steps []ksStep
	}{
		{"should update the pod bound and unbound time metrics", []ksStep{
			{min: 60, pod: provUnschedulable, plan: provPlaced, present: unbound},
			{min: 61, pod: provScheduledUnknown, present: unbound},
			// Bound but still Pending: the unbound times stay as they were.
			{min: 62, pod: provBoundPending, present: unbound, frozen: unbound},
			{min: 63, pod: provRunning, absent: unbound, seen: observed(ksBound, provBound)},
		}},
		{"should update the pod startup and unstarted time metrics", []ksStep{
			{min: 60, pod: provUnschedulable, plan: provPlaced, present: unstarted},
			{min: 61, pod: provRunning, present: unstarted, seen: observed(ksBound, provBound)},
			{min: 62, pod: provReadyUnknown, present: unstarted, seen: observed(ksBound, provBound)},
			{min: 63, pod: provReady, absent: unstarted, seen: observed(ksBound, provBound, ksStartup, provStartup)},
		}},
		{"should update the pod unstarted time metrics when the pod has succeeded", []ksStep{
			{min: 60, pod: provUnschedulable, plan: provPlaced, present: unstarted},
			{min: 61, pod: provFinished(corev1.PodSucceeded), absent: unstarted, seen: observed(ksBound, provBound)},
		}},
		{"should update the pod unstarted time metrics when the pod has failed", []ksStep{
			{min: 60, pod: provUnschedulable, plan: provPlaced, present: unstarted},
			{min: 61, pod: provFinished(corev1.PodFailed), absent: unstarted, seen: observed(ksBound, provBound)},
		}},
		{"should create and delete provisioning undecided metrics based on scheduling simulatinos", []ksStep{
			{min: 0, pod: notYetUnschedulable, absent: []string{ksUndecided}},
			{min: 60, pod: provUnschedulable, present: []string{ksUndecided}},
			{min: 61, pod: provUnschedulable, decided: true, absent: []string{ksUndecided}},
		}},
		{"should delete provisioning undecided metrics based on pod deletes", []ksStep{
			{min: 0, pod: notYetUnschedulable, absent: []string{ksUndecided}},
			{min: 60, pod: provUnschedulable, present: []string{ksUndecided}},
			{min: 61, absent: []string{ksUndecided}},
		}},
		// Karpenter's pod has PodScheduled True and no node; a bound pod has
		// both.
		{"should delete provisioning undecided metrics when the pod is already bound", []ksStep{
			{min: 0, pod: provUnschedulable, present: []string{ksUndecided}},
			{min: 60, pod: provBoundPending, absent: []string{ksUndecided}},
		}},
		{"should delete pod unbound and unstarted time metrics on pod delete", []ksStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, present: all},
			{min: 1, absent: all},
		}},
		{"should delete pod unbound and unstarted time metrics when pod schedulable time is zero", []ksStep{
			{min: 0, pod: provUnschedulable, plan: provPlaced, present: []string{provUnbound, provUnstarted}},
			{min: 1, pod: provUnschedulable, plan: provUnplaced, present: []string{ksUnbound, ksUnstarted}, absent: []string{provUnbound, provUnstarted}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := registered(t)
			c := &fake.Cache{}
			now := provT0
			pods := karpmetrics.NewPods(c, m, nil)
			karpmetrics.SetPodsClock(pods, func() time.Time { return now })
			last := map[string]float64{}
			for i, s := range tc.steps {
				now = provT0.Add(time.Duration(s.min * float64(time.Minute)))
				c.PodList = nil
				if s.pod != nil {
					c.PodList = []*corev1.Pod{s.pod(now)}
				}
				if s.plan != "" {
					m.PodsPlanned(now, provPlan(s.plan, "default/web-0"), provByKey(c.PodList))
				}
				if s.decided {
					m.PodsDecided(now, "default/web-0")
				}
				pods.Pass()
				values := map[string]float64{}
				for _, name := range append(append(slices.Clone(all), ksUndecided), s.present...) {
					v, ok := observe.Sample(t, reg, name, map[string]string{"name": "web-0", "namespace": "default"})
					if !ok {
						v = ksPodNotFound
					}
					values[name] = v
				}
				for _, name := range s.present {
					if values[name] == ksPodNotFound {
						t.Errorf("step %d: no %s", i, name)
					}
				}
				for _, name := range s.absent {
					if values[name] != ksPodNotFound {
						t.Errorf("step %d: %s = %v, want no series", i, name, values[name])
					}
				}
				for _, name := range s.frozen {
					if values[name] != last[name] {
						t.Errorf("step %d: %s moved from %v to %v", i, name, last[name], values[name])
					}
				}
				for _, name := range []string{ksBound, provBound, ksStartup, provStartup} {
					got, _ := observe.Sample(t, reg, name, nil)
					if uint64(got) != s.seen[name] {
						t.Errorf("step %d: %s observed %v times, want %d", i, name, got, s.seen[name])
					}
				}
				last = values
			}
		})
	}
}
