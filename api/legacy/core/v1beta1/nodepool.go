// Package v1beta1 decodes the karpenter.sh/v1beta1 NodePool and NodeClaim
// (Karpenter v0.32 to v0.37). Decoding only; api/convert maps them to v1.
package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/legacy/core/v1alpha5"
)

// APIVersion and kinds of the v1beta1 core API.
const (
	APIVersion    = "karpenter.sh/v1beta1"
	KindNodePool  = "NodePool"
	KindNodeClaim = "NodeClaim"
)

// Consolidation policies of v1beta1.
const (
	ConsolidationPolicyWhenEmpty         = "WhenEmpty"
	ConsolidationPolicyWhenUnderutilized = "WhenUnderutilized"
)

// NodePool is a karpenter.sh/v1beta1 NodePool.
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodePoolSpec `json:"spec,omitempty"`
}

// NodePoolSpec is the spec of a v1beta1 NodePool.
type NodePoolSpec struct {
	Template   NodeClaimTemplate   `json:"template"`
	Disruption *Disruption         `json:"disruption,omitempty"`
	Limits     corev1.ResourceList `json:"limits,omitempty"`
	Weight     *int32              `json:"weight,omitempty"`
}

// Disruption is the v1beta1 disruption block; expireAfter lived here.
type Disruption struct {
	ConsolidateAfter    *karpv1.Duration `json:"consolidateAfter,omitempty"`
	ConsolidationPolicy string           `json:"consolidationPolicy,omitempty"`
	ExpireAfter         *karpv1.Duration `json:"expireAfter,omitempty"`
	Budgets             []Budget         `json:"budgets,omitempty"`
}

// Budget limits disruptions.
type Budget struct {
	Nodes    string           `json:"nodes"`
	Schedule *string          `json:"schedule,omitempty"`
	Duration *karpv1.Duration `json:"duration,omitempty"`
	// No reasons: they arrived with v1 (no v1beta1 release had them).
}

// NodeClaimTemplate is the template of a v1beta1 NodePool.
type NodeClaimTemplate struct {
	ObjectMeta ObjectMeta    `json:"metadata,omitempty"`
	Spec       NodeClaimSpec `json:"spec"`
}

// ObjectMeta is the template metadata subset.
type ObjectMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimSpec is the v1beta1 NodeClaim spec (also the template spec).
type NodeClaimSpec struct {
	Taints        []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements  []NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
	Resources     *ResourceRequirements                  `json:"resources,omitempty"`
	Kubelet       *Kubelet                               `json:"kubelet,omitempty"`
	NodeClassRef  *NodeClassReference                    `json:"nodeClassRef,omitempty"`
}

// NodeSelectorRequirementWithMinValues is a requirement with minValues.
type NodeSelectorRequirementWithMinValues struct {
	Key       string   `json:"key"`
	Operator  string   `json:"operator"`
	Values    []string `json:"values,omitempty"`
	MinValues *int     `json:"minValues,omitempty"`
}

// ResourceRequirements are the requests of a NodeClaim.
type ResourceRequirements struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClassReference is the v1beta1 reference (apiVersion, kind, name),
// the shape of the v1alpha5 providerRef.
type NodeClassReference = v1alpha5.MachineTemplateRef

// Kubelet is the v1beta1 kubelet block (v1 moved it to the EC2NodeClass).
// Reservations are ResourceLists before v0.36 and strings after: both read.
type Kubelet struct {
	v1alpha5.KubeletSettings `json:",inline"`
	EvictionSoftGracePeriod  map[string]karpv1.Duration `json:"evictionSoftGracePeriod,omitempty"`
}

// NodeClaim is a karpenter.sh/v1beta1 NodeClaim.
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeClaimSpec `json:"spec,omitempty"`
}
