package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-dev/joiner/internal/podresources"
)

// TestPodRequestsMatchPodresources: the solver's vector form of a pod's
// effective request (kept allocation-free for the hot path) is
// podresources.Requests, which the metrics and joiner top use, plus one pod
// slot.
func TestPodRequestsMatchPodresources(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	for name, spec := range map[string]corev1.PodSpec{
		"containers": {Containers: []corev1.Container{{Resources: req("1", "1Gi")}, {Resources: req("500m", "2Gi")}}},
		"init wins": {Containers: []corev1.Container{{Resources: req("1", "4Gi")}},
			InitContainers: []corev1.Container{{Resources: req("3", "1Gi")}}},
		"sidecars": {Containers: []corev1.Container{{Resources: req("1", "1Gi")}},
			InitContainers: []corev1.Container{{Resources: req("2", "1Gi")}, {Resources: req("100m", "64Mi"), RestartPolicy: &always},
				{Resources: req("3", "3Gi")}, {Resources: req("200m", "8Gi"), RestartPolicy: &always}}},
		"overhead": {Containers: []corev1.Container{{Resources: req("1", "1Gi")}},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		"pod-level": {Containers: []corev1.Container{{Name: "a", Resources: req("1", "1Gi")}}, Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}},
		"resized": {Containers: []corev1.Container{{Name: "a", Resources: req("1", "1Gi")}}},
	} {
		p := &corev1.Pod{Spec: spec}
		if name == "resized" { // allocated 2 cpu: a resize down not yet actuated
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", AllocatedResources: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
		}
		ri := newResourceIndex([][]*corev1.Pod{{p}}, nil)
		got, ok := ri.podRequests(p)
		want := ri.toVec(podresources.Requests(p), nil)
		want[resPods]++
		if !ok || got != want {
			t.Errorf("%s: podRequests = %v (%v), want %v", name, got, ok, want)
		}
		if cpu := map[string]int64{"pod-level": 6000, "resized": 2000}[name]; cpu != 0 && got[resCPU] != cpu {
			t.Errorf("%s: %d millicpu, want %d", name, got[resCPU], cpu)
		}
	}
}
