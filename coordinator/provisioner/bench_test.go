package provisioner

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
)

// BenchmarkProvisioningPass measures one leader pass without the commit:
// the cluster view (nodes, pods, in-flight capacity, pending pods) and the
// plan, for clusters of 20 pods per node: `nodes` existing nodes with 19
// bound pods each and one unschedulable pod per node (100 000 pods at 5 000
// nodes).
func BenchmarkProvisioningPass(b *testing.B) {
	for _, nodes := range []int{100, 1000, 5000} {
		sz := struct{ nodes, bound, pending int }{nodes, 19, nodes}
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", sz.nodes, sz.nodes*(sz.bound+1)), func(b *testing.B) {
			c := &fake.Cache{
				PoolList:  []*karpv1.NodePool{pool("general", req(karpv1.LabelArch, "In", "amd64"))},
				ClassList: []*awsv1.EC2NodeClass{class()},
			}
			for i := range sz.nodes {
				name := fmt.Sprintf("node-%d", i)
				c.NodeList = append(c.NodeList, &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: "general",
						karpv1.LabelInstanceType: "m5.2xlarge", karpv1.LabelZone: "us-east-1a", karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux"}},
					Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
					Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"),
						corev1.ResourceMemory: resource.MustParse("29Gi"), corev1.ResourcePods: resource.MustParse("58")}},
				})
				for j := range sz.bound {
					p := pendingPod(fmt.Sprintf("bound-%d-%d", i, j), "400m")
					p.Spec.NodeName = name
					p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
					c.PodList = append(c.PodList, p)
				}
			}
			for i := range sz.pending {
				c.PodList = append(c.PodList, pendingPod(fmt.Sprintf("pending-%d", i), "1"))
			}
			r := newTestProvisioner(b, c)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s := r.deps.Views.Build(now)
				plan := scheduler.Solve(s.SchedulerInput(s.Pending, s.Nodes))
				if len(s.Pending) != sz.pending || len(plan.NodeClaims) == 0 {
					b.Fatalf("pending %d, nodeclaims %d", len(s.Pending), len(plan.NodeClaims))
				}
			}
		})
	}
}
