package aws

import (
	"context"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// InstanceTypeOf is the instance type name as p offers it for nc (nil: no
// class), failing the test when p offers no such type. Tests of this
// package and of aws_test use it.
func InstanceTypeOf(t testing.TB, p *Provider, nc *awsv1.EC2NodeClass, name string) *catalog.InstanceType {
	t.Helper()
	its, err := p.InstanceTypes(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no instance type %s", name)
	return nil
}

// NewestPerRequirements is newestPerRequirements, for the AMI ordering
// tables of aws_test.
var NewestPerRequirements = newestPerRequirements

// AMIsOf is p's AMIs of an image a non-alias term found.
func (p *Provider) AMIsOf(im ec2types.Image) []cloud.AMI { return p.amisOf(im, nil) }

// MarkCapacityTypeUnavailable makes every offering of a capacity type
// unavailable for the TTL (Karpenter's MarkCapacityTypeUnavailable; the
// launch does it for spot when EC2 may not create the spot
// service-linked role).
func (p *Provider) MarkCapacityTypeUnavailable(capacityType string) {
	p.unavailable.markCapacityType(capacityType)
}

// MarkSubnetUnavailable records that a subnet ran out of addresses, as a
// launch's InsufficientFreeAddressesInSubnet does (Karpenter's
// MarkSubnetUnavailable).
func (p *Provider) MarkSubnetUnavailable(id string) { p.noAddrs.mark(id) }
