// Package v1beta1 decodes the karpenter.k8s.aws/v1beta1 EC2NodeClass
// (Karpenter v0.32 to v0.37). Decoding only; api/convert maps it to v1.
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/api/legacy/aws/v1alpha1"
)

// APIVersion and Kind of the v1beta1 EC2NodeClass.
const (
	APIVersion = "karpenter.k8s.aws/v1beta1"
	Kind       = "EC2NodeClass"
)

// EC2NodeClass is a karpenter.k8s.aws/v1beta1 EC2NodeClass.
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EC2NodeClassSpec `json:"spec,omitempty"`
}

// EC2NodeClassSpec is the spec of a v1beta1 EC2NodeClass.
type EC2NodeClassSpec struct {
	SubnetSelectorTerms        []SubnetSelectorTerm        `json:"subnetSelectorTerms,omitempty"`
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms,omitempty"`
	AssociatePublicIPAddress   *bool                       `json:"associatePublicIPAddress,omitempty"`
	AMISelectorTerms           []AMISelectorTerm           `json:"amiSelectorTerms,omitempty"`
	AMIFamily                  *string                     `json:"amiFamily,omitempty"`
	UserData                   *string                     `json:"userData,omitempty"`
	Role                       string                      `json:"role,omitempty"`
	InstanceProfile            *string                     `json:"instanceProfile,omitempty"`
	Tags                       map[string]string           `json:"tags,omitempty"`
	BlockDeviceMappings        []*BlockDeviceMapping       `json:"blockDeviceMappings,omitempty"`
	InstanceStorePolicy        *string                     `json:"instanceStorePolicy,omitempty"`
	DetailedMonitoring         *bool                       `json:"detailedMonitoring,omitempty"`
	MetadataOptions            *MetadataOptions            `json:"metadataOptions,omitempty"`
	Context                    *string                     `json:"context,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or id.
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
}

// AMISelectorTerm selects AMIs by tags, id, or name and owner.
type AMISelectorTerm struct {
	Tags  map[string]string `json:"tags,omitempty"`
	ID    string            `json:"id,omitempty"`
	Name  string            `json:"name,omitempty"`
	Owner string            `json:"owner,omitempty"`
}

// MetadataOptions are the IMDS settings, unchanged since v1alpha1.
type MetadataOptions = v1alpha1.MetadataOptions

// BlockDeviceMapping is one EBS volume; rootVolume marks the root disk.
type BlockDeviceMapping struct {
	DeviceName *string      `json:"deviceName,omitempty"`
	EBS        *BlockDevice `json:"ebs,omitempty"`
	RootVolume bool         `json:"rootVolume,omitempty"`
}

// BlockDevice is the EBS volume of a mapping, unchanged since v1alpha1.
type BlockDevice = v1alpha1.BlockDevice
