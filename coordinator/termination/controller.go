package termination

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/drain"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
)

// Cache is the informer cache the controller reads (kube.Cache).
type Cache interface {
	NodeClaims() []*karpv1.NodeClaim
	Nodes() []*corev1.Node
	NodeByProviderID(id string) *corev1.Node
	NodeClaimByProviderID(id string) *karpv1.NodeClaim
	Changes() (<-chan struct{}, func())
}

// podCache reads one pod from the informer cache (kube.Cache), nil when
// it is not there.
type podCache interface {
	Pod(namespace, name string) *corev1.Pod
}

// Claims reads and writes NodeClaims on the API server (kube.Clients).
type Claims interface {
	GetNodeClaim(ctx context.Context, name string) (*karpv1.NodeClaim, error)
	UpdateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	UpdateNodeClaimStatus(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	DeleteNodeClaim(ctx context.Context, name string) error
}

// State is the raft state the controller reads (fsm.FSM).
type State interface {
	Intent(id string) (fsm.LaunchIntent, bool)
	Instance(id string) (fsm.Instance, bool)
	Terminations() []fsm.TerminationIntent
}

// Cloud terminates instances and says whether they are gone
// (cloud/aws.Provider). Terminating a
// terminated or unknown instance succeeds.
type Cloud interface {
	Terminate(ctx context.Context, instanceID string) error
	Get(ctx context.Context, instanceID string) (cloud.Instance, error)
}

// Drainer takes a node out of service (*drain.Drainer).
type Drainer interface {
	Cordon(ctx context.Context, req drain.Request) error
	Drain(ctx context.Context, req drain.Request) (drain.Result, error)
}

// Replacements says whether a provisioning pass that started after t has
// completed, so the pods of a node deleted at t have capacity planned
// (*provisioner.Provisioner).
type Replacements interface {
	PlannedSince(t time.Time) bool
}

// Deps are the controller's collaborators.
type Deps struct {
	Cache  Cache
	Claims Claims
	// Kube evicts pods and writes Nodes.
	Kube  kubernetes.Interface
	State State
	Raft  fsm.Proposer
	Cloud Cloud
	// Replacements, when set, holds a NodeClaim's drain until the
	// provisioner has planned capacity for its pods (replacement first), or
	// Config.ReplacementWait has passed since the deletion.
	Replacements Replacements
	// Drainer overrides the drainer (default: drain on Kube).
	Drainer Drainer
	// Volumes, when set, holds an instance's termination (and a lone
	// Node's release) until its drained pods' VolumeAttachments are gone
	// (default: Cache, when it is one).
	Volumes Volumes
	// Registerer may be nil (no metrics); Recorder may be nil (no Events).
	Registerer prometheus.Registerer
	Recorder   record.EventRecorder
	Log        *zap.Logger
}

// Config configures a Controller.
type Config struct {
	// Resync is the pass interval without cache events (default 5 s).
	Resync time.Duration
	// MinInterval spaces passes triggered by cache events (default 200 ms).
	MinInterval time.Duration
	// MaxConcurrentDrains bounds drains running at once (default 10).
	MaxConcurrentDrains int
	// DrainTimeout bounds one drain call of a NodeClaim without a
	// terminationGracePeriod (default 1 h); when it passes with pods still
	// blocked, the drain is started again: such a NodeClaim waits for its
	// pods forever, as in Karpenter.
	DrainTimeout time.Duration
	// ReplacementWait bounds the hold for replacements (default 30 s).
	ReplacementWait time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Controller is the termination leader loop.
type Controller struct {
	cfg     Config
	d       Deps
	log     *zap.Logger
	metrics *metrics

	// drains is the current term's drain set (set by Run).
	mu     sync.Mutex
	drains *drains
	wake   loop.Waker
	// dedupe holds Karpenter's dedupe windows (the Node's
	// TerminationGracePeriodExpiring).
	dedupe *events.Dedupe
	// checked: NodeClaim name -> the cloud's last answer about its
	// terminated instance (the pass loop's goroutine only).
	checked map[string]instanceCheck
}

// instanceCheck is when the cloud was asked about an instance and whether
// it was gone.
type instanceCheck struct {
	at   time.Time
	gone bool
}

// instanceCheckEvery is how often the cloud is asked about the instance of
// a NodeClaim waiting for it to terminate (Karpenter requeues its
// finalizer every 5 s): passes come faster while the cache changes, and a
// scale-down of many nodes must not flood DescribeInstances.
const instanceCheckEvery = 5 * time.Second

// New builds a Controller.
func New(cfg Config, d Deps) (*Controller, error) {
	defaults.Positive(&cfg.Resync, 5*time.Second)
	defaults.Positive(&cfg.ReplacementWait, 30*time.Second)
	defaults.Positive(&cfg.MinInterval, 200*time.Millisecond)
	defaults.Positive(&cfg.MaxConcurrentDrains, 10)
	defaults.Positive(&cfg.DrainTimeout, time.Hour)
	loop.Defaults(&cfg.Now, &d.Recorder, &d.Log)
	log := d.Log.Named("termination")
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, err
	}
	if d.Drainer == nil {
		opts := drain.Options{Now: cfg.Now, Recorder: d.Recorder, Observer: m, KarpenterTermination: true}
		if pods, ok := d.Cache.(podCache); ok {
			opts.Pod = pods.Pod // evicted pods watched in the cache, not polled
		}
		d.Drainer = drain.New(d.Kube, log.Named("drain"), opts)
	}
	if d.Volumes == nil {
		d.Volumes, _ = d.Cache.(Volumes)
	}
	return &Controller{cfg: cfg, d: d, log: log, metrics: m, wake: loop.NewWaker(), dedupe: events.NewDedupe(cfg.Now),
		checked: map[string]instanceCheck{}}, nil
}

// Run terminates deleted NodeClaims and Nodes until ctx ends (the leader's
// term). Drains it started stop with ctx; a new leader resumes from the
// objects' state.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	d := newDrains(c.cfg.Now, c.cfg.MaxConcurrentDrains, c.wake.Wake)
	c.mu.Lock()
	c.drains = d
	c.mu.Unlock()
	defer func() {
		cancel()
		d.wait()
		d.stop()
		c.mu.Lock()
		c.drains = nil
		c.mu.Unlock()
	}()
	changes, stop := c.d.Cache.Changes()
	defer stop()
	return loop.Run(ctx, loop.Spec{Name: "termination", Log: c.log, Pass: c.Reconcile,
		Every: c.cfg.Resync, Changes: changes, MinInterval: c.cfg.MinInterval, Wake: c.wake})
}

