package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// benchInput is 1000 on-demand nodes of 8 vCPU with 10 pods each (10000
// pods). packed: every node is full (8 x 800m), so no consolidation is
// possible and single-node consolidation simulates every candidate (the
// worst case); otherwise nodes are ~40% used and multi-node consolidation
// finds a command. pinned: one pod per node is pinned to its node by a
// hostname nodeSelector, so every simulation runs and fails (the capacity
// bound cannot see it) until Input.MaxSimulations stops the pass.
func benchInput(packed, pinned bool) *Input {
	pool := testPool("default", od)
	pool.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "10%"}}
	nodes := make([]*Node, 1000)
	for i := range nodes {
		pods := make([]*corev1.Pod, 10)
		for j := range pods {
			cpu := "300m"
			if packed {
				cpu = "800m"
			}
			p := testPod(fmt.Sprintf("p-%d-%d", i, j), cpu)
			p.Labels["app"] = fmt.Sprintf("app-%d", j)
			if pinned && j == 0 {
				p.Spec.NodeSelector = map[string]string{karpv1.LabelHostname: fmt.Sprintf("n-%04d", i)}
			}
			pods[j] = p
		}
		nodes[i] = testNode(fmt.Sprintf("n-%04d", i), "default", od, 8, pods...)
	}
	return testInput(t0.Add(time.Hour), []*karpv1.NodePool{pool}, nodes...)
}

// BenchmarkConsolidation1000Nodes10000Pods is one Decide pass (target < 1 s).
func BenchmarkConsolidation1000Nodes10000Pods(b *testing.B) {
	for _, tc := range []struct {
		name           string
		packed, pinned bool
	}{{"underutilized", false, false}, {"packed-no-action", true, false}, {"pinned-no-action", false, true}} {
		b.Run(tc.name, func(b *testing.B) {
			in := benchInput(tc.packed, tc.pinned)
			wantDecision := !tc.packed && !tc.pinned
			b.ResetTimer()
			for b.Loop() {
				res, err := Decide(in)
				if err != nil {
					b.Fatal(err)
				}
				if wantDecision != (res.Decision != nil) {
					b.Fatalf("%s: decision %+v", tc.name, res.Decision)
				}
			}
		})
	}
}

// BenchmarkStatus1000Nodes10000Pods is the leader's per-pass report
// (conditions, eligible-node and budget metrics) on the same input.
func BenchmarkStatus1000Nodes10000Pods(b *testing.B) {
	in := benchInput(false, false)
	for b.Loop() {
		if st := Status(in); len(st) != 1000 {
			b.Fatalf("%d statuses", len(st))
		}
		for _, r := range karpv1.DisruptionReasons {
			if _, err := AllowedByPool(in, r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
