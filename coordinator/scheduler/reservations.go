package scheduler

import (
	"strconv"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// offeringKeys are the labels an offering, not its instance type, decides:
// zone, capacity type and, for reserved offerings, the capacity
// reservation's ID, type and interruptibility (Karpenter's offering
// requirements; spot and on-demand offerings have no reservation label).
var offeringKeys = map[string]bool{
	karpv1.LabelZone: true, karpv1.LabelCapacityType: true, karpv1.LabelCapacityReservationID: true,
	karpv1.LabelCapacityReservationType: true, karpv1.LabelCapacityReservationInterruptible: true,
}

// offeringReqs are the requirements an offering is checked against.
type offeringReqs struct {
	zone, ctyp, rid, rtype, rint *requirements.Requirement
}

func offeringReqsOf(reqs requirements.Requirements) offeringReqs {
	return offeringReqs{zone: reqs.Get(karpv1.LabelZone), ctyp: reqs.Get(karpv1.LabelCapacityType),
		rid: reqs.Get(karpv1.LabelCapacityReservationID), rtype: reqs.Get(karpv1.LabelCapacityReservationType),
		rint: reqs.Get(karpv1.LabelCapacityReservationInterruptible)}
}

// allows: the offering is available and its zone, capacity type and
// reservation labels meet the requirements.
func (m offeringReqs) allows(o catalog.Offering) bool {
	if !o.Available || (m.zone != nil && !m.zone.Has(o.Zone)) || (m.ctyp != nil && !m.ctyp.Has(o.CapacityType)) {
		return false
	}
	if m.rid == nil && m.rtype == nil && m.rint == nil {
		return true
	}
	reserved := o.CapacityType == karpv1.CapacityTypeReserved
	return (m.rid == nil || m.rid.Matches(o.ReservationID, reserved)) &&
		(m.rtype == nil || m.rtype.Matches(o.ReservationType, reserved)) &&
		(m.rint == nil || m.rint.Matches(strconv.FormatBool(o.Interruptible), reserved))
}

// newReservations counts, per capacity reservation, the instances the plan
// may still launch into it: the least any reserved offering of it reports
// (Karpenter's ReservationManager; two classes may list one reservation).
func newReservations(pools []*pool) map[string]int {
	out := map[string]int{}
	for _, p := range pools {
		for _, t := range p.types {
			for _, o := range t.it.Offerings {
				if o.CapacityType != karpv1.CapacityTypeReserved || !o.Available {
					continue
				}
				if n, ok := out[o.ReservationID]; !ok || o.ReservationCapacity < n {
					out[o.ReservationID] = o.ReservationCapacity
				}
			}
		}
	}
	return out
}

// notReserved rules reserved offerings out of a claim.
var notReserved = requirements.MustNew(karpv1.LabelCapacityType, requirements.OpNotIn, karpv1.CapacityTypeReserved)

// settleReservation decides, once placement is done, whether a planned
// claim launches into a capacity reservation. Claims are settled in the
// order they were opened: a claim takes one instance of the cheapest
// reserved offering of its types that its requirements allow and that has
// an instance left (ties: the most left, then the ID), and is pinned to it
// (capacity type reserved and the reservation's ID, as Karpenter's
// FinalizeScheduling pins a claim to its reserved offerings). A claim that
// finds none is kept off reserved offerings, which earlier claims hold: it
// falls back to spot or on-demand in the same plan, where Karpenter's
// provisioner defers its pods to a later pass that reaches the same
// result.
//
// It reports whether it kept the claim off reserved offerings.
func (s *solver) settleReservation(cl *claim) bool {
	if len(s.reservations) == 0 {
		return false
	}
	if ct := cl.reqs.Get(karpv1.LabelCapacityType); ct != nil && !ct.Has(karpv1.CapacityTypeReserved) {
		return false
	}
	m := offeringReqsOf(cl.reqs)
	var best catalog.Offering
	found := false
	for _, t := range cl.types {
		for _, o := range t.it.Offerings {
			if o.CapacityType != karpv1.CapacityTypeReserved || s.reservations[o.ReservationID] <= 0 || !m.allows(o) {
				continue
			}
			left, bestLeft := s.reservations[o.ReservationID], s.reservations[best.ReservationID]
			if !found || o.Price < best.Price || (o.Price == best.Price && (left > bestLeft || (left == bestLeft && o.ReservationID < best.ReservationID))) {
				best, found = o, true
			}
		}
	}
	if !found {
		cl.reqs = cl.reqs.Add(notReserved)
		return true
	}
	s.reservations[best.ReservationID]--
	cl.reqs = cl.reqs.Add(requirements.MustNew(karpv1.LabelCapacityType, requirements.OpIn, karpv1.CapacityTypeReserved)).
		Add(requirements.MustNew(karpv1.LabelCapacityReservationID, requirements.OpIn, best.ReservationID))
	return false
}