// Reconcile makes one pass: every deleting NodeClaim and Node with the
// finalizer takes as many steps as it can without waiting. It returns the
// first error; the other objects still get their turn.
func (c *Controller) Reconcile(ctx context.Context) error {
	var first error
	keep := map[string]bool{}
	for _, nc := range c.d.Cache.NodeClaims() {
		if nc.DeletionTimestamp == nil || !hasFinalizer(nc.Finalizers) || !awsv1.ManagesNodeClaim(nc) {
			continue // another provider's finalizer is that provider's to remove
		}
		keep[claimKey(nc.Name)] = true
		if err := c.reconcileClaim(ctx, nc.Name); err != nil && first == nil {
			first = err
		}
	}
	for _, n := range c.d.Cache.Nodes() {
		if n.DeletionTimestamp == nil || !hasFinalizer(n.Finalizers) {
			continue
		}
		if nc := c.d.Cache.NodeClaimByProviderID(n.Spec.ProviderID); nc != nil && !awsv1.ManagesNodeClaim(nc) {
			continue
		}
		keep[nodeKey(n.Name)] = true
		if err := c.reconcileNode(ctx, n.Name); err != nil && first == nil {
			first = err
		}
	}
	if d := c.currentDrains(); d != nil {
		d.forget(keep)
	}
	for name := range c.checked {
		if !keep[claimKey(name)] {
			delete(c.checked, name)
		}
	}
	return first
}

