package aws_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
	"github.com/joiner-dev/joiner/test/observe"
)

// This file ports the launch template contents pinned by Karpenter
// v1.14.1's pkg/providers/launchtemplate/suite_test.go and
// cpuoptions_test.go. Karpenter provisions a pod and reads the
// CreateLaunchTemplate/CreateFleet inputs; here a frozen launch spec (what
// coordinator/provisioner makes of the EC2NodeClass) is launched through
// the SDK into the simulated region, or turned into launch template data
// directly. The user data cases are ported in userdata, the ephemeral
// storage and overhead cases in cloud/catalog, the default block device
// mappings per family in coordinator/provisioner (TestDefaultBlockDevices).

// ltData is the launch template data Joiner writes for spec on an m5.large
// image in us-east-1, without EFA.
func ltData(spec cloud.LaunchSpec) *ec2types.RequestLaunchTemplateData {
	return joineraws.LaunchTemplateData(spec, "ami-0sim2023x86", 0, "us-east-1")
}

// TestLaunchTemplateDataTableAsKarpenter: cases that pin one field of the
// launch template data.
func TestLaunchTemplateDataTableAsKarpenter(t *testing.T) {
	kms := "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	io2 := func(size string) *awsv1.BlockDeviceMapping {
		return &awsv1.BlockDeviceMapping{DeviceName: ptr("/dev/xvda"), EBS: &awsv1.BlockDevice{DeleteOnTermination: ptr(true), Encrypted: ptr(true),
			VolumeType: ptr("io2"), VolumeSize: ptr(resource.MustParse(size)), IOPS: ptr(int64(10_000)), KMSKeyID: ptr(kms)}}
	}
	wantIO2 := func(gib int32) ec2types.LaunchTemplateEbsBlockDeviceRequest {
		return ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(gib), VolumeType: "io2", Iops: aws.Int32(10_000),
			DeleteOnTermination: aws.Bool(true), Encrypted: aws.Bool(true), KmsKeyId: aws.String(kms)}
	}
	ebsOf := func(d *ec2types.RequestLaunchTemplateData) []string {
		var out []string
		for _, m := range d.BlockDeviceMappings {
			out = append(out, aws.ToString(m.DeviceName)+"="+ebsString(m.Ebs))
		}
		return out
	}
	for _, tc := range []struct {
		karpenter string
		mutate    func(*cloud.LaunchSpec)
		check     func(t *testing.T, d *ec2types.RequestLaunchTemplateData)
	}{
		{"should use custom block device mapping", func(s *cloud.LaunchSpec) {
			second := io2("200Gi")
			second.DeviceName = ptr("/dev/xvdb")
			s.BlockDevices = []*awsv1.BlockDeviceMapping{io2("200G"), second}
		}, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			// 200G = 186.3GiB, rounded up.
			want := []string{"/dev/xvda=" + ebsString(ptr(wantIO2(187))), "/dev/xvdb=" + ebsString(ptr(wantIO2(200)))}
			if got := ebsOf(d); !slices.Equal(got, want) {
				t.Errorf("block devices %v, want %v", got, want)
			}
		}},
		{"should round up for custom block device mappings when specified in gigabytes", func(s *cloud.LaunchSpec) {
			second := io2("2G")
			second.DeviceName = ptr("/dev/xvdb")
			s.BlockDevices = []*awsv1.BlockDeviceMapping{io2("4G"), second}
		}, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if a, b := aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize), aws.ToInt32(d.BlockDeviceMappings[1].Ebs.VolumeSize); a != 4 || b != 2 {
				t.Errorf("sizes %d, %d GiB, want 4 and 2", a, b)
			}
		}},
		{"should use custom block device mapping for custom AMIFamilies", func(s *cloud.LaunchSpec) {
			s.BlockDevices = []*awsv1.BlockDeviceMapping{io2("40Gi")}
		}, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if got, want := ebsOf(d), []string{"/dev/xvda=" + ebsString(ptr(wantIO2(40)))}; !slices.Equal(got, want) {
				t.Errorf("block devices %v, want %v", got, want)
			}
		}},
		{"should not default block device mappings for custom AMIFamilies", func(s *cloud.LaunchSpec) { s.BlockDevices = nil },
			func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
				if len(d.BlockDeviceMappings) != 0 {
					t.Errorf("block devices %v, want none", ebsOf(d))
				}
			}},
		{"should use the instance profile on the EC2NodeClass when specified", func(s *cloud.LaunchSpec) { s.InstanceProfile = "overridden-profile" },
			func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
				if d.IamInstanceProfile == nil || aws.ToString(d.IamInstanceProfile.Name) != "overridden-profile" {
					t.Errorf("instance profile %+v", d.IamInstanceProfile)
				}
			}},
		{"should default detailed monitoring to off", nil, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.Monitoring == nil || aws.ToBool(d.Monitoring.Enabled) {
				t.Errorf("monitoring %+v, want disabled", d.Monitoring)
			}
		}},
		{"should pass detailed monitoring setting to the launch template at creation", func(s *cloud.LaunchSpec) { s.DetailedMonitoring = true },
			func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
				if d.Monitoring == nil || !aws.ToBool(d.Monitoring.Enabled) {
					t.Errorf("monitoring %+v, want enabled", d.Monitoring)
				}
			}},
		{"should set the default instance metadata settings on instances", nil, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			m := d.MetadataOptions
			if m.HttpEndpoint != "enabled" || m.HttpProtocolIpv6 != "disabled" || aws.ToInt32(m.HttpPutResponseHopLimit) != 1 || m.HttpTokens != "required" {
				t.Errorf("metadata options %+v, want endpoint enabled, IPv6 disabled, hop limit 1, tokens required", m)
			}
		}},
		{"should set instance metadata tags to disabled", nil, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.MetadataOptions.InstanceMetadataTags != "disabled" {
				t.Errorf("instance metadata tags %q", d.MetadataOptions.InstanceMetadataTags)
			}
		}},
		{"Tenancy: should set tenancy on launch template when not specified", nil, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.Placement == nil || d.Placement.Tenancy != ec2types.TenancyDefault {
				t.Errorf("placement %+v, want tenancy default", d.Placement)
			}
		}},
		{"Enclave Options: should default enclave options to disabled", nil, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			// Joiner sends no EnclaveOptions: EC2's default is disabled.
			if d.EnclaveOptions != nil && aws.ToBool(d.EnclaveOptions.Enabled) {
				t.Errorf("enclave options %+v", d.EnclaveOptions)
			}
		}},
		{"should set the capacity reservation specification according to the capacity reservation feature flag (enabled)", nil,
			func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
				if c := d.CapacityReservationSpecification; c == nil || c.CapacityReservationPreference != "none" || c.CapacityReservationTarget != nil {
					t.Errorf("capacity reservation specification %+v, want preference none", c)
				}
			}},
		// cpuoptions_test.go.
		{"cpuOptions: should return nil for nil input", nil, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.CpuOptions != nil {
				t.Errorf("cpu options %+v", d.CpuOptions)
			}
		}},
		{"cpuOptions: should return nil for empty CPUOptions", func(s *cloud.LaunchSpec) { s.CPUOptions = &awsv1.CPUOptions{} },
			func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
				if d.CpuOptions != nil {
					t.Errorf("cpu options %+v", d.CpuOptions)
				}
			}},
		{"cpuOptions: should set NestedVirtualization when enabled", func(s *cloud.LaunchSpec) {
			s.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr("enabled")}
		}, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.CpuOptions == nil || d.CpuOptions.NestedVirtualization != "enabled" {
				t.Errorf("cpu options %+v", d.CpuOptions)
			}
		}},
		{"cpuOptions: should set NestedVirtualization when disabled", func(s *cloud.LaunchSpec) {
			s.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr("disabled")}
		}, func(t *testing.T, d *ec2types.RequestLaunchTemplateData) {
			if d.CpuOptions == nil || d.CpuOptions.NestedVirtualization != "disabled" {
				t.Errorf("cpu options %+v", d.CpuOptions)
			}
		}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			s := cloud.LaunchSpec{NodeClass: "default", SecurityGroupIDs: []string{"sg-0sim0001"}}
			if tc.mutate != nil {
				tc.mutate(&s)
			}
			tc.check(t, ltData(s))
		})
	}
}

