package disruption

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/test/fixture"
)

var t0 = at("2026-01-01T00:00:00Z")

// odPrice and spotPrice per vCPU of the test catalogue.
const (
	odPrice   = 0.05
	spotPrice = 0.02
)

// testTypes has types of 1..n vCPU, 4 GiB per vCPU, 20 pods per vCPU,
// on-demand and spot in zone-a.
func testTypes(n int) []*catalog.InstanceType {
	return fixture.InstanceTypes(n, func(cpu int64) []catalog.Offering {
		return []catalog.Offering{
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: odPrice * float64(cpu), Available: true},
			{Zone: "zone-a", CapacityType: karpv1.CapacityTypeSpot, Price: spotPrice * float64(cpu), Available: true},
		}
	})
}

func testPool(name string, ct string) *karpv1.NodePool { return fixture.NodePool(name, ct) }

func testPod(name, cpu string) *corev1.Pod { return fixture.Pod(name, cpu) }

// testNode is an initialized, Ready node of pool with a type of cpu vCPU.
func testNode(name, pool, ct string, cpu int64, pods ...*corev1.Pod) *Node {
	price := odPrice
	if ct == karpv1.CapacityTypeSpot {
		price = spotPrice
	}
	it := "t-" + strconv.FormatInt(cpu, 10)
	lbl := map[string]string{
		karpv1.LabelNodePool: pool, karpv1.LabelCapacityType: ct, karpv1.LabelInstanceType: it,
		karpv1.LabelZone: "zone-a", karpv1.LabelHostname: name, karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux",
	}
	alloc := fixture.PerCPU(cpu)
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	// Launched, with hashes of the current versions (as Joiner and
	// Karpenter v1.14 write them).
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, CreationTimestamp: metav1.NewTime(t0),
		Annotations: map[string]string{karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion,
			karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}}}
	nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
	nc.Spec.NodeClassRef = fixture.NodeClassRef()
	return &Node{
		Node:      &scheduler.Node{Name: name, Labels: lbl, Capacity: alloc, Allocatable: alloc, Pods: pods},
		NodeClaim: nc, Annotations: map[string]string{}, Price: price * float64(cpu),
		Initialized: true, InitializedAt: t0, Ready: true,
	}
}

func testInput(now time.Time, pools []*karpv1.NodePool, nodes ...*Node) *Input {
	return &Input{
		Now: now, NodePools: pools, Nodes: nodes,
		InstanceTypes: map[string][]*catalog.InstanceType{"default": testTypes(32)},
	}
}

func testPDB(name string, allowed int32, app string) *policyv1.PodDisruptionBudget {
	return fixture.PDB(name, allowed, app)
}

func names(ns []*Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name()
	}
	return out
}

func skipsOf(r *Result, node string) []string {
	var out []string
	for _, s := range r.Skipped {
		if s.Node == node {
			out = append(out, fmt.Sprintf("%s: %s", s.Method, s.Reason))
		}
	}
	return out
}