func (c *Controller) currentDrains() *drains {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drains
}

// maxSteps bounds the steps one object takes in one pass.
const maxSteps = 12

// reconcileClaim takes a deleting NodeClaim through its steps, reading it
// fresh from the API server before each one.
func (c *Controller) reconcileClaim(ctx context.Context, name string) error {
	for range maxSteps {
		if err := ctx.Err(); err != nil {
			return err
		}
		nc, err := c.d.Claims.GetNodeClaim(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		in, err := c.claimInput(ctx, nc)
		if err != nil {
			return err
		}
		step := Decide(in)
		for _, ev := range NodeExpiring(in, step) {
			if c.dedupe.Allow(0, ev.Reason, in.Node.Name) {
				events.Publish(c.d.Recorder, ev)
			}
		}
		done, err := c.doClaimStep(ctx, step, in)
		if err != nil {
			return fmt.Errorf("terminating nodeclaim %s (%s): %w", name, step, err)
		}
		if done {
			return nil
		}
	}
	return nil
}

// claimInput gathers what Decide needs about a NodeClaim.
func (c *Controller) claimInput(ctx context.Context, nc *karpv1.NodeClaim) (ClaimInput, error) {
	in := ClaimInput{Claim: nc, Now: c.cfg.Now(), InstanceID: cloud.InstanceID(nc.Status.ProviderID)}
	if id := nc.Annotations[karpv1.AnnotationLaunchID]; id != "" {
		if li, ok := c.d.State.Intent(id); ok {
			in.Intent = &li
			if in.InstanceID == "" && li.State == fsm.IntentLaunched {
				in.InstanceID = li.InstanceID
			}
		}
	}
	if in.InstanceID != "" {
		_, in.Instance = c.d.State.Instance(in.InstanceID)
		for _, t := range c.d.State.Terminations() {
			// A cancelled intent (a rolled-back disruption) is re-opened by
			// committing it again: treat it as absent.
			if t.ID == TerminationID(in.InstanceID) && t.State != fsm.TerminationCancelled {
				in.Termination = &t
				break
			}
		}
	}
	node, err := c.linkedNode(ctx, nc, in.InstanceID)
	if err != nil {
		return in, err
	}
	in.Node = node
	if c.d.Volumes != nil && nodeLive(node) {
		in.VolumesChecked, in.Attachments = true, c.pendingAttachments(node.Name, in.Now)
	}
	if AwaitsInstance(in) || kubeletDown(in) {
		if err := c.checkInstance(ctx, &in); err != nil {
			return in, err
		}
	}
	return in, nil
}

// checkInstance asks the cloud whether the terminated instance of in is
// gone, at most every instanceCheckEvery per NodeClaim (in between, the
// last answer holds; a gone instance stays gone).
func (c *Controller) checkInstance(ctx context.Context, in *ClaimInput) error {
	name, now := in.Claim.Name, c.cfg.Now()
	in.InstanceChecked = true
	if last, ok := c.checked[name]; ok && (last.gone || now.Sub(last.at) < instanceCheckEvery) {
		in.InstanceGone = last.gone
		return nil
	}
	inst, err := c.d.Cloud.Get(ctx, in.InstanceID)
	switch {
	case errors.Is(err, cloud.ErrNotFound):
		in.InstanceGone = true
	case err != nil:
		// Asked again after instanceCheckEvery, not every pass: a
		// throttled API is not asked harder.
		c.checked[name] = instanceCheck{at: now}
		return fmt.Errorf("looking up terminated instance %s: %w", in.InstanceID, err)
	default:
		in.InstanceState = inst.State
		in.InstanceGone = inst.State == "terminated"
	}
	c.checked[name] = instanceCheck{at: now, gone: in.InstanceGone}
	return nil
}

// pendingAttachments reads the VolumeAttachments that hold a node's
// termination (PendingAttachments) from the cache.
func (c *Controller) pendingAttachments(node string, now time.Time) []string {
	v := c.d.Volumes
	return PendingAttachments(v.VolumeAttachmentsOnNode(node), v.PodsOnNode(node), v.PersistentVolumeClaim, now)
}

// linkedNode finds the NodeClaim's Node in the cache (by provider ID, else
// by instance ID suffix) and reads it fresh.
func (c *Controller) linkedNode(ctx context.Context, nc *karpv1.NodeClaim, instanceID string) (*corev1.Node, error) {
	cached := c.d.Cache.NodeByProviderID(nc.Status.ProviderID)
	if cached == nil && instanceID != "" {
		for _, n := range c.d.Cache.Nodes() {
			if cloud.InstanceID(n.Spec.ProviderID) == instanceID {
				cached = n
				break
			}
		}
	}
	if cached == nil {
		return nil, nil
	}
	n, err := c.d.Kube.CoreV1().Nodes().Get(ctx, cached.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting node %s: %w", cached.Name, err)
	}
	return n, nil
}

// doClaimStep performs one step; done means stop for this pass.
func (c *Controller) doClaimStep(ctx context.Context, step Step, in ClaimInput) (bool, error) {
	nc := in.Claim
	log := c.log.With(logging.NodeClaim(nc.Name))
	reason := Reason(nc)
	switch step {
	case StepNone, StepWaitLaunch:
		return true, nil
	case StepCancelIntent:
		err := fsm.Propose(ctx, c.d.Raft, fsm.IntentCancelType, fsm.IntentCancel{IntentID: in.Intent.ID, Reason: "nodeclaim deleted", At: c.cfg.Now()})
		if errors.Is(err, fsm.ErrNotPending) {
			return false, nil // an attempt started meanwhile: decide again
		}
		if err != nil {
			return true, fmt.Errorf("cancelling launch intent %s: %w", in.Intent.ID, err)
		}
		log.Info("cancelled launch of deleted nodeclaim", zap.String("intent_id", in.Intent.ID))
		return false, nil
	case StepMarkDisrupting:
		if end, ok := GraceDeadline(nc); ok {
			annotated, err := c.annotateTerminationTime(ctx, nc.Name, end)
			if err != nil {
				return true, err
			}
			if annotated != nil {
				// Karpenter says so when it annotates the NodeClaim.
				events.Publish(c.d.Recorder, events.GracePeriodExpiring(annotated, annotated.Annotations[karpv1.AnnotationTerminationTimestamp]))
			}
		}
		// Karpenter records no Event of its own here: the condition
		// appears (no transition), and a disruption's NodeClaim already
		// has DisruptionTerminating.
		if err := c.setClaimCondition(ctx, nc.Name, karpv1.ConditionDisruptionReason, ConditionReason(reason), reason); err != nil {
			return true, err
		}
		log.Info("disrupting nodeclaim", zap.String("reason", reason), zap.String(logging.KeyInstance, in.InstanceID))
		return false, nil
	case StepCommitTermination:
		err := fsm.Propose(ctx, c.d.Raft, fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: TerminationID(in.InstanceID),
			InstanceID: in.InstanceID, Reason: reason, At: c.cfg.Now()})
		if err != nil {
			return true, fmt.Errorf("committing termination of instance %s: %w", in.InstanceID, err)
		}
		log.Info("committed termination intent", zap.String("reason", reason), zap.String(logging.KeyInstance, in.InstanceID))
		return false, nil
	case StepTaint:
		if err := c.d.Drainer.Cordon(ctx, c.drainRequest(nc, in.Node.Name, reason, time.Time{})); err != nil {
			return true, fmt.Errorf("tainting node %s: %w", in.Node.Name, err)
		}
		log.Info("tainted node", logging.Node(in.Node.Name), zap.String("taint", karpv1.TaintDisruptedKey+":NoSchedule"))
		return false, nil
	case StepDrain:
		if c.awaitReplacement(nc) {
			return true, nil
		}
		if meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionDrained) == nil {
			// Karpenter's Drained is Unknown while the drain runs, so its
			// end is a transition (Unknown -> True) with an Event.
			if _, err := c.putClaimCondition(ctx, nc.Name, karpv1.ConditionDrained, metav1.ConditionUnknown, reasonDraining, reasonDraining); err != nil {
				return true, err
			}
		}
		return true, c.startDrain(ctx, claimKey(nc.Name), nc, in.Node.Name, reason, drainingSince(nc, in.Now))
	case StepAwaitVolumes:
		return true, c.awaitVolumes(ctx, log, in)
	case StepVolumesDetached:
		return false, c.volumesDetached(ctx, log, in)
	case StepTerminate:
		return false, c.terminate(ctx, log, in)
	case StepDeleteNode:
		if err := c.deleteNode(ctx, in.Node.Name); err != nil {
			return true, err
		}
		var deleting time.Time
		if nc.DeletionTimestamp != nil {
			deleting = nc.DeletionTimestamp.Time
		}
		c.metrics.karp.NodeTerminated(in.Node, deleting, c.cfg.Now())
		log.Info("deleted node", logging.Node(in.Node.Name))
		return false, nil
	case StepAwaitInstance:
		switch in.InstanceState {
		case "", "shutting-down":
			log.Debug("waiting for the instance to terminate", zap.String(logging.KeyInstance, in.InstanceID))
		default:
			// Still up (EC2's eventual consistency can answer a fresh
			// instance's termination with not found): terminate again, as
			// Karpenter's finalizer calls Delete until the instance is gone.
			log.Info("instance still up after its termination: terminating again",
				zap.String(logging.KeyInstance, in.InstanceID), zap.String("state", in.InstanceState))
			if err := c.d.Cloud.Terminate(ctx, in.InstanceID); err != nil {
				return true, fmt.Errorf("terminating instance %s again: %w", in.InstanceID, err)
			}
		}
		return true, nil
	case StepRemoveFinalizer:
		if err := c.releaseClaim(ctx, nc.Name); err != nil {
			return true, err
		}
		if in.InstanceGone {
			if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionInstanceTerminating); cond != nil && cond.Status == metav1.ConditionTrue {
				c.metrics.karp.InstanceTerminated(nc, c.cfg.Now().Sub(cond.LastTransitionTime.Time))
			}
		}
		took := c.cfg.Now().Sub(nc.DeletionTimestamp.Time)
		c.metrics.terminated.WithLabelValues(reason).Inc()
		c.metrics.duration.Observe(took.Seconds())
		c.metrics.karp.NodeClaimTerminated(nc, took)
		log.Info("deleted nodeclaim", zap.String("reason", reason), zap.Duration("took", took))
		return true, nil
	}
	return true, fmt.Errorf("unexpected step %s", step)
}

