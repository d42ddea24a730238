package aws_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
)

func ptr[T any](v T) *T { return &v }

// TestLaunchTemplateDataAsKarpenterWritesIt launches specs carrying each
// EC2NodeClass launch field through the real SDK into the sim and checks
// the Query parameters CreateLaunchTemplate and CreateFleet carried (the
// names EC2 documents) and what DescribeInstances shows of the instance.
// Each case pins what Karpenter v1.14.1's launchtemplate and instance
// providers send for the same class.
func TestLaunchTemplateDataAsKarpenterWritesIt(t *testing.T) {
	const lt = "LaunchTemplateData."
	tests := []struct {
		name string
		// karpenter is the behaviour pinned.
		karpenter string
		itype     string
		mutate    func(*cloud.LaunchSpec, *cloud.Candidate)
		want      map[string]string // parameters of CreateLaunchTemplate ("" = absent)
		fleet     map[string]string // parameters of CreateFleet
		check     func(t *testing.T, e *env, id string)
	}{
		{
			name:      "defaults",
			karpenter: "one primary interface carries the security groups (never SecurityGroupIds beside it); capacity reservation preference none; tenancy default; the family's metadata options (IPv6 endpoint disabled)",
			want: map[string]string{
				lt + "NetworkInterface.1.DeviceIndex": "0", lt + "NetworkInterface.1.SecurityGroupId.1": "sg-0sim0001",
				lt + "NetworkInterface.1.NetworkCardIndex": "", lt + "NetworkInterface.1.AssociatePublicIpAddress": "",
				lt + "NetworkInterface.1.Ipv4PrefixCount": "", lt + "SecurityGroupId.1": "", lt + "NetworkInterface.2.DeviceIndex": "",
				lt + "CapacityReservationSpecification.CapacityReservationPreference": "none", lt + "Placement.Tenancy": "default",
				lt + "Placement.GroupId": "", lt + "CpuOptions.NestedVirtualization": "", lt + "MetadataOptions.HttpProtocolIpv6": "disabled",
			},
			fleet: map[string]string{"Context": ""},
			check: func(t *testing.T, e *env, id string) {
				inst, err := e.provider.Get(context.Background(), id)
				if err != nil || !slices.Equal(inst.SecurityGroupIDs, []string{"sg-0sim0001"}) {
					t.Errorf("instance security groups %v, %v: want the primary interface's", inst.SecurityGroupIDs, err)
				}
			},
		},
		{
			name:      "associatePublicIPAddress, ipPrefixCount, connectionTracking",
			karpenter: "all three go on the primary interface",
			mutate: func(s *cloud.LaunchSpec, _ *cloud.Candidate) {
				s.AssociatePublicIPAddress, s.IPPrefixCount = ptr(true), ptr(int32(2))
				s.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr(int32(3600)), UDPTimeout: ptr(int32(45))}
			},
			want: map[string]string{
				lt + "NetworkInterface.1.AssociatePublicIpAddress": "true", lt + "NetworkInterface.1.Ipv4PrefixCount": "2",
				lt + "NetworkInterface.1.ConnectionTrackingSpecification.TcpEstablishedTimeout": "3600",
				lt + "NetworkInterface.1.ConnectionTrackingSpecification.UdpTimeout":            "45",
				lt + "NetworkInterface.1.ConnectionTrackingSpecification.UdpStreamTimeout":      "",
			},
			check: func(t *testing.T, e *env, id string) {
				in := describe(t, e, id)
				if aws.ToString(in.PublicIpAddress) == "" || len(in.NetworkInterfaces) != 1 || len(in.NetworkInterfaces[0].Ipv4Prefixes) != 2 {
					t.Errorf("instance: public IP %q, interfaces %+v", aws.ToString(in.PublicIpAddress), in.NetworkInterfaces)
				}
				if ct := in.NetworkInterfaces[0].ConnectionTrackingConfiguration; ct == nil || aws.ToInt32(ct.TcpEstablishedTimeout) != 3600 {
					t.Errorf("connection tracking %+v", ct)
				}
			},
		},
		{
			name:      "associatePublicIPAddress false",
			karpenter: "an explicit false is sent, not left to the subnet's default",
			mutate:    func(s *cloud.LaunchSpec, _ *cloud.Candidate) { s.AssociatePublicIPAddress = ptr(false) },
			want:      map[string]string{lt + "NetworkInterface.1.AssociatePublicIpAddress": "false"},
		},
		{
			name:      "networkInterfaces with an EFA-only interface",
			karpenter: "one interface per entry with its card, device and type; the efa-only one gets the security groups but no prefixes, public IP or connection tracking",
			itype:     "c6in.32xlarge",
			mutate: func(s *cloud.LaunchSpec, _ *cloud.Candidate) {
				s.NetworkInterfaces = []*awsv1.NetworkInterface{
					{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
					{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
				}
				s.IPPrefixCount = ptr(int32(1))
				s.ConnectionTracking = &awsv1.ConnectionTracking{UDPStreamTimeout: ptr(int32(120))}
			},
			want: map[string]string{
				lt + "NetworkInterface.1.InterfaceType": "interface", lt + "NetworkInterface.1.NetworkCardIndex": "0",
				lt + "NetworkInterface.1.DeviceIndex": "0", lt + "NetworkInterface.1.Ipv4PrefixCount": "1",
				lt + "NetworkInterface.1.ConnectionTrackingSpecification.UdpStreamTimeout": "120",
				lt + "NetworkInterface.2.InterfaceType":                                    "efa-only", lt + "NetworkInterface.2.NetworkCardIndex": "1",
				lt + "NetworkInterface.2.DeviceIndex": "0", lt + "NetworkInterface.2.SecurityGroupId.1": "sg-0sim0001",
				lt + "NetworkInterface.2.Ipv4PrefixCount": "", lt + "NetworkInterface.2.AssociatePublicIpAddress": "",
				lt + "NetworkInterface.2.ConnectionTrackingSpecification.UdpStreamTimeout": "",
			},
			check: func(t *testing.T, e *env, id string) {
				in := describe(t, e, id)
				if len(in.NetworkInterfaces) != 2 || aws.ToString(in.NetworkInterfaces[1].InterfaceType) != "efa-only" {
					t.Errorf("interfaces %+v", in.NetworkInterfaces)
				}
			},
		},
		{
			name:      "EFA requested, no networkInterfaces",
			karpenter: "the type's EFA count of efa interfaces: card i, device 0 on card 0 and 1 elsewhere, each with the security groups",
			itype:     "c6in.32xlarge",
			mutate:    func(_ *cloud.LaunchSpec, c *cloud.Candidate) { c.EFACount = 2 },
			want: map[string]string{
				lt + "NetworkInterface.1.InterfaceType": "efa", lt + "NetworkInterface.1.NetworkCardIndex": "0", lt + "NetworkInterface.1.DeviceIndex": "0",
				lt + "NetworkInterface.2.InterfaceType": "efa", lt + "NetworkInterface.2.NetworkCardIndex": "1", lt + "NetworkInterface.2.DeviceIndex": "1",
				lt + "NetworkInterface.2.SecurityGroupId.1": "sg-0sim0001", lt + "NetworkInterface.3.InterfaceType": "",
			},
		},
		{
			name:      "cpuOptions.nestedVirtualization",
			karpenter: "CpuOptions.NestedVirtualization as the class says",
			itype:     "m8i.large",
			mutate: func(s *cloud.LaunchSpec, _ *cloud.Candidate) {
				s.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr("enabled")}
			},
			want: map[string]string{lt + "CpuOptions.NestedVirtualization": "enabled"},
			check: func(t *testing.T, e *env, id string) {
				if in := describe(t, e, id); in.CpuOptions == nil || in.CpuOptions.NestedVirtualization != "enabled" {
					t.Errorf("cpu options %+v", in.CpuOptions)
				}
			},
		},
		{
			name:      "metadataOptions.httpProtocolIPv6",
			karpenter: "MetadataOptions.HttpProtocolIpv6 as the class says",
			mutate: func(s *cloud.LaunchSpec, _ *cloud.Candidate) {
				s.MetadataOptions = &awsv1.MetadataOptions{HTTPEndpoint: ptr("enabled"), HTTPProtocolIPv6: ptr("enabled"),
					HTTPPutResponseHopLimit: ptr(int64(2)), HTTPTokens: ptr("required")}
			},
			want: map[string]string{lt + "MetadataOptions.HttpProtocolIpv6": "enabled", lt + "MetadataOptions.HttpPutResponseHopLimit": "2",
				lt + "MetadataOptions.InstanceMetadataTags": "disabled"},
		},
		{
			name:      "context",
			karpenter: "CreateFleet Context is the class's context",
			mutate:    func(s *cloud.LaunchSpec, _ *cloud.Candidate) { s.Context = "ctx-0123" },
			fleet:     map[string]string{"Context": "ctx-0123"},
		},
		{
			name:      "placement group, partition",
			karpenter: "Placement.GroupId of the resolved group and the partition picked from the claim's requirements",
			mutate: func(s *cloud.LaunchSpec, _ *cloud.Candidate) {
				s.PlacementGroupID, s.PlacementGroupPartition = "pg-0sim0002", 2
			},
			want: map[string]string{lt + "Placement.GroupId": "pg-0sim0002", lt + "Placement.PartitionNumber": "2", lt + "Placement.GroupName": ""},
			check: func(t *testing.T, e *env, id string) {
				in := describe(t, e, id)
				if p := in.Placement; aws.ToString(p.GroupId) != "pg-0sim0002" || aws.ToString(p.GroupName) != "sim-partition" || aws.ToInt32(p.PartitionNumber) != 2 {
					t.Errorf("placement %+v", p)
				}
			},
		},
		{
			name:      "IPv6 cluster",
			karpenter: "ipPrefixCount counts IPv6 prefixes, and the interface gets a primary IPv6 address and one IPv6 address",
			mutate:    func(s *cloud.LaunchSpec, _ *cloud.Candidate) { s.ClusterIPv6, s.IPPrefixCount = true, ptr(int32(1)) },
			want: map[string]string{lt + "NetworkInterface.1.Ipv6PrefixCount": "1", lt + "NetworkInterface.1.Ipv4PrefixCount": "",
				lt + "NetworkInterface.1.PrimaryIpv6": "true", lt + "NetworkInterface.1.Ipv6AddressCount": "1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			itype := tc.itype
			if itype == "" {
				itype = "m5.large"
			}
			c := cand(itype, "us-east-1a", "on-demand")
			req := e.spec(t, "x", nil)
			if tc.mutate != nil {
				tc.mutate(&req.Spec, &c)
			}
			req.Spec.Candidates = []cloud.Candidate{c}
			inst, err := e.provider.Launch(context.Background(), req)
			if err != nil {
				t.Fatalf("%s: %v", tc.karpenter, err)
			}
			got, _ := e.sim.LastRequest("CreateLaunchTemplate")
			for k, v := range tc.want {
				if g := got.Get(k); g != v {
					t.Errorf("%s: %s = %q, want %q", tc.karpenter, k, g, v)
				}
			}
			fleet, _ := e.sim.LastRequest("CreateFleet")
			for k, v := range tc.fleet {
				if g := fleet.Get(k); g != v {
					t.Errorf("%s: CreateFleet %s = %q, want %q", tc.karpenter, k, g, v)
				}
			}
			if tc.check != nil {
				tc.check(t, e, inst.ID)
			}
		})
	}
}

