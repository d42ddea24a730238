package karpmetrics

import "github.com/prometheus/client_golang/prometheus"

const labelPolicy = "policy"

// consolidationMetrics are Karpenter's Balanced-consolidation metrics
// (karpenter_consolidation_moves_total and karpenter_consolidation_score,
// named without a subsystem as Karpenter's are) and the decisions that did
// not survive validation.
type consolidationMetrics struct {
	moves             *prometheus.CounterVec
	score             *prometheus.HistogramVec
	failedValidations *prometheus.CounterVec
}

func newConsolidationMetrics() consolidationMetrics {
	return consolidationMetrics{
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_consolidation_moves_total",
			Help: "Number of balanced consolidation moves. Labeled by decision, NodePool, and policy."},
			[]string{labelDecision, labelNodePool, labelPolicy}),
		score: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_consolidation_score",
			Help:    "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
			Buckets: []float64{0.1, 0.25, 0.33, 0.5, 1, 2, 5, 10}}, []string{labelDecision, labelNodePool, labelPolicy}),
		failedValidations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_voluntary_disruption_failed_validations_total",
			Help: "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type."},
			[]string{labelConsolidationType}),
	}
}

func (c consolidationMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.moves, c.score, c.failedValidations}
}

// MoveScore is one pool's part in a consolidation move the simulation
// found: the whole move's verdict, and the pool's Balanced score and its
// own verdict when the pool is Balanced (Scored).
type MoveScore struct {
	Pool, Policy         string
	Approved             bool
	Scored, PoolApproved bool
	Score                float64
}

// ConsolidationMove counts a move for its pool, as Karpenter does for every
// policy, and observes a Balanced pool's score.
func (m *Metrics) ConsolidationMove(mv MoveScore) {
	if m == nil {
		return
	}
	m.consolidation.moves.WithLabelValues(verdict(mv.Approved), mv.Pool, mv.Policy).Inc()
	if mv.Scored {
		m.consolidation.score.WithLabelValues(verdict(mv.PoolApproved), mv.Pool, mv.Policy).Observe(mv.Score)
	}
}

// FailedValidation counts the candidates of an emptiness or consolidation
// decision of method that failed its validation once its delay ran out.
func (m *Metrics) FailedValidation(method string, candidates int) {
	if m == nil {
		return
	}
	if _, ctype := DisruptionLabels(method); ctype != "" {
		m.consolidation.failedValidations.WithLabelValues(ctype).Add(float64(candidates))
	}
}

func verdict(approved bool) string {
	if approved {
		return "approved"
	}
	return "rejected"
}
