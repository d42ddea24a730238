package sim

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// ltParams is a CreateLaunchTemplate request with the given extra
// LaunchTemplateData parameters.
func ltParams(name string, data map[string]string) url.Values {
	v := url.Values{"Action": {"CreateLaunchTemplate"}, "LaunchTemplateName": {name},
		"LaunchTemplateData.ImageId": {"ami-0sim2023x86"}}
	for k, val := range data {
		v.Set("LaunchTemplateData."+k, val)
	}
	return v
}

// TestLaunchTemplateDataIsChecked: malformed launch template data is
// refused with EC2's codes (InvalidParameterValue for values out of the
// documented enums and ranges, InvalidGroup.NotFound, and
// InvalidParameterCombination for GroupName with GroupId).
func TestLaunchTemplateDataIsChecked(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	tests := []struct {
		data map[string]string
		code string
	}{
		{map[string]string{"NetworkInterface.1.InterfaceType": "efa-ish"}, "InvalidParameterValue"},
		{map[string]string{"NetworkInterface.1.DeviceIndex": "-1"}, "InvalidParameterValue"},
		{map[string]string{"NetworkInterface.1.Ipv4PrefixCount": "x"}, "InvalidParameterValue"},
		{map[string]string{"NetworkInterface.1.SecurityGroupId.1": "sg-0nope"}, "InvalidGroup.NotFound"},
		{map[string]string{"NetworkInterface.1.ConnectionTrackingSpecification.TcpEstablishedTimeout": "59"}, "InvalidParameterValue"},
		{map[string]string{"NetworkInterface.1.ConnectionTrackingSpecification.UdpStreamTimeout": "181"}, "InvalidParameterValue"},
		{map[string]string{"NetworkInterface.1.ConnectionTrackingSpecification.UdpTimeout": "29"}, "InvalidParameterValue"},
		{map[string]string{"CpuOptions.NestedVirtualization": "on"}, "InvalidParameterValue"},
		{map[string]string{"MetadataOptions.HttpProtocolIpv6": "yes"}, "InvalidParameterValue"},
		{map[string]string{"CapacityReservationSpecification.CapacityReservationPreference": "never"}, "InvalidParameterValue"},
		{map[string]string{"Placement.GroupId": "pg-0sim0001", "Placement.GroupName": "sim-cluster"}, "InvalidParameterCombination"},
		{map[string]string{"Placement.Tenancy": "shared"}, "InvalidParameterValue"},
	}
	for i, tc := range tests {
		code, body := call(t, h, ltParams("bad-"+string(rune('a'+i)), tc.data))
		if code != http.StatusBadRequest || errorCode(t, body) != tc.code {
			t.Errorf("%v: %d %s, want %s", tc.data, code, body, tc.code)
		}
	}
	good := map[string]string{
		"NetworkInterface.1.DeviceIndex": "0", "NetworkInterface.1.SecurityGroupId.1": "sg-0sim0001",
		"NetworkInterface.1.ConnectionTrackingSpecification.TcpEstablishedTimeout": "432000",
		"NetworkInterface.1.ConnectionTrackingSpecification.UdpTimeout":            "30",
		"CpuOptions.NestedVirtualization":                                          "disabled", "MetadataOptions.HttpProtocolIpv6": "enabled",
		"CapacityReservationSpecification.CapacityReservationPreference": "none", "Placement.GroupName": "sim-cluster",
	}
	if code, body := call(t, h, ltParams("good", good)); code != http.StatusOK {
		t.Errorf("valid data refused: %d %s", code, body)
	}
}

