package provisioner

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/userdata"
)

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
		c := &fakeCache{
			pools:   []*karpv1.NodePool{pool("a", req(corev1.LabelArchStable, "In", tc.arch...))},
			classes: []*awsv1.EC2NodeClass{class()},
			pods:    []*corev1.Pod{p},
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
