// Package karpmetrics serves Karpenter v1.14's metrics (names, labels and
// meanings) beside Joiner's own, so the dashboards and alerts written for
// Karpenter keep working: gauges derived at scrape time from the informer
// cache and the published classes (Collector), and counters, histograms and
// summaries the leader loops update where the event happens (Metrics, one
// per registry: For).
package karpmetrics

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

// Karpenter's label names.
const (
	labelNodePool          = "nodepool"
	labelReason            = "reason"
	labelResourceType      = "resource_type"
	labelCapacityType      = "capacity_type"
	labelZone              = "zone"
	labelMinValuesRelaxed  = "min_values_relaxed"
	labelController        = "controller"
	labelDecision          = "decision"
	labelConsolidationType = "consolidation_type"
)

// DurationBuckets are Karpenter's duration buckets (controller-runtime's,
// extended past 60 s).
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
		1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}
}

// summaryObjectives are Karpenter's: the quantiles its dashboards read
// (0, 0.5, 0.9, 0.99, 1), each within 1 %.
func summaryObjectives() map[float64]float64 {
	return map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}
}

// lifetimeBuckets: 15 min to 30 days, as Karpenter's node lifetime.
func lifetimeBuckets() []float64 {
	h, d := time.Hour.Seconds(), 24*time.Hour.Seconds()
	return []float64{0.25 * h, 0.5 * h, 0.75 * h, h, 2 * h, 4 * h, 6 * h, 8 * h, 10 * h, 12 * h, 16 * h, 20 * h,
		d, 2 * d, 3 * d, 5 * d, 10 * d, 15 * d, 20 * d, 25 * d, 30 * d}
}

// Metrics are Karpenter's event metrics. The loops of one process share
// one set per registry (For); every method is safe on a nil *Metrics.
type Metrics struct {
	nodeClaimsCreated, nodeClaimsTerminated, nodeClaimsDisrupted *prometheus.CounterVec
	nodeClaimTermination, instanceTermination                    *prometheus.HistogramVec

	nodesCreated, nodesTerminated, nodesDrained *prometheus.CounterVec
	nodesTermination                            *prometheus.SummaryVec
	nodesLifetime                               *prometheus.HistogramVec

	podsStartup prometheus.Summary
	podsBound   prometheus.Histogram

	schedulingDuration *prometheus.HistogramVec
	unschedulablePods  *prometheus.GaugeVec
	ignoredPods        prometheus.Gauge

	decisions, decisionsByPool *prometheus.CounterVec
	eligible                   *prometheus.GaugeVec
	evaluation                 *prometheus.HistogramVec
	allowed, consuming         *prometheus.GaugeVec
	queueFailures              *prometheus.CounterVec
	consolidationTimeouts      *prometheus.CounterVec

	cloudDuration *prometheus.HistogramVec
	cloudErrors   *prometheus.CounterVec

	evictions        evictionMetrics
	scheduling       schedulingMetrics
	consolidation    consolidationMetrics
	podsProvisioning *provisioningMetrics
}

var (
	mu  sync.Mutex
	per = map[prometheus.Registerer]*Metrics{}
)

// For returns the Metrics registered on reg, registering them on the first
// call; a nil reg gets a fresh unregistered set (counted, not exported).
func For(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return newMetrics(), nil
	}
	mu.Lock()
	defer mu.Unlock()
	if m, ok := per[reg]; ok {
		return m, nil
	}
	m := newMetrics()
	if err := telemetry.Register(reg, "karpenter", m.collectors()...); err != nil {
		return nil, err
	}
	per[reg] = m
	return m, nil
}

