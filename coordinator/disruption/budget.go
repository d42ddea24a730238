package disruption

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// DefaultBudget is the budget of a pool that declares none (Karpenter's
// default `[{nodes: "10%"}]`).
const DefaultBudget = "10%"

// cronParser accepts standard 5-field expressions and the @ descriptors
// (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly), as
// Karpenter does; schedules are evaluated in UTC.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// budgetNodes turns a budget's nodes field into a count for a pool of
// poolNodes nodes. A percentage is a percent of the pool's node count
// rounded UP, as Karpenter does (intstr.GetScaledValueFromIntOrPercent with
// roundUp=true): 10% of 5 nodes allows 1, 10% of 11 allows 2; 0% allows 0.
func budgetNodes(nodes string, poolNodes int) (int, error) {
	if nodes == "" {
		nodes = DefaultBudget
	}
	if p, ok := strings.CutSuffix(nodes, "%"); ok {
		if v, err := strconv.Atoi(p); err != nil || v < 0 || v > 100 {
			return 0, fmt.Errorf("nodes %q: percentage must be 0%%..100%%", nodes)
		}
		pct := intstr.FromString(nodes)
		n, err := intstr.GetScaledValueFromIntOrPercent(&pct, poolNodes, true)
		if err != nil {
			return 0, fmt.Errorf("nodes %q: %w", nodes, err)
		}
		return n, nil
	}
	v, err := strconv.Atoi(nodes)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("nodes %q: must be a non-negative count or a percentage", nodes)
	}
	return v, nil
}

// budgetActive says whether a budget's window is open at now: a budget
// without schedule always is; one with a schedule is open iff the last
// schedule hit is within duration of now, i.e. some hit t satisfies
// now-duration < t <= now (Karpenter: schedule.Next(now-duration) <= now).
func budgetActive(b *karpv1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil || b.Duration.Duration == nil {
		return false, fmt.Errorf("schedule %q: duration is required with a schedule", *b.Schedule)
	}
	sched, err := cronParser.Parse(*b.Schedule)
	if err != nil {
		return false, fmt.Errorf("schedule %q: %w", *b.Schedule, err)
	}
	now = now.UTC()
	next := sched.Next(now.Add(-*b.Duration.Duration))
	return !next.IsZero() && !next.After(now), nil
}

// appliesTo says whether a budget covers reason (no reasons = all reasons).
func appliesTo(b *karpv1.Budget, reason karpv1.DisruptionReason) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, r := range b.Reasons {
		if r == reason {
			return true
		}
	}
	return false
}

// Unbounded is what a pool allows for a reason no active budget covers
// (Karpenter's math.MaxInt32).
const Unbounded = math.MaxInt32

// AllowedDisruptions is how many more nodes of pool may be disrupted for
// reason at now: the most restrictive active budget covering reason,
// Unbounded when none does, minus the nodes of the pool already being
// disrupted for any reason, never below zero (Karpenter's
// MustGetAllowedDisruptions less the disrupting nodes). nodesInPool is the
// pool's node count the percentages scale. Budgets absent from the spec
// (nil) are the CRD default, 10%; an explicit empty list has none, so
// nothing limits the pool, as in Karpenter, where the CRD default applies
// only when the field is absent. A budget that does not parse, whatever
// reasons it names, fails the whole pool closed: it allows nothing and the
// error says which fields are wrong.
func AllowedDisruptions(pool *karpv1.NodePool, reason karpv1.DisruptionReason, nodesInPool, disrupting int, now time.Time) (int, error) {
	budgets := pool.Spec.Disruption.Budgets
	if budgets == nil {
		budgets = []karpv1.Budget{{Nodes: DefaultBudget}}
	}
	allowed := Unbounded
	var errs []error
	for i := range budgets {
		b := &budgets[i]
		n, err := budgetAllows(b, nodesInPool, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodepool %s: spec.disruption.budgets[%d]: %w", pool.Name, i, err))
			continue
		}
		if appliesTo(b, reason) {
			allowed = min(allowed, n)
		}
	}
	if len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	return max(0, allowed-disrupting), nil
}

// budgetAllows is what one budget allows of a pool of poolNodes nodes at
// now: Unbounded while its window is closed.
func budgetAllows(b *karpv1.Budget, poolNodes int, now time.Time) (int, error) {
	active, err := budgetActive(b, now)
	if err != nil {
		return 0, err
	}
	if !active {
		return Unbounded, nil
	}
	return budgetNodes(b.Nodes, poolNodes)
}
