package disruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func strp(s string) *string { return &s }

func dur(s string) *karpv1.Duration {
	d, err := karpv1.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &d
}

func poolWithBudgets(bs ...karpv1.Budget) *karpv1.NodePool {
	p := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	p.Spec.Disruption.Budgets = bs
	return p
}

// fakeClock is the tests' clock: a fixed instant the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time       { return c.t }
func (c *fakeClock) Step(d time.Duration) { c.t = c.t.Add(d) }
func at(s string) time.Time               { t, _ := time.Parse(time.RFC3339, s); return t }

func TestBudgetPercentRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		nodes      string
		pool, want int
	}{
		{"10%", 5, 1}, {"10%", 10, 1}, {"10%", 11, 2}, {"10%", 0, 0}, {"0%", 100, 0},
		{"100%", 7, 7}, {"33%", 10, 4}, {"50%", 3, 2}, {"3", 100, 3}, {"0", 10, 0}, {"", 5, 1},
	} {
		got, err := AllowedDisruptions(poolWithBudgets(karpv1.Budget{Nodes: tc.nodes}), karpv1.DisruptionReasonEmpty, tc.pool, 0, at("2026-01-01T00:00:00Z"))
		if err != nil || got != tc.want {
			t.Errorf("nodes %q of %d: got %d, %v; want %d", tc.nodes, tc.pool, got, err, tc.want)
		}
	}
}

func TestBudgetDefaultAndDisrupting(t *testing.T) {
	now := at("2026-01-01T00:00:00Z")
	p := poolWithBudgets() // default 10%
	for _, tc := range []struct{ pool, disrupting, want int }{{20, 0, 2}, {20, 1, 1}, {20, 2, 0}, {20, 5, 0}, {1, 0, 1}} {
		got, err := AllowedDisruptions(p, karpv1.DisruptionReasonDrifted, tc.pool, tc.disrupting, now)
		if err != nil || got != tc.want {
			t.Errorf("pool %d disrupting %d: got %d, %v; want %d", tc.pool, tc.disrupting, got, err, tc.want)
		}
	}
}

func TestBudgetMostRestrictiveAndReasons(t *testing.T) {
	now := at("2026-01-01T00:00:00Z")
	p := poolWithBudgets(
		karpv1.Budget{Nodes: "50%"},
		karpv1.Budget{Nodes: "2", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
		karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonEmpty}},
	)
	for reason, want := range map[karpv1.DisruptionReason]int{
		karpv1.DisruptionReasonDrifted: 2, karpv1.DisruptionReasonUnderutilized: 0, karpv1.DisruptionReasonEmpty: 0,
	} {
		if got, err := AllowedDisruptions(p, reason, 10, 0, now); err != nil || got != want {
			t.Errorf("%s: got %d, %v; want %d", reason, got, err, want)
		}
	}
	// A budget scoped to other reasons does not limit this one; with no
	// budget covering the reason, nothing does (Karpenter's MaxInt32, less
	// the nodes being disrupted).
	only := poolWithBudgets(karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}})
	if got, _ := AllowedDisruptions(only, karpv1.DisruptionReasonEmpty, 4, 1, now); got != Unbounded-1 {
		t.Errorf("uncovered reason: got %d, want %d", got, Unbounded-1)
	}
}

func TestBudgetScheduleWindow(t *testing.T) {
	// Block everything for 8h from 09:00 UTC on weekdays; otherwise 10%.
	p := poolWithBudgets(
		karpv1.Budget{Nodes: "10%"},
		karpv1.Budget{Nodes: "0", Schedule: strp("0 9 * * mon-fri"), Duration: dur("8h")},
	)
	clk := &fakeClock{t: at("2026-01-05T08:59:00Z")} // a Monday
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{
		{0, 1},                            // 08:59: window not open yet
		{time.Minute, 0},                  // 09:00: the hit itself opens it
		{7*time.Hour + 59*time.Minute, 0}, // 16:59
		{time.Minute, 1},                  // 17:00: hit is exactly duration ago, closed
		{5 * 24 * time.Hour, 1},           // Saturday 17:00
		{16 * time.Hour, 1},               // Sunday 09:00: no hit on weekends
	} {
		clk.Step(step.advance)
		got, err := AllowedDisruptions(p, karpv1.DisruptionReasonUnderutilized, 10, 0, clk.Now())
		if err != nil || got != step.want {
			t.Errorf("at %s: got %d, %v; want %d", clk.Now().Format(time.RFC3339), got, err, step.want)
		}
	}
}

