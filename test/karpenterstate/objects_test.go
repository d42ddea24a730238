package karpenterstate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestApplyLaunchAnnotatesInstanceProfile: a NodeClaim Karpenter launched
// names its instance profile under the AWS provider's key
// (apis/v1 AnnotationInstanceProfile, "karpenter.k8s.aws/instance-profile-name"),
// which Joiner's instance profile garbage collection reads.
func TestApplyLaunchAnnotatesInstanceProfile(t *testing.T) {
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:   awsv1.EC2NodeClassSpec{Role: "KarpenterNodeRole"},
		Status: awsv1.EC2NodeClassStatus{InstanceProfile: "sim_123_default"}}
	it := FindType(class, "us-east-1", "m5.large")
	if it == nil {
		t.Fatal("m5.large not in the catalogue")
	}
	nc := &karpv1.NodeClaim{}
	ApplyLaunch(nc, class, it, Instance{ID: "i-1", Zone: "us-east-1a", CapacityType: "on-demand"}, "", time.Unix(0, 0))
	if got := nc.Annotations["karpenter.k8s.aws/instance-profile-name"]; got != "sim_123_default" {
		t.Errorf("annotation karpenter.k8s.aws/instance-profile-name = %q, want sim_123_default (annotations %v)", got, nc.Annotations)
	}
}
