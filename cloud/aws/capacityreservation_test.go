package aws_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// reservationEnv is a sim with capacity reservations (the provider's clock
// is 2026-01-01): two active ODCRs tagged team=ml (cr-0a: two m5.large in
// us-east-1a; cr-0b: one m5.xlarge in us-east-1b, open, another account's),
// a capacity block of one m5.2xlarge in us-east-1a, and, also tagged
// team=ml, an expired, a cancelled and an ended ODCR.
func reservationEnv(t *testing.T) *env {
	cfg := sim.DefaultConfig()
	later, past := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)
	ml := map[string]string{"team": "ml"}
	cfg.CapacityReservations = []sim.CapacityReservation{
		{ID: "cr-0a", InstanceType: "m5.large", Zone: "us-east-1a", Total: 2, Tags: ml},
		{ID: "cr-0b", InstanceType: "m5.xlarge", Zone: "us-east-1b", Total: 1, InstanceMatchCriteria: "open", OwnerID: "210987654321", Tags: ml},
		{ID: "cr-0c", InstanceType: "m5.2xlarge", Zone: "us-east-1a", Total: 1, Type: "capacity-block", End: &later},
		{ID: "cr-0d", InstanceType: "m5.large", Zone: "us-east-1a", Total: 5, State: "expired", Tags: ml},
		{ID: "cr-0e", InstanceType: "m5.xlarge", Zone: "us-east-1c", Total: 5, State: "cancelled", Tags: ml},
		{ID: "cr-0f", InstanceType: "m5.large", Zone: "us-east-1c", Total: 5, End: &past, Tags: ml},
	}
	return newEnvWith(t, cfg)
}

func reservationIDs(rs []awsv1.CapacityReservation) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// TestResolveCapacityReservations: Karpenter's queries (by id; by owner,
// tags and instance match criteria) select active reservations that have
// not ended; an unknown id selects nothing; status lists them by ID with
// EC2's facts, and CapacityReservationsReady is True.
func TestResolveCapacityReservations(t *testing.T) {
	e := reservationEnv(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		terms []awsv1.CapacityReservationSelectorTerm
		want  []string
	}{
		{"by id", []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0a"}}, []string{"cr-0a"}},
		{"expired id", []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0d"}}, nil},
		{"unknown id", []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0nope"}}, nil},
		{"by tags", []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}, []string{"cr-0a", "cr-0b"}},
		{"any tag value", []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "*"}}}, []string{"cr-0a", "cr-0b"}},
		{"by tags and owner", []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}, OwnerID: "210987654321"}}, []string{"cr-0b"}},
		{"by match criteria", []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted"}}, []string{"cr-0a", "cr-0c"}},
		{"terms add up", []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0c"}, {Tags: map[string]string{"team": "ml"}}, {ID: "cr-0a"}},
			[]string{"cr-0a", "cr-0b", "cr-0c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := nodeClass()
			nc.Spec.CapacityReservationSelectorTerms = tc.terms
			r, err := e.provider.Resolve(ctx, nc)
			cloud.ApplyStatus(nc, r, err, metav1.Now())
			if err != nil || !slices.Equal(reservationIDs(nc.Status.CapacityReservations), tc.want) ||
				!meta.IsStatusConditionTrue(nc.Status.Conditions, cloud.ConditionCapacityReservationsReady) ||
				!meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionReady) {
				t.Errorf("err %v, reservations %v (want %v), conditions %+v", err, reservationIDs(nc.Status.CapacityReservations), tc.want, nc.Status.Conditions)
			}
		})
	}
	nc := nodeClass()
	nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0b"}, {ID: "cr-0c"}}
	r, err := e.provider.Resolve(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	end := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	want := []awsv1.CapacityReservation{
		{ID: "cr-0b", AvailabilityZone: "us-east-1b", InstanceMatchCriteria: "open", InstanceType: "m5.xlarge", OwnerID: "210987654321",
			ReservationType: awsv1.CapacityReservationTypeDefault, State: awsv1.CapacityReservationStateActive},
		{ID: "cr-0c", AvailabilityZone: "us-east-1a", EndTime: &end, InstanceMatchCriteria: "targeted", InstanceType: "m5.2xlarge", OwnerID: "123456789012",
			ReservationType: awsv1.CapacityReservationTypeCapacityBlock, State: awsv1.CapacityReservationStateActive},
	}
	if len(r.CapacityReservations) != len(want) {
		t.Fatalf("reservations %+v", r.CapacityReservations)
	}
	for i := range want {
		got := r.CapacityReservations[i]
		if got.EndTime.Equal(want[i].EndTime) {
			got.EndTime = want[i].EndTime
		}
		if got != want[i] {
			t.Errorf("reservation %d = %+v, want %+v", i, got, want[i])
		}
	}
}