// awaitReplacement reports whether the drain of nc should wait for the
// provisioner to plan capacity for its pods first. DeletionTimestamp has
// second precision: a pass must start a second after it to count.
func (c *Controller) awaitReplacement(nc *karpv1.NodeClaim) bool {
	if c.d.Replacements == nil || nc.DeletionTimestamp == nil {
		return false
	}
	deleted := nc.DeletionTimestamp.Time
	if c.d.Replacements.PlannedSince(deleted.Add(time.Second)) || c.cfg.Now().Sub(deleted) >= c.cfg.ReplacementWait {
		return false
	}
	c.log.Debug("waiting for replacement capacity before draining", logging.NodeClaim(nc.Name))
	return true
}

// terminate terminates the instance, marks the NodeClaim
// InstanceTerminating and commits the TerminationResult.
func (c *Controller) terminate(ctx context.Context, log *zap.Logger, in ClaimInput) error {
	nc := in.Claim
	if err := ctx.Err(); err != nil { // a deposed leader makes no cloud call
		return err
	}
	if err := c.d.Cloud.Terminate(ctx, in.InstanceID); err != nil {
		return fmt.Errorf("terminating instance %s: %w", in.InstanceID, err)
	}
	// An answer from before the termination (kubeletDown) says nothing
	// about it: the wait for the instance asks afresh.
	if last, ok := c.checked[nc.Name]; ok && !last.gone {
		delete(c.checked, nc.Name)
	}
	if err := c.setClaimCondition(ctx, nc.Name, karpv1.ConditionInstanceTerminating, "InstanceTerminating",
		"instance "+in.InstanceID+" terminated"); err != nil {
		return err
	}
	if in.Termination != nil {
		if err := fsm.Propose(ctx, c.d.Raft, fsm.TerminationResultType, fsm.TerminationResult{ID: in.Termination.ID, At: c.cfg.Now()}); err != nil {
			return fmt.Errorf("recording termination of instance %s: %w", in.InstanceID, err)
		}
	}
	log.Info("terminated instance", zap.String(logging.KeyInstance, in.InstanceID))
	return nil
}