func ebsString(e *ec2types.LaunchTemplateEbsBlockDeviceRequest) string {
	if e == nil {
		return "<nil>"
	}
	return "size=" + strconv.Itoa(int(aws.ToInt32(e.VolumeSize))) + ",type=" + string(e.VolumeType) + ",iops=" + strconv.Itoa(int(aws.ToInt32(e.Iops))) +
		",delete=" + strconv.FormatBool(aws.ToBool(e.DeleteOnTermination)) + ",encrypted=" + strconv.FormatBool(aws.ToBool(e.Encrypted)) +
		",kms=" + aws.ToString(e.KmsKeyId) + ",throughput=" + strconv.Itoa(int(aws.ToInt32(e.Throughput))) + ",snapshot=" + aws.ToString(e.SnapshotId)
}

// TestNetworkInterfacesAsKarpenter: the "Public IP Association", "IP
// Prefix Delegation", "Networking" and "Network Interfaces" contexts: what
// each interface of the launch template carries.
func TestNetworkInterfacesAsKarpenter(t *testing.T) {
	fourNICs := []*awsv1.NetworkInterface{
		{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
		{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		{NetworkCardIndex: 1, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeInterface},
	}
	ct := &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr(int32(86400)), UDPStreamTimeout: ptr(int32(120)), UDPTimeout: ptr(int32(45))}
	type nic = ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest
	cases := []struct {
		karpenter string
		efa       int32
		mutate    func(*cloud.LaunchSpec)
		check     func(t *testing.T, nis []nic)
	}{}
	for _, e := range []struct {
		name     string
		set, efa bool
	}{{"AssociatePublicIPAddress is true", true, false}, {"AssociatePublicIPAddress is false", false, false},
		{"AssociatePublicIPAddress is true (EFA)", true, true}, {"AssociatePublicIPAddress is false (EFA)", false, true}} {
		cases = append(cases, struct {
			karpenter string
			efa       int32
			mutate    func(*cloud.LaunchSpec)
			check     func(t *testing.T, nis []nic)
		}{"should set 'AssociatePublicIPAddress' based on EC2NodeClass: " + e.name, map[bool]int32{true: 2}[e.efa],
			func(s *cloud.LaunchSpec) { s.AssociatePublicIPAddress = ptr(e.set) },
			func(t *testing.T, nis []nic) {
				if nis[0].AssociatePublicIpAddress == nil || *nis[0].AssociatePublicIpAddress != e.set {
					t.Errorf("AssociatePublicIpAddress %v, want %v", nis[0].AssociatePublicIpAddress, e.set)
				}
			}})
	}
	for _, n := range []int32{0, 1, 10, 100} {
		cases = append(cases, struct {
			karpenter string
			efa       int32
			mutate    func(*cloud.LaunchSpec)
			check     func(t *testing.T, nis []nic)
		}{"should set 'IPv4PrefixCount' based on EC2NodeClass: " + strconv.Itoa(int(n)), 0,
			func(s *cloud.LaunchSpec) { s.IPPrefixCount = ptr(n) },
			func(t *testing.T, nis []nic) {
				if nis[0].Ipv4PrefixCount == nil || *nis[0].Ipv4PrefixCount != n || nis[0].Ipv6PrefixCount != nil {
					t.Errorf("Ipv4PrefixCount %v, Ipv6PrefixCount %v, want %d IPv4", nis[0].Ipv4PrefixCount, nis[0].Ipv6PrefixCount, n)
				}
			}}, struct {
			karpenter string
			efa       int32
			mutate    func(*cloud.LaunchSpec)
			check     func(t *testing.T, nis []nic)
		}{"should set 'IPv6PrefixCount' based on EC2NodeClass: " + strconv.Itoa(int(n)), 0,
			func(s *cloud.LaunchSpec) { s.IPPrefixCount, s.ClusterIPv6 = ptr(n), true },
			func(t *testing.T, nis []nic) {
				if nis[0].Ipv6PrefixCount == nil || *nis[0].Ipv6PrefixCount != n || nis[0].Ipv4PrefixCount != nil {
					t.Errorf("Ipv6PrefixCount %v, Ipv4PrefixCount %v, want %d IPv6", nis[0].Ipv6PrefixCount, nis[0].Ipv4PrefixCount, n)
				}
			}})
	}
	for _, e := range []struct {
		name                 string
		isSet, public, isEFA bool
	}{{"AssociatePublicIPAddress is not set and EFA is false", false, true, false}, {"AssociatePublicIPAddress is not set and EFA is true", false, false, true},
		{"AssociatePublicIPAddress is set as true and EFA is true", true, true, true}, {"AssociatePublicIPAddress is set as false and EFA is false", true, false, false}} {
		cases = append(cases, struct {
			karpenter string
			efa       int32
			mutate    func(*cloud.LaunchSpec)
			check     func(t *testing.T, nis []nic)
		}{"should set Primary IPv6 as true and provision a IPv6 address: " + e.name, map[bool]int32{true: 2}[e.isEFA],
			func(s *cloud.LaunchSpec) {
				s.ClusterIPv6 = true
				if e.isSet {
					s.AssociatePublicIPAddress = ptr(e.public)
				}
			},
			func(t *testing.T, nis []nic) {
				n := nis[0]
				if !e.isSet && !e.isEFA && n.AssociatePublicIpAddress != nil {
					t.Errorf("AssociatePublicIpAddress %v, want unset", *n.AssociatePublicIpAddress)
				}
				if e.isEFA && (aws.ToString(n.InterfaceType) != "efa" || aws.ToBool(n.AssociatePublicIpAddress) != e.public) {
					t.Errorf("interface type %q, public IP %v", aws.ToString(n.InterfaceType), n.AssociatePublicIpAddress)
				}
				if aws.ToInt32(n.Ipv6AddressCount) != 1 || !aws.ToBool(n.PrimaryIpv6) {
					t.Errorf("Ipv6AddressCount %v, PrimaryIpv6 %v", n.Ipv6AddressCount, n.PrimaryIpv6)
				}
			}})
	}
	wantCT := func(tcp, stream, udp *int32) func(t *testing.T, nis []nic) {
		return func(t *testing.T, nis []nic) {
			c := nis[0].ConnectionTrackingSpecification
			if tcp == nil && stream == nil && udp == nil {
				if c != nil {
					t.Errorf("connection tracking %+v, want none", c)
				}
				return
			}
			if c == nil || !eqPtr(c.TcpEstablishedTimeout, tcp) || !eqPtr(c.UdpStreamTimeout, stream) || !eqPtr(c.UdpTimeout, udp) {
				t.Errorf("connection tracking %+v", c)
			}
		}
	}
	cases = append(cases, []struct {
		karpenter string
		efa       int32
		mutate    func(*cloud.LaunchSpec)
		check     func(t *testing.T, nis []nic)
	}{
		{"should set 'ConnectionTracking' based on EC2NodeClass: ConnectionTracking is nil", 0, nil, wantCT(nil, nil, nil)},
		{"should set 'ConnectionTracking' based on EC2NodeClass: ConnectionTracking with AWS defaults", 0, func(s *cloud.LaunchSpec) {
			s.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr(int32(432000)), UDPStreamTimeout: ptr(int32(180)), UDPTimeout: ptr(int32(30))}
		}, wantCT(ptr(int32(432000)), ptr(int32(180)), ptr(int32(30)))},
		{"should set 'ConnectionTracking' based on EC2NodeClass: ConnectionTracking with non-default TCP timeout", 0, func(s *cloud.LaunchSpec) {
			s.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr(int32(86400))}
		}, wantCT(ptr(int32(86400)), nil, nil)},
		{"should apply ConnectionTracking to every EFA ENI in the launch template", 2, func(s *cloud.LaunchSpec) { s.ConnectionTracking = ct },
			func(t *testing.T, nis []nic) {
				if len(nis) < 2 {
					t.Fatalf("%d interfaces, want the EFA count", len(nis))
				}
				for i, n := range nis {
					if aws.ToString(n.InterfaceType) != "efa" || n.ConnectionTrackingSpecification == nil ||
						aws.ToInt32(n.ConnectionTrackingSpecification.UdpTimeout) != 45 {
						t.Errorf("interface %d: type %q, connection tracking %+v", i, aws.ToString(n.InterfaceType), n.ConnectionTrackingSpecification)
					}
				}
			}},
		{"should apply ConnectionTracking to every user-configured NetworkInterface in the launch template except efa-only", 0, func(s *cloud.LaunchSpec) {
			s.ConnectionTracking, s.NetworkInterfaces = ct, fourNICs
		}, func(t *testing.T, nis []nic) {
			if len(nis) != 4 {
				t.Fatalf("%d interfaces, want 4", len(nis))
			}
			for i, n := range nis {
				if efaOnly := aws.ToString(n.InterfaceType) == "efa-only"; efaOnly != (n.ConnectionTrackingSpecification == nil) {
					t.Errorf("interface %d (%s): connection tracking %+v", i, aws.ToString(n.InterfaceType), n.ConnectionTrackingSpecification)
				}
			}
		}},
		// "should set network interfaces from the EC2NodeClass", entries
		// "when pod does not request EFA" and "when pod does request EFA":
		// the class's interfaces win over the EFA count.
		{"Network Interfaces: when pod does not request EFA", 0, func(s *cloud.LaunchSpec) { s.NetworkInterfaces = fourNICs }, checkFourNICs},
		{"Network Interfaces: when pod does request EFA", 2, func(s *cloud.LaunchSpec) { s.NetworkInterfaces = fourNICs }, checkFourNICs},
		{"should not set prefix count on EFA-only interfaces", 0, func(s *cloud.LaunchSpec) {
			s.IPPrefixCount = ptr(int32(2))
			s.NetworkInterfaces = []*awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
				{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
				{NetworkCardIndex: 1, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeInterface},
			}
		}, func(t *testing.T, nis []nic) {
			if len(nis) != 3 || aws.ToInt32(nis[0].Ipv4PrefixCount) != 2 || nis[1].Ipv4PrefixCount != nil || aws.ToInt32(nis[2].Ipv4PrefixCount) != 2 {
				t.Errorf("prefix counts %v %v %v", nis[0].Ipv4PrefixCount, nis[1].Ipv4PrefixCount, nis[len(nis)-1].Ipv4PrefixCount)
			}
		}},
		{"should not set Ipv6 specs on EFA-only interfaces", 0, func(s *cloud.LaunchSpec) {
			s.ClusterIPv6 = true
			s.NetworkInterfaces = []*awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
				{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
			}
		}, func(t *testing.T, nis []nic) {
			if len(nis) != 2 || !aws.ToBool(nis[0].PrimaryIpv6) || aws.ToInt32(nis[0].Ipv6AddressCount) != 1 ||
				aws.ToBool(nis[1].PrimaryIpv6) || nis[1].Ipv6AddressCount != nil {
				t.Errorf("interfaces %+v", nis)
			}
		}},
	}...)
	for _, tc := range cases {
		t.Run(tc.karpenter, func(t *testing.T) {
			s := cloud.LaunchSpec{NodeClass: "default", SecurityGroupIDs: []string{"sg-0sim0001"}}
			if tc.mutate != nil {
				tc.mutate(&s)
			}
			nis := joineraws.LaunchTemplateData(s, "ami-0sim2023x86", tc.efa, "us-east-1").NetworkInterfaces
			if len(nis) == 0 {
				t.Fatal("no network interfaces")
			}
			tc.check(t, nis)
		})
	}
}

