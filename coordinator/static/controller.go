package static

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/coordinator/disruption/annotate"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/defaults"
)

// ReasonOverprovisioned is the disruption reason of a NodeClaim deleted to
// scale a static pool down (Karpenter's static.deprovisioning
// TerminationReason).
const ReasonOverprovisioned = "overprovisioned"

// Cache is the informer cache the static loop reads (*kube.Cache).
type Cache interface {
	NodePools() []*karpv1.NodePool
	NodeClaims() []*karpv1.NodeClaim
	NodeClaim(name string) *karpv1.NodeClaim
	Nodes() []*corev1.Node
	Changes() (<-chan struct{}, func())
}

// State is the raft state it reads (*fsm.FSM).
type State interface {
	Intents() []fsm.LaunchIntent
	Instances() []fsm.Instance
	Terminations() []fsm.TerminationIntent
}

// Counter counts static pools' NodeClaims (Collect, Counts) from the cache
// and the raft state, and serialises the launches that count against
// their limits.nodes: the static loop and disruption's static drift both
// hold it from counting to committing their launches (Karpenter's
// NodePoolState reservations). It remembers the NodeClaims the static loop
// deleted until the cache shows them deleting.
type Counter struct {
	Cache Cache
	State State
	// Grace is Sources.Grace.
	Grace time.Duration

	launch  sync.Mutex
	mu      sync.Mutex
	deleted map[string]time.Time
}

// Lock and Unlock hold the launch lock.
func (c *Counter) Lock()   { c.launch.Lock() }
func (c *Counter) Unlock() { c.launch.Unlock() }

// Claims lists the pools' NodeClaims now, with the pods of podsByNode.
func (c *Counter) Claims(now time.Time, podsByNode map[string][]*corev1.Pod) []Claim {
	c.mu.Lock()
	deleted := map[string]bool{}
	for name, at := range c.deleted {
		nc := c.Cache.NodeClaim(name)
		if nc == nil || nc.DeletionTimestamp != nil || now.Sub(at) > time.Minute {
			delete(c.deleted, name)
			continue
		}
		deleted[name] = true
	}
	c.mu.Unlock()
	return Collect(&Sources{Now: now, NodeClaims: c.Cache.NodeClaims(), Nodes: c.Cache.Nodes(), Intents: c.State.Intents(),
		Instances: c.State.Instances(), Terminations: c.State.Terminations(), PodsByNode: podsByNode, Deleted: deleted, Grace: c.Grace})
}

// Counts are the pools' NodeClaims by state now.
func (c *Counter) Counts(now time.Time) map[string]disruption.StaticCount {
	return Counts(c.Claims(now, nil))
}

// markDeleted remembers a NodeClaim the loop deleted.
func (c *Counter) markDeleted(name string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted == nil {
		c.deleted = map[string]time.Time{}
	}
	c.deleted[name] = at
}

// Launcher commits and creates NodeClaims (*provisioner.Provisioner).
type Launcher interface {
	LaunchClaims(ctx context.Context, claims []scheduler.NodeClaim, pods []string, reason string) ([]string, error)
}

// Views builds the cluster view (*view.Builder).
type Views interface {
	Build(now time.Time) *view.View
}

// Writer is the NodeClaim writes the loop makes (*kube.Clients).
type Writer interface {
	GetNodeClaim(ctx context.Context, name string) (*karpv1.NodeClaim, error)
	UpdateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	DeleteNodeClaim(ctx context.Context, name string) error
}

// Deps are the loop's collaborators.
type Deps struct {
	Cache    Cache
	Views    Views
	Counter  *Counter
	Launcher Launcher
	Kube     Writer
	// Recorder may be nil (no Events).
	Recorder record.EventRecorder
	Log      *zap.Logger
}

