package scheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

func ptr[T any](v T) *T { return &v }

func input(pods ...*corev1.Pod) *Input {
	return &Input{
		Pods:          pods,
		NodePools:     []*karpv1.NodePool{nodePool("default")},
		InstanceTypes: map[string][]*catalog.InstanceType{"default": fakeTypes(50)},
	}
}

func pods(n int, prefix string, lbl map[string]string, cpu string, mutate func(*corev1.Pod)) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := pod(fmt.Sprintf("%s-%d", prefix, i), lbl, cpu, "100Mi")
		if mutate != nil {
			mutate(p)
		}
		out = append(out, p)
	}
	return out
}

func solveOK(t *testing.T, in *Input) *Plan {
	t.Helper()
	plan := Solve(in)
	if err := verifyPlan(in, plan); err != nil {
		t.Fatalf("plan violates constraints: %v\n%s", err, dump(plan))
	}
	return plan
}

func dump(p *Plan) string {
	b, _ := json.MarshalIndent(p, "", "  ")
	return string(b)
}

func zones(p *Plan) map[string]int {
	out := map[string]int{}
	for _, nc := range p.NodeClaims {
		out[nc.Zone] += len(nc.Pods)
	}
	return out
}

func req(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
}

// preferNode prefers (weight 10) nodes that meet r.
func preferNode(r corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{r}}}}}}
	}
}

