// Package leader is the one place that lists and starts the raft leader's
// work (as Nomad's establishLeadership / revokeLeadership do): New builds
// every leader loop once per process from one Deps struct, registering
// metrics once; Run starts them for a leadership term, in order, and
// returns when the term ends and every loop has stopped.
//
//	membership (autopilot)   raft membership; does not wait for the cache
//	cloud                    provider background work (prices, launch templates)
//	nodeclass                resolve EC2NodeClasses, NodePool/EC2NodeClass status, publish the catalog
//	launcher                 fenced launches of committed intents, orphan GC
//	provisioner              pending pods -> plan -> PlanCommit -> NodeClaims
//	lifecycle                NodeClaim Launched/Registered/Initialized, liveness, lost instances
//	termination              the termination finalizer: drain, terminate
//	interruption             agent reports -> NodeClaim deletion
//	interruption-queue       interruption queue (SQS) events -> reports (with --interruption-queue)
//	disruption               expiration, drift, emptiness, consolidation
//	static                   static NodePools at their replicas (feature gate StaticCapacity)
//	retention                prune finished records from the replicated state
//	metrics.pod              pods' start-up and bound times (Karpenter's metrics)
//	metrics.status           status condition transitions, terminations (Karpenter's operator_* metrics)
package leader

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	disruptionctl "github.com/joiner-dev/joiner/coordinator/disruption/controller"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/interruption"
	"github.com/joiner-dev/joiner/coordinator/karpmetrics"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/launcher"
	"github.com/joiner-dev/joiner/coordinator/lifecycle"
	"github.com/joiner-dev/joiner/coordinator/nodeclass"
	"github.com/joiner-dev/joiner/coordinator/poolhealth"
	"github.com/joiner-dev/joiner/coordinator/provisioner"
	"github.com/joiner-dev/joiner/coordinator/retention"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/static"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/featuregates"
	"github.com/joiner-dev/joiner/userdata"
)

// Cache is the informer cache every loop reads (*kube.Cache).
type Cache interface {
	view.Cache
	provisioner.Cache
	lifecycle.Cache
	termination.Cache
	interruption.Cache
	disruptionctl.Cache
	disruptionctl.PodEventsCache
	nodeclass.Cache
	static.Cache
	Synced() bool
}

// Deps is everything the leader's work is built from.
type Deps struct {
	// Cluster names the cluster (tags, tokens); UserData is what new
	// nodes join (endpoint, CA, service CIDR).
	Cluster  string
	UserData userdata.Cluster
	// NodeCluster (optional: cluster discovery) is what new nodes join
	// and the Kubernetes version classes resolve for, current; it is read
	// at every plan in place of UserData (UserData.CABundle stays the
	// drift hash's). Its error keeps every EC2NodeClass not ready.
	NodeCluster func() (c userdata.Cluster, k8sVersion string, err error)
	// BootstrapImage is the agent image the user data starts where the
	// agent is not baked into the AMI (optional).
	BootstrapImage string
	// RemoveStartupTaints: the cloud is joiner sim and nobody else
	// removes startup taints.
	RemoveStartupTaints bool
	// MinValuesPolicy is the scheduler's minValues policy (Strict when
	// empty).
	MinValuesPolicy scheduler.MinValuesPolicy
	// StateRetention is how long finished records (handled interruption
	// reports, finished launch and termination intents) stay in the
	// replicated state; 0 keeps them forever (--state-retention).
	StateRetention time.Duration
	// NodeClassRefresh is how often ready EC2NodeClasses are resolved
	// again (0: the nodeclass loop's default, 5 min).
	NodeClassRefresh time.Duration
	// FeatureGates are Karpenter's (--feature-gates); StaticCapacity starts
	// the static loop, SpotToSpotConsolidation lets consolidation replace
	// spot nodes by spot nodes.
	FeatureGates featuregates.Gates
	// BatchIdle and BatchMax bound a provisioning batch of pending pods
	// (0: the provisioner's 1 s and 10 s; --batch-idle-duration,
	// --batch-max-duration).
	BatchIdle, BatchMax time.Duration

	Clients *kube.Clients
	Kube    kubernetes.Interface
	Cache   Cache
	Cloud   cloud.Provider
	State   *fsm.FSM
	Raft    fsm.Proposer
	// Membership, when set, runs raft membership upkeep (autopilot); it
	// starts at once, without waiting for the Kubernetes cache.
	Membership *Loop
	// InterruptionQueue (optional) is the SQS queue of EC2 and AWS Health
	// events the interruption-queue loop consumes (--interruption-queue).
	InterruptionQueue interruption.Queue

	Recorder   record.EventRecorder
	Registerer prometheus.Registerer
	Log        *zap.Logger
}

