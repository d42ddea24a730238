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
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.resources.nodes",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1,description=""
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1,description=""
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
//
// +kubebuilder:validation:XValidation:message="'weight' is not supported on a static NodePool (replicas set)",rule="!has(self.replicas) || !has(self.weight)"
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
	// consolidated; "Never" disables it.
	// +kubebuilder:default:="0s"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +optional
	ConsolidateAfter Duration `json:"consolidateAfter,omitempty"`
	// ConsolidationPolicy: WhenEmpty or WhenEmptyOrUnderutilized (default).
	// +kubebuilder:default:=WhenEmptyOrUnderutilized
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many nodes may be disrupted at once.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget limits disruptions, optionally in a schedule window and for reasons.
type Budget struct {
	// Reasons this budget applies to; empty means all.
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage ("10%").
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC) or macro (@daily) opening the window.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly)|\S+\s+\S+\s+\S+\s+\S+\s+\S+)$`
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
	// Labels are copied onto NodeClaims and Nodes; restricted domains are
	// rejected.
	// +kubebuilder:validation:XValidation:message="label domain \"kubernetes.io\" is restricted",rule="self.all(x, x in [\"beta.kubernetes.io/instance-type\", \"failure-domain.beta.kubernetes.io/region\", \"beta.kubernetes.io/os\", \"beta.kubernetes.io/arch\", \"failure-domain.beta.kubernetes.io/zone\", \"topology.kubernetes.io/zone\", \"topology.kubernetes.io/region\", \"kubernetes.io/arch\", \"kubernetes.io/os\", \"node.kubernetes.io/windows-build\"] || x.find(\"^([^/]+)\").endsWith(\"node.kubernetes.io\") || x.find(\"^([^/]+)\").endsWith(\"node-restriction.kubernetes.io\") || !x.find(\"^([^/]+)\").endsWith(\"kubernetes.io\"))"
	// +kubebuilder:validation:XValidation:message="label domain \"k8s.io\" is restricted",rule="self.all(x, x.find(\"^([^/]+)\").endsWith(\"kops.k8s.io\") || !x.find(\"^([^/]+)\").endsWith(\"k8s.io\"))"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self.all(x, x in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))"
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x != \"karpenter.sh/nodepool\")"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self.all(x, x != \"kubernetes.io/hostname\")"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self.all(x, x in [\"karpenter.k8s.aws/ec2nodeclass\", \"karpenter.k8s.aws/instance-encryption-in-transit-supported\", \"karpenter.k8s.aws/instance-category\", \"karpenter.k8s.aws/instance-hypervisor\", \"karpenter.k8s.aws/instance-family\", \"karpenter.k8s.aws/instance-generation\", \"karpenter.k8s.aws/instance-local-nvme\", \"karpenter.k8s.aws/instance-size\", \"karpenter.k8s.aws/instance-cpu\", \"karpenter.k8s.aws/instance-cpu-manufacturer\", \"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz\", \"karpenter.k8s.aws/instance-memory\", \"karpenter.k8s.aws/instance-ebs-bandwidth\", \"karpenter.k8s.aws/instance-network-bandwidth\", \"karpenter.k8s.aws/instance-gpu-name\", \"karpenter.k8s.aws/instance-gpu-manufacturer\", \"karpenter.k8s.aws/instance-gpu-count\", \"karpenter.k8s.aws/instance-gpu-memory\", \"karpenter.k8s.aws/instance-accelerator-name\", \"karpenter.k8s.aws/instance-accelerator-manufacturer\", \"karpenter.k8s.aws/instance-accelerator-count\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\"))"
	// +kubebuilder:validation:XValidation:message="label keys must be qualified names",rule="self.all(x, x.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))"
	// +kubebuilder:validation:MaxProperties=100
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
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? (has(x.values) && x.values.size() != 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",rule="self.all(x, x.operator in ['Gt', 'Lt', 'Gte', 'Lte'] ? (has(x.values) && x.values.size() == 1 && x.values[0].matches('^[0-9]+$') && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with operator 'Exists' or 'DoesNotExist' must not have values",rule="self.all(x, x.operator in ['Exists', 'DoesNotExist'] ? (!has(x.values) || x.values.size() == 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? (has(x.values) && x.values.size() >= x.minValues) : true)"
	// +kubebuilder:validation:MaxItems:=100
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// NodeClassRef names the EC2NodeClass.
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
// ones, Karpenter v1 adds Gte and Lte.
// +kubebuilder:validation:Enum:={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
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
	// Key is a label key; restricted label domains are rejected.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:message="label domain \"kubernetes.io\" is restricted",rule="self in [\"beta.kubernetes.io/instance-type\", \"failure-domain.beta.kubernetes.io/region\", \"beta.kubernetes.io/os\", \"beta.kubernetes.io/arch\", \"failure-domain.beta.kubernetes.io/zone\", \"topology.kubernetes.io/zone\", \"topology.kubernetes.io/region\", \"node.kubernetes.io/instance-type\", \"kubernetes.io/arch\", \"kubernetes.io/os\", \"node.kubernetes.io/windows-build\"] || self.find(\"^([^/]+)\").endsWith(\"node.kubernetes.io\") || self.find(\"^([^/]+)\").endsWith(\"node-restriction.kubernetes.io\") || !self.find(\"^([^/]+)\").endsWith(\"kubernetes.io\")"
	// +kubebuilder:validation:XValidation:message="label domain \"k8s.io\" is restricted",rule="self.find(\"^([^/]+)\").endsWith(\"kops.k8s.io\") || !self.find(\"^([^/]+)\").endsWith(\"k8s.io\")"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self != \"kubernetes.io/hostname\""
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self in [\"karpenter.k8s.aws/ec2nodeclass\", \"karpenter.k8s.aws/instance-encryption-in-transit-supported\", \"karpenter.k8s.aws/instance-category\", \"karpenter.k8s.aws/instance-hypervisor\", \"karpenter.k8s.aws/instance-family\", \"karpenter.k8s.aws/instance-generation\", \"karpenter.k8s.aws/instance-local-nvme\", \"karpenter.k8s.aws/instance-size\", \"karpenter.k8s.aws/instance-cpu\", \"karpenter.k8s.aws/instance-cpu-manufacturer\", \"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz\", \"karpenter.k8s.aws/instance-memory\", \"karpenter.k8s.aws/instance-ebs-bandwidth\", \"karpenter.k8s.aws/instance-network-bandwidth\", \"karpenter.k8s.aws/instance-gpu-name\", \"karpenter.k8s.aws/instance-gpu-manufacturer\", \"karpenter.k8s.aws/instance-gpu-count\", \"karpenter.k8s.aws/instance-gpu-memory\", \"karpenter.k8s.aws/instance-accelerator-name\", \"karpenter.k8s.aws/instance-accelerator-manufacturer\", \"karpenter.k8s.aws/instance-accelerator-count\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\")"
	Key      string               `json:"key"`
	Operator NodeSelectorOperator `json:"operator"`
	// Values are label values; In needs at least one, Gt/Lt/Gte/Lte exactly
	// one non-negative integer, Exists/DoesNotExist none.
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
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
//
// +kubebuilder:validation:XValidation:message="nodeClassRef.group is immutable",rule="self.group == oldSelf.group"
// +kubebuilder:validation:XValidation:message="nodeClassRef.kind is immutable",rule="self.kind == oldSelf.kind"
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
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