func withAffinity(terms ...[]corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		var ts []corev1.NodeSelectorTerm
		for _, t := range terms {
			ts = append(ts, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
	}
}

func TestConstraints(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	app := map[string]string{"app": "x"}
	tests := []struct {
		name  string
		in    func() *Input
		check func(t *testing.T, p *Plan)
	}{
		{"cpu request picks the smallest type that fits", func() *Input { return input(pod("a", nil, "3", "")) }, func(t *testing.T, p *Plan) {
			// 3 cpu + 100m reserved needs 4 vCPU: fake-it-3
			wantType(t, p, "fake-it-3")
		}},
		{"init containers count as the max with containers", func() *Input {
			p := pod("a", nil, "1", "")
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}}}
			return input(p)
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-5") }},
		{"pod overhead is added", func() *Input {
			p := pod("a", nil, "3", "")
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			return input(p)
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-4") }},
		{"memory request", func() *Input { return input(pod("a", nil, "100m", "7Gi")) }, func(t *testing.T, p *Plan) {
			// 7Gi + 10Mi reserved > 6Gi, so 8Gi: fake-it-3
			wantType(t, p, "fake-it-3")
		}},
		{"pods capacity", func() *Input { return input(pods(15, "p", nil, "", nil)...) }, func(t *testing.T, p *Plan) {
			// fake-it-0 holds 10 pods
			wantType(t, p, "fake-it-1")
		}},
		{"extended resource", func() *Input {
			in := input()
			gpu := fakeTypes(3)
			gpu[2].Name = "gpu-it"
			gpu[2].Labels[karpv1.LabelInstanceType] = "gpu-it"
			gpu[2].Capacity["nvidia.com/gpu"] = resource.MustParse("1")
			in.InstanceTypes["default"] = append(in.InstanceTypes["default"], gpu[2])
			p := pod("a", nil, "100m", "")
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			in.Pods = []*corev1.Pod{p}
			return in
		}, func(t *testing.T, p *Plan) { wantType(t, p, "gpu-it") }},
		{"nodeSelector", func() *Input {
			p := pod("a", nil, "100m", "")
			p.Spec.NodeSelector = map[string]string{karpv1.LabelInstanceType: "fake-it-9"}
			return input(p)
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-9") }},
		{"required node affinity Gt", func() *Input {
			return input(pods(1, "a", nil, "100m", withAffinity([]corev1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "7")}))...)
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-7") }},
		{"required node affinity Lt excludes large", func() *Input {
			return input(pods(1, "a", nil, "5", withAffinity([]corev1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpLt, "5")}))...)
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "") }},
		{"second node affinity term used when the first cannot hold", func() *Input {
			return input(pods(1, "a", nil, "100m", withAffinity(
				[]corev1.NodeSelectorRequirement{req(karpv1.LabelArch, corev1.NodeSelectorOpIn, "arm64")},
				[]corev1.NodeSelectorRequirement{req(karpv1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-3")}))...)
		}, func(t *testing.T, p *Plan) {
			if z := p.NodeClaims[0].Zone; z != "test-zone-3" {
				t.Fatalf("zone %s, want test-zone-3", z)
			}
		}},
		{"preferred node affinity honoured", func() *Input {
			return input(pods(1, "a", nil, "100m", preferNode(req(karpv1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-2")))...)
		}, func(t *testing.T, p *Plan) {
			if z := p.NodeClaims[0].Zone; z != "test-zone-2" {
				t.Fatalf("zone %s, want test-zone-2", z)
			}
		}},
		{"impossible preferred node affinity relaxed", func() *Input {
			return input(pods(1, "a", nil, "100m", preferNode(req(karpv1.LabelArch, corev1.NodeSelectorOpIn, "arm64")))...)
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
		{"pool taint blocks pods without toleration", func() *Input {
			in := input(pod("a", nil, "100m", ""))
			in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			return in
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "taint dedicated=gpu:NoSchedule") }},
		{"toleration lets the pod in; startup taints do not block", func() *Input {
			p := pod("a", nil, "100m", "")
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}}
			in := input(p)
			in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			in.NodePools[0].Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoSchedule}}
			return in
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
		{"spot preferred when allowed and cheaper", func() *Input {
			in := input(pod("a", nil, "100m", ""))
			for _, it := range in.InstanceTypes["default"] {
				for i := range it.Offerings {
					if it.Offerings[i].CapacityType == karpv1.CapacityTypeSpot {
						it.Offerings[i].Price /= 3
					}
				}
			}
			return in
		}, func(t *testing.T, p *Plan) {
			if ct := p.NodeClaims[0].CapacityType; ct != karpv1.CapacityTypeSpot {
				t.Fatalf("capacity type %s, want spot", ct)
			}
		}},
		{"pool requirement on-demand wins over cheaper spot", func() *Input {
			in := input(pod("a", nil, "100m", ""))
			in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{"on-demand"}}}
			return in
		}, func(t *testing.T, p *Plan) {
			if ct := p.NodeClaims[0].CapacityType; ct != karpv1.CapacityTypeOnDemand {
				t.Fatalf("capacity type %s, want on-demand", ct)
			}
		}},
		{"zonal topology spread", func() *Input {
			return input(pods(6, "s", app, "100m", func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = spread(karpv1.LabelZone, 1, sel)
			})...)
		}, func(t *testing.T, p *Plan) {
			z := zones(p)
			if len(z) != 3 || z["test-zone-1"] != 2 || z["test-zone-2"] != 2 || z["test-zone-3"] != 2 {
				t.Fatalf("zones %v, want 2 in each of 3", z)
			}
		}},
		{"capacity-type topology spread", func() *Input {
			return input(pods(4, "s", app, "100m", func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = spread(karpv1.LabelCapacityType, 1, sel)
			})...)
		}, func(t *testing.T, p *Plan) {
			cts := map[string]int{}
			for _, nc := range p.NodeClaims {
				cts[nc.CapacityType] += len(nc.Pods)
			}
			if cts["spot"] != 2 || cts["on-demand"] != 2 {
				t.Fatalf("capacity types %v, want 2 and 2", cts)
			}
		}},
		{"hostname topology spread", func() *Input {
			return input(pods(4, "s", app, "100m", func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = spread(karpv1.LabelHostname, 1, sel)
			})...)
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 4) }},
		{"hostname spread maxSkew 2", func() *Input {
			return input(pods(4, "s", app, "100m", func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = spread(karpv1.LabelHostname, 2, sel)
			})...)
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 2) }},
		{"spread counts existing pods", func() *Input {
			in := input(pods(2, "s", app, "100m", func(p *corev1.Pod) {
				p.Spec.TopologySpreadConstraints = spread(karpv1.LabelZone, 1, sel)
			})...)
			in.Nodes = []*Node{{Name: "full", Labels: map[string]string{karpv1.LabelZone: "test-zone-1"}, Pods: []*corev1.Pod{pod("old", app, "", "")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourcePods: resource.MustParse("1")}}}
			return in
		}, func(t *testing.T, p *Plan) {
			z := zones(p)
			if z["test-zone-1"] != 0 || z["test-zone-2"] != 1 || z["test-zone-3"] != 1 {
				t.Fatalf("zones %v, want zone-2 and zone-3", z)
			}
		}},
		{"hostname anti-affinity", func() *Input {
			return input(pods(3, "a", app, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
			})...)
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 3) }},
		{"anti-affinity to other pods placed earlier", func() *Input {
			a := pod("a", nil, "1", "")
			a.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
			return input(pod("b", app, "2", ""), a)
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 2) }},
		{"anti-affinity of a pod placed earlier repels later matching pods", func() *Input {
			a := pod("a", nil, "2", "")
			a.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
			return input(pod("b", app, "1", ""), a)
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 2) }},
		{"zonal anti-affinity runs out of zones", func() *Input {
			return input(pods(4, "a", app, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = antiAffinity(karpv1.LabelZone, sel)
			})...)
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "") }},
		{"anti-affinity of an existing pod repels matching pods", func() *Input {
			in := input(pod("b", app, "100m", ""))
			owner := pod("owner", nil, "", "")
			owner.Spec.Affinity = antiAffinity(karpv1.LabelZone, sel)
			in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{karpv1.LabelZone: "test-zone-1"}, Pods: []*corev1.Pod{owner},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
			return in
		}, func(t *testing.T, p *Plan) {
			if len(p.Nominations) != 0 || len(p.NodeClaims) != 1 || p.NodeClaims[0].Zone == "test-zone-1" {
				t.Fatalf("pod went next to the anti-affine owner:\n%s", dump(p))
			}
		}},
		{"zonal pod affinity keeps a group together", func() *Input {
			return input(pods(5, "a", app, "3", func(p *corev1.Pod) {
				p.Spec.Affinity = affinity(karpv1.LabelZone, sel)
			})...)
		}, func(t *testing.T, p *Plan) {
			if len(zones(p)) != 1 {
				t.Fatalf("zones %v, want one", zones(p))
			}
		}},
		{"pod affinity to an existing pod's zone", func() *Input {
			in := input(pods(2, "a", nil, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = affinity(karpv1.LabelZone, sel)
			})...)
			in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{karpv1.LabelZone: "test-zone-3"}, Pods: []*corev1.Pod{pod("db", app, "", "")}}}
			return in
		}, func(t *testing.T, p *Plan) {
			if z := zones(p); z["test-zone-3"] != 2 {
				t.Fatalf("zones %v, want both in test-zone-3", z)
			}
		}},
		{"preferred anti-affinity relaxed when it cannot hold", func() *Input {
			in := input(pods(2, "a", app, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred(1, karpv1.LabelHostname, sel)}}
			})...)
			in.NodePools[0].Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("1")}
			return in
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
		{"preferred pod affinity honoured", func() *Input {
			in := input(pods(2, "a", nil, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred(5, karpv1.LabelZone, sel)}}
			})...)
			in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{karpv1.LabelZone: "test-zone-2"}, Pods: []*corev1.Pod{pod("db", app, "", "")}}}
			return in
		}, func(t *testing.T, p *Plan) {
			if z := zones(p); z["test-zone-2"] != 2 {
				t.Fatalf("zones %v, want both in test-zone-2", z)
			}
		}},
		{"preferred pod affinity to nothing is relaxed", func() *Input {
			return input(pods(2, "a", nil, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred(5, karpv1.LabelZone, sel)}}
			})...)
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
		{"required pod affinity to nothing is unschedulable", func() *Input {
			return input(pods(1, "a", nil, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = affinity(karpv1.LabelZone, sel)
			})...)
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "topology") }},
		{"a pod matched by a spread on a key no node has still schedules", func() *Input {
			a := pod("a", app, "1", "")
			a.Spec.TopologySpreadConstraints = spread("rack", 1, sel)
			return input(a, pod("b", app, "100m", ""))
		}, func(t *testing.T, p *Plan) {
			if len(p.Unschedulable) != 1 || p.Unschedulable[0].Pod != "default/a" {
				t.Fatalf("want only a (spread on a missing key) unschedulable:\n%s", dump(p))
			}
		}},
		{"nodepool weight", func() *Input {
			in := input(pod("a", nil, "100m", ""))
			heavy := nodePool("heavy")
			heavy.Spec.Weight = ptr(int32(50))
			in.NodePools = append(in.NodePools, heavy)
			return in
		}, func(t *testing.T, p *Plan) {
			if p.NodeClaims[0].NodePool != "heavy" {
				t.Fatalf("pool %s, want heavy", p.NodeClaims[0].NodePool)
			}
		}},
		{"equal weights: name descending, as Karpenter's OrderByWeight", func() *Input {
			in := input(pod("a", nil, "100m", ""))
			in.NodePools = append(in.NodePools, nodePool("alpha"), nodePool("zeta"))
			return in
		}, func(t *testing.T, p *Plan) {
			if p.NodeClaims[0].NodePool != "zeta" {
				t.Fatalf("pool %s, want zeta", p.NodeClaims[0].NodePool)
			}
		}},
		{"DRA claims: not planned (Karpenter's IgnoreDRARequests)", func() *Input {
			dra := pod("dra", nil, "100m", "")
			dra.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("gpu-template")}}
			return input(dra, pod("plain", nil, "100m", ""))
		}, func(t *testing.T, p *Plan) {
			wantUnschedulable(t, p, 1, "Dynamic Resource Allocation requirements that are not yet supported by Karpenter")
			if p.Unschedulable[0].Pod != "default/dra" || len(p.NodeClaims) != 1 {
				t.Fatalf("want only the DRA pod left out:\n%s", dump(p))
			}
		}},
		{"a container's DRA claim too", func() *Input {
			dra := pod("dra", nil, "100m", "")
			dra.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
			return input(dra)
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "Dynamic Resource Allocation") }},
		{"matchFields: not planned (Karpenter's pod validation)", func() *Input {
			mf := pod("mf", nil, "100m", "")
			mf.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{req(karpv1.LabelZone, corev1.NodeSelectorOpIn, "test-zone-1")}},
					{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "node-a")}},
				}}}}
			return input(mf)
		}, func(t *testing.T, p *Plan) {
			wantUnschedulable(t, p, 1, "node selector term with matchFields is not supported")
		}},
		{"pod-level resources count (kube-scheduler's requests)", func() *Input {
			big := pod("big", nil, "100m", "64Mi")
			big.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}
			return input(big)
		}, func(t *testing.T, p *Plan) {
			if len(p.NodeClaims) != 1 {
				t.Fatalf("want one claim:\n%s", dump(p))
			}
			if cpu := p.NodeClaims[0].Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("6")) < 0 {
				t.Fatalf("claim requests %v, want at least the pod-level 6 cpu", p.NodeClaims[0].Requests)
			}
		}},
		{"cpu limits", func() *Input {
			in := input(pods(3, "a", nil, "4", nil)...)
			in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
			return in
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "limits") }},
		{"node limits", func() *Input {
			in := input(pods(2, "a", app, "100m", func(p *corev1.Pod) {
				p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
			})...)
			in.NodePools[0].Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("1")}
			return in
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "limit of 1 nodes") }},
		{"limits count existing nodes", func() *Input {
			in := input(pod("a", nil, "4", ""))
			in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
			in.Nodes = []*Node{{Name: "n", Labels: map[string]string{karpv1.LabelNodePool: "default"}, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}
			return in
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "") }},
		{"minValues keeps enough types", func() *Input {
			in := input(pod("a", nil, "40", ""))
			in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: karpv1.OpExists, MinValues: ptr(20)}}
			return in
		}, func(t *testing.T, p *Plan) {
			// only fake-it-40..49 hold 40 cpu: 10 < 20
			wantUnschedulable(t, p, 1, "")
		}},
		{"minValues satisfied", func() *Input {
			in := input(pod("a", nil, "4", ""))
			in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: karpv1.OpExists, MinValues: ptr(20)}}
			return in
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
		{"daemonset overhead reserved", func() *Input {
			in := input(pod("a", nil, "3", ""))
			in.DaemonSetPods = []*corev1.Pod{pod("ds", nil, "1", "")}
			return in
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-4") }},
		{"daemonset that does not tolerate the pool's taint adds nothing", func() *Input {
			p := pod("a", nil, "3", "")
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			in := input(p)
			in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			in.DaemonSetPods = []*corev1.Pod{pod("ds", nil, "1", "")}
			return in
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-3") }},
		{"a DaemonSet for other types adds nothing (Karpenter's per-type overhead)", func() *Input {
			in := input(pod("a", nil, "3", ""))
			win := pod("win-ds", nil, "1", "")
			win.Spec.NodeSelector = map[string]string{karpv1.LabelOS: "windows"}
			in.DaemonSetPods = []*corev1.Pod{win}
			return in
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-3") }},
		{"a DaemonSet counts where one of its terms matches", func() *Input {
			in := input(pod("a", nil, "3", ""))
			ds := pod("ds", nil, "1", "")
			ds.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{req(karpv1.LabelOS, corev1.NodeSelectorOpIn, "windows")}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{req(karpv1.LabelArch, corev1.NodeSelectorOpIn, "amd64")}},
				}}}}
			in.DaemonSetPods = []*corev1.Pod{ds}
			return in
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-4") }},
		{"a DaemonSet needing a custom label the pool does not set adds nothing", func() *Input {
			in := input(pod("a", nil, "3", ""))
			ds := pod("gpu-ds", nil, "1", "")
			ds.Spec.NodeSelector = map[string]string{"example.com/gpu-node": "true"}
			in.DaemonSetPods = []*corev1.Pod{ds}
			return in
		}, func(t *testing.T, p *Plan) { wantType(t, p, "fake-it-3") }},
		{"an in-flight claim keeps room for the DaemonSet pods to come", func() *Input {
			in := input(pods(2, "a", nil, "600m", nil)...)
			in.DaemonSetPods = []*corev1.Pod{pod("ds", nil, "1", "")}
			in.Nodes = []*Node{{Name: "launching", InFlight: true, Labels: map[string]string{karpv1.LabelZone: "test-zone-1", karpv1.LabelOS: "linux",
				karpv1.LabelNodePool: "default"},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
			return in
		}, func(t *testing.T, p *Plan) {
			// 2 cpu - 1 for the DaemonSet: room for one pod of 600m only.
			if len(p.Nominations) != 1 || len(p.NodeClaims) != 1 {
				t.Fatalf("want one pod on the launching node and one new claim:\n%s", dump(p))
			}
		}},
		{"a running node's bound DaemonSet pod takes its room once", func() *Input {
			in := input(pods(2, "a", nil, "600m", nil)...)
			in.DaemonSetPods = []*corev1.Pod{pod("ds", nil, "500m", "")}
			bound := pod("ds-abcde", nil, "500m", "")
			bound.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: ptr(true)}}
			in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{karpv1.LabelZone: "test-zone-1"}, Pods: []*corev1.Pod{bound},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
			return in
		}, func(t *testing.T, p *Plan) {
			if len(p.Nominations) != 2 || len(p.NodeClaims) != 0 {
				t.Fatalf("want both pods beside the bound DaemonSet pod:\n%s", dump(p))
			}
		}},
		{"a PreferNoSchedule pool is avoided while another pool can take the pod (Karpenter's)", func() *Input {
			in := input(pod("a", nil, "1", ""))
			gpu := nodePool("gpu")
			gpu.Spec.Weight = ptr(int32(50))
			gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectPreferNoSchedule}}
			in.NodePools = append(in.NodePools, gpu)
			return in
		}, func(t *testing.T, p *Plan) {
			if len(p.NodeClaims) != 1 || p.NodeClaims[0].NodePool != "default" {
				t.Fatalf("want the untainted pool despite the other's weight:\n%s", dump(p))
			}
		}},
		{"a PreferNoSchedule pool takes the pod as the last relaxation", func() *Input {
			in := input(pod("a", nil, "1", ""))
			in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectPreferNoSchedule}}
			return in
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
		{"a DaemonSet's host port is taken on new nodes", func() *Input {
			withPort := func(name string, port int32) *corev1.Pod {
				p := pod(name, nil, "100m", "")
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP}}
				return p
			}
			in := input(withPort("clash", 9100), withPort("other", 8080))
			in.DaemonSetPods = []*corev1.Pod{withPort("node-exporter", 9100)}
			return in
		}, func(t *testing.T, p *Plan) {
			wantUnschedulable(t, p, 1, "a DaemonSet takes the pod's host port")
			if p.Unschedulable[0].Pod != "default/clash" || len(p.NodeClaims) != 1 {
				t.Fatalf("want only the clashing pod left out:\n%s", dump(p))
			}
		}},
		{"existing node with room gets a nomination", func() *Input {
			in := input(pod("a", nil, "1", ""))
			in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{karpv1.LabelZone: "test-zone-1"},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
			return in
		}, func(t *testing.T, p *Plan) {
			if len(p.Nominations) != 1 || len(p.NodeClaims) != 0 {
				t.Fatalf("want a nomination:\n%s", dump(p))
			}
		}},
		{"tainted existing node is skipped", func() *Input {
			in := input(pod("a", nil, "1", ""))
			in.Nodes = []*Node{{Name: "n1", Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}}}
			return in
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
		{"pod too big for every type", func() *Input { return input(pod("a", nil, "1000", "")) }, func(t *testing.T, p *Plan) {
			wantUnschedulable(t, p, 1, "no instance type has enough resources")
		}},
		{"custom label not provided by the pool", func() *Input {
			p := pod("a", nil, "1", "")
			p.Spec.NodeSelector = map[string]string{"team": "a"}
			return input(p)
		}, func(t *testing.T, p *Plan) { wantUnschedulable(t, p, 1, "not provided by the nodepool") }},
		{"custom label from pool template labels", func() *Input {
			p := pod("a", nil, "1", "")
			p.Spec.NodeSelector = map[string]string{"team": "a"}
			in := input(p)
			in.NodePools[0].Spec.Template.ObjectMeta.Labels = map[string]string{"team": "a"}
			return in
		}, func(t *testing.T, p *Plan) { wantClaims(t, p, 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, solveOK(t, tt.in()))
		})
	}
}

