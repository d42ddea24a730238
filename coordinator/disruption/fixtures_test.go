package disruption

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
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
	out := make([]*catalog.InstanceType, n)
	for i := range n {
		cpu := int64(i + 1)
		name := "t-" + strconv.Itoa(i+1)
		out[i] = &catalog.InstanceType{
			Name: name,
			Labels: map[string]string{
				karpv1.LabelInstanceType: name, karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux",
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(4*cpu<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(20*cpu, resource.DecimalSI),
			},
			Offerings: []catalog.Offering{
				{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: odPrice * float64(cpu), Available: true},
				{Zone: "zone-a", CapacityType: karpv1.CapacityTypeSpot, Price: spotPrice * float64(cpu), Available: true},
			},
		}
	}
	return out
}

func testPool(name string, ct string) *karpv1.NodePool {
	p := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	p.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{ct}}}
	p.Spec.Template.Spec.ExpireAfter = karpv1.NeverDuration()
	p.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	p.Spec.Disruption.ConsolidateAfter = karpv1.NewDuration(0)
	p.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	return p
}

func testPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi"),
		}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

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
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(4*cpu<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(20*cpu, resource.DecimalSI),
	}
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	// Launched, with hashes of the current versions (as Joiner and
	// Karpenter v1.14 write them).
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, CreationTimestamp: metav1.NewTime(t0),
		Annotations: map[string]string{karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion,
			karpv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}}}
	nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
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
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
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
