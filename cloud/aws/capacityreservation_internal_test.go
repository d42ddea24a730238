package aws

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// TestCapacityReservationFrom: Karpenter's status entry of an EC2
// reservation: a capacity block within 40 minutes of its end is expiring
// (an ODCR never is), and unknown match criteria or reservation types are
// refused.
func TestCapacityReservationFrom(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ec2cr := func(typ ec2types.CapacityReservationType, criteria ec2types.InstanceMatchCriteria, end time.Duration) ec2types.CapacityReservation {
		r := ec2types.CapacityReservation{CapacityReservationId: aws.String("cr-1"), AvailabilityZone: aws.String("us-east-1a"),
			InstanceType: aws.String("m5.large"), OwnerId: aws.String("123456789012"), InstanceMatchCriteria: criteria, ReservationType: typ}
		if end != 0 {
			r.EndDate = aws.Time(now.Add(end))
		}
		return r
	}
	tests := []struct {
		name  string
		in    ec2types.CapacityReservation
		state awsv1.CapacityReservationState
		typ   awsv1.CapacityReservationType
		err   bool
	}{
		{"unlimited ODCR", ec2cr("", ec2types.InstanceMatchCriteriaTargeted, 0), awsv1.CapacityReservationStateActive, awsv1.CapacityReservationTypeDefault, false},
		{"ODCR near its end", ec2cr(ec2types.CapacityReservationTypeDefault, ec2types.InstanceMatchCriteriaOpen, 10*time.Minute),
			awsv1.CapacityReservationStateActive, awsv1.CapacityReservationTypeDefault, false},
		{"capacity block", ec2cr(ec2types.CapacityReservationTypeCapacityBlock, ec2types.InstanceMatchCriteriaTargeted, 41*time.Minute),
			awsv1.CapacityReservationStateActive, awsv1.CapacityReservationTypeCapacityBlock, false},
		{"capacity block expiring", ec2cr(ec2types.CapacityReservationTypeCapacityBlock, ec2types.InstanceMatchCriteriaTargeted, 40*time.Minute),
			awsv1.CapacityReservationStateExpiring, awsv1.CapacityReservationTypeCapacityBlock, false},
		{"unknown criteria", ec2cr("", "future", 0), "", "", true},
		{"unknown type", ec2cr("future", ec2types.InstanceMatchCriteriaTargeted, 0), "", "", true},
	}
	for _, tc := range tests {
		got, err := capacityReservationFrom(tc.in, now)
		if (err != nil) != tc.err || (err == nil && (got.State != tc.state || got.ReservationType != tc.typ || got.ID != "cr-1" ||
			got.InstanceType != "m5.large" || got.AvailabilityZone != "us-east-1a" || got.OwnerID != "123456789012")) {
			t.Errorf("%s: %+v, %v", tc.name, got, err)
		}
	}
}

// TestChooseReserved pins Karpenter's reserved launch filters: the
// cheapest reservation kind (ties: ODCR, capacity block, interruptible
// ODCR), one reservation per type and zone (the one with the most left),
// and a single capacity block.
func TestChooseReserved(t *testing.T) {
	p := &Provider{res: newReservationState()}
	p.res.counts = map[string]int{"cr-a1": 1, "cr-a2": 3, "cr-b": 1, "cr-cb1": 1, "cr-cb2": 1, "cr-i": 1}
	res := func(id, itype, zone, typ string, interruptible bool, price float64) cloud.Candidate {
		return cloud.Candidate{InstanceType: itype, Zone: zone, CapacityType: "reserved", Price: price, ReservationID: id,
			ReservationType: typ, Interruptible: interruptible}
	}
	odcrA1 := res("cr-a1", "m5.large", "us-east-1a", "default", false, 1e-8)
	odcrA2 := res("cr-a2", "m5.large", "us-east-1a", "default", false, 1e-8)
	odcrB := res("cr-b", "m5.xlarge", "us-east-1b", "default", false, 2e-8)
	cb1 := res("cr-cb1", "m5.large", "us-east-1a", "capacity-block", false, 1e-8)
	cb2 := res("cr-cb2", "m5.xlarge", "us-east-1a", "capacity-block", false, 2e-8)
	inter := res("cr-i", "m5.large", "us-east-1c", "default", true, 1e-8)
	onDemand := cloud.Candidate{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096}
	tests := []struct {
		name  string
		cands []cloud.Candidate
		want  []string
	}{
		{"none reserved", []cloud.Candidate{onDemand}, nil},
		{"most left per pool", []cloud.Candidate{odcrB, odcrA1, odcrA2, onDemand}, []string{"cr-a2", "cr-b"}},
		{"ODCR before capacity block", []cloud.Candidate{cb1, odcrA1, inter}, []string{"cr-a1"}},
		{"capacity block before interruptible", []cloud.Candidate{inter, cb1}, []string{"cr-cb1"}},
		{"one capacity block", []cloud.Candidate{cb2, cb1}, []string{"cr-cb1"}},
		{"cheaper kind wins", []cloud.Candidate{odcrB, cb1}, []string{"cr-cb1"}},
	}
	for _, tc := range tests {
		var got []string
		for _, c := range p.chooseReserved(tc.cands) {
			got = append(got, c.ReservationID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReservedCandidateNeedsItsReservation: a reserved candidate without a
// reservation ID is an invalid spec (it could not target anything); one
// with an ID, and spot and on-demand ones, are fine.
func TestReservedCandidateNeedsItsReservation(t *testing.T) {
	for _, tc := range []struct {
		cand cloud.Candidate
		ok   bool
	}{
		{cloud.Candidate{CapacityType: "reserved", ReservationID: "cr-1"}, true},
		{cloud.Candidate{CapacityType: "reserved"}, false},
		{cloud.Candidate{CapacityType: "on-demand"}, true},
		{cloud.Candidate{CapacityType: "capacity-block", ReservationID: "cr-1"}, false},
	} {
		tc.cand.InstanceType, tc.cand.Zone, tc.cand.ImageID = "m5.large", "us-east-1a", "ami-1"
		req := cloud.LaunchRequest{LaunchID: "l", Attempt: 1, Spec: cloud.LaunchSpec{NodeClaim: "nc", Candidates: []cloud.Candidate{tc.cand},
			Subnets: map[string]string{"us-east-1a": "subnet-1"}}}
		if err := validateRequest(req); (err == nil) != tc.ok || (err != nil && !errors.Is(err, cloud.ErrInvalidSpec)) {
			t.Errorf("%+v: %v", tc.cand, err)
		}
	}
}
