package scheduler

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

func staticPool(name string, replicas int64) *karpv1.NodePool {
	p := nodePool(name)
	p.Spec.Replicas = &replicas
	return p
}

// Karpenter's NewScheduler leaves static pools out: pods never get a node
// of a static pool, whatever its weight, but a static pool's existing
// nodes take pods like any other node.
func TestSolveStaticPools(t *testing.T) {
	heavy := staticPool("static", 3)
	w := int32(100)
	heavy.Spec.Weight = &w // not admitted by the CRD, ignored anyway
	types := map[string][]*catalog.InstanceType{"default": fakeTypes(8)}
	existing := &Node{Name: "static-1", Labels: map[string]string{karpv1.LabelNodePool: "static", karpv1.LabelHostname: "static-1"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
			corev1.ResourcePods: resource.MustParse("20")}}
	cases := []struct {
		name      string
		pools     []*karpv1.NodePool
		nodes     []*Node
		pods      int
		wantPools []string // pools of the planned claims
		wantOnto  int      // pods nominated to existing nodes
		wantStuck int      // unschedulable pods
	}{
		{name: "only a static pool: pods wait", pools: []*karpv1.NodePool{heavy}, pods: 2, wantStuck: 2},
		{name: "static pool of higher weight is skipped", pools: []*karpv1.NodePool{heavy, nodePool("dynamic")}, pods: 2, wantPools: []string{"dynamic"}},
		{name: "existing static node takes pods", pools: []*karpv1.NodePool{heavy}, nodes: []*Node{existing}, pods: 2, wantOnto: 2},
		{name: "static node full: the dynamic pool provisions", pools: []*karpv1.NodePool{heavy, nodePool("dynamic")}, nodes: []*Node{existing}, pods: 3,
			wantOnto: 2, wantPools: []string{"dynamic"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pods []*corev1.Pod
			for i := range c.pods {
				pods = append(pods, pod("p"+string(rune('a'+i)), nil, "900m", "256Mi"))
			}
			plan := Solve(&Input{Pods: pods, NodePools: c.pools, InstanceTypes: types, Nodes: c.nodes})
			var got []string
			for _, nc := range plan.NodeClaims {
				got = append(got, nc.NodePool)
			}
			if !slices.Equal(got, c.wantPools) || len(plan.Nominations) != c.wantOnto || len(plan.Unschedulable) != c.wantStuck {
				t.Fatalf("claims of pools %v, %d nominations, %d unschedulable; want %v, %d, %d (plan %+v)",
					got, len(plan.Nominations), len(plan.Unschedulable), c.wantPools, c.wantOnto, c.wantStuck, plan)
			}
		})
	}
}

func TestStaticClaim(t *testing.T) {
	types := fakeTypes(100)
	// A type far too small for any DaemonSet still qualifies: a static
	// claim has no requests (Karpenter's static template).
	types[0].Capacity[corev1.ResourceCPU] = resource.MustParse("50m")
	in := &Input{InstanceTypes: map[string][]*catalog.InstanceType{"default": types},
		DaemonSetPods: []*corev1.Pod{pod("ds", nil, "500m", "1Gi")}}

	t.Run("cheapest first, at most MaxInstanceTypes", func(t *testing.T) {
		in.NodePools = []*karpv1.NodePool{staticPool("s", 2)}
		nc, err := StaticClaim(in, "s")
		if err != nil {
			t.Fatal(err)
		}
		if len(nc.InstanceTypes) != MaxInstanceTypes || nc.InstanceTypes[0] != "fake-it-0" || nc.InstanceType != "fake-it-0" {
			t.Fatalf("types %v (cheapest %s)", nc.InstanceTypes, nc.InstanceType)
		}
		if len(nc.Pods) != 0 || len(nc.Requests) != 0 || nc.NodePool != "s" || nc.NodeClass != "default" {
			t.Fatalf("claim %+v", nc)
		}
		if !hasReq(nc.Requirements, karpv1.LabelNodePool, "s") || !hasReq(nc.Requirements, karpv1.LabelInstanceType, "fake-it-59") {
			t.Fatalf("requirements %v", nc.Requirements)
		}
	})
	t.Run("the pool's requirements narrow the types and offerings", func(t *testing.T) {
		p := staticPool("s", 2)
		p.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: "karpenter.k8s.aws/instance-cpu", Operator: karpv1.OpIn, Values: []string{"4", "8"}},
			{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: []string{"test-zone-3"}},
		}
		in.NodePools = []*karpv1.NodePool{p}
		nc, err := StaticClaim(in, "s")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(nc.InstanceTypes, []string{"fake-it-3", "fake-it-7"}) || nc.Zone != "test-zone-3" || nc.CapacityType != karpv1.CapacityTypeOnDemand {
			t.Fatalf("types %v zone %s capacity type %s", nc.InstanceTypes, nc.Zone, nc.CapacityType)
		}
	})
	t.Run("nothing fits the requirements", func(t *testing.T) {
		p := staticPool("s", 2)
		p.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelArch, Operator: karpv1.OpIn, Values: []string{"arm64"}}}
		in.NodePools = []*karpv1.NodePool{p}
		if _, err := StaticClaim(in, "s"); err == nil || !strings.Contains(err.Error(), "no instance type") {
			t.Fatalf("err %v", err)
		}
		if _, err := StaticClaim(in, "missing"); err == nil {
			t.Fatal("no error for a missing pool")
		}
	})
}

func hasReq(reqs []corev1.NodeSelectorRequirement, key, value string) bool {
	for _, r := range reqs {
		if r.Key == key && slices.Contains(r.Values, value) {
			return true
		}
	}
	return false
}
