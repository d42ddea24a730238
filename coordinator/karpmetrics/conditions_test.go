package karpmetrics_test

import (
	"maps"
	"math"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/fixture"
	"github.com/joiner-dev/joiner/test/observe"
)

// statusFixtures: at now, NodeClaim default-abc (pool default, class
// default) Launched True for an hour and Initialized Unknown
// (NotInitialized) for 50 min, NodeClaim default-def Launched False
// (LaunchFailed) for a minute, its Node n-1 (initialized) Ready True
// (KubeletReady) for 50 min, NodePool default Ready True for 2 h and
// EC2NodeClass default Ready True for 3 h.
type statusFixtures struct {
	now   time.Time
	cache *fake.Cache
}

func cond(typ string, status metav1.ConditionStatus, reason string, since time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(since)}
}

func newStatusFixtures() *statusFixtures {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	labels := map[string]string{karpv1.LabelNodePool: "default", karpv1.LabelNodeClass: "default"}
	claim := func(name string, conds ...metav1.Condition) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-nc-" + name), Labels: labels}}
		nc.Spec.NodeClassRef = fixture.NodeClassRef()
		nc.Status.Conditions = conds
		return nc
	}
	abc := claim("default-abc", cond("Launched", metav1.ConditionTrue, "Launched", now.Add(-time.Hour)),
		cond("Initialized", metav1.ConditionUnknown, "NotInitialized", now.Add(-50*time.Minute)))
	def := claim("default-def", cond("Launched", metav1.ConditionFalse, "LaunchFailed", now.Add(-time.Minute)))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-1", UID: "uid-n-1",
		Labels: map[string]string{karpv1.LabelNodePool: "default", karpv1.LabelNodeClass: "default", karpv1.LabelInitialized: "true"}}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now.Add(-50 * time.Minute))}}
	pool := fixture.NodePool("default", karpv1.CapacityTypeSpot)
	pool.UID = "uid-np-default"
	pool.Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Ready", now.Add(-2*time.Hour))}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-ec2nc-default"}}
	class.Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Ready", now.Add(-3*time.Hour))}
	return &statusFixtures{now: now, cache: &fake.Cache{ClaimList: []*karpv1.NodeClaim{abc, def}, NodeList: []*corev1.Node{node},
		PoolList: []*karpv1.NodePool{pool}, ClassList: []*awsv1.EC2NodeClass{class}}}
}

func (fx *statusFixtures) clock() time.Time { return fx.now }

// statusRegistry registers the collector and the observer of fx on a new
// registry.
func statusRegistry(t *testing.T, fx *statusFixtures, leading func() bool) (*prometheus.Registry, *karpmetrics.StatusObserver) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(karpmetrics.NewStatusCollector(karpmetrics.StatusCollectorConfig{Cache: fx.cache, Leading: leading,
		Now: fx.clock})); err != nil {
		t.Fatal(err)
	}
	obs, err := karpmetrics.NewStatusObserver(karpmetrics.StatusObserverConfig{Cache: fx.cache, Registerer: reg, Now: fx.clock})
	if err != nil {
		t.Fatal(err)
	}
	return reg, obs
}

