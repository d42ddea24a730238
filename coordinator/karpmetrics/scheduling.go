package karpmetrics

import (
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Karpenter's label names of the scheduling metrics.
const (
	labelSchedulingID = "scheduling_id"
	labelPodName      = "name"
	labelPodNamespace = "namespace"
)

// schedulingMetrics are karpenter_pods_scheduling_decision_duration_seconds,
// karpenter_pods_provisioning_scheduling_undecided_time_seconds,
// karpenter_scheduler_queue_depth,
// karpenter_scheduler_unfinished_work_seconds and
// karpenter_scheduler_pending_pods_by_effective_zone_count. The undecided times and the
// unfinished work are derived at scrape time from the bookkeeping
// (decisions), as Karpenter's grow between its updates.
type schedulingMetrics struct {
	decisionDuration prometheus.Histogram
	queueDepth       *prometheus.GaugeVec
	pendingByZone    *prometheus.GaugeVec
	decisions        *decisions
}

func newSchedulingMetrics() schedulingMetrics {
	return schedulingMetrics{
		decisionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_pods_scheduling_decision_duration_seconds",
			Help: "The time it takes for Karpenter to first try to schedule a pod after it's been seen.", Buckets: DurationBuckets()}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_scheduler_queue_depth",
			Help: "The number of pods currently waiting to be scheduled."}, []string{labelController, labelSchedulingID}),
		pendingByZone: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_scheduler_pending_pods_by_effective_zone_count",
			Help: "Pending pods dimensioned by effective zone constraint, or the intersection of pod-level zone signals, volume topology (PVC zones), and topology constraints. Values: specific zone name (e.g., 'us-west-2a'), 'flexible' (multiple zones), or 'none' (no valid intersection)."},
			[]string{labelController, labelZone}),
		decisions: newDecisions(time.Now),
	}
}

func (s schedulingMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.decisionDuration, s.queueDepth, s.pendingByZone, s.decisions}
}

// decisions is the per-pod bookkeeping of Karpenter's cluster state (when
// a pod was first seen provisionable, whether a scheduling simulation
// decided it) and the simulations in progress; it exports the undecided
// times and the unfinished work at scrape time.
type decisions struct {
	now                   func() time.Time
	undecided, unfinished *prometheus.Desc

	mu sync.Mutex
	// pods by key (namespace/name); forgotten when no longer pending.
	pods map[string]*podDecision
	// solves in progress by controller.
	solves map[string]solveRun
}

type podDecision struct {
	namespace, name string
	// uid is the pod's (a pod recreated under its name is a new pod).
	uid types.UID
	// acked is when the pod was first seen provisionable (zero: decided
	// before it was seen, not observed).
	acked   time.Time
	decided bool
}

type solveRun struct {
	id      string
	started time.Time
}

func newDecisions(now func() time.Time) *decisions {
	return &decisions{now: now,
		undecided: prometheus.NewDesc("karpenter_pods_provisioning_scheduling_undecided_time_seconds",
			"The time from when Karpenter has seen a pod without making a scheduling decision for the pod. Note: this calculated from a point in memory, not by the pod creation timestamp.",
			[]string{labelPodName, labelPodNamespace}, nil),
		unfinished: prometheus.NewDesc("karpenter_scheduler_unfinished_work_seconds",
			"How many seconds of work has been done that is in progress and hasn't been observed by scheduling_duration_seconds.",
			[]string{labelController, labelSchedulingID}, nil),
		pods: map[string]*podDecision{}, solves: map[string]solveRun{}}
}

// Describe implements prometheus.Collector.
func (d *decisions) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.undecided
	ch <- d.unfinished
}

// Collect implements prometheus.Collector: each pod seen and not decided
// with the time since it was seen, each simulation in progress with the
// time since it started.
func (d *decisions) Collect(ch chan<- prometheus.Metric) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pods {
		if !p.decided && !p.acked.IsZero() {
			gauge(ch, d.undecided, max(0, now.Sub(p.acked).Seconds()), p.name, p.namespace)
		}
	}
	for controller, s := range d.solves {
		gauge(ch, d.unfinished, max(0, now.Sub(s.started).Seconds()), controller, s.id)
	}
}

