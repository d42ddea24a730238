package karpmetrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// PodCache is what the pod observer reads (kube.Cache).
type PodCache interface {
	Pods() []*corev1.Pod
	Changes() (<-chan struct{}, func())
}

// Pods observes pods leaving Pending as Karpenter's metrics.pod controller
// does: a pod seen Pending is observed in
// karpenter_pods_startup_duration_seconds once it is ready (creation to
// ready) and in karpenter_pods_bound_duration_seconds once it runs bound
// (creation to scheduled). Pods that were never seen Pending (created
// before this leader's term) are not observed. Until then
// karpenter_pods_unstarted_time_seconds (since creation) is set at each
// pass while the pod is Pending, or running and not ready yet, and
// karpenter_pods_unbound_time_seconds while it is Pending and not bound (a
// pod bound but still Pending keeps the value it had, as Karpenter's).
//
// The provisioning variants count from the pod's schedulable time instead
// of its creation: when a provisioning plan first placed it (PodsPlanned).
// karpenter_pods_provisioning_unbound_time_seconds and
// karpenter_pods_provisioning_unstarted_time_seconds are set at each pass
// (at least every 30 s, as Karpenter requeues) for the pods waiting that
// have one; karpenter_pods_provisioning_bound_duration_seconds and
// karpenter_pods_provisioning_startup_duration_seconds are observed with
// the creation-based ones.
type Pods struct {
	cache PodCache
	m     *Metrics
	log   *zap.Logger
	now   func() time.Time
	// pending and unbound are the pods seen Pending whose startup and
	// bound times are not observed yet.
	pending, unbound map[types.UID]podRef
}

// podRef names a pod: its key (namespace/name), its series' labels and
// its creation.
type podRef struct {
	key, name, namespace string
	created              time.Time
}

func refOf(p *corev1.Pod) podRef {
	return podRef{key: view.Key(p), name: p.Name, namespace: p.Namespace, created: p.CreationTimestamp.Time}
}

// NewPods returns the pod observer; Run it on the leader.
func NewPods(cache PodCache, m *Metrics, log *zap.Logger) *Pods {
	if log == nil {
		log = zap.NewNop()
	}
	return &Pods{cache: cache, m: m, log: log, now: time.Now, pending: map[types.UID]podRef{}, unbound: map[types.UID]podRef{}}
}

// Run observes pods after cache events (at most every second) until ctx
// ends. When it ends (leadership lost) the provisioning gauges and
// schedulable times go: a follower serves none.
func (p *Pods) Run(ctx context.Context) error {
	changes, stop := p.cache.Changes()
	defer stop()
	// A new term forgets the last one's pods: they may have started unseen.
	clear(p.pending)
	clear(p.unbound)
	defer p.m.provisioning().reset()
	return loop.Run(ctx, loop.Spec{Name: "metrics.pod", Log: p.log, Changes: changes, MinInterval: time.Second,
		Every: 30 * time.Second, Pass: func(context.Context) error { p.Pass(); return nil }})
}

// Pass looks at every pod once.
func (p *Pods) Pass() {
	now := p.now()
	pods := p.cache.Pods()
	// A pod is seen by Karpenter's provisioner as soon as it shows up
	// provisionable, before a provisioning pass batches it.
	p.m.AckPods(now, pods...)
	// A pod bound or gone has no scheduling decision left to wait for
	// (the provisioner also forgets them, but only when its passes run).
	waiting := make(map[string]bool, len(pods))
	for _, pod := range pods {
		if pod.Spec.NodeName == "" {
			waiting[view.Key(pod)] = true
		}
	}
	p.m.RetainPods(func(key string) bool { return waiting[key] })
	prov := p.m.provisioning()
	live := make(map[string]types.UID, len(pods))
	for _, pod := range pods {
		ref := refOf(pod)
		live[ref.key] = pod.UID
		// Read before startup may forget it: bound uses it too.
		sched := prov.schedulableTime(ref.key, pod.UID)
		p.startup(pod, ref, sched, now)
		p.bound(pod, ref, sched, now)
	}
	for _, tracked := range []map[types.UID]podRef{p.pending, p.unbound} {
		for uid, ref := range tracked {
			if live[ref.key] == uid {
				continue
			}
			// Deleted. Its series go unless a pod of the same name
			// replaced it (its series are the new pod's).
			delete(tracked, uid)
			if _, replaced := live[ref.key]; !replaced {
				prov.deleteSeries(ref)
			}
		}
	}
	prov.retain(now, func(key string, uid types.UID) bool {
		if live[key] != uid {
			return false
		}
		_, pending := p.pending[uid]
		_, unbound := p.unbound[uid]
		return pending || unbound
	})
}

