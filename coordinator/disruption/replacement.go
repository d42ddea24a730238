package disruption

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// replacement turns the simulation's one new NodeClaim for cands into the
// replacement consolidation may launch, or says why there is none
// (Karpenter v1.14.1's computeConsolidation, computeSpotToSpotConsolidation
// and filterOutSameInstanceType):
//
//   - its instance types are ordered by price and only those whose
//     worst-case launch price (the dearest offering it may land on, of the
//     capacity type the launch prefers: spot, then on-demand) is below the
//     candidates' price are kept, and they must still satisfy the pool's
//     minValues;
//   - replacing spot nodes when the replacement may be spot is
//     spot-to-spot: only with the SpotToSpotConsolidation gate, launched as
//     spot, and for a single node only with at least MinSpotToSpotTypes
//     cheaper types, of which the cheapest MinSpotToSpotTypes (or as many
//     as minValues needs) are launched, so the new node is never dearer
//     than the next candidate set (no consolidation loop);
//   - several nodes replaced by one of a type among them must also undercut
//     the cheapest candidate of that type (else deleting fewer nodes is the
//     better move);
//   - a replacement that may be spot or on-demand is launched as spot: the
//     types were judged at spot prices, and on-demand capacity in their
//     place would not be cheaper.
func (d *decider) replacement(rep scheduler.NodeClaim, cands []*Node) (scheduler.NodeClaim, string) {
	reqs, err := requirements.FromNodeSelector(rep.Requirements)
	if err != nil {
		return rep, fmt.Sprintf("the replacement's requirements do not parse: %v", err)
	}
	var minValues []karpv1.NodeSelectorRequirementWithMinValues
	if pool := d.pools[rep.NodePool]; pool != nil {
		for _, r := range pool.Spec.Template.Spec.Requirements {
			if r.MinValues != nil {
				minValues = append(minValues, r)
			}
		}
	}
	opts := make([]*catalog.InstanceType, 0, len(rep.InstanceTypes))
	for _, name := range rep.InstanceTypes {
		if it := d.instanceType(rep.NodeClass, name); it != nil {
			opts = append(opts, it)
		}
	}
	if rep.MinValuesRelaxed {
		minValues = relaxedMinValues(opts, minValues)
	}
	byPrice := func(reqs requirements.Requirements) {
		slices.SortStableFunc(opts, func(a, b *catalog.InstanceType) int {
			return cmp.Compare(cheapestPrice(a, reqs), cheapestPrice(b, reqs))
		})
	}
	byPrice(reqs)
	cur := totalPrice(cands)
	ct := reqs.Get(karpv1.LabelCapacityType)
	spotToSpot := allSpot(cands) && (ct == nil || ct.Has(karpv1.CapacityTypeSpot))
	if spotToSpot {
		if !d.in.FeatureGates.SpotToSpotConsolidation {
			return rep, "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
		}
		reqs = reqs.Add(requirements.MustNew(karpv1.LabelCapacityType, requirements.OpIn, karpv1.CapacityTypeSpot))
		opts = slices.DeleteFunc(opts, func(it *catalog.InstanceType) bool { return math.IsInf(cheapestPrice(it, reqs), 1) })
	}
	opts, why := cheaperOptions(opts, reqs, cur, minValues)
	if why != "" {
		return rep, why
	}
	if len(cands) > 1 {
		limit := math.Inf(1)
		for _, c := range cands {
			it, _ := nodeLabel(c, karpv1.LabelInstanceType)
			if slices.ContainsFunc(opts, func(o *catalog.InstanceType) bool { return o.Name == it }) {
				limit = min(limit, c.Price)
			}
		}
		if !math.IsInf(limit, 1) {
			if opts, why = cheaperOptions(opts, reqs, limit, minValues); why != "" {
				return rep, why + " (a candidate of the same type)"
			}
		}
	}
	if spotToSpot && len(cands) == 1 {
		if len(opts) < MinSpotToSpotTypes {
			return rep, fmt.Sprintf("SpotToSpotConsolidation requires %d cheaper instance type options than the current candidate to consolidate, got %d", MinSpotToSpotTypes, len(opts))
		}
		n := MinSpotToSpotTypes
		if need, ok := minValuesNeed(opts, minValues); ok {
			n = max(n, need)
		}
		opts = opts[:min(n, len(opts))]
	}
	if !spotToSpot && allowsBoth(opts, reqs) {
		reqs = reqs.Add(requirements.MustNew(karpv1.LabelCapacityType, requirements.OpIn, karpv1.CapacityTypeSpot))
	}
	rep.InstanceTypes = make([]string, len(opts))
	for i, it := range opts {
		rep.InstanceTypes[i] = it.Name
	}
	// The launch's cheapest offering is what the savings are judged on.
	for _, it := range opts {
		if o, ok := cheapestOffering(it, reqs); ok {
			rep.InstanceType, rep.Zone, rep.CapacityType, rep.Price = it.Name, o.Zone, o.CapacityType, o.Price
			break
		}
	}
	rep.Requirements = restrictTypes(reqs.NodeSelectorRequirements(), rep.InstanceTypes)
	return rep, ""
}

// cheaperOptions keeps the options whose worst-case launch price is below
// limit, in order; they must still satisfy minValues (Karpenter's
// RemoveInstanceTypeOptionsByPriceAndMinValues). The string says why
// nothing is left.
func cheaperOptions(opts []*catalog.InstanceType, reqs requirements.Requirements, limit float64,
	minValues []karpv1.NodeSelectorRequirementWithMinValues,
) ([]*catalog.InstanceType, string) {
	var out []*catalog.InstanceType
	for _, it := range opts {
		if worstLaunchPrice(it, reqs) < limit {
			out = append(out, it)
		}
	}
	if len(out) == 0 {
		return nil, "Can't replace with a cheaper node"
	}
	if _, ok := minValuesNeed(out, minValues); !ok {
		return nil, fmt.Sprintf("can't replace with a cheaper node: the %d instance type(s) cheaper than %.4f/h do not satisfy the nodepool's minValues (%s)",
			len(out), limit, describeMinValues(minValues))
	}
	return out, ""
}