// reservationClass is the default class selecting the team=ml ODCRs and
// the capacity block, resolved.
func reservationClass(t *testing.T, e *env) *awsv1.EC2NodeClass {
	t.Helper()
	nc := nodeClass()
	nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}, {ID: "cr-0c"}}
	return e.ready(t, nc)
}

// reservedOffering is the reserved offering of a reservation among the
// class's instance types (Available false and no ID when there is none).
func reservedOffering(t *testing.T, e *env, nc *awsv1.EC2NodeClass, itype, id string) (catalog.Offering, *catalog.InstanceType) {
	t.Helper()
	it := joineraws.InstanceTypeOf(t, e.provider, nc, itype)
	for _, o := range it.Offerings {
		if o.ReservationID == id {
			return o, it
		}
	}
	return catalog.Offering{}, it
}

// reservedCand is a candidate launching into a reservation.
func reservedCand(itype, zone, id, typ string) cloud.Candidate {
	c := cand(itype, zone, karpv1.CapacityTypeOnDemand)
	c.CapacityType, c.Price, c.ReservationID, c.ReservationType = karpv1.CapacityTypeReserved, c.Price/1e7, id, typ
	return c
}

// TestReservedOfferings: each selected reservation adds a reserved
// offering of its type in its zone, priced at the on-demand price / 10^7
// (below every other offering), carrying its labels and the instances it
// has left; launches use them up (the offering turns unavailable), and a
// terminated instance gives one back once EC2 is asked again.
func TestReservedOfferings(t *testing.T) {
	e := reservationEnv(t)
	ctx := context.Background()
	nc := reservationClass(t, e)
	for _, tc := range []struct {
		itype, id, zone, typ string
		capacity             int
	}{
		{"m5.large", "cr-0a", "us-east-1a", "default", 2},
		{"m5.xlarge", "cr-0b", "us-east-1b", "default", 1},
		{"m5.2xlarge", "cr-0c", "us-east-1a", "capacity-block", 1},
	} {
		o, it := reservedOffering(t, e, nc, tc.itype, tc.id)
		od, _ := catalog.Lookup(tc.itype)
		if !o.Available || o.CapacityType != karpv1.CapacityTypeReserved || o.Zone != tc.zone || o.ReservationType != tc.typ ||
			o.ReservationCapacity != tc.capacity || o.Price != od.OnDemandPrice/1e7 {
			t.Errorf("%s: reserved offering %+v", tc.itype, o)
		}
		for _, other := range it.Offerings {
			if other.CapacityType != karpv1.CapacityTypeReserved && other.Price <= o.Price {
				t.Errorf("%s: offering %+v is not dearer than the reserved one", tc.itype, other)
			}
		}
	}
	var launched []string
	for i, token := range []string{"r1", "r2"} {
		inst := e.launch(t, e.spec(t, token, []cloud.Candidate{reservedCand("m5.large", "us-east-1a", "cr-0a", "default")}))
		launched = append(launched, inst.ID)
		if o, _ := reservedOffering(t, e, nc, "m5.large", "cr-0a"); o.ReservationCapacity != 1-i || o.Available != (i == 0) {
			t.Errorf("after %d launches: %+v", i+1, o)
		}
	}
	e.clock.Add(time.Minute)
	if o, _ := reservedOffering(t, e, nc, "m5.large", "cr-0a"); o.ReservationCapacity != 0 || o.Available {
		t.Errorf("EC2 says the reservation is full: %+v", o)
	}
	if err := e.provider.Terminate(ctx, launched[0]); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Minute)
	if o, _ := reservedOffering(t, e, nc, "m5.large", "cr-0a"); o.ReservationCapacity != 1 || !o.Available {
		t.Errorf("after a termination: %+v", o)
	}
}

