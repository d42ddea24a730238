package aws_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// This file ports Karpenter v1.14.1's pkg/providers/instance/suite_test.go
// (CreateFleet errors, the offerings they take away, List) against the
// simulated region. Karpenter's Create gets the NodeClaim's instance types;
// Joiner's Launch gets the candidates the provisioner froze (every
// capacity type the claim allows) and picks the capacity type as Karpenter
// does (chooseLaunch). The filter cases are in
// karpenter_filter_internal_test.go.
//
// Ported elsewhere: "...ReservedCapacityReservation error" is
// TestFullReservationIsNotAnOfferingError; "should deprioritize subnets on
// subsequent launches after subnet IP exhaustion" is TestSubnetOutOfAddresses;
// the allocation strategies by default are TestCreateFleetCarriesTheSixtyCheapestOverrides;
// the EFA count of a launch is TestLaunchTemplateDataAsKarpenterWritesIt
// ("EFA requested") and TestInstanceTypesCompatibleWithTheClass (the class's
// efa-only interfaces).

// offeringAvailable reports whether p offers (type, zone, capacity type)
// for nc now.
func offeringAvailable(t *testing.T, p *joineraws.Provider, nc *awsv1.EC2NodeClass, itype, zone, ct string) bool {
	t.Helper()
	for _, o := range joineraws.InstanceTypeOf(t, p, nc, itype).Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o.Available
		}
	}
	t.Fatalf("no %s %s %s offering", itype, zone, ct)
	return false
}

