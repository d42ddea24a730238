package aws

import (
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-dev/joiner/cloud"
)

// This file ports Karpenter v1.14.1's pkg/providers/instance/filter/
// filter_test.go. Karpenter filters the NodeClaim's instance types before
// CreateFleet; Joiner's launch gets offerings (candidates) already
// compatible with the claim's requirements and available (the
// provisioner's candidates, spot and on-demand alike), so the filters left
// run in chooseLaunch: chooseReserved (the capacity reservation type,
// capacity block and reserved offering filters), the exotic instance
// filter (Candidate.Exotic, from catalog.InstanceType.Exotic: its
// per-resource cases are cloud/catalog's TestExoticAsKarpenter) and the
// spot offering filter, both skipped when the spec's MinValues is set.
//
// Not here: CompatibleAvailableFilter (7 cases): the provisioner hands
// over only compatible, available offerings of types whose allocatable
// fits the claim (coordinator/provisioner candidates, coordinator/scheduler).

func reservedCand(id, itype, zone, typ string, interruptible bool, price float64) cloud.Candidate {
	return cloud.Candidate{InstanceType: itype, Zone: zone, CapacityType: "reserved", Price: price, ReservationID: id,
		ReservationType: typ, Interruptible: interruptible}
}

func reservationIDs(cs []cloud.Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ReservationID)
	}
	return out
}