func wantType(t *testing.T, p *Plan, typ string) {
	t.Helper()
	if len(p.NodeClaims) != 1 || p.NodeClaims[0].InstanceType != typ {
		t.Fatalf("want one claim of %s:\n%s", typ, dump(p))
	}
}

func wantClaims(t *testing.T, p *Plan, n int) {
	t.Helper()
	if len(p.NodeClaims) != n || len(p.Unschedulable) != 0 {
		t.Fatalf("want %d claims and nothing unschedulable:\n%s", n, dump(p))
	}
}

func wantUnschedulable(t *testing.T, p *Plan, n int, reason string) {
	t.Helper()
	if len(p.Unschedulable) != n {
		t.Fatalf("want %d unschedulable:\n%s", n, dump(p))
	}
	if reason != "" && !strings.Contains(p.Unschedulable[0].Reason, reason) {
		t.Fatalf("reason %q does not mention %q", p.Unschedulable[0].Reason, reason)
	}
}

func TestDeterminism(t *testing.T) {
	a, _ := json.Marshal(Solve(benchInput(1000)))
	b, _ := json.Marshal(Solve(benchInput(1000)))
	if !bytes.Equal(a, b) {
		t.Fatal("two runs on the same input differ")
	}
}

// TestProperties: on Karpenter's benchmark workload (its generator, other
// seeds) and on the self-selecting one, with and without limits, every
// plan respects every pod's constraints, counting every pod that matches
// their selectors, and pool limits.
func TestProperties(t *testing.T) {
	for seed := range uint64(24) {
		n := 50 + int(seed%12)*37
		in := benchInput(n)
		if seed < 12 {
			in.Pods = karpenterPodsSeeded(n, int64(seed))
		} else {
			in.Pods = selfSelectingPods(n, seed)
		}
		if seed%3 == 1 {
			in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(n / 4))}
		}
		if seed%3 == 2 {
			in.NodePools[0].Spec.Limits = karpv1.Limits{"nodes": resource.MustParse(fmt.Sprint(n / 10))}
			in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{"on-demand"}}}
		}
		plan := Solve(in)
		if err := verifyPlan(in, plan); err != nil {
			t.Fatalf("seed %d (%d pods): %v", seed, n, err)
		}
		if seed%3 == 0 && len(plan.Unschedulable) > 0 {
			t.Fatalf("seed %d: %d unschedulable without limits: %v", seed, len(plan.Unschedulable), plan.Unschedulable[0])
		}
	}
}