func TestCreateFleetErrorsAsKarpenter(t *testing.T) {
	ctx := context.Background()
	const a, b = "us-east-1a", "us-east-1b"
	t.Run("should return an ICE error when all attempted instance types return an ICE error", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		for _, z := range []string{a, b} {
			for _, ct := range []string{"spot", "on-demand"} {
				e.sim.InjectCapacityError("m5.xlarge", z, ct, "InsufficientInstanceCapacity")
			}
		}
		_, err := e.provider.Launch(ctx, e.spec(t, "spot", []cloud.Candidate{cand("m5.xlarge", a, "spot"), cand("m5.xlarge", b, "spot")}))
		if !errors.Is(err, cloud.ErrInsufficientCapacity) {
			t.Fatalf("spot launch: %v, want insufficient capacity", err)
		}
		for _, z := range []string{a, b} {
			if offeringAvailable(t, e.provider, nc, "m5.xlarge", z, "spot") || !offeringAvailable(t, e.provider, nc, "m5.xlarge", z, "on-demand") {
				t.Errorf("%s: want spot unavailable and on-demand available after the spot launch", z)
			}
		}
		// The claim is planned again, on demand.
		_, err = e.provider.Launch(ctx, e.spec(t, "od", []cloud.Candidate{cand("m5.xlarge", a, "on-demand"), cand("m5.xlarge", b, "on-demand")}))
		if !errors.Is(err, cloud.ErrInsufficientCapacity) {
			t.Fatalf("on-demand launch: %v, want insufficient capacity", err)
		}
		for _, z := range []string{a, b} {
			if offeringAvailable(t, e.provider, nc, "m5.xlarge", z, "on-demand") {
				t.Errorf("%s: on-demand still available", z)
			}
		}
	})
	t.Run("should return an ICE error when spot instances are used and SpotSLR can't be created", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		for _, z := range []string{a, b} {
			e.sim.InjectCapacityError("m5.xlarge", z, "spot", "AuthFailure.ServiceLinkedRoleCreationNotPermitted")
		}
		_, err := e.provider.Launch(ctx, e.spec(t, "slr", []cloud.Candidate{cand("m5.xlarge", a, "spot"), cand("m5.xlarge", b, "spot")}))
		if !errors.Is(err, cloud.ErrInsufficientCapacity) {
			t.Fatalf("Launch: %v, want insufficient capacity", err)
		}
		// Every spot offering goes, other types' too; on-demand stays.
		for _, it := range []string{"m5.xlarge", "m5.large"} {
			for _, z := range []string{a, b} {
				if offeringAvailable(t, e.provider, nc, it, z, "spot") || !offeringAvailable(t, e.provider, nc, it, z, "on-demand") {
					t.Errorf("%s %s: want spot unavailable, on-demand available", it, z)
				}
			}
		}
	})
	t.Run("should return an ICE error when max fleet count is reached", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		e.sim.InjectCapacityError("m5.xlarge", a, "spot", "MaxFleetCountExceeded")
		_, err := e.provider.Launch(ctx, e.spec(t, "fleets", []cloud.Candidate{cand("m5.xlarge", a, "spot")}))
		if !errors.Is(err, cloud.ErrInsufficientCapacity) {
			t.Fatalf("Launch: %v, want insufficient capacity", err)
		}
		if offeringAvailable(t, e.provider, nc, "m5.xlarge", a, "spot") || !offeringAvailable(t, e.provider, nc, "m5.xlarge", b, "spot") ||
			!offeringAvailable(t, e.provider, nc, "m5.xlarge", a, "on-demand") {
			t.Error("want only the failed offering unavailable")
		}
	})
	t.Run("should not mark capacity reservations unavailable for RequestLimitExceeded CreateFleet errors", func(t *testing.T) {
		// Karpenter's case launches into a reservation; the throttled
		// fleet error takes nothing away and fails the launch for a retry.
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		e.sim.InjectCapacityError("m5.large", a, "on-demand", "RequestLimitExceeded")
		_, err := e.provider.Launch(ctx, e.spec(t, "throttled", []cloud.Candidate{cand("m5.large", a, "on-demand")}))
		if !errors.Is(err, cloud.ErrRejected) || errors.Is(err, cloud.ErrInsufficientCapacity) || errors.Is(err, cloud.ErrInvalidSpec) {
			t.Fatalf("Launch: %v, want a rejected attempt (a new one follows), neither capacity nor an invalid spec", err)
		}
		if !offeringAvailable(t, e.provider, nc, "m5.large", a, "on-demand") {
			t.Error("a throttled fleet took the offering away")
		}
	})
	t.Run("should return all NodePool-owned instances from List", func(t *testing.T) {
		e := newEnv(t)
		want := map[string]bool{}
		for _, tok := range []string{"l1", "l2", "l3"} {
			want[e.launch(t, e.spec(t, tok, []cloud.Candidate{cand("m5.large", a, "on-demand")})).ID] = true
		}
		got, err := e.provider.List(ctx, map[string]string{karpv1.TagNodePool: "default"})
		if err != nil || len(got) != len(want) {
			t.Fatalf("List = %d instances, %v; want %d", len(got), err, len(want))
		}
		for _, in := range got {
			if !want[in.ID] {
				t.Errorf("List returned %s, not launched here", in.ID)
			}
		}
	})
}

// TestSubnetExhaustionAsKarpenter ports "should handle subnet IP
// exhaustion correctly": a zone is unavailable (every type and capacity
// type) once every subnet the class has there ran out of addresses.
func TestSubnetExhaustionAsKarpenter(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		karpenter   string
		extra       int // more subnets in us-east-1a besides subnet-0sim0001
		exhaust     int // how many of us-east-1a's subnets run out
		unavailable bool
	}{
		{"zone unavailable when 1 subnet gets ICEd with 1 subnet in zone", 0, 1, true},
		{"zone available when only 1 subnet gets ICEd with multiple subnets in zone", 2, 1, false},
		{"zone unavailable when all subnets in zone get ICEd", 2, 3, true},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			cfg := sim.DefaultConfig()
			for i := 0; i < tc.extra; i++ {
				cfg.Subnets = append(cfg.Subnets, sim.Subnet{ID: "subnet-0sim1a0" + string(rune('2'+i)), Zone: "us-east-1a", AvailableIPs: 100,
					Tags: map[string]string{sim.DiscoveryTag: "sim"}})
			}
			e := newEnvWith(t, cfg)
			nc := e.ready(t, nodeClass())
			e.sim.InjectCapacityError("m5.xlarge", "us-east-1a", "spot", "InsufficientFreeAddressesInSubnet")
			r, err := e.provider.Resolve(ctx, nc)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.exhaust; i++ {
				// Each launch goes to the zone's best subnet left.
				req := e.spec(t, "exhaust"+string(rune('a'+i)), []cloud.Candidate{cand("m5.xlarge", "us-east-1a", "spot")})
				req.Spec.Subnets = e.provider.SubnetsByZone(r.Subnets)
				if _, err := e.provider.Launch(ctx, req); !errors.Is(err, cloud.ErrInsufficientCapacity) {
					t.Fatalf("launch %d: %v, want insufficient capacity", i, err)
				}
			}
			for _, it := range []string{"m5.xlarge", "m5.large"} {
				if got := !offeringAvailable(t, e.provider, nc, it, "us-east-1a", "on-demand"); got != tc.unavailable {
					t.Errorf("%s on-demand in us-east-1a unavailable = %v, want %v", it, got, tc.unavailable)
				}
				if !offeringAvailable(t, e.provider, nc, it, "us-east-1b", "on-demand") {
					t.Errorf("%s on-demand in us-east-1b unavailable", it)
				}
			}
		})
	}
}

