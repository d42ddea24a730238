// Package khash computes the drift hashes Karpenter v1.14 writes on
// NodeClaims (karpenter.sh/nodepool-hash, version v3, and
// karpenter.k8s.aws/ec2nodeclass-hash, version v5), so NodeClaims Karpenter
// launched are judged by the same numbers and are not drifted by a switch
// to Joiner.
//
// Karpenter hashes its Go structs with hashstructure v2 (FNV-64, slices as
// sets, zero values and nil pointers skipped). That hash reads struct type
// names, field names, field order and integer widths, so the types here
// mirror Karpenter's field for field; the API packages fill them. Fields
// Karpenter tags hash:"ignore" (requirements, selector terms, budgets) are
// left out: an ignored field adds nothing to the hash.
package khash

import (
	"fmt"
	"time"

	"github.com/mitchellh/hashstructure/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hash hashes v with Karpenter's options. The options are made anew for
// every call: hashstructure keeps its hasher in them, so options shared
// between goroutines would mix concurrent hashes.
func hash(v any) string {
	opts := &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true}
	h, err := hashstructure.Hash(v, hashstructure.FormatV2, opts)
	if err != nil { // only a field tagged "string" that is not a Stringer fails: none here
		panic(fmt.Sprintf("hashing %T: %v", v, err))
	}
	return fmt.Sprint(h)
}

// NodeClaimTemplate is karpenter.sh/v1 NodeClaimTemplate.
type NodeClaimTemplate struct {
	ObjectMeta
	Spec NodeClaimTemplateSpec
}

// ObjectMeta is the template's metadata.
type ObjectMeta struct {
	Labels      map[string]string
	Annotations map[string]string
}

// NodeClaimTemplateSpec is the template's spec without its requirements.
type NodeClaimTemplateSpec struct {
	Taints                 []corev1.Taint
	StartupTaints          []corev1.Taint
	NodeClassRef           *NodeClassReference
	TerminationGracePeriod *metav1.Duration
	ExpireAfter            NillableDuration
}

// NodeClassReference is karpenter.sh/v1 NodeClassReference.
type NodeClassReference struct {
	Kind  string
	Name  string
	Group string
}

// NillableDuration is karpenter.sh/v1 NillableDuration: nil for Never.
type NillableDuration struct {
	*time.Duration
}

// NodePool is the hash of a NodePool's template.
func NodePool(t NodeClaimTemplate) string { return hash(t) }

// EC2NodeClassSpec is karpenter.k8s.aws/v1 EC2NodeClassSpec without the
// fields Karpenter ignores (selector terms, ipPrefixCount, amiFamily).
type EC2NodeClassSpec struct {
	PlacementGroupSelector   *PlacementGroupSelector
	AssociatePublicIPAddress *bool
	UserData                 *string
	Role                     string
	InstanceProfile          *string
	Tags                     map[string]string
	Kubelet                  *KubeletConfiguration
	BlockDeviceMappings      []*BlockDeviceMapping
	InstanceStorePolicy      *string
	NetworkInterfaces        []*NetworkInterface
	DetailedMonitoring       *bool
	MetadataOptions          *MetadataOptions
	ConnectionTracking       *ConnectionTracking
	Context                  *string
	CPUOptions               *CPUOptions
}

// PlacementGroupSelector mirrors Karpenter's.
type PlacementGroupSelector struct {
	Name *string
	ID   *string
}

// KubeletConfiguration mirrors Karpenter's.
type KubeletConfiguration struct {
	ClusterDNS                  []string
	MaxPods                     *int32
	PodsPerCore                 *int32
	SystemReserved              map[string]string
	KubeReserved                map[string]string
	EvictionHard                map[string]string
	EvictionSoft                map[string]string
	EvictionSoftGracePeriod     map[string]metav1.Duration
	EvictionMaxPodGracePeriod   *int32
	ImageGCHighThresholdPercent *int32
	ImageGCLowThresholdPercent  *int32
	CPUCFSQuota                 *bool
}

// BlockDeviceMapping mirrors Karpenter's.
type BlockDeviceMapping struct {
	DeviceName *string
	EBS        *BlockDevice
	RootVolume bool
}

// BlockDevice mirrors Karpenter's; the volume size is hashed as its text.
type BlockDevice struct {
	DeleteOnTermination      *bool
	Encrypted                *bool
	IOPS                     *int64
	KMSKeyID                 *string
	SnapshotID               *string
	Throughput               *int64
	VolumeInitializationRate *int32
	VolumeSize               *resource.Quantity `hash:"string"`
	VolumeType               *string
}

// NetworkInterface mirrors Karpenter's.
type NetworkInterface struct {
	NetworkCardIndex int32
	DeviceIndex      int32
	InterfaceType    string
}

// MetadataOptions mirrors Karpenter's.
type MetadataOptions struct {
	HTTPEndpoint            *string
	HTTPProtocolIPv6        *string
	HTTPPutResponseHopLimit *int64
	HTTPTokens              *string
}

// ConnectionTracking mirrors Karpenter's.
type ConnectionTracking struct {
	TCPEstablishedTimeout *int32
	UDPStreamTimeout      *int32
	UDPTimeout            *int32
}

// CPUOptions mirrors Karpenter's.
type CPUOptions struct {
	NestedVirtualization *string
}

// EC2NodeClass is the hash of an EC2NodeClass: its spec, its AMI family
// (explicit, else the alias's, else Custom) and the cluster CA bundle the
// nodes are given.
func EC2NodeClass(spec EC2NodeClassSpec, amiFamily, caBundle string) string {
	return hash([]any{spec, amiFamily, caBundle})
}
