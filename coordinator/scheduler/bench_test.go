package scheduler

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// BenchmarkScheduling is Karpenter's scheduling benchmark: its pods made
// its way (karpenterPods) and its 400 fake instance types (fakeTypes).
// Metrics: pods/s, cpu-s/op, nodes, price (total hourly), price/lowerbound,
// valid (1 when verifyPlan finds every constraint kept in the final layout).
func BenchmarkScheduling(b *testing.B) {
	benchmarkScheduling(b, benchInput)
}

// BenchmarkSchedulingSelfSelecting is the easier workload the first
// benchmarks used (selfSelectingPods: every selector selects only its own
// group, one affinity group), kept to compare with earlier figures.
func BenchmarkSchedulingSelfSelecting(b *testing.B) {
	benchmarkScheduling(b, func(n int) *Input {
		in := benchInput(n)
		in.Pods = selfSelectingPods(n, 42)
		return in
	})
}

func benchmarkScheduling(b *testing.B, input func(n int) *Input) {
	for _, n := range []int{1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			in := input(n)
			lb := lowerBound(in.Pods, in.InstanceTypes["default"])
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			var plan *Plan
			for range b.N {
				plan = Solve(in)
			}
			cpu := cpuTime() - cpu0
			b.StopTimer()
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d unschedulable, first: %+v", len(plan.Unschedulable), plan.Unschedulable[0])
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(len(plan.NodeClaims)), "nodes")
			b.ReportMetric(plan.TotalPrice, "price")
			b.ReportMetric(plan.TotalPrice/lb, "price/lowerbound")
			valid := 1.0
			if err := verifyPlan(in, plan); err != nil {
				b.Logf("invalid layout: %v", err)
				valid = 0
			}
			b.ReportMetric(valid, "valid")
		})
	}
}

// realisticInput: every priced us-east-1 type of the embedded catalogue, a
// general pool (spot and on-demand) and a GPU pool, and a mixed workload:
// plain pods, arm64 pods, GPU pods, zone-spread pods and hostname
// anti-affinity pods.
func realisticInput(n int) *Input {
	its := catalog.InstanceTypes(catalog.Options{})
	general := nodePool("general")
	gpu := nodePool("gpu")
	gpu.Spec.Weight = ptr(int32(10))
	gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	gpu.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "karpenter.k8s.aws/instance-gpu-manufacturer", Operator: karpv1.OpIn, Values: []string{"nvidia"}}}
	rng := rand.New(rand.NewPCG(7, 7))
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		kind := i % 20
		lbl := map[string]string{"app": fmt.Sprintf("app-%d", kind)}
		p := pod(fmt.Sprintf("p-%05d", i), lbl, benchCPU[rng.IntN(len(benchCPU))], benchMem[rng.IntN(len(benchMem))])
		sel := &metav1.LabelSelector{MatchLabels: lbl}
		switch {
		case kind < 2:
			p.Spec.NodeSelector = map[string]string{karpv1.LabelArch: "arm64"}
		case kind == 2:
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		case kind < 5:
			p.Spec.TopologySpreadConstraints = spread(karpv1.LabelZone, 1, sel)
		case kind == 5:
			p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
		}
		pods = append(pods, p)
	}
	return &Input{
		Pods:          pods,
		NodePools:     []*karpv1.NodePool{general, gpu},
		InstanceTypes: map[string][]*catalog.InstanceType{"default": its},
		DaemonSetPods: []*corev1.Pod{pod("ds", nil, "100m", "128Mi")},
	}
}

// BenchmarkRealistic runs the embedded us-east-1 catalogue with mixed pods.
func BenchmarkRealistic(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			in := realisticInput(n)
			b.ReportAllocs()
			b.ResetTimer()
			var plan *Plan
			for range b.N {
				plan = Solve(in)
			}
			b.StopTimer()
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d unschedulable, first: %+v", len(plan.Unschedulable), plan.Unschedulable[0])
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			b.ReportMetric(float64(len(plan.NodeClaims)), "nodes")
			b.ReportMetric(plan.TotalPrice, "price")
		})
	}
}

// cpuTime is the process's user+system CPU seconds: on a shared machine it
// shows the cost of Solve when wall time is inflated by other load (it
// includes the GC's background workers).
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkTypeTables is one disruption simulation's Solve (100 pods, the
// embedded catalogue, two pools) without and with the pools' type tables
// kept from an earlier Solve of the same pass.
func BenchmarkTypeTables(b *testing.B) {
	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("kept=%v", keep), func(b *testing.B) {
			in := realisticInput(100)
			if keep {
				in.TypeTables = &TypeTables{}
				Solve(in)
			}
			b.ReportAllocs()
			for b.Loop() {
				Solve(in)
			}
		})
	}
}