// Leader is the leader's work, built once per process.
type Leader struct {
	d       Deps
	log     *zap.Logger
	runner  *runner
	catalog *view.Catalog
	// leading is true during a term (Karpenter's gauges are exported then).
	leading *atomic.Bool
	// karp holds Karpenter's metrics; its leader-set gauges end with a term.
	karp *karpmetrics.Metrics
	// first run before the catalog is published; after run once it is.
	first, after []Loop
}

// New builds every leader loop.
func New(d Deps) (*Leader, error) {
	defaults.Zero(&d.Log, zap.NewNop())
	log := d.Log
	r, err := newRunner(d.Registerer, log.Named("leader"))
	if err != nil {
		return nil, fmt.Errorf("registering leader metrics: %w", err)
	}
	// Karpenter's metrics: cloud calls timed, gauges from the cache and
	// the catalog (exported while this replica leads), pods' start-up.
	km, err := karpmetrics.For(d.Registerer)
	if err != nil {
		return nil, err
	}
	d.Cloud = karpmetrics.DecorateCloud(d.Cloud, km, "aws")
	catalog := view.NewCatalog()
	fleet := view.NewFleet()
	leading := &atomic.Bool{}
	if d.Registerer != nil {
		if err := d.Registerer.Register(karpmetrics.NewCollector(karpmetrics.CollectorConfig{Cache: d.Cache, Classes: catalog,
			Leading: leading.Load})); err != nil {
			return nil, fmt.Errorf("registering karpenter gauges: %w", err)
		}
	}
	// Karpenter's operator_* status condition gauges (leader only) and the
	// observer of condition transitions and terminations.
	if d.Registerer != nil {
		if err := d.Registerer.Register(karpmetrics.NewStatusCollector(karpmetrics.StatusCollectorConfig{Cache: d.Cache,
			Leading: leading.Load})); err != nil {
			return nil, fmt.Errorf("registering operator status condition gauges: %w", err)
		}
	}
	statusObserver, err := karpmetrics.NewStatusObserver(karpmetrics.StatusObserverConfig{Cache: d.Cache, Registerer: d.Registerer,
		Log: log.Named("metrics")})
	if err != nil {
		return nil, err
	}
	views := &view.Builder{Cache: d.Cache, State: d.State, Classes: catalog, Fleet: fleet, MinValuesPolicy: d.MinValuesPolicy}

	var classCluster func() (string, error)
	var planCluster func() (userdata.Cluster, error)
	if d.NodeCluster != nil {
		classCluster = func() (string, error) { _, v, err := d.NodeCluster(); return v, err }
		planCluster = func() (userdata.Cluster, error) { c, _, err := d.NodeCluster(); return c, err }
	}
	// Each pool's recent registrations: the lifecycle records them, the
	// nodeclass loop writes NodeRegistrationHealthy from them.
	health := poolhealth.New()
	classes := nodeclass.New(nodeclass.Config{CABundle: d.UserData.CABundle, Refresh: d.NodeClassRefresh}, nodeclass.Deps{Cache: d.Cache, Kube: d.Clients, Cloud: d.Cloud,
		Catalog: catalog, Cluster: classCluster, Health: health, Recorder: d.Recorder, Log: log})
	launch := launcher.New(launcher.Config{Cluster: d.Cluster, OnCapacityError: classes.Wake, OnReservedLaunch: classes.Wake},
		launcher.Deps{Cloud: d.Cloud, Raft: d.Raft, State: d.State, Claims: d.Cache, Registerer: d.Registerer, Recorder: d.Recorder, Log: log})
	prov, err := provisioner.New(provisioner.Config{Cluster: d.UserData, ClusterFunc: planCluster, BootstrapImage: d.BootstrapImage, Wake: launch.Wake,
		BatchIdle: d.BatchIdle, BatchMax: d.BatchMax},
		provisioner.Deps{Cache: d.Cache, Kube: d.Clients, State: d.State, Raft: d.Raft, Cloud: d.Cloud, Views: views,
			Classes: catalog, Registerer: d.Registerer, Recorder: d.Recorder, Log: log})
	if err != nil {
		return nil, err
	}
	lc, err := lifecycle.New(lifecycle.Config{RemoveStartupTaints: d.RemoveStartupTaints},
		lifecycle.Deps{Cache: d.Cache, Claims: d.Clients, Nodes: d.Kube, State: d.State, Raft: d.Raft, Cloud: d.Cloud,
			Classes: catalog, Fleet: fleet, Health: health, Registerer: d.Registerer, Recorder: d.Recorder, Log: log})
	if err != nil {
		return nil, err
	}
	term, err := termination.New(termination.Config{}, termination.Deps{Cache: d.Cache, Claims: d.Clients, Kube: d.Kube,
		State: d.State, Raft: d.Raft, Cloud: d.Cloud, Replacements: prov, Registerer: d.Registerer, Recorder: d.Recorder, Log: log})
	if err != nil {
		return nil, err
	}
	offerings, _ := d.Cloud.(interruption.Offerings) // the decorated cloud forwards both (checked below)
	intr, err := interruption.New(interruption.Config{OnUnavailable: classes.Wake}, interruption.Deps{Cache: d.Cache, Claims: d.Clients,
		State: d.State, Raft: d.Raft, Offerings: offerings, Registerer: d.Registerer, Recorder: d.Recorder, Log: log})
	if err != nil {
		return nil, err
	}
	// Static pools' NodeClaims are counted for static drift whether or not
	// the static loop runs (Karpenter's StaticDrift is not gated either).
	counter := &static.Counter{Cache: d.Cache, State: d.State}
	dis, err := disruptionctl.New(disruptionctl.Config{FeatureGates: disruption.FeatureGates{SpotToSpotConsolidation: d.FeatureGates.SpotToSpotConsolidation,
		NoReservedCapacity: !d.FeatureGates.ReservedCapacity}},
		disruptionctl.Deps{Views: views, Launcher: prov, Cache: d.Cache,
			State: d.State, Raft: d.Raft, Kube: d.Clients, Nodes: disruptionctl.NodeClient(d.Kube), Static: counter,
			Registerer: d.Registerer, Recorder: d.Recorder, Log: log})
	if err != nil {
		return nil, err
	}
	podEvents := disruptionctl.NewPodEvents(disruptionctl.PodEventsConfig{}, d.Cache, d.Clients, log)
	ret, err := retention.New(retention.Config{Retention: d.StateRetention}, retention.Deps{State: d.State, Raft: d.Raft,
		Registerer: d.Registerer, Log: log})
	if err != nil {
		return nil, err
	}
	l := &Leader{d: d, log: log.Named("leader"), runner: r, catalog: catalog, leading: leading, karp: km,
		first: []Loop{
			{"cloud", d.Cloud.Run},
			{"nodeclass", classes.Run},
		},
		after: []Loop{
			{"launcher", launch.Run},
			{"provisioner", prov.Run},
			{"lifecycle", lc.Run},
			{"termination", term.Run},
			{"interruption", intr.Run},
			{"disruption", dis.Run},
			{"podevents", podEvents.Run},
			{"retention", ret.Run},
			{"metrics.pod", karpmetrics.NewPods(d.Cache, km, log.Named("metrics")).Run},
			{"metrics.status", statusObserver.Run},
		}}
	if d.InterruptionQueue != nil {
		q, err := interruption.NewQueueLoop(interruption.QueueConfig{OnCommit: intr.Wake}, interruption.QueueDeps{Queue: d.InterruptionQueue,
			Cache: d.Cache, State: d.State, Raft: d.Raft, Registerer: d.Registerer, Log: log})
		if err != nil {
			return nil, err
		}
		l.after = append(l.after, Loop{"interruption-queue", q.Run})
	}
	if d.FeatureGates.StaticCapacity {
		st := static.New(static.Config{}, static.Deps{Cache: d.Cache, Views: views, Counter: counter, Launcher: prov, Kube: d.Clients,
			Recorder: d.Recorder, Log: log})
		l.after = append(l.after, Loop{"static", st.Run})
	}
	return l, nil
}

