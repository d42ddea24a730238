package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is one node Joiner launched or is launching.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeClaimSpec   `json:"spec"`
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// NodeClaimSpec is what a NodeClaim asks the cloud for.
type NodeClaimSpec struct {
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// +optional
	StartupTaints []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements  []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// +optional
	Resources    ResourceRequirements `json:"resources,omitempty"`
	NodeClassRef *NodeClassReference  `json:"nodeClassRef"`
	// +optional
	TerminationGracePeriod *Duration `json:"terminationGracePeriod,omitempty"`
	// +optional
	ExpireAfter Duration `json:"expireAfter,omitempty"`
}

// ResourceRequirements holds the requests the NodeClaim was sized for.
type ResourceRequirements struct {
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is the observed state of a NodeClaim.
type NodeClaimStatus struct {
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitempty"`
}

// NodeClaim condition types.
const (
	ConditionLaunched            = "Launched"
	ConditionRegistered          = "Registered"
	ConditionInitialized         = "Initialized"
	ConditionReady               = "Ready"
	ConditionConsolidatable      = "Consolidatable"
	ConditionDrifted             = "Drifted"
	ConditionDrained             = "Drained"
	ConditionInstanceTerminating = "InstanceTerminating"
	ConditionEmpty               = "Empty"
	ConditionDisruptionReason    = "DisruptionReason"
)
