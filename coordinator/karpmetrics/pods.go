package karpmetrics

import (
	"context"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/view"
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
// before this leader's term) are not observed.
type Pods struct {
	cache PodCache
	m     *Metrics
	log   *zap.Logger
	// pending and unbound are the pods seen Pending whose startup and
	// bound times are not observed yet.
	pending, unbound map[types.UID]bool
}

// NewPods returns the pod observer; Run it on the leader.
func NewPods(cache PodCache, m *Metrics, log *zap.Logger) *Pods {
	if log == nil {
		log = zap.NewNop()
	}
	return &Pods{cache: cache, m: m, log: log, pending: map[types.UID]bool{}, unbound: map[types.UID]bool{}}
}

// Run observes pods after cache events (at most every second) until ctx
// ends.
func (p *Pods) Run(ctx context.Context) error {
	changes, stop := p.cache.Changes()
	defer stop()
	// A new term forgets the last one's pods: they may have started unseen.
	clear(p.pending)
	clear(p.unbound)
	return loop.Run(ctx, loop.Spec{Name: "metrics.pod", Log: p.log, Changes: changes, MinInterval: time.Second,
		Every: 30 * time.Second, Pass: func(context.Context) error { p.Pass(); return nil }})
}

// Pass looks at every pod once.
func (p *Pods) Pass() {
	seen := map[types.UID]bool{}
	for _, pod := range p.cache.Pods() {
		seen[pod.UID] = true
		if pod.Status.Phase == corev1.PodPending {
			p.pending[pod.UID] = true
			p.unbound[pod.UID] = true
			continue
		}
		if p.pending[pod.UID] {
			if ready := condition(pod, corev1.PodReady); isTrue(ready) {
				p.m.PodStarted(ready.LastTransitionTime.Sub(pod.CreationTimestamp.Time))
				delete(p.pending, pod.UID)
			} else if view.Terminal(pod) {
				delete(p.pending, pod.UID)
			}
		}
		if p.unbound[pod.UID] {
			if scheduled := condition(pod, corev1.PodScheduled); isTrue(scheduled) {
				p.m.PodBound(scheduled.LastTransitionTime.Sub(pod.CreationTimestamp.Time))
				delete(p.unbound, pod.UID)
			}
		}
	}
	for uid := range p.pending {
		if !seen[uid] {
			delete(p.pending, uid)
		}
	}
	for uid := range p.unbound {
		if !seen[uid] {
			delete(p.unbound, uid)
		}
	}
}