// AckPods marks the provisionable pods (unbound, unschedulable, not
// gated) as seen at now, each the first time only (Karpenter's
// provisioner acknowledges a pod when it first sees it provisionable).
// Other pods are left alone.
func (m *Metrics) AckPods(now time.Time, pods ...*corev1.Pod) {
	if m == nil {
		return
	}
	d := m.scheduling.decisions
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range pods {
		if !podutil.Provisionable(p) {
			continue
		}
		key := view.Key(p)
		// A pod recreated under a known name, or known only by a
		// decision made before it was seen (a bound pod of a node being
		// disrupted), is seen anew.
		if old, ok := d.pods[key]; !ok || old.uid != p.UID {
			d.pods[key] = &podDecision{namespace: p.Namespace, name: p.Name, uid: p.UID, acked: now}
		}
	}
}

// PodsDecided records that a scheduling simulation decided the pods (by
// key, namespace/name) at now: placed on a new NodeClaim, in-flight
// capacity or an existing node, or found unschedulable. The first decision
// of a pod seen by AckPods observes the time since it was seen; later ones
// observe nothing.
func (m *Metrics) PodsDecided(now time.Time, keys ...string) {
	if m == nil {
		return
	}
	d := m.scheduling.decisions
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, key := range keys {
		p := d.pods[key]
		if p == nil {
			d.pods[key] = &podDecision{decided: true}
			continue
		}
		if p.decided {
			continue
		}
		p.decided = true
		if !p.acked.IsZero() {
			m.scheduling.decisionDuration.Observe(max(0, now.Sub(p.acked).Seconds()))
		}
	}
}

// RetainPods forgets the pods whose key keep rejects: bound, deleted or
// otherwise no longer waiting (a pod seen again later is new).
func (m *Metrics) RetainPods(keep func(key string) bool) {
	if m == nil {
		return
	}
	d := m.scheduling.decisions
	d.mu.Lock()
	defer d.mu.Unlock()
	for key := range d.pods {
		if !keep(key) {
			delete(d.pods, key)
		}
	}
}

// SolveStarted records a scheduling simulation of the controller starting
// with pods to place, under a new scheduling_id: the controller's previous
// series go, the queue depth is the pods and the unfinished work grows
// from zero. Call the returned func when it ends with the pods it could
// not place: that is the depth left, and the unfinished work goes.
func (m *Metrics) SolveStarted(controller string, pods int) (done func(unplaced int)) {
	if m == nil {
		return func(int) {}
	}
	s := m.scheduling
	id := uuid.NewString()
	s.queueDepth.DeletePartialMatch(prometheus.Labels{labelController: controller})
	s.decisions.mu.Lock()
	s.decisions.solves[controller] = solveRun{id: id, started: s.decisions.now()}
	s.decisions.mu.Unlock()
	s.queueDepth.WithLabelValues(controller, id).Set(float64(pods))
	return func(unplaced int) {
		s.decisions.mu.Lock()
		current := s.decisions.solves[controller].id == id
		if current {
			delete(s.decisions.solves, controller)
		}
		s.decisions.mu.Unlock()
		if current {
			s.queueDepth.WithLabelValues(controller, id).Set(float64(unplaced))
		}
	}
}

// PendingByZone replaces the controller's pending pods by effective zone
// (a zone name, "flexible" or "none"; scheduler.EffectiveZones) with
// counts, as each of Karpenter's solves does.
func (m *Metrics) PendingByZone(controller string, counts map[string]int) {
	if m == nil {
		return
	}
	g := m.scheduling.pendingByZone
	g.DeletePartialMatch(prometheus.Labels{labelController: controller})
	for zone, n := range counts {
		g.WithLabelValues(controller, zone).Set(float64(n))
	}
}

// endSchedulingTerm forgets the term's pods and simulations and clears the
// queue depths and the pending pods by zone.
func (m *Metrics) endSchedulingTerm() {
	if m == nil {
		return
	}
	s := m.scheduling
	s.queueDepth.Reset()
	s.pendingByZone.Reset()
	s.decisions.mu.Lock()
	defer s.decisions.mu.Unlock()
	clear(s.decisions.pods)
	clear(s.decisions.solves)
}