// TestReservedFiltersAsKarpenter: CapacityReservationTypeFilter,
// CapacityBlockFilter and ReservedOfferingFilter.
func TestReservedFiltersAsKarpenter(t *testing.T) {
	p := &Provider{res: newReservationState()}
	p.res.counts = map[string]int{}
	kinds := []struct {
		name          string
		typ           string
		interruptible bool
	}{{"default", "default", false}, {"capacity-block", "capacity-block", false}, {"default interruptible", "default", true}}
	type row struct {
		karpenter string
		cands     []cloud.Candidate
		want      []string
	}
	var rows []row
	for _, k := range kinds {
		// "should select the partition with the cheapest instance type":
		// the kind's types at 5 and 10, every other kind at 10 only.
		cands := []cloud.Candidate{reservedCand("cheap-"+k.name, "m5.large", "us-east-1a", k.typ, k.interruptible, 5),
			reservedCand("dear-"+k.name, "m5.xlarge", "us-east-1a", k.typ, k.interruptible, 10)}
		want := []string{"cheap-" + k.name, "dear-" + k.name}
		if k.typ == "capacity-block" {
			want = want[:1] // one capacity block per fleet
		}
		for _, o := range kinds {
			if o != k {
				cands = append(cands, reservedCand("other-"+o.name, "c5.large", "us-east-1a", o.typ, o.interruptible, 10))
			}
		}
		rows = append(rows, row{"CapacityReservationTypeFilter: should select the partition with the cheapest instance type: when the type is " + k.name, cands, want})
		// "should filter out offerings of other types for the selected
		// instance types": a type with offerings of every kind keeps the
		// selected kind's.
		pin := []cloud.Candidate{reservedCand("pin-"+k.name, "m5.large", "us-east-1a", k.typ, k.interruptible, 1)}
		for _, o := range kinds {
			if o != k {
				pin = append(pin, reservedCand("filter-"+o.name, "m5.xlarge", "us-east-1b", o.typ, o.interruptible, 2))
			}
		}
		rows = append(rows, row{"CapacityReservationTypeFilter: should only keep offerings of the selected type: when the type is " + k.name, pin,
			[]string{"pin-" + k.name}})
	}
	// "should prioritize ..." at equal prices: default, then capacity
	// blocks, then interruptible ODCRs.
	for _, tc := range []struct{ name, selected, rejected string }{
		{"default and capacity-block", "default", "capacity-block"},
		{"capacity-block and interruptible default", "capacity-block", "default interruptible"},
		{"default and interruptible default", "default", "default interruptible"},
	} {
		kind := func(n string) (string, bool) {
			for _, k := range kinds {
				if k.name == n {
					return k.typ, k.interruptible
				}
			}
			t.Fatalf("kind %s", n)
			return "", false
		}
		st, si := kind(tc.selected)
		rt, ri := kind(tc.rejected)
		rows = append(rows, row{"CapacityReservationTypeFilter: should prioritize when the two capacity reservations are " + tc.name,
			[]cloud.Candidate{reservedCand("rejected", "c5.large", "us-east-1a", rt, ri, 5), reservedCand("selected", "m5.large", "us-east-1a", st, si, 5)},
			[]string{"selected"}})
	}
	onDemand := cloud.Candidate{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", Price: 1}
	rows = append(rows,
		row{"CapacityReservationTypeFilter: should not filter instance types when the nodeclaim is not compatible with capacity type reserved",
			[]cloud.Candidate{onDemand}, nil},
		row{"CapacityBlockFilter: should select the instance type with the cheapest capacity-block offering", []cloud.Candidate{
			reservedCand("cheap-1", "m5.large", "us-east-1a", "capacity-block", false, 1), reservedCand("cheap-10", "m5.large", "us-east-1b", "capacity-block", false, 10),
			reservedCand("dear-2", "m5.xlarge", "us-east-1a", "capacity-block", false, 2), reservedCand("dear-10", "m5.xlarge", "us-east-1b", "capacity-block", false, 10)},
			[]string{"cheap-1"}},
		// The "cheapest available" and "cheapest compatible" entries:
		// the unavailable and incompatible offerings never become
		// candidates, so the cheapest candidate is the answer.
		row{"CapacityBlockFilter: should select the cheapest reservation", []cloud.Candidate{
			reservedCand("expensive", "m5.large", "us-east-1b", "capacity-block", false, 2), reservedCand("cheapest", "m5.large", "us-east-1a", "capacity-block", false, 1)},
			[]string{"cheapest"}},
		row{"CapacityBlockFilter: should select the cheapest available reservation", []cloud.Candidate{
			reservedCand("expensive", "m5.large", "us-east-1b", "capacity-block", false, 2), reservedCand("cheapest-available", "m5.large", "us-east-1a", "capacity-block", false, 1.5)},
			[]string{"cheapest-available"}},
		row{"CapacityBlockFilter: should select the cheapest compatible reservation", []cloud.Candidate{
			reservedCand("expensive", "m5.large", "us-east-1b", "capacity-block", false, 2), reservedCand("cheapest-compatible", "m5.large", "us-east-1a", "capacity-block", false, 1.5)},
			[]string{"cheapest-compatible"}},
		row{"CapacityBlockFilter: shouldn't filter instance types when the capacity reservation type is default", []cloud.Candidate{
			reservedCand("cheap", "m5.large", "us-east-1a", "default", false, 1), reservedCand("dear", "m5.xlarge", "us-east-1a", "default", false, 2)},
			[]string{"cheap", "dear"}},
		row{"CapacityBlockFilter: shouldn't filter instance types when the capacity reservation type is default interruptible", []cloud.Candidate{
			reservedCand("cheap", "m5.large", "us-east-1a", "default", true, 1), reservedCand("dear", "m5.xlarge", "us-east-1a", "default", true, 2)},
			[]string{"cheap", "dear"}},
		row{"CapacityBlockFilter: shouldn't filter instance types when the requirements aren't compatible with capacity type reserved",
			[]cloud.Candidate{onDemand}, nil},
		row{"ReservedOfferingFilter: shouldn't filter instance types if there are no available reserved offerings",
			[]cloud.Candidate{onDemand, {InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot", Price: 0.5}}, nil},
		row{"ReservedOfferingFilter: shouldn't filter instance types if the requirements are not compatible with reserved offerings",
			[]cloud.Candidate{onDemand}, nil},
	)
	for _, tc := range rows {
		t.Run(tc.karpenter, func(t *testing.T) {
			if got := reservationIDs(p.chooseReserved(tc.cands)); !slices.Equal(got, tc.want) {
				t.Errorf("reservations %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("ReservedOfferingFilter: should only include one reserved offering per instance pool", func(t *testing.T) {
		p := &Provider{res: newReservationState()}
		p.res.counts = map[string]int{"cr-1a-small": 1, "cr-1a-big": 5, "cr-1b": 2}
		got := reservationIDs(p.chooseReserved([]cloud.Candidate{
			reservedCand("cr-1a-small", "m5.large", "us-east-1a", "default", false, 1),
			reservedCand("cr-1a-big", "m5.large", "us-east-1a", "default", false, 1),
			reservedCand("cr-1b", "m5.large", "us-east-1b", "default", false, 1)}))
		if want := []string{"cr-1a-big", "cr-1b"}; !slices.Equal(got, want) {
			t.Errorf("reservations %v, want the most capacity per zone %v", got, want)
		}
	})
}

// TestSpotOfferingFilterAsKarpenter: spot offerings priced above the
// cheapest on-demand one are dropped when both capacity types are offered
// and the claim has no minValues.
func TestSpotOfferingFilterAsKarpenter(t *testing.T) {
	c := func(itype, zone, ct string, price float64) cloud.Candidate {
		return cloud.Candidate{InstanceType: itype, Zone: zone, CapacityType: ct, Price: price}
	}
	for _, tc := range []struct {
		karpenter string
		cands     []cloud.Candidate
		minValues bool
		capType   string
		want      []string // type/zone of the overrides
	}{
		{"should filter out expensive spot offerings while keeping instance types with remaining offerings", []cloud.Candidate{
			c("m5.large", "us-east-1a", "spot", 0.5), c("m5.large", "us-east-1b", "spot", 1.5), c("m5.large", "us-east-1a", "on-demand", 1.0),
			c("m5.xlarge", "us-east-1a", "on-demand", 2.0)}, false, "spot", []string{"m5.large/us-east-1a"}},
		{"should reject instance types with no remaining offerings after filtering", []cloud.Candidate{
			c("m5.large", "us-east-1a", "spot", 1.5), c("c5.large", "us-east-1a", "spot", 2.5), c("m5.large", "us-east-1b", "on-demand", 1.0)},
			false, "on-demand", []string{"m5.large/us-east-1b"}},
		{"should not filter when no on-demand offerings exist", []cloud.Candidate{
			c("m5.large", "us-east-1a", "spot", 1.5), c("c5.large", "us-east-1a", "spot", 2.5)}, false, "spot", []string{"m5.large/us-east-1a", "c5.large/us-east-1a"}},
		// The claim allows spot only: the provisioner hands over no
		// on-demand candidate, so nothing is compared.
		{"should not filter when requirements don't support both spot and on-demand", []cloud.Candidate{
			c("m5.large", "us-east-1a", "spot", 5), c("c5.large", "us-east-1a", "spot", 6)}, false, "spot", []string{"m5.large/us-east-1a", "c5.large/us-east-1a"}},
		// Both types stay; Karpenter then launches spot (getCapacityType).
		{"should not filter when minValues is set", []cloud.Candidate{
			c("od-instance", "us-east-1a", "on-demand", 5), c("expensive-spot-instance", "us-east-1a", "spot", 10)},
			true, "spot", []string{"expensive-spot-instance/us-east-1a"}},
		// Beyond the filter's table: the cheapest on-demand offering is
		// the bound, equal prices stay, and every spot offering dearer
		// than it makes the launch on-demand (Create's capacity type).
		{"spot priced at the cheapest on-demand offering is kept", []cloud.Candidate{
			c("m5.large", "us-east-1a", "on-demand", 1), c("m5.large", "us-east-1a", "spot", 1), c("c5.large", "us-east-1a", "spot", 1.01)},
			false, "spot", []string{"m5.large/us-east-1a"}},
		{"no spot offering at or below on-demand: on-demand launch of every on-demand offering", []cloud.Candidate{
			c("m5.large", "us-east-1a", "spot", 3), c("m5.large", "us-east-1a", "on-demand", 1), c("c5.large", "us-east-1b", "on-demand", 2)},
			false, "on-demand", []string{"m5.large/us-east-1a", "c5.large/us-east-1b"}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			capType, got := (&Provider{res: newReservationState()}).chooseLaunch(tc.cands, tc.minValues)
			if names := overrideNames(got); capType != tc.capType || !slices.Equal(names, tc.want) {
				t.Errorf("%s %v, want %s %v", capType, names, tc.capType, tc.want)
			}
		})
	}
}

func overrideNames(cs []cloud.Candidate) []string {
	var names []string
	for _, o := range cs {
		names = append(names, o.InstanceType+"/"+o.Zone)
	}
	return names
}

// TestExoticInstanceFilterAsKarpenter: exotic types (metal, GPUs,
// accelerators; Candidate.Exotic) are offered only when no other type is
// left, or when the claim has minValues. The per-resource entries
// ("should reject instance types with exotic resources", "should not
// reject instance types with normal resources") are cloud/catalog's
// TestExoticAsKarpenter, which decides Candidate.Exotic.
func TestExoticInstanceFilterAsKarpenter(t *testing.T) {
	generic := cloud.Candidate{InstanceType: "generic-instance-type", Zone: "us-east-1a", CapacityType: "on-demand", Price: 2}
	exotic := cloud.Candidate{InstanceType: "exotic-instance-type", Zone: "us-east-1a", CapacityType: "on-demand", Price: 1, Exotic: true}
	metal := cloud.Candidate{InstanceType: "generic-instance-type-metal", Zone: "us-east-1a", CapacityType: "on-demand", Price: 1.5, Exotic: true}
	for _, tc := range []struct {
		karpenter string
		cands     []cloud.Candidate
		minValues bool
		want      []string
	}{
		{"should reject instance types with exotic resources", []cloud.Candidate{generic, exotic}, false, []string{"generic-instance-type"}},
		{"should reject metal instance types", []cloud.Candidate{generic, metal}, false, []string{"generic-instance-type"}},
		{"should include metal instance types and those with exotic resources if there are no other options", []cloud.Candidate{exotic, metal},
			false, []string{"exotic-instance-type", "generic-instance-type-metal"}},
		{"should include instance types with exotic resources if minValues is set", []cloud.Candidate{generic, exotic},
			true, []string{"exotic-instance-type", "generic-instance-type"}},
		// Beyond the filter's table: the filter runs before the spot
		// offering filter and the capacity type choice, so a cheap exotic
		// spot offering does not make a launch of generic types spot.
		{"an exotic spot offering neither launches nor bounds the capacity type", []cloud.Candidate{generic,
			{InstanceType: "exotic-instance-type", Zone: "us-east-1a", CapacityType: "spot", Price: 0.1, Exotic: true}}, false,
			[]string{"generic-instance-type"}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			_, got := (&Provider{res: newReservationState()}).chooseLaunch(tc.cands, tc.minValues)
			var types []string
			for _, c := range got {
				types = append(types, c.InstanceType)
			}
			if !slices.Equal(types, tc.want) {
				t.Errorf("overrides %v, want %v", types, tc.want)
			}
		})
	}
}

// TestOpenReservationIsOnDemandAsKarpenter: "should treat instances which
// launched into open ODCRs as on-demand when the ReservedCapacity gate is
// disabled": an instance in an open reservation (it did not target it) is
// on-demand.
func TestOpenReservationIsOnDemandAsKarpenter(t *testing.T) {
	for _, spec := range []*ec2types.CapacityReservationSpecificationResponse{nil,
		{CapacityReservationPreference: ec2types.CapacityReservationPreferenceOpen}} {
		in := instanceFrom(ec2types.Instance{InstanceId: aws.String("i-1"), InstanceType: "m5.large",
			CapacityReservationId: aws.String("cr-foo"), CapacityReservationSpecification: spec})
		if in.CapacityType != "on-demand" || in.ReservationID != "" {
			t.Errorf("preference %+v: capacity type %q, reservation %q; want on-demand without a reservation", spec, in.CapacityType, in.ReservationID)
		}
	}
}

// TestTruncationBeforeCapacityTypeAsKarpenter: Karpenter keeps the 60
// instance types whose cheapest offering of any capacity type is cheapest
// (InstanceTypes.Truncate after the filters), then picks the capacity
// type: a type kept for its cheap on-demand offering takes a place a spot
// type would have had, and the spot launch offers 59 types.
func TestTruncationBeforeCapacityTypeAsKarpenter(t *testing.T) {
	var cands []cloud.Candidate
	for i := 1; i <= MaxInstanceTypes; i++ {
		cands = append(cands, cloud.Candidate{InstanceType: "spot-" + strconv.Itoa(i), Zone: "us-east-1a", CapacityType: "spot", Price: float64(i)})
	}
	cands = append(cands, cloud.Candidate{InstanceType: "cheap-od", Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.5})
	// minValues: the spot offering filter would otherwise drop every spot
	// offering dearer than 0.5.
	capType, got := (&Provider{res: newReservationState()}).chooseLaunch(cands, true)
	if capType != "spot" || len(got) != MaxInstanceTypes-1 || slices.ContainsFunc(got, func(c cloud.Candidate) bool { return c.InstanceType == "spot-60" }) {
		t.Errorf("%s launch of %d overrides (%v), want spot of spot-1 to spot-59", capType, len(got), overrideNames(got))
	}
}