func describe(t *testing.T, e *env, id string) ec2types.Instance {
	t.Helper()
	c := e.clients().EC2
	out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("DescribeInstances %s: %v", id, err)
	}
	return out.Reservations[0].Instances[0]
}

// TestLaunchTemplateNameCoversEveryInput: a launch template is shared only
// by launches whose every input is equal, so changing any of the new
// inputs names another template.
func TestLaunchTemplateNameCoversEveryInput(t *testing.T) {
	base := cloud.LaunchSpec{NodeClass: "default", SecurityGroupIDs: []string{"sg-1"}}
	name := joineraws.LaunchTemplateName("c", base, "ami-1", 0)
	for what, mutate := range map[string]func(*cloud.LaunchSpec){
		"associatePublicIPAddress": func(s *cloud.LaunchSpec) { s.AssociatePublicIPAddress = ptr(false) },
		"ipPrefixCount":            func(s *cloud.LaunchSpec) { s.IPPrefixCount = ptr(int32(1)) },
		"networkInterfaces": func(s *cloud.LaunchSpec) {
			s.NetworkInterfaces = []*awsv1.NetworkInterface{{InterfaceType: awsv1.InterfaceTypeInterface}}
		},
		"connectionTracking": func(s *cloud.LaunchSpec) {
			s.ConnectionTracking = &awsv1.ConnectionTracking{UDPTimeout: ptr(int32(30))}
		},
		"cpuOptions":         func(s *cloud.LaunchSpec) { s.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr("disabled")} },
		"clusterIPv6":        func(s *cloud.LaunchSpec) { s.ClusterIPv6 = true },
		"placementGroup":     func(s *cloud.LaunchSpec) { s.PlacementGroupID = "pg-1" },
		"placementPartition": func(s *cloud.LaunchSpec) { s.PlacementGroupID, s.PlacementGroupPartition = "", 1 },
		"httpProtocolIPv6": func(s *cloud.LaunchSpec) {
			s.MetadataOptions = &awsv1.MetadataOptions{HTTPProtocolIPv6: ptr("enabled")}
		},
	} {
		s := base
		mutate(&s)
		if joineraws.LaunchTemplateName("c", s, "ami-1", 0) == name {
			t.Errorf("%s does not change the launch template name", what)
		}
	}
	if joineraws.LaunchTemplateName("c", base, "ami-1", 2) == name {
		t.Error("the EFA count does not change the launch template name")
	}
	// The fleet context is CreateFleet's, not the template's.
	s := base
	s.Context = "ctx"
	if joineraws.LaunchTemplateName("c", s, "ami-1", 0) != name {
		t.Error("the context changes the launch template name")
	}
}