// TestCreateFleetTruncationAsKarpenter ports the cloudprovider suite's
// "MinValues" context ("CreateFleet input should respect minValues for In
// operator requirement / Exists operator requirement / multiple keys from
// NodePool"): Karpenter keeps 60 instance types (its truncation respects
// minValues) and sends every offering of each, so a claim that needs, say,
// 40 distinct types still has them in the fleet. The provisioner's
// candidates already meet the claim's minValues; the launch must not cut
// them to fewer types.
func TestCreateFleetTruncationAsKarpenter(t *testing.T) {
	e := newEnv(t)
	var cands []cloud.Candidate
	types := map[string]bool{}
	for _, it := range []string{"m5", "c5", "r5", "m6i", "c6i", "r6i", "m5a", "c5a", "r5a", "m6a"} {
		for _, size := range []string{"large", "xlarge", "2xlarge", "4xlarge"} {
			name := it + "." + size
			types[name] = true
			for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
				cands = append(cands, cand(name, z, "on-demand"))
			}
		}
	}
	e.launch(t, e.spec(t, "minvalues", cands))
	fleet, _ := e.sim.LastRequest("CreateFleet")
	got, overrides := map[string]bool{}, 0
	for _, cfg := range fleet.Sub("LaunchTemplateConfigs") {
		for _, o := range cfg.Sub("Overrides") {
			got[o.Get("InstanceType")] = true
			overrides++
		}
	}
	if len(got) != len(types) || overrides != len(cands) {
		t.Errorf("CreateFleet offers %d of the %d instance types in %d overrides, want all of them in %d", len(got), len(types), overrides, len(cands))
	}
}