// relaxedMinValues lowers each minValues to the number of values the
// simulation's options reach for its key, as Karpenter's BestEffort policy
// rewrites the NodeClaim's requirements when it relaxes them: the price
// filter must then keep as many values as the relaxed claim had, not drop
// minValues altogether.
func relaxedMinValues(opts []*catalog.InstanceType, minValues []karpv1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	out := make([]karpv1.NodeSelectorRequirementWithMinValues, len(minValues))
	for i, r := range minValues {
		seen := map[string]bool{}
		for _, it := range opts {
			for v := range scheduler.TypeValues(it, r.Key) {
				seen[v] = true
			}
		}
		out[i] = r
		if len(seen) < *r.MinValues {
			out[i].MinValues = new(len(seen))
		}
	}
	return out
}

// minValuesNeed is how many of opts, in order, it takes to satisfy every
// minValues (0 without any), and whether all of them do (Karpenter's
// SatisfiesMinValues; zone and capacity type values come from the types'
// offerings).
func minValuesNeed(opts []*catalog.InstanceType, minValues []karpv1.NodeSelectorRequirementWithMinValues) (int, bool) {
	if len(minValues) == 0 {
		return 0, true
	}
	seen := make([]map[string]bool, len(minValues))
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	for n, it := range opts {
		done := true
		for i, r := range minValues {
			for v := range scheduler.TypeValues(it, r.Key) {
				seen[i][v] = true
			}
			if len(seen[i]) < *r.MinValues {
				done = false
			}
		}
		if done {
			return n + 1, true
		}
	}
	return len(opts), false
}

func describeMinValues(rs []karpv1.NodeSelectorRequirementWithMinValues) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s: %d", r.Key, *r.MinValues)
	}
	return strings.Join(parts, ", ")
}

// offeringAllowed: an available offering whose zone and capacity type reqs
// allow; a reserved offering only when reqs pin its reservation (the
// scheduler pins each claim it places on reserved capacity to one
// reservation, and only such a claim launches into one).
func offeringAllowed(o catalog.Offering, reqs requirements.Requirements) bool {
	if !o.Available {
		return false
	}
	if o.CapacityType == karpv1.CapacityTypeReserved {
		if r := reqs.Get(karpv1.LabelCapacityReservationID); r == nil || !r.Has(o.ReservationID) {
			return false
		}
	}
	if r := reqs.Get(karpv1.LabelZone); r != nil && !r.Has(o.Zone) {
		return false
	}
	if r := reqs.Get(karpv1.LabelCapacityType); r != nil && !r.Has(o.CapacityType) {
		return false
	}
	return true
}

func cheapestOffering(it *catalog.InstanceType, reqs requirements.Requirements) (catalog.Offering, bool) {
	var best catalog.Offering
	found := false
	for _, o := range it.Offerings {
		if offeringAllowed(o, reqs) && (!found || o.Price < best.Price) {
			best, found = o, true
		}
	}
	return best, found
}

// allowsBoth: the replacement may launch spot and on-demand, by its
// capacity-type requirement or, without one, by its options' offerings
// (Karpenter's NodeClaim always carries the requirement, the offerings'
// types when the pool sets none). Consolidation then pins it to spot, as
// Karpenter does: a launch that fell back to on-demand could cost more
// than the nodes it replaces.
func allowsBoth(opts []*catalog.InstanceType, reqs requirements.Requirements) bool {
	var spot, od bool
	for _, it := range opts {
		for _, o := range it.Offerings {
			if offeringAllowed(o, reqs) {
				spot = spot || o.CapacityType == karpv1.CapacityTypeSpot
				od = od || o.CapacityType == karpv1.CapacityTypeOnDemand
			}
		}
	}
	return spot && od
}

// cheapestPrice is the type's cheapest allowed offering price, +Inf when
// it has none.
func cheapestPrice(it *catalog.InstanceType, reqs requirements.Requirements) float64 {
	if o, ok := cheapestOffering(it, reqs); ok {
		return o.Price
	}
	return math.Inf(1)
}

// worstLaunchPrice is the dearest allowed offering of the capacity type a
// launch of it would use, reserved before spot before on-demand
// (Karpenter's WorstLaunchPrice); +Inf when none is allowed.
func worstLaunchPrice(it *catalog.InstanceType, reqs requirements.Requirements) float64 {
	for _, ct := range []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		worst, found := 0.0, false
		for _, o := range it.Offerings {
			if o.CapacityType == ct && offeringAllowed(o, reqs) {
				worst, found = max(worst, o.Price), true
			}
		}
		if found {
			return worst
		}
	}
	return math.Inf(1)
}

// restrictTypes narrows the instance-type requirement to types (copying).
func restrictTypes(reqs []corev1.NodeSelectorRequirement, types []string) []corev1.NodeSelectorRequirement {
	out := make([]corev1.NodeSelectorRequirement, 0, len(reqs)+1)
	found := false
	for _, r := range reqs {
		if r.Key == karpv1.LabelInstanceType && r.Operator == corev1.NodeSelectorOpIn {
			r = corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: types}
			found = true
		}
		out = append(out, r)
	}
	if !found {
		out = append(out, corev1.NodeSelectorRequirement{Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: types})
	}
	return out
}
