package aws

import (
	"cmp"
	"math"
	"slices"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
)

// chooseLaunch is Karpenter's choice of what one CreateFleet call offers
// (its instance filters, truncation and capacity type, in that order) over
// the candidates not yet refused:
//
//  1. the reserved filters (chooseReserved): when a reserved candidate
//     remains, the launch is reserved and offers those it picks;
//  2. unless minValues: exotic types (metal, GPUs, accelerators) go when
//     another type remains;
//  3. unless minValues: when spot and on-demand candidates remain, spot
//     ones dearer than the cheapest on-demand one go;
//  4. the MaxInstanceTypes types with the cheapest candidates stay;
//  5. the capacity type is reserved, else spot when a spot candidate is
//     left, else on-demand; the overrides are its candidates, one per
//     (type, zone), cheapest first (ties: type, zone; a reserved launch
//     keeps chooseReserved's order).
//
// A spec of one capacity type without exotic candidates (every record
// written before the provisioner sent both) launches that capacity type
// as before, with the 60 cheapest types' overrides in every zone (before:
// the 60 cheapest overrides, as Karpenter truncates types, not overrides).
func (p *Provider) chooseLaunch(cands []cloud.Candidate, minValues bool) (string, []cloud.Candidate) {
	reserved := p.chooseReserved(cands)
	if len(reserved) > 0 {
		cands = reserved
	} else {
		cands = slices.DeleteFunc(slices.Clone(cands), func(c cloud.Candidate) bool { return c.CapacityType == karpv1.CapacityTypeReserved })
	}
	if !minValues {
		cands = withoutExotic(cands)
		cands = withoutDearSpot(cands)
	}
	cands = cheapestTypes(cands, MaxInstanceTypes)
	capType := karpv1.CapacityTypeOnDemand
	switch {
	case len(reserved) > 0:
		return karpv1.CapacityTypeReserved, cands
	case slices.ContainsFunc(cands, func(c cloud.Candidate) bool { return c.CapacityType == karpv1.CapacityTypeSpot }):
		capType = karpv1.CapacityTypeSpot
	}
	var out []cloud.Candidate
	seen := map[cloud.OfferingKey]bool{}
	for _, c := range cands {
		if c.CapacityType == capType && !seen[c.Key()] {
			seen[c.Key()] = true
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b cloud.Candidate) int {
		return cmp.Or(cmp.Compare(a.Price, b.Price), cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.Zone, b.Zone))
	})
	return capType, out
}

// withoutExotic drops the exotic candidates when any other is left
// (Karpenter's exotic instance filter: such types launch only when the
// claim needs them or nothing else is available).
func withoutExotic(cands []cloud.Candidate) []cloud.Candidate {
	if !slices.ContainsFunc(cands, func(c cloud.Candidate) bool { return !c.Exotic }) {
		return cands
	}
	return slices.DeleteFunc(slices.Clone(cands), func(c cloud.Candidate) bool { return c.Exotic })
}

// withoutDearSpot drops the spot candidates priced above the cheapest
// on-demand one when both capacity types are left (Karpenter's spot
// offering filter: a claim that may run on demand does not pay more for
// spot). With none left, the launch goes on demand.
func withoutDearSpot(cands []cloud.Candidate) []cloud.Candidate {
	cheapestOD, spot := math.Inf(1), false
	for _, c := range cands {
		switch c.CapacityType {
		case karpv1.CapacityTypeOnDemand:
			cheapestOD = min(cheapestOD, c.Price)
		case karpv1.CapacityTypeSpot:
			spot = true
		}
	}
	if !spot || math.IsInf(cheapestOD, 1) {
		return cands
	}
	return slices.DeleteFunc(slices.Clone(cands), func(c cloud.Candidate) bool {
		return c.CapacityType == karpv1.CapacityTypeSpot && c.Price > cheapestOD
	})
}

// cheapestTypes keeps the candidates of the n instance types whose
// cheapest candidate is cheapest (ties: type name), as Karpenter truncates
// a launch's instance types by their cheapest offering of any capacity
// type before it picks one.
func cheapestTypes(cands []cloud.Candidate, n int) []cloud.Candidate {
	cheapest := map[string]float64{}
	var types []string
	for _, c := range cands {
		if p, ok := cheapest[c.InstanceType]; !ok || c.Price < p {
			if !ok {
				types = append(types, c.InstanceType)
			}
			cheapest[c.InstanceType] = c.Price
		}
	}
	if len(types) <= n {
		return cands
	}
	slices.SortFunc(types, func(a, b string) int { return cmp.Or(cmp.Compare(cheapest[a], cheapest[b]), cmp.Compare(a, b)) })
	keep := map[string]bool{}
	for _, t := range types[:n] {
		keep[t] = true
	}
	return slices.DeleteFunc(slices.Clone(cands), func(c cloud.Candidate) bool { return !keep[c.InstanceType] })
}