// TestReservedLaunch: a reserved launch sends CreateFleet what Karpenter
// sends: a launch template of its own that targets the reservation
// (capacity-reservations-only), the capacity-block market type and target
// capacity type for a capacity block (no on-demand options), on-demand for
// an ODCR; the instance comes back reserved with its reservation, and
// DescribeInstances says the same.
func TestReservedLaunch(t *testing.T) {
	e := reservationEnv(t)
	ctx := context.Background()
	reservationClass(t, e)
	for _, tc := range []struct {
		cand                    cloud.Candidate
		target, market, onDmd   string
		wantType, wantLifecycle string
	}{
		{reservedCand("m5.large", "us-east-1a", "cr-0a", "default"), "on-demand", "", "lowest-price", "default", ""},
		{reservedCand("m5.2xlarge", "us-east-1a", "cr-0c", "capacity-block"), "capacity-block", "capacity-block", "", "capacity-block", "capacity-block"},
	} {
		t.Run(tc.cand.ReservationID, func(t *testing.T) {
			req := e.spec(t, tc.cand.ReservationID, []cloud.Candidate{tc.cand})
			inst := e.launch(t, req)
			fleet, _ := e.sim.LastRequest("CreateFleet")
			if got := fleet.Get("TargetCapacitySpecification.DefaultTargetCapacityType"); got != tc.target {
				t.Errorf("DefaultTargetCapacityType %q, want %q", got, tc.target)
			}
			if got := fleet.Get("OnDemandOptions.AllocationStrategy"); got != tc.onDmd {
				t.Errorf("OnDemandOptions.AllocationStrategy %q, want %q", got, tc.onDmd)
			}
			lt, _ := e.sim.LastRequest("CreateLaunchTemplate")
			if fleet.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName") != lt.Get("LaunchTemplateName") ||
				lt.Get("LaunchTemplateName") == joineraws.LaunchTemplateName("test", req.Spec, tc.cand.ImageID, 0) {
				t.Errorf("the reserved launch does not use a launch template of its own: %s", lt.Get("LaunchTemplateName"))
			}
			data := lt.Struct("LaunchTemplateData")
			if data.Get("CapacityReservationSpecification.CapacityReservationPreference") != "capacity-reservations-only" ||
				data.Get("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId") != tc.cand.ReservationID ||
				data.Get("InstanceMarketOptions.MarketType") != tc.market {
				t.Errorf("launch template data %v", data.Params)
			}
			got, err := e.provider.Get(ctx, inst.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []cloud.Instance{inst, got} {
				if i.CapacityType != karpv1.CapacityTypeReserved || i.ReservationID != tc.cand.ReservationID || i.ReservationType != tc.wantType {
					t.Errorf("instance %+v", i)
				}
			}
			if x := describe(t, e, inst.ID); string(x.InstanceLifecycle) != tc.wantLifecycle {
				t.Errorf("lifecycle %q, want %q", x.InstanceLifecycle, tc.wantLifecycle)
			}
		})
	}
}

// TestFullReservationIsNotAnOfferingError: a launch EC2 refuses with
// ReservationCapacityExceeded is an insufficient-capacity error that takes
// the reservation's offering away (Karpenter's MarkUnavailable) but leaves
// the type's on-demand offering in that zone alone.
func TestFullReservationIsNotAnOfferingError(t *testing.T) {
	e := reservationEnv(t)
	ctx := context.Background()
	nc := reservationClass(t, e)
	c := reservedCand("m5.xlarge", "us-east-1b", "cr-0b", "default")
	// Another launcher (the provider of another cluster) takes the last
	// instance after this provider counted it.
	if _, err := newProviderFor(t, e).Launch(ctx, e.spec(t, "other", []cloud.Candidate{c})); err != nil {
		t.Fatal(err)
	}
	_, err := e.provider.Launch(ctx, e.spec(t, "full", []cloud.Candidate{c}))
	var ice *cloud.InsufficientCapacityError
	if !errors.Is(err, cloud.ErrInsufficientCapacity) || !errors.As(err, &ice) {
		t.Fatalf("launch into a full reservation: %v", err)
	}
	o, it := reservedOffering(t, e, nc, "m5.xlarge", "cr-0b")
	if o.Available || o.ReservationCapacity != 0 {
		t.Errorf("full reservation still offered: %+v", o)
	}
	for _, od := range it.Offerings {
		if od.CapacityType == karpv1.CapacityTypeOnDemand && od.Zone == "us-east-1b" && !od.Available {
			t.Errorf("the reservation's error marked the on-demand offering: %+v", od)
		}
	}
}

// TestEndedReservationTurnsInstanceOnDemand: when an ODCR is cancelled its
// instances run on demand (EC2 drops their reservation): the provider
// reports them on-demand, and the reservation is no longer offered.
func TestEndedReservationTurnsInstanceOnDemand(t *testing.T) {
	e := reservationEnv(t)
	ctx := context.Background()
	nc := reservationClass(t, e)
	inst := e.launch(t, e.spec(t, "end", []cloud.Candidate{reservedCand("m5.large", "us-east-1a", "cr-0a", "default")}))
	if err := e.sim.SetCapacityReservationState("cr-0a", "cancelled"); err != nil {
		t.Fatal(err)
	}
	got, err := e.provider.Get(ctx, inst.ID)
	if err != nil || got.CapacityType != karpv1.CapacityTypeOnDemand || got.ReservationID != "" {
		t.Errorf("instance of a cancelled reservation: %+v, %v", got, err)
	}
	e.clock.Add(time.Minute)
	if o, _ := reservedOffering(t, e, nc, "m5.large", "cr-0a"); o.ReservationID != "" {
		t.Errorf("cancelled reservation still offered: %+v", o)
	}
}
