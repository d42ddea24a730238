package crds

// Karpenter v1.14.1 core: pkg/apis/v1/nodepool_budgets_test.go, case by
// case. Karpenter computes allowed disruptions with methods of its API
// types; Joiner's are in coordinator/disruption (AllowedDisruptions). Each
// case's pool goes through the API server first (its verdict and the Go
// validation's are checked), and the budgets are read back from the stored
// object. Where Karpenter answers MaxInt32 (no active budget: no limit),
// so does Joiner.

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
)

const budgetPoolNodes = 100

var reasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonDrifted}

// karpenterBudgets are the six budgets of the suite's BeforeEach.
func karpenterBudgets() []obj {
	return []obj{
		budget("10", "* * * * *", "1h0m0s"),
		budget("100", "* * * * *", "1h0m0s"),
		budget("100%", "* * * * *", "1h0m0s"),
		budget("15", "* * * * *", "1h0m0s", "Drifted", "Underutilized"),
		budget("5", "* * * * *", "1h0m0s", "Drifted"),
		budget("0", "@weekly", "1h0m0s", "Underutilized", "Drifted", "Empty"),
	}
}

// with returns budgets with budget i changed.
func with(bs []obj, i int, e edit) []obj {
	e(bs[i])
	return bs
}

func allReasons(n int) map[karpv1.DisruptionReason]int {
	return map[karpv1.DisruptionReason]int{karpv1.DisruptionReasonEmpty: n, karpv1.DisruptionReasonUnderutilized: n, karpv1.DisruptionReasonDrifted: n}
}

type budgetCase struct {
	name    string
	now     time.Time
	budgets []obj
	crd     verdict
	want    map[karpv1.DisruptionReason]int
	wantErr string // the computation fails (allowing nothing) with this in its error
}

func budgetCases() []budgetCase {
	june15 := time.Date(2000, time.June, 15, 12, 30, 30, 0, time.UTC)
	jan7 := time.Date(2024, time.January, 7, 0, 0, 0, 0, time.UTC)
	const g, a, i = "GetAllowedDisruptionsByReason/", "AllowedDisruptions/", "IsActive/"
	first := func(e edit) []obj { return []obj{with(karpenterBudgets(), 0, e)[0]} }
	yearly := func(o obj) { o["schedule"] = "@yearly"; o["duration"] = "1h0m0s" }
	return []budgetCase{
		{name: g + "should return 0 for all reasons if a budget is active for all reasons", now: june15,
			budgets: with(karpenterBudgets(), 5, func(o obj) { o["schedule"] = "* * * * *" }), crd: admit, want: allReasons(0)},
		{name: g + "should return MaxInt32 for all reasons when there are no active budgets", now: june15,
			budgets: func() []obj {
				bs := karpenterBudgets()
				for _, b := range bs {
					yearly(b)
				}
				return bs
			}(), crd: admit, want: allReasons(math.MaxInt32)},
		{name: g + "should ignore reason-defined budgets when inactive", now: june15,
			budgets: with(with(karpenterBudgets(), 3, func(o obj) { o["schedule"] = "@yearly" }), 4, func(o obj) { o["schedule"] = "@yearly" }),
			crd:     admit, want: allReasons(10)},
		{name: g + "should return the budget for all disruption reasons when undefined", now: june15,
			budgets: karpenterBudgets()[:1], crd: admit, want: allReasons(10)},
		{name: g + "should get the minimum budget for each reason", now: june15,
			budgets: append(karpenterBudgets(), budget("4", "* * * * *", "1h0m0s", "Empty")), crd: admit,
			want: map[karpv1.DisruptionReason]int{karpv1.DisruptionReasonEmpty: 4, karpv1.DisruptionReasonDrifted: 5, karpv1.DisruptionReasonUnderutilized: 10}},
		{name: a + "should return zero values if a schedule is invalid", now: june15,
			budgets: first(func(o obj) { o["schedule"] = "@wrongly" }), crd: reject, wantErr: "@wrongly"},
		{name: a + "should return zero values if a nodes value is invalid", now: june15,
			budgets: first(func(o obj) { o["nodes"] = "1000a%" }), crd: reject, wantErr: "1000a%"},
		{name: a + "should return MaxInt32 when a budget is inactive", now: june15, budgets: first(yearly), crd: admit, want: allReasons(math.MaxInt32)},
		{name: a + "should return the int value when a budget is active", now: june15, budgets: karpenterBudgets()[:1], crd: admit, want: allReasons(10)},
		{name: a + "should return the string value when a budget is active", now: june15, budgets: karpenterBudgets()[2:3], crd: admit, want: allReasons(100)},
		{name: i + "should always consider a schedule and time in UTC",
			now:     time.Date(2000, time.June, 0, 0, 0, 0, 0, time.FixedZone("fake-zone", 3600)),
			budgets: first(func(o obj) { o["schedule"] = "@daily"; o["duration"] = "30m0s" }), crd: admit, want: allReasons(math.MaxInt32)},
		{name: i + "should return that a schedule is active when schedule and duration are nil", now: june15,
			budgets: first(func(o obj) { delete(o, "schedule"); delete(o, "duration") }), crd: admit, want: allReasons(10)},
		{name: i + "should return that a schedule is active", now: june15, budgets: karpenterBudgets()[:1], crd: admit, want: allReasons(10)},
		{name: i + "should return that a schedule is inactive", now: june15,
			budgets: first(func(o obj) { o["schedule"] = "@yearly" }), crd: admit, want: allReasons(math.MaxInt32)},
		{name: i + "should return that a schedule is active when the schedule hit is in the middle of the duration",
			now:     time.Date(1000, time.January, 1, 12, 0, 0, 0, time.UTC),
			budgets: first(func(o obj) { o["schedule"] = "@yearly"; o["duration"] = "24h0m0s" }), crd: admit, want: allReasons(10)},
		{name: i + "should return that a schedule is active when the duration is longer than the recurrence", now: jan7,
			budgets: first(func(o obj) { o["schedule"] = "@daily"; o["duration"] = "48h0m0s" }), crd: admit, want: allReasons(10)},
		{name: i + "should return that a schedule is inactive when the schedule hit is after the duration", now: jan7,
			budgets: first(func(o obj) { o["schedule"] = "30 6 * * SUN"; o["duration"] = "6h0m0s" }), crd: admit, want: allReasons(math.MaxInt32)},
		{name: i + "should return an error indicating why the cron fails to parse", now: jan7,
			budgets: first(func(o obj) { o["schedule"] = "0 0 * * tue-mon"; o["duration"] = "6h0m0s" }), crd: admit,
			wantErr: "beginning of range (2) beyond end of range (1)"},
	}
}

