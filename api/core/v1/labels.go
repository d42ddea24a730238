package v1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

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

	// TaintCloudProviderUninitializedKey is the cloud controller manager's
	// taint on a node it has not initialized yet.
	TaintCloudProviderUninitializedKey = "node.cloudprovider.kubernetes.io/uninitialized"

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

	// AnnotationBindCompleted marks a PersistentVolumeClaim the PV
	// controller has bound; kube-scheduler treats a claim with a
	// volumeName but without it as unbound.
	AnnotationBindCompleted = "pv.kubernetes.io/bind-completed"
	// ProvisionerAWSEBSInTree is the in-tree EBS plugin CSI migration maps
	// to the EBS CSI driver.
	ProvisionerAWSEBSInTree = "kubernetes.io/aws-ebs"
)

// Well-known labels and annotations of the AWS provider (karpenter.k8s.aws).
const (
	AWSGroup                                  = "karpenter.k8s.aws"
	LabelInstanceHypervisor                   = AWSGroup + "/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = AWSGroup + "/instance-encryption-in-transit-supported"
	LabelInstanceCategory                     = AWSGroup + "/instance-category"
	LabelInstanceCapabilityFlex               = AWSGroup + "/instance-capability-flex"
	LabelInstanceFamily                       = AWSGroup + "/instance-family"
	LabelInstanceGeneration                   = AWSGroup + "/instance-generation"
	LabelInstanceLocalNVME                    = AWSGroup + "/instance-local-nvme"
	LabelInstanceSize                         = AWSGroup + "/instance-size"
	LabelInstanceCPU                          = AWSGroup + "/instance-cpu"
	LabelInstanceCPUManufacturer              = AWSGroup + "/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeedMhz    = AWSGroup + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                       = AWSGroup + "/instance-memory"
	LabelInstanceEBSBandwidth                 = AWSGroup + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth             = AWSGroup + "/instance-network-bandwidth"
	LabelInstanceGPUName                      = AWSGroup + "/instance-gpu-name"
	LabelInstanceGPUManufacturer              = AWSGroup + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = AWSGroup + "/instance-gpu-count"
	LabelInstanceGPUMemory                    = AWSGroup + "/instance-gpu-memory"
	LabelInstanceAcceleratorName              = AWSGroup + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer      = AWSGroup + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount             = AWSGroup + "/instance-accelerator-count"
	LabelInstanceTenancy                      = AWSGroup + "/instance-tenancy"
	LabelCapacityReservationID                = AWSGroup + "/capacity-reservation-id"
	LabelCapacityReservationType              = AWSGroup + "/capacity-reservation-type"
	LabelCapacityReservationInterruptible     = AWSGroup + "/capacity-reservation-interruptible"
	LabelPlacementGroupID                     = AWSGroup + "/placement-group-id"
	LabelPlacementGroupPartition              = AWSGroup + "/placement-group-partition"
	LabelNodeClass                            = AWSGroup + "/ec2nodeclass"
	LabelTopologyZoneID                       = "topology.k8s.aws/zone-id"
	AnnotationEC2NodeClassHash                = AWSGroup + "/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion         = AWSGroup + "/ec2nodeclass-hash-version"
	// AnnotationInstanceProfile is the instance profile a NodeClaim's
	// instance launched with (Karpenter's cloudprovider.Create writes it):
	// instance profile garbage collection keeps the profiles NodeClaims
	// name.
	AnnotationInstanceProfile = AWSGroup + "/instance-profile-name"
	// NodeClassTerminationFinalizer holds an EC2NodeClass until no
	// NodeClaim uses it and its instance profiles and launch templates are
	// deleted.
	NodeClassTerminationFinalizer = AWSGroup + "/termination"
	// InstanceProfilePathRoot starts the IAM path of the instance profiles
	// made for spec.role: /karpenter/<region>/<cluster>/<class UID>/.
	InstanceProfilePathRoot = "karpenter"

	// Instance tenancies (karpenter.k8s.aws/instance-tenancy values).
	TenancyDefault   = "default"
	TenancyDedicated = "dedicated"
)

// Tags Karpenter and Joiner set on the EC2 resources they create.
const (
	TagName           = "Name"
	TagNodePool       = LabelNodePool
	TagNodeClaim      = Group + "/nodeclaim"
	TagNodeClass      = LabelNodeClass
	TagClusterPrefix  = "kubernetes.io/cluster/"
	TagEKSClusterName = "eks:eks-cluster-name"
)

