package cloud

import (
	"errors"
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