// TestKarpenterWorkloadValid: at every size Karpenter's benchmark runs, the
// plan for its exact pods holds every constraint on the final layout,
// counting every pod the selectors match.
func TestKarpenterWorkloadValid(t *testing.T) {
	sizes := []int{1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000}
	if testing.Short() {
		sizes = sizes[:6]
	}
	for _, n := range sizes {
		in := benchInput(n)
		plan := Solve(in)
		if len(plan.Unschedulable) > 0 {
			t.Fatalf("%d pods: %d unschedulable, first %+v", n, len(plan.Unschedulable), plan.Unschedulable[0])
		}
		if err := verifyPlan(in, plan); err != nil {
			t.Fatalf("%d pods: %v", n, err)
		}
	}
}

func TestBenchmarkNodeCount(t *testing.T) {
	for _, n := range []int{50, 1000, 5000, 20000} {
		plan := Solve(benchInput(n))
		if got, forced := len(plan.NodeClaims), n/5; got > forced {
			t.Errorf("%d pods: %d nodes, anti-affinity forces only %d", n, got, forced)
		}
	}
}

func spreadPods(n int, key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, minDomains *int32) []*corev1.Pod {
	app := map[string]string{"app": "s"}
	sel := &metav1.LabelSelector{MatchLabels: app}
	return pods(n, "s", app, "100m", func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: sel, MinDomains: minDomains}}
	})
}