// TestMixedCapacityLaunchAsKarpenter: a claim that allows spot and
// on-demand gets candidates of both (the provisioner's), and the launch
// chooses as Karpenter's Create does: the spot offering filter, then spot
// when any spot offering is left, else on-demand. Karpenter's "should
// return an ICE error when all attempted instance types return an ICE
// error" with both capacity types in one spec: Joiner's launch goes on to
// on-demand at once (a fallback round), where Karpenter's second Create
// does; the offerings end up as Karpenter's.
func TestMixedCapacityLaunchAsKarpenter(t *testing.T) {
	ctx := context.Background()
	const a, b = "us-east-1a", "us-east-1b"
	overrides := func(t *testing.T, e *env) (string, []string) {
		t.Helper()
		fleet, _ := e.sim.LastRequest("CreateFleet")
		var got []string
		for _, cfg := range fleet.Sub("LaunchTemplateConfigs") {
			for _, o := range cfg.Sub("Overrides") {
				got = append(got, o.Get("InstanceType")+"/"+o.Get("AvailabilityZone"))
			}
		}
		return fleet.Get("TargetCapacitySpecification.DefaultTargetCapacityType"), got
	}
	mixed := func() []cloud.Candidate {
		dear := cand("m5.xlarge", a, "spot")
		dear.Price = cand("m5.large", a, "on-demand").Price + 0.01 // dearer than the cheapest on-demand offering
		return []cloud.Candidate{cand("m5.large", a, "spot"), cand("m5.large", b, "spot"), cand("m5.large", a, "on-demand"),
			cand("m5.large", b, "on-demand"), dear, cand("m5.xlarge", a, "on-demand")}
	}
	t.Run("spot launch of the spot offerings no dearer than the cheapest on-demand one", func(t *testing.T) {
		e := newEnv(t)
		inst := e.launch(t, e.spec(t, "mixed", mixed()))
		capType, got := overrides(t, e)
		if inst.CapacityType != "spot" || capType != "spot" || !slices.Equal(got, []string{"m5.large/" + a, "m5.large/" + b}) {
			t.Errorf("launched %s; CreateFleet %s %v, want spot [m5.large/%s m5.large/%s]", inst.CapacityType, capType, got, a, b)
		}
	})
	t.Run("every spot offering dearer than on-demand: on-demand launch", func(t *testing.T) {
		e := newEnv(t)
		cands := mixed()
		for i := range cands {
			if cands[i].CapacityType == "spot" {
				cands[i].Price = 10
			}
		}
		inst := e.launch(t, e.spec(t, "dear", cands))
		if capType, got := overrides(t, e); inst.CapacityType != "on-demand" || capType != "on-demand" || len(got) != 3 {
			t.Errorf("launched %s; CreateFleet %s %v, want on-demand with the 3 on-demand offerings", inst.CapacityType, capType, got)
		}
	})
	t.Run("minValues keeps the dear spot offerings", func(t *testing.T) {
		e := newEnv(t)
		req := e.spec(t, "minvalues", mixed())
		req.Spec.MinValues = true
		e.launch(t, req)
		if capType, got := overrides(t, e); capType != "spot" || !slices.Contains(got, "m5.xlarge/"+a) {
			t.Errorf("CreateFleet %s %v, want spot with m5.xlarge/%s", capType, got, a)
		}
	})
	t.Run("spot refused: on-demand in the same launch", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		for _, z := range []string{a, b} {
			e.sim.InjectCapacityError("m5.large", z, "spot", "InsufficientInstanceCapacity")
		}
		inst := e.launch(t, e.spec(t, "fallback", mixed()))
		if capType, _ := overrides(t, e); inst.CapacityType != "on-demand" || capType != "on-demand" || e.sim.Calls("CreateFleet") != 2 {
			t.Errorf("launched %s after %d CreateFleet calls (last %s), want on-demand after 2", inst.CapacityType, e.sim.Calls("CreateFleet"), capType)
		}
		if offeringAvailable(t, e.provider, nc, "m5.large", a, "spot") || !offeringAvailable(t, e.provider, nc, "m5.large", a, "on-demand") {
			t.Error("want m5.large spot unavailable and on-demand available")
		}
	})
	t.Run("should return an ICE error when all attempted instance types return an ICE error", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		for _, z := range []string{a, b} {
			for _, ct := range []string{"spot", "on-demand"} {
				e.sim.InjectCapacityError("m5.xlarge", z, ct, "InsufficientInstanceCapacity")
			}
		}
		_, err := e.provider.Launch(ctx, e.spec(t, "ice", []cloud.Candidate{cand("m5.xlarge", a, "spot"), cand("m5.xlarge", b, "spot"),
			cand("m5.xlarge", a, "on-demand"), cand("m5.xlarge", b, "on-demand")}))
		if !errors.Is(err, cloud.ErrInsufficientCapacity) {
			t.Fatalf("Launch: %v, want insufficient capacity", err)
		}
		for _, z := range []string{a, b} {
			for _, ct := range []string{"spot", "on-demand"} {
				if offeringAvailable(t, e.provider, nc, "m5.xlarge", z, ct) {
					t.Errorf("m5.xlarge %s %s still available", z, ct)
				}
			}
		}
	})
}
