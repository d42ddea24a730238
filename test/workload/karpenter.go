// Package workload generates the pods of published benchmarks, for Joiner's
// benchmarks and property tests and for running other schedulers on the
// same pods (tools/karpenter-bench).
package workload

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// KarpenterPods makes the pods of Karpenter's scheduling benchmark
// (kubernetes-sigs/karpenter v1.14 scheduling_benchmark_test.go,
// makeDiversePods) the way it does: one math/rand generator seeded 42
// shared by every draw, n/5 pods each of plain, zonal spread, hostname
// spread, zonal self-affinity and hostname self-anti-affinity, the rest
// plain. Labels and selectors are drawn independently from seven values,
// so plain and spread pods match each other's spread selectors, and there
// are seven zonal-affinity groups. Draw order per pod: its label, its
// selector (spreads), cpu, memory.
func KarpenterPods(n int) []*corev1.Pod { return KarpenterPodsSeeded(n, 42) }

// KarpenterPodsSeeded is KarpenterPods with another seed (property tests).
func KarpenterPodsSeeded(n int, seed int64) []*corev1.Pod {
	r := rand.New(rand.NewSource(seed))
	values := []string{"a", "b", "c", "d", "e", "f", "g"}
	value := func() string { return values[r.Intn(len(values))] }
	cpus := []int{100, 250, 500, 1000, 1500}
	mems := []int{100, 256, 512, 1024, 2048, 4096}
	res := func() (string, string) {
		c := fmt.Sprintf("%dm", cpus[r.Intn(len(cpus))])
		return c, fmt.Sprintf("%dMi", mems[r.Intn(len(mems))])
	}
	var out []*corev1.Pod
	add := func(kind string, count int, shape func(p *corev1.Pod)) {
		for range count {
			name := fmt.Sprintf("%s-%05d", kind, len(out))
			var lbl map[string]string
			var sel *metav1.LabelSelector
			switch kind {
			case "anti":
				lbl = map[string]string{"app": "nginx"}
			case "aff":
				lbl = map[string]string{"my-affininity": value()}
			default:
				lbl = map[string]string{"my-label": value()}
			}
			if kind == "zspread" || kind == "hspread" {
				sel = &metav1.LabelSelector{MatchLabels: map[string]string{"my-label": value()}}
			}
			c, m := res()
			p := pod(name, lbl, c, m)
			if sel != nil {
				key := karpv1.LabelZone
				if kind == "hspread" {
					key = karpv1.LabelHostname
				}
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
			}
			if shape != nil {
				shape(p)
			}
			out = append(out, p)
		}
	}
	per := n / 5
	add("plain", per, nil)
	add("zspread", per, nil)
	add("hspread", per, nil)
	add("aff", per, func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}, TopologyKey: karpv1.LabelZone}}}}
	})
	add("anti", per, func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}, TopologyKey: karpv1.LabelHostname}}}}
	})
	add("plain", n-len(out), nil)
	return out
}

func pod(name string, labels map[string]string, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
}
