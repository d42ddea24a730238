// Package scheduler is Joiner's pure provisioning scheduler: pending pods,
// NodePools, instance types and the cluster's existing capacity in; a Plan
// out (nominations onto existing nodes, new NodeClaims with their candidate
// instance types, unschedulable pods with a reason each).
//
// Solve is deterministic (same input, identical plan), does no I/O, reads no
// clock and starts no goroutine. Speed comes from structure: pods are
// grouped into equivalence classes whose requirements, compatible pools and
// candidate instance types are computed once; instance types are pre-sorted
// by price per pool; each class keeps a cursor past the claims that can
// never take it again, so placement is close to linear in pods.
//
// Placement order: pods whose required hostname self-anti-affinity forces a
// node each, then pods with a DoNotSchedule hostname spread, then the rest
// largest first (cpu plus memory in cpu units), cpu-heavy and memory-heavy
// pods interleaved. Each pod goes to an existing node or in-flight claim,
// else to a planned claim whose cheapest candidate already holds it, else
// to the first planned claim it fits (first fit), else to a new claim from
// the first compatible NodePool by weight. Preferences (preferred node
// affinity, preferred pod (anti-)affinity, ScheduleAnyway spreads, extra
// required node affinity terms) are treated as required and relaxed one at
// a time, in Karpenter's order, only when the pod fits nowhere.
//
// Also modelled: host ports (one pod per port, protocol and address on a
// node), volume topology (a pod's PersistentVolumes' node affinity and its
// WaitForFirstConsumer StorageClasses' allowed topologies join its node
// requirements), volume attach limits (CSINode's count on existing nodes,
// the EBS attachment limit of the instance type on new ones), the node
// inclusion policies of topology spreads, namespaceSelectors in pod
// affinity terms, minValues policy BestEffort, and reserved capacity
// (each capacity reservation's instances go to claims in the order they
// were opened; see settleReservation).
package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// MaxInstanceTypes is how many candidate instance types a NodeClaim carries
// (the AWS provider's CreateFleet limit).
const MaxInstanceTypes = 60

// Input is everything Solve looks at. Nothing in it is modified.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// NodePools are the pools new NodeClaims come from.
	NodePools []*karpv1.NodePool
	// NodeClasses by name (EC2NodeClass); a pool whose class is missing
	// gets no capacity.
	NodeClasses map[string]*awsv1.EC2NodeClass
	// InstanceTypes by NodeClass name: the catalogue as that class shapes
	// it (allocatable already reflects its kubelet block).
	InstanceTypes map[string][]*catalog.InstanceType
	// Nodes are existing nodes and in-flight NodeClaims with their pods.
	Nodes []*Node
	// DaemonSetPods are one pod (template) per DaemonSet; their requests
	// are reserved on every new node whose pool they tolerate.
	DaemonSetPods []*corev1.Pod
	// Volumes are the volume needs of pods (pending ones and those on
	// Nodes), by pod key (namespace/name); pods without volumes are absent.
	Volumes map[string]PodVolumes
	// Namespaces are namespace labels by name, for namespaceSelectors.
	Namespaces map[string]map[string]string
	// MinValuesPolicy is Strict (the default: a claim that cannot keep a
	// pool's minValues does not take the pod) or BestEffort (a new claim of
	// a pool that cannot keep them relaxes them, before a lighter pool is
	// tried, and says so).
	MinValuesPolicy MinValuesPolicy
	// Moved are the pods (namespace/name) a consolidation moves off their
	// nodes: they are not placed on a node with NoMovedPods.
	Moved map[string]bool
	// TypeTables, when set, keeps the pools' instance-type tables for
	// the next Solve over the same NodePools and catalogue.
	TypeTables *TypeTables
}

// MinValuesPolicy is Karpenter's --min-values-policy.
type MinValuesPolicy string

// The minValues policies.
const (
	MinValuesStrict     MinValuesPolicy = "Strict"
	MinValuesBestEffort MinValuesPolicy = "BestEffort"
)

// PodVolumes is what a pod's volumes ask of its node.
type PodVolumes struct {
	// Requirements are node requirements its volumes impose (a bound
	// PersistentVolume's node affinity, an unbound claim's StorageClass
	// allowed topologies).
	Requirements []corev1.NodeSelectorRequirement
	// Attachments counts, per CSI driver, the volumes it attaches.
	Attachments map[string]int64
	// Volumes name, per CSI driver, the volumes Attachments counts (a
	// claim's namespace/name, an inline EBS volume's ID). A volume that
	// several pods on one node use is attached there once, so it counts
	// once per node, as kube-scheduler and Karpenter's VolumeUsage count
	// it; volumes left unnamed count once per pod.
	Volumes map[string][]string
	// Err says why the pod cannot be scheduled yet (a missing claim, an
	// unbound claim without a StorageClass); empty when it can.
	Err string
}