// TestLaunchTemplateDataInIsolatedRegions: Karpenter leaves
// httpProtocolIPv6 out in regions whose IMDS has no IPv6 endpoint.
func TestLaunchTemplateDataInIsolatedRegions(t *testing.T) {
	s := cloud.LaunchSpec{MetadataOptions: &awsv1.MetadataOptions{HTTPProtocolIPv6: ptr("enabled")}}
	if got := joineraws.LaunchTemplateData(s, "ami-1", 0, "us-iso-east-1").MetadataOptions.HttpProtocolIpv6; got != "" {
		t.Errorf("us-iso-east-1: HttpProtocolIpv6 = %q, want unset", got)
	}
	if got := joineraws.LaunchTemplateData(s, "ami-1", 0, "us-east-1").MetadataOptions.HttpProtocolIpv6; got != "enabled" {
		t.Errorf("us-east-1: HttpProtocolIpv6 = %q, want enabled", got)
	}
}

// TestLaunchesEC2Refuses: what EC2 refuses for a spec comes back as an
// invalid spec; an instance type EC2 answers Unsupported for is an
// unavailable offering, as Karpenter counts that code (Karpenter filters
// such types out before launch; see TestInstanceTypesCompatibleWithTheClass).
func TestLaunchesEC2Refuses(t *testing.T) {
	e := newEnv(t)
	req := e.spec(t, "nv", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
	req.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr("enabled")}
	if _, err := e.provider.Launch(context.Background(), req); !errors.Is(err, cloud.ErrInsufficientCapacity) {
		t.Errorf("nested virtualization on m5.large: Launch = %v, want ErrInsufficientCapacity", err)
	}
	for name, mutate := range map[string]func(*cloud.LaunchSpec){
		"public IP with two interfaces": func(s *cloud.LaunchSpec) {
			s.AssociatePublicIPAddress = ptr(true)
			s.NetworkInterfaces = []*awsv1.NetworkInterface{{InterfaceType: awsv1.InterfaceTypeInterface},
				{DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeInterface}}
		},
		"unknown placement group":            func(s *cloud.LaunchSpec) { s.PlacementGroupID = "pg-0nope" },
		"a user data variant the spec lacks": func(s *cloud.LaunchSpec) { s.Candidates[0].UserDataVariant = 1 },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			req := e.spec(t, "x", []cloud.Candidate{cand("m5.large", "us-east-1a", "on-demand")})
			mutate(&req.Spec)
			if _, err := e.provider.Launch(context.Background(), req); !errors.Is(err, cloud.ErrInvalidSpec) {
				t.Errorf("Launch = %v, want ErrInvalidSpec", err)
			}
		})
	}
}