// Joiner's own keys live under joiner.io/; every one is spelled here only.
const (
	JoinerDomain = "joiner.io"
	// AnnotationLaunchID on a NodeClaim names its raft launch intent;
	// NodeClaims without it are not Joiner's. The instance carries the
	// same key as a tag (TagLaunchID).
	AnnotationLaunchID = JoinerDomain + "/launch-id"
	TagLaunchID        = AnnotationLaunchID
	// TagAttempt is the launch attempt number of an instance.
	TagAttempt = JoinerDomain + "/attempt"
	// TagLaunchTemplateCluster tags Joiner's launch templates with the
	// cluster; LaunchTemplateNamePrefix starts their names.
	TagLaunchTemplateCluster = JoinerDomain + "/cluster"
	LaunchTemplateNamePrefix = JoinerDomain + "/"
	// AnnotationDisruptionReason on a NodeClaim says why Joiner deleted it.
	AnnotationDisruptionReason = JoinerDomain + "/disruption-reason"
	// AnnotationCustomLabels "true" on a NodeClaim Joiner made: it is
	// labelled for every custom requirement key, as Karpenter labels its
	// own (Joiner's NodeClaims from before carry only single-value In
	// keys, so a key they lack does not drift them).
	AnnotationCustomLabels = JoinerDomain + "/custom-labels"
	// AnnotationAgent on an EC2NodeClass: "false" leaves the agent's boot
	// hook out of the user data; "true" puts it in whatever the image (the
	// user vouches the image, or Bottlerocket's bootstrap container image,
	// runs "joiner bootstrap"); unset puts it in only for images tagged
	// TagJoinerAMI.
	AnnotationAgent = JoinerDomain + "/agent"
	// TagJoinerAMI "true" marks a Joiner-built image (packaging/packer):
	// it has the joiner binary and units, so its user data may call
	// "joiner bootstrap". Stock EKS images lack it.
	TagJoinerAMI = JoinerDomain + "/ami"
	// TaintInterruptionKey is the NoSchedule taint the agent puts on a
	// node with an interruption notice; ConditionInterruption is the Node
	// condition type that reports the notice.
	TaintInterruptionKey  = JoinerDomain + "/interruption"
	ConditionInterruption = JoinerDomain + "/Interruption"
	// AnnotationAgentHold on a Node records what the node agent put on it
	// (cordon, taints, the exclude-from-load-balancers label) and for which
	// notices, so that it takes off exactly that when they end or the node
	// rebooted (JSON, the agent's own).
	AnnotationAgentHold = JoinerDomain + "/agent-hold"
	// AnnotationSimInstance names the simulated instance behind a Node
	// that joiner sim registered; TagSimFamily tags the sim's images with
	// their AMI family.
	AnnotationSimInstance = JoinerDomain + "/sim-instance"
	TagSimFamily          = JoinerDomain + "/sim-family"
	// AgentTokenAudience is the audience of the projected ServiceAccount
	// token an agent sends the coordinator (verified by TokenReview).
	AgentTokenAudience = JoinerDomain
	// LabelManagedBy / ManagedByJoiner mark the objects Joiner creates for
	// itself (its CA Secret and ConfigMap).
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	ManagedByJoiner = "joiner"
)

// UserExtraNodeName is the user-info extra key in which the API server
// names the node of the pod a ServiceAccount token is bound to.
const UserExtraNodeName = "authentication.kubernetes.io/node-name"

// RestrictedLabelDomains are the label domains (and their subdomains) a
// NodePool may use only through WellKnownLabels (Karpenter's and the AWS
// provider's runtime validation). Since Karpenter v1.9 the kubernetes.io and
// k8s.io domains are not restricted.
var RestrictedLabelDomains = []string{Group, AWSGroup}

// RestrictedLabels may not be used by a NodePool at all.
var RestrictedLabels = []string{LabelHostname}

// ReservationLabels are the capacity reservation labels of a node launched
// into a reservation (with karpenter.sh/capacity-type reserved): they come
// with the launch, never from a NodeClaim's requirements.
var ReservationLabels = map[string]bool{
	LabelCapacityReservationID: true, LabelCapacityReservationType: true, LabelCapacityReservationInterruptible: true,
}

// ReservedCapacityLabels are the labels removed from a reserved node whose
// reservation ended when its capacity type turns on-demand (Karpenter's
// cloudprovider.ReservedCapacityLabels).
var ReservedCapacityLabels = []string{LabelCapacityReservationID, LabelCapacityReservationType}

