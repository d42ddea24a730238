package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

type metrics struct {
	decisions *prometheus.CounterVec
	budget    *prometheus.GaugeVec
	eligible  *prometheus.GaugeVec
	rollbacks *prometheus.CounterVec
	passes    prometheus.Counter
	// karp are Karpenter's metrics (shared by the loops of one registry).
	karp *karpmetrics.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_disruption_decisions_total",
			Help: "Disruption decisions committed, by method and action (delete or replace)."}, []string{"method", "action"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "joiner_disruption_budget_allowed",
			Help: "Nodes a nodepool's disruption budgets allow to disrupt now, by nodepool and reason (Empty, Drifted, Underutilized)."},
			[]string{"nodepool", "reason"}),
		eligible: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "joiner_nodes_eligible_for_disruption",
			Help: "Nodes a disruption method may act on at the last pass, before budgets and simulation, by method."}, []string{"method"}),
		rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_disruption_rollbacks_total",
			Help: "Disruptions rolled back (replacement failed or timed out, or a step failed), by method."}, []string{"method"}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "joiner_disruption_passes_total",
			Help: "Disruption passes that judged every node (conditions written, a decision made or none), on this replica while it led."}),
	}
	var err error
	if m.karp, err = karpmetrics.For(reg); err != nil {
		return nil, err
	}
	return m, telemetry.Register(reg, "disruption", m.decisions, m.budget, m.eligible, m.rollbacks, m.passes)
}
