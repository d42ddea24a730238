package report

import (
	"flag"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/test/golden"
)

var update = flag.Bool("update", false, "rewrite golden files")

func samplePlan() *scheduler.Plan {
	return &scheduler.Plan{
		NodeClaims: []scheduler.NodeClaim{{
			Name: "general-1", NodePool: "general", NodeClass: "default",
			Requirements:  []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpIn, Values: []string{"general"}}},
			InstanceTypes: []string{"c6g.large", "c7g.large", "m6g.large", "c6a.large"},
			InstanceType:  "c6g.large", Zone: "us-east-1a", CapacityType: "spot", Price: 0.0258,
			Pods:        []string{"default/a-0", "default/a-1"},
			Requests:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("3Gi")},
		}},
		Nominations:   []scheduler.Nomination{{Pod: "default/b", Node: "ip-10-0-0-1"}},
		Unschedulable: []scheduler.Unschedulable{{Pod: "default/huge", Reason: "nodepool general: no instance type has enough resources"}},
		NodePools: []scheduler.PoolExplanation{{NodePool: "general", InstanceTypes: 10, Excluded: []scheduler.Exclusion{{Reason: "limits", Count: 2}},
			Messages: []string{"2 out of 10 instance types were excluded because they would breach limits"}}},
		TotalPrice: 0.0258,
	}
}

func TestGolden(t *testing.T) {
	for _, f := range Formats {
		t.Run(f, func(t *testing.T) {
			got, err := Render(samplePlan(), f)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "plan."+f), got, *update)
		})
	}
	if _, err := Render(samplePlan(), "xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
}
