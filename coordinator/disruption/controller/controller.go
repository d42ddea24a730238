// Package controller is the leader's disruption loop: every pass it builds
// the disruption core's input from the cluster view, runs
// disruption.Decide and executes the decision, crash-safely:
//
//  1. commit a TerminationIntent ("term-"+instanceID, reason = method) for
//     every candidate before touching anything;
//  2. taint each candidate karpenter.sh/disrupted:NoSchedule;
//  3. launch the replacements (Provisioner.LaunchClaims, the candidates'
//     pods nominated to them) and wait, pass after pass and at most
//     ReplacementTimeout, until every replacement NodeClaim is Initialized;
//  4. annotate each candidate NodeClaim joiner.io/disruption-reason, set
//     its DisruptionReason condition and delete it: the termination
//     controller (NodeClaim finalizer) drains and terminates.
//
// A replacement that fails (its NodeClaim deleted, its launch failed, the
// timeout) rolls the command back: taints removed, TerminationIntents
// cancelled (fsm.TerminationCancel) and the candidates cooled down
// (CoolDown, in leader memory). A new leader resumes from raft and the API:
// a pending disruption TerminationIntent whose NodeClaim is not being
// deleted is finished when the node is empty (or expired), waited on when
// live launch intents hold the node's pods (its replacements), and rolled
// back otherwise (the next pass decides afresh). Every pass also removes a
// karpenter.sh/disrupted taint and DisruptionReason condition that no
// command, termination or interruption holds (leftovers of a leader that
// died, or of Karpenter), as Karpenter's disruption controller does.
//
// It also writes the Drifted, Empty and Consolidatable NodeClaim conditions,
// and Karpenter's Events whenever the reason a node is left alone changes
// (DisruptionBlocked or Unconsolidatable on its NodeClaim and Node,
// DisruptionBlocked on a NodePool whose budget allows nothing). PodEvents,
// a loop of its own, writes the NodeClaims' lastPodEventTime that
// consolidateAfter counts from.
package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// karpv1.AnnotationDisruptionReason on a NodeClaim says why disruption deleted it
// (Expired, Empty, Drifted, Underutilized).

// Launcher commits and creates replacement NodeClaims
// (*provisioner.Provisioner).
type Launcher interface {
	LaunchClaims(ctx context.Context, claims []scheduler.NodeClaim, pods []string, reason string) ([]string, error)
}

// Views builds the cluster view (*view.Builder).
type Views interface {
	Build(now time.Time) *view.View
}

// Cache is the informer cache the controller reads (*kube.Cache).
type Cache interface {
	NodeClaim(name string) *karpv1.NodeClaim
	Node(name string) *corev1.Node
	Pods() []*corev1.Pod
	Changes() (<-chan struct{}, func())
}

// StaticCounter counts static pools' NodeClaims by state and holds the
// lock under which launches that count against their limits.nodes are
// made (*static.Counter).
type StaticCounter interface {
	Counts(now time.Time) map[string]disruption.StaticCount
	sync.Locker
}

// State is the raft state the controller reads (*fsm.FSM).
type State interface {
	Intents() []fsm.LaunchIntent
	Terminations() []fsm.TerminationIntent
	NominatedPods() map[string]string
}

// Writer is the NodeClaim writes the controller makes (*kube.Clients).
type Writer interface {
	GetNodeClaim(ctx context.Context, name string) (*karpv1.NodeClaim, error)
	UpdateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	UpdateNodeClaimStatus(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	DeleteNodeClaim(ctx context.Context, name string) error
}

// Nodes reads and writes Node objects (NodeClient adapts a clientset).
type Nodes interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	UpdateNode(ctx context.Context, node *corev1.Node) (*corev1.Node, error)
}

// Deps are the controller's collaborators.
type Deps struct {
	Views    Views
	Launcher Launcher
	Cache    Cache
	State    State
	Raft     fsm.Proposer
	Kube     Writer
	Nodes    Nodes
	// Static counts static pools' NodeClaims for static drift; nil: the
	// core counts the nodes it is given, and nothing is serialised.
	Static StaticCounter
	// Registerer may be nil (no metrics); Recorder may be nil (no Events).
	Registerer prometheus.Registerer
	Recorder   record.EventRecorder
	Log        *zap.Logger
}