func TestKarpenterNodePoolBudgets(t *testing.T) {
	cases := budgetCases()
	if len(cases) != 18 {
		t.Errorf("%d cases ported, Karpenter's nodepool_budgets_test.go has 18", len(cases))
	}
	pool := func(c budgetCase) obj { return corePool(poolBudgets(anySlice(c.budgets)...)) }
	// Without the API server: the Go verdict, and the budgets of the object
	// as written.
	t.Run("Go", func(t *testing.T) {
		for _, c := range cases {
			o := pool(c)
			if goErr := goValidateObj(o, nil); verdict(goErr == nil) != c.crd {
				t.Errorf("%s: Go validation: %v, want %v (err: %v)", c.name, verdict(goErr == nil), c.crd, goErr)
			}
			checkAllowed(t, c, o)
		}
	})
	// Through the API server: its verdict, and the budgets it stored.
	t.Run("API server", func(t *testing.T) {
		dc := apiserver.Env(t).Dynamic()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				stored, err := create(t.Context(), t, dc, named(pool(c), "b"))
				if got := verdict(err == nil); got != c.crd {
					t.Fatalf("API server: %v, want %v (err: %v)", got, c.crd, err)
				}
				if stored != nil {
					defer remove(t.Context(), dc, stored)
					checkAllowed(t, c, stored)
				}
			})
		}
	})
}

// checkAllowed computes the allowed disruptions of the pool o for each
// reason with Joiner's disruption code.
func checkAllowed(t *testing.T, c budgetCase, o obj) {
	t.Helper()
	b, _ := json.Marshal(o)
	var pool karpv1.NodePool
	if err := json.Unmarshal(b, &pool); err != nil {
		t.Fatal(err)
	}
	for _, r := range reasons {
		n, err := disruption.AllowedDisruptions(&pool, r, budgetPoolNodes, 0, c.now)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || n != 0 {
				t.Errorf("%s: %s: got %d, %v; want 0 and an error with %q", c.name, r, n, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %s: %v", c.name, r, err)
		case n != c.want[r]:
			t.Errorf("%s: %s: %d allowed, want %d", c.name, r, n, c.want[r])
		}
	}
}

func anySlice(bs []obj) []any {
	out := make([]any, len(bs))
	for i, b := range bs {
		out[i] = b
	}
	return out
}
