package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/joiner-dev/joiner/drain"
)

// Metrics are the agent's Prometheus metrics. They implement the observer
// interfaces of imds, drain and report.
type Metrics struct {
	Registry      *prometheus.Registry
	Notices       *prometheus.CounterVec
	DrainDuration prometheus.Histogram
	Evictions     *prometheus.CounterVec
	IMDSErrors    *prometheus.CounterVec
	Reports       *prometheus.CounterVec
	pollOK        func()

	// karpenter are Karpenter's eviction counters for this agent's drains.
	karpenter *drain.KarpenterCounters
}

// NewMetrics registers the agent's metrics (and Go/process collectors) on a
// new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_agent_notices_total", Help: "Interruption notices seen in IMDS, by kind.",
		}, []string{"kind"}),
		DrainDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "joiner_agent_drain_duration_seconds", Help: "Time from notice to node drained (or drain given up).",
			Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 90, 120, 300, 600},
		}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_agent_evictions_total", Help: "Eviction attempts by result (evicted, blocked, deleted, gone, error).",
		}, []string{"result"}),
		IMDSErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_agent_imds_errors_total", Help: "Failed IMDS reads, by metadata path.",
		}, []string{"path"}),
		Reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_agent_report_attempts_total", Help: "Interruption report attempts by result (acked, rejected, error).",
		}, []string{"result"}),
	}
	m.karpenter = drain.NewKarpenterCounters()
	m.Registry.MustRegister(m.Notices, m.DrainDuration, m.Evictions, m.IMDSErrors, m.Reports,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Registry.MustRegister(m.karpenter.Collectors()...)
	return m
}

// PollError implements imds.Observer.
func (m *Metrics) PollError(path string) { m.IMDSErrors.WithLabelValues(path).Inc() }

// PollOK implements imds.Observer.
func (m *Metrics) PollOK() {
	if m.pollOK != nil {
		m.pollOK()
	}
}

// Eviction implements drain.Observer: every outcome by result, and
// Karpenter's eviction counters.
func (m *Metrics) Eviction(result string, code int, reason string) {
	m.Evictions.WithLabelValues(result).Inc()
	m.karpenter.Eviction(result, code, reason)
}

// Attempt implements report.Observer.
func (m *Metrics) Attempt(result string) { m.Reports.WithLabelValues(result).Inc() }
