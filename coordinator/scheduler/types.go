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
// Not modelled (yet): host ports, volume topology (PVC zones, attach
// limits), non-empty namespaceSelectors in pod affinity terms (the term's
// namespaces or the pod's namespace are used; an empty selector means all
// namespaces), nodeAffinityPolicy Ignore and nodeTaintsPolicy Honor (spread
// domains always honour the pod's node affinity and ignore taints),
// reserved capacity, and minValues policy BestEffort (minValues is strict).
package scheduler

import (
	corev1 "k8s.io/api/core/v1"

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
}

// Node is an existing node or an in-flight NodeClaim.
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
	// Excluded counts by reason ("requirements", "no offering",
	// "too small for daemonsets", "limits").
	Excluded []Exclusion `json:"excluded,omitempty"`
	// Messages are human sentences for the same counts.
	Messages []string `json:"messages,omitempty"`
}

// Exclusion is a count of instance types excluded for one reason.
type Exclusion struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}
