package scheduler

import (
	"maps"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// EffectiveZones follows Karpenter's pending-pods-by-effective-zone
// metric: Karpenter's cases (the first thirteen) and Joiner's.
func TestEffectiveZones(t *testing.T) {
	app := map[string]string{"app": "web"}
	sel := &metav1.LabelSelector{MatchLabels: app}
	pending := func(name string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := pod(name, nil, "100m", "100Mi")
		p.Status.Phase = corev1.PodPending
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	inZone := func(zone string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelZone: zone} }
	}
	labelled := func(mutate func(*corev1.Pod)) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels = app
			if mutate != nil {
				mutate(p)
			}
		}
	}
	spreads := func(minDomains *int32) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = spread(karpv1.LabelZone, 1, sel)
			p.Spec.TopologySpreadConstraints[0].MinDomains = minDomains
		}
	}
	both := func(a, b func(*corev1.Pod)) func(*corev1.Pod) {
		return func(p *corev1.Pod) { a(p); b(p) }
	}
	// node is an existing node in zone carrying app-labelled pods made
	// by mutate (nil: plain labelled pods), one per name.
	node := func(name, zone string, mutate func(*corev1.Pod), pods ...string) *Node {
		n := &Node{Name: name, Labels: map[string]string{karpv1.LabelZone: zone, karpv1.LabelHostname: name},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("10")}}
		for _, pn := range pods {
			p := pod(pn, app, "100m", "100Mi")
			p.Status.Phase = corev1.PodRunning
			if mutate != nil {
				mutate(p)
			}
			n.Pods = append(n.Pods, p)
		}
		return n
	}
	zoneVolume := func(zones ...string) PodVolumes {
		return PodVolumes{Requirements: []corev1.NodeSelectorRequirement{req(karpv1.LabelZone, corev1.NodeSelectorOpIn, zones...)}}
	}
	zonePool := func(zones ...string) *karpv1.NodePool {
		np := nodePool("default")
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: zones}}
		return np
	}
	minDomains4 := int32(4)

	for _, tc := range []struct {
		name  string
		nodes []*Node
		pods  []*corev1.Pod
		vols  map[string]PodVolumes
		pool  *karpv1.NodePool
		want  map[string]int
	}{
		{name: "no zone signal: flexible",
			pods: []*corev1.Pod{pending("a", nil), pending("b", nil)},
			want: map[string]int{ZoneFlexible: 2}},
		{name: "node selector: its zone",
			pods: []*corev1.Pod{pending("a", inZone("test-zone-2")), pending("b", inZone("test-zone-2")), pending("c", inZone("test-zone-2"))},
			want: map[string]int{"test-zone-2": 3}},
		{name: "different node selectors: one zone each",
			pods: []*corev1.Pod{pending("a", inZone("test-zone-1")), pending("b", inZone("test-zone-2"))},
			want: map[string]int{"test-zone-1": 1, "test-zone-2": 1}},
		{name: "preferred node affinity does not hold: flexible",
			pods: []*corev1.Pod{pending("a", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req(karpv1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-1")}}}}}}
			})},
			want: map[string]int{ZoneFlexible: 1}},
		{name: "pod affinity: the zone of the pods it selects",
			nodes: []*Node{node("n1", "test-zone-1", nil, "x")},
			pods:  []*corev1.Pod{pending("a", func(p *corev1.Pod) { p.Spec.Affinity = affinity(karpv1.LabelZone, sel) })},
			want:  map[string]int{"test-zone-1": 1}},
		{name: "pod anti-affinity: the zone without the pods it selects",
			nodes: []*Node{node("n1", "test-zone-1", nil, "x"), node("n2", "test-zone-2", nil, "y")},
			pods:  []*corev1.Pod{pending("a", func(p *corev1.Pod) { p.Spec.Affinity = antiAffinity(karpv1.LabelZone, sel) })},
			want:  map[string]int{"test-zone-3": 1}},
		{name: "zone spread: the only zone within its skew",
			nodes: []*Node{node("n1", "test-zone-1", spreads(nil), "x"), node("n2", "test-zone-2", spreads(nil), "y")},
			pods:  []*corev1.Pod{pending("a", labelled(spreads(nil)))},
			want:  map[string]int{"test-zone-3": 1}},
		{name: "spread below minDomains with every zone at two: none",
			nodes: []*Node{node("n1", "test-zone-1", nil, "x1", "x2"), node("n2", "test-zone-2", nil, "y1", "y2"), node("n3", "test-zone-3", nil, "z1", "z2")},
			pods:  []*corev1.Pod{pending("a", spreads(&minDomains4))},
			want:  map[string]int{ZoneNone: 1}},
		{name: "pod affinity selecting no pod: none",
			pods: []*corev1.Pod{pending("a", func(p *corev1.Pod) {
				p.Spec.Affinity = affinity(karpv1.LabelZone, &metav1.LabelSelector{MatchLabels: map[string]string{"nonexistent": "label"}})
			})},
			want: map[string]int{ZoneNone: 1}},
		{name: "pod anti-affinity with the pods in every zone: none",
			nodes: []*Node{node("n1", "test-zone-1", nil, "x"), node("n2", "test-zone-2", nil, "y"), node("n3", "test-zone-3", nil, "z")},
			pods:  []*corev1.Pod{pending("a", func(p *corev1.Pod) { p.Spec.Affinity = antiAffinity(karpv1.LabelZone, sel) })},
			want:  map[string]int{ZoneNone: 1}},
		{name: "volume in two zones: flexible",
			pods: []*corev1.Pod{pending("a", withPVC("data"))},
			vols: map[string]PodVolumes{"default/a": zoneVolume("test-zone-1", "test-zone-2")},
			want: map[string]int{ZoneFlexible: 1}},
		{name: "volume in one zone: that zone",
			pods: []*corev1.Pod{pending("a", withPVC("data"))},
			vols: map[string]PodVolumes{"default/a": zoneVolume("test-zone-1")},
			want: map[string]int{"test-zone-1": 1}},
		{name: "volume zone outside the node selector: none",
			pods: []*corev1.Pod{pending("a", both(inZone("test-zone-1"), withPVC("data")))},
			vols: map[string]PodVolumes{"default/a": zoneVolume("test-zone-2")},
			want: map[string]int{ZoneNone: 1}},

		{name: "only pending pods count",
			pods: func() []*corev1.Pod {
				running, unset := pending("b", nil), pending("c", nil)
				running.Status.Phase, unset.Status.Phase = corev1.PodRunning, ""
				return []*corev1.Pod{pending("a", nil), running, unset}
			}(),
			want: map[string]int{ZoneFlexible: 1}},
		{name: "pods whose volumes cannot be scheduled yet are left out",
			pods: []*corev1.Pod{pending("a", withPVC("missing")), pending("b", nil)},
			vols: map[string]PodVolumes{"default/a": {Err: `persistentvolumeclaim "missing" not found`}},
			want: map[string]int{ZoneFlexible: 1}},
		{name: "the pool's zones are not intersected",
			pool: zonePool("test-zone-1"),
			pods: []*corev1.Pod{pending("a", nil)},
			want: map[string]int{ZoneFlexible: 1}},
		{name: "required node affinity in two zones: flexible",
			pods: []*corev1.Pod{pending("a", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req(karpv1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-1", "test-zone-2")}}}}}}
			})},
			want: map[string]int{ZoneFlexible: 1}},
		{name: "required node affinity narrowed by a spread to one zone",
			nodes: []*Node{node("n1", "test-zone-1", spreads(nil), "x")},
			pods: []*corev1.Pod{pending("a", labelled(both(spreads(nil), func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req(karpv1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-1", "test-zone-2")}}}}}}
			})))},
			want: map[string]int{"test-zone-2": 1}},
		{name: "every pending pod is classified on the counts before the solve",
			nodes: []*Node{node("n1", "test-zone-1", spreads(nil), "x"), node("n2", "test-zone-2", spreads(nil), "y")},
			pods:  []*corev1.Pod{pending("a", labelled(spreads(nil))), pending("b", labelled(spreads(nil))), pending("c", labelled(spreads(nil)))},
			want:  map[string]int{"test-zone-3": 3}},
		{name: "spread and volume both allowing two zones: flexible",
			nodes: []*Node{node("n1", "test-zone-1", spreads(nil), "x")},
			pods:  []*corev1.Pod{pending("a", labelled(both(spreads(nil), withPVC("data"))))},
			vols:  map[string]PodVolumes{"default/a": zoneVolume("test-zone-2", "test-zone-3")},
			want:  map[string]int{ZoneFlexible: 1}},
		{name: "a spread counts only the zones the node selector allows",
			nodes: []*Node{node("n1", "test-zone-1", spreads(nil), "x"), node("n2", "test-zone-2", spreads(nil), "y")},
			pods:  []*corev1.Pod{pending("a", labelled(both(spreads(nil), inZone("test-zone-1"))))},
			want:  map[string]int{"test-zone-1": 1}},
		{name: "own constraints whose zones do not meet: none",
			nodes: []*Node{node("n1", "test-zone-1", nil, "x"),
				node("n2", "test-zone-1", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }, "y")},
			pods: []*corev1.Pod{pending("a", func(p *corev1.Pod) {
				p.Spec.Affinity = affinity(karpv1.LabelZone, sel)
				p.Spec.Affinity.PodAntiAffinity = antiAffinity(karpv1.LabelZone, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}).PodAntiAffinity
			})},
			want: map[string]int{ZoneNone: 1}},
		{name: "self-selecting pod affinity with no pod placed yet: flexible",
			pods: []*corev1.Pod{pending("a", labelled(func(p *corev1.Pod) { p.Spec.Affinity = affinity(karpv1.LabelZone, sel) }))},
			want: map[string]int{ZoneFlexible: 1}},
		{name: "hostname constraints say nothing of zones",
			nodes: []*Node{node("n1", "test-zone-1", nil, "x")},
			pods:  []*corev1.Pod{pending("a", func(p *corev1.Pod) { p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel) })},
			want:  map[string]int{ZoneFlexible: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(tc.pods...)
			in.Nodes, in.Volumes = tc.nodes, tc.vols
			if tc.pool != nil {
				in.NodePools = []*karpv1.NodePool{tc.pool}
			}
			if got := EffectiveZones(in); !maps.Equal(got, tc.want) {
				t.Fatalf("EffectiveZones = %v, want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkEffectiveZones classifies the pods of Karpenter's scheduling
// benchmark (zone spreads and affinities among them), all pending, beside
// what Solve of the same input costs (BenchmarkScheduling).
func BenchmarkEffectiveZones(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			in := benchInput(n)
			for _, p := range in.Pods {
				p.Status.Phase = corev1.PodPending
			}
			b.ReportAllocs()
			for b.Loop() {
				EffectiveZones(in)
			}
		})
	}
}
