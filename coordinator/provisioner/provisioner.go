// Package provisioner is the leader's provisioning loop: it batches pending
// pods (1 s idle, 10 s max), runs the scheduler on the cluster snapshot with
// in-flight launch intents counted as capacity, commits the plan to raft
// (PlanCommit, with every launch input frozen) and creates the NodeClaim
// objects; the launcher then drives each intent to an instance.
//
// It also keeps NodePools and EC2NodeClasses honest: invalid objects (for
// example created before the CRD had a rule) get a False condition and an
// Event and are left out, while the valid ones keep being served.
package provisioner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	joineraws "github.com/joiner-dev/joiner/cloud/aws"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/userdata"
)

// Cache is the informer cache the provisioner reads (kube.Cache).
type Cache interface {
	Pods() []*corev1.Pod
	Nodes() []*corev1.Node
	NodePools() []*karpv1.NodePool
	NodePool(name string) *karpv1.NodePool
	NodeClasses() []*awsv1.EC2NodeClass
	NodeClaims() []*karpv1.NodeClaim
	NodeClaim(name string) *karpv1.NodeClaim
	DaemonSets() []*appsv1.DaemonSet
	PDBs() []*policyv1.PodDisruptionBudget
	Changes() (<-chan struct{}, func())
}

// Writer is the API writes the provisioner makes (kube.Clients).
type Writer interface {
	CreateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	UpdateNodePoolStatus(ctx context.Context, np *karpv1.NodePool) (*karpv1.NodePool, error)
	UpdateEC2NodeClassStatus(ctx context.Context, nc *awsv1.EC2NodeClass) (*awsv1.EC2NodeClass, error)
}

// State is the raft state the provisioner reads (fsm.FSM).
type State interface {
	Intents() []fsm.LaunchIntent
	Intent(id string) (fsm.LaunchIntent, bool)
	Instances() []fsm.Instance
	Terminations() []fsm.TerminationIntent
	NominatedPods() map[string]string
}

// Proposer commits a command through raft (cluster.RaftProposer).
type Proposer interface {
	Propose(ctx context.Context, cmd []byte) (any, error)
}

// Cloud resolves NodeClasses and lists their instance types
// (cloud/aws.Provider).
type Cloud interface {
	Resolve(ctx context.Context, nc *awsv1.EC2NodeClass) (joineraws.Resolved, error)
	SubnetsByZone(subnets []joineraws.Subnet) map[string]string
	InstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error)
	DriftHash(nc *awsv1.EC2NodeClass) string
}

// Config configures a Provisioner.
type Config struct {
	// Cluster is what new nodes join (name, endpoint, CA, service CIDR).
	Cluster userdata.Cluster
	// BatchIdle and BatchMax bound a batch of pending pods (1 s / 10 s).
	BatchIdle, BatchMax time.Duration
	// Resync is the pass interval without cache events (default 10 s).
	Resync time.Duration
	// NominationGrace is how long a pod nominated to a ready instance waits
	// for kube-scheduler before it is planned again (default 1 min).
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
	cache   Cache
	kube    Writer
	state   State
	raft    Proposer
	cloud   Cloud
	rec     record.EventRecorder
	log     *zap.Logger
	metrics *metrics
	reports *reportState

	mu sync.Mutex
	// passDone is the start time of the last provisioning pass that
	// completed (planned and committed everything it found).
	passDone time.Time
}

// New builds a Provisioner. reg may be nil (no metrics); rec may be nil
// (no Events).
func New(cfg Config, cache Cache, kube Writer, state State, raft Proposer, cloud Cloud,
	reg prometheus.Registerer, rec record.EventRecorder, log *zap.Logger) (*Provisioner, error) {
	if cfg.BatchIdle <= 0 {
		cfg.BatchIdle = time.Second
	}
	if cfg.BatchMax <= 0 {
		cfg.BatchMax = 10 * time.Second
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 10 * time.Second
	}
	if cfg.NominationGrace <= 0 {
		cfg.NominationGrace = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if rec == nil {
		rec = &record.FakeRecorder{}
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Provisioner{cfg: cfg, cache: cache, kube: kube, state: state, raft: raft, cloud: cloud, rec: rec,
		log: log.Named("provisioner"), metrics: m, reports: newReportState()}, nil
}

// Run provisions until ctx ends: a pass after each batch of cache events
// (BatchIdle without a new event, at most BatchMax after the first) and
// every Resync.
func (p *Provisioner) Run(ctx context.Context) error {
	changes, stop := p.cache.Changes()
	defer stop()
	tick := time.NewTicker(p.cfg.Resync)
	defer tick.Stop()
	for {
		if err := p.Reconcile(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("provisioning pass incomplete", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-changes:
			if !p.batch(ctx, changes) {
				return ctx.Err()
			}
		}
	}
}

// batch waits until events stop for BatchIdle or BatchMax has passed since
// the first; false when ctx ended.
func (p *Provisioner) batch(ctx context.Context, changes <-chan struct{}) bool {
	max := time.NewTimer(p.cfg.BatchMax)
	defer max.Stop()
	idle := time.NewTimer(p.cfg.BatchIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-max.C:
			return true
		case <-idle.C:
			return true
		case <-changes:
			if !idle.Stop() {
				<-idle.C
			}
			idle.Reset(p.cfg.BatchIdle)
		}
	}
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
	if err := p.ensureNodeClaims(ctx); err != nil {
		return err
	}
	s, err := p.Snapshot(ctx)
	if err != nil {
		return err
	}
	p.metrics.pending.Set(float64(len(s.Pending)))
	if len(s.Pending) == 0 {
		return nil
	}
	p.log.Info("found provisionable pod(s)", zap.Int("pods", len(s.Pending)), zap.Strings("pod", podKeys(s.Pending, 10)))
	start := time.Now()
	plan := scheduler.Solve(&scheduler.Input{Pods: s.Pending, NodePools: s.NodePools, NodeClasses: s.NodeClasses,
		InstanceTypes: s.InstanceTypes, Nodes: s.Nodes, DaemonSetPods: s.DaemonSetPods})
	p.metrics.schedulingDuration.Observe(time.Since(start).Seconds())
	for _, u := range plan.Unschedulable {
		p.log.Info("could not schedule pod", zap.String("pod", u.Pod), zap.String("reason", u.Reason))
	}
	p.eventUnschedulable(s, plan)
	if len(plan.NodeClaims) == 0 {
		return nil
	}
	npods := 0
	for _, c := range plan.NodeClaims {
		npods += len(c.Pods)
	}
	p.log.Info("computed new nodeclaim(s) to fit pod(s)", zap.Int("nodeclaims", len(plan.NodeClaims)), zap.Int("pods", npods))
	_, err = p.launch(ctx, s, plan.NodeClaims, "provisioning")
	return err
}

// LaunchClaims commits and creates NodeClaims the caller planned (the
// disruption controller's replacements), nominating pods to them; it
// returns the NodeClaim names.
func (p *Provisioner) LaunchClaims(ctx context.Context, claims []scheduler.NodeClaim, pods []string, reason string) ([]string, error) {
	s, err := p.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
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

// ErrNotReady: a claim's pool or class is not usable right now.
var ErrNotReady = errors.New("nodepool or ec2nodeclass not ready")

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