// launchWith creates a launch template from data and launches itype with
// it; it returns the fleet response and the sim.
func launchWith(t *testing.T, s *Sim, name, itype string, data map[string]string, extra url.Values) createFleetResponse {
	t.Helper()
	h := s.Handler()
	if code, body := call(t, h, ltParams(name, data)); code != http.StatusOK {
		t.Fatalf("CreateLaunchTemplate: %d %s", code, body)
	}
	p := fleetParams("tok-"+name, itype)
	p.Set("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName", name)
	for k, v := range extra {
		p[k] = v
	}
	code, body := call(t, h, p)
	if code != http.StatusOK {
		t.Fatalf("CreateFleet: %d %s", code, body)
	}
	var out createFleetResponse
	if err := xml.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLaunchChecksAgainstTheInstanceType: EC2 refuses, per override, what
// the type cannot do or what the interfaces break: interfaces with
// instance-level security groups, a public IP with several interfaces, no
// primary interface, a card the type lacks, EFA on a type without it,
// efa-only interfaces with prefixes, connection tracking on Xen, nested
// virtualization where unsupported, strategies the type lacks, an unknown
// group, and the eighth instance of a spread group in a zone.
func TestLaunchChecksAgainstTheInstanceType(t *testing.T) {
	tests := []struct {
		name, itype string
		data        map[string]string
		code        string
	}{
		{"interfaces and instance security groups", "m5.large", map[string]string{"SecurityGroupId.1": "sg-0sim0001",
			"NetworkInterface.1.DeviceIndex": "0"}, "InvalidParameterCombination"},
		{"public IP, two interfaces", "m5.large", map[string]string{"NetworkInterface.1.DeviceIndex": "0",
			"NetworkInterface.1.AssociatePublicIpAddress": "true", "NetworkInterface.2.DeviceIndex": "1"}, "InvalidParameterCombination"},
		{"no primary", "m5.large", map[string]string{"NetworkInterface.1.DeviceIndex": "1"}, "InvalidParameterValue"},
		{"duplicate", "m5.large", map[string]string{"NetworkInterface.1.DeviceIndex": "0", "NetworkInterface.2.DeviceIndex": "0"}, "InvalidParameterValue"},
		{"second card", "m5.large", map[string]string{"NetworkInterface.1.DeviceIndex": "0",
			"NetworkInterface.2.DeviceIndex": "0", "NetworkInterface.2.NetworkCardIndex": "1"}, "InvalidParameterValue"},
		{"efa on m5", "m5.large", map[string]string{"NetworkInterface.1.DeviceIndex": "0", "NetworkInterface.1.InterfaceType": "efa"}, "InvalidParameterCombination"},
		{"efa-only with prefixes", "c5n.18xlarge", map[string]string{"NetworkInterface.1.DeviceIndex": "0",
			"NetworkInterface.2.DeviceIndex": "1", "NetworkInterface.2.InterfaceType": "efa-only", "NetworkInterface.2.Ipv4PrefixCount": "1"}, "InvalidParameterValue"},
		{"too many prefixes", "m5.large", map[string]string{"NetworkInterface.1.DeviceIndex": "0", "NetworkInterface.1.Ipv4PrefixCount": "10"}, "InvalidParameterValue"},
		{"connection tracking on xen", "m4.large", map[string]string{"NetworkInterface.1.DeviceIndex": "0",
			"NetworkInterface.1.ConnectionTrackingSpecification.UdpTimeout": "30"}, "Unsupported"},
		{"nested virtualization on m5", "m5.large", map[string]string{"CpuOptions.NestedVirtualization": "enabled"}, "Unsupported"},
		{"t3 in a cluster group", "t3.large", map[string]string{"Placement.GroupName": "sim-cluster"}, "Unsupported"},
		{"unknown group", "m5.large", map[string]string{"Placement.GroupId": "pg-0nope"}, "InvalidPlacementGroup.Unknown"},
		{"partition of a cluster group", "m5.large", map[string]string{"Placement.GroupId": "pg-0sim0001", "Placement.PartitionNumber": "1"}, "InvalidParameterValue"},
		{"partition out of range", "m5.large", map[string]string{"Placement.GroupId": "pg-0sim0002", "Placement.PartitionNumber": "4"}, "InvalidParameterValue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Config: DefaultConfig()})
			out := launchWith(t, s, "lt", tc.itype, tc.data, nil)
			if len(out.Instances) != 0 || len(out.Errors) != 1 || out.Errors[0].Code != tc.code {
				t.Errorf("fleet: instances %v, errors %+v, want %s", out.Instances, out.Errors, tc.code)
			}
		})
	}
	s := New(Options{Config: DefaultConfig()})
	for i := range spreadLimit + 1 {
		out := launchWith(t, s, "spread"+string(rune('a'+i)), "m5.large", map[string]string{"Placement.GroupName": "sim-spread"}, nil)
		if i < spreadLimit && len(out.Instances) != 1 {
			t.Fatalf("spread instance %d: %+v", i+1, out.Errors)
		}
		if i == spreadLimit && (len(out.Errors) != 1 || out.Errors[0].Code != "InsufficientInstanceCapacity" ||
			!strings.Contains(out.Errors[0].Message, "limit of instances in this spread placement group")) {
			t.Errorf("eighth spread instance: %+v", out)
		}
	}
}

