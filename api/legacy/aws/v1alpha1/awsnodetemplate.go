// Package v1alpha1 decodes the karpenter.k8s.aws/v1alpha1 AWSNodeTemplate and
// the inline AWS provider block of a v1alpha5 Provisioner. Decoding only.
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIVersion and Kind of the AWSNodeTemplate.
const (
	APIVersion = "karpenter.k8s.aws/v1alpha1"
	Kind       = "AWSNodeTemplate"
)

// Special selector keys of the v1alpha1 selector maps.
const (
	SelectorIDs       = "aws::ids"
	SelectorIDsLegacy = "aws-ids"
	SelectorName      = "aws::name"
	SelectorOwners    = "aws::owners"
)

// AWSNodeTemplate is a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate.
type AWSNodeTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AWSNodeTemplateSpec `json:"spec,omitempty"`
}

// AWSNodeTemplateSpec is the spec of an AWSNodeTemplate: the provider block
// plus user data, an AMI selector and detailed monitoring.
type AWSNodeTemplateSpec struct {
	Provider           `json:",inline"`
	UserData           *string           `json:"userData,omitempty"`
	AMISelector        map[string]string `json:"amiSelector,omitempty"`
	DetailedMonitoring *bool             `json:"detailedMonitoring,omitempty"`
}

// Provider is the v1alpha1 AWS block; a v1alpha5 Provisioner may carry it
// inline as spec.provider (with its own apiVersion and kind).
type Provider struct {
	metav1.TypeMeta       `json:",inline"`
	AMIFamily             *string               `json:"amiFamily,omitempty"`
	Context               *string               `json:"context,omitempty"`
	InstanceProfile       *string               `json:"instanceProfile,omitempty"`
	SubnetSelector        map[string]string     `json:"subnetSelector,omitempty"`
	SecurityGroupSelector map[string]string     `json:"securityGroupSelector,omitempty"`
	Tags                  map[string]string     `json:"tags,omitempty"`
	LaunchTemplateName    *string               `json:"launchTemplate,omitempty"`
	MetadataOptions       *MetadataOptions      `json:"metadataOptions,omitempty"`
	BlockDeviceMappings   []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
}

// MetadataOptions are the IMDS settings.
type MetadataOptions struct {
	HTTPEndpoint            *string `json:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        *string `json:"httpProtocolIPv6,omitempty"`
	HTTPPutResponseHopLimit *int64  `json:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping is one EBS volume.
type BlockDeviceMapping struct {
	DeviceName *string      `json:"deviceName,omitempty"`
	EBS        *BlockDevice `json:"ebs,omitempty"`
}

// BlockDevice is the EBS volume of a mapping.
type BlockDevice struct {
	DeleteOnTermination *bool              `json:"deleteOnTermination,omitempty"`
	Encrypted           *bool              `json:"encrypted,omitempty"`
	IOPS                *int64             `json:"iops,omitempty"`
	KMSKeyID            *string            `json:"kmsKeyID,omitempty"`
	SnapshotID          *string            `json:"snapshotID,omitempty"`
	Throughput          *int64             `json:"throughput,omitempty"`
	VolumeSize          *resource.Quantity `json:"volumeSize,omitempty"`
	VolumeType          *string            `json:"volumeType,omitempty"`
}
