package disruption

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// TestAWSIsDriftedAsKarpenter ports the "NodeClaim Drift" context of the
// AWS provider v1.14.1's pkg/cloudprovider/suite_test.go that
// TestDriftReasons does not already pin. Karpenter's IsDrifted returns an
// error where it cannot judge (no subnets or security groups in the
// status, no image ID, no provider ID, the instance gone): the NodeClaim is
// then not drifted, which is what Joiner says. Its "Static Drift
// Detection" table is api/aws/v1 TestEC2NodeClassHashMatchesKarpenter (each
// field's hash) with the hash-version rows of TestDriftReasons.
func TestAWSIsDriftedAsKarpenter(t *testing.T) {
	amd := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	arm := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}
	class := func() *awsv1.EC2NodeClass {
		c := &awsv1.EC2NodeClass{}
		c.Name = "default"
		c.Status.AMIs = []awsv1.AMI{{ID: "ami-arm", Requirements: arm}, {ID: "ami-amd", Requirements: amd}}
		c.Status.Subnets = []awsv1.Subnet{{ID: "subnet-1", Zone: "zone-1"}, {ID: "subnet-2", Zone: "zone-2"}}
		c.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-valid"}}
		return c
	}
	for _, tc := range []struct {
		karpenter  string
		change     func(in *Input, n *Node)
		wantReason string
	}{
		{"should not fail if NodeClass does not exist", func(in *Input, n *Node) {
			delete(in.NodeClasses, "default")
			n.NodeClaim.Status.ImageID = "ami-unknown"
		}, ""},
		{"should not fail if NodePool does not exist", func(in *Input, n *Node) { in.NodePools = nil }, ""},
		{"should return drifted if the AMI is not valid", func(in *Input, n *Node) { n.NodeClaim.Status.ImageID = "ami-unknown" }, DriftAMI},
		{"should return drifted if there are multiple drift reasons", func(in *Input, n *Node) {
			n.NodeClaim.Status.ImageID = "ami-unknown"
			n.Listed.SubnetID = "subnet-unknown"
			n.Listed.SecurityGroupIDs = []string{"sg-unknown"}
			in.NodeClassHashes["default"] = "abcdefghijkl"
		}, DriftNodeClass},
		{"should return drifted if the subnet is not valid", func(in *Input, n *Node) { n.Listed.SubnetID = "subnet-unknown" }, DriftSubnet},
		{"should return an error if subnets are empty", func(in *Input, n *Node) {
			in.NodeClasses["default"].Status.Subnets = nil
			n.Listed.SubnetID = "subnet-unknown"
		}, ""},
		{"should not return drifted if the NodeClaim is valid", func(*Input, *Node) {}, ""},
		{"should return an error if the security groups are empty", func(in *Input, n *Node) {
			in.NodeClasses["default"].Status.SecurityGroups = nil
			n.Listed.SecurityGroupIDs = []string{"sg-unknown"}
		}, ""},
		{"should return drifted if the instance security groups doesn't match the discovered values", func(in *Input, n *Node) {
			n.Listed.SecurityGroupIDs = []string{"sg-unknown"}
		}, DriftSecurityGroup},
		{"should return drifted if there are more instance security groups present than in the discovered values", func(in *Input, n *Node) {
			n.Listed.SecurityGroupIDs = []string{"sg-unknown", "sg-valid"}
		}, DriftSecurityGroup},
		{"should return drifted if more security groups are present than instance security groups then discovered from nodeclass", func(in *Input, n *Node) {
			in.NodeClasses["default"].Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-valid"}, {ID: "sg-new"}}
		}, DriftSecurityGroup},
		{"should not return drifted if the security groups match", func(*Input, *Node) {}, ""},
		{"should error if the NodeClaim doesn't have ImageID", func(in *Input, n *Node) { n.NodeClaim.Status.ImageID = "" }, ""},
		{"should error drift if NodeClaim doesn't have provider id", func(in *Input, n *Node) {
			n.NodeClaim.Status.ProviderID = ""
			n.NodeClaim.Status.ImageID = "ami-unknown"
		}, ""},
		{"should error if the underlying NodeClaim doesn't exist", func(in *Input, n *Node) {
			n.Listed = nil
			in.NodeClasses["default"].Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-new"}}
		}, ""},
		{"should return drifted if the AMI no longer matches the existing NodeClaims instance type", func(in *Input, n *Node) {
			in.NodeClasses["default"].Status.AMIs = []awsv1.AMI{{ID: "ami-amd", Requirements: amd}}
			n.NodeClaim.Status.ImageID = "ami-arm"
		}, DriftAMI},
		// "should not return drifted if dynamic fields are updated": the
		// selector terms are not hashed (api/aws/v1); what they resolve to
		// still matches the instance.
		{"should not return drifted if dynamic fields are updated (AMI, subnet, security group terms)", func(in *Input, n *Node) {
			c := in.NodeClasses["default"]
			c.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"ami-key-1": "ami-value-1"}}}
			c.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"sn-key-1": "sn-value-1"}}}
			c.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"sg-key": "sg-value"}}}
		}, ""},
		{"should not return drifted if karpenter.k8s.aws/ec2nodeclass-hash annotation is not present on the NodeClaim", func(in *Input, n *Node) {
			delete(n.NodeClaim.Annotations, karpv1.AnnotationEC2NodeClassHash)
			in.NodeClassHashes["default"] = "changed"
		}, ""},
		{"should not return drifted if the NodeClaim's karpenter.k8s.aws/ec2nodeclass-hash-version annotation does not match the EC2NodeClass's", func(in *Input, n *Node) {
			n.NodeClaim.Annotations[karpv1.AnnotationEC2NodeClassHashVersion] = "test-hash-version-2"
			in.NodeClassHashes["default"] = "changed"
		}, ""},
		{"should not return drifted if karpenter.k8s.aws/ec2nodeclass-hash-version annotation is not present on the NodeClaim", func(in *Input, n *Node) {
			delete(n.NodeClaim.Annotations, karpv1.AnnotationEC2NodeClassHashVersion)
			in.NodeClassHashes["default"] = "changed"
		}, ""},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			n := testNode("n", "default", od, 4, testPod("a", "1"))
			n.NodeClaim.Status.ImageID = "ami-amd"
			n.NodeClaim.Labels[corev1.LabelArchStable] = "amd64"
			n.Node.Labels[corev1.LabelArchStable] = "amd64"
			n.NodeClaim.Annotations[karpv1.AnnotationNodePoolHash] = "1"
			n.NodeClaim.Annotations[karpv1.AnnotationEC2NodeClassHash] = "10"
			n.Listed = &cloud.Instance{ID: "i-n", SubnetID: "subnet-1", SecurityGroupIDs: []string{"sg-valid"}}
			in := testInput(t0, []*karpv1.NodePool{testPool("default", od)}, n)
			in.NodePoolHashes = map[string]string{"default": "1"}
			in.NodeClassHashes = map[string]string{"default": "10"}
			in.NodeClasses = map[string]*awsv1.EC2NodeClass{"default": class()}
			tc.change(in, n)
			st := Status(in)
			if len(st) != 1 {
				t.Fatalf("%d statuses", len(st))
			}
			if st[0].DriftReason != tc.wantReason {
				t.Fatalf("drift = %q (%q), want %q", st[0].DriftReason, st[0].Drifted, tc.wantReason)
			}
			if tc.wantReason == "" && strings.TrimSpace(st[0].Drifted) != "" {
				t.Errorf("drifted message %q without a reason", st[0].Drifted)
			}
		})
	}
}
