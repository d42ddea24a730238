package disruption

import (
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
	// budget covering the reason, the whole pool may go.
	only := poolWithBudgets(karpv1.Budget{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}})
	if got, _ := AllowedDisruptions(only, karpv1.DisruptionReasonEmpty, 4, 1, now); got != 3 {
		t.Errorf("uncovered reason: got %d, want 3", got)
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
	if got, _ := AllowedDisruptions(p, karpv1.DisruptionReasonEmpty, 10, 0, at("2026-03-01T01:30:00Z")); got != 10 {
		t.Errorf("@daily 01:30 UTC: got %d, want 10 (no active budget)", got)
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
		"bad cron":         {Nodes: "1", Schedule: strp("not a cron"), Duration: dur("1h")},
		"missing duration": {Nodes: "1", Schedule: strp("@daily")},
		"bad nodes":        {Nodes: "ten"},
		"percent > 100":    {Nodes: "150%"},
	} {
		got, err := AllowedDisruptions(poolWithBudgets(b), karpv1.DisruptionReasonEmpty, 10, 0, now)
		if err == nil || got != 0 || !strings.Contains(err.Error(), "spec.disruption.budgets[0]") {
			t.Errorf("%s: got %d, %v; want 0 and an error naming the field", name, got, err)
		}
	}
}