func TestSpreadOptions(t *testing.T) {
	// minDomains above the 3 zones: the global minimum counts as 0, so each
	// zone takes at most maxSkew pods
	in := input(spreadPods(4, karpv1.LabelZone, 1, corev1.DoNotSchedule, ptr(int32(5)))...)
	p := solveOK(t, in)
	if len(p.Unschedulable) != 1 {
		t.Fatalf("minDomains 5: want 1 unschedulable:\n%s", dump(p))
	}
	// the same without minDomains: 4 pods fit (2,1,1)
	p = solveOK(t, input(spreadPods(4, karpv1.LabelZone, 1, corev1.DoNotSchedule, nil)...))
	if len(p.Unschedulable) != 0 {
		t.Fatalf("no minDomains: want all placed:\n%s", dump(p))
	}
	// ScheduleAnyway is a preference: a pool in one zone still takes all
	in = input(spreadPods(3, karpv1.LabelZone, 1, corev1.ScheduleAnyway, nil)...)
	in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: []string{"test-zone-1"}}}
	p = solveOK(t, in)
	if len(p.Unschedulable) != 0 {
		t.Fatalf("ScheduleAnyway: want all placed:\n%s", dump(p))
	}
	// DoNotSchedule with the same pool: eligible domains are only zone 1,
	// so it is satisfiable too (domains come from the pool)
	in = input(spreadPods(3, karpv1.LabelZone, 1, corev1.DoNotSchedule, nil)...)
	in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: []string{"test-zone-1"}}}
	solveOK(t, in)
}

