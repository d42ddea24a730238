// Package lifecycle is the leader loop that drives each Joiner NodeClaim
// through Karpenter v1's lifecycle, with raft's launch intents as the
// source of launch truth:
//
//   - Launched: the intent's instance is recorded: providerID, imageID,
//     capacity, allocatable and the instance labels go onto the NodeClaim.
//     A failed intent gives Launched=False and the NodeClaim is deleted.
//   - Registered: a Node with the providerID joined: the NodeClaim's labels,
//     annotations and taints, karpenter.sh/registered, the termination
//     finalizer and an owner reference go onto the Node.
//   - Initialized: the Node is Ready, its startup and ephemeral taints are
//     gone and requested extended resources are registered: the Node gets
//     karpenter.sh/initialized and the NodeClaim Initialized and Ready.
//
// Liveness deletes NodeClaims not launched 5 min after creation or not
// registered 15 min after launch; garbage collection records instances that
// vanished from the cloud as lost and deletes their NodeClaims. Every write
// is idempotent: a pass over a finished NodeClaim changes nothing.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/poolhealth"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
)

// Deletion reasons (metrics label, disruption-reason annotation).
const (
	ReasonLaunchTimeout       = "launch_timeout"
	ReasonRegistrationTimeout = "registration_timeout"
	ReasonOrphan              = "orphan"
	ReasonInstanceGone        = "instance_gone"
	reasonLaunchFailed        = "launch_failed"
	// ReasonInsufficientCapacity: the launch found no capacity on any
	// candidate offering (Karpenter's reason for such a NodeClaim).
	ReasonInsufficientCapacity = "insufficient_capacity"
	// ReasonExpired: past expireAfter before any Node joined (Karpenter's
	// expiration; the disruption controller expires the others).
	ReasonExpired = "expired"
)

// Cache is the informer cache the lifecycle reads (kube.Cache).
type Cache interface {
	NodeClaims() []*karpv1.NodeClaim
	NodeClaim(name string) *karpv1.NodeClaim
	NodeByProviderID(id string) *corev1.Node
	Changes() (<-chan struct{}, func())
}

