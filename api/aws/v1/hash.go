package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/api/internal/khash"
)

// EC2NodeClassHashVersion is the version of Hash's input, written beside
// the hash (karpenter.k8s.aws/ec2nodeclass-hash-version): Karpenter
// v1.14's.
const EC2NodeClassHashVersion = "v5"

// Hash is Karpenter v1.14's hash of the EC2NodeClass: the fields that shape
// an instance (not the subnet, security group, capacity reservation or AMI
// selector terms, which drift by what they resolve to, nor ipPrefixCount),
// the AMI family, and caBundle, the cluster CA bundle the nodes are given
// (base64 PEM, as in user data). A NodeClaim launched under another hash of
// the same version has drifted. The number equals Karpenter's.
func (in *EC2NodeClass) Hash(caBundle string) string {
	s := in.Spec
	spec := khash.EC2NodeClassSpec{
		AssociatePublicIPAddress: s.AssociatePublicIPAddress,
		UserData:                 s.UserData,
		Role:                     s.Role,
		InstanceProfile:          s.InstanceProfile,
		Tags:                     s.Tags,
		DetailedMonitoring:       s.DetailedMonitoring,
		Context:                  s.Context,
	}
	if p := s.PlacementGroupSelector; p != nil {
		spec.PlacementGroupSelector = &khash.PlacementGroupSelector{Name: p.Name, ID: p.ID}
	}
	if k := s.Kubelet; k != nil {
		spec.Kubelet = &khash.KubeletConfiguration{
			ClusterDNS: k.ClusterDNS, MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore,
			SystemReserved: k.SystemReserved, KubeReserved: k.KubeReserved,
			EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft,
			EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
			ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent, ImageGCLowThresholdPercent: k.ImageGCLowThresholdPercent,
			CPUCFSQuota: k.CPUCFSQuota,
		}
		if k.EvictionSoftGracePeriod != nil {
			spec.Kubelet.EvictionSoftGracePeriod = make(map[string]metav1.Duration, len(k.EvictionSoftGracePeriod))
			for sig, d := range k.EvictionSoftGracePeriod {
				var v metav1.Duration
				if d.Duration != nil {
					v.Duration = *d.Duration
				}
				spec.Kubelet.EvictionSoftGracePeriod[sig] = v
			}
		}
	}
	for _, m := range s.BlockDeviceMappings {
		if m == nil {
			spec.BlockDeviceMappings = append(spec.BlockDeviceMappings, nil)
			continue
		}
		bdm := &khash.BlockDeviceMapping{DeviceName: m.DeviceName, RootVolume: m.RootVolume}
		if e := m.EBS; e != nil {
			bdm.EBS = &khash.BlockDevice{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
				KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
				VolumeInitializationRate: e.VolumeInitializationRate, VolumeSize: e.VolumeSize, VolumeType: e.VolumeType}
		}
		spec.BlockDeviceMappings = append(spec.BlockDeviceMappings, bdm)
	}
	if p := s.InstanceStorePolicy; p != nil {
		v := string(*p)
		spec.InstanceStorePolicy = &v
	}
	for _, n := range s.NetworkInterfaces {
		if n == nil {
			spec.NetworkInterfaces = append(spec.NetworkInterfaces, nil)
			continue
		}
		spec.NetworkInterfaces = append(spec.NetworkInterfaces, &khash.NetworkInterface{
			NetworkCardIndex: n.NetworkCardIndex, DeviceIndex: n.DeviceIndex, InterfaceType: string(n.InterfaceType)})
	}
	if m := s.MetadataOptions; m != nil {
		spec.MetadataOptions = &khash.MetadataOptions{HTTPEndpoint: m.HTTPEndpoint, HTTPProtocolIPv6: m.HTTPProtocolIPv6,
			HTTPPutResponseHopLimit: m.HTTPPutResponseHopLimit, HTTPTokens: m.HTTPTokens}
	}
	if c := s.ConnectionTracking; c != nil {
		spec.ConnectionTracking = &khash.ConnectionTracking{TCPEstablishedTimeout: c.TCPEstablishedTimeout,
			UDPStreamTimeout: c.UDPStreamTimeout, UDPTimeout: c.UDPTimeout}
	}
	if c := s.CPUOptions; c != nil {
		spec.CPUOptions = &khash.CPUOptions{NestedVirtualization: c.NestedVirtualization}
	}
	return khash.EC2NodeClass(spec, in.AMIFamily(), caBundle)
}
