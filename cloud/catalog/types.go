// Package catalog holds the embedded EC2 instance-type catalogue and prices,
// and turns a catalogue row plus an EC2NodeClass into the instance type the
// scheduler sees: well-known labels, capacity, overhead and offerings.
//
// The data (data/*.csv, embedded, parsed once) is a snapshot of EC2's
// DescribeInstanceTypes and of the Linux on-demand list prices of the
// regions data/README.md lists (PriceTable; other regions are priced like
// us-east-1 until the AWS Pricing API answers: cloud/aws).
// InstanceTypes follows Karpenter's AWS provider capacity model:
//
//   - memory capacity = memory_mib (-64 MiB on arm64) - ceil(7.5 %) VM overhead;
//   - pods = kubelet.maxPods, else ENI-limited max pods (110 on Windows),
//     capped at podsPerCore x vCPU (not on Bottlerocket);
//   - ephemeral-storage = local NVMe total with instanceStorePolicy RAID0, else
//     the root volume mapping, else the AMI family's default (20Gi; Windows 50Gi);
//   - kube-reserved = cpu 6 %/1 %/0.5 %/0.25 % of cores 1/2/3-4/rest, memory
//     11 x pods + 255 MiB (ENI-limited pods on AL2, AL2023, Ubuntu, Custom),
//     ephemeral-storage 1Gi; eviction = memory 100Mi, 10 % of ephemeral-storage;
//     the NodeClass kubelet block overrides each of them per resource.
//
// Spot prices are modelled, not measured: see SpotModel.
package catalog

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
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
// offering unavailable for a while). A reserved offering is one capacity
// reservation of the type in its zone.
type Offering struct {
	Zone         string
	CapacityType string // "spot", "on-demand" or "reserved"
	Price        float64
	Available    bool
	// ReservationID, ReservationType (default or capacity-block) and
	// Interruptible describe the capacity reservation of a reserved
	// offering (karpenter.k8s.aws/capacity-reservation-id, -type and
	// -interruptible); ReservationCapacity is how many more instances it
	// holds. Empty and zero for spot and on-demand.
	ReservationID       string
	ReservationType     string
	Interruptible       bool
	ReservationCapacity int
}

// exoticResources are the accelerators that make an instance type exotic
// (Karpenter's exotic instance filter): GPUs, Neuron devices and cores,
// Gaudi accelerators.
var exoticResources = []corev1.ResourceName{awsv1.ResourceAWSNeuron, resourceAWSNeuronCore, awsv1.ResourceAMDGPU,
	awsv1.ResourceNVIDIAGPU, resourceHabanaGaudi}

// Exotic reports whether Karpenter launches the type only when no other
// type of a claim will do (its exotic instance filter): a metal size, or
// any GPU or accelerator in its capacity.
func (it *InstanceType) Exotic() bool {
	if strings.Contains(it.Labels[karpv1.LabelInstanceSize], "metal") {
		return true
	}
	for _, r := range exoticResources {
		if q, ok := it.Capacity[r]; ok && !q.IsZero() {
			return true
		}
	}
	return false
}
