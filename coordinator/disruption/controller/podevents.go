package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// PodEventsCache is the informer cache the pod-events loop reads
// (*kube.Cache).
type PodEventsCache interface {
	Pods() []*corev1.Pod
	NodeClaims() []*karpv1.NodeClaim
	NodeByProviderID(id string) *corev1.Node
	Changes() (<-chan struct{}, func())
}

// StatusWriter writes NodeClaim status (*kube.Clients).
type StatusWriter interface {
	UpdateNodeClaimStatus(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
}

// PodEventsConfig configures PodEvents. Zero values take the defaults.
type PodEventsConfig struct {
	// Interval between passes without cache events (default 30 s).
	Interval time.Duration
	// MinInterval is the least time between two passes when cache events
	// arrive (default 1 s).
	MinInterval time.Duration
	// Dedupe: an event within this long of the recorded one is not
	// written (default 10 s, Karpenter's: shorter than the 15 s a
	// consolidation decision is validated, so one made meanwhile is still
	// invalidated).
	Dedupe time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// PodEvents writes status.lastPodEventTime on NodeClaims, the time
// consolidateAfter counts from, as Karpenter's nodeclaim.podevents
// controller does: when a pod is bound to the claim's node, or one of its
// pods finishes or starts terminating (DaemonSet pods aside), debounced by
// Dedupe. A NodeClaim's pods are those bound to the Node with its
// provider ID (none while that Node does not exist), as Karpenter finds a
// pod's NodeClaim through its Node; another provider's NodeClaims are left
// alone. It compares each pass's pods per node with the previous pass's
// (pods by UID, so a StatefulSet pod recreated under its name counts), so
// the first pass of a leadership term only takes stock: what changed while
// no leader watched is not backdated.
type PodEvents struct {
	cfg   PodEventsConfig
	cache PodEventsCache
	kube  StatusWriter
	log   *zap.Logger
	// seen: node name -> its active pods' UIDs at the last pass (nil
	// before the first pass).
	seen map[string]map[string]bool
	// due: NodeClaim name -> the pod event not written yet.
	due map[string]time.Time
}

// NewPodEvents builds the pod-events loop.
func NewPodEvents(cfg PodEventsConfig, cache PodEventsCache, kube StatusWriter, log *zap.Logger) *PodEvents {
	defaults.Positive(&cfg.Interval, 30*time.Second)
	defaults.Positive(&cfg.MinInterval, time.Second)
	defaults.Positive(&cfg.Dedupe, 10*time.Second)
	defaults.Clock(&cfg.Now)
	defaults.Zero(&log, zap.NewNop())
	return &PodEvents{cfg: cfg, cache: cache, kube: kube, log: log.Named("podevents"), due: map[string]time.Time{}}
}

// Run passes until ctx ends: at start, after cache events and every
// Interval.
func (p *PodEvents) Run(ctx context.Context) error {
	changes, stop := p.cache.Changes()
	defer stop()
	return loop.Run(ctx, loop.Spec{Name: "podevents", Log: p.log, Pass: p.Reconcile,
		Every: p.cfg.Interval, Changes: changes, MinInterval: p.cfg.MinInterval})
}

// Reconcile makes one pass: notes the nodes whose pods changed since the
// last pass and writes their NodeClaims' lastPodEventTime.
func (p *PodEvents) Reconcile(ctx context.Context) error {
	now := p.cfg.Now()
	cur := map[string]map[string]bool{}
	for _, pod := range p.cache.Pods() {
		// A pod arriving (bound), finishing or terminating changes the
		// set; DaemonSet pods do not count (Karpenter's predicates).
		if pod.Spec.NodeName == "" || podutil.OwnedByDaemonSet(pod) || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		set := cur[pod.Spec.NodeName]
		if set == nil {
			set = map[string]bool{}
			cur[pod.Spec.NodeName] = set
		}
		set[string(pod.UID)+"/"+pod.Namespace+"/"+pod.Name] = true
	}
	claims := map[string]*karpv1.NodeClaim{}
	for _, nc := range p.cache.NodeClaims() {
		if !awsv1.ManagesNodeClaim(nc) {
			continue
		}
		claims[nc.Name] = nc
		node := ""
		if n := p.cache.NodeByProviderID(nc.Status.ProviderID); nc.Status.ProviderID != "" && n != nil {
			node = n.Name
		}
		if p.seen == nil || node == "" || nc.DeletionTimestamp != nil || sameKeys(cur[node], p.seen[node]) {
			continue
		}
		p.due[nc.Name] = now
	}
	p.seen = cur
	var failed error
	for name, at := range p.due {
		nc := claims[name]
		if nc == nil || nc.DeletionTimestamp != nil {
			delete(p.due, name)
			continue
		}
		if last := nc.Status.LastPodEventTime.Time; !last.IsZero() && at.Sub(last) < p.cfg.Dedupe {
			delete(p.due, name) // recorded recently enough
			continue
		}
		upd := nc.DeepCopy()
		upd.Status.LastPodEventTime = metav1.NewTime(at)
		if _, err := p.kube.UpdateNodeClaimStatus(ctx, upd); err != nil {
			p.log.Debug("writing lastPodEventTime", zap.String("nodeclaim", name), zap.Error(err))
			if !apierrors.IsConflict(err) { // another writer was first: not a failure
				failed = err
			}
			continue // retried next pass, from the newer object
		}
		delete(p.due, name)
	}
	return failed
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