func eqPtr(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func checkFourNICs(t *testing.T, nis []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
	t.Helper()
	want := []string{"0/0/interface", "0/1/efa-only", "1/0/efa-only", "1/1/interface"}
	if len(nis) != len(want) {
		t.Fatalf("%d interfaces, want %v", len(nis), want)
	}
	for i, n := range nis {
		got := strconv.Itoa(int(aws.ToInt32(n.NetworkCardIndex))) + "/" + strconv.Itoa(int(aws.ToInt32(n.DeviceIndex))) + "/" + aws.ToString(n.InterfaceType)
		if got != want[i] {
			t.Errorf("interface %d = %s, want %s", i, got, want[i])
		}
	}
}

// TestLaunchTemplateNamesAsKarpenter: the "Cache" context's name cases.
// Karpenter hashes its resolved launch template; Joiner names a template
// by the hash of its inputs (the rendered user data carries what
// Karpenter's bootstrap and kubelet options do: cluster name, endpoint,
// CIDR, CA bundle, DNS address, taints, labels, kubelet settings, custom
// user data, instance store policy).
func TestLaunchTemplateNamesAsKarpenter(t *testing.T) {
	base := cloud.LaunchSpec{NodePool: "default", NodeClass: "default", SecurityGroupIDs: []string{"sg-1"}, UserData: []byte("base")}
	name := func(cluster string, s cloud.LaunchSpec, image string, efa int32) string {
		return joineraws.LaunchTemplateName(cluster, s, image, efa)
	}
	baseName := name("c", base, "ami-1", 0)
	t.Run("should generate different launch template names based on amifamily option configuration", func(t *testing.T) {
		seen := map[string]string{baseName: "base"}
		for what, n := range map[string]string{
			"ClusterName": name("other", base, "ami-1", 0),
			"ClusterEndpoint, ClusterCIDR, KubeDNSIP, InstanceStorePolicy (user data)": name("c", with(base, func(s *cloud.LaunchSpec) { s.UserData = []byte("other endpoint") }), "ami-1", 0),
			"InstanceProfile":          name("c", with(base, func(s *cloud.LaunchSpec) { s.InstanceProfile = "test-profile" }), "ami-1", 0),
			"SecurityGroups":           name("c", with(base, func(s *cloud.LaunchSpec) { s.SecurityGroupIDs = []string{"sg-2"} }), "ami-1", 0),
			"Tags":                     name("c", with(base, func(s *cloud.LaunchSpec) { s.Tags = map[string]string{"test-key": "test-value"} }), "ami-1", 0),
			"AssociatePublicIPAddress": name("c", with(base, func(s *cloud.LaunchSpec) { s.AssociatePublicIPAddress = ptr(true) }), "ami-1", 0),
			"NodeClassName":            name("c", with(base, func(s *cloud.LaunchSpec) { s.NodeClass = "test-name" }), "ami-1", 0),
		} {
			if prev, ok := seen[n]; ok {
				t.Errorf("%s names the same template as %s", what, prev)
			}
			seen[n] = what
		}
	})
	t.Run("should generate different launch template names based on launchtemplate option configuration", func(t *testing.T) {
		seen := map[string]string{baseName: "base"}
		for what, n := range map[string]string{
			"BlockDeviceMappings": name("c", with(base, func(s *cloud.LaunchSpec) {
				s.BlockDevices = []*awsv1.BlockDeviceMapping{{DeviceName: ptr("test-block")}}
			}), "ami-1", 0),
			"AMIID":              name("c", base, "test-ami", 0),
			"DetailedMonitoring": name("c", with(base, func(s *cloud.LaunchSpec) { s.DetailedMonitoring = true }), "ami-1", 0),
			"EFACount":           name("c", base, "ami-1", 12),
			// CapacityType: TestLaunchTagsAsKarpenter (one template per capacity type).
		} {
			if prev, ok := seen[n]; ok {
				t.Errorf("%s names the same template as %s", what, prev)
			}
			seen[n] = what
		}
	})
	t.Run("should generate different launch template names based on kubelet and bootstrap configuration", func(t *testing.T) {
		// Each of Karpenter's kubelet and bootstrap options changes the
		// rendered user data; any user data change names another template.
		seen := map[string]bool{baseName: true}
		for i, ud := range []string{"kubeReserved", "systemReserved", "evictionHard", "evictionSoft", "maxPods", "taints", "labels", "caBundle", "containerRuntime", "customUserData"} {
			n := name("c", with(base, func(s *cloud.LaunchSpec) { s.UserData = []byte(ud) }), "ami-1", 0)
			if seen[n] {
				t.Errorf("user data %d (%s) names a template already named", i, ud)
			}
			seen[n] = true
		}
	})
	t.Run("should not generate different launch template names based on instance types (and what is not in the template)", func(t *testing.T) {
		s := with(base, func(s *cloud.LaunchSpec) {
			s.NodeClaim = "other-claim"
			s.Candidates = []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}
			s.Subnets = map[string]string{"us-east-1a": "subnet-1"}
			s.Context = "ctx"
		})
		if name("c", s, "ami-1", 0) != baseName {
			t.Error("instance types, subnets, the claim or the fleet context change the template name")
		}
	})
}