// reconcileNode handles a deleting Node with the finalizer.
func (c *Controller) reconcileNode(ctx context.Context, name string) error {
	for range maxSteps {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := c.d.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("getting node %s: %w", name, err)
		}
		in := NodeInput{Node: n}
		if c.d.Volumes != nil {
			in.Attachments = c.pendingAttachments(name, c.cfg.Now())
		}
		if cached := c.d.Cache.NodeClaimByProviderID(n.Spec.ProviderID); cached != nil {
			nc, err := c.d.Claims.GetNodeClaim(ctx, cached.Name)
			switch {
			case err == nil:
				in.Claim = nc
			case !apierrors.IsNotFound(err):
				return err
			}
		}
		step := DecideNode(in)
		log := c.log.With(logging.Node(name))
		switch step {
		case StepNone, StepWaitClaim:
			return nil
		case StepAwaitVolumes:
			log.Debug("waiting for volume attachments to be deleted", zap.Strings("volumeattachments", in.Attachments))
			return nil
		case StepDeleteClaim:
			if err := c.d.Claims.DeleteNodeClaim(ctx, in.Claim.Name); err != nil {
				return err
			}
			log.Info("deleting nodeclaim of deleted node", logging.NodeClaim(in.Claim.Name))
			return nil
		case StepTaint:
			if err := c.d.Drainer.Cordon(ctx, c.drainRequest(nil, name, DefaultReason, time.Time{})); err != nil {
				return fmt.Errorf("tainting node %s: %w", name, err)
			}
			log.Info("tainted node", zap.String("taint", karpv1.TaintDisruptedKey+":NoSchedule"))
		case StepDrain:
			return c.startDrain(ctx, nodeKey(name), nil, name, DefaultReason, time.Time{})
		case StepRemoveFinalizer:
			if err := c.releaseNode(ctx, name); err != nil {
				return err
			}
			// Karpenter's node metrics count every Node its termination
			// releases, with a NodeClaim or without.
			c.metrics.karp.NodeTerminated(n, n.DeletionTimestamp.Time, c.cfg.Now())
			log.Info("deleted node")
			return nil
		default:
			return fmt.Errorf("node %s: unexpected step %s", name, step)
		}
	}
	return nil
}