func newMetrics() *Metrics {
	m := &Metrics{
		nodeClaimsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_nodeclaims_created_total",
			Help: "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim."}, []string{labelReason, labelNodePool, labelMinValuesRelaxed}),
		nodeClaimsTerminated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_nodeclaims_terminated_total",
			Help: "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone."}, []string{labelNodePool, labelCapacityType, labelZone}),
		nodeClaimsDisrupted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_nodeclaims_disrupted_total",
			Help: "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and the owning nodepool."}, []string{labelReason, labelNodePool, labelCapacityType}),
		nodeClaimTermination: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_nodeclaims_termination_duration_seconds",
			Help:    "Duration of NodeClaim termination in seconds.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}, []string{labelNodePool}),
		instanceTermination: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_nodeclaims_instance_termination_duration_seconds",
			Help:    "Duration of CloudProvider Instance termination in seconds.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11)}, []string{labelNodePool}),
		nodesCreated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_nodes_created_total",
			Help: "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone."}, []string{labelNodePool, labelZone}),
		nodesTerminated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_nodes_terminated_total",
			Help: "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone."}, []string{labelNodePool, labelZone}),
		nodesDrained: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_nodes_drained_total",
			Help: "The total number of nodes drained by Karpenter"}, []string{labelNodePool}),
		nodesTermination: prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "karpenter_nodes_termination_duration_seconds",
			Help:       "The time taken between a node's deletion request and the removal of its finalizer",
			Objectives: summaryObjectives()}, []string{labelNodePool}),
		nodesLifetime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_nodes_lifetime_duration_seconds",
			Help:    "The lifetime duration of the nodes since creation.",
			Buckets: lifetimeBuckets()}, []string{labelNodePool}),
		podsStartup: prometheus.NewSummary(prometheus.SummaryOpts{Name: "karpenter_pods_startup_duration_seconds",
			Help: "The time from pod creation until the pod is running.", Objectives: summaryObjectives()}),
		podsBound: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_pods_bound_duration_seconds",
			Help: "The time from pod creation until the pod is bound.", Buckets: DurationBuckets()}),
		schedulingDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_scheduler_scheduling_duration_seconds",
			Help:    "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
			Buckets: DurationBuckets()}, []string{labelController}),
		unschedulablePods: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_scheduler_unschedulable_pods_count",
			Help: "The number of unschedulable Pods."}, []string{labelController}),
		ignoredPods: prometheus.NewGauge(prometheus.GaugeOpts{Name: "karpenter_scheduler_ignored_pods_count",
			Help: "Number of pods ignored during scheduling by Karpenter"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_voluntary_disruption_decisions_total",
			Help: "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type."}, []string{labelDecision, labelReason, labelConsolidationType}),
		decisionsByPool: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_voluntary_disruption_decisions_by_nodepool_total",
			Help: "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, reason, and consolidation type."}, []string{labelNodePool, labelDecision, labelReason, labelConsolidationType}),
		eligible: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_voluntary_disruption_eligible_nodes",
			Help: "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason."}, []string{labelReason}),
		evaluation: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
			Help:    "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
			Buckets: DurationBuckets()}, []string{labelReason, labelConsolidationType}),
		allowed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_nodepools_allowed_disruptions",
			Help: "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. " +
				"Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point."}, []string{labelNodePool, labelReason}),
		consuming: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_nodepools_nodes_consuming_budgets",
			Help: "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool."}, []string{labelNodePool, labelReason}),
		queueFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_voluntary_disruption_queue_failures_total",
			Help: "The number of times that an enqueued disruption decision failed. Labeled by disruption method."}, []string{labelDecision, labelReason, labelConsolidationType}),
		consolidationTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_voluntary_disruption_consolidation_timeouts_total",
			Help: "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type."}, []string{labelConsolidationType}),
		cloudDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "karpenter_cloudprovider_duration_seconds",
			Help:    "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
			Buckets: prometheus.DefBuckets}, []string{labelController, "method", "provider"}),
		cloudErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "karpenter_cloudprovider_errors_total",
			Help: "Total number of errors returned from CloudProvider calls."}, []string{labelController, "method", "provider", "error"}),
	}
	// Joiner's consolidation has no timeout; the series exist at zero as
	// Karpenter's do.
	m.consolidationTimeouts.WithLabelValues("multi")
	m.consolidationTimeouts.WithLabelValues("single")
	m.evictions = newEvictionMetrics()
	m.scheduling = newSchedulingMetrics()
	m.consolidation = newConsolidationMetrics()
	m.podsProvisioning = newProvisioningMetrics()
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	c := []prometheus.Collector{m.nodeClaimsCreated, m.nodeClaimsTerminated, m.nodeClaimsDisrupted, m.nodeClaimTermination, m.instanceTermination,
		m.nodesCreated, m.nodesTerminated, m.nodesDrained, m.nodesTermination, m.nodesLifetime, m.podsStartup, m.podsBound,
		m.schedulingDuration, m.unschedulablePods, m.ignoredPods, m.decisions, m.decisionsByPool, m.eligible, m.evaluation,
		m.allowed, m.consuming, m.queueFailures, m.consolidationTimeouts, m.cloudDuration, m.cloudErrors}
	c = append(c, m.evictions.collectors()...)
	c = append(c, m.scheduling.collectors()...)
	c = append(c, m.consolidation.collectors()...)
	return append(c, m.podsProvisioning.collectors()...)
}