// TestInterfacesOnTypesWithoutENA: EC2 launches t2 (Xen, no ENA) with
// ordinary network interfaces in the launch template, of type interface
// or unset (Joiner and Karpenter always list them); it refuses EFA there.
func TestInterfacesOnTypesWithoutENA(t *testing.T) {
	for _, tc := range []struct {
		name, ifType, code string
	}{
		{"type unset", "", ""},
		{"interface", "interface", ""},
		{"efa", "efa", "InvalidParameterCombination"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string]string{"NetworkInterface.1.DeviceIndex": "0", "NetworkInterface.1.SecurityGroupId.1": "sg-0sim0001"}
			if tc.ifType != "" {
				data["NetworkInterface.1.InterfaceType"] = tc.ifType
			}
			out := launchWith(t, New(Options{Config: DefaultConfig()}), "lt", "t2.medium", data, nil)
			if tc.code == "" && (len(out.Instances) != 1 || len(out.Errors) != 0) {
				t.Errorf("fleet: instances %v, errors %+v, want t2.medium launched", out.Instances, out.Errors)
			}
			if tc.code != "" && (len(out.Instances) != 0 || len(out.Errors) != 1 || out.Errors[0].Code != tc.code) {
				t.Errorf("fleet: instances %v, errors %+v, want %s", out.Instances, out.Errors, tc.code)
			}
		})
	}
}

// TestInstanceRecordsItsLaunchTemplate: DescribeInstances shows what EC2
// would: the security groups of the primary interface (EC2 takes them from
// there when interfaces are given), no public IP unasked, every interface with
// its type, card and prefixes, the placement group and the partition EC2
// picked, nested virtualization, and the fleet's Context is kept.
func TestInstanceRecordsItsLaunchTemplate(t *testing.T) {
	s := New(Options{Config: DefaultConfig()})
	out := launchWith(t, s, "lt", "c6in.32xlarge", map[string]string{
		"NetworkInterface.1.DeviceIndex": "0", "NetworkInterface.1.NetworkCardIndex": "0", "NetworkInterface.1.InterfaceType": "interface",
		"NetworkInterface.1.SecurityGroupId.1": "sg-0sim0001",
		"NetworkInterface.1.Ipv4PrefixCount":   "2",
		"NetworkInterface.2.DeviceIndex":       "0", "NetworkInterface.2.NetworkCardIndex": "1", "NetworkInterface.2.InterfaceType": "efa-only",
		"NetworkInterface.2.SecurityGroupId.1": "sg-0sim0001", "Placement.GroupName": "sim-partition",
	}, url.Values{"Context": {"ctx-1"}})
	if len(out.Instances) != 1 {
		t.Fatalf("fleet errors %+v", out.Errors)
	}
	id := out.Instances[0].InstanceIDs[0]
	code, body := call(t, s.Handler(), url.Values{"Action": {"DescribeInstances"}, "InstanceId.1": {id}})
	if code != http.StatusOK {
		t.Fatalf("DescribeInstances: %d %s", code, body)
	}
	var d describeInstancesResponse
	if err := xml.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	in := d.Reservations[0].Instances[0]
	if len(in.Groups) != 1 || in.Groups[0].GroupID != "sg-0sim0001" || in.PublicIP != "" {
		t.Errorf("groups %+v, public IP %q", in.Groups, in.PublicIP)
	}
	if len(in.NetworkIfaces) != 2 || in.NetworkIfaces[1].InterfaceType != "efa-only" || in.NetworkIfaces[1].CardIndex != 1 ||
		len(in.NetworkIfaces[0].V4Prefixes) != 2 {
		t.Errorf("interfaces %+v", in.NetworkIfaces)
	}
	if p := in.Placement; p.GroupID != "pg-0sim0002" || p.GroupName != "sim-partition" || p.PartitionNumber < 1 || p.PartitionNumber > 3 {
		t.Errorf("placement %+v", p)
	}
	if got := s.instances[id].FleetContext; got != "ctx-1" {
		t.Errorf("fleet context %q", got)
	}
}