// Config configures a Controller. Zero values take the defaults.
type Config struct {
	// Interval between passes without cache events (default 10 s).
	Interval time.Duration
	// MinInterval is the least time between two passes when cache events
	// arrive (default 2 s).
	MinInterval time.Duration
	// ReplacementTimeout bounds the wait for replacements to initialize
	// (default 10 min).
	ReplacementTimeout time.Duration
	// CoolDown keeps a rolled-back candidate out of graceful disruption
	// (default 5 min).
	CoolDown time.Duration
	// ValidationDelay is how long an emptiness or consolidation decision
	// waits before it is validated again and executed (Karpenter's 15 s
	// consolidation TTL, disruption.Revalidate), so a transient state does
	// not cause churn; no other decision but expiration is made
	// meanwhile. Default 15 s; negative: act at once. Drift and
	// expiration decisions are not validated.
	ValidationDelay time.Duration
	// SettleMax bounds how long multi- and single-node consolidation wait
	// for the pods of the nodes a command deleted to land elsewhere
	// (disruption.Input.Settling; default 1 min).
	SettleMax time.Duration
	// MaxSimulations is disruption.Input.MaxSimulations (0: the core's
	// default).
	MaxSimulations int
	// FeatureGates are the Karpenter feature gates decisions read
	// (--feature-gates; the zero value is Karpenter's default).
	FeatureGates disruption.FeatureGates
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Controller is the disruption leader loop. Run it on the leader only, with
// a context cancelled when leadership is lost; its memory (commands in
// flight, cool-downs, last Events) starts empty on every leader.
type Controller struct {
	cfg     Config
	d       Deps
	log     *zap.Logger
	metrics *metrics

	// commands in flight by termination intent ID (one entry per
	// candidate, sharing the command).
	commands map[string]*command
	// coolDown: node name -> until when it is not a graceful candidate.
	coolDown map[string]time.Time
	// lastSkip: "node/method" -> last reason reported in an Event.
	lastSkip map[string]string
	// dedupe holds Karpenter's dedupe windows (ConsolidationApproved).
	dedupe *events.Dedupe
	// moves holds the consolidation moves counted in the last
	// movesRecount (karpenter_consolidation_moves_total).
	moves *events.Dedupe
	// lastBudgetBlock: "pool/reason" keys whose budget blocked last pass.
	lastBudgetBlock map[string]bool
	// budgetSeries are the budget gauges' series the last pass set.
	budgetSeries map[budgetSeries]bool
	// invalidBudgets: pool -> why its budgets did not parse last pass.
	invalidBudgets map[string]string
	// finished: termination intent IDs whose NodeClaim this leader deleted
	// (the cache may not show the deletion yet: never adopt them).
	finished map[string]bool
	// moving: nodes whose NodeClaims a command deleted, by when; their
	// pods are about to move (settling).
	moving map[string]time.Time
	// singleNodeOffset carries Result.NextSingleNodeOffset.
	singleNodeOffset int
	// validating is the consolidation decision waiting for
	// ValidationDelay, nil when none.
	validating *validation
}

// validation is a decision seen at since, identified by key (method and
// candidates).
type validation struct {
	key   string
	since time.Time
	dec   *disruption.Decision
}

// New builds a Controller.
func New(cfg Config, d Deps) (*Controller, error) {
	defaults.Positive(&cfg.Interval, 10*time.Second)
	defaults.Positive(&cfg.MinInterval, 2*time.Second)
	defaults.Positive(&cfg.ReplacementTimeout, 10*time.Minute)
	defaults.Positive(&cfg.CoolDown, 5*time.Minute)
	defaults.Positive(&cfg.SettleMax, time.Minute)
	defaults.Zero(&cfg.ValidationDelay, 15*time.Second)
	loop.Defaults(&cfg.Now, &d.Recorder, &d.Log)
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, d: d, log: d.Log.Named("disruption"), metrics: m,
		commands: map[string]*command{}, finished: map[string]bool{}, coolDown: map[string]time.Time{}, lastSkip: map[string]string{},
		moving: map[string]time.Time{}, dedupe: events.NewDedupe(cfg.Now), moves: events.NewDedupe(cfg.Now)}, nil
}

// Run disrupts until ctx ends: a pass every Interval, after cache events
// (at most one pass per MinInterval), and when a decision's validation
// delay is over.
func (c *Controller) Run(ctx context.Context) error {
	// A decision of an earlier term is validated afresh.
	c.validating = nil
	changes, stop := c.d.Cache.Changes()
	defer stop()
	return loop.Run(ctx, loop.Spec{Name: "disruption", Log: c.log, Pass: c.Reconcile,
		Every: c.cfg.Interval, Changes: changes, MinInterval: c.cfg.MinInterval, Due: c.validationDue})
}

// validationDue is when the decision being validated is due a second look.
func (c *Controller) validationDue() (time.Duration, bool) {
	v := c.validating
	if v == nil {
		return 0, false
	}
	return v.since.Add(c.cfg.ValidationDelay).Sub(c.cfg.Now()), true
}