// NodeClaimCreated counts a NodeClaim created by the provisioner (Joiner's
// reason "provisioning") or as a disruption replacement ("disruption/<method>").
func (m *Metrics) NodeClaimCreated(nc *karpv1.NodeClaim, reason string) {
	if m == nil {
		return
	}
	relaxed := nc.Annotations[karpv1.AnnotationMinValuesRelaxed]
	if relaxed == "" {
		relaxed = "false"
	}
	m.nodeClaimsCreated.WithLabelValues(CreatedReason(reason), nc.Labels[karpv1.LabelNodePool], relaxed).Inc()
}

// CreatedReason maps Joiner's creation reason to Karpenter's: provisioned,
// or the lower-case disruption reason of the method a replacement is for.
func CreatedReason(reason string) string {
	method, ok := strings.CutPrefix(reason, "disruption/")
	if !ok {
		if reason == "provisioning" {
			return "provisioned"
		}
		return reason
	}
	if r, _ := DisruptionLabels(method); r != "" {
		return r
	}
	return method
}

// DisruptionLabels maps a disruption method of Joiner's (any case:
// Emptiness, Drift, StaticDrift, MultiNodeConsolidation, ...) to Karpenter's
// reason and consolidation_type label values ("" when Karpenter has none).
func DisruptionLabels(method string) (reason, consolidationType string) {
	switch strings.ToLower(method) {
	case "emptiness":
		return "empty", "empty"
	case "drift", "staticdrift":
		return "drifted", ""
	case "multinodeconsolidation":
		return "underutilized", "multi"
	case "singlenodeconsolidation", "consolidation":
		return "underutilized", "single"
	case "expiration":
		return "expired", ""
	}
	return "", ""
}

// NodeClaimDisrupted counts a NodeClaim deleted for a reason (Karpenter's
// snake_case values: empty, drifted, underutilized, expired,
// spot_interrupted, launch_timeout, garbage_collected, ...).
func (m *Metrics) NodeClaimDisrupted(nc *karpv1.NodeClaim, reason string) {
	if m == nil {
		return
	}
	m.nodeClaimsDisrupted.WithLabelValues(reason, nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType]).Inc()
}

// NodeClaimTerminated counts a NodeClaim whose termination finished (its
// finalizer removed) and observes how long it took since its deletion.
func (m *Metrics) NodeClaimTerminated(nc *karpv1.NodeClaim, took time.Duration) {
	if m == nil {
		return
	}
	pool := nc.Labels[karpv1.LabelNodePool]
	m.nodeClaimsTerminated.WithLabelValues(pool, nc.Labels[karpv1.LabelCapacityType], nc.Labels[karpv1.LabelZone]).Inc()
	m.nodeClaimTermination.WithLabelValues(pool).Observe(took.Seconds())
}

// InstanceTerminated observes how long the NodeClaim's instance took to
// be gone since the termination call (its InstanceTerminating condition).
func (m *Metrics) InstanceTerminated(nc *karpv1.NodeClaim, took time.Duration) {
	if m == nil {
		return
	}
	m.instanceTermination.WithLabelValues(nc.Labels[karpv1.LabelNodePool]).Observe(max(0, took.Seconds()))
}

// NodeRegistered counts a node created for a NodeClaim (it registered).
func (m *Metrics) NodeRegistered(nc *karpv1.NodeClaim) {
	if m == nil {
		return
	}
	m.nodesCreated.WithLabelValues(nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelZone]).Inc()
}

// NodeDrained counts a node of the pool drained by termination.
func (m *Metrics) NodeDrained(nodePool string) {
	if m == nil {
		return
	}
	m.nodesDrained.WithLabelValues(nodePool).Inc()
}

// NodeTerminated counts a node deleted by termination, with the time since
// its deletion was asked for (the NodeClaim's deletion) and its lifetime.
func (m *Metrics) NodeTerminated(node *corev1.Node, deleting, now time.Time) {
	if m == nil || node == nil {
		return
	}
	pool := node.Labels[karpv1.LabelNodePool]
	m.nodesTerminated.WithLabelValues(pool, node.Labels[karpv1.LabelZone]).Inc()
	if !deleting.IsZero() {
		m.nodesTermination.WithLabelValues(pool).Observe(max(0, now.Sub(deleting).Seconds()))
	}
	if !node.CreationTimestamp.IsZero() {
		m.nodesLifetime.WithLabelValues(pool).Observe(max(0, now.Sub(node.CreationTimestamp.Time).Seconds()))
	}
}

