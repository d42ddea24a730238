package karpmetrics_test

import (
	"math"
	"testing"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/test/observe"
)

// Karpenter counts every consolidation move by the move's verdict and
// observes a Balanced pool's score by the pool's own verdict; failed
// validations count candidates by consolidation type (none for drift).
func TestConsolidationMetrics(t *testing.T) {
	m, reg := registered(t)
	for _, mv := range []karpmetrics.MoveScore{
		{Pool: "web", Policy: "WhenEmptyOrUnderutilized", Approved: true},
		{Pool: "web", Policy: "WhenEmptyOrUnderutilized", Approved: true},
		{Pool: "batch", Policy: "Balanced", Approved: true, Scored: true, PoolApproved: true, Score: math.Inf(1)},
		// A move rejected by another pool: this pool approved its share.
		{Pool: "batch", Policy: "Balanced", Approved: false, Scored: true, PoolApproved: true, Score: 0.75},
		{Pool: "batch", Policy: "Balanced", Approved: false, Scored: true, PoolApproved: false, Score: 0.2},
	} {
		m.ConsolidationMove(mv)
	}
	m.FailedValidation("MultiNodeConsolidation", 3)
	m.FailedValidation("Emptiness", 2)
	m.FailedValidation("Drift", 1)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"karpenter_consolidation_moves_total", map[string]string{"decision": "approved", "nodepool": "web", "policy": "WhenEmptyOrUnderutilized"}, 2},
		{"karpenter_consolidation_moves_total", map[string]string{"decision": "approved", "nodepool": "batch"}, 1},
		{"karpenter_consolidation_moves_total", map[string]string{"decision": "rejected", "nodepool": "batch", "policy": "Balanced"}, 2},
		{"karpenter_consolidation_score", map[string]string{"decision": "approved", "nodepool": "batch", "policy": "Balanced"}, 2},
		{"karpenter_consolidation_score", map[string]string{"decision": "rejected", "nodepool": "batch"}, 1},
		{"karpenter_voluntary_disruption_failed_validations_total", map[string]string{"consolidation_type": "multi"}, 3},
		{"karpenter_voluntary_disruption_failed_validations_total", map[string]string{"consolidation_type": "empty"}, 2},
	} {
		if got, _ := observe.Sample(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := observe.Sample(t, reg, "karpenter_consolidation_score", map[string]string{"nodepool": "web"}); ok {
		t.Error("a pool that is not Balanced was scored")
	}
	if _, ok := observe.Sample(t, reg, "karpenter_voluntary_disruption_failed_validations_total", map[string]string{"consolidation_type": ""}); ok {
		t.Error("drift counted as a failed validation")
	}
}
