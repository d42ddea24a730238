// Package v1 holds the karpenter.k8s.aws/v1 EC2NodeClass type, field for
// field compatible with Karpenter's AWS provider v1.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Group is the API group of EC2NodeClass.
const Group = "karpenter.k8s.aws"

// SchemeGroupVersion is karpenter.k8s.aws/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// EC2NodeClass holds the AWS settings of the nodes a NodePool launches.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EC2NodeClassSpec   `json:"spec"`
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is the desired configuration of EC2 instances.
type EC2NodeClassSpec struct {
	SubnetSelectorTerms        []SubnetSelectorTerm        `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	// +optional
	AssociatePublicIPAddress *bool             `json:"associatePublicIPAddress,omitempty"`
	AMISelectorTerms         []AMISelectorTerm `json:"amiSelectorTerms"`
	// AMIFamily: AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022,
	// Windows2025 (and Ubuntu, which Karpenter kept as a constant).
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`
	// +optional
	UserData *string `json:"userData,omitempty"`
	// +optional
	Role string `json:"role,omitempty"`
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// +optional
	Context *string `json:"context,omitempty"`
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or id.
type SubnetSelectorTerm struct {
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
type SecurityGroupSelectorTerm struct {
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects on-demand capacity reservations.
type CapacityReservationSelectorTerm struct {
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// AMISelectorTerm selects AMIs by alias, tags, id, name/owner or SSM parameter.
type AMISelectorTerm struct {
	// +optional
	Alias string `json:"alias,omitempty"`
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Owner string `json:"owner,omitempty"`
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// KubeletConfiguration is the kubelet block of an EC2NodeClass.
type KubeletConfiguration struct {
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// +optional
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// +optional
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// +optional
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// +optional
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// +optional
	EvictionSoftGracePeriod map[string]karpv1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// BlockDeviceMapping is one EBS volume attached at launch.
type BlockDeviceMapping struct {
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice is the EBS volume of a mapping.
type BlockDevice struct {
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// InstanceStorePolicy says how to use instance-store NVMe disks.
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 stripes instance-store disks into one volume for
// kubelet and containerd.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"

// MetadataOptions are the instance metadata service settings.
type MetadataOptions struct {
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// EC2NodeClassStatus is what Joiner resolved from the selectors.
type EC2NodeClassStatus struct {
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	ID     string `json:"id"`
	Zone   string `json:"zone"`
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// CapacityReservation is a resolved capacity reservation.
type CapacityReservation struct {
	AvailabilityZone      string       `json:"availabilityZone"`
	EndTime               *metav1.Time `json:"endTime,omitempty"`
	ID                    string       `json:"id"`
	InstanceMatchCriteria string       `json:"instanceMatchCriteria,omitempty"`
	InstanceType          string       `json:"instanceType"`
	OwnerID               string       `json:"ownerID"`
}

// AMI is a resolved image with the requirements it serves (e.g. arch).
type AMI struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// +optional
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
}

// AMI families.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyUbuntu       = "Ubuntu"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
	AMIFamilyCustom       = "Custom"
)

// EC2NodeClass condition types.
const (
	ConditionAMIsReady            = "AMIsReady"
	ConditionSubnetsReady         = "SubnetsReady"
	ConditionSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionInstanceProfileReady = "InstanceProfileReady"
	ConditionValidationSucceeded  = "ValidationSucceeded"
	ConditionReady                = "Ready"
)

// Well-known labels of the AWS provider.
const (
	LabelInstanceHypervisor                   = Group + "/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = Group + "/instance-encryption-in-transit-supported"
	LabelInstanceCategory                     = Group + "/instance-category"
	LabelInstanceFamily                       = Group + "/instance-family"
	LabelInstanceGeneration                   = Group + "/instance-generation"
	LabelInstanceLocalNVME                    = Group + "/instance-local-nvme"
	LabelInstanceSize                         = Group + "/instance-size"
	LabelInstanceCPU                          = Group + "/instance-cpu"
	LabelInstanceCPUManufacturer              = Group + "/instance-cpu-manufacturer"
	LabelInstanceMemory                       = Group + "/instance-memory"
	LabelInstanceEBSBandwidth                 = Group + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth             = Group + "/instance-network-bandwidth"
	LabelInstanceGPUName                      = Group + "/instance-gpu-name"
	LabelInstanceGPUManufacturer              = Group + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = Group + "/instance-gpu-count"
	LabelInstanceGPUMemory                    = Group + "/instance-gpu-memory"
	LabelInstanceAcceleratorName              = Group + "/instance-accelerator-name"
	LabelInstanceAcceleratorCount             = Group + "/instance-accelerator-count"
	LabelNodeClass                            = Group + "/ec2nodeclass"
	LabelTopologyZoneID                       = "topology.k8s.aws/zone-id"

	AnnotationEC2NodeClassHash        = Group + "/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion = Group + "/ec2nodeclass-hash-version"

	ResourceNVIDIAGPU corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU    corev1.ResourceName = "amd.com/gpu"
	ResourceAWSNeuron corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceAWSPodENI corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	ResourceEFA       corev1.ResourceName = "vpc.amazonaws.com/efa"
)

// WellKnownLabels of the AWS provider; requirements may use them.
var WellKnownLabels = map[string]bool{
	LabelInstanceHypervisor:                   true,
	LabelInstanceEncryptionInTransitSupported: true,
	LabelInstanceCategory:                     true,
	LabelInstanceFamily:                       true,
	LabelInstanceGeneration:                   true,
	LabelInstanceLocalNVME:                    true,
	LabelInstanceSize:                         true,
	LabelInstanceCPU:                          true,
	LabelInstanceCPUManufacturer:              true,
	LabelInstanceMemory:                       true,
	LabelInstanceEBSBandwidth:                 true,
	LabelInstanceNetworkBandwidth:             true,
	LabelInstanceGPUName:                      true,
	LabelInstanceGPUManufacturer:              true,
	LabelInstanceGPUCount:                     true,
	LabelInstanceGPUMemory:                    true,
	LabelInstanceAcceleratorName:              true,
	LabelInstanceAcceleratorCount:             true,
	LabelTopologyZoneID:                       true,
}