// drainRequest builds the agent/drain request for a node; deadline zero
// means "now + the longest drain".
func (c *Controller) drainRequest(nc *karpv1.NodeClaim, node, reason string, deadline time.Time) drain.Request {
	msg := "node " + node + " is being deleted"
	if nc != nil {
		msg = "nodeclaim " + nc.Name + " is being deleted (" + reason + ")"
	}
	if deadline.IsZero() {
		deadline = c.cfg.Now().Add(c.cfg.DrainTimeout)
	}
	// Evicted pods' Events name the NodeClaim's disruption reason, as the
	// DisruptionReason condition does.
	return drain.Request{Node: node, Reason: taintValue(reason), Message: msg, Deadline: deadline, Evict: true, EvictionReason: ConditionReason(reason)}
}

// MinDrainTime is how long after its NodeClaim's drain began (Drained
// Unknown, once its Node is tainted) a drain must start for the node to
// count as drained when it finds nothing left: pods bound by a scheduler
// that had not seen the taint yet are then drained too, not killed with the
// instance (Karpenter's MinDrainTime).
const MinDrainTime = 5 * time.Second

// drainingSince is when the drain of nc began: its Drained condition's
// Unknown transition, set now when it has none yet; zero once Drained is
// True. The condition's time has second precision on the API server: it is
// counted from the end of its second, so never before the taint.
func drainingSince(nc *karpv1.NodeClaim, now time.Time) time.Time {
	cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionDrained)
	switch {
	case cond == nil:
		return now.Truncate(time.Second).Add(time.Second)
	case cond.Status == metav1.ConditionUnknown:
		return cond.LastTransitionTime.Time.Truncate(time.Second).Add(time.Second)
	}
	return time.Time{}
}