func TestBudgetScheduleDescriptorsUTC(t *testing.T) {
	p := poolWithBudgets(karpv1.Budget{Nodes: "0", Schedule: strp("@daily"), Duration: dur("1h")})
	// 00:30 UTC is inside, whatever the zone the instant is expressed in.
	in := at("2026-03-01T00:30:00Z").In(time.FixedZone("x", 5*3600))
	if got, _ := AllowedDisruptions(p, karpv1.DisruptionReasonEmpty, 10, 0, in); got != 0 {
		t.Errorf("@daily 00:30 UTC: got %d, want 0", got)
	}
	if got, _ := AllowedDisruptions(p, karpv1.DisruptionReasonEmpty, 10, 0, at("2026-03-01T01:30:00Z")); got != Unbounded {
		t.Errorf("@daily 01:30 UTC: got %d, want %d (no active budget)", got, Unbounded)
	}
	hourly := poolWithBudgets(karpv1.Budget{Nodes: "1", Schedule: strp("@hourly"), Duration: dur("10m")}, karpv1.Budget{Nodes: "5"})
	if got, _ := AllowedDisruptions(hourly, karpv1.DisruptionReasonEmpty, 10, 0, at("2026-03-01T07:05:00Z")); got != 1 {
		t.Errorf("@hourly 07:05: got %d, want 1", got)
	}
	if got, _ := AllowedDisruptions(hourly, karpv1.DisruptionReasonEmpty, 10, 0, at("2026-03-01T07:15:00Z")); got != 5 {
		t.Errorf("@hourly 07:15: got %d, want 5", got)
	}
}

func TestBudgetBadInputFailsClosed(t *testing.T) {
	now := at("2026-01-01T00:00:00Z")
	for name, b := range map[string]karpv1.Budget{
		"bad cron":          {Nodes: "1", Schedule: strp("not a cron"), Duration: dur("1h")},
		"hour out of range": {Nodes: "1", Schedule: strp("0 25 * * *"), Duration: dur("1h")},
		"missing duration":  {Nodes: "1", Schedule: strp("@daily")},
		"bad nodes":         {Nodes: "ten"},
		"percent > 100":     {Nodes: "150%"},
		// Karpenter gathers the errors of every budget, whatever its
		// reasons: a broken Drifted budget stops emptiness too.
		"bad cron of another reason": {Nodes: "1", Schedule: strp("0 25 * * *"), Duration: dur("1h"), Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
	} {
		got, err := AllowedDisruptions(poolWithBudgets(karpv1.Budget{Nodes: "100%"}, b), karpv1.DisruptionReasonEmpty, 10, 0, now)
		if err == nil || got != 0 || !strings.Contains(err.Error(), "spec.disruption.budgets[1]") {
			t.Errorf("%s: got %d, %v; want 0 and an error naming the field", name, got, err)
		}
	}
}

// TestBudgetsAbsentOrEmpty: budgets absent from the spec are the CRD's
// default (10%); an explicit empty list is kept by the API server (the
// default applies only to an absent field) and limits nothing, as in
// Karpenter, whose GetAllowedDisruptionsByReason starts from MaxInt32.
func TestBudgetsAbsentOrEmpty(t *testing.T) {
	now := at("2026-01-01T00:00:00Z")
	for _, tc := range []struct {
		name    string
		budgets []karpv1.Budget
		want    int
	}{
		{"absent: the default 10%", nil, 1}, // 2 of 20, one disrupting
		{"explicit empty list: unbounded", []karpv1.Budget{}, Unbounded - 1},
	} {
		p := poolWithBudgets()
		p.Spec.Disruption.Budgets = tc.budgets
		for _, r := range []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized} {
			if got, err := AllowedDisruptions(p, r, 20, 1, now); err != nil || got != tc.want {
				t.Errorf("%s, %s: got %d, %v; want %d", tc.name, r, got, err, tc.want)
			}
		}
	}
}

