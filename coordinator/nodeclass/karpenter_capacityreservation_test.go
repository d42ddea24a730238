package nodeclass_test

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// Port of Karpenter's "NodeClass Capacity Reservation Reconciler" suite
// (capacityreservation_test.go): status.capacityReservations from the
// capacityReservationSelectorTerms (by id; by owner, tags and instance
// match criteria), active unexpired reservations only, capacity blocks
// expiring 40 minutes before their end, and CapacityReservationsReady.

const (
	selfOwner = "123456789012" // the sim's account
	altOwner  = "210987654321"
)

// reservationRegion has Karpenter's suite's reservations (the rig's clock
// starts at 2026-01-01): ODCRs of m5.large in us-east-1a (one tagged
// karpenter.sh/discovery=test, one open, one open and interruptible, one
// whose interruptibility EC2 leaves unset), in us-east-1b (one another
// account's, tagged), and another account's capacity block of
// p5.48xlarge ending in a day.
func reservationRegion(start time.Time) func(*worldSetup) {
	return func(ws *worldSetup) {
		discovery := map[string]string{sim.DiscoveryTag: "test"}
		end := start.Add(24 * time.Hour)
		ws.cfg.CapacityReservations = []sim.CapacityReservation{
			{ID: "cr-0a1", InstanceType: "m5.large", Zone: "us-east-1a", Total: 10},
			{ID: "cr-0a2", InstanceType: "m5.large", Zone: "us-east-1a", Total: 10, Tags: discovery},
			{ID: "cr-0p5", InstanceType: "p5.48xlarge", Zone: "us-east-1a", OwnerID: altOwner, Total: 2, Type: "capacity-block", End: &end,
				Tags: map[string]string{"reservation-type": "capacity-block"}},
			{ID: "cr-0b1", InstanceType: "m5.large", Zone: "us-east-1b", Total: 15},
			{ID: "cr-0b2", InstanceType: "m5.large", Zone: "us-east-1b", OwnerID: altOwner, Total: 15, Tags: discovery},
			{ID: "cr-0a3", InstanceType: "m5.large", Zone: "us-east-1a", InstanceMatchCriteria: "open", Total: 5},
			{ID: "cr-0ia1", InstanceType: "m5.large", Zone: "us-east-1a", InstanceMatchCriteria: "open", Total: 10, Interruptible: true,
				Tags: map[string]string{"reservation-interruptible": "true"}},
			{ID: "cr-0nilint", InstanceType: "m5.large", Zone: "us-east-1a", Total: 5},
		}
	}
}

