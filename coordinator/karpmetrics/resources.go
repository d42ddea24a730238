package karpmetrics

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

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