// Config configures a Controller.
type Config struct {
	// Resync is the pass interval without cache events (default 1 min,
	// Karpenter's requeue); MinInterval the least time between passes on
	// cache events (default 1 s).
	Resync, MinInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Controller is the static capacity leader loop (the StaticCapacity
// feature gate starts it).
type Controller struct {
	cfg Config
	d   Deps
	log *zap.Logger
	// said: pool -> last note logged.
	said map[string]string
}

// New builds a Controller.
func New(cfg Config, d Deps) *Controller {
	defaults.Positive(&cfg.Resync, time.Minute)
	defaults.Positive(&cfg.MinInterval, time.Second)
	loop.Defaults(&cfg.Now, &d.Recorder, &d.Log)
	return &Controller{cfg: cfg, d: d, log: d.Log.Named("static"), said: map[string]string{}}
}

// Run keeps static pools at their replicas until ctx ends: a pass every
// Resync and after cache events.
func (c *Controller) Run(ctx context.Context) error {
	changes, stop := c.d.Cache.Changes()
	defer stop()
	return loop.Run(ctx, loop.Spec{Name: "static capacity", Log: c.log, Pass: c.Reconcile,
		Every: c.cfg.Resync, Changes: changes, MinInterval: c.cfg.MinInterval})
}

// Reconcile runs one pass: launch for the pools short of their replicas,
// delete for those over them.
func (c *Controller) Reconcile(ctx context.Context) error {
	c.d.Counter.Lock()
	now := c.cfg.Now()
	v := c.d.Views.Build(now)
	in := &Input{Now: now, Ready: map[string]bool{}, Claims: c.d.Counter.Claims(now, v.PodsByNode)}
	for _, np := range c.d.Cache.NodePools() {
		if np.Spec.Replicas != nil {
			in.NodePools = append(in.NodePools, np)
		}
	}
	for _, np := range v.NodePools {
		in.Ready[np.Name] = true
	}
	res := Decide(in)
	seen := map[string]bool{}
	for _, n := range res.Notes {
		seen[n.Pool] = true
		if c.said[n.Pool] != n.Message {
			c.said[n.Pool] = n.Message
			c.log.Info("static nodepool left as is", zap.String("nodepool", n.Pool), zap.String("reason", n.Message))
		}
	}
	for pool := range c.said {
		if !seen[pool] {
			delete(c.said, pool)
		}
	}
	var errs []error
	for _, l := range res.Launches {
		errs = append(errs, c.launch(ctx, v, l))
	}
	c.d.Counter.Unlock()
	for _, del := range res.Deletions {
		errs = append(errs, c.delete(ctx, del))
	}
	return errors.Join(errs...)
}

// launch commits and creates l.Count NodeClaims of the pool's template.
func (c *Controller) launch(ctx context.Context, v *view.View, l Launch) error {
	claim, err := scheduler.StaticClaim(v.SchedulerInput(nil, nil), l.Pool)
	if err != nil {
		return fmt.Errorf("static nodepool %s: %w", l.Pool, err)
	}
	claims := make([]scheduler.NodeClaim, l.Count)
	for i := range claims {
		claims[i] = claim
	}
	c.log.Info("provisioning nodeclaims to satisfy replica count", zap.String("nodepool", l.Pool), zap.Int("count", l.Count),
		zap.String("reason", l.Message))
	names, err := c.d.Launcher.LaunchClaims(ctx, claims, nil, "provisioning")
	if err != nil && len(names) == 0 {
		return fmt.Errorf("static nodepool %s: launching %d nodeclaim(s): %w", l.Pool, l.Count, err)
	}
	if len(names) < l.Count {
		return fmt.Errorf("static nodepool %s: launched %d of %d nodeclaim(s)", l.Pool, len(names), l.Count)
	}
	return nil
}

// delete annotates a NodeClaim with its disruption reason and deletes it;
// the termination controller drains and terminates.
func (c *Controller) delete(ctx context.Context, del Deletion) error {
	deleting := func(nc *karpv1.NodeClaim) bool { return nc.DeletionTimestamp != nil }
	nc, err := annotate.Reason(ctx, c.d.Kube, del.NodeClaim, ReasonOverprovisioned, deleting)
	if nc == nil || err != nil {
		return err
	}
	if err := c.d.Kube.DeleteNodeClaim(ctx, del.NodeClaim); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting nodeclaim %s of static nodepool %s: %w", del.NodeClaim, del.Pool, err)
	}
	c.d.Counter.markDeleted(del.NodeClaim, c.cfg.Now())
	c.log.Info("deleted nodeclaim", zap.String("nodeclaim", del.NodeClaim), zap.String("nodepool", del.Pool),
		zap.String("reason", ReasonOverprovisioned), zap.String("why", del.Why))
	c.d.Recorder.Eventf(nc, corev1.EventTypeNormal, "DisruptionTerminating", "static nodepool %s is over its replicas: deleting nodeclaim (%s)",
		del.Pool, del.Why)
	return nil
}