// total sums the matching series: gauge and counter values, histogram
// sample counts.
func total(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range observe.Series(t, reg, name, want) {
		sum += m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	return sum
}

// histogram is the one matching histogram's sample count and sum.
func histogram(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (count uint64, sum float64) {
	t.Helper()
	ms := observe.Series(t, reg, name, want)
	switch len(ms) {
	case 0:
		return 0, 0
	case 1:
		return ms[0].GetHistogram().GetSampleCount(), ms[0].GetHistogram().GetSampleSum()
	}
	t.Fatalf("%s%v: %d series, want at most 1", name, want, len(ms))
	return 0, 0
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestStatusGauges: each object's conditions by type, status and reason
// with the time in their status, labelled as Karpenter labels them per
// kind, and the generic names for every kind but Node.
func TestStatusGauges(t *testing.T) {
	fx := newStatusFixtures()
	reg, _ := statusRegistry(t, fx, nil)
	abc := map[string]string{"namespace": "", "name": "default-abc", "karpenter_sh_nodepool": "default", "karpenter_k8s_aws_ec2nodeclass": "default"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"operator_nodeclaim_status_condition_count", with(abc, "type", "Launched", "status", "True", "reason", "Launched"), 1},
		{"operator_nodeclaim_status_condition_current_status_seconds", with(abc, "type", "Launched", "status", "True", "reason", "Launched"), 3600},
		{"operator_nodeclaim_status_condition_count", with(abc, "type", "Initialized", "status", "Unknown", "reason", "NotInitialized"), 1},
		{"operator_nodeclaim_status_condition_current_status_seconds", with(abc, "type", "Initialized", "status", "Unknown"), 3000},
		// Counts by type and status across objects (Alarm := Launched=False > 0).
		{"operator_nodeclaim_status_condition_count", map[string]string{"type": "Launched"}, 2},
		{"operator_nodeclaim_status_condition_count", map[string]string{"type": "Launched", "status": "True"}, 1},
		{"operator_nodeclaim_status_condition_count", map[string]string{"type": "Launched", "status": "False", "reason": "LaunchFailed"}, 1},
		{"operator_nodeclaim_status_condition_count", map[string]string{"status": "Unknown"}, 1},
		{"operator_status_condition_count", map[string]string{"kind": "NodeClaim", "group": "karpenter.sh", "type": "Launched"}, 2},
		{"operator_status_condition_current_status_seconds", map[string]string{"kind": "NodeClaim", "name": "default-def"}, 60},
		{"operator_node_status_condition_count", map[string]string{"name": "n-1", "type": "Ready", "status": "True", "reason": "KubeletReady",
			"karpenter_sh_initialized": "true", "karpenter_sh_nodepool": "default", "karpenter_k8s_aws_ec2nodeclass": "default"}, 1},
		{"operator_node_status_condition_current_status_seconds", map[string]string{"name": "n-1", "type": "Ready"}, 3000},
		{"operator_status_condition_count", map[string]string{"kind": "Node"}, 0}, // Karpenter emits no generic Node series
		{"operator_nodepool_status_condition_count", map[string]string{"name": "default", "type": "Ready", "status": "True", "reason": "Ready"}, 1},
		{"operator_nodepool_status_condition_current_status_seconds", map[string]string{"name": "default"}, 7200},
		{"operator_status_condition_count", map[string]string{"kind": "NodePool", "group": "karpenter.sh"}, 1},
		{"operator_ec2nodeclass_status_condition_current_status_seconds", map[string]string{"name": "default", "type": "Ready"}, 10800},
		{"operator_status_condition_current_status_seconds", map[string]string{"kind": "EC2NodeClass", "group": "karpenter.k8s.aws"}, 10800},
		// Nothing is being deleted.
		{"operator_nodeclaim_termination_current_time_seconds", nil, 0},
		{"operator_termination_current_time_seconds", nil, 0},
	} {
		if got := total(t, reg, tc.name, tc.labels); !near(got, tc.want) {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

// TestStatusLabelNames: each family's label names are operatorpkg's for
// Karpenter's configuration of the kind.
func TestStatusLabelNames(t *testing.T) {
	fx := newStatusFixtures()
	now := metav1.NewTime(fx.now.Add(-time.Minute))
	for _, nc := range fx.cache.ClaimList {
		nc.DeletionTimestamp = &now
	}
	fx.cache.NodeList[0].DeletionTimestamp = &now
	fx.cache.PoolList[0].DeletionTimestamp = &now
	fx.cache.ClassList[0].DeletionTimestamp = &now
	reg, obs := statusRegistry(t, fx, nil)
	obs.Pass()
	// The conditions change and every object goes: each event family has
	// a series.
	fx.now = fx.now.Add(time.Minute)
	for _, nc := range fx.cache.ClaimList {
		nc.Status.Conditions[0].Status = metav1.ConditionUnknown
		nc.Status.Conditions[0].LastTransitionTime = metav1.NewTime(fx.now)
	}
	fx.cache.NodeList[0].Status.Conditions[0].Status = corev1.ConditionFalse
	fx.cache.PoolList[0].Status.Conditions[0].Status = metav1.ConditionFalse
	fx.cache.ClassList[0].Status.Conditions[0].Status = metav1.ConditionFalse
	gauges, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	obs.Pass()
	fx.cache.ClaimList, fx.cache.NodeList, fx.cache.PoolList, fx.cache.ClassList = nil, nil, nil, nil
	obs.Pass()
	events, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, f := range append(gauges, events...) {
		if len(f.GetMetric()) == 0 || got[f.GetName()] != nil {
			continue
		}
		names := []string{}
		for _, lp := range f.GetMetric()[0].GetLabel() {
			names = append(names, lp.GetName())
		}
		sort.Strings(names)
		got[f.GetName()] = names
	}
	cond := []string{"name", "namespace", "reason", "status", "type"}
	claim := []string{"karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"}
	node := []string{"karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_initialized", "karpenter_sh_nodepool"}
	generic := []string{"group", "kind"}
	want := map[string][]string{
		"operator_status_condition_count":                  append(slices.Clone(cond), generic...),
		"operator_status_condition_current_status_seconds": append(slices.Clone(cond), generic...),
		"operator_status_condition_transitions_total":      {"group", "kind", "reason", "status", "type"},
		"operator_status_condition_transition_seconds":     {"group", "kind", "status", "type"},
		"operator_termination_current_time_seconds":        {"group", "kind", "name", "namespace"},
		"operator_termination_duration_seconds":            generic,
	}
	for kind, extra := range map[string][]string{"nodeclaim": claim, "node": node, "nodepool": nil, "ec2nodeclass": nil} {
		p := "operator_" + kind + "_"
		want[p+"status_condition_count"] = append(slices.Clone(cond), extra...)
		want[p+"status_condition_current_status_seconds"] = append(slices.Clone(cond), extra...)
		want[p+"status_condition_transitions_total"] = append([]string{"reason", "status", "type"}, extra...)
		want[p+"status_condition_transition_seconds"] = append([]string{"status", "type"}, extra...)
		want[p+"termination_current_time_seconds"] = append([]string{"name", "namespace"}, extra...)
		want[p+"termination_duration_seconds"] = slices.Clone(extra)
	}
	for name, labels := range want {
		sort.Strings(labels)
		have, ok := got[name]
		if !ok {
			t.Errorf("%s: not served", name)
			continue
		}
		if !slices.Equal(have, labels) {
			t.Errorf("%s: labels %v, want %v", name, have, labels)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: served, not expected", name)
		}
	}
}

// TestStatusTransitions: a change of a condition's status is counted once,
// with its new status and reason, and the time it spent in its previous
// status (between the two lastTransitionTimes) observed once.
func TestStatusTransitions(t *testing.T) {
	fx := newStatusFixtures()
	reg, obs := statusRegistry(t, fx, nil)
	abc := fx.cache.ClaimList[0]
	claim := map[string]string{"karpenter_sh_nodepool": "default", "karpenter_k8s_aws_ec2nodeclass": "default"}
	launched := func(status metav1.ConditionStatus, reason string) map[string]string {
		return map[string]string{"type": "Launched", "status": string(status), "reason": reason}
	}
	type want struct {
		name        string
		labels      map[string]string
		count       float64
		seconds     float64 // a histogram's sum
		isHistogram bool
	}
	for _, step := range []struct {
		what    string
		advance time.Duration
		change  func()
		want    []want
	}{
		{what: "first pass: conditions found True or False count once, no time observed", want: []want{
			{name: "operator_nodeclaim_status_condition_transitions_total", labels: launched("True", "Launched"), count: 1},
			{name: "operator_nodeclaim_status_condition_transitions_total", labels: launched("False", "LaunchFailed"), count: 1},
			{name: "operator_nodeclaim_status_condition_transitions_total", labels: map[string]string{"type": "Initialized"}, count: 0},
			{name: "operator_node_status_condition_transitions_total", labels: map[string]string{"type": "Ready", "status": "True",
				"reason": "KubeletReady", "karpenter_sh_initialized": "true"}, count: 1},
			{name: "operator_status_condition_transitions_total", labels: map[string]string{"kind": "NodeClaim", "type": "Launched"}, count: 2},
			{name: "operator_status_condition_transitions_total", labels: map[string]string{"kind": "Node"}, count: 0},
			{name: "operator_nodeclaim_status_condition_transition_seconds", count: 0, isHistogram: true},
		}},
		{what: "Initialized Unknown -> True after 50 min 30 s", advance: 30 * time.Second, change: func() {
			abc.Status.Conditions[1] = cond("Initialized", metav1.ConditionTrue, "Initialized", fx.now)
		}, want: []want{
			{name: "operator_nodeclaim_status_condition_transitions_total", labels: map[string]string{"type": "Initialized", "status": "True",
				"reason": "Initialized", "karpenter_sh_nodepool": "default", "karpenter_k8s_aws_ec2nodeclass": "default"}, count: 1},
			{name: "operator_nodeclaim_status_condition_transition_seconds", labels: mergeLabels(claim, map[string]string{"type": "Initialized",
				"status": "Unknown"}), count: 1, seconds: 3030, isHistogram: true},
			{name: "operator_status_condition_transition_seconds", labels: map[string]string{"kind": "NodeClaim", "group": "karpenter.sh",
				"type": "Initialized", "status": "Unknown"}, count: 1, seconds: 3030, isHistogram: true},
		}},
		{what: "no change: nothing observed again", advance: time.Minute, want: []want{
			{name: "operator_nodeclaim_status_condition_transitions_total", labels: map[string]string{"type": "Initialized"}, count: 1},
			{name: "operator_nodeclaim_status_condition_transition_seconds", count: 1, seconds: 3030, isHistogram: true},
		}},
		{what: "a reason change alone is no transition", advance: time.Minute, change: func() {
			abc.Status.Conditions[1].Reason = "StillInitialized"
		}, want: []want{
			{name: "operator_nodeclaim_status_condition_transitions_total", labels: map[string]string{"type": "Initialized"}, count: 1},
			{name: "operator_nodeclaim_status_condition_count", labels: map[string]string{"type": "Initialized", "reason": "StillInitialized"}, count: 1},
			{name: "operator_nodeclaim_status_condition_count", labels: map[string]string{"type": "Initialized", "reason": "Initialized"}, count: 0},
		}},
		{what: "a condition that goes away and comes back False counts, without time", advance: time.Minute, change: func() {
			abc.Status.Conditions = abc.Status.Conditions[:1]
		}, want: []want{
			{name: "operator_nodeclaim_status_condition_count", labels: map[string]string{"type": "Initialized"}, count: 0},
		}},
		{what: "Initialized back, False", advance: time.Minute, change: func() {
			abc.Status.Conditions = append(abc.Status.Conditions, cond("Initialized", metav1.ConditionFalse, "Broken", fx.now))
		}, want: []want{
			{name: "operator_nodeclaim_status_condition_transitions_total", labels: map[string]string{"type": "Initialized", "status": "False",
				"reason": "Broken"}, count: 1},
			{name: "operator_nodeclaim_status_condition_transition_seconds", count: 1, isHistogram: true, seconds: 3030},
		}},
		{what: "Node Ready True -> False after 55 min 30 s", advance: time.Minute, change: func() {
			fx.cache.NodeList[0].Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
				Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(fx.now)}
		}, want: []want{
			{name: "operator_node_status_condition_transitions_total", labels: map[string]string{"type": "Ready", "status": "False",
				"reason": "KubeletNotReady"}, count: 1},
			{name: "operator_node_status_condition_transition_seconds", labels: map[string]string{"type": "Ready", "status": "True",
				"karpenter_sh_initialized": "true"}, count: 1, seconds: 3330, isHistogram: true},
			{name: "operator_status_condition_transition_seconds", labels: map[string]string{"kind": "Node"}, count: 0, isHistogram: true},
		}},
	} {
		fx.now = fx.now.Add(step.advance)
		if step.change != nil {
			step.change()
		}
		obs.Pass()
		for _, w := range step.want {
			if !w.isHistogram {
				if got := total(t, reg, w.name, w.labels); got != w.count {
					t.Errorf("%s: %s%v = %v, want %v", step.what, w.name, w.labels, got, w.count)
				}
				continue
			}
			count, sum := histogram(t, reg, w.name, w.labels)
			if float64(count) != w.count || !near(sum, w.seconds) {
				t.Errorf("%s: %s%v: %d observations summing %v s, want %v summing %v s", step.what, w.name, w.labels, count, sum, w.count, w.seconds)
			}
		}
	}
}

// mergeLabels is a new map of a's labels and b's, b's winning.
func mergeLabels(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// TestStatusTermination: an object being deleted has its termination
// time at every scrape; once it is gone, the time from its
// deletionTimestamp is observed once and its series end.
func TestStatusTermination(t *testing.T) {
	fx := newStatusFixtures()
	reg, obs := statusRegistry(t, fx, nil)
	abc := fx.cache.ClaimList[0]
	deleted := metav1.NewTime(fx.now.Add(-10 * time.Second))
	abc.DeletionTimestamp = &deleted
	obs.Pass()
	claim := map[string]string{"karpenter_sh_nodepool": "default", "karpenter_k8s_aws_ec2nodeclass": "default"}
	named := mergeLabels(claim, map[string]string{"namespace": "", "name": "default-abc"})
	for _, step := range []struct {
		advance time.Duration
		want    float64
	}{{0, 10}, {20 * time.Second, 30}} {
		fx.now = fx.now.Add(step.advance)
		if got, ok := observe.Sample(t, reg, "operator_nodeclaim_termination_current_time_seconds", named); !ok || got != step.want {
			t.Errorf("termination current time = %v (found %v), want %v", got, ok, step.want)
		}
		if got, ok := observe.Sample(t, reg, "operator_termination_current_time_seconds",
			map[string]string{"name": "default-abc", "kind": "NodeClaim", "group": "karpenter.sh"}); !ok || got != step.want {
			t.Errorf("generic termination current time = %v (found %v), want %v", got, ok, step.want)
		}
	}
	if got := total(t, reg, "operator_nodeclaim_termination_current_time_seconds", map[string]string{"name": "default-def"}); got != 0 {
		t.Errorf("a NodeClaim not being deleted has a termination time: %v", got)
	}
	// default-abc goes: observed once, 35 s after its deletionTimestamp.
	fx.cache.ClaimList = fx.cache.ClaimList[1:]
	fx.now = fx.now.Add(5 * time.Second)
	for range 2 {
		obs.Pass()
		if count, sum := histogram(t, reg, "operator_nodeclaim_termination_duration_seconds", claim); count != 1 || sum != 35 {
			t.Errorf("termination duration: %d observations summing %v s, want 1 of 35 s", count, sum)
		}
		if count, sum := histogram(t, reg, "operator_termination_duration_seconds", map[string]string{"kind": "NodeClaim", "group": "karpenter.sh"}); count != 1 || sum != 35 {
			t.Errorf("generic termination duration: %d observations summing %v s, want 1 of 35 s", count, sum)
		}
	}
	for _, name := range []string{"operator_nodeclaim_termination_current_time_seconds", "operator_termination_current_time_seconds",
		"operator_nodeclaim_status_condition_count", "operator_status_condition_current_status_seconds"} {
		if got := observe.Series(t, reg, name, map[string]string{"name": "default-abc"}); len(got) != 0 {
			t.Errorf("%s: %d series of a NodeClaim that is gone", name, len(got))
		}
	}
	// The NodeClaim that went without being seen deleting is not observed.
	fx.cache.ClaimList = nil
	obs.Pass()
	if count, _ := histogram(t, reg, "operator_nodeclaim_termination_duration_seconds", claim); count != 1 {
		t.Errorf("termination duration: %d observations, want still 1", count)
	}
}

// TestStatusForgets: the observer forgets objects that are gone (an
// object back under the same UID is new to it) and keeps nothing of them.
func TestStatusForgets(t *testing.T) {
	fx := newStatusFixtures()
	reg, obs := statusRegistry(t, fx, nil)
	obs.Pass()
	if got := karpmetrics.StatusRemembered(obs); got != 5 {
		t.Fatalf("remembered %d objects, want 5", got)
	}
	claims := fx.cache.ClaimList
	fx.cache.ClaimList = nil
	obs.Pass()
	if got := karpmetrics.StatusRemembered(obs); got != 3 {
		t.Errorf("remembered %d objects after the NodeClaims went, want 3", got)
	}
	fx.cache.ClaimList = claims
	obs.Pass()
	if got := total(t, reg, "operator_nodeclaim_status_condition_transitions_total", map[string]string{"type": "Launched"}); got != 4 {
		t.Errorf("Launched transitions = %v, want 4 (counted again once forgotten)", got)
	}
}

// TestStatusLeaderOnly: a replica that does not lead exports none of the
// gauges.
func TestStatusLeaderOnly(t *testing.T) {
	fx := newStatusFixtures()
	leading := false
	reg, _ := statusRegistry(t, fx, func() bool { return leading })
	for _, name := range []string{"operator_nodeclaim_status_condition_count", "operator_status_condition_count"} {
		if _, ok := observe.Sample(t, reg, name, map[string]string{"name": "default-abc", "type": "Launched"}); ok {
			t.Errorf("a follower exports %s", name)
		}
	}
	leading = true
	if _, ok := observe.Sample(t, reg, "operator_nodeclaim_status_condition_count", map[string]string{"name": "default-abc", "type": "Launched"}); !ok {
		t.Error("the leader does not export operator_nodeclaim_status_condition_count")
	}
}

// TestStatusBuckets: Karpenter's buckets per kind (0.5 s doubling to 8192
// s; Prometheus' defaults for EC2NodeClass and the generic names).
func TestStatusBuckets(t *testing.T) {
	fx := newStatusFixtures()
	deleted := metav1.NewTime(fx.now)
	fx.cache.ClaimList[0].DeletionTimestamp = &deleted
	fx.cache.ClassList[0].DeletionTimestamp = &deleted
	reg, obs := statusRegistry(t, fx, nil)
	obs.Pass()
	fx.cache.ClaimList, fx.cache.ClassList = nil, nil
	fx.now = fx.now.Add(time.Second)
	obs.Pass()
	bounds := func(name string) []float64 {
		ms := observe.Series(t, reg, name, nil)
		if len(ms) == 0 {
			t.Fatalf("%s: no series", name)
		}
		var out []float64
		for _, b := range ms[0].GetHistogram().GetBucket() {
			out = append(out, b.GetUpperBound())
		}
		return out
	}
	doubling := prometheus.ExponentialBuckets(0.5, 2, 15)
	for name, want := range map[string][]float64{
		"operator_nodeclaim_termination_duration_seconds":    doubling,
		"operator_ec2nodeclass_termination_duration_seconds": prometheus.DefBuckets,
		"operator_termination_duration_seconds":              prometheus.DefBuckets,
	} {
		if got := bounds(name); !slices.Equal(got, want) {
			t.Errorf("%s: buckets %v, want %v", name, got, want)
		}
	}
}