// startDrain starts (once) a drain of node; when it finishes it records
// Drained on the NodeClaim (the Node carries its own condition) and wakes
// the loop. A NodeClaim's node is drained only by a drain that starts
// MinDrainTime after since (the drain's beginning, see drainingSince) and
// leaves nothing on it: an earlier one is followed by another.
func (c *Controller) startDrain(ctx context.Context, key string, nc *karpv1.NodeClaim, node, reason string, since time.Time) error {
	d := c.currentDrains()
	if d == nil {
		return errors.New("drain requested outside Run")
	}
	deadline := c.cfg.Now().Add(c.cfg.DrainTimeout)
	var terminationTime time.Time
	if nc != nil {
		if end, ok := GraceDeadline(nc); ok {
			deadline, terminationTime = end, end
		}
	}
	req := c.drainRequest(nc, node, reason, deadline)
	// Pods are deleted in time to get their own grace period before the
	// terminationGracePeriod ends (Karpenter's DeleteExpiringPods).
	req.TerminationTime = terminationTime
	var claimName string
	if nc != nil {
		claimName = nc.Name
	}
	started := d.start(ctx, key, func(ctx context.Context) time.Duration {
		log := c.log.With(logging.Node(node))
		if claimName != "" {
			log = log.With(logging.NodeClaim(claimName))
		}
		log.Info("draining node", zap.Time("deadline", deadline))
		started := c.cfg.Now()
		res, err := c.d.Drainer.Drain(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				// (the drainer records Karpenter's FailedDraining on the Node)
				log.Warn("drain incomplete; will retry", zap.Error(err), zap.Strings("stuck", res.Stuck))
			}
			return retryFailed
		}
		if claimName != "" && len(res.Left) > 0 {
			// do-not-disrupt pods hold the node until they finish or the
			// terminationGracePeriod passes (Karpenter's rule).
			log.Info("waiting for do-not-disrupt pods before terminating", zap.Strings("pods", res.Left), zap.Int("evicted", len(res.Evicted)))
			pause := retryLeft
			if !res.NextDelete.IsZero() {
				// Back when the next pod is due for deletion.
				pause = min(pause, max(res.NextDelete.Sub(c.cfg.Now()), 0))
			}
			return pause
		}
		if eligible := since.Add(MinDrainTime); !since.IsZero() && started.Before(eligible) {
			log.Debug("nothing left to drain, but the drain started before the minimum drain time: draining again",
				zap.Time("since", since), zap.Duration("min-drain-time", MinDrainTime))
			return min(retryMinDrain, max(eligible.Sub(c.cfg.Now()), 0))
		}
		if claimName != "" {
			// Karpenter's Drained: True, its reason the type, no message.
			if err := c.setClaimCondition(ctx, claimName, karpv1.ConditionDrained, karpv1.ConditionDrained, ""); err != nil {
				log.Warn("recording drained condition", zap.Error(err))
				return retryFailed
			}
		}
		c.metrics.drained.Inc()
		if nc != nil {
			c.metrics.karp.NodeDrained(nc.Labels[karpv1.LabelNodePool])
		}
		log.Info("drained node", zap.Int("evicted", len(res.Evicted)))
		return 0
	})
	if started {
		c.log.Debug("drain started", logging.Node(node))
	}
	return nil
}

// setClaimCondition sets a True condition on the NodeClaim's status.
func (c *Controller) setClaimCondition(ctx context.Context, name, typ, reason, msg string) error {
	_, err := c.putClaimCondition(ctx, name, typ, metav1.ConditionTrue, reason, msg)
	return err
}