// Run is one leadership term: membership upkeep at once; once the informer
// caches have synced, the cloud and nodeclass loops; once the first classes
// are published, every other loop. It returns when ctx ends (leadership
// lost) and every loop has stopped.
func (l *Leader) Run(ctx context.Context) {
	l.leading.Store(true)
	defer l.leading.Store(false)
	defer l.karp.EndTerm() // after every loop has stopped
	var wg sync.WaitGroup
	defer wg.Wait()
	if m := l.d.Membership; m != nil {
		l.runner.start(ctx, &wg, *m)
	}
	// The loops act on a complete view only; say so when it takes long
	// (missing CRDs or RBAC keep an informer from listing).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for waited := time.Duration(0); !l.d.Cache.Synced(); waited += time.Second {
		if waited > 0 && waited%(30*time.Second) == 0 {
			l.log.Warn("leader loops waiting for the informer caches: are Joiner's CRDs installed and its RBAC applied?",
				zap.Duration("waited", waited))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	l.log.Info("leader loops starting", zap.Int("loops", len(l.first)+len(l.after)))
	for _, loop := range l.first {
		l.runner.start(ctx, &wg, loop)
	}
	select {
	case <-ctx.Done():
		return
	case <-l.catalog.Published():
	}
	for _, loop := range l.after {
		l.runner.start(ctx, &wg, loop)
	}
	<-ctx.Done()
	l.log.Info("leader loops stopping")
}

// The cloud the leader is given (decorated for Karpenter's metrics) must
// keep marking interrupted offerings and reservations unavailable.
var _ interruption.Offerings = (*karpmetrics.Cloud)(nil)