// TestResolvePlacementGroupAndReservations pins Karpenter's placement
// group resolution (DescribePlacementGroups by name or id, available groups
// only) and its PlacementGroupReady condition, and a capacity reservation
// term that selects nothing.
func TestResolvePlacementGroupAndReservations(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, sel := range []*awsv1.PlacementGroupSelector{{Name: ptr("sim-partition")}, {ID: ptr("pg-0sim0002")}} {
		nc := nodeClass()
		nc.Spec.PlacementGroupSelector = sel
		r, err := e.provider.Resolve(ctx, nc)
		if err != nil || r.PlacementGroup == nil || *r.PlacementGroup != (cloud.PlacementGroup{ID: "pg-0sim0002", Name: "sim-partition",
			Strategy: "partition", PartitionCount: 3}) {
			t.Fatalf("Resolve(%+v) = %+v, %v", sel, r.PlacementGroup, err)
		}
		cloud.ApplyStatus(nc, r, err, metav1.Now())
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, cloud.ConditionPlacementGroupReady) ||
			!meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionReady) {
			t.Errorf("conditions %+v", nc.Status.Conditions)
		}
	}
	nc := nodeClass()
	r, err := e.provider.Resolve(ctx, nc)
	cloud.ApplyStatus(nc, r, err, metav1.Now())
	if r.PlacementGroup != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, cloud.ConditionPlacementGroupReady) {
		t.Errorf("no selector: placement group %+v, conditions %+v", r.PlacementGroup, nc.Status.Conditions)
	}
	for _, tc := range []struct {
		sel    *awsv1.PlacementGroupSelector
		reason string
	}{
		{&awsv1.PlacementGroupSelector{Name: ptr("nope")}, "PlacementGroupNotFound"}, // EC2: InvalidPlacementGroup.Unknown
	} {
		nc := nodeClass()
		nc.Spec.PlacementGroupSelector = tc.sel
		r, err := e.provider.Resolve(ctx, nc)
		cloud.ApplyStatus(nc, r, err, metav1.Now())
		c := meta.FindStatusCondition(nc.Status.Conditions, cloud.ConditionPlacementGroupReady)
		if err == nil || c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason || !strings.Contains(c.Message, "nope") ||
			meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionReady) {
			t.Errorf("selector %+v: err %v, condition %+v", tc.sel, err, c)
		}
	}
	// A reservation EC2 does not know selects nothing (Karpenter): the
	// class is ready without reserved offerings.
	nc = nodeClass()
	nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0123"}}
	r, err = e.provider.Resolve(ctx, nc)
	cloud.ApplyStatus(nc, r, err, metav1.Now())
	if err != nil || len(nc.Status.CapacityReservations) != 0 || !meta.IsStatusConditionTrue(nc.Status.Conditions, cloud.ConditionCapacityReservationsReady) ||
		!meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionReady) {
		t.Errorf("unknown capacity reservation: err %v, status %+v", err, nc.Status)
	}
}