func TestCapacityReservationStatusAsKarpenter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	discovery := map[string]string{sim.DiscoveryTag: "test"}
	endIn := func(id string, d time.Duration) func(*sim.Config) {
		return func(c *sim.Config) {
			for i := range c.CapacityReservations {
				if id == "" || c.CapacityReservations[i].ID == id {
					end := start.Add(d)
					c.CapacityReservations[i].End = &end
				}
			}
		}
	}
	type step struct {
		wait  time.Duration
		want  []string // reservation IDs in status order
		check func(t *testing.T, rs []awsv1.CapacityReservation)
	}
	for _, tc := range []struct {
		karpenter string
		terms     []awsv1.CapacityReservationSelectorTerm
		region    func(*sim.Config)
		steps     []step
	}{
		{karpenter: "should handle capacity reservations with nil Interruptible field",
			terms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0nilint"}},
			steps: []step{{want: []string{"cr-0nilint"}, check: func(t *testing.T, rs []awsv1.CapacityReservation) {
				if rs[0].Interruptible {
					t.Errorf("interruptible %+v", rs[0])
				}
			}}}},
		{karpenter: "should resolve capacity reservations by ID", terms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0a1"}},
			steps: []step{{want: []string{"cr-0a1"}, check: func(t *testing.T, rs []awsv1.CapacityReservation) {
				want := awsv1.CapacityReservation{ID: "cr-0a1", InstanceMatchCriteria: "targeted", OwnerID: selfOwner, InstanceType: "m5.large",
					AvailabilityZone: "us-east-1a", ReservationType: awsv1.CapacityReservationTypeDefault, State: awsv1.CapacityReservationStateActive}
				if rs[0] != want {
					t.Errorf("status %+v, want %+v", rs[0], want)
				}
			}}}},
		{karpenter: "should resolve capacity reservations by tags", terms: []awsv1.CapacityReservationSelectorTerm{{Tags: discovery}},
			steps: []step{{want: []string{"cr-0a2", "cr-0b2"}}}},
		{karpenter: "should resolve capacity reservations by tags + owner",
			terms: []awsv1.CapacityReservationSelectorTerm{{Tags: discovery, OwnerID: selfOwner}}, steps: []step{{want: []string{"cr-0a2"}}}},
		{karpenter: "should resolve capacity reservations by instance match criteria 'open'",
			terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "open"}}, steps: []step{{want: []string{"cr-0a3", "cr-0ia1"},
				check: matchCriteria("open")}}},
		{karpenter: "should resolve capacity reservations by instance match criteria 'targeted'",
			terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted"}},
			steps: []step{{want: []string{"cr-0a1", "cr-0a2", "cr-0b1", "cr-0b2", "cr-0nilint", "cr-0p5"}, check: matchCriteria("targeted")}}},
		{karpenter: "should resolve capacity reservations by instance match criteria with tags",
			terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted", Tags: discovery}},
			steps: []step{{want: []string{"cr-0a2", "cr-0b2"}, check: matchCriteria("targeted")}}},
		{karpenter: "should resolve capacity reservations by instance match criteria with tags and owner",
			terms: []awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted", Tags: discovery, OwnerID: selfOwner}},
			steps: []step{{want: []string{"cr-0a2"}, check: func(t *testing.T, rs []awsv1.CapacityReservation) {
				if rs[0].InstanceMatchCriteria != "targeted" || rs[0].OwnerID != selfOwner {
					t.Errorf("status %+v", rs[0])
				}
			}}}},
		{karpenter: "should exclude expired capacity reservations", terms: []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0a1"}},
			region: endIn("cr-0a1", time.Hour), steps: []step{{want: []string{"cr-0a1"}}, {wait: 2 * time.Hour}}},
		{karpenter: "should discover capacity block reservations",
			terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"reservation-type": "capacity-block"}}},
			steps: []step{{want: []string{"cr-0p5"}, check: func(t *testing.T, rs []awsv1.CapacityReservation) {
				if rs[0].ReservationType != awsv1.CapacityReservationTypeCapacityBlock || rs[0].State != awsv1.CapacityReservationStateActive {
					t.Errorf("status %+v", rs[0])
				}
			}}}},
		{karpenter: "should mark capacity blocks as expiring 40 minutes prior to their endDate",
			terms:  []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"reservation-type": "capacity-block"}}},
			region: endIn("cr-0p5", 40*time.Minute),
			steps: []step{{want: []string{"cr-0p5"}, check: func(t *testing.T, rs []awsv1.CapacityReservation) {
				if rs[0].ReservationType != awsv1.CapacityReservationTypeCapacityBlock || rs[0].State != awsv1.CapacityReservationStateExpiring {
					t.Errorf("status %+v, want an expiring capacity block", rs[0])
				}
			}}}},
		{karpenter: "shouldn't mark default capacity reservations as expiring 40 minutes prior to their endDate",
			terms: []awsv1.CapacityReservationSelectorTerm{{Tags: discovery}}, region: endIn("", 40*time.Minute),
			steps: []step{{want: []string{"cr-0a2", "cr-0b2"}, check: func(t *testing.T, rs []awsv1.CapacityReservation) {
				for _, r := range rs {
					if r.ReservationType != awsv1.CapacityReservationTypeDefault || r.State != awsv1.CapacityReservationStateActive {
						t.Errorf("status %+v, want active ODCRs", r)
					}
				}
			}}}},
		{karpenter: "should discover interruptible reservations",
			terms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"reservation-interruptible": "true"}}},
			steps: []step{{want: []string{"cr-0ia1"}, check: func(t *testing.T, rs []awsv1.CapacityReservation) {
				if !rs[0].Interruptible || rs[0].State != awsv1.CapacityReservationStateActive {
					t.Errorf("status %+v", rs[0])
				}
			}}}},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			w := newWorld(t, reservationRegion(start))
			if tc.region != nil {
				w.sim.Configure(tc.region)
			}
			nc := ec2NodeClass("default")
			nc.Spec.CapacityReservationSelectorTerms = tc.terms
			w.apply(nc)
			for i, st := range tc.steps {
				w.step(st.wait)
				rs := w.class("default").Status.CapacityReservations
				var ids []string
				for _, r := range rs {
					ids = append(ids, r.ID)
				}
				if !slices.Equal(ids, st.want) {
					t.Fatalf("step %d: status.capacityReservations %v, want %v", i, ids, st.want)
				}
				if !w.isTrue("default", cloud.ConditionCapacityReservationsReady) || !w.isTrue("default", awsv1.ConditionReady) {
					t.Errorf("step %d: CapacityReservationsReady %+v, Ready %+v; want True", i,
						w.condition("default", cloud.ConditionCapacityReservationsReady), w.condition("default", awsv1.ConditionReady))
				}
				if st.check != nil {
					st.check(t, rs)
				}
			}
		})
	}
}