// Reconcile runs one pass: advance the commands in flight (and adopt the
// ones a previous leader left), clear leftover taints and conditions,
// refresh conditions and metrics, then
// either wait for the decision being validated, validate it once its delay
// is over, or decide and start (or begin validating) a new command.
func (c *Controller) Reconcile(ctx context.Context) error {
	now := c.cfg.Now()
	snap := c.d.Views.Build(now)
	for n, until := range c.coolDown {
		if !now.Before(until) {
			delete(c.coolDown, n)
		}
	}
	v := c.pass(snap, now)
	if err := c.advance(ctx, v); err != nil {
		return err
	}
	// Commands may have moved on: look again before deciding.
	v = c.pass(snap, now)
	c.clearLeftovers(ctx, v)
	in := c.input(v)
	c.report(ctx, v, in)
	c.metrics.passes.Inc()
	if val := c.validating; val != nil {
		if now.Sub(val.since) < c.cfg.ValidationDelay {
			// As in Karpenter, which blocks for its validation, nothing
			// else is decided while a decision waits, but expiration
			// (Karpenter's own controller).
			return c.expire(ctx, v, in)
		}
		c.validating = nil
		dec, rej, err := disruption.Revalidate(in, val.dec)
		if err != nil {
			return err
		}
		c.failValidation(v, val.dec, rej)
		if dec != nil {
			return c.start(ctx, v, dec)
		}
		// As Karpenter's reconcile, go on with the methods after the one
		// that failed.
		in.After = val.dec.Method
	}
	if in.Settling = c.settling(v); in.Settling != "" {
		c.log.Debug("consolidation waits for moving pods to land", zap.String("why", in.Settling))
	}
	deciding := time.Now()
	res, err := disruption.Decide(in)
	if err != nil {
		return err
	}
	if res.Decision != nil {
		c.metrics.karp.Evaluated(string(res.Decision.Method), time.Since(deciding))
	}
	c.countMoves(res.Moves)
	c.singleNodeOffset = res.NextSingleNodeOffset
	c.events(v, res, in.After == "")
	c.approvals(v, res.Decision)
	dec := res.Decision
	if dec == nil {
		return nil
	}
	if c.validates(dec) {
		c.validating = &validation{key: dec.Key(), since: now, dec: dec}
		c.candidateEvents(v, c.validating)
		c.log.Info("validating disruption decision", zap.String("method", string(dec.Method)), zap.Strings("node", dec.Nodes()),
			zap.Duration("delay", c.cfg.ValidationDelay), zap.String("reason", dec.Message))
		return nil
	}
	return c.start(ctx, v, dec)
}

// expire starts the expiration of the NodeClaims past expireAfter, if any.
func (c *Controller) expire(ctx context.Context, v *pass, in *disruption.Input) error {
	dec, err := disruption.Expiration(in)
	if err != nil || dec == nil {
		return err
	}
	return c.start(ctx, v, dec)
}

// validates says whether dec waits ValidationDelay and is validated again
// before it is executed, as Karpenter's emptiness and consolidation
// commands are; drift and expiration act at once.
func (c *Controller) validates(dec *disruption.Decision) bool {
	if c.cfg.ValidationDelay < 0 {
		return false
	}
	switch dec.Method {
	case disruption.MethodEmptiness, disruption.MethodSingleNode, disruption.MethodMultiNode:
		return true
	}
	return false
}

// settling says why the pods of nodes a command deleted are still moving
// (disruption.Input.Settling): such a node still has pods to evict, or a
// pod created since, not bound yet, is likely one of theirs coming back.
// A node is waited for at most SettleMax after its deletion.
func (c *Controller) settling(v *pass) string {
	var since time.Time
	for node, at := range c.moving {
		if v.now.Sub(at) >= c.cfg.SettleMax {
			delete(c.moving, node)
			continue
		}
		if since.IsZero() || at.Before(since) {
			since = at
		}
	}
	for _, node := range slices.Sorted(maps.Keys(c.moving)) {
		for _, p := range v.snap.PodsByNode[node] {
			if podutil.Reschedulable(p) && podutil.Evictable(p, v.now) {
				return fmt.Sprintf("pods of node %s are still to move", node)
			}
		}
	}
	if since.IsZero() {
		return ""
	}
	// The view's Pending holds only pods kube-scheduler has found no room
	// for: a new pod it has not tried yet is not there.
	for _, p := range c.d.Cache.Pods() {
		if p.Spec.NodeName == "" && podutil.Active(p) && !podutil.OwnedByDaemonSet(p) && p.CreationTimestamp.Add(time.Second).After(since) {
			return fmt.Sprintf("pod %s/%s is not bound yet", p.Namespace, p.Name)
		}
	}
	return ""
}
