package aws_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
)

// This file ports Karpenter v1.14.1's pkg/cache suite (the unavailable
// offerings cache) and the offerings cases of
// pkg/providers/instancetype/suite_test.go ("Insufficient Capacity Error
// Cache", "Offerings") against the simulated region (zones us-east-1a to
// -c, a subnet each). Karpenter's cache is asked directly; Joiner's is
// read through what InstanceTypes reports, which is what the scheduler
// plans with. Cases that need the provisioner and the launch together are
// in coordinator/provisioner (karpenter_instancetype_test.go).
//
// Not ported: "should increase sequence number when unavailability
// changes" and the Provider Cache cases about ICE cache misses: Joiner's
// InstanceTypes recomputes every offering's availability on each call, so
// there is no cached listing for a sequence number to invalidate (a mark
// shows in the next listing, which the cases below check). Karpenter's
// Delete (used to end a shortage early in "...with Insufficient Capacity
// Error Cache expiry") has no counterpart: entries end with their TTL.

const zoneA, zoneB, zoneC = "us-east-1a", "us-east-1b", "us-east-1c"

// off names an offering.
type off struct{ it, ct, zone string }

// availableOfferings are the offerings p reports available for nc.
func availableOfferings(t *testing.T, p *joineraws.Provider, nc *awsv1.EC2NodeClass) map[off]bool {
	t.Helper()
	its, err := p.InstanceTypes(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[off]bool{}
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.Available {
				out[off{it.Name, o.CapacityType, o.Zone}] = true
			}
		}
	}
	return out
}

// capacityTypesAndZones are the capacity types and zones of offerings.
func capacityTypesAndZones(offs map[off]bool) (cts, zones []string) {
	ct, z := map[string]bool{}, map[string]bool{}
	for o := range offs {
		ct[o.ct], z[o.zone] = true, true
	}
	return slices.Sorted(maps.Keys(ct)), slices.Sorted(maps.Keys(z))
}

// subnetIn is nc's subnet in zone.
func subnetIn(t *testing.T, nc *awsv1.EC2NodeClass, zone string) string {
	t.Helper()
	for _, s := range nc.Status.Subnets {
		if s.Zone == zone {
			return s.ID
		}
	}
	t.Fatalf("no subnet in %s", zone)
	return ""
}