// TestInstanceTypesCompatibleWithTheClass pins Karpenter's instance type
// compatibility checks and its EFA resource: nested virtualization keeps
// the types reporting the processor feature, connection tracking the Nitro
// types, network interfaces the types with enough cards and EFA, a
// placement group the types supporting its strategy (with the
// placement-group-id label); vpc.amazonaws.com/efa is the type's EFA count,
// or the class's efa-only interfaces.
func TestInstanceTypesCompatibleWithTheClass(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	list := func(mutate func(*awsv1.EC2NodeClass)) map[string]corev1.ResourceList {
		nc := nodeClass()
		if mutate != nil {
			mutate(nc)
		}
		its, err := e.provider.InstanceTypes(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.ResourceList{}
		for _, it := range its {
			out[it.Name] = it.Capacity
			if nc.Spec.PlacementGroupSelector != nil && it.Labels[karpv1.LabelPlacementGroupID] != "pg-0sim0001" {
				t.Errorf("%s: placement-group-id label %q", it.Name, it.Labels[karpv1.LabelPlacementGroupID])
			}
		}
		return out
	}
	all := list(nil)
	if _, ok := all["m5.large"]; !ok {
		t.Fatal("m5.large missing from the default class's types")
	}
	if q := all["c6in.32xlarge"][awsv1.ResourceEFA]; q.Value() != 2 {
		t.Errorf("c6in.32xlarge vpc.amazonaws.com/efa = %s, want 2", q.String())
	}
	if _, ok := all["m5.large"][awsv1.ResourceEFA]; ok {
		t.Error("m5.large has an EFA resource")
	}
	nested := list(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr("enabled")}
	})
	if _, ok := nested["m8i.large"]; !ok || len(nested) == 0 {
		t.Errorf("nested virtualization: m8i.large missing")
	}
	for n := range nested {
		if !strings.HasPrefix(n, "c8i") && !strings.HasPrefix(n, "m8i") && !strings.HasPrefix(n, "r8i") {
			t.Errorf("nested virtualization keeps %s", n)
		}
	}
	if got := list(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr("disabled")}
	}); len(got) != len(all) {
		t.Errorf("nested virtualization disabled filters types: %d of %d", len(got), len(all))
	}
	ct := list(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{UDPTimeout: ptr(int32(30))}
	})
	if _, ok := ct["m4.large"]; ok { // Xen
		t.Error("connection tracking keeps the Xen m4.large")
	}
	if _, ok := ct["m5.large"]; !ok {
		t.Error("connection tracking drops the Nitro m5.large")
	}
	efa := list(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly}}
	})
	if _, ok := efa["c6in.32xlarge"]; !ok {
		t.Error("two-card EFA interfaces drop c6in.32xlarge")
	}
	for n, capacity := range efa {
		if q := capacity[awsv1.ResourceEFA]; q.Value() != 1 {
			t.Errorf("%s: vpc.amazonaws.com/efa = %s, want the class's 1 efa-only interface", n, q.String())
		}
		if n == "m5.large" || n == "c5n.18xlarge" { // one network card
			t.Errorf("two-card interfaces keep %s", n)
		}
	}
	cluster := list(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: ptr("sim-cluster")}
	})
	if _, ok := cluster["t3.large"]; ok {
		t.Error("a cluster placement group keeps t3.large")
	}
	if _, ok := cluster["m5.large"]; !ok {
		t.Error("a cluster placement group drops m5.large")
	}
}