// TestDescribePlacementGroups: by name and id, the state filter, and
// InvalidPlacementGroup.Unknown for a name EC2 does not know.
func TestDescribePlacementGroups(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	code, body := call(t, h, url.Values{"Action": {"DescribePlacementGroups"}, "GroupName.1": {"sim-partition"},
		"Filter.1.Name": {"state"}, "Filter.1.Value.1": {"available"}})
	var out describePlacementGroupsResponse
	if err := xml.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil || len(out.Groups) != 1 ||
		out.Groups[0].GroupID != "pg-0sim0002" || out.Groups[0].Strategy != "partition" || out.Groups[0].PartitionCount != 3 {
		t.Errorf("by name: %d %s", code, body)
	}
	code, body = call(t, h, url.Values{"Action": {"DescribePlacementGroups"}, "GroupId.1": {"pg-0sim0001"},
		"Filter.1.Name": {"state"}, "Filter.1.Value.1": {"deleted"}})
	out = describePlacementGroupsResponse{}
	if err := xml.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil || len(out.Groups) != 0 {
		t.Errorf("state filter: %d %s", code, body)
	}
	code, body = call(t, h, url.Values{"Action": {"DescribePlacementGroups"}, "GroupName.1": {"nope"}})
	if code != http.StatusBadRequest || errorCode(t, body) != "InvalidPlacementGroup.Unknown" {
		t.Errorf("unknown: %d %s", code, body)
	}
}

// TestNodeRegistersEFA: an instance launched with EFA interfaces registers
// one vpc.amazonaws.com/efa per interface (as the EFA device plugin does),
// so claims that request EFA initialize.
func TestNodeRegistersEFA(t *testing.T) {
	s := New(Options{Config: DefaultConfig()})
	in := instance{ID: "i-0efa", Type: "c6in.32xlarge", Zone: "us-east-1a", NodeName: "n", ImageID: "ami-0sim2023x86",
		NIs: []netIface{{Type: "efa"}, {CardIndex: 1, DeviceIndex: 1, Type: "efa"}}}
	node, err := s.nodeFor(in)
	if err != nil {
		t.Fatal(err)
	}
	if q := node.Status.Allocatable[awsv1.ResourceEFA]; q.Value() != 2 {
		t.Errorf("allocatable vpc.amazonaws.com/efa = %s, want 2", q.String())
	}
	in.NIs = nil
	if node, _ = s.nodeFor(in); node.Status.Allocatable[awsv1.ResourceEFA] != (resource.Quantity{}) {
		t.Error("an instance without EFA interfaces registers vpc.amazonaws.com/efa")
	}
}

// TestNodePodsAsTheKubelet: a node's pod capacity is the lower of its
// kubelet's maxPods and podsPerCore x vCPUs, as the kubelet takes it.
func TestNodePodsAsTheKubelet(t *testing.T) {
	s := New(Options{Config: DefaultConfig()})
	nodeConfig := func(kubelet string) []byte {
		return []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n" + kubelet)
	}
	for _, tc := range []struct {
		name     string
		userData []byte
		want     int64
	}{
		{"maxPods", nodeConfig("      maxPods: 100\n"), 100},
		{"podsPerCore lower", nodeConfig("      maxPods: 100\n      podsPerCore: 2\n"), 4}, // m5.large: 2 vCPUs
		{"maxPods lower", nodeConfig("      maxPods: 3\n      podsPerCore: 2\n"), 3},
	} {
		in := instance{ID: "i-0pods", Type: "m5.large", Zone: "us-east-1a", NodeName: "n", ImageID: "ami-0sim2023x86", UserData: tc.userData}
		node, err := s.nodeFor(in)
		if err != nil {
			t.Fatal(err)
		}
		if q := node.Status.Allocatable[corev1.ResourcePods]; q.Value() != tc.want {
			t.Errorf("%s: allocatable pods %s, want %d", tc.name, q.String(), tc.want)
		}
	}
}