func matchCriteria(want string) func(*testing.T, []awsv1.CapacityReservation) {
	return func(t *testing.T, rs []awsv1.CapacityReservation) {
		for _, r := range rs {
			if r.InstanceMatchCriteria != want {
				t.Errorf("%s: instance match criteria %q, want %q", r.ID, r.InstanceMatchCriteria, want)
			}
		}
	}
}

// Karpenter's table "should exclude non-active capacity reservations":
// one entry per EC2 reservation state other than active.
func TestNonActiveCapacityReservationsAsKarpenter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, state := range []string{"expired", "cancelled", "pending", "failed", "scheduled", "payment-pending", "payment-failed",
		"assessing", "delayed", "unsupported"} {
		t.Run(state, func(t *testing.T) {
			w := newWorld(t, reservationRegion(start))
			w.sim.Configure(func(c *sim.Config) { c.CapacityReservations[0].State = state })
			nc := ec2NodeClass("default")
			nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0a1"}}
			w.apply(nc)
			w.reconcile()
			if rs := w.class("default").Status.CapacityReservations; len(rs) != 0 ||
				!w.isTrue("default", cloud.ConditionCapacityReservationsReady) {
				t.Errorf("status %+v, CapacityReservationsReady %+v; want none, True", rs, w.condition("default", cloud.ConditionCapacityReservationsReady))
			}
		})
	}
}

// Karpenter's table "should update status condition on nodeClass as
// Ready": the class has eight conditions with the ReservedCapacity gate on
// (CapacityReservationsReady among them), seven with it off, and is Ready.
func TestReadyWithAndWithoutReservedCapacityAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  bool
		want int
	}{
		{"when reserved capacity feature flag is enabled", false, 8},
		{"when reserved capacity feature flag is disabled", true, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, func(ws *worldSetup) { ws.provider.NoReservedCapacity = tc.off })
			w.apply(ec2NodeClass("default"))
			w.reconcile()
			conds := w.class("default").Status.Conditions
			if len(conds) != tc.want || !w.isTrue("default", awsv1.ConditionReady) {
				t.Errorf("%d conditions %+v, want %d and Ready", len(conds), conds, tc.want)
			}
			for _, c := range conds {
				if c.Status != metav1.ConditionTrue {
					t.Errorf("%s %s", c.Type, c.Status)
				}
			}
		})
	}
}
