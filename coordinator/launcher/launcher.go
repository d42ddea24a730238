package launcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/telemetry"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
)

// State is the read side of the FSM the launcher needs.
type State interface {
	Intents() []fsm.LaunchIntent
	Intent(id string) (fsm.LaunchIntent, bool)
	Instance(id string) (fsm.Instance, bool)
}

// Point names a step of the protocol, for tests that crash there.
type Point int

// Protocol points a Hooks.At function sees.
const (
	AfterAttemptStart Point = iota + 1
	AfterCloudLaunch
	BeforeLaunchResult
)

func (p Point) String() string {
	switch p {
	case AfterAttemptStart:
		return "after-attempt-start"
	case AfterCloudLaunch:
		return "after-cloud-launch"
	case BeforeLaunchResult:
		return "before-launch-result"
	}
	return "point-" + strconv.Itoa(int(p))
}

// Hooks let tests observe and interrupt the protocol. Nil funcs are skipped.
type Hooks struct {
	// At runs at each protocol point; a non-nil error aborts the step as if
	// the process had died there.
	At func(p Point, intentID string) error
	// Launched runs after a Launched result has committed.
	Launched func(intentID, instanceID string)
}

// Config configures a Launcher.
type Config struct {
	// Cluster names the cluster whose tagged instances orphan GC reads.
	Cluster string
	// Interval between passes over the intents (default 1 s).
	Interval time.Duration
	// Concurrency is how many intents a pass drives at once (default 32):
	// each waits on raft commits and a cloud call, so a serial pass
	// launches a few dozen instances a second at best.
	Concurrency int
	// GCInterval between orphan collections (default 2 min; 0 keeps the
	// default, negative disables the periodic GC).
	GCInterval time.Duration
	// GCGrace is how old an unwanted tagged instance must be before GC
	// terminates it (default 2 min): a launch may be between the cloud call
	// and its LaunchResult that long. A launched intent's instance that no
	// NodeClaim backs is also kept for GCGrace after its LaunchResult
	// committed, which covers the provisioner's NodeClaim create and
	// recreate (provisioner NominationGrace, 1 min) reaching the cache.
	// Karpenter waits 30 s; its NodeClaim exists before its launch.
	GCGrace time.Duration
	// Now is the clock (default time.Now).
	Now   func() time.Time
	Hooks Hooks
	// OnCapacityError is called after an attempt failed for lack of
	// capacity (the nodeclass loop's Wake: offerings changed).
	OnCapacityError func()
	// OnReservedLaunch is called after an instance launched into a
	// capacity reservation (the nodeclass loop's Wake: the reservation has
	// one instance less to offer).
	OnReservedLaunch func()
}

// Claims finds the NodeClaims the cluster holds (kube.Cache).
type Claims interface {
	NodeClaim(name string) *karpv1.NodeClaim
	NodeClaimByProviderID(id string) *karpv1.NodeClaim
}

// Deps are the launcher's collaborators.
type Deps struct {
	Cloud Cloud
	Raft  fsm.Proposer
	State State
	// Claims lets orphan collection apply Karpenter's rule (an instance no
	// NodeClaim backs is terminated) to launched intents, unknown intents
	// and Karpenter's own instances (nil: raft alone decides, and only
	// instances raft does not want are terminated), and names the
	// NodeClaim a capacity failure is told on.
	Claims Claims
	// Registerer receives joiner_launch_errors_total{reason} (nil: none).
	Registerer prometheus.Registerer
	// Recorder receives Karpenter's InsufficientCapacityError Events
	// (nil, or nil Claims: none).
	Recorder record.EventRecorder
	Log      *zap.Logger
}

// Launcher drives launch intents to launched instances. It runs on the
// leader only, with a context cancelled when leadership is lost.
type Launcher struct {
	cfg    Config
	cloud  Cloud
	raft   fsm.Proposer
	state  State
	claims Claims
	log    *zap.Logger
	wake   loop.Waker
	// errors counts failed cloud calls by reason.
	errors *prometheus.CounterVec
	// recorder tells capacity failures on their NodeClaims.
	recorder record.EventRecorder
	// retry spaces out the passes of an intent whose attempt failed.
	retry *retries
}

// retries holds, per intent, when its next pass may be: after a failed
// attempt (or a cloud call of unknown outcome) the intent waits 1 s, 2 s,
// 4 s ... up to a minute, as Karpenter's NodeClaim launch is requeued with
// exponential backoff, instead of calling the cloud every pass. The memory
// is the leader's: a new leader tries every intent at once (the failover
// recovery).
type retries struct {
	mu      sync.Mutex
	limiter workqueue.TypedRateLimiter[string]
	next    map[string]time.Time
}

