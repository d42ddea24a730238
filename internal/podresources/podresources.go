// Package podresources computes what a pod asks a node for, as
// kube-scheduler counts it (its effective requests and limits).
package podresources

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Requests is the pod's effective request as kube-scheduler counts it
// (Karpenter's resources.Ceiling): the larger of its containers with their
// restartable init ("sidecar") containers and of each init container with
// the sidecars started before it, pod-level resources where the pod sets
// them, the resources of a resize in progress, plus the pod overhead.
func Requests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true})
}

// Limits is the same over the limits (the overhead added to every
// resource).
func Limits(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
}

// Add adds l into into, resource by resource.
func Add(into, l corev1.ResourceList) {
	for n, q := range l {
		cur := into[n]
		cur.Add(q)
		into[n] = cur
	}
}

// Format writes a resource list as Karpenter's logs do, names sorted:
// "{cpu: 1, memory: 2Gi}".
func Format(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		q := l[k]
		parts = append(parts, string(k)+": "+q.String())
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
