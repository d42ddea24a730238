// Package provisioner is the leader's provisioning loop: it batches pending
// pods (1 s idle, 10 s max), runs the scheduler on the cluster view with
// in-flight launch intents counted as capacity, freezes every launch input
// and commits the plan to raft (PlanCommit), then creates the NodeClaim
// objects; the launcher drives each intent to an instance.
package provisioner

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
	"github.com/joiner-dev/joiner/userdata"
)

// Cache is the informer cache the provisioner reads (kube.Cache).
type Cache interface {
	NodePool(name string) *karpv1.NodePool
	NodeClaim(name string) *karpv1.NodeClaim
	// ProvisioningTriggers signals the events that start a batch: those of
	// provisionable pods and disrupted nodes, each object once until
	// RearmProvisioningTriggers, which a pass calls first (kube.Cache).
	ProvisioningTriggers() (<-chan struct{}, func())
	RearmProvisioningTriggers()
}

// Writer is the API writes the provisioner makes (kube.Clients).
type Writer interface {
	CreateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
}

// State is the raft state the provisioner reads (fsm.FSM).
type State interface {
	Intents() []fsm.LaunchIntent
	Instances() []fsm.Instance
	Terminations() []fsm.TerminationIntent
}

// Cloud picks the subnet per zone a launch is frozen with (cloud.Provider;
// no I/O).
type Cloud interface {
	SubnetsByZone(subnets []cloud.Subnet) map[string]string
}

// Views builds the cluster view (*view.Builder).
type Views interface {
	Build(now time.Time) *view.View
}

// Classes are the resolved EC2NodeClasses (*view.Catalog).
type Classes interface {
	Class(name string) *view.Class
}

// Deps are the provisioner's collaborators.
type Deps struct {
	Cache   Cache
	Kube    Writer
	State   State
	Raft    fsm.Proposer
	Cloud   Cloud
	Views   Views
	Classes Classes
	// Registerer may be nil (no metrics); Recorder may be nil (no Events).
	Registerer prometheus.Registerer
	Recorder   record.EventRecorder
	Log        *zap.Logger
}

// Config configures a Provisioner.
type Config struct {
	// Cluster is what new nodes join (name, endpoint, CA, service CIDR).
	Cluster userdata.Cluster
	// ClusterFunc (optional: cluster discovery) is read at every plan in
	// place of Cluster, so a new endpoint or service CIDR reaches the next
	// launch; its error keeps claims from launching.
	ClusterFunc func() (userdata.Cluster, error)
	// BatchIdle and BatchMax bound a batch of pending pods (1 s / 10 s).
	BatchIdle, BatchMax time.Duration
	// Resync is the pass interval without cache events (default 10 s).
	Resync time.Duration
	// NominationGrace is how long after its launch an intent whose
	// NodeClaim is gone is left alone rather than recreated (default 1 min;
	// the view's NominationGrace).
	NominationGrace time.Duration
	// BootstrapImage is the agent image the user data starts (optional).
	BootstrapImage string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Wake is called after a plan commits (the launcher's Wake).
	Wake func()
	// NewID returns a fresh launch intent ID and NodeClaim name suffix
	// (default: random lower-case base32, 10 characters).
	NewID func() string
}

// Provisioner is the provisioning leader loop.
type Provisioner struct {
	cfg     Config
	d       Deps
	log     *zap.Logger
	metrics *metrics
	// said remembers the last reason told to each pod (Events are not
	// repeated every pass, only every 5 minutes or when it changes).
	said map[string]string
	// nominatedTo remembers where each pending pod was last told it
	// would go (Nominated Events are not repeated for the same place).
	nominatedTo map[string]string
	// dedupe holds Karpenter's dedupe windows (NoCompatibleInstanceTypes).
	dedupe *events.Dedupe

	mu sync.Mutex
	// passDone is the start time of the last provisioning pass that
	// completed (planned and committed everything it found).
	passDone time.Time
}

// New builds a Provisioner.
func New(cfg Config, d Deps) (*Provisioner, error) {
	defaults.Positive(&cfg.BatchIdle, time.Second)
	defaults.Positive(&cfg.BatchMax, 10*time.Second)
	defaults.Positive(&cfg.Resync, 10*time.Second)
	defaults.Positive(&cfg.NominationGrace, time.Minute)
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	loop.Defaults(&cfg.Now, &d.Recorder, &d.Log)
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, err
	}
	return &Provisioner{cfg: cfg, d: d, log: d.Log.Named("provisioner"), metrics: m, said: map[string]string{}, nominatedTo: map[string]string{},
		dedupe: events.NewDedupe(cfg.Now)}, nil
}

