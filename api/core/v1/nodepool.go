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
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name",description=""
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1,description=""
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1,description=""
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
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

// NodePoolSpec is the desired state of a NodePool. A static pool (replicas
// set) stays static and a dynamic one dynamic; a static pool may limit only
// nodes and has no weight.
//
// +kubebuilder:validation:XValidation:rule="has(self.replicas) == has(oldSelf.replicas)",message="Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",message="only 'limits.nodes' is supported on static NodePools"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(self.weight)",message="'weight' is not supported on static NodePools"
type NodePoolSpec struct {
	// Template is the NodeClaim template new nodes are made from.
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when nodes of this pool may be disrupted.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption,omitempty"`
	// Limits caps the resources all nodes of this pool may hold together.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders pools: higher first. 1..100.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes a static pool of exactly this many nodes (alpha).
	// +kubebuilder:validation:Minimum:=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// Limits is a resource list (cpu, memory, nodes, extended resources).
type Limits corev1.ResourceList

// ConsolidationPolicy says which nodes consolidation may remove.
// +kubebuilder:validation:Enum:={WhenEmpty,WhenEmptyOrUnderutilized,Balanced}
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
// +kubebuilder:validation:Enum:={Underutilized,Empty,Drifted}
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
	// consolidated; "Never" disables it. Required in a disruption block (the
	// block's own default, when it is left out, is {consolidateAfter: 0s}).
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +required
	ConsolidateAfter Duration `json:"consolidateAfter,omitempty"`
	// ConsolidationPolicy: WhenEmpty or WhenEmptyOrUnderutilized (default).
	// +kubebuilder:default:=WhenEmptyOrUnderutilized
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many nodes may be disrupted at once.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget limits disruptions, optionally in a schedule window and for reasons.
type Budget struct {
	// Reasons this budget applies to; empty means all. No duplicates.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage ("10%").
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC) or macro (@daily) opening the
	// window. The pattern is Karpenter's: its second alternative is not
	// anchored at the start, so it admits any text ending in five
	// space-separated parts; a schedule that does not parse fails at run
	// time (no disruption for the pool), as in Karpenter.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration of the window opened by Schedule.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type=string
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
	// Labels are copied onto NodeClaims and Nodes. The karpenter.sh and
	// karpenter.k8s.aws domains are restricted (crdpatch adds the rules, as
	// Karpenter's hack/validation scripts do), and so are
	// karpenter.sh/nodepool and kubernetes.io/hostname.
	// +kubebuilder:validation:MaxProperties=100
	// +mapType=atomic
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +mapType=granular
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is NodeClaimSpec without resources.
type NodeClaimTemplateSpec struct {
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// +listType=atomic
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the instance types, zones, capacity types...
	// The rules are Karpenter's, word for word: an In or Gt/Lt/Gte/Lte
	// without values fails evaluation and is rejected too.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// NodeClassRef names the EC2NodeClass; its group and kind cannot change.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long draining may take.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type=string
	// +optional
	TerminationGracePeriod *Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the node lifetime; "Never" disables it. Default 720h.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +optional
	ExpireAfter Duration `json:"expireAfter,omitempty"`
}

// NodeSelectorOperator is a requirement operator. Besides the Kubernetes
// ones, Karpenter v1 adds Gte and Lte (listed first, as in Karpenter's CRD).
// +kubebuilder:validation:Enum:={Gte,Lte,In,NotIn,Exists,DoesNotExist,Gt,Lt}
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
	// Key is a label key. The karpenter.sh and karpenter.k8s.aws domains are
	// restricted but for their well-known labels, and so is
	// kubernetes.io/hostname (crdpatch adds the rules, and in NodePools
	// forbids karpenter.sh/nodepool, as Karpenter's scripts do).
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	Key      string               `json:"key"`
	Operator NodeSelectorOperator `json:"operator"`
	// Values are label values; In needs at least one, Gt/Lt/Gte/Lte exactly
	// one non-negative integer. (Karpenter's CRD puts the label-value
	// pattern on the list, where the API server does not apply it; crdpatch
	// does the same. A NodePool's values are checked by Validate, as by
	// Karpenter's runtime validation.)
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the minimum number of distinct values to keep (1..50).
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeClassReference points at a node class.
type NodeClassReference struct {
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	Kind string `json:"kind"`
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	Name string `json:"name"`
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	Group string `json:"group"`
}

// NodePoolStatus is the observed state of a NodePool.
type NodePoolStatus struct {
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
	// Nodes is the number of nodes of the pool (the scale subresource's
	// status replicas).
	// +kubebuilder:default:=0
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
