package cloud

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// TestCapacityReservationsStatus: the resolved reservations are the
// class's status.capacityReservations and CapacityReservationsReady is
// True, with or without any; when EC2 could not be asked it is False
// (CapacityReservationResolutionFailed) and the class is not Ready.
func TestCapacityReservationsStatus(t *testing.T) {
	rs := []awsv1.CapacityReservation{{ID: "cr-1", InstanceType: "m5.large", AvailabilityZone: "us-east-1a"}}
	tests := []struct {
		name   string
		r      Resolved
		err    error
		status metav1.ConditionStatus
		reason string
		ready  bool
	}{
		{"reservations", Resolved{CapacityReservations: rs}, nil, metav1.ConditionTrue, ConditionCapacityReservationsReady, true},
		{"none", Resolved{}, nil, metav1.ConditionTrue, ConditionCapacityReservationsReady, true},
		{"describe failed", Resolved{}, &ResolveError{CapacityReservations: errors.New("throttled")}, metav1.ConditionFalse,
			"CapacityReservationResolutionFailed", false},
	}
	for _, tc := range tests {
		nc := &awsv1.EC2NodeClass{}
		ApplyStatus(nc, tc.r, tc.err, metav1.Now())
		c := meta.FindStatusCondition(nc.Status.Conditions, ConditionCapacityReservationsReady)
		if c == nil || c.Status != tc.status || c.Reason != tc.reason || meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionReady) != tc.ready ||
			len(nc.Status.CapacityReservations) != len(tc.r.CapacityReservations) {
			t.Errorf("%s: condition %+v, status %+v", tc.name, c, nc.Status)
		}
	}
}

// Which failed parts keep the last resolution: failures to ask, not
// answers.
func TestKeepOnFailure(t *testing.T) {
	prev := Resolved{Subnets: []Subnet{{ID: "subnet-old"}}, AMIs: []AMI{{ID: "ami-old"}}, InstanceProfile: "old"}
	cur := Resolved{Subnets: []Subnet{{ID: "subnet-new"}}, InstanceProfile: "new"}
	throttled := errors.New("api error RequestLimitExceeded: Request limit exceeded.")
	tests := []struct {
		name                string
		err                 error
		wantSubnet, wantAMI string
		wantKept            []string
		wantErr             error // nil: none left
	}{
		{"no error", nil, "subnet-new", "", nil, nil},
		{"AMIs throttled", &ResolveError{AMIs: throttled}, "subnet-new", "ami-old", []string{awsv1.ConditionAMIsReady}, nil},
		{"AMIs match nothing", &ResolveError{AMIs: ErrNoAMIs}, "subnet-new", "", nil, ErrNoAMIs},
		{"alias unsupported", &ResolveError{AMIs: fmt.Errorf("al2@latest: %w", ErrUnsupportedAlias)}, "subnet-new", "", nil, ErrUnsupportedAlias},
		{"one of each", &ResolveError{Subnets: throttled, AMIs: ErrNoAMIs}, "subnet-old", "", []string{awsv1.ConditionSubnetsReady}, ErrNoAMIs},
		{"not a resolution error", throttled, "subnet-old", "ami-old", []string{awsv1.ConditionSubnetsReady, awsv1.ConditionSecurityGroupsReady,
			awsv1.ConditionAMIsReady, awsv1.ConditionInstanceProfileReady, ConditionPlacementGroupReady, ConditionCapacityReservationsReady}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, kept, err := KeepOnFailure(prev, cur, tt.err)
			var ami string
			if len(got.AMIs) > 0 {
				ami = got.AMIs[0].ID
			}
			if got.Subnets[0].ID != tt.wantSubnet || ami != tt.wantAMI || !slices.Equal(kept, tt.wantKept) {
				t.Errorf("subnet %s, AMI %q, kept %v; want %s, %q, %v", got.Subnets[0].ID, ami, kept, tt.wantSubnet, tt.wantAMI, tt.wantKept)
			}
			if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
		})
	}
}
