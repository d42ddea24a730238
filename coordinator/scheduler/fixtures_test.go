package scheduler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/test/workload"
)

// fakeTypes is the workload of Karpenter's scheduling benchmark: type i has
// i+1 vCPU, 2(i+1) GiB, 10(i+1) pods, 100m cpu and 10Mi memory reserved;
// spot in zones 1-2, on-demand in zones 1-3, 0.3147483648 per vCPU.
func fakeTypes(n int) []*catalog.InstanceType {
	out := make([]*catalog.InstanceType, n)
	for i := range n {
		cpu := int64(i + 1)
		price := 0.3147483648 * float64(cpu)
		name := "fake-it-" + strconv.Itoa(i)
		var offs []catalog.Offering
		for _, z := range []string{"test-zone-1", "test-zone-2"} {
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: price, Available: true})
		}
		for _, z := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
			offs = append(offs, catalog.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true})
		}
		out[i] = &catalog.InstanceType{
			Name: name,
			Labels: map[string]string{
				karpv1.LabelInstanceType:         name,
				karpv1.LabelArch:                 "amd64",
				karpv1.LabelOS:                   "linux",
				"karpenter.k8s.aws/instance-cpu": strconv.Itoa(i + 1),
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(2*cpu<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(10*cpu, resource.DecimalSI),
			},
			Overhead: catalog.Overhead{KubeReserved: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("10Mi"),
			}},
			Offerings: offs,
		}
	}
	return out
}

func nodePool(name string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
}

var (
	benchCPU = []string{"100m", "250m", "500m", "1000m", "1500m"}
	benchMem = []string{"100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
)

func pod(name string, labels map[string]string, cpu, mem string) *corev1.Pod {
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}},
	}
}

// spread spreads the pods sel selects over key, at most maxSkew apart
// (DoNotSchedule).
func spread(key string, maxSkew int32, sel *metav1.LabelSelector) []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
}

// affinity requires a domain of key that runs a pod sel selects.
func affinity(key string, sel *metav1.LabelSelector) *corev1.Affinity {
	return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: key}}}}
}

// antiAffinity requires a domain of key that runs no pod sel selects.
func antiAffinity(key string, sel *metav1.LabelSelector) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: key}}}}
}

// preferred is one preferred pod (anti-)affinity term of weight over key
// for the pods sel selects.
func preferred(weight int32, key string, sel *metav1.LabelSelector) []corev1.WeightedPodAffinityTerm {
	return []corev1.WeightedPodAffinityTerm{{Weight: weight, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: key}}}
}

// karpenterPods are the pods of Karpenter's scheduling benchmark
// (test/workload).
func karpenterPods(n int) []*corev1.Pod { return workload.KarpenterPods(n) }

// karpenterPodsSeeded is karpenterPods with another seed (property tests).
func karpenterPodsSeeded(n int, seed int64) []*corev1.Pod {
	return workload.KarpenterPodsSeeded(n, seed)
}

// groupPod is a pod of group g (labelled group=g<g>) with a random cpu and
// memory request, and the selector of its group.
func groupPod(name string, g int, rng *rand.Rand) (*corev1.Pod, *metav1.LabelSelector) {
	lbl := map[string]string{"group": fmt.Sprintf("g%d", g)}
	return pod(name, lbl, benchCPU[rng.IntN(len(benchCPU))], benchMem[rng.IntN(len(benchMem))]), &metav1.LabelSelector{MatchLabels: lbl}
}

// selfSelectingPods is an easier workload than Karpenter's (the one the
// first benchmarks used): five equal groups (plain, zonal spread, hostname
// spread, zonal self-affinity, hostname self-anti-affinity) whose
// selectors each select only their own group, one affinity group, with
// random cpu and memory.
func selfSelectingPods(n int, seed uint64) []*corev1.Pod {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]*corev1.Pod, 0, n)
	per := n / 5
	groups := []int{n - 4*per, per, per, per, per}
	for g, cnt := range groups {
		for i := range cnt {
			p, sel := groupPod(fmt.Sprintf("g%d-%05d", g, i), g, rng)
			switch g {
			case 1:
				p.Spec.TopologySpreadConstraints = spread(karpv1.LabelZone, 1, sel)
			case 2:
				p.Spec.TopologySpreadConstraints = spread(karpv1.LabelHostname, 1, sel)
			case 3:
				p.Spec.Affinity = affinity(karpv1.LabelZone, sel)
			case 4:
				p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
			}
			out = append(out, p)
		}
	}
	return out
}

// benchInput is Karpenter's benchmark input: its pods, one pool, its 400
// fake instance types.
func benchInput(n int) *Input {
	return &Input{
		Pods:          karpenterPods(n),
		NodePools:     []*karpv1.NodePool{nodePool("default")},
		InstanceTypes: map[string][]*catalog.InstanceType{"default": fakeTypes(400)},
	}
}

// lowerBound is the LP relaxation of the plan's cost: the pods' total cpu
// at the cheapest price per allocatable vCPU, or their total memory at the
// cheapest price per allocatable GiB, whichever is higher. No plan can cost
// less.
func lowerBound(pods []*corev1.Pod, types []*catalog.InstanceType) float64 {
	var cpu, mem float64
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			cpu += float64(c.Resources.Requests.Cpu().MilliValue()) / 1000
			mem += float64(c.Resources.Requests.Memory().Value()) / (1 << 30)
		}
	}
	perCPU, perMem := math.Inf(1), math.Inf(1)
	for _, t := range types {
		a := t.Allocatable()
		price := math.Inf(1)
		for _, o := range t.Offerings {
			if o.Available {
				price = min(price, o.Price)
			}
		}
		if c := float64(a.Cpu().MilliValue()) / 1000; c > 0 {
			perCPU = min(perCPU, price/c)
		}
		if m := float64(a.Memory().Value()) / (1 << 30); m > 0 {
			perMem = min(perMem, price/m)
		}
	}
	return max(cpu*perCPU, mem*perMem)
}