func newRetries(base time.Duration) *retries {
	return &retries{limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, time.Minute), next: map[string]time.Time{}}
}

// due reports whether intent id may be driven at now.
func (r *retries) due(id string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !now.Before(r.next[id])
}

// failed delays intent id's next pass; done forgets it.
func (r *retries) failed(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next[id] = now.Add(r.limiter.When(id))
}

// keep forgets the intents not in live (launched, failed or cancelled
// while they waited).
func (r *retries) keep(live map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.next {
		if !live[id] {
			r.limiter.Forget(id)
			delete(r.next, id)
		}
	}
}

func (r *retries) done(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limiter.Forget(id)
	delete(r.next, id)
}

// New builds a Launcher.
func New(cfg Config, d Deps) *Launcher {
	defaults.Positive(&cfg.Interval, time.Second)
	defaults.Positive(&cfg.Concurrency, 32)
	defaults.Zero(&cfg.GCInterval, 2*time.Minute) // negative: no collection
	defaults.Positive(&cfg.GCGrace, 2*time.Minute)
	defaults.Clock(&cfg.Now)
	if cfg.OnCapacityError == nil {
		cfg.OnCapacityError = func() {}
	}
	if cfg.OnReservedLaunch == nil {
		cfg.OnReservedLaunch = func() {}
	}
	defaults.Zero(&d.Log, zap.NewNop())
	l := &Launcher{cfg: cfg, cloud: d.Cloud, raft: d.Raft, state: d.State, claims: d.Claims, log: d.Log.Named("launcher"), wake: loop.NewWaker(),
		recorder: d.Recorder, retry: newRetries(cfg.Interval),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "joiner_launch_errors_total",
			Help: "Failed launch calls, by reason (insufficient-capacity, token-instance-terminated, invalid, rejected, unknown)."}, []string{"reason"})}
	if err := telemetry.Register(d.Registerer, "launcher", l.errors); err != nil {
		l.log.Warn("metrics not exported", zap.Error(err))
	}
	return l
}

// Wake asks for a pass now (after a PlanCommit, say). It never blocks.
func (l *Launcher) Wake() { l.wake.Wake() }

// Run passes over the intents until ctx ends. The first pass is the
// failover recovery: launching intents are adopted by tag or retried with
// their token.
func (l *Launcher) Run(ctx context.Context) error {
	return loop.Run(ctx, loop.Spec{Name: "launch", Log: l.log, Pass: l.Pass, Every: l.cfg.Interval, Wake: l.wake,
		Side: &loop.Side{Every: l.cfg.GCInterval, Do: func(ctx context.Context) {
			if _, err := l.CollectOrphans(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("collecting orphan instances", zap.Error(err))
			}
		}}})
}