// Scheduled records one scheduling simulation of a controller
// (provisioner or disruption) and the pods it could not place.
func (m *Metrics) Scheduled(controller string, took time.Duration, unschedulable int) {
	if m == nil {
		return
	}
	m.schedulingDuration.WithLabelValues(controller).Observe(took.Seconds())
	m.unschedulablePods.WithLabelValues(controller).Set(float64(unschedulable))
}

// EndTerm clears the gauges leader loops set (scheduling, disruption
// eligibility and budgets), as a leadership term ends: a replica that no
// longer leads must not keep serving its last values beside the new
// leader's (Karpenter exits when it loses its lease; Joiner's replicas
// stay up as followers).
func (m *Metrics) EndTerm() {
	if m == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{m.unschedulablePods, m.eligible, m.allowed, m.consuming} {
		g.Reset()
	}
	m.ignoredPods.Set(0)
	m.endSchedulingTerm()
	m.podsProvisioning.reset()
}

// IgnoredPods sets the pods the last scheduling left out as invalid.
func (m *Metrics) IgnoredPods(n int) {
	if m == nil {
		return
	}
	m.ignoredPods.Set(float64(n))
}

// Decision counts a disruption decision (delete or replace) of a method on
// nodes of the pools: once, and once for each pool among them, however
// many candidates it has there (Karpenter's StartCommand counts the
// distinct pools of its candidates).
func (m *Metrics) Decision(method, decision string, pools []string) {
	if m == nil {
		return
	}
	reason, ctype := DisruptionLabels(method)
	if reason == "expired" {
		return // Karpenter's expiration is no disruption method
	}
	m.decisions.WithLabelValues(decision, reason, ctype).Inc()
	for _, p := range slices.Compact(slices.Sorted(slices.Values(pools))) {
		m.decisionsByPool.WithLabelValues(p, decision, reason, ctype).Inc()
	}
}

// DecisionFailed counts a disruption command that failed while it waited
// for its replacements (a replacement failed, or the wait timed out): by
// the number of its replacements that never initialized, as Karpenter's
// queue adds them (0 too, which only makes the series exist).
func (m *Metrics) DecisionFailed(method, decision string, uninitialized int) {
	if m == nil {
		return
	}
	reason, ctype := DisruptionLabels(method)
	if reason == "expired" {
		return
	}
	m.queueFailures.WithLabelValues(decision, reason, ctype).Add(float64(uninitialized))
}

// Evaluated observes how long deciding took for the method that decided.
func (m *Metrics) Evaluated(method string, took time.Duration) {
	if m == nil {
		return
	}
	reason, ctype := DisruptionLabels(method)
	if reason == "" || reason == "expired" {
		return
	}
	m.evaluation.WithLabelValues(reason, ctype).Observe(took.Seconds())
}

// Eligible sets the nodes a disruption method may act on (Karpenter's
// methods only: emptiness, drift, consolidation).
func (m *Metrics) Eligible(method string, n int) {
	if m == nil {
		return
	}
	reason, _ := DisruptionLabels(method)
	if reason == "" || reason == "expired" {
		return
	}
	m.eligible.WithLabelValues(reason).Set(float64(n))
}

// DeleteBudget forgets the budget series of a pool and reason (the pool
// went away, or its budgets could not be read this pass).
func (m *Metrics) DeleteBudget(pool string, reason karpv1.DisruptionReason) {
	if m == nil {
		return
	}
	m.allowed.DeleteLabelValues(pool, string(reason))
	m.consuming.DeleteLabelValues(pool, string(reason))
}

// Budget sets what a pool's budgets allow for a reason (Empty, Drifted,
// Underutilized) before the nodes being disrupted are taken off, and how
// many are being disrupted.
func (m *Metrics) Budget(pool string, reason karpv1.DisruptionReason, allowed, disrupting int) {
	if m == nil {
		return
	}
	m.allowed.WithLabelValues(pool, string(reason)).Set(float64(allowed))
	m.consuming.WithLabelValues(pool, string(reason)).Set(float64(disrupting))
}

// PodStarted observes a pod's time from creation to ready.
func (m *Metrics) PodStarted(d time.Duration) {
	if m != nil {
		m.podsStartup.Observe(max(0, d.Seconds()))
	}
}

// PodBound observes a pod's time from creation to bound.
func (m *Metrics) PodBound(d time.Duration) {
	if m != nil {
		m.podsBound.Observe(max(0, d.Seconds()))
	}
}
