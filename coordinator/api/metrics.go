package api

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Results counted by joiner_interruption_reports_total{result}.
const (
	ResultCommitted    = "committed"
	ResultDuplicate    = "duplicate"
	ResultForwarded    = "forwarded"
	ResultInvalid      = "invalid"
	ResultUnauthorized = "unauthorized"
	ResultUnavailable  = "unavailable"
	ResultError        = "error"
)

// Metrics are the coordinator's API metrics.
type Metrics struct {
	reports *prometheus.CounterVec
}

// NewMetrics registers joiner_raft_leader (read from isLeader at scrape
// time), joiner_interruption_reports_total and, when withRuntime, the
// standard Go and process collectors on reg.
func NewMetrics(reg prometheus.Registerer, isLeader func() bool, withRuntime bool) (*Metrics, error) {
	m := &Metrics{
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_interruption_reports_total",
			Help: "Interruption reports received over HTTP, by result.",
		}, []string{"result"}),
	}
	leader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "joiner_raft_leader",
		Help: "1 when this coordinator replica is the raft leader.",
	}, func() float64 {
		if isLeader() {
			return 1
		}
		return 0
	})
	cs := []prometheus.Collector{m.reports, leader}
	if withRuntime {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{ResultCommitted, ResultDuplicate, ResultForwarded, ResultInvalid, ResultUnauthorized, ResultUnavailable, ResultError} {
		m.reports.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) report(result string) {
	if m != nil {
		m.reports.WithLabelValues(result).Inc()
	}
}
