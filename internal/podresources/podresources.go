// Package podresources computes what a pod asks a node for, as
// kube-scheduler counts it (its effective requests and limits).
package podresources

import (
	corev1 "k8s.io/api/core/v1"
)

// Requests is the pod's effective request: the larger of its containers
// with their restartable init ("sidecar") containers and of each init
// container with the sidecars started before it, plus the pod overhead.
func Requests(p *corev1.Pod) corev1.ResourceList {
	return effective(p, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests })
}

// Limits is the same sum over the containers' limits (the overhead added
// to every resource).
func Limits(p *corev1.Pod) corev1.ResourceList {
	return effective(p, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Limits })
}

func effective(p *corev1.Pod, of func(corev1.ResourceRequirements) corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		Add(out, of(c.Resources))
	}
	sidecars := corev1.ResourceList{}
	var inits []corev1.ResourceList
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			Add(sidecars, of(c.Resources))
			continue
		}
		init := corev1.ResourceList{}
		Add(init, sidecars)
		Add(init, of(c.Resources))
		inits = append(inits, init)
	}
	Add(out, sidecars)
	for _, init := range inits {
		for n, q := range init {
			if cur, ok := out[n]; !ok || q.Cmp(cur) > 0 {
				out[n] = q.DeepCopy()
			}
		}
	}
	Add(out, p.Spec.Overhead)
	return out
}

// Add adds l into into, resource by resource.
func Add(into, l corev1.ResourceList) {
	for n, q := range l {
		cur := into[n]
		cur.Add(q)
		into[n] = cur
	}
}