// startup follows a pod to ready: Karpenter's recordPodStartupMetric.
func (p *Pods) startup(pod *corev1.Pod, ref podRef, sched, now time.Time) {
	prov := p.m.provisioning()
	if pod.Status.Phase == corev1.PodPending {
		p.pending[pod.UID] = ref
		prov.setUnstarted(ref, sched, now)
		return
	}
	if _, ok := p.pending[pod.UID]; !ok {
		return
	}
	switch ready := condition(pod, corev1.PodReady); {
	case isTrue(ready):
		p.m.PodStarted(ready.LastTransitionTime.Sub(pod.CreationTimestamp.Time))
		prov.started(ref, sched, ready.LastTransitionTime.Time)
		delete(p.pending, pod.UID)
	case podutil.Terminal(pod):
		// Not observed (a finished pod's Ready is False), but done waiting.
		prov.started(ref, time.Time{}, time.Time{})
		delete(p.pending, pod.UID)
	default:
		prov.setUnstarted(ref, sched, now)
	}
}

// bound follows a pod to bound: Karpenter's recordPodBoundMetric. A pod
// still Pending once bound keeps the unbound time it had.
func (p *Pods) bound(pod *corev1.Pod, ref podRef, sched, now time.Time) {
	scheduled := condition(pod, corev1.PodScheduled)
	if pod.Status.Phase == corev1.PodPending {
		if !isTrue(scheduled) {
			p.m.provisioning().setUnbound(ref, sched, now)
		}
		p.unbound[pod.UID] = ref
		return
	}
	if _, ok := p.unbound[pod.UID]; ok && isTrue(scheduled) {
		p.m.PodBound(scheduled.LastTransitionTime.Sub(pod.CreationTimestamp.Time))
		p.m.provisioning().bound(ref, sched, scheduled.LastTransitionTime.Time)
		delete(p.unbound, pod.UID)
	}
}

// provisioningMetrics are Karpenter's pod metrics counted from when it
// first thought a pod could schedule (stage alpha in Karpenter), and that
// time per pod: Karpenter's cluster state PodSchedulingSuccessTime, set by
// the provisioner's scheduling results and cleared when the pod started,
// finished or was deleted; and the pods' unbound and unstarted times
// counted from their creation, which follow the same pods.
type provisioningMetrics struct {
	boundDuration, startupDuration prometheus.Histogram
	unbound, unstarted             *prometheus.GaugeVec
	// sinceCreation: karpenter_pods_unbound_time_seconds and
	// karpenter_pods_unstarted_time_seconds.
	unboundSinceCreation, unstartedSinceCreation *prometheus.GaugeVec

	mu sync.Mutex
	// schedulable are the pods (by key) a plan placed, with when one first
	// did.
	schedulable map[string]schedulable
}

type schedulable struct {
	uid types.UID
	at  time.Time
}

func newProvisioningMetrics() *provisioningMetrics {
	const (
		boundHelp = "The time from when Karpenter first thinks the pod can schedule until it binds. " +
			"Note: this calculated from a point in memory, not by the pod creation timestamp."
		startupHelp = "The time from when Karpenter first thinks the pod can schedule until the pod is running. " +
			"Note: this calculated from a point in memory, not by the pod creation timestamp."
	)
	labels := []string{labelPodName, labelPodNamespace}
	return &provisioningMetrics{
		boundDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_pods_provisioning_bound_duration_seconds",
			Help: boundHelp, Buckets: DurationBuckets()}),
		unbound: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_pods_provisioning_unbound_time_seconds",
			Help: boundHelp}, labels),
		startupDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_pods_provisioning_startup_duration_seconds",
			Help: startupHelp, Buckets: DurationBuckets()}),
		unstarted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_pods_provisioning_unstarted_time_seconds",
			Help: startupHelp}, labels),
		unboundSinceCreation: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_pods_unbound_time_seconds",
			Help: "The time from pod creation until the pod is bound."}, labels),
		unstartedSinceCreation: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "karpenter_pods_unstarted_time_seconds",
			Help: "The time from pod creation until the pod is running."}, labels),
		schedulable: map[string]schedulable{},
	}
}

func (p *provisioningMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.boundDuration, p.unbound, p.startupDuration, p.unstarted, p.unboundSinceCreation, p.unstartedSinceCreation}
}

// provisioning are m's provisioning metrics (nil for a nil m).
func (m *Metrics) provisioning() *provisioningMetrics {
	if m == nil {
		return nil
	}
	return m.podsProvisioning
}