// WellKnownLabels are the labels Karpenter (with the AWS provider) knows:
// a NodePool's template labels and requirement keys may use them although
// their domain is restricted. karpenter.k8s.aws/ec2nodeclass is not one of
// them (Karpenter sets it itself).
var WellKnownLabels = map[string]bool{
	LabelNodePool:                         true,
	LabelZone:                             true,
	LabelRegion:                           true,
	LabelInstanceType:                     true,
	LabelArch:                             true,
	LabelOS:                               true,
	LabelCapacityType:                     true,
	LabelWindowsBuild:                     true,
	LabelCapacityReservationID:            true,
	LabelCapacityReservationType:          true,
	LabelCapacityReservationInterruptible: true,
	LabelInstanceHypervisor:               true,
	LabelInstanceEncryptionInTransitSupported: true,
	LabelInstanceCategory:                     true,
	LabelInstanceCapabilityFlex:               true,
	LabelInstanceFamily:                       true,
	LabelInstanceGeneration:                   true,
	LabelInstanceSize:                         true,
	LabelInstanceLocalNVME:                    true,
	LabelInstanceCPU:                          true,
	LabelInstanceCPUManufacturer:              true,
	LabelInstanceCPUSustainedClockSpeedMhz:    true,
	LabelInstanceMemory:                       true,
	LabelInstanceEBSBandwidth:                 true,
	LabelInstanceNetworkBandwidth:             true,
	LabelInstanceGPUName:                      true,
	LabelInstanceGPUManufacturer:              true,
	LabelInstanceGPUCount:                     true,
	LabelInstanceGPUMemory:                    true,
	LabelInstanceAcceleratorName:              true,
	LabelInstanceAcceleratorManufacturer:      true,
	LabelInstanceAcceleratorCount:             true,
	LabelTopologyZoneID:                       true,
	LabelInstanceTenancy:                      true,
	LabelPlacementGroupID:                     true,
	LabelPlacementGroupPartition:              true,
}

// AWSProviderLabels are the karpenter.k8s.aws labels the CRDs let template
// labels and requirement keys use (the AWS provider's hack/validation
// lists): the provider's well-known labels and the node class label.
var AWSProviderLabels = awsProviderLabels()

func awsProviderLabels() map[string]bool {
	out := map[string]bool{LabelNodeClass: true}
	for k := range WellKnownLabels {
		if strings.HasPrefix(k, AWSGroup+"/") {
			out[k] = true
		}
	}
	return out
}

// WellKnownValues are the values Karpenter knows for some well-known labels:
// a NodePool requirement "In" on such a label needs at least one of them
// (and at least minValues of them).
var WellKnownValues = map[string][]string{
	LabelCapacityType:    {CapacityTypeOnDemand, CapacityTypeSpot, CapacityTypeReserved},
	LabelInstanceTenancy: {TenancyDedicated, TenancyDefault},
}

// NormalizedLabels maps legacy label names to the ones Joiner uses.
var NormalizedLabels = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   LabelZone,
	"failure-domain.beta.kubernetes.io/region": LabelRegion,
	"beta.kubernetes.io/arch":                  LabelArch,
	"beta.kubernetes.io/os":                    LabelOS,
	"beta.kubernetes.io/instance-type":         LabelInstanceType,
}

// ephemeralTaints are the taints Kubernetes and Karpenter put on a node
// while it comes up (Karpenter's KnownEphemeralTaints, matched by key and
// effect), and ephemeralTaintPrefixes the key prefixes of taint families
// that go the same way (the Node Readiness Controller's
// readiness.k8s.io/<rule>).
var (
	ephemeralTaints = []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: TaintCloudProviderUninitializedKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: TaintUnregisteredKey, Effect: corev1.TaintEffectNoExecute},
	}
	ephemeralTaintPrefixes = []string{"readiness.k8s.io/"}
)

// IsKnownEphemeralTaint reports whether t is one a node has while it comes
// up (Karpenter's IsKnownEphemeralTaint): a node is not initialized while it
// has one, and the scheduler ignores them (and the NodeClaim's startup
// taints) on a node that is not initialized yet, since they will go.
func IsKnownEphemeralTaint(t corev1.Taint) bool {
	for i := range ephemeralTaints {
		if ephemeralTaints[i].MatchTaint(&t) {
			return true
		}
	}
	for _, p := range ephemeralTaintPrefixes {
		if strings.HasPrefix(t.Key, p) {
			return true
		}
	}
	return false
}
