package cloud

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

func TestValidateUserTags(t *testing.T) {
	for _, tt := range []struct {
		key string
		ok  bool
	}{
		{"team", true}, {"Name", true}, {"karpenter.sh/nodepool", false}, {"karpenter.sh/anything", false},
		{"karpenter.k8s.aws/ec2nodeclass", false}, {"kubernetes.io/cluster/x", false}, {"joiner.io/launch-id", false},
		{"kubernetes.io/role", true}, {"", false},
	} {
		err := ValidateUserTags(map[string]string{tt.key: "v"})
		if (err == nil) != tt.ok {
			t.Errorf("%q: err = %v", tt.key, err)
		}
		if err != nil && (!errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.key))) {
			t.Errorf("%q: err %v does not name the key or is not ErrInvalidSpec", tt.key, err)
		}
	}
}

func TestIsRetryable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("x: %w", ErrRetryable), true},
		{fmt.Errorf("x: %w", &InsufficientCapacityError{}), true},
		{fmt.Errorf("x: %w", ErrInvalidSpec), false},
		{fmt.Errorf("x: %w", ErrNotFound), false},
		{errors.New("other"), false},
	} {
		if got := IsRetryable(tt.err); got != tt.want {
			t.Errorf("IsRetryable(%v) = %v", tt.err, got)
		}
	}
}

func TestDriftHash(t *testing.T) {
	a := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{Role: "r", Tags: map[string]string{"a": "1", "b": "2"}}}
	b := a.DeepCopy()
	if DriftHash(a) != DriftHash(b) {
		t.Fatal("equal specs hash differently")
	}
	b.Spec.Role = "other"
	if DriftHash(a) == DriftHash(b) {
		t.Fatal("a role change does not change the hash")
	}
	c := a.DeepCopy()
	c.Status.InstanceProfile = "p"
	if DriftHash(a) != DriftHash(c) {
		t.Fatal("status changes the hash")
	}
}

func TestProviderID(t *testing.T) {
	if got := (Instance{ID: "i-1", Zone: "us-east-1a"}).ProviderID(); got != "aws:///us-east-1a/i-1" {
		t.Errorf("ProviderID = %q", got)
	}
}
