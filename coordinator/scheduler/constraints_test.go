package scheduler

import (
	"maps"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withHostPort(port int32, protocol corev1.Protocol, ip string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: protocol, HostIP: ip})
	}
}

// Host ports follow kube-scheduler's NodePorts: one pod per (protocol,
// port) on a node, unless both bind distinct addresses.
func TestHostPorts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pods  []*corev1.Pod
		nodes int
	}{
		{"same port: a node each", pods(3, "web", nil, "100m", withHostPort(80, "", "")), 3},
		{"other protocol shares", append(pods(1, "tcp", nil, "100m", withHostPort(53, corev1.ProtocolTCP, "")),
			pods(1, "udp", nil, "100m", withHostPort(53, corev1.ProtocolUDP, ""))...), 1},
		{"distinct addresses share", append(pods(1, "a", nil, "100m", withHostPort(80, "", "10.0.0.1")),
			pods(1, "b", nil, "100m", withHostPort(80, "", "10.0.0.2"))...), 1},
		{"wildcard address conflicts with any", append(pods(1, "a", nil, "100m", withHostPort(80, "", "10.0.0.1")),
			pods(1, "b", nil, "100m", withHostPort(80, "", ""))...), 2},
		{"other ports share", append(pods(1, "a", nil, "100m", withHostPort(80, "", "")),
			pods(1, "b", nil, "100m", withHostPort(81, "", ""))...), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := solveOK(t, input(tc.pods...))
			if len(p.NodeClaims) != tc.nodes || len(p.Unschedulable) != 0 {
				t.Fatalf("%d nodeclaims (%d unschedulable), want %d\n%s", len(p.NodeClaims), len(p.Unschedulable), tc.nodes, dump(p))
			}
		})
	}
	// An existing node's bound pod holds its port: a new pod with it goes
	// elsewhere, one without it fits beside.
	in := input(append(pods(1, "web", nil, "100m", withHostPort(80, "", "")), pods(1, "plain", nil, "100m", nil)...)...)
	bound := pod("bound", nil, "100m", "100Mi")
	withHostPort(80, "", "")(bound)
	in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{"topology.kubernetes.io/zone": "test-zone-1"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")},
		Pods:        []*corev1.Pod{bound}}}
	p := solveOK(t, in)
	if len(p.Nominations) != 1 || p.Nominations[0].Pod != "default/plain-0" || len(p.NodeClaims) != 1 {
		t.Fatalf("nominations %v, %d nodeclaims: want plain on n1 and web on a new node", p.Nominations, len(p.NodeClaims))
	}
}

// Topology spread node inclusion policies, as kube-scheduler and Karpenter
// count domains: nodeTaintsPolicy (default Ignore: a pool the pod does not
// tolerate still adds its zones) and nodeAffinityPolicy (default Honor:
// only zones of pools the pod's node affinity allows).
func TestSpreadNodeInclusionPolicies(t *testing.T) {
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	zonePool := func(name string, zones ...string) *karpv1.NodePool {
		np := nodePool(name)
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: zones}}
		return np
	}
	spread := func(aff, taints *corev1.NodeInclusionPolicy, mutate func(*corev1.Pod)) []*corev1.Pod {
		return spreadPodsWith(4, func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = aff
			p.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = taints
			if mutate != nil {
				mutate(p)
			}
		})
	}
	for _, tc := range []struct {
		name        string
		pods        []*corev1.Pod
		pools       []*karpv1.NodePool
		placed      int
		wantPerZone map[string]int
	}{
		{name: "taints ignored: the tainted pool's empty zone caps the others",
			pods:   spread(nil, nil, nil),
			pools:  []*karpv1.NodePool{zonePool("open", "test-zone-1", "test-zone-2"), tainted(zonePool("tainted", "test-zone-3"))},
			placed: 2, wantPerZone: map[string]int{"test-zone-1": 1, "test-zone-2": 1}},
		{name: "taints honoured: only tolerated pools' zones count",
			pods:   spread(nil, &honor, nil),
			pools:  []*karpv1.NodePool{zonePool("open", "test-zone-1", "test-zone-2"), tainted(zonePool("tainted", "test-zone-3"))},
			placed: 4, wantPerZone: map[string]int{"test-zone-1": 2, "test-zone-2": 2}},
		{name: "affinity honoured: zones the pod cannot reach do not count",
			pods:   spread(&honor, nil, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: "a"} }),
			pools:  []*karpv1.NodePool{zonePool("a", "test-zone-1"), zonePool("b", "test-zone-2", "test-zone-3")},
			placed: 4, wantPerZone: map[string]int{"test-zone-1": 4}},
		{name: "affinity ignored: every pool's zones count",
			pods:   spread(&ignore, nil, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: "a"} }),
			pools:  []*karpv1.NodePool{zonePool("a", "test-zone-1"), zonePool("b", "test-zone-2", "test-zone-3")},
			placed: 1, wantPerZone: map[string]int{"test-zone-1": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(tc.pods...)
			in.NodePools = tc.pools
			p := solveOK(t, in)
			if got := len(tc.pods) - len(p.Unschedulable); got != tc.placed {
				t.Fatalf("%d placed, want %d\n%s", got, tc.placed, dump(p))
			}
			if got := zones(p); !maps.Equal(got, tc.wantPerZone) {
				t.Fatalf("pods per zone %v, want %v", got, tc.wantPerZone)
			}
		})
	}
}

func tainted(np *karpv1.NodePool) *karpv1.NodePool {
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	return np
}

func spreadPodsWith(n int, mutate func(*corev1.Pod)) []*corev1.Pod {
	app := map[string]string{"app": "s"}
	sel := &metav1.LabelSelector{MatchLabels: app}
	return pods(n, "s", app, "100m", func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		mutate(p)
	})
}
