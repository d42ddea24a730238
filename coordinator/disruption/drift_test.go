package disruption

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// TestDriftReasons pins Karpenter v1.14's drift verdicts (core
// pkg/controllers/nodeclaim/disruption/drift.go and the AWS provider's
// cloudprovider/drift.go): which changes drift a launched NodeClaim, with
// which condition reason, and which unknowns drift nothing.
func TestDriftReasons(t *testing.T) {
	class := func() *awsv1.EC2NodeClass {
		c := &awsv1.EC2NodeClass{}
		c.Name = "default"
		c.Status.AMIs = []awsv1.AMI{
			{ID: "ami-amd64-new", Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}},
			{ID: "ami-arm64-new", Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}},
		}
		c.Status.Subnets = []awsv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}}
		c.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}}
		return c
	}
	for _, tc := range []struct {
		name       string
		change     func(in *Input, n *Node)
		wantReason string
		wantIn     string
	}{
		{"nothing changed", func(*Input, *Node) {}, "", ""},
		{"nodepool hash changed", func(in *Input, n *Node) { in.NodePoolHashes["default"] = "2" }, DriftNodePool, "nodepool default changed"},
		{"nodepool hash of an older version is not judged", func(in *Input, n *Node) {
			in.NodePoolHashes["default"] = "2"
			n.NodeClaim.Annotations[karpv1.AnnotationNodePoolHashVersion] = "v2"
		}, "", ""},
		{"nodepool hash without its version is not judged", func(in *Input, n *Node) {
			in.NodePoolHashes["default"] = "2"
			delete(n.NodeClaim.Annotations, karpv1.AnnotationNodePoolHashVersion)
		}, "", ""},
		{"not launched yet", func(in *Input, n *Node) { in.NodePoolHashes["default"] = "2"; n.NodeClaim.Status.ProviderID = "" }, "", ""},
		{"ec2nodeclass hash changed", func(in *Input, n *Node) { in.NodeClassHashes["default"] = "20" }, DriftNodeClass, "ec2nodeclass default changed"},
		{"ec2nodeclass hash of version v4 is not judged", func(in *Input, n *Node) {
			in.NodeClassHashes["default"] = "20"
			n.NodeClaim.Annotations[karpv1.AnnotationEC2NodeClassHashVersion] = "v4"
		}, "", ""},
		{"a new AMI behind the alias", func(in *Input, n *Node) { n.NodeClaim.Status.ImageID = "ami-amd64-old" }, DriftAMI, "image ami-amd64-old"},
		{"the image of the other architecture does not count", func(in *Input, n *Node) { n.NodeClaim.Status.ImageID = "ami-arm64-new" }, DriftAMI, "ami-amd64-new"},
		{"no resolved AMIs: not judged", func(in *Input, n *Node) {
			n.NodeClaim.Status.ImageID = "ami-amd64-old"
			in.NodeClasses["default"].Status.AMIs = nil
		}, "", ""},
		{"security groups no longer selected", func(in *Input, n *Node) { n.Listed.SecurityGroupIDs = []string{"sg-1", "sg-old"} }, DriftSecurityGroup, "sg-1,sg-old"},
		{"security groups in another order", func(in *Input, n *Node) { n.Listed.SecurityGroupIDs = []string{"sg-2", "sg-1"} }, "", ""},
		{"subnet no longer selected", func(in *Input, n *Node) { n.Listed.SubnetID = "subnet-gone" }, DriftSubnet, "subnet-gone"},
		{"instance not listed yet: not judged", func(in *Input, n *Node) { n.Listed = nil }, "", ""},
		// The AWS provider's suite_test.go "should dynamically drift
		// nodeclaims for capacity reservations" and "should not drift when
		// capacity reservation falls back to on-demand".
		{"in a reservation the class selects", func(in *Input, n *Node) {
			in.NodeClasses["default"].Status.CapacityReservations = []awsv1.CapacityReservation{{ID: "cr-foo"}}
			reserved(n, "cr-foo")
		}, "", ""},
		{"in a reservation the class no longer selects", func(in *Input, n *Node) {
			in.NodeClasses["default"].Status.CapacityReservations = []awsv1.CapacityReservation{{ID: "cr-foo"}}
			reserved(n, "cr-bar")
		}, DriftCapacityReservation, "capacity reservation cr-bar"},
		{"reservation ended, fell back to on-demand", func(in *Input, n *Node) {
			in.NodeClasses["default"].Status.CapacityReservations = nil
		}, "", ""},
		{"a reservation with the ReservedCapacity gate off: not reserved", func(in *Input, n *Node) {
			reserved(n, "cr-bar")
			in.FeatureGates.NoReservedCapacity = true
		}, "", ""},
		{"the subnet is judged before the reservation", func(in *Input, n *Node) {
			reserved(n, "cr-bar")
			n.Listed.SubnetID = "subnet-gone"
		}, DriftSubnet, ""},
		{"requirements no longer satisfied", func(in *Input, n *Node) {
			in.NodePools[0].Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot}
		}, DriftRequirements, "no longer satisfies"},
		// Karpenter's drift_test.go "should return drifted if a new node
		// requirement is added" and its NotIn/DoesNotExist counterpart.
		{"a new custom requirement key the nodeclaim lacks", func(in *Input, n *Node) {
			in.NodePools[0].Spec.Template.Spec.Requirements = append(in.NodePools[0].Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: karpv1.OpIn, Values: []string{"a", "b"}})
		}, DriftRequirements, "requires label example.com/team"},
		{"a new custom key a Joiner nodeclaim from before custom labels lacks is not judged", func(in *Input, n *Node) {
			n.NodeClaim.Annotations[karpv1.AnnotationLaunchID] = "intent-1" // Joiner's, without AnnotationCustomLabels
			in.NodePools[0].Spec.Template.Spec.Requirements = append(in.NodePools[0].Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: karpv1.OpIn, Values: []string{"a", "b"}})
		}, "", ""},
		{"a new custom key a labelled Joiner nodeclaim lacks", func(in *Input, n *Node) {
			n.NodeClaim.Annotations[karpv1.AnnotationLaunchID] = "intent-1"
			n.NodeClaim.Annotations[karpv1.AnnotationCustomLabels] = "true"
			in.NodePools[0].Spec.Template.Spec.Requirements = append(in.NodePools[0].Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: karpv1.OpExists})
		}, DriftRequirements, "requires label example.com/team"},
		{"a new custom key allowed absent (NotIn)", func(in *Input, n *Node) {
			in.NodePools[0].Spec.Template.Spec.Requirements = append(in.NodePools[0].Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: karpv1.OpNotIn, Values: []string{"a"}})
		}, "", ""},
		{"a new well-known key the nodeclaim lacks is not judged", func(in *Input, n *Node) {
			in.NodePools[0].Spec.Template.Spec.Requirements = append(in.NodePools[0].Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceFamily, Operator: karpv1.OpIn, Values: []string{"m5"}})
		}, "", ""},
		{"the nodepool hash is judged first", func(in *Input, n *Node) {
			in.NodePoolHashes["default"] = "2"
			n.Listed.SubnetID = "subnet-gone"
		}, DriftNodePool, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode("n", "default", od, 4, testPod("a", "1"))
			n.NodeClaim.Status.ImageID = "ami-amd64-new"
			n.NodeClaim.Labels[corev1.LabelArchStable] = "amd64"
			n.Node.Labels[corev1.LabelArchStable] = "amd64"
			n.NodeClaim.Annotations[karpv1.AnnotationNodePoolHash] = "1"
			n.NodeClaim.Annotations[karpv1.AnnotationEC2NodeClassHash] = "10"
			n.Listed = &cloud.Instance{ID: "i-n", SubnetID: "subnet-b", SecurityGroupIDs: []string{"sg-1", "sg-2"}}
			in := testInput(t0, []*karpv1.NodePool{testPool("default", od)}, n)
			in.NodePoolHashes = map[string]string{"default": "1"}
			in.NodeClassHashes = map[string]string{"default": "10"}
			in.NodeClasses = map[string]*awsv1.EC2NodeClass{"default": class()}
			tc.change(in, n)
			st := Status(in)
			if len(st) != 1 {
				t.Fatalf("%d statuses", len(st))
			}
			if st[0].DriftReason != tc.wantReason || !strings.Contains(st[0].Drifted, tc.wantIn) {
				t.Fatalf("drift = %q (%q), want %q containing %q", st[0].DriftReason, st[0].Drifted, tc.wantReason, tc.wantIn)
			}
		})
	}
}

// reserved makes the node's listed instance one that targeted capacity
// reservation id (Karpenter's reserved capacity type).
func reserved(n *Node, id string) {
	n.Listed.CapacityType, n.Listed.ReservationID, n.Listed.ReservationType = karpv1.CapacityTypeReserved, id, string(awsv1.CapacityReservationTypeDefault)
}