// TestUnavailableOfferingCacheAsKarpenter ports pkg/cache's "Unavailable
// Offering Cache" context.
func TestUnavailableOfferingCacheAsKarpenter(t *testing.T) {
	ctx := context.Background()
	key := func(it, zone, ct string) cloud.OfferingKey {
		return cloud.OfferingKey{InstanceType: it, Zone: zone, CapacityType: ct}
	}
	t.Run("should mark offerings as unavailable when calling MarkUnavailable", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		check := func(step string, largeOD1a, xlargeSpot1b bool) {
			t.Helper()
			if got := !offeringAvailable(t, e.provider, nc, "m5.large", zoneA, "on-demand"); got != largeOD1a {
				t.Errorf("%s: m5.large on-demand %s unavailable = %v, want %v", step, zoneA, got, largeOD1a)
			}
			if got := !offeringAvailable(t, e.provider, nc, "m5.xlarge", zoneB, "spot"); got != xlargeSpot1b {
				t.Errorf("%s: m5.xlarge spot %s unavailable = %v, want %v", step, zoneB, got, xlargeSpot1b)
			}
		}
		check("initially", false, false)
		e.provider.MarkUnavailable(key("m5.large", zoneA, "on-demand"), "test")
		check("m5.large on-demand marked", true, false)
		e.provider.MarkUnavailable(key("m5.large", zoneB, "on-demand"), "test") // an unrelated offering
		check("m5.large on-demand in another zone marked", true, false)
		e.provider.MarkUnavailable(key("m5.xlarge", zoneB, "spot"), "test")
		check("m5.xlarge spot marked", true, true)
	})
	t.Run("should mark offerings as unavailable with fleet error reasons", func(t *testing.T) {
		// The fleet error marks the offering it names, and only it.
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		for i, k := range []cloud.OfferingKey{key("m5.large", zoneA, "on-demand"), key("m5.large", zoneB, "on-demand"), key("m5.xlarge", zoneB, "spot")} {
			e.sim.InjectCapacityError(k.InstanceType, k.Zone, k.CapacityType, "InsufficientInstanceCapacity")
			_, err := e.provider.Launch(ctx, e.spec(t, "ice"+string(rune('a'+i)), []cloud.Candidate{cand(k.InstanceType, k.Zone, k.CapacityType)}))
			if !errors.Is(err, cloud.ErrInsufficientCapacity) {
				t.Fatalf("launch of %s: %v, want insufficient capacity", k, err)
			}
		}
		got := availableOfferings(t, e.provider, nc)
		for k, want := range map[off]bool{{"m5.large", "on-demand", zoneA}: false, {"m5.large", "on-demand", zoneB}: false,
			{"m5.xlarge", "spot", zoneB}: false, {"m5.large", "spot", zoneA}: true, {"m5.xlarge", "on-demand", zoneB}: true, {"m5.large", "on-demand", zoneC}: true} {
			if got[k] != want {
				t.Errorf("%s available = %v, want %v", k, got[k], want)
			}
		}
	})
	t.Run("should mark offerings as unavailable when calling MarkCapacityTypeUnavailable", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		for _, step := range []struct {
			mark string
			want []string
		}{{"", []string{"on-demand", "spot"}}, {"spot", []string{"on-demand"}}, {"on-demand", nil}} {
			if step.mark != "" {
				e.provider.MarkCapacityTypeUnavailable(step.mark)
			}
			if got, _ := capacityTypesAndZones(availableOfferings(t, e.provider, nc)); !slices.Equal(got, step.want) {
				t.Errorf("after marking %q: capacity types %v available, want %v", step.mark, got, step.want)
			}
		}
	})
	t.Run("should mark offerings as unavailable when calling MarkSubnetUnavailable", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		e.provider.MarkSubnetUnavailable(subnetIn(t, nc, zoneA))
		got := availableOfferings(t, e.provider, nc)
		for k, want := range map[off]bool{{"m5.large", "on-demand", zoneA}: false, {"m5.xlarge", "on-demand", zoneA}: false,
			{"m5.xlarge", "spot", zoneA}: false, {"m5.xlarge", "spot", zoneB}: true} {
			if got[k] != want {
				t.Errorf("%s available = %v, want %v", k, got[k], want)
			}
		}
	})
	// Beyond the suite: entries last Karpenter's 3 minutes, and marking
	// again restarts them (its cache's SetDefault).
	t.Run("entries end with their TTL; marking again extends it", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		k := key("m5.large", zoneA, "on-demand")
		e.provider.MarkUnavailable(k, "test")
		e.clock.Add(2 * time.Minute)
		e.provider.MarkUnavailable(k, "test")
		e.clock.Add(2 * time.Minute)
		if offeringAvailable(t, e.provider, nc, "m5.large", zoneA, "on-demand") {
			t.Error("available 2 min after it was marked again")
		}
		e.clock.Add(time.Minute)
		if !offeringAvailable(t, e.provider, nc, "m5.large", zoneA, "on-demand") {
			t.Error("still unavailable 3 min after the last mark")
		}
	})
}

