package agent

import (
	"strconv"

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

	// EvictionRequests is Karpenter's karpenter_pods_eviction_requests_total
	// for this agent's drains (the coordinator serves the same name for its
	// own), so sums over all scrape targets count every eviction.
	EvictionRequests *prometheus.CounterVec
	// Drained is Karpenter's karpenter_pods_drained_total for this agent's
	// drains, by reason (drain.DrainedReason), as EvictionRequests.
	Drained *prometheus.CounterVec
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
		EvictionRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "karpenter_pods_eviction_requests_total", Help: "The total number of pod eviction requests made by Karpenter, labeled by response code",
		}, []string{"code"}),
		Drained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "karpenter_pods_drained_total", Help: "The total number of pods drained during node termination by Karpenter, labeled by reason",
		}, []string{"reason"}),
		IMDSErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_agent_imds_errors_total", Help: "Failed IMDS reads, by metadata path.",
		}, []string{"path"}),
		Reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_agent_report_attempts_total", Help: "Interruption report attempts by result (acked, rejected, error).",
		}, []string{"result"}),
	}
	m.Registry.MustRegister(m.Notices, m.DrainDuration, m.Evictions, m.EvictionRequests, m.Drained, m.IMDSErrors, m.Reports,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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

// Eviction implements drain.Observer: every outcome by result, eviction
// requests answered with a status by code (0: none, not counted), and the
// pods evicted by drained reason.
func (m *Metrics) Eviction(result string, code int, reason string) {
	m.Evictions.WithLabelValues(result).Inc()
	if code != 0 {
		m.EvictionRequests.WithLabelValues(strconv.Itoa(code)).Inc()
	}
	if result == drain.ResultEvicted {
		m.Drained.WithLabelValues(reason).Inc()
	}
}

// Attempt implements report.Observer.
func (m *Metrics) Attempt(result string) { m.Reports.WithLabelValues(result).Inc() }
