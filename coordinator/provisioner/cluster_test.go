package provisioner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/userdata"
)

// TestClusterFunc: with cluster discovery, each plan reads the cluster
// facts then current (the user data's cluster DNS follows the service
// CIDR; an IPv6 cluster launches IPv6 interfaces), and while they are
// unknown nothing launches.
func TestClusterFunc(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster userdata.Cluster
		err     error
		wantDNS string // in the user data
		ipv6    bool
	}{
		{name: "discovered IPv4", cluster: userdata.Cluster{Name: "sim", Endpoint: "https://eks.example", ServiceCIDR: "172.20.0.0/16", IPFamily: "ipv4"},
			wantDNS: "172.20.0.10"},
		{name: "discovered IPv6", cluster: userdata.Cluster{Name: "sim", Endpoint: "https://eks.example", ServiceCIDR: "fd30:1d2e:3f4a::/108", IPFamily: "ipv6"},
			wantDNS: "fd30:1d2e:3f4a::a", ipv6: true},
		{name: "unknown", err: fmt.Errorf("cluster sim: endpoint neither given nor discovered: %w", cloud.ErrClusterUnknown)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fake.Cache{
				PoolList:  []*karpv1.NodePool{pool("general", req(karpv1.LabelArch, "In", "amd64"))},
				ClassList: []*awsv1.EC2NodeClass{class()},
				PodList:   []*corev1.Pod{pendingPod("a", "100m")},
			}
			r := newTestProvisioner(t, c)
			r.p.cfg.ClusterFunc = func() (userdata.Cluster, error) { return tc.cluster, tc.err }
			if err := r.p.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			intents := r.state.Intents()
			if tc.err != nil {
				if len(intents) != 0 || len(r.w.created) != 0 {
					t.Fatalf("%d intents, %d nodeclaims with the cluster unknown; want none", len(intents), len(r.w.created))
				}
				return
			}
			if len(intents) != 1 {
				t.Fatalf("%d intents, want 1", len(intents))
			}
			spec := intents[0].Spec
			if ud := string(spec.UserData); !strings.Contains(ud, tc.wantDNS) || strings.Contains(ud, "10.100.0.10") {
				t.Errorf("user data lacks cluster DNS %s (or has the static one):\n%s", tc.wantDNS, ud)
			}
			if spec.ClusterIPv6 != tc.ipv6 {
				t.Errorf("ClusterIPv6 %v, want %v", spec.ClusterIPv6, tc.ipv6)
			}
		})
	}
}

// TestLaunchCallsJoinerOnlyOnJoinerImages: the frozen user data calls
// "joiner bootstrap" only when every candidate boots a Joiner-built image
// (amd64 here); a claim whose candidates may boot the stock arm64 image
// gets stock user data.
func TestLaunchCallsJoinerOnlyOnJoinerImages(t *testing.T) {
	amis := []cloud.AMI{{ID: "ami-joiner", Arch: "amd64", Joiner: true}, {ID: "ami-stock", Arch: "arm64"}}
	for _, tc := range []struct {
		arch []string
		hook bool
	}{
		{[]string{"amd64"}, true},
		{[]string{"arm64"}, false},
		{[]string{"amd64", "arm64"}, false},
	} {
		p := pendingPod("web", "100m")
		p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: "a"}
		c := &fake.Cache{
			PoolList:  []*karpv1.NodePool{pool("a", req(corev1.LabelArchStable, "In", tc.arch...))},
			ClassList: []*awsv1.EC2NodeClass{class()},
			PodList:   []*corev1.Pod{p},
		}
		r := newTestProvisionerOn(t, c, &fakeCloud{amis: amis})
		if err := r.p.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		intents := r.state.Intents()
		if len(intents) != 1 {
			t.Fatalf("arch %v: %d intents, want 1", tc.arch, len(intents))
		}
		facts, err := userdata.Parse(userdata.FamilyAL2023, intents[0].Spec.UserData)
		if err != nil {
			t.Fatal(err)
		}
		if facts.Agent != tc.hook {
			t.Errorf("arch %v: hook present = %v, want %v", tc.arch, facts.Agent, tc.hook)
		}
	}
}

// TestUserDataPerMaxPods is Karpenter's launch template per max-pods
// value and capacity type: each candidate boots user data with its own
// type's max pods, not the smallest candidate's, and its own capacity type
// label (the claim allows spot and on-demand; the launch picks one).
func TestUserDataPerMaxPods(t *testing.T) {
	p := pendingPod("web", "100m")
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("a", req(corev1.LabelInstanceTypeStable, "In", "m5.large", "m5.xlarge", "m5.2xlarge"))},
		ClassList: []*awsv1.EC2NodeClass{class()},
		PodList:   []*corev1.Pod{p},
	}
	r := newTestProvisionerOn(t, c, &fakeCloud{})
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	intents := r.state.Intents()
	if len(intents) != 1 {
		t.Fatalf("%d intents, want 1", len(intents))
	}
	spec := intents[0].Spec.LaunchSpec
	seen := map[string]bool{}
	for _, cand := range spec.Candidates {
		facts, err := userdata.Parse(userdata.FamilyAL2023, spec.UserDataOf(cand))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := catalog.Lookup(cand.InstanceType)
		if facts.MaxPods != int32(e.MaxPods) {
			t.Errorf("%s boots with max pods %d, want its own %d", cand.InstanceType, facts.MaxPods, e.MaxPods)
		}
		if got := facts.Labels[karpv1.LabelCapacityType]; got != cand.CapacityType {
			t.Errorf("%s %s boots labelled capacity type %q", cand.CapacityType, cand.InstanceType, got)
		}
		seen[cand.InstanceType+"/"+cand.CapacityType] = true
	}
	// m5.xlarge and m5.2xlarge share a max pods (58): two renderings per
	// capacity type.
	if len(seen) != 6 || len(spec.UserDataVariants) != 3 {
		t.Errorf("candidates %v, %d variants beside the user data, want 3 types x spot and on-demand, and 3", seen, len(spec.UserDataVariants))
	}
}