// TestKubeletMaxPods: the NodeClass kubelet block reaches the scheduler
// through the catalogue's capacity.
func TestKubeletMaxPods(t *testing.T) {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "default"
	nc.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr(int32(3))}
	in := input(pods(5, "p", nil, "10m", nil)...)
	in.InstanceTypes["default"] = catalog.InstanceTypes(catalog.Options{NodeClass: nc})
	in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: karpv1.OpIn, Values: []string{"m5.large"}}}
	p := solveOK(t, in)
	if len(p.NodeClaims) != 2 {
		t.Fatalf("maxPods 3 on m5.large: want 2 nodes for 5 pods:\n%s", dump(p))
	}
}

func TestMinValuesCandidates(t *testing.T) {
	in := &Input{Pods: []*corev1.Pod{pod("a", nil, "100m", "")}, NodePools: []*karpv1.NodePool{nodePool("default")},
		InstanceTypes: map[string][]*catalog.InstanceType{"default": catalog.InstanceTypes(catalog.Options{})}}
	in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "karpenter.k8s.aws/instance-family", Operator: karpv1.OpExists, MinValues: ptr(55)}}
	p := solveOK(t, in)
	fams := map[string]bool{}
	for _, name := range p.NodeClaims[0].InstanceTypes {
		fams[strings.Split(name, ".")[0]] = true
	}
	if len(fams) < 55 || len(p.NodeClaims[0].InstanceTypes) > MaxInstanceTypes {
		t.Fatalf("candidates keep %d families (want >= 55) in %d types", len(fams), len(p.NodeClaims[0].InstanceTypes))
	}
}