// TestInsufficientCapacityErrorCacheAsKarpenter ports the instancetype
// suite's "Insufficient Capacity Error Cache" cases that ask the instance
// types (the ones that provision again are in coordinator/provisioner).
func TestInsufficientCapacityErrorCacheAsKarpenter(t *testing.T) {
	ctx := context.Background()
	t.Run("should return all instance types, even though with no offerings due to Insufficient Capacity Error", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		var cands []cloud.Candidate
		for _, z := range []string{zoneA, zoneB, zoneC} {
			for _, ct := range []string{"on-demand", "spot"} {
				e.sim.InjectCapacityError("m5.xlarge", z, ct, "InsufficientInstanceCapacity")
				cands = append(cands, cand("m5.xlarge", z, ct))
			}
		}
		if _, err := e.provider.Launch(ctx, e.spec(t, "ice", cands)); !errors.Is(err, cloud.ErrInsufficientCapacity) {
			t.Fatalf("Launch: %v, want insufficient capacity", err)
		}
		it := joineraws.InstanceTypeOf(t, e.provider, nc, "m5.xlarge") // still listed
		for _, o := range it.Offerings {
			if o.Available {
				t.Errorf("m5.xlarge %s %s still available", o.CapacityType, o.Zone)
			}
		}
	})
	t.Run("should not return an offering when marking an offering as unavailable in the Insufficient Capacity Error Cache", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		m5Large := func() []off {
			var out []off
			for o := range availableOfferings(t, e.provider, nc) {
				if o.it == "m5.large" {
					out = append(out, o)
				}
			}
			return out
		}
		mark := func(it, zone, ct string) {
			e.provider.MarkUnavailable(cloud.OfferingKey{InstanceType: it, Zone: zone, CapacityType: ct}, "test")
		}
		if n := len(m5Large()); n != 6 {
			t.Fatalf("m5.large has %d available offerings, want 6 (3 zones, spot and on-demand)", n)
		}
		mark("m5.xlarge", zoneA, "spot")
		mark("m5.xlarge", zoneB, "spot")
		if n := len(m5Large()); n != 6 {
			t.Errorf("after marking m5.xlarge: m5.large has %d available offerings, want 6", n)
		}
		mark("m5.large", zoneA, "spot")
		if got := m5Large(); len(got) != 5 || slices.Contains(got, off{"m5.large", "spot", zoneA}) {
			t.Errorf("after marking m5.large spot %s: %v", zoneA, got)
		}
		mark("m5.large", zoneB, "on-demand")
		mark("m5.large", zoneC, "on-demand")
		if got := m5Large(); len(got) != 3 || slices.Contains(got, off{"m5.large", "on-demand", zoneB}) || slices.Contains(got, off{"m5.large", "on-demand", zoneC}) {
			t.Errorf("after marking m5.large on-demand %s and %s: %v", zoneB, zoneC, got)
		}
	})
	t.Run("should not return a capacity type when marking a capacity type as unavailable in the Insufficient Capacity Error Cache", func(t *testing.T) {
		// Karpenter marks spot when EC2 may not create the spot
		// service-linked role: here through that fleet error.
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		if got, _ := capacityTypesAndZones(availableOfferings(t, e.provider, nc)); !slices.Equal(got, []string{"on-demand", "spot"}) {
			t.Fatalf("initially capacity types %v available", got)
		}
		e.sim.InjectCapacityError("m5.large", zoneA, "spot", "AuthFailure.ServiceLinkedRoleCreationNotPermitted")
		if _, err := e.provider.Launch(ctx, e.spec(t, "slr", []cloud.Candidate{cand("m5.large", zoneA, "spot")})); !errors.Is(err, cloud.ErrInsufficientCapacity) {
			t.Fatalf("Launch: %v, want insufficient capacity", err)
		}
		if got, _ := capacityTypesAndZones(availableOfferings(t, e.provider, nc)); !slices.Equal(got, []string{"on-demand"}) {
			t.Errorf("capacity types %v available, want on-demand alone", got)
		}
	})
	t.Run("should not return a zone when marking a zone as unavailable in the Insufficient Capacity Error Cache", func(t *testing.T) {
		e := newEnv(t)
		nc := e.ready(t, nodeClass())
		if _, got := capacityTypesAndZones(availableOfferings(t, e.provider, nc)); !slices.Equal(got, []string{zoneA, zoneB, zoneC}) {
			t.Fatalf("initially zones %v available", got)
		}
		e.provider.MarkSubnetUnavailable(subnetIn(t, nc, zoneA))
		if _, got := capacityTypesAndZones(availableOfferings(t, e.provider, nc)); !slices.Equal(got, []string{zoneB, zoneC}) {
			t.Errorf("zones %v available, want %s and %s", got, zoneB, zoneC)
		}
	})
}

// TestOfferingsAsKarpenter ports the instancetype suite's "Offerings"
// context: "should create a single offering per instance pool" (one
// offering per zone and capacity type of each type, no duplicates).
func TestOfferingsAsKarpenter(t *testing.T) {
	e := newEnv(t)
	nc := e.ready(t, nodeClass())
	its, err := e.provider.InstanceTypes(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		seen := map[[2]string]bool{}
		for _, o := range it.Offerings {
			k := [2]string{o.Zone, o.CapacityType}
			if seen[k] {
				t.Errorf("%s has two %s offerings in %s", it.Name, o.CapacityType, o.Zone)
			}
			seen[k] = true
		}
	}
}