// cluster is what the next node joins.
func (p *Provisioner) cluster() (userdata.Cluster, error) {
	if p.cfg.ClusterFunc != nil {
		return p.cfg.ClusterFunc()
	}
	return p.cfg.Cluster, nil
}

// Run provisions until ctx ends: a pass after each batch of provisioning
// triggers (BatchIdle without a new one, at most BatchMax after the first)
// and every Resync.
func (p *Provisioner) Run(ctx context.Context) error {
	changes, stop := p.d.Cache.ProvisioningTriggers()
	defer stop()
	return loop.Run(ctx, loop.Spec{Name: "provisioning", Log: p.log, Pass: p.Reconcile,
		Every: p.cfg.Resync, Changes: changes, BatchIdle: p.cfg.BatchIdle, BatchMax: p.cfg.BatchMax})
}

// PlannedSince reports whether a provisioning pass that started after t
// has completed: the pods that needed capacity at t (for example those of
// a node deleted then) have it planned. The termination controller drains
// only after that, so replacement capacity comes first.
func (p *Provisioner) PlannedSince(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.passDone.After(t)
}

// Reconcile runs one provisioning pass: snapshot, plan, commit, create.
func (p *Provisioner) Reconcile(ctx context.Context) error {
	started := p.cfg.Now()
	if err := p.reconcile(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	p.passDone = started
	p.mu.Unlock()
	return nil
}

func (p *Provisioner) reconcile(ctx context.Context) error {
	// The batch has closed: the objects that triggered it may trigger the
	// next (Karpenter's batcher forgets its window's UIDs).
	p.d.Cache.RearmProvisioningTriggers()
	if err := p.ensureNodeClaims(ctx); err != nil {
		return err
	}
	seen := p.cfg.Now()
	s := p.d.Views.Build(seen)
	p.metrics.pending.Set(float64(len(s.Pending)))
	p.trackDecisions(s, seen)
	p.metrics.karp.IgnoredPods(ignoredPods(s))
	if len(s.Pending) == 0 {
		return nil
	}
	p.log.Info("found provisionable pod(s)", zap.Int("pods", len(s.Pending)), zap.Strings("pod", podKeys(s.Pending, 10)))
	if len(s.Released) > 0 {
		var sample []string
		for _, key := range slices.Sorted(maps.Keys(s.Released))[:min(5, len(s.Released))] {
			sample = append(sample, key+": "+s.Released[key])
		}
		p.log.Info("planning pod(s) again whose nomination no longer holds", zap.Int("pods", len(s.Released)), zap.Strings("pod", sample))
	}
	in := s.SchedulerInput(s.Pending, s.Nodes)
	// EffectiveZones below prepares the same pools: the tables are built once.
	in.TypeTables = &scheduler.TypeTables{}
	solved := p.metrics.karp.SolveStarted("provisioner", len(in.Pods))
	start := time.Now()
	plan := scheduler.Solve(in)
	p.metrics.schedulingDuration.Observe(time.Since(start).Seconds())
	p.metrics.karp.Scheduled("provisioner", time.Since(start), len(plan.Unschedulable))
	solved(len(plan.Unschedulable))
	// classified on the input beside the solve, not timed with it
	p.metrics.karp.PendingByZone("provisioner", scheduler.EffectiveZones(in))
	p.metrics.karp.PodsDecided(p.cfg.Now(), decidedPods(plan)...)
	p.metrics.karp.PodsPlanned(p.cfg.Now(), plan, s.PendingByKey)
	for _, u := range plan.Unschedulable {
		p.log.Info("could not schedule pod", zap.String("pod", u.Pod), zap.String("reason", u.Reason))
	}
	p.eventNoInstanceTypes(s, plan)
	p.eventUnschedulable(s, plan)
	p.eventNominations(s, plan)
	if len(plan.NodeClaims) == 0 {
		return nil
	}
	npods := 0
	for _, c := range plan.NodeClaims {
		npods += len(c.Pods)
	}
	p.log.Info("computed new nodeclaim(s) to fit pod(s)", zap.Int("nodeclaims", len(plan.NodeClaims)), zap.Int("pods", npods))
	_, err := p.launch(ctx, s, plan.NodeClaims, "provisioning")
	return err
}

// LaunchClaims commits and creates NodeClaims the caller planned (the
// disruption controller's replacements), nominating pods to them; it
// returns the NodeClaim names.
func (p *Provisioner) LaunchClaims(ctx context.Context, claims []scheduler.NodeClaim, pods []string, reason string) ([]string, error) {
	s := p.d.Views.Build(p.cfg.Now())
	if len(pods) > 0 && len(claims) > 0 {
		// The caller's pods go to the first claim unless it placed them.
		placed := 0
		for _, c := range claims {
			placed += len(c.Pods)
		}
		if placed == 0 {
			claims[0].Pods = append(claims[0].Pods, pods...)
		}
	}
	return p.launch(ctx, s, claims, reason)
}

// trackDecisions keeps Karpenter's per-pod scheduling bookkeeping of a
// pass: pods neither pending nor nominated (bound, deleted) are forgotten,
// pending ones are seen at now, and nominated ones count as decided (a
// plan placed them; they are not planned again while it holds).
func (p *Provisioner) trackDecisions(s *view.View, now time.Time) {
	p.metrics.karp.RetainPods(func(key string) bool {
		_, nominated := s.Nominated[key]
		return nominated || s.PendingByKey[key] != nil
	})
	p.metrics.karp.AckPods(now, s.Pending...)
	if len(s.Nominated) > 0 {
		p.metrics.karp.PodsDecided(now, slices.Collect(maps.Keys(s.Nominated))...)
	}
}

// ignoredPods counts the pending pods whose volumes cannot be used yet (a
// claim missing, lost or being deleted, unbound without a usable storage
// class, bound to a missing volume): Karpenter's provisioner leaves them
// out of its scheduling as invalid and counts them in
// karpenter_scheduler_ignored_pods_count.
func ignoredPods(s *view.View) int {
	n := 0
	for _, p := range s.Pending {
		if s.Volumes[view.Key(p)].Err != "" {
			n++
		}
	}
	return n
}

// decidedPods are the pods the plan decided: placed on a new NodeClaim,
// in-flight capacity or an existing node, or unschedulable.
func decidedPods(plan *scheduler.Plan) []string {
	var keys []string
	for _, c := range plan.NodeClaims {
		keys = append(keys, c.Pods...)
	}
	for _, n := range plan.Nominations {
		keys = append(keys, n.Pod)
	}
	for _, u := range plan.Unschedulable {
		keys = append(keys, u.Pod)
	}
	return keys
}

// ErrNotReady: a claim's pool or class is not usable right now.
var ErrNotReady = errors.New("nodepool or ec2nodeclass not ready")

// eventUnschedulable tells each pod no pool can take why (once per reason;
// pods no longer pending are forgotten).
func (p *Provisioner) eventUnschedulable(s *view.View, plan *scheduler.Plan) {
	for key := range p.said {
		if s.PendingByKey[key] == nil {
			delete(p.said, key)
		}
	}
	for _, u := range plan.Unschedulable {
		pod := s.PendingByKey[u.Pod]
		if pod == nil {
			continue
		}
		// Karpenter's dedupe (once per pod per 5 minutes) keeps the Event
		// fresh while the pod waits; a new reason is told at once.
		again := p.dedupe.Allow(failedSchedulingDedupe, events.FailedScheduling, events.ObjectKey(pod))
		if again || p.said[u.Pod] != u.Reason {
			p.said[u.Pod] = u.Reason
			events.Publish(p.d.Recorder, events.PodFailedToSchedule(pod, u.Reason))
		}
	}
}

// failedSchedulingDedupe is how often Karpenter repeats a pending pod's
// FailedScheduling Event (its PodFailedToScheduleEvent's DedupeTimeout).
const failedSchedulingDedupe = 5 * time.Minute

// noTypesDedupe is how long Karpenter keeps a NodePool's
// NoCompatibleInstanceTypes from being recorded again.
const noTypesDedupe = time.Minute

// eventNoInstanceTypes tells each NodePool whose requirements leave none
// of its class's instance types (Karpenter's NoCompatibleInstanceTypes,
// recorded when a scheduler is built, at most once a minute per pool).
func (p *Provisioner) eventNoInstanceTypes(s *view.View, plan *scheduler.Plan) {
	for np, minValues := range poolsWithoutTypes(s.NodePools, plan.NodePools) {
		if p.dedupe.Allow(noTypesDedupe, events.NoCompatibleInstanceTypes, events.ObjectKey(np)) {
			p.log.Info("skipping, nodepool requirements filtered out all instance types", logging.NodePool(np.Name), zap.Bool("minValuesIncompatible", minValues))
			events.Publish(p.d.Recorder, events.PoolHasNoInstanceTypes(np, minValues))
		}
	}
}

// poolsWithoutTypes are the pools whose requirements and offerings leave
// none of their class's instance types, by the scheduler's explanation:
// every type excluded for the pool's requirements or for want of an
// available offering, or (true) the types left cannot meet the pool's
// minValues (Karpenter's "due to minValues incompatibility"). (Types too
// small for DaemonSets or over limits do not count: Karpenter's filter
// leaves them in.) Static pools, which the scheduler leaves out, have no
// explanation and are not reported.
func poolsWithoutTypes(pools []*karpv1.NodePool, expl []scheduler.PoolExplanation) map[*karpv1.NodePool]bool {
	byName := make(map[string]*karpv1.NodePool, len(pools))
	for _, np := range pools {
		byName[np.Name] = np
	}
	out := map[*karpv1.NodePool]bool{}
	for _, e := range expl {
		np := byName[e.NodePool]
		if np == nil {
			continue
		}
		left := e.InstanceTypes
		for _, x := range e.Excluded {
			if x.Reason == scheduler.ExcludedRequirements || x.Reason == scheduler.ExcludedNoOffering {
				left -= x.Count
			}
		}
		switch {
		case left <= 0:
			out[np] = false
		case e.MinValuesUnmet:
			out[np] = true
		}
	}
	return out
}

// eventNominated tells the pods of a new NodeClaim where they will go.
func (p *Provisioner) eventNominated(s *view.View, pl planned) {
	for _, key := range pl.pods {
		if pod := s.PendingByKey[key]; pod != nil && pod.UID != "" {
			p.nominatedTo[key] = pl.claim.Name
			events.Publish(p.d.Recorder, events.NominatedPod(pod, pl.claim.Name, ""))
		}
	}
}

// eventNominations tells each pending pod planned onto an existing node
// or an in-flight NodeClaim where it will go, as Karpenter's Nominated
// does ("nodeclaim/<name>, node/<name>" for a managed node), once per
// place; pods no longer pending are forgotten.
func (p *Provisioner) eventNominations(s *view.View, plan *scheduler.Plan) {
	for key := range p.nominatedTo {
		if s.PendingByKey[key] == nil {
			delete(p.nominatedTo, key)
		}
	}
	if len(plan.Nominations) == 0 {
		return
	}
	inFlight := map[string]bool{}
	for _, n := range s.Nodes {
		inFlight[n.Name] = n.InFlight
	}
	claimOf := map[string]string{}
	for _, n := range s.AllNodes {
		for _, o := range n.OwnerReferences {
			if o.Kind == "NodeClaim" {
				claimOf[n.Name] = o.Name
			}
		}
	}
	for _, nm := range plan.Nominations {
		pod := s.PendingByKey[nm.Pod]
		if pod == nil || pod.UID == "" || p.nominatedTo[nm.Pod] == nm.Node {
			continue
		}
		p.nominatedTo[nm.Pod] = nm.Node
		if inFlight[nm.Node] {
			events.Publish(p.d.Recorder, events.NominatedPod(pod, nm.Node, ""))
		} else {
			events.Publish(p.d.Recorder, events.NominatedPod(pod, claimOf[nm.Node], nm.Node))
		}
	}
}

func podKeys(pods []*corev1.Pod, max int) []string {
	out := make([]string, 0, min(len(pods), max))
	for _, p := range pods {
		if len(out) == max {
			break
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}
