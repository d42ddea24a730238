package api

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// Results counted by joiner_interruption_reports_total{result}.
const (
	ResultCommitted    = "committed"
	ResultDuplicate    = "duplicate"
	ResultForwarded    = "forwarded"
	ResultInvalid      = "invalid"
	ResultUnauthorized = "unauthorized"
	ResultForbidden    = "forbidden"
	ResultThrottled    = "throttled"
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
	for _, r := range []string{ResultCommitted, ResultDuplicate, ResultForwarded, ResultInvalid, ResultUnauthorized, ResultForbidden,
		ResultThrottled, ResultUnavailable, ResultError} {
		m.reports.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) report(result string) {
	if m != nil {
		m.reports.WithLabelValues(result).Inc()
	}
}

// Intent and instance states always exported (0 when none), so series do
// not appear and vanish.
var (
	intentStates   = []fsm.IntentState{fsm.IntentPending, fsm.IntentLaunching, fsm.IntentLaunched, fsm.IntentFailed, fsm.IntentCancelled}
	instanceStates = []fsm.InstanceState{fsm.InstanceLaunched, fsm.InstanceRegistered, fsm.InstanceReady, fsm.InstanceDraining,
		fsm.InstanceTerminating, fsm.InstanceTerminated, fsm.InstanceLost}
)

// stateCollector reads raft and the FSM at scrape time.
type stateCollector struct {
	raft      RaftInfo
	state     State
	peers     *prometheus.Desc
	lastIndex *prometheus.Desc
	intents   *prometheus.Desc
	instances *prometheus.Desc
}

// RegisterStateMetrics registers gauges collected from the replica's raft
// and FSM at scrape time: joiner_raft_peers, joiner_raft_last_index,
// joiner_launch_intents{state} and joiner_instances{state}. Every replica
// exports them from its own FSM.
func RegisterStateMetrics(reg prometheus.Registerer, r RaftInfo, st State) error {
	return reg.Register(&stateCollector{
		raft: r, state: st,
		peers:     prometheus.NewDesc("joiner_raft_peers", "Servers in the raft configuration, by suffrage.", []string{"suffrage"}, nil),
		lastIndex: prometheus.NewDesc("joiner_raft_last_index", "Last raft log index this replica holds.", nil, nil),
		intents:   prometheus.NewDesc("joiner_launch_intents", "Launch intents in this replica's FSM, by state.", []string{"state"}, nil),
		instances: prometheus.NewDesc("joiner_instances", "Instances in this replica's FSM, by state.", []string{"state"}, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.peers
	ch <- c.lastIndex
	ch <- c.intents
	ch <- c.instances
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if rs, err := c.raft.RaftStatus(); err == nil {
		by := map[string]int{"voter": 0, "nonvoter": 0}
		for _, p := range rs.Peers {
			if p.Voter {
				by["voter"]++
			} else {
				by["nonvoter"]++
			}
		}
		for s, n := range by {
			ch <- prometheus.MustNewConstMetric(c.peers, prometheus.GaugeValue, float64(n), s)
		}
		ch <- prometheus.MustNewConstMetric(c.lastIndex, prometheus.GaugeValue, float64(rs.LastIndex))
	}
	collectStates(ch, c.intents, intentStates, c.state.Intents(), func(in fsm.LaunchIntent) fsm.IntentState { return in.State })
	collectStates(ch, c.instances, instanceStates, c.state.Instances(), func(i fsm.Instance) fsm.InstanceState { return i.State })
}

// collectStates sends a gauge per state of the items (every one of states,
// zero when no item is in it).
func collectStates[S ~string, T any](ch chan<- prometheus.Metric, desc *prometheus.Desc, states []S, items []T, state func(T) S) {
	by := map[S]int{}
	for _, s := range states {
		by[s] = 0
	}
	for _, it := range items {
		by[state(it)]++
	}
	for s, n := range by {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n), string(s))
	}
}