// TestMinValuesUnmetExplained: a pool whose types cannot meet its minValues
// says so in its explanation under the Strict policy (Karpenter drops such
// a pool with a NoCompatibleInstanceTypes Event), not under BestEffort.
func TestMinValuesUnmetExplained(t *testing.T) {
	for _, tc := range []struct {
		name   string
		min    int
		policy MinValuesPolicy
		want   bool
	}{
		{"enough types", 20, MinValuesStrict, false},
		{"too few types", 5000, MinValuesStrict, true},
		{"too few types, best effort", 5000, MinValuesBestEffort, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(pod("a", nil, "1", ""))
			in.MinValuesPolicy = tc.policy
			in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: karpv1.OpExists, MinValues: ptr(tc.min)}}
			p := Solve(in)
			if len(p.NodePools) != 1 || p.NodePools[0].MinValuesUnmet != tc.want {
				t.Fatalf("explanations %+v, want MinValuesUnmet %v", p.NodePools, tc.want)
			}
		})
	}
}

// TestPlainWorkloadNearLowerBound: without constraints that force nodes,
// the plan costs within 5 % of the LP lower bound.
func TestPlainWorkloadNearLowerBound(t *testing.T) {
	for _, n := range []int{100, 1000, 5000} {
		in := benchInput(n)
		for _, p := range in.Pods {
			p.Spec.Affinity, p.Spec.TopologySpreadConstraints = nil, nil
		}
		plan := solveOK(t, in)
		lb := lowerBound(in.Pods, in.InstanceTypes["default"])
		if r := plan.TotalPrice / lb; r > 1.05 {
			t.Errorf("%d plain pods: price %.2f is %.3f x the lower bound %.2f", n, plan.TotalPrice, r, lb)
		} else {
			t.Logf("%d plain pods: %d nodes, price/lowerbound %.4f", n, len(plan.NodeClaims), r)
		}
	}
}

