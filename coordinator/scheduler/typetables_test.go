package scheduler

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestTypeTablesKeepPlans: Solve with tables shared across calls (as one
// disruption pass shares them) plans exactly what it plans without,
// whatever the earlier calls were: other pods (other resource slots: GPU
// pods or none), a pool limit, the same input again.
func TestTypeTablesKeepPlans(t *testing.T) {
	limited := func(n int) *Input {
		in := realisticInput(n)
		in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("200")}
		return in
	}
	// one pod asking one of an extended resource: the resource takes the
	// first extended slot, whichever it is
	extended := func(name corev1.ResourceName) func() *Input {
		return func() *Input {
			in := realisticInput(0)
			p := pod("x", nil, "1", "1Gi")
			p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse("1")
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			in.Pods = []*corev1.Pod{p}
			return in
		}
	}
	bigDaemons := func() *Input {
		in := realisticInput(300)
		in.DaemonSetPods = []*corev1.Pod{pod("ds", nil, "3", "6Gi")}
		return in
	}
	inputs := []struct {
		name string
		in   func() *Input
	}{
		{"300 pods", func() *Input { return realisticInput(300) }},
		{"2 pods, no GPU slot", func() *Input { return realisticInput(2) }},
		{"300 pods again", func() *Input { return realisticInput(300) }},
		{"limited pool", func() *Input { return limited(300) }},
		{"40 pods", func() *Input { return realisticInput(40) }},
		{"a GPU pod", extended("nvidia.com/gpu")},
		{"a Neuron pod", extended("aws.amazon.com/neuron")},
		{"larger DaemonSets", bigDaemons},
	}
	tables := &TypeTables{}
	for _, tc := range inputs {
		want := Solve(tc.in())
		in := tc.in()
		in.TypeTables = tables
		got := Solve(in)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the plan with shared tables differs from the plan without", tc.name)
		}
		if len(want.NodeClaims) == 0 {
			t.Fatalf("%s: no claims planned; the test proves nothing", tc.name)
		}
	}
	if len(tables.m) < 2 {
		t.Errorf("tables kept %d entries, want one per pool and slot set (>= 2)", len(tables.m))
	}
}