// AttachResource is the resource name of a CSI driver's attachable volume
// count in the scheduler's resource vectors and in Node.Allocatable
// (kube-scheduler's attachable-volumes-csi-<driver>).
func AttachResource(driver string) corev1.ResourceName {
	return corev1.ResourceName("attachable-volumes-csi-" + driver)
}

// EBSDriver is the AWS EBS CSI driver (and, through CSI migration, the
// in-tree kubernetes.io/aws-ebs plugin).
const EBSDriver = "ebs.csi.aws.com"

// Node is an existing node or an in-flight NodeClaim. Allocatable may carry
// AttachResource(driver) counts (from the node's CSINode); a driver it does
// not list is not limited.
type Node struct {
	Name     string
	Labels   map[string]string
	Taints   []corev1.Taint
	Capacity corev1.ResourceList
	// Allocatable is what pods may use; free = Allocatable - Σ Pods.
	Allocatable corev1.ResourceList
	// Pods already bound or nominated there (they count for topology).
	Pods []*corev1.Pod
	// InFlight marks a NodeClaim that has not registered yet.
	InFlight bool
	// NoMovedPods keeps the pods of Input.Moved off the node (a
	// consolidation destination still inside its consolidateAfter window,
	// as Karpenter's consolidation simulation leaves it); other pods may
	// still go there.
	NoMovedPods bool
}

// Plan is Solve's answer.
type Plan struct {
	Nominations   []Nomination      `json:"nominations,omitempty"`
	NodeClaims    []NodeClaim       `json:"nodeClaims,omitempty"`
	Unschedulable []Unschedulable   `json:"unschedulable,omitempty"`
	NodePools     []PoolExplanation `json:"nodePools,omitempty"`
	TotalPrice    float64           `json:"totalPrice"`
}

// Nomination places a pod on an existing node or in-flight claim.
type Nomination struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// NodeClaim is a node Joiner would launch.
type NodeClaim struct {
	Name      string `json:"name"`
	NodePool  string `json:"nodePool"`
	NodeClass string `json:"nodeClass"`
	// Requirements are the pool's, the pods' and the chosen topology
	// domains', merged.
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
	// InstanceTypes are up to MaxInstanceTypes candidates, cheapest first.
	InstanceTypes []string `json:"instanceTypes"`
	// The cheapest candidate offering.
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	// Pods it carries (namespace/name), in placement order.
	Pods []string `json:"pods"`
	// Requests are the pods' requests plus DaemonSet overhead; Allocatable
	// is the chosen type's.
	Requests    corev1.ResourceList `json:"requests"`
	Allocatable corev1.ResourceList `json:"allocatable"`
	// MinValuesRelaxed: BestEffort relaxed the pool's minValues for it
	// (karpenter.sh/nodeclaim-min-values-relaxed).
	MinValuesRelaxed bool `json:"minValuesRelaxed,omitempty"`
}

// Unschedulable is a pod no node can take, and why.
type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// PoolExplanation says which instance types a pool could not use and why.
type PoolExplanation struct {
	NodePool      string `json:"nodePool"`
	InstanceTypes int    `json:"instanceTypes"`
	// Excluded counts by reason (ExcludedRequirements,
	// ExcludedNoOffering, ExcludedTooSmall, ExcludedLimits).
	Excluded []Exclusion `json:"excluded,omitempty"`
	// Messages are human sentences for the same counts.
	Messages []string `json:"messages,omitempty"`
	// MinValuesUnmet: the types the NodePool's requirements and offerings
	// leave cannot meet its minValues (policy Strict).
	MinValuesUnmet bool `json:"minValuesUnmet,omitempty"`
}

// Exclusion is a count of instance types excluded for one reason.
type Exclusion struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// volumeRequests turns the pods' volume attachments into extra requests.
func volumeRequests(vols map[string]PodVolumes) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for key, v := range vols {
		if len(v.Attachments) == 0 {
			continue
		}
		l := corev1.ResourceList{}
		for driver, n := range v.Attachments {
			l[AttachResource(driver)] = *resource.NewQuantity(n, resource.DecimalSI)
		}
		out[key] = l
	}
	return out
}