// randomInput mixes pools (a tainted weighted one, a zone-restricted one
// with limits), existing nodes with pods, and random constraints.
func randomInput(seed uint64) *Input {
	rng := rand.New(rand.NewPCG(seed, 99))
	in := input()
	in.InstanceTypes["default"] = fakeTypes(60)
	for _, it := range in.InstanceTypes["default"][:30] {
		it.Labels[karpv1.LabelArch] = "arm64"
	}
	tainted := nodePool("tainted")
	tainted.Spec.Weight = ptr(int32(20))
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
	zonal := nodePool("zonal")
	zonal.Spec.Weight = ptr(int32(10))
	zonal.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: []string{"test-zone-1", "test-zone-2"}}}
	zonal.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("40"), "nodes": resource.MustParse("6")}
	in.NodePools = append(in.NodePools, tainted, zonal)
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20")}
	for i := range 3 {
		n := &Node{Name: fmt.Sprintf("node-%d", i), Allocatable: alloc, Capacity: alloc,
			Labels: map[string]string{karpv1.LabelZone: fmt.Sprintf("test-zone-%d", i+1), karpv1.LabelArch: "amd64", karpv1.LabelNodePool: "zonal", karpv1.LabelHostname: fmt.Sprintf("node-%d", i)}}
		n.Pods = []*corev1.Pod{pod(fmt.Sprintf("old-%d", i), map[string]string{"group": fmt.Sprintf("g%d", i)}, "1", "1Gi")}
		in.Nodes = append(in.Nodes, n)
	}
	n := 40 + rng.IntN(80)
	for i := range n {
		g := rng.IntN(8)
		p, sel := groupPod(fmt.Sprintf("p-%03d", i), g, rng)
		switch g {
		case 1:
			p.Spec.NodeSelector = map[string]string{karpv1.LabelArch: "arm64"}
		case 2:
			p.Spec.TopologySpreadConstraints = spread(karpv1.LabelZone, 1, sel)
		case 3:
			p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
		case 4:
			p.Spec.Affinity = affinity(karpv1.LabelZone, sel)
		case 5:
			p.Spec.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "a"}}
			p.Spec.TopologySpreadConstraints = spread(karpv1.LabelHostname, 2, sel)
		case 6:
			p.Spec.Affinity = antiAffinity(karpv1.LabelZone, &metav1.LabelSelector{MatchLabels: map[string]string{"group": "g0"}})
		case 7:
			p.Spec.TopologySpreadConstraints = spread(karpv1.LabelCapacityType, 1, sel)
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}

func TestRandomProperties(t *testing.T) {
	for seed := range uint64(40) {
		in := randomInput(seed)
		plan := Solve(in)
		if err := verifyPlan(in, plan); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		again, _ := json.Marshal(Solve(in))
		first, _ := json.Marshal(plan)
		if !bytes.Equal(first, again) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
}

// A node with NoMovedPods takes no pod of Input.Moved (a consolidation's
// destination inside its consolidateAfter window), other pods still.
func TestNoMovedPods(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20")}
	node := &Node{Name: "settling", Allocatable: alloc, Capacity: alloc, NoMovedPods: true,
		Labels: map[string]string{karpv1.LabelZone: "test-zone-1", karpv1.LabelArch: "amd64", karpv1.LabelHostname: "settling"}}
	moved, pending := pod("moved", nil, "1", "1Gi"), pod("pending", nil, "1", "1Gi")
	plan := Solve(&Input{Pods: []*corev1.Pod{moved, pending}, NodePools: []*karpv1.NodePool{nodePool("default")},
		InstanceTypes: map[string][]*catalog.InstanceType{"default": fakeTypes(4)}, Nodes: []*Node{node},
		Moved: map[string]bool{"default/moved": true}})
	if len(plan.Nominations) != 1 || plan.Nominations[0].Pod != "default/pending" {
		t.Fatalf("nominations %+v, want only the pending pod on the node", plan.Nominations)
	}
	if len(plan.NodeClaims) != 1 || !slices.Equal(plan.NodeClaims[0].Pods, []string{"default/moved"}) {
		t.Fatalf("claims %+v, want one for the moved pod", plan.NodeClaims)
	}
}