// PodsPlanned records a provisioning plan's scheduling results at now, as
// Karpenter's provisioner marks its scheduling decisions: a pending pod
// (pending: the plan's input by key) the plan placed, on a new NodeClaim,
// in-flight capacity or an existing node, is schedulable from now unless
// an earlier plan placed it already; a pod it could not place is not
// schedulable (a later placement starts again). Pods already bound (those
// of nodes being disrupted, planned for their replacements) are left
// alone.
func (m *Metrics) PodsPlanned(now time.Time, plan *scheduler.Plan, pending map[string]*corev1.Pod) {
	p := m.provisioning()
	if p == nil || plan == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range plan.Unschedulable {
		delete(p.schedulable, u.Pod)
	}
	place := func(key string) {
		pod := pending[key]
		if pod == nil || isTrue(condition(pod, corev1.PodScheduled)) {
			return
		}
		if s, ok := p.schedulable[key]; ok && s.uid == pod.UID {
			return
		}
		p.schedulable[key] = schedulable{uid: pod.UID, at: now}
	}
	for _, c := range plan.NodeClaims {
		for _, key := range c.Pods {
			place(key)
		}
	}
	for _, n := range plan.Nominations {
		place(n.Pod)
	}
}

// schedulableTime is when a plan first placed the pod (zero: none did, or
// a later one could not place it).
func (p *provisioningMetrics) schedulableTime(key string, uid types.UID) time.Time {
	if p == nil {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.schedulable[key]; ok && s.uid == uid {
		return s.at
	}
	return time.Time{}
}

// setUnstarted sets the pod's unstarted times: since its creation, and
// since its schedulable time (that series goes when it has none).
func (p *provisioningMetrics) setUnstarted(ref podRef, sched, now time.Time) {
	if p != nil {
		setSince(p.unstartedSinceCreation, ref, ref.created, now)
		setSince(p.unstarted, ref, sched, now)
	}
}

// setUnbound is setUnstarted for the unbound times.
func (p *provisioningMetrics) setUnbound(ref podRef, sched, now time.Time) {
	if p != nil {
		setSince(p.unboundSinceCreation, ref, ref.created, now)
		setSince(p.unbound, ref, sched, now)
	}
}

// setSince sets the pod's series of g to the time from since to now; it
// goes when since is zero.
func setSince(g *prometheus.GaugeVec, ref podRef, since, now time.Time) {
	if since.IsZero() {
		g.DeleteLabelValues(ref.name, ref.namespace)
		return
	}
	g.WithLabelValues(ref.name, ref.namespace).Set(now.Sub(since).Seconds())
}

// started ends the pod's unstarted time; a pod that became ready at
// readyAt with a schedulable time is observed. The pod's schedulable time
// is forgotten.
func (p *provisioningMetrics) started(ref podRef, sched, readyAt time.Time) {
	if p == nil {
		return
	}
	p.unstarted.DeleteLabelValues(ref.name, ref.namespace)
	p.unstartedSinceCreation.DeleteLabelValues(ref.name, ref.namespace)
	if !sched.IsZero() {
		p.startupDuration.Observe(max(0, readyAt.Sub(sched).Seconds()))
	}
	p.mu.Lock()
	delete(p.schedulable, ref.key)
	p.mu.Unlock()
}

// bound ends the pod's unbound time; one with a schedulable time is
// observed as bound at boundAt.
func (p *provisioningMetrics) bound(ref podRef, sched, boundAt time.Time) {
	if p == nil {
		return
	}
	p.unbound.DeleteLabelValues(ref.name, ref.namespace)
	p.unboundSinceCreation.DeleteLabelValues(ref.name, ref.namespace)
	if !sched.IsZero() {
		p.boundDuration.Observe(max(0, boundAt.Sub(sched).Seconds()))
	}
}

// deleteSeries drops a deleted pod's gauges.
func (p *provisioningMetrics) deleteSeries(ref podRef) {
	if p == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{p.unbound, p.unstarted, p.unboundSinceCreation, p.unstartedSinceCreation} {
		g.DeleteLabelValues(ref.name, ref.namespace)
	}
}

// retain forgets the schedulable times of pods keep rejects (deleted,
// replaced, or not waiting: they will not be observed), except those
// recorded after now, whose pods the caller may not have seen yet.
func (p *provisioningMetrics) retain(now time.Time, keep func(key string, uid types.UID) bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, s := range p.schedulable {
		if !s.at.After(now) && !keep(key, s.uid) {
			delete(p.schedulable, key)
		}
	}
}

// reset drops every gauge series and schedulable time (the term ended).
func (p *provisioningMetrics) reset() {
	if p == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{p.unbound, p.unstarted, p.unboundSinceCreation, p.unstartedSinceCreation} {
		g.Reset()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.schedulable)
}
