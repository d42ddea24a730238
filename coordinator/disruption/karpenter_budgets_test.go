package disruption

import (
	"strings"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestKarpenterBudgets ports Karpenter v1.14.1's
// pkg/apis/v1/nodepool_budgets_test.go (GetAllowedDisruptionsByReason,
// AllowedDisruptions, IsActive) through AllowedByPool, and checks through
// Decide that each method spends its own reason's budget.
func TestKarpenterBudgets(t *testing.T) {
	const file = "pkg/apis/v1/nodepool_budgets_test.go"
	// Karpenter's clock: the middle of June 2000.
	june := time.Date(2000, time.June, 15, 12, 30, 30, 0, time.UTC)
	everyMinute, hour := "* * * * *", dur("1h")
	// karpenterBudgets is the BeforeEach's list: 10, 100 and 100% for every
	// reason, 15 for Drifted and Underutilized, 5 for Drifted, all active
	// (every minute, for an hour), and 0 for every reason, weekly (not
	// active in mid-June 2000, a Thursday).
	karpenterBudgets := func() []karpv1.Budget {
		return []karpv1.Budget{
			{Nodes: "10", Schedule: strp(everyMinute), Duration: hour},
			{Nodes: "100", Schedule: strp(everyMinute), Duration: hour},
			{Nodes: "100%", Schedule: strp(everyMinute), Duration: hour},
			{Nodes: "15", Schedule: strp(everyMinute), Duration: hour,
				Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized}},
			{Nodes: "5", Schedule: strp(everyMinute), Duration: hour, Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
			{Nodes: "0", Schedule: strp("@weekly"), Duration: hour, Reasons: allReasons},
		}
	}
	// hundred is a pool of 100 nodes with budgets, at now.
	hundred := func(now time.Time, change func(bs []karpv1.Budget) []karpv1.Budget) func() *Input {
		return func() *Input {
			bs := change(karpenterBudgets())
			in := kIn(kPools(kPool("default", withBudgets(bs...))), kNodes("n", 100, func(n string, _ int) *Node { return testNode(n, "default", od, 2) })...)
			in.Now = now
			return in
		}
	}
	only := func(i int, change func(b *karpv1.Budget)) func(bs []karpv1.Budget) []karpv1.Budget {
		return func(bs []karpv1.Budget) []karpv1.Budget {
			b := bs[i]
			if change != nil {
				change(&b)
			}
			return []karpv1.Budget{b}
		}
	}
	// scheduled makes a budget active for duration from each hit of
	// schedule.
	scheduled := func(schedule, duration string) func(b *karpv1.Budget) {
		return func(b *karpv1.Budget) { b.Schedule, b.Duration = strp(schedule), dur(duration) }
	}
	sunday := time.Date(2024, time.January, 7, 0, 0, 0, 0, time.UTC)
	// failsClosed: MustGetAllowedDisruptions's 0 for every reason, the
	// error saying why, and Decide going on without disrupting the pool.
	failsClosed := func(substr string) karpCheck {
		return func(t *testing.T, in *Input) {
			t.Helper()
			for _, r := range allReasons {
				got, err := AllowedByPool(in, r)
				if err == nil || got["default"] != 0 {
					t.Errorf("AllowedByPool(%s) = %v, %v; want 0 and an error", r, got, err)
				}
				if err != nil && !strings.Contains(err.Error(), substr) {
					t.Errorf("error %q does not contain %q", err, substr)
				}
			}
			if r := kDecide(t, in); r.Decision != nil {
				t.Errorf("got %s despite the broken budget", describeResult(r))
			}
		}
	}
	// mixed is a pool with an empty node, an underutilized one and a
	// drifted one, with budgets.
	mixed := func(bs ...karpv1.Budget) func() *Input {
		return func() *Input {
			return kIn(kPools(kPool("default", withBudgets(bs...))),
				testNode("empty", "default", od, 2),
				testNode("underused", "default", od, 8, rsPod("u", "1")),
				driftedNode(testNode("drifted", "default", od, 8, rsPod("d", "1"))))
		}
	}

	runKarpenterCases(t, []karpCase{
		{
			name: "a zero budget active for every reason allows nothing",
			from: file + ` GetAllowedDisruptionsByReason "should return 0 for all reasons if a budget is active for all reasons"`,
			in: hundred(june, func(bs []karpv1.Budget) []karpv1.Budget {
				bs[5].Schedule = strp(everyMinute)
				return bs
			}),
			want: allowedForAllReasons("default", 0),
		},
		{
			name: "with no active budget every node may be disrupted",
			from: file + ` GetAllowedDisruptionsByReason "should return MaxInt32 for all reasons when there are no active budgets"`,
			in: hundred(june, func(bs []karpv1.Budget) []karpv1.Budget {
				for i := range bs {
					bs[i].Schedule = strp("@yearly")
				}
				return bs
			}),
			want: allowedForAllReasons("default", Unbounded),
		},
		{
			name: "inactive reason budgets are ignored",
			from: file + ` GetAllowedDisruptionsByReason "should ignore reason-defined budgets when inactive"`,
			in: hundred(june, func(bs []karpv1.Budget) []karpv1.Budget {
				bs[3].Schedule, bs[4].Schedule = strp("@yearly"), strp("@yearly")
				return bs
			}),
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "a budget without reasons covers every reason",
			from: file + ` GetAllowedDisruptionsByReason "should return the budget for all disruption reasons when undefined"`,
			in:   hundred(june, only(0, nil)),
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "each reason gets the smallest active budget covering it",
			from: file + ` GetAllowedDisruptionsByReason "should get the minimum budget for each reason"`,
			in: hundred(june, func(bs []karpv1.Budget) []karpv1.Budget {
				return append(bs, karpv1.Budget{Nodes: "4", Schedule: strp(everyMinute), Duration: hour,
					Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}})
			}),
			want: allOf(allows(karpv1.DisruptionReasonEmpty, "default", 4),
				allows(karpv1.DisruptionReasonDrifted, "default", 5),
				allows(karpv1.DisruptionReasonUnderutilized, "default", 10)),
		},
		{
			name: "a schedule that does not parse allows nothing",
			from: file + ` AllowedDisruptions "should return zero values if a schedule is invalid"`,
			in:   hundred(june, only(0, func(b *karpv1.Budget) { b.Schedule = strp("@wrongly") })),
			want: failsClosed("@wrongly"),
		},
		{
			name: "a nodes value that does not parse allows nothing",
			from: file + ` AllowedDisruptions "should return zero values if a nodes value is invalid"`,
			in:   hundred(june, only(0, func(b *karpv1.Budget) { b.Nodes = "1000a%" })),
			want: failsClosed("1000a%"),
		},
		{
			name: "an inactive budget does not limit",
			from: file + ` AllowedDisruptions "should return MaxInt32 when a budget is inactive"`,
			in:   hundred(june, only(0, func(b *karpv1.Budget) { b.Schedule = strp("@yearly") })),
			want: allowedForAllReasons("default", Unbounded),
		},
		{
			name: "an active count budget limits to its count",
			from: file + ` AllowedDisruptions "should return the int value when a budget is active"`,
			in:   hundred(june, only(0, nil)),
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "an active percentage budget limits to its share of the pool",
			from: file + ` AllowedDisruptions "should return the string value when a budget is active"`,
			in:   hundred(june, only(2, nil)),
			want: allowedForAllReasons("default", 100),
		},
		{
			name: "schedules are read in UTC whatever the clock's zone",
			from: file + ` IsActive "should always consider a schedule and time in UTC"`,
			in:   hundred(time.Date(2000, time.June, 0, 0, 0, 0, 0, time.FixedZone("fake-zone", 3600)), only(0, scheduled("@daily", "30m"))),
			want: allowedForAllReasons("default", Unbounded),
		},
		{
			name: "a budget without schedule and duration is always active",
			from: file + ` IsActive "should return that a schedule is active when schedule and duration are nil"`,
			in: hundred(june, only(0, func(b *karpv1.Budget) {
				b.Schedule, b.Duration = nil, nil
			})),
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "a budget is active within duration of a schedule hit",
			from: file + ` IsActive "should return that a schedule is active"`,
			in:   hundred(june, only(0, nil)),
			want: allows(karpv1.DisruptionReasonDrifted, "default", 10),
		},
		{
			name: "a budget is inactive long after its schedule hit",
			from: file + ` IsActive "should return that a schedule is inactive"`,
			in:   hundred(june, only(0, func(b *karpv1.Budget) { b.Schedule = strp("@yearly") })),
			want: allows(karpv1.DisruptionReasonDrifted, "default", Unbounded),
		},
		{
			name: "a budget is active in the middle of its duration",
			from: file + ` IsActive "should return that a schedule is active when the schedule hit is in the middle of the duration"`,
			in:   hundred(time.Date(1000, time.January, 1, 12, 0, 0, 0, time.UTC), only(0, scheduled("@yearly", "24h"))),
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "a budget whose duration outlasts its recurrence is active",
			from: file + ` IsActive "should return that a schedule is active when the duration is longer than the recurrence"`,
			in:   hundred(sunday, only(0, scheduled("@daily", "48h"))),
			want: allowedForAllReasons("default", 10),
		},
		{
			name: "a budget is inactive once its duration after the last hit is over",
			from: file + ` IsActive "should return that a schedule is inactive when the schedule hit is after the duration"`,
			in:   hundred(sunday, only(0, scheduled("30 6 * * SUN", "6h"))),
			want: allowedForAllReasons("default", Unbounded),
		},
		{
			name: "a broken budget of another reason fails the pool closed for every reason",
			from: file + ` GetAllowedDisruptionsByReason (every budget's error is gathered, whatever its reasons) and MustGetAllowedDisruptions`,
			in: hundred(june, func(bs []karpv1.Budget) []karpv1.Budget {
				bs[4].Schedule = strp("0 25 * * *")
				return bs
			}),
			want: failsClosed("0 25 * * *"),
		},
		{
			name: "a cron range that does not parse says why",
			from: file + ` IsActive "should return an error indicating why the cron fails to parse"`,
			in:   hundred(sunday, only(0, scheduled("0 0 * * tue-mon", "6h"))),
			want: failsClosed("beginning of range (2) beyond end of range (1)"),
		},

		// Each method spends its own reason's budget (disruption methods'
		// Reason(): Emptiness Empty, Drift Drifted, consolidation
		// Underutilized).
		{
			name: "an Underutilized budget of 0 stops consolidation but not emptiness",
			from: file + ` "should get the minimum budget for each reason", through pkg/controllers/disruption emptiness.go / consolidation Reason()`,
			in: mixed(karpv1.Budget{Nodes: "100%"},
				karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonDrifted}}),
			want: allOf(decides(MethodEmptiness, "empty"),
				afterwards(func(in *Input) { in.Nodes = in.Nodes[1:] }, decidesNothing())),
		},
		{
			name: "an Empty budget of 0 stops emptiness but not drift or consolidation",
			from: file + ` "should get the minimum budget for each reason", through pkg/controllers/disruption emptiness.go Reason()`,
			in: mixed(karpv1.Budget{Nodes: "100%"},
				karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}}),
			want: allOf(noMethod(MethodEmptiness), decides(MethodDrift, "drifted")),
		},
		{
			name: "a Drifted budget of 0 stops drift but not consolidation",
			from: file + ` "should get the minimum budget for each reason", through pkg/controllers/disruption drift.go Reason()`,
			in: func() *Input {
				in := mixed(karpv1.Budget{Nodes: "100%"},
					karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}})()
				in.Nodes = in.Nodes[1:]
				return in
			},
			want: allOf(noMethod(MethodDrift), disrupts("underused", "drifted")),
		},
		{
			name: "a zero budget blocks only while its schedule window is open",
			from: file + ` IsActive "should return that a schedule is active" / "... inactive", through Decide`,
			in: func() *Input {
				in := kIn(kPools(kPool("default", withBudgets(karpv1.Budget{Nodes: "100%"},
					karpv1.Budget{Nodes: "0", Schedule: strp("0 9 * * *"), Duration: dur("8h")}))), testNode("empty", "default", od, 2))
				in.Now = time.Date(2026, time.January, 5, 10, 0, 0, 0, time.UTC)
				return in
			},
			want: allOf(decidesNothing(), afterwards(clockAt(time.Date(2026, time.January, 5, 17, 0, 0, 0, time.UTC)), decides(MethodEmptiness, "empty"))),
		},
	})
}
