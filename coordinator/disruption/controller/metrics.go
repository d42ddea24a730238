package controller

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	decisions *prometheus.CounterVec
	budget    *prometheus.GaugeVec
	eligible  *prometheus.GaugeVec
	rollbacks *prometheus.CounterVec
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
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.decisions, m.budget, m.eligible, m.rollbacks} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering disruption metrics: %w", err)
		}
	}
	return m, nil
}
