package provisioner

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/userdata"
)

func ptrTo[T any](v T) *T { return &v }

// TestFreezeCopiesEveryLaunchField: the spec committed to raft carries
// each EC2NodeClass launch field (copies, so later class edits do not reach
// it), the resolved placement group, and decodes from records written
// before these fields existed.
func TestFreezeCopiesEveryLaunchField(t *testing.T) {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: awsv1.EC2NodeClassSpec{
		AssociatePublicIPAddress: ptrTo(false), IPPrefixCount: ptrTo(int32(2)), Context: ptrTo("ctx-1"),
		NetworkInterfaces: []*awsv1.NetworkInterface{{InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly}},
		ConnectionTracking: &awsv1.ConnectionTracking{UDPTimeout: ptrTo(int32(45))},
		CPUOptions:         &awsv1.CPUOptions{NestedVirtualization: ptrTo("enabled")},
		MetadataOptions:    &awsv1.MetadataOptions{HTTPProtocolIPv6: ptrTo("enabled")},
	}}
	r := cloud.Resolved{PlacementGroup: &cloud.PlacementGroup{ID: "pg-1", Strategy: cloud.PlacementStrategyCluster}}
	spec := freeze("p", "claim", nil, nc, r, nil, nil)
	want := cloud.LaunchSpec{NodePool: "p", NodeClass: "c", NodeClaim: "claim", SecurityGroupIDs: []string{},
		AssociatePublicIPAddress: ptrTo(false), IPPrefixCount: ptrTo(int32(2)), Context: "ctx-1",
		NetworkInterfaces: nc.Spec.NetworkInterfaces, ConnectionTracking: nc.Spec.ConnectionTracking, CPUOptions: nc.Spec.CPUOptions,
		MetadataOptions: nc.Spec.MetadataOptions, PlacementGroupID: "pg-1", BlockDevices: defaultBlockDevices(awsv1.AMIFamilyAL2023)}
	if !equality.Semantic.DeepEqual(spec, want) {
		t.Errorf("freeze =\n%+v\nwant\n%+v", spec, want)
	}
	*nc.Spec.IPPrefixCount, *nc.Spec.AssociatePublicIPAddress = 9, true
	nc.Spec.NetworkInterfaces[1].InterfaceType = awsv1.InterfaceTypeInterface
	nc.Spec.CPUOptions.NestedVirtualization = ptrTo("disabled")
	if *spec.IPPrefixCount != 2 || *spec.AssociatePublicIPAddress || spec.NetworkInterfaces[1].InterfaceType != awsv1.InterfaceTypeEFAOnly ||
		*spec.CPUOptions.NestedVirtualization != "enabled" {
		t.Errorf("the frozen spec follows later class edits: %+v", spec)
	}
	var old cloud.LaunchSpec
	if err := json.Unmarshal([]byte(`{"nodePool":"p","nodeClaim":"c","candidates":[{"instanceType":"m5.large","zone":"z","capacityType":"spot","price":1}]}`), &old); err != nil ||
		old.NetworkInterfaces != nil || old.PlacementGroupID != "" || old.Candidates[0].EFACount != 0 || old.MinValues || old.Candidates[0].Exotic {
		t.Errorf("an old record decodes as %+v, %v", old, err)
	}
	b, _ := json.Marshal(cloud.LaunchSpec{})
	if string(b) != `{"nodePool":"","nodeClaim":"","candidates":null}` {
		t.Errorf("an empty spec encodes new fields: %s", b)
	}
}