// TestBrokenBudgetStopsOnlyItsPool: a schedule the CRD's pattern admits but
// cron does not parse ("0 25 * * *") makes its pool allow nothing, for every
// reason (Karpenter's MustGetAllowedDisruptions), while the other pools are
// disrupted as usual and neither Decide nor Revalidate fails.
func TestBrokenBudgetStopsOnlyItsPool(t *testing.T) {
	broken := withBudgets(karpv1.Budget{Nodes: "100%"}, karpv1.Budget{Nodes: "1", Schedule: strp("0 25 * * *"), Duration: dur("1h")})
	pools := func() []*karpv1.NodePool { return kPools(kPool("broken", broken), kPool("good")) }
	for _, tc := range []struct {
		name  string
		nodes func() []*Node
		// methods are the decisions expected on the good pool's nodes.
		methods []Method
		// skipped: the broken pool's node is reported as left alone for
		// its budget (multi-node consolidation reports no skips).
		skipped bool
	}{
		{"emptiness", func() []*Node {
			return []*Node{testNode("broken-empty", "broken", od, 2), testNode("good-empty", "good", od, 2)}
		}, []Method{MethodEmptiness}, true},
		{"drift", func() []*Node {
			return []*Node{driftedNode(testNode("broken-drifted", "broken", od, 2, rsPod("b", "1"))),
				driftedNode(testNode("good-drifted", "good", od, 2, rsPod("g", "1")))}
		}, []Method{MethodDrift}, true},
		{"consolidation", func() []*Node {
			return []*Node{testNode("broken-used", "broken", od, 8, rsPod("b", "1")),
				testNode("good-used-1", "good", od, 8, rsPod("g1", "1")), testNode("good-used-2", "good", od, 8, rsPod("g2", "1"))}
		}, []Method{MethodMultiNode, MethodSingleNode}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := kIn(pools(), tc.nodes()...)
			r, err := Decide(in)
			if err != nil {
				t.Fatalf("Decide: %v (a broken budget must not stop the other pools)", err)
			}
			dec := r.Decision
			if dec == nil || !slices.Contains(tc.methods, dec.Method) {
				t.Fatalf("got %s, want %v on the good pool's nodes; skipped:%s", describeResult(r), tc.methods, skippedSummary(r))
			}
			for _, n := range dec.Candidates {
				if n.Pool() != "good" {
					t.Errorf("%s disrupts %s of nodepool %s, whose budgets do not parse", dec.Method, n.Name(), n.Pool())
				}
			}
			budgetSkip := false
			for _, s := range r.Skipped {
				budgetSkip = budgetSkip || s.Budget && strings.HasPrefix(s.Node, "broken-")
			}
			if tc.skipped && !budgetSkip {
				t.Errorf("the broken pool's node was not skipped for its budget; skipped:%s", skippedSummary(r))
			}
			got, rej, err := Revalidate(in, dec)
			if err != nil || got == nil || rej.Reason != "" {
				t.Errorf("Revalidate = %v, %+v, %v; want the decision to stand", got, rej, err)
			}
			allowed, err := AllowedByPool(in, karpv1.DisruptionReasonEmpty)
			if err == nil || !strings.Contains(err.Error(), "nodepool broken: spec.disruption.budgets[1]") || allowed["broken"] != 0 || allowed["good"] == 0 {
				t.Errorf("AllowedByPool = %v, %v; want broken 0 (with its error), good > 0", allowed, err)
			}
		})
	}
}