func with(s cloud.LaunchSpec, mutate func(*cloud.LaunchSpec)) cloud.LaunchSpec {
	s.Tags = maps.Clone(s.Tags)
	mutate(&s)
	return s
}

// TestLaunchTemplatesThroughFleetAsKarpenter: the cases that need a
// launch: which templates CreateFleet names, the tags, the cache.
func TestLaunchTemplatesThroughFleetAsKarpenter(t *testing.T) {
	ctx := context.Background()
	t.Run("should default to a generated launch template", func(t *testing.T) {
		e := newEnv(t)
		req := e.spec(t, "gen", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand"), cand("m5.xlarge", "us-east-1a", "on-demand")})
		req.Spec.BlockDevices = []*awsv1.BlockDeviceMapping{{DeviceName: ptr("/dev/xvda"), EBS: &awsv1.BlockDevice{Encrypted: ptr(true),
			VolumeType: ptr("gp3"), VolumeSize: ptr(resource.MustParse("20Gi"))}}}
		e.launch(t, req)
		fleet, _ := e.sim.LastRequest("CreateFleet")
		configs := fleet.Sub("LaunchTemplateConfigs")
		if len(configs) != e.sim.Calls("CreateLaunchTemplate") {
			t.Errorf("%d launch template configs, %d templates created", len(configs), e.sim.Calls("CreateLaunchTemplate"))
		}
		for _, c := range configs {
			if c.Get("LaunchTemplateSpecification.Version") != "$Latest" {
				t.Errorf("version %q, want $Latest", c.Get("LaunchTemplateSpecification.Version"))
			}
		}
		lt, _ := e.sim.LastRequest("CreateLaunchTemplate")
		if lt.Get("LaunchTemplateData.BlockDeviceMapping.1.Ebs.Encrypted") != "true" {
			t.Error("the root volume is not encrypted")
		}
	})
	t.Run("should create unique launch templates for multiple identical nodeClasses", func(t *testing.T) {
		e := newEnv(t)
		for _, class := range []string{"default", "default-2"} {
			req := e.spec(t, class, []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
			req.Spec.NodeClass = class
			e.launch(t, req)
			lt, _ := e.sim.LastRequest("CreateLaunchTemplate")
			if got := lt.Struct("LaunchTemplateData").TagSpecs("TagSpecification")["network-interface"]["karpenter.k8s.aws/ec2nodeclass"]; got != class {
				t.Errorf("template of %s tagged for %q", class, got)
			}
		}
		if n := len(e.sim.LaunchTemplateNames()); n != 2 {
			t.Errorf("%d launch templates, want one per class", n)
		}
	})
	t.Run("should use same launch template for equivalent constraints", func(t *testing.T) {
		e := newEnv(t)
		cands := []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}
		e.launch(t, e.spec(t, "a", cands))
		first, _ := e.sim.LastRequest("CreateFleet")
		e.launch(t, e.spec(t, "b", cands))
		second, _ := e.sim.LastRequest("CreateFleet")
		a, b := first.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName"), second.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName")
		if a == "" || a != b || e.sim.Calls("CreateLaunchTemplate") != 1 {
			t.Errorf("templates %q and %q, %d created", a, b, e.sim.Calls("CreateLaunchTemplate"))
		}
	})
	t.Run("should recover from an out-of-sync launch template cache", func(t *testing.T) {
		e := newEnv(t)
		cands := []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}
		e.launch(t, e.spec(t, "a", cands))
		// The template goes behind the provider's back (another leader's
		// clean-up): the next fleet fails once with
		// InvalidLaunchTemplateName.NotFoundException, then succeeds.
		for _, n := range e.sim.LaunchTemplateNames() {
			if _, err := e.clients().EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(n)}); err != nil {
				t.Fatal(err)
			}
		}
		e.launch(t, e.spec(t, "b", cands))
		if fleets, lts := e.sim.Calls("CreateFleet"), e.sim.Calls("CreateLaunchTemplate"); fleets != 3 || lts != 2 {
			t.Errorf("%d CreateFleet calls (want 3: one refused), %d templates created (want 2)", fleets, lts)
		}
	})
	t.Run("Tags: should request that tags be applied to both instances and volumes", func(t *testing.T) {
		e := newEnv(t)
		req := e.spec(t, "tags", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
		req.Spec.Tags = map[string]string{"tag1": "tag1value", "tag2": "tag2value"}
		e.launch(t, req)
		fleet, _ := e.sim.LastRequest("CreateFleet")
		specs := fleet.TagSpecs("TagSpecification")
		for _, kind := range []string{"instance", "volume", "fleet"} {
			if specs[kind]["tag1"] != "tag1value" || specs[kind]["tag2"] != "tag2value" {
				t.Errorf("%s tags %v", kind, specs[kind])
			}
		}
	})
	t.Run("Tags: should request that tags be applied to both network interfaces and spot instance requests", func(t *testing.T) {
		e := newEnv(t)
		req := e.spec(t, "spot", []cloud.Candidate{cand("m5.large", "us-east-1a", "spot")})
		req.Spec.Tags = map[string]string{"tag1": "tag1value", "tag2": "tag2value"}
		e.launch(t, req)
		lt, _ := e.sim.LastRequest("CreateLaunchTemplate")
		specs := lt.Struct("LaunchTemplateData").TagSpecs("TagSpecification")
		if len(specs) != 2 {
			t.Errorf("launch template data tags %d resource types, want network-interface and spot-instances-request", len(specs))
		}
		for _, kind := range []string{"network-interface", "spot-instances-request"} {
			if specs[kind]["tag1"] != "tag1value" || specs[kind]["tag2"] != "tag2value" {
				t.Errorf("%s tags %v", kind, specs[kind])
			}
		}
	})
	t.Run("Tags: should override default tag names", func(t *testing.T) {
		e := newEnv(t)
		req := e.spec(t, "name", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
		req.Spec.Tags = map[string]string{"Name": "myname"}
		e.launch(t, req)
		fleet, _ := e.sim.LastRequest("CreateFleet")
		for kind, tags := range fleet.TagSpecs("TagSpecification") {
			if tags["Name"] != "myname" {
				t.Errorf("%s tag Name = %q, want the class's myname", kind, tags["Name"])
			}
		}
	})
	t.Run("should set the capacity reservation specification according to the capacity reservation feature flag (disabled)", func(t *testing.T) {
		e := newEnv(t)
		e.provider = e.newProvider(t, joineraws.Options{KubernetesVersion: sim.DefaultKubernetesVersion, NoReservedCapacity: true})
		e.launch(t, e.spec(t, "gate-off", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")}))
		lt, _ := e.sim.LastRequest("CreateLaunchTemplate")
		if v := lt.Get("LaunchTemplateData.CapacityReservationSpecification.CapacityReservationPreference"); v != "" {
			t.Errorf("capacity reservation preference %q, want none sent (the gate is off)", v)
		}
	})
	t.Run("User Data: should record the rendered user data size, keyed by nodeclass", func(t *testing.T) {
		e := newEnv(t)
		reg := prometheus.NewRegistry()
		e.provider = e.newProvider(t, joineraws.Options{KubernetesVersion: sim.DefaultKubernetesVersion, Registerer: reg})
		req := e.spec(t, "ud", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
		e.launch(t, req)
		got, err := testutil.GatherAndCount(reg, "karpenter_ec2nodeclasses_userdata_bytes")
		if err != nil || got != 1 {
			t.Fatalf("%d series, %v: want one for the class", got, err)
		}
		if v, _ := observe.Sample(t, reg, "karpenter_ec2nodeclasses_userdata_bytes", map[string]string{"nodeclass": "default"}); v != float64(len(req.Spec.UserData)) {
			t.Errorf("userdata bytes %v, want the raw (not base64) size %d", v, len(req.Spec.UserData))
		}
		t.Run("should delete the user data gauge when the nodeclass launch templates are deleted", func(t *testing.T) {
			if err := e.provider.DeleteLaunchTemplatesFor(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			if n, _ := testutil.GatherAndCount(reg, "karpenter_ec2nodeclasses_userdata_bytes"); n != 0 {
				t.Errorf("%d series left, want none", n)
			}
		})
	})
}