// TestLaunchPlacement pins Karpenter's placement group labels: the
// placement-group-id label always, and for a partition group the lowest of
// the claim's partition values (string order) as label and launch
// partition; none otherwise (EC2 picks).
func TestLaunchPlacement(t *testing.T) {
	part := &cloud.PlacementGroup{ID: "pg-p", Strategy: cloud.PlacementStrategyPartition, PartitionCount: 12}
	in := func(vs ...string) []karpv1.NodeSelectorRequirementWithMinValues {
		return []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelPlacementGroupPartition, Operator: karpv1.OpIn, Values: vs}}
	}
	tests := []struct {
		name      string
		pg        *cloud.PlacementGroup
		reqs      []karpv1.NodeSelectorRequirementWithMinValues
		labels    map[string]string
		partition int32
	}{
		{"none", nil, in("1"), nil, 0},
		{"cluster", &cloud.PlacementGroup{ID: "pg-c", Strategy: cloud.PlacementStrategyCluster}, in("1"),
			map[string]string{karpv1.LabelPlacementGroupID: "pg-c"}, 0},
		{"partition, no requirement", part, nil, map[string]string{karpv1.LabelPlacementGroupID: "pg-p"}, 0},
		{"partition, requirement", part, in("3", "10", "2"),
			map[string]string{karpv1.LabelPlacementGroupID: "pg-p", karpv1.LabelPlacementGroupPartition: "10"}, 10},
	}
	for _, tc := range tests {
		labels, partition := launchPlacement(tc.pg, tc.reqs)
		if !equality.Semantic.DeepEqual(labels, tc.labels) || partition != tc.partition {
			t.Errorf("%s: %v, %d; want %v, %d", tc.name, labels, partition, tc.labels, tc.partition)
		}
	}
}

// TestEFACounts pins Karpenter's EFA count: each candidate gets its type's
// vpc.amazonaws.com/efa capacity when the claim requests EFA and the class
// names no network interfaces.
func TestEFACounts(t *testing.T) {
	types := []*catalog.InstanceType{
		{Name: "efa", Capacity: corev1.ResourceList{awsv1.ResourceEFA: resource.MustParse("2")}},
		{Name: "plain", Capacity: corev1.ResourceList{}},
	}
	efaReq := corev1.ResourceList{awsv1.ResourceEFA: resource.MustParse("1")}
	nc := &awsv1.EC2NodeClass{}
	for _, tc := range []struct {
		name     string
		requests corev1.ResourceList
		nis      []*awsv1.NetworkInterface
		want     []int32
	}{
		{"requested", efaReq, nil, []int32{2, 0}},
		{"not requested", corev1.ResourceList{}, nil, []int32{0, 0}},
		{"class interfaces", efaReq, []*awsv1.NetworkInterface{{InterfaceType: awsv1.InterfaceTypeInterface}}, []int32{0, 0}},
	} {
		cands := []cloud.Candidate{{InstanceType: "efa"}, {InstanceType: "plain"}}
		nc.Spec.NetworkInterfaces = tc.nis
		efaCounts(cands, tc.requests, nc, types)
		if cands[0].EFACount != tc.want[0] || cands[1].EFACount != tc.want[1] {
			t.Errorf("%s: %+v", tc.name, cands)
		}
	}
}

// TestClusterIPv6 is Karpenter's cluster IP family: that of the kube-dns
// address.
func TestClusterIPv6(t *testing.T) {
	for c, want := range map[userdata.Cluster]bool{
		{}:                                       false,
		{ServiceCIDR: "10.100.0.0/16"}:           false,
		{ServiceCIDR: "fd00:10:96::/112"}:        true,
		{DNSIP: "fd00:10:96::a"}:                 true,
		{DNSIP: "10.100.0.10", IPFamily: "ipv6"}: false,
		{IPFamily: "ipv6"}:                       true,
	} {
		if got := clusterIPv6(c); got != want {
			t.Errorf("%+v: %v, want %v", c, got, want)
		}
	}
}