// putClaimCondition sets a condition on the NodeClaim's status; changed
// says whether it was not so already.
func (c *Controller) putClaimCondition(ctx context.Context, name, typ string, status metav1.ConditionStatus, reason, msg string) (bool, error) {
	changed := false
	var evs []events.Event
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		nc, err := c.d.Claims.GetNodeClaim(ctx, name)
		if err != nil {
			return err
		}
		var prior *metav1.Condition
		if p := meta.FindStatusCondition(nc.Status.Conditions, typ); p != nil {
			prior = p.DeepCopy()
		}
		if changed = putCondition(nc, typ, status, reason, msg, c.cfg.Now()); !changed {
			return nil
		}
		updated, err := c.d.Claims.UpdateNodeClaimStatus(ctx, nc)
		if err == nil {
			if updated == nil {
				updated = nc
			}
			evs = conditionEvents(updated, prior, typ)
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("setting condition %s on nodeclaim %s: %w", typ, name, err)
	}
	events.Publish(c.d.Recorder, evs...)
	return changed && err == nil, nil
}

// annotateTerminationTime records when the grace period ends
// (karpenter.sh/nodeclaim-termination-timestamp), as Karpenter does; it
// returns the NodeClaim as written, nil when it already had the value.
func (c *Controller) annotateTerminationTime(ctx context.Context, name string, end time.Time) (*karpv1.NodeClaim, error) {
	value := end.UTC().Format(time.RFC3339)
	var written *karpv1.NodeClaim
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		written = nil
		nc, err := c.d.Claims.GetNodeClaim(ctx, name)
		if err != nil {
			return err
		}
		if nc.Annotations[karpv1.AnnotationTerminationTimestamp] == value {
			return nil
		}
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[karpv1.AnnotationTerminationTimestamp] = value
		written, err = c.d.Claims.UpdateNodeClaim(ctx, nc)
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("annotating nodeclaim %s with its termination time: %w", name, err)
	}
	if err != nil {
		return nil, nil
	}
	return written, nil
}

// releaseClaim removes the finalizer from the NodeClaim.
func (c *Controller) releaseClaim(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		nc, err := c.d.Claims.GetNodeClaim(ctx, name)
		if err != nil {
			return err
		}
		if !hasFinalizer(nc.Finalizers) {
			return nil
		}
		nc.Finalizers = withoutFinalizer(nc.Finalizers)
		if _, err = c.d.Claims.UpdateNodeClaim(ctx, nc); err == nil {
			events.Publish(c.d.Recorder, events.FinalizerRemoved(nc, karpv1.TerminationFinalizer))
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer of nodeclaim %s: %w", name, err)
	}
	return nil
}

// deleteNode deletes the Node, then removes the finalizer from it.
func (c *Controller) deleteNode(ctx context.Context, name string) error {
	err := c.d.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	return c.releaseNode(ctx, name)
}

// releaseNode removes the finalizer from the Node.
func (c *Controller) releaseNode(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.d.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !hasFinalizer(n.Finalizers) {
			return nil
		}
		n.Finalizers = withoutFinalizer(n.Finalizers)
		if _, err = c.d.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err == nil {
			events.Publish(c.d.Recorder, events.FinalizerRemoved(n, karpv1.TerminationFinalizer))
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer of node %s: %w", name, err)
	}
	return nil
}

// reasonDraining is the reason and message of Karpenter's Drained
// condition while the drain runs.
const reasonDraining = "Draining"

func claimKey(name string) string { return "nodeclaim/" + name }
func nodeKey(name string) string  { return "node/" + name }

var notLabelValue = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// taintValue makes a reason a valid taint value (a label value).
func taintValue(reason string) string {
	v := notLabelValue.ReplaceAllString(reason, "-")
	if len(v) > 63 {
		v = v[:63]
	}
	for len(v) > 0 && !isAlnum(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && !isAlnum(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	if v == "" {
		return DefaultReason
	}
	return v
}

func isAlnum(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}
