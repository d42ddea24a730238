// Package v1 holds the karpenter.sh/v1 API types Joiner serves: NodePool and
// NodeClaim, field for field compatible with Karpenter v1 manifests.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool is a template for NodeClaims and the limits and disruption rules
// that apply to them.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodePoolSpec is the desired state of a NodePool.
type NodePoolSpec struct {
	// Template is the NodeClaim template new nodes are made from.
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when nodes of this pool may be disrupted.
	// +optional
	Disruption Disruption `json:"disruption,omitempty"`
	// Limits caps the resources all nodes of this pool may hold together.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders pools: higher first. 1..100.
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes a static pool of exactly this many nodes (alpha).
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// Limits is a resource list (cpu, memory, nodes, extended resources).
type Limits corev1.ResourceList

// ConsolidationPolicy says which nodes consolidation may remove.
type ConsolidationPolicy string

// Consolidation policies.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	// ConsolidationPolicyBalanced (Karpenter v1.14) approves a move only when
	// its savings score is high enough.
	ConsolidationPolicyBalanced ConsolidationPolicy = "Balanced"
)

// DisruptionReason names why a node is disrupted; budgets may be scoped to reasons.
type DisruptionReason string

// Disruption reasons budgets can name.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Disruption configures consolidation and its budgets.
type Disruption struct {
	// ConsolidateAfter is how long a node must be consolidatable before it is
	// consolidated; "Never" disables it.
	// +optional
	ConsolidateAfter Duration `json:"consolidateAfter,omitempty"`
	// ConsolidationPolicy: WhenEmpty or WhenEmptyOrUnderutilized (default).
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many nodes may be disrupted at once.
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget limits disruptions, optionally in a schedule window and for reasons.
type Budget struct {
	// Reasons this budget applies to; empty means all.
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage ("10%").
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC) or macro (@daily) opening the window.
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration of the window opened by Schedule.
	// +optional
	Duration *Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the template of the NodeClaims a pool creates.
type NodeClaimTemplate struct {
	// +optional
	ObjectMeta ObjectMeta            `json:"metadata,omitempty"`
	Spec       NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the subset of metadata a template may set.
type ObjectMeta struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is NodeClaimSpec without resources.
type NodeClaimTemplateSpec struct {
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the instance types, zones, capacity types...
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// NodeClassRef names the EC2NodeClass.
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long draining may take.
	// +optional
	TerminationGracePeriod *Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the node lifetime; "Never" disables it. Default 720h.
	// +optional
	ExpireAfter Duration `json:"expireAfter,omitempty"`
}

// NodeSelectorOperator is a requirement operator. Besides the Kubernetes
// ones, Karpenter v1 adds Gte and Lte.
type NodeSelectorOperator string

// Requirement operators.
const (
	OpIn           NodeSelectorOperator = "In"
	OpNotIn        NodeSelectorOperator = "NotIn"
	OpExists       NodeSelectorOperator = "Exists"
	OpDoesNotExist NodeSelectorOperator = "DoesNotExist"
	OpGt           NodeSelectorOperator = "Gt"
	OpLt           NodeSelectorOperator = "Lt"
	OpGte          NodeSelectorOperator = "Gte"
	OpLte          NodeSelectorOperator = "Lte"
)

// NodeSelectorRequirementWithMinValues is a node selector requirement with
// an optional minimum number of distinct values to keep (flexibility).
type NodeSelectorRequirementWithMinValues struct {
	Key      string               `json:"key"`
	Operator NodeSelectorOperator `json:"operator"`
	// +optional
	Values []string `json:"values,omitempty"`
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeClassReference points at a node class.
type NodeClassReference struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Group string `json:"group"`
}

// NodePoolStatus is the observed state of a NodePool.
type NodePoolStatus struct {
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