// TestDefaultBlockDevices pins Karpenter's volumes for a class without
// blockDeviceMappings, per AMI family.
func TestDefaultBlockDevices(t *testing.T) {
	for family, want := range map[string][]string{
		awsv1.AMIFamilyAL2: {"/dev/xvda=20Gi"}, awsv1.AMIFamilyAL2023: {"/dev/xvda=20Gi"},
		awsv1.AMIFamilyBottlerocket: {"/dev/xvda=4Gi", "/dev/xvdb=20Gi"}, awsv1.AMIFamilyWindows2022: {"/dev/sda1=50Gi"},
		awsv1.AMIFamilyCustom: nil,
	} {
		var got []string
		for _, m := range defaultBlockDevices(family) {
			if !*m.EBS.Encrypted || *m.EBS.VolumeType != "gp3" {
				t.Errorf("%s: %+v is not encrypted gp3", family, m.EBS)
			}
			got = append(got, *m.DeviceName+"="+m.EBS.VolumeSize.String())
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", family, got, want)
		}
	}
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{BlockDeviceMappings: []*awsv1.BlockDeviceMapping{{DeviceName: ptrTo("/dev/xvdz")}}}}
	if got := freeze("p", "c", nil, nc, cloud.Resolved{}, nil, nil).BlockDevices; len(got) != 1 || *got[0].DeviceName != "/dev/xvdz" {
		t.Errorf("the class's mappings are replaced: %v", got)
	}
}

// Karpenter's resolveCustomLabelsFromRequirements: every requirement key
// that is not well-known labels the NodeClaim with a value it allows.
func TestNodeClaimCustomLabels(t *testing.T) {
	gt := func(key, v string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: karpv1.OpGt, Values: []string{v}}
	}
	r := func(key string, op karpv1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
	}
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
		ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"owner": "platform"}},
		Spec:       karpv1.NodeClaimTemplateSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}}}}}
	nc := newNodeClaim(pool, &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, "default-abc", "intent-1",
		[]karpv1.NodeSelectorRequirementWithMinValues{
			r("team", karpv1.OpExists),
			r("tier", karpv1.OpIn, "gold", "bronze"),
			gt("generation", "4"),
			r("legacy", karpv1.OpDoesNotExist),
			r("color", karpv1.OpNotIn, "0", "1"),
			r("owner", karpv1.OpIn, "platform"),
			r(karpv1.LabelZone, karpv1.OpIn, "us-east-1a", "us-east-1b"),
			r(karpv1.LabelCapacityType, karpv1.OpIn, "spot"),
		}, nil)
	want := map[string]string{"team": "0", "tier": "bronze", "generation": "5", "color": "2", "owner": "platform",
		karpv1.LabelCapacityType: "spot", karpv1.LabelNodePool: "default", karpv1.LabelNodeClass: "default"}
	if !maps.Equal(nc.Labels, want) {
		t.Errorf("labels %v, want %v", nc.Labels, want)
	}
}

// TestLaunchSpecCarriesMinValues: a claim whose requirements carry
// minValues freezes MinValues, so the launch skips Karpenter's exotic and
// spot offering filters (they do not run for such a claim); a pool without
// minValues freezes none.
func TestLaunchSpecCarriesMinValues(t *testing.T) {
	families := req(karpv1.LabelInstanceFamily, "In", "m5", "c5", "r5")
	withMin := families
	withMin.MinValues = ptrTo(2)
	for _, tc := range []struct {
		name string
		req  karpv1.NodeSelectorRequirementWithMinValues
		want bool
	}{{"minValues", withMin, true}, {"no minValues", families, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fake.Cache{PoolList: []*karpv1.NodePool{pool("general", tc.req)}, ClassList: []*awsv1.EC2NodeClass{class()},
				PodList: []*corev1.Pod{pendingPod("a", "100m")}}
			r := newTestProvisioner(t, c)
			if err := r.p.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			intents := r.state.Intents()
			if len(intents) != 1 {
				t.Fatalf("%d intents, want 1", len(intents))
			}
			if got := intents[0].Spec.MinValues; got != tc.want {
				t.Errorf("frozen minValues %v, want %v", got, tc.want)
			}
		})
	}
}
