package karpmetrics

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podResources is what a pod asks for (requests or limits): the larger of
// its containers with their sidecars, and each init container with the
// sidecars started before it, plus the pod overhead (kube-scheduler's
// effective request).
func podResources(p *corev1.Pod, of func(corev1.ResourceRequirements) corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		add(out, of(c.Resources))
	}
	sidecars := corev1.ResourceList{}
	var inits []corev1.ResourceList
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, of(c.Resources))
			continue
		}
		init := corev1.ResourceList{}
		add(init, sidecars)
		add(init, of(c.Resources))
		inits = append(inits, init)
	}
	add(out, sidecars)
	for _, init := range inits {
		for n, q := range init {
			if cur, ok := out[n]; !ok || q.Cmp(cur) > 0 {
				out[n] = q.DeepCopy()
			}
		}
	}
	add(out, p.Spec.Overhead)
	return out
}

func requests(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests }
func limits(r corev1.ResourceRequirements) corev1.ResourceList   { return r.Limits }

// add adds l into into.
func add(into, l corev1.ResourceList) {
	for n, q := range l {
		cur := into[n]
		cur.Add(q)
		into[n] = cur
	}
}

// subtract is a - b per resource of a.
func subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range a {
		v := q.DeepCopy()
		if s, ok := b[n]; ok {
			v.Sub(s)
		}
		out[n] = v
	}
	return out
}

// value is Karpenter's metric value of a quantity: cores for cpu, the
// plain value (bytes, count) otherwise.
func value(n corev1.ResourceName, q resource.Quantity) float64 {
	if n == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}
