package disruption

import (
	"math"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// A replacement the scheduler pinned to a capacity reservation is priced
// at that reservation's offering, as Karpenter's WorstLaunchPrice looks at
// reserved offerings first; an unpinned one never counts reserved capacity.
func TestReplacementPriceWithReservations(t *testing.T) {
	it := &catalog.InstanceType{Name: "m5.large", Offerings: []catalog.Offering{
		{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved, Price: 0.0000001, Available: true, ReservationID: "cr-1", ReservationCapacity: 1},
		{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved, Price: 0.0000002, Available: false, ReservationID: "cr-2"},
		{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeSpot, Price: 0.04, Available: true},
		{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, Available: true},
	}}
	pinned := func(id string) requirements.Requirements {
		return requirements.NewRequirements(
			requirements.MustNew(karpv1.LabelCapacityType, "In", karpv1.CapacityTypeReserved),
			requirements.MustNew(karpv1.LabelCapacityReservationID, "In", id))
	}
	for _, tc := range []struct {
		name       string
		reqs       requirements.Requirements
		worst, min float64
	}{
		{"pinned to an available reservation", pinned("cr-1"), 0.0000001, 0.0000001},
		{"pinned to an unavailable reservation", pinned("cr-2"), math.Inf(1), math.Inf(1)},
		{"reserved allowed but not pinned", requirements.NewRequirements(
			requirements.MustNew(karpv1.LabelCapacityType, "In", karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand)), 0.096, 0.096},
		{"no requirements", requirements.NewRequirements(), 0.04, 0.04},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := worstLaunchPrice(it, tc.reqs); got != tc.worst {
				t.Errorf("worstLaunchPrice = %v, want %v", got, tc.worst)
			}
			if got := cheapestPrice(it, tc.reqs); got != tc.min {
				t.Errorf("cheapestPrice = %v, want %v", got, tc.min)
			}
		})
	}
}
