package v1

import "k8s.io/apimachinery/pkg/runtime/schema"

// Group is the API group of NodePool and NodeClaim.
const Group = "karpenter.sh"

// SchemeGroupVersion is karpenter.sh/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// Well-known labels, annotations, taints and finalizers (Karpenter v1).
const (
	LabelNodePool     = Group + "/nodepool"
	LabelCapacityType = Group + "/capacity-type"
	LabelRegistered   = Group + "/registered"
	LabelInitialized  = Group + "/initialized"
	LabelDoNotSync    = Group + "/do-not-sync-taints"

	AnnotationDoNotDisrupt         = Group + "/do-not-disrupt"
	AnnotationNodePoolHash         = Group + "/nodepool-hash"
	AnnotationNodePoolHashVersion  = Group + "/nodepool-hash-version"
	AnnotationTerminationTimestamp = Group + "/nodeclaim-termination-timestamp"
	AnnotationMinValuesRelaxed     = Group + "/nodeclaim-min-values-relaxed"

	TaintDisruptedKey    = Group + "/disrupted"
	TaintUnregisteredKey = Group + "/unregistered"

	TerminationFinalizer = Group + "/termination"

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"

	// Kubernetes well-known labels Karpenter schedules on.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	LabelArch         = "kubernetes.io/arch"
	LabelOS           = "kubernetes.io/os"
	LabelZone         = "topology.kubernetes.io/zone"
	LabelRegion       = "topology.kubernetes.io/region"
	LabelHostname     = "kubernetes.io/hostname"
	LabelWindowsBuild = "node.kubernetes.io/windows-build"
)

// Joiner-only keys live under joiner.io/.
const (
	JoinerDomain          = "joiner.io"
	LabelJoinerLaunchID   = JoinerDomain + "/launch-id"
	LabelJoinerAttempt    = JoinerDomain + "/attempt"
	AnnotationJoinerAgent = JoinerDomain + "/agent"
)

// RestrictedLabelDomains may not be used in NodePool template labels or
// requirements, except for the well-known labels below and subdomains listed
// in LabelDomainExceptions.
var RestrictedLabelDomains = []string{
	"kubernetes.io",
	"k8s.io",
	"karpenter.sh",
	"karpenter.k8s.aws",
}

// LabelDomainExceptions are allowed although under a restricted domain.
var LabelDomainExceptions = []string{
	"kops.k8s.io",
	"node.kubernetes.io",
	"node-restriction.kubernetes.io",
}

// WellKnownLabels may appear in requirements although their domain is
// restricted. The AWS provider adds its own (api/aws/v1).
var WellKnownLabels = map[string]bool{
	LabelNodePool:              true,
	LabelCapacityType:          true,
	LabelInstanceType:          true,
	LabelArch:                  true,
	LabelOS:                    true,
	LabelZone:                  true,
	LabelRegion:                true,
	LabelWindowsBuild:          true,
	"topology.k8s.aws/zone-id": true,
}

// NormalizedLabels maps legacy label names to the ones Joiner uses.
var NormalizedLabels = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   LabelZone,
	"failure-domain.beta.kubernetes.io/region": LabelRegion,
	"beta.kubernetes.io/arch":                  LabelArch,
	"beta.kubernetes.io/os":                    LabelOS,
	"beta.kubernetes.io/instance-type":         LabelInstanceType,
}