// Writer is the NodeClaim writes the lifecycle makes (kube.Clients).
type Writer interface {
	UpdateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	UpdateNodeClaimStatus(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	DeleteNodeClaim(ctx context.Context, name string) error
}

// State is the raft state the lifecycle reads (fsm.FSM).
type State interface {
	Intent(id string) (fsm.LaunchIntent, bool)
	Instance(id string) (fsm.Instance, bool)
	Instances() []fsm.Instance
	Terminations() []fsm.TerminationIntent
}

// Cloud is what the lifecycle asks the cloud (cloud.Provider): the
// cluster's live instances and, for those missing, one instance
// (cloud.ErrNotFound when EC2 does not know it).
type Cloud interface {
	Get(ctx context.Context, id string) (cloud.Instance, error)
	List(ctx context.Context, tags map[string]string) ([]cloud.Instance, error)
}

// Classes are the resolved EC2NodeClasses with their instance types, for a
// NodeClaim's capacity and labels (*view.Catalog).
type Classes interface {
	Class(name string) *view.Class
}

// Deps are the lifecycle's collaborators.
type Deps struct {
	Cache   Cache
	Claims  Writer
	Nodes   kubernetes.Interface
	State   State
	Raft    fsm.Proposer
	Cloud   Cloud
	Classes Classes
	// Fleet, when set, receives every instance listing garbage collection
	// makes (drift reads it).
	Fleet Fleet
	// Health, when set, records the registrations and timeouts of each
	// pool's NodeClaims (its NodeRegistrationHealthy condition).
	Health *poolhealth.State
	// Registerer may be nil (no metrics); Recorder may be nil (no Events).
	Registerer prometheus.Registerer
	Recorder   record.EventRecorder
	Log        *zap.Logger
}

// Fleet keeps the last instance listing (*view.Fleet).
type Fleet interface {
	Publish(insts []cloud.Instance)
}

// Config configures a Lifecycle. Zero values take the defaults.
type Config struct {
	// LaunchTimeout deletes NodeClaims not Launched this long after
	// creation (default 5 min).
	LaunchTimeout time.Duration
	// RegistrationTimeout deletes Launched NodeClaims with no Node this
	// long after launch (default 15 min).
	RegistrationTimeout time.Duration
	// Resync is the pass interval without cache events (default 10 s).
	Resync time.Duration
	// Concurrency is how many NodeClaims a pass reconciles at once
	// (default 16): each step waits on API writes and raft commits.
	Concurrency int
	// GCInterval between checks of live instances against the cloud
	// (default 30 s; negative disables the periodic GC).
	GCInterval time.Duration
	// GCGrace is how long after launch an instance the cloud does not know
	// is still given (eventual consistency; default 1 min).
	GCGrace time.Duration
	// RemoveStartupTaints makes the lifecycle remove a NodeClaim's startup
	// taints once its Node is Ready. Karpenter leaves that to the taints'
	// owners (CNI, GPU operators); in the simulated cloud nobody else does.
	RemoveStartupTaints bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Lifecycle is the NodeClaim lifecycle leader loop.
type Lifecycle struct {
	cfg     Config
	cache   Cache
	d       Deps
	log     *zap.Logger
	metrics *metrics

	// deleting holds the UIDs of NodeClaims this loop deleted that the
	// cache does not show as deleting yet, so a pass on a stale object
	// does not delete (and count) them twice.
	mu       sync.Mutex
	deleting map[types.UID]bool
	// timedOut: the NodeClaims whose timeout was recorded for their pool's
	// registration health (each once).
	timedOut map[types.UID]bool
	// consistency holds back a consistency issue told in the last
	// consistencyScan.
	consistency *events.Dedupe
}

// consistencyScan is how often Karpenter's consistency controller looks
// at a NodeClaim (and so repeats an issue's Event).
const consistencyScan = 10 * time.Minute

// New builds a Lifecycle.
func New(cfg Config, d Deps) (*Lifecycle, error) {
	defaults.Positive(&cfg.LaunchTimeout, 5*time.Minute)
	defaults.Positive(&cfg.RegistrationTimeout, 15*time.Minute)
	defaults.Positive(&cfg.Resync, 10*time.Second)
	defaults.Positive(&cfg.Concurrency, 16)
	defaults.Zero(&cfg.GCInterval, 30*time.Second) // negative: no collection
	defaults.Positive(&cfg.GCGrace, time.Minute)
	loop.Defaults(&cfg.Now, &d.Recorder, &d.Log)
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, err
	}
	return &Lifecycle{cfg: cfg, d: d, log: d.Log.Named("lifecycle"), metrics: m, deleting: map[types.UID]bool{}, timedOut: map[types.UID]bool{},
		consistency: events.NewDedupe(cfg.Now)}, nil
}

// Run reconciles every NodeClaim after each cache change and every Resync,
// and collects garbage every GCInterval (and once at start), until ctx ends.
func (l *Lifecycle) Run(ctx context.Context) error {
	changes, stop := l.d.Cache.Changes()
	defer stop()
	return loop.Run(ctx, loop.Spec{Name: "lifecycle", Log: l.log, Pass: l.Reconcile,
		Every: l.cfg.Resync, Changes: changes,
		Side: &loop.Side{Every: l.cfg.GCInterval, AtStart: l.cfg.GCInterval > 0, Do: l.gc}})
}

func (l *Lifecycle) gc(ctx context.Context) {
	if _, err := l.CollectGarbage(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("garbage collection incomplete", zap.Error(err))
	}
}

// Reconcile takes every Joiner NodeClaim one step through its lifecycle,
// Concurrency at a time. It returns the first error (in NodeClaim order);
// the other NodeClaims still get their turn. A conflict (the cache was
// behind a write) is not an error: the next pass retries from the newer
// object.
func (l *Lifecycle) Reconcile(ctx context.Context) error {
	claims := l.d.Cache.NodeClaims()
	l.pruneDeleting(claims)
	errs := make([]error, len(claims))
	workqueue.ParallelizeUntil(ctx, l.cfg.Concurrency, len(claims), func(i int) {
		nc := claims[i]
		err := l.reconcileClaim(ctx, nc)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			l.log.Debug("nodeclaim changed under the pass; retrying", logging.NodeClaim(nc.Name), zap.Error(err))
			return
		}
		errs[i] = err
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// inputs gathers what Decide needs for one NodeClaim.
func (l *Lifecycle) inputs(nc *karpv1.NodeClaim) Inputs {
	in := Inputs{Claim: nc, RemoveStartupTaints: l.cfg.RemoveStartupTaints, Now: l.cfg.Now(),
		Timeouts: Timeouts{Launch: l.cfg.LaunchTimeout, Registration: l.cfg.RegistrationTimeout}}
	in.Intent, in.HasIntent = l.d.State.Intent(nc.Annotations[karpv1.AnnotationLaunchID])
	if in.HasIntent && in.Intent.InstanceID != "" {
		in.Instance, in.HasInstance = l.d.State.Instance(in.Intent.InstanceID)
	}
	in.Node = l.d.Cache.NodeByProviderID(nc.Status.ProviderID)
	return in
}

// pruneDeleting forgets deleted NodeClaims the cache has caught up with.
func (l *Lifecycle) pruneDeleting(claims []*karpv1.NodeClaim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	stale := map[types.UID]bool{}
	for _, nc := range claims {
		if l.deleting[nc.UID] && nc.DeletionTimestamp == nil {
			stale[nc.UID] = true
		}
	}
	l.deleting = stale
}

func (l *Lifecycle) beingDeleted(nc *karpv1.NodeClaim) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return nc.DeletionTimestamp != nil || l.deleting[nc.UID]
}

func (l *Lifecycle) reconcileClaim(ctx context.Context, cached *karpv1.NodeClaim) error {
	if l.beingDeleted(cached) {
		return nil // termination owns it
	}
	if !awsv1.ManagesNodeClaim(cached) {
		return nil // another Karpenter provider's, as Karpenter's IsManaged
	}
	in := l.inputs(cached)
	var err error
	if cached, in.Node, err = l.hydrate(ctx, cached, in.Node); err != nil {
		return err
	}
	in.Claim = cached
	action, why := Decide(in)
	if action == None {
		return l.await(ctx, cached, in)
	}
	nc := cached.DeepCopy()
	pool := nc.Labels[karpv1.LabelNodePool]
	log := l.log.With(logging.NodeClaim(nc.Name), logging.NodePool(pool))
	switch action {
	case Launch:
		return l.launch(ctx, log, nc, in)
	case LaunchFailed:
		before := slices.Clone(nc.Status.Conditions)
		if ApplyLaunchFailed(nc, why, in.Now) {
			out, err := l.d.Claims.UpdateNodeClaimStatus(ctx, nc)
			if err != nil {
				return err
			}
			nc = out
			events.Publish(l.d.Recorder, transitions(before, nc)...)
		}
		log.Warn("launching nodeclaim failed", zap.String("reason", why))
		if in.Intent.NoCapacity {
			return l.delete(ctx, log, nc, ReasonInsufficientCapacity, why)
		}
		return l.delete(ctx, log, nc, reasonLaunchFailed, why)
	case DeleteLaunchTimeout:
		if in.Intent.State == fsm.IntentPending {
			err := fsm.Propose(ctx, l.d.Raft, fsm.IntentCancelType, fsm.IntentCancel{IntentID: in.Intent.ID, Reason: "launch timeout", At: in.Now})
			if err != nil && !errors.Is(err, fsm.ErrNotPending) {
				return fmt.Errorf("cancelling launch intent %s of nodeclaim %s: %w", in.Intent.ID, nc.Name, err)
			}
		}
		l.d.Recorder.Event(nc, corev1.EventTypeWarning, "LaunchTimeout", why)
		return l.deleteUnhealthy(ctx, log, nc, ReasonLaunchTimeout, why)
	case DeleteOrphan:
		l.d.Recorder.Event(nc, corev1.EventTypeNormal, "Orphaned", why)
		return l.delete(ctx, log, nc, ReasonOrphan, why)
	case DeleteRegistrationTimeout:
		if err := l.terminate(ctx, nc, in.Instance, ReasonRegistrationTimeout, in.Now); err != nil {
			return err
		}
		l.d.Recorder.Event(nc, corev1.EventTypeWarning, "RegistrationTimeout", why)
		return l.deleteUnhealthy(ctx, log, nc, ReasonRegistrationTimeout, why)
	case DeleteExpired:
		log.Debug("deleting expired nodeclaim", zap.String("reason", why))
		return l.delete(ctx, log, nc, ReasonExpired, why)
	case DeleteInstanceGone:
		l.d.Recorder.Event(nc, corev1.EventTypeWarning, "InstanceGone", why)
		log.Info("garbage collecting nodeclaim with no cloudprovider representation", zap.String(logging.KeyInstance, in.Instance.ID))
		return l.delete(ctx, log, nc, ReasonInstanceGone, why)
	case Register:
		return l.register(ctx, log, nc, in)
	case RemoveStartupTaints:
		node := in.Node.DeepCopy()
		if !StripStartupTaints(nc, node) {
			return nil
		}
		if _, err := l.d.Nodes.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("removing startup taints from node %s: %w", node.Name, err)
		}
		log.Info("removed startup taints from node", logging.Node(node.Name))
		return nil
	case Initialize:
		return l.initialize(ctx, log, nc, in)
	}
	return nil
}

// deleteUnhealthy deletes a NodeClaim that timed out and, once deleted,
// records the failure for its pool (once: a delete retried next pass is
// not counted again).
func (l *Lifecycle) deleteUnhealthy(ctx context.Context, log *zap.Logger, nc *karpv1.NodeClaim, reason, why string) error {
	if err := l.delete(ctx, log, nc, reason, why); err != nil {
		return err
	}
	l.mu.Lock()
	first := !l.timedOut[nc.UID]
	l.timedOut[nc.UID] = true
	l.mu.Unlock()
	if first {
		l.recordHealth(nc, false)
	}
	return nil
}

// recordHealth records a NodeClaim's registration (or its launch or
// registration timeout) for its NodePool's NodeRegistrationHealthy, as
// Karpenter's registration and liveness controllers do: only for a claim
// the pool owns; a failure names the Launched condition's reason when the
// launch never completed, else RegistrationFailed.
func (l *Lifecycle) recordHealth(nc *karpv1.NodeClaim, registered bool) {
	if l.d.Health == nil {
		return
	}
	var pool types.UID
	for _, o := range nc.OwnerReferences {
		if o.Kind == "NodePool" && o.Name == nc.Labels[karpv1.LabelNodePool] {
			pool = o.UID
		}
	}
	if pool == "" {
		return
	}
	if registered {
		l.d.Health.Registered(pool)
		return
	}
	why := poolhealth.Failure{Reason: "RegistrationFailed", Message: "Failed to register node"}
	if c := condition(nc.Status.Conditions, karpv1.ConditionLaunched); c == nil || c.Status != metav1.ConditionTrue {
		why = poolhealth.Failure{Reason: "LaunchFailed", Message: "Failed to launch node"}
		if c != nil && c.Reason != "" {
			why = poolhealth.Failure{Reason: c.Reason, Message: c.Message}
		}
	}
	l.d.Health.Failed(pool, why)
}
