// Package catalog holds the embedded EC2 instance-type catalogue and prices,
// and turns a catalogue row plus an EC2NodeClass into the instance type the
// scheduler sees: well-known labels, capacity, overhead and offerings.
package catalog

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// InstanceType is an EC2 instance type as the scheduler sees it for one
// EC2NodeClass: labels to match requirements against, capacity, the overhead
// kubelet reserves, and where and at what price it can be had.
//
// Values are shared, never copied: callers must not mutate an InstanceType
// they did not build.
type InstanceType struct {
	Name string
	// Labels are the well-known labels a node of this type gets, one value
	// each (node.kubernetes.io/instance-type, kubernetes.io/arch,
	// karpenter.k8s.aws/instance-cpu, ...). Zone and capacity type are not
	// here: they come from the offering.
	Labels map[string]string
	// Capacity is what the node reports as capacity: cpu, memory (after VM
	// overhead), pods, ephemeral-storage, and extended resources.
	Capacity corev1.ResourceList
	// Overhead is what kubelet holds back from Capacity.
	Overhead Overhead
	// Offerings are the (zone, capacity type) pairs with their price.
	Offerings []Offering
}

// Overhead is the part of capacity that pods cannot use.
type Overhead struct {
	KubeReserved      corev1.ResourceList
	SystemReserved    corev1.ResourceList
	EvictionThreshold corev1.ResourceList
}

// Total is the sum of all overhead.
func (o Overhead) Total() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{o.KubeReserved, o.SystemReserved, o.EvictionThreshold} {
		for k, v := range l {
			q := out[k]
			q.Add(v)
			out[k] = q
		}
	}
	return out
}

// Allocatable is Capacity minus Overhead, floored at zero per resource.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	out := make(corev1.ResourceList, len(it.Capacity))
	total := it.Overhead.Total()
	for k, v := range it.Capacity {
		q := v.DeepCopy()
		if o, ok := total[k]; ok {
			q.Sub(o)
		}
		if q.Sign() < 0 {
			q = resource.Quantity{Format: v.Format}
		}
		out[k] = q
	}
	return out
}

// Offering is one way to buy an instance type: a zone and a capacity type at
// a price, and whether it is currently available (capacity errors make an
// offering unavailable for a while).
type Offering struct {
	Zone         string
	CapacityType string // "spot", "on-demand" or "reserved"
	Price        float64
	Available    bool
}