// Pass takes every pending or launching intent one step toward launched,
// up to Concurrency at once, in intent order; an intent whose last attempt
// failed waits its backoff (retries). It returns the first error (in
// intent order) that stopped an intent; other intents still get their
// turn.
func (l *Launcher) Pass(ctx context.Context) error {
	var ids []string
	now := l.cfg.Now()
	live := map[string]bool{}
	for _, in := range l.state.Intents() {
		if in.State != fsm.IntentPending && in.State != fsm.IntentLaunching {
			continue
		}
		live[in.ID] = true
		if l.retry.due(in.ID, now) {
			ids = append(ids, in.ID)
		}
	}
	l.retry.keep(live)
	errs := make([]error, len(ids))
	workqueue.ParallelizeUntil(ctx, l.cfg.Concurrency, len(ids), func(i int) {
		errs[i] = l.Drive(ctx, ids[i])
		// Still pending or launching after its pass: the attempt failed
		// (or its outcome is unknown); the intent waits before the next.
		if in, ok := l.state.Intent(ids[i]); ok && (in.State == fsm.IntentPending || in.State == fsm.IntentLaunching) {
			l.retry.failed(ids[i], l.cfg.Now())
		} else {
			l.retry.done(ids[i])
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// Drive runs the protocol for one intent from its committed state.
func (l *Launcher) Drive(ctx context.Context, intentID string) error {
	in, ok := l.state.Intent(intentID)
	if !ok {
		return fmt.Errorf("driving intent %s: %w", intentID, fsm.ErrUnknownIntent)
	}
	log := l.log.With(zap.String("intent_id", in.ID), zap.String("nodeclaim", in.Spec.NodeClaim))
	if in.State == fsm.IntentPending {
		n := in.Attempt + 1
		if err := fsm.Propose(ctx, l.raft, fsm.LaunchAttemptStartType, fsm.LaunchAttemptStart{IntentID: in.ID, Attempt: n, At: l.cfg.Now()}); err != nil {
			return fmt.Errorf("starting attempt %d of intent %s: %w", n, in.ID, err)
		}
		log.Info("launch attempt started", zap.Int("attempt", n))
		if err := l.hook(AfterAttemptStart, in.ID); err != nil {
			return err
		}
		return l.launch(ctx, log, in.ID, n, in.Spec, false)
	}
	if in.State == fsm.IntentLaunching {
		return l.launch(ctx, log, in.ID, in.Attempt, in.Spec, true)
	}
	return nil
}

// launch makes (or recovers) attempt n's cloud call and records the result.
func (l *Launcher) launch(ctx context.Context, log *zap.Logger, intentID string, n int, spec fsm.LaunchSpec, recovering bool) error {
	log = log.With(zap.Int("attempt", n))
	if recovering {
		inst, found, err := l.adopt(ctx, intentID, n)
		if err != nil {
			return err
		}
		if found {
			log.Info("adopted instance launched by a previous leader", zap.String("instance", inst.ID))
			return l.recordLaunched(ctx, log, intentID, n, spec, inst)
		}
	}
	// Check before every cloud mutation: a deposed leader must not launch.
	if err := ctx.Err(); err != nil {
		return err
	}
	req := cloud.LaunchRequest{LaunchID: intentID, Attempt: n, Spec: spec.LaunchSpec}
	inst, err := l.cloud.Launch(ctx, req)
	if hookErr := l.hook(AfterCloudLaunch, intentID); hookErr != nil {
		return hookErr
	}
	if errors.Is(err, cloud.ErrIdempotentMismatch) {
		// The token was used with other parameters (a spec that was not
		// frozen). Adopt the attempt's instance if it exists; otherwise the
		// token is spent and only a new attempt (new token) can launch.
		found, ok, aerr := l.adopt(ctx, intentID, n)
		switch {
		case aerr != nil:
			return fmt.Errorf("%w; %w", err, aerr)
		case ok:
			inst, err = found, nil
		default:
			err = fmt.Errorf("%w; no instance of attempt %d, a new attempt is needed: %w", err, n, cloud.ErrTokenInstanceTerminated)
		}
	}
	if err != nil {
		return l.recordFailure(ctx, log, intentID, n, spec.NodeClaim, err)
	}
	log.Info("launched instance", zap.String("instance", inst.ID), zap.String("instance-type", inst.InstanceType), zap.String("zone", inst.Zone))
	if inst.CapacityType == karpv1.CapacityTypeReserved {
		l.cfg.OnReservedLaunch()
	}
	return l.recordLaunched(ctx, log, intentID, n, spec, inst)
}

// adopt looks for attempt n's instance by its launch-id tag.
func (l *Launcher) adopt(ctx context.Context, intentID string, n int) (cloud.Instance, bool, error) {
	insts, err := l.cloud.List(ctx, map[string]string{karpv1.TagLaunchID: intentID})
	if err != nil {
		return cloud.Instance{}, false, fmt.Errorf("listing instances of intent %s: %w", intentID, err)
	}
	for _, inst := range insts {
		if !inst.Gone() && inst.Attempt() == n {
			return inst, true, nil
		}
	}
	return cloud.Instance{}, false, nil
}

func (l *Launcher) recordLaunched(ctx context.Context, log *zap.Logger, intentID string, n int, spec fsm.LaunchSpec, inst cloud.Instance) error {
	if err := l.hook(BeforeLaunchResult, intentID); err != nil {
		return err
	}
	err := fsm.Propose(ctx, l.raft, fsm.LaunchResultType, fsm.LaunchResult{
		IntentID: intentID, Attempt: n, At: l.cfg.Now(),
		Launched: &fsm.Launched{
			InstanceID: inst.ID, InstanceType: inst.InstanceType, Zone: inst.Zone,
			CapacityType: inst.CapacityType, Price: inst.PriceFrom(spec.Candidates), LaunchedAt: inst.LaunchTime,
		},
	})
	if errors.Is(err, fsm.ErrStaleAttempt) {
		log.Warn("launch result for a superseded attempt ignored", zap.String("instance", inst.ID))
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording launch of intent %s attempt %d: %w", intentID, n, err)
	}
	if l.cfg.Hooks.Launched != nil {
		l.cfg.Hooks.Launched(intentID, inst.ID)
	}
	return nil
}

// recordFailure commits attempt n's failure (launchErr) of the intent
// launching NodeClaim claim; a capacity failure is told on the NodeClaim.
func (l *Launcher) recordFailure(ctx context.Context, log *zap.Logger, intentID string, n int, claim string, launchErr error) error {
	var failed *fsm.Failed
	switch {
	case errors.Is(launchErr, cloud.ErrInsufficientCapacity):
		// Every candidate offering failed (Launch falls back through them
		// all) and is marked unavailable: as Karpenter, the NodeClaim is
		// given up (the lifecycle deletes it) and its pods are planned
		// again, on the offerings still available.
		l.errors.WithLabelValues("insufficient-capacity").Inc()
		l.cfg.OnCapacityError()
		failed = &fsm.Failed{Reason: launchErr.Error(), NoCapacity: true}
	case errors.Is(launchErr, cloud.ErrTokenInstanceTerminated):
		l.errors.WithLabelValues("token-instance-terminated").Inc()
		failed = &fsm.Failed{Reason: launchErr.Error(), Retryable: true}
	case errors.Is(launchErr, cloud.ErrInvalidSpec):
		l.errors.WithLabelValues("invalid").Inc()
		failed = &fsm.Failed{Reason: launchErr.Error()}
	case errors.Is(launchErr, cloud.ErrRejected):
		// Refused outright (a permission, a parameter): nothing was made,
		// so a new attempt (a new token) is safe. As Karpenter retries a
		// failed launch, the intent tries again after its backoff until
		// the lifecycle's launch timeout gives the NodeClaim up, instead
		// of a new NodeClaim every provisioning pass.
		l.errors.WithLabelValues("rejected").Inc()
		failed = &fsm.Failed{Reason: launchErr.Error(), Retryable: true}
	default:
		l.errors.WithLabelValues("unknown").Inc()
		// Outcome unknown: stay launching(n); the next pass adopts by tag
		// or retries the same token.
		return fmt.Errorf("launching intent %s attempt %d: %w", intentID, n, launchErr)
	}
	log.Warn("launch attempt failed", zap.Error(launchErr), zap.Bool("retryable", failed.Retryable))
	if err := l.hook(BeforeLaunchResult, intentID); err != nil {
		return err
	}
	err := fsm.Propose(ctx, l.raft, fsm.LaunchResultType, fsm.LaunchResult{IntentID: intentID, Attempt: n, Failed: failed, At: l.cfg.Now()})
	if errors.Is(err, fsm.ErrStaleAttempt) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recording failure of intent %s attempt %d: %w", intentID, n, err)
	}
	if errors.Is(launchErr, cloud.ErrInsufficientCapacity) {
		l.tellNoCapacity(claim, launchErr)
	}
	return nil
}

// tellNoCapacity records Karpenter's InsufficientCapacityError on the
// NodeClaim named claim, whose launch failed for want of capacity
// (launchErr): once, since the intent fails and the NodeClaim is given up,
// as in Karpenter.
func (l *Launcher) tellNoCapacity(claim string, launchErr error) {
	if l.recorder == nil || l.claims == nil || claim == "" {
		return
	}
	if nc := l.claims.NodeClaim(claim); nc != nil {
		events.Publish(l.recorder, events.NoCapacity(nc, launchErr))
	}
}

func (l *Launcher) hook(p Point, intentID string) error {
	if l.cfg.Hooks.At == nil {
		return nil
	}
	return l.cfg.Hooks.At(p, intentID)
}

// CollectOrphans terminates the cluster's instances that nothing wants
// and that are older than the grace period (orphan reports when). It lists
// the cloud before reading the FSM and the NodeClaims, so an instance
// launched after the list cannot be mistaken for an orphan (Karpenter's
// ordering). It returns the IDs it terminated.
func (l *Launcher) CollectOrphans(ctx context.Context) ([]string, error) {
	insts, err := l.cloud.List(ctx, map[string]string{karpv1.TagClusterPrefix + l.cfg.Cluster: "owned"})
	if err != nil {
		return nil, fmt.Errorf("listing cluster instances: %w", err)
	}
	now := l.cfg.Now()
	var done []string
	for _, inst := range insts {
		if inst.Gone() || now.Sub(inst.LaunchTime) < l.cfg.GCGrace {
			continue
		}
		why := l.orphan(inst, now)
		if why == "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return done, err
		}
		if err := l.cloud.Terminate(ctx, inst.ID); err != nil {
			return done, fmt.Errorf("terminating orphan instance %s: %w", inst.ID, err)
		}
		l.log.Info("terminated orphan instance", zap.String("instance", inst.ID), zap.String("intent_id", inst.LaunchID()),
			zap.Int("attempt", inst.Attempt()), zap.String("reason", why))
		done = append(done, inst.ID)
	}
	return done, nil
}

// orphan says why inst, past the grace period since its launch, is to be
// terminated ("": it is kept). The rules, in order:
//
//   - An instance raft records as terminated or lost is terminated again:
//     a TerminateInstances that answered InvalidInstanceID.NotFound for a
//     fresh instance (EC2's eventual consistency) counted as done, or a
//     lookup that did not find it; raft and its NodeClaim have moved on.
//   - An instance of the current attempt of a launching intent is kept:
//     its LaunchResult may still be on its way (the fenced protocol).
//   - An instance of a launched intent that records it is kept while a
//     NodeClaim backs it (backed), and for the grace period after the
//     launch result committed; then it is Karpenter's instance garbage
//     collection's case, an instance whose NodeClaim does not exist, and
//     is terminated. The grace period from the commit covers the
//     provisioner's NodeClaim create (and its recreate, which it tries
//     for NominationGrace, 1 min, after the commit) reaching the cache.
//   - An instance of another attempt, or of a failed or cancelled intent,
//     is terminated.
//   - An instance of an intent raft does not know (a lost state, an old
//     snapshot) is kept while a NodeClaim backs it, terminated otherwise.
//   - An instance without a launch ID is Karpenter's if it carries the
//     tags Karpenter lists its own by (karpenter.sh/nodepool and
//     karpenter.k8s.aws/ec2nodeclass present, eks:eks-cluster-name of
//     this cluster): terminated when no NodeClaim backs it, as Karpenter
//     does. Anything else (a managed node group's, a self-managed node's)
//     is never touched.
//
// Without a NodeClaim cache (Deps.Claims nil) raft alone decides: no
// instance is terminated for want of a NodeClaim.
func (l *Launcher) orphan(inst cloud.Instance, now time.Time) string {
	id := inst.LaunchID()
	if id == "" {
		if !l.karpenters(inst) || l.claims == nil || l.backed(inst, "") {
			return ""
		}
		return "launched by karpenter, no nodeclaim"
	}
	if rec, ok := l.state.Instance(inst.ID); ok && rec.State.Terminal() {
		return "recorded " + string(rec.State)
	}
	in, ok := l.state.Intent(id)
	if !ok {
		if l.backed(inst, "") {
			// Raft does not know the intent (its state was lost or
			// restored from an older snapshot) but a NodeClaim still
			// names the instance: Karpenter's garbage collection rule
			// keeps it, and so do we; disruption may retire it later.
			l.log.Warn("keeping instance of an unknown launch intent: a nodeclaim backs it",
				zap.String("instance", inst.ID), zap.String("intent_id", id))
			return ""
		}
		return "unknown launch intent"
	}
	switch in.State {
	case fsm.IntentLaunching:
		if inst.Attempt() == in.Attempt {
			return ""
		}
		return "superseded attempt"
	case fsm.IntentLaunched:
		if in.InstanceID != inst.ID {
			return "superseded attempt"
		}
		if l.claims == nil || now.Sub(in.UpdatedAt) < l.cfg.GCGrace || l.backed(inst, in.Spec.NodeClaim) {
			return ""
		}
		return "launched, no nodeclaim"
	}
	return "intent " + string(in.State)
}

// karpenters reports whether inst carries the tags Karpenter v1.14 lists
// its instances by (instance.List's filters).
func (l *Launcher) karpenters(inst cloud.Instance) bool {
	_, pool := inst.Tags[karpv1.TagNodePool]
	_, class := inst.Tags[karpv1.TagNodeClass]
	return pool && class && inst.Tags[karpv1.TagEKSClusterName] == l.cfg.Cluster
}

// backed reports whether a NodeClaim names inst: by provider ID, or by
// name while the NodeClaim's status records no instance yet. The name is
// the instance's karpenter.sh/nodeclaim tag, or claim (its intent's).
func (l *Launcher) backed(inst cloud.Instance, claim string) bool {
	if l.claims == nil {
		return false
	}
	if l.claims.NodeClaimByProviderID(inst.ProviderID()) != nil {
		return true
	}
	// By name while the NodeClaim names no instance yet (or names this
	// one, however its provider ID spells the zone): once its status has
	// another instance, another attempt's instance is not its.
	for _, name := range []string{inst.Tags[karpv1.TagNodeClaim], claim} {
		if name == "" {
			continue
		}
		if nc := l.claims.NodeClaim(name); nc != nil && (nc.Status.ProviderID == "" || cloud.InstanceID(nc.Status.ProviderID) == inst.ID) {
			return true
		}
	}
	return false
}
