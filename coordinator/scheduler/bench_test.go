package scheduler

import (
	"strconv"
	"testing"
)

// BenchmarkScheduling is Karpenter's scheduling benchmark workload (see
// fakeTypes and benchPods). Metrics: pods/s, nodes, price (total hourly),
// price/lowerbound.
func BenchmarkScheduling(b *testing.B) {
	for _, n := range []int{1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			in := benchInput(n)
			lb := lowerBound(in.Pods, in.InstanceTypes["default"])
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
			b.ReportMetric(plan.TotalPrice/lb, "price/lowerbound")
		})
	}
}
