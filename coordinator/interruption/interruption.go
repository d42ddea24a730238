// Package interruption is the leader's interruption handler: it acts on
// the interruption reports agents (or the SQS backstop) committed to raft.
//
// For a notice that means the instance is going away (spot interruption,
// scheduled maintenance, instance stopping, ASG termination) it commits the
// instance's TerminationIntent (reason "interrupted"), annotates the
// NodeClaim joiner.io/disruption-reason=interrupted and deletes it: the
// provisioner treats the pods of a deleting NodeClaim as needing capacity,
// so the replacement is launched first, while the agent on the node is
// already draining and the termination controller finishes the job. A
// rebalance recommendation only records an Event and a metric (Karpenter
// ignores it by default). A spot interruption also makes its offering
// (instance type, zone, spot) unavailable for the provider's TTL, as a
// capacity error does. Every report is then marked handled, which is
// what makes the loop resumable: a new leader picks up the reports that
// are not.
//
// An instance's notice may arrive twice, from its agent (IMDS) and from
// the interruption queue (EventBridge, see QueueLoop): the first report of
// an instance and kind acts, a later one of the same instance and kind is
// only marked handled (action duplicate), so one notice gives one action
// and one Event whichever way it came.
package interruption

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/disruption/annotate"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/loop"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/defaults"
	"github.com/joiner-dev/joiner/internal/logging"
)

// Reason is the disruption reason interrupted NodeClaims get.
const Reason = "interrupted"

// Notice kinds (agent/imds and the interruption queue).
const (
	KindSpotInterruption = "spot-interruption"
	KindRebalance        = "rebalance-recommendation"
	KindScheduledEvent   = "scheduled-event"
	KindInstanceStopping = "instance-stopping"
	KindASGLifecycle     = "asg-lifecycle"
	// KindInstanceTerminating: the instance is shutting down or
	// terminated (an EC2 state-change notification).
	KindInstanceTerminating = "instance-terminating"
	// KindCapacityReservation: the interruptible capacity reservation
	// the instance runs in is reclaimed (the interruption queue only).
	KindCapacityReservation = "capacity-reservation-interruption"
)

// Action is what a report leads to.
type Action string

// Actions (also the values of joiner_interruption_actions_total{action}).
const (
	// ActionDelete: the instance is going away; delete its NodeClaim.
	ActionDelete Action = "delete"
	// ActionEvent: record an Event only.
	ActionEvent Action = "event"
	// ActionUnknownInstance: no NodeClaim has the instance; nothing to do.
	ActionUnknownInstance Action = "unknown-instance"
	// ActionDuplicate: a report of the same instance and kind was handled
	// already (the agent's and the queue's of one notice); nothing more.
	ActionDuplicate Action = "duplicate"
)

// ActionFor maps a notice kind to its action: termination notices delete,
// rebalance recommendations (and kinds this version does not know) are
// only recorded.
func ActionFor(kind string) Action {
	switch kind {
	case KindSpotInterruption, KindScheduledEvent, KindInstanceStopping, KindInstanceTerminating, KindASGLifecycle, KindCapacityReservation:
		return ActionDelete
	}
	return ActionEvent
}

// kindEvents are the Events per kind: the AWS provider's for the message
// kind it maps each notice to (a scheduled change is its "unhealthy").
var kindEvents = map[string]func(*corev1.Node, *karpv1.NodeClaim) []events.Event{
	KindSpotInterruption:    events.SpotInterruption,
	KindRebalance:           events.RebalanceRecommendation,
	KindScheduledEvent:      events.Unhealthy,
	KindInstanceStopping:    events.Stopping,
	KindInstanceTerminating: events.InstanceGoingAway,
	KindASGLifecycle:        events.InstanceGoingAway,
	KindCapacityReservation: events.ReservationInterruption,
}

// Cache is the informer cache the handler reads (kube.Cache).
type Cache interface {
	NodeClaims() []*karpv1.NodeClaim
	NodeClaim(name string) *karpv1.NodeClaim
	Node(name string) *corev1.Node
}

// Claims writes NodeClaims (kube.Clients).
type Claims interface {
	GetNodeClaim(ctx context.Context, name string) (*karpv1.NodeClaim, error)
	UpdateNodeClaim(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// DeleteNodeClaimIfExists deletes a NodeClaim; false: it was gone
	// already (NotFound), which is no error.
	DeleteNodeClaimIfExists(ctx context.Context, name string) (bool, error)
}

// State is the raft state the handler reads (fsm.FSM).
type State interface {
	Interruptions() []fsm.InterruptionReport
	Instance(id string) (fsm.Instance, bool)
	Intent(id string) (fsm.LaunchIntent, bool)
}

// Offerings is the cloud's cache of unavailable offerings
// (cloud/aws.Provider).
type Offerings interface {
	MarkUnavailable(k cloud.OfferingKey, reason string)
	// MarkReservationUnavailable: the capacity reservation takes no more
	// instances until EC2 reports it again.
	MarkReservationUnavailable(id, reason string)
}

// Deps are the handler's collaborators.
type Deps struct {
	Cache  Cache
	Claims Claims
	State  State
	Raft   fsm.Proposer
	// Offerings may be nil (spot interruptions mark no offering).
	Offerings Offerings
	// Registerer may be nil (no metrics); Recorder may be nil (no Events).
	Registerer prometheus.Registerer
	Recorder   record.EventRecorder
	Log        *zap.Logger
}

// Config configures a Handler.
type Config struct {
	// Interval between passes over the reports (default 1 s).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnUnavailable (optional) runs after an offering was marked
	// unavailable (wake the nodeclass loop to publish it).
	OnUnavailable func()
}

// Handler is the interruption leader loop.
type Handler struct {
	cfg     Config
	d       Deps
	log     *zap.Logger
	metrics *metrics
	wake    loop.Waker
}

// New builds a Handler.
func New(cfg Config, d Deps) (*Handler, error) {
	defaults.Positive(&cfg.Interval, time.Second)
	loop.Defaults(&cfg.Now, &d.Recorder, &d.Log)
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, d: d, log: d.Log.Named("interruption"), metrics: m, wake: loop.NewWaker()}, nil
}

// Wake asks for a pass now (after a report commits). It never blocks.
func (h *Handler) Wake() { h.wake.Wake() }

// Run handles reports until ctx ends: a pass every Interval and after each
// Wake (call it when a report commits).
func (h *Handler) Run(ctx context.Context) error {
	return loop.Run(ctx, loop.Spec{Name: "interruption", Log: h.log, Pass: h.Reconcile, Every: h.cfg.Interval, Wake: h.wake})
}

// Reconcile handles every report not yet handled. It returns the first
// error; the other reports still get their turn.
func (h *Handler) Reconcile(ctx context.Context) error {
	reports := h.d.State.Interruptions()
	handled := map[noticeKey]bool{}
	for _, r := range reports {
		if r.Handled {
			handled[keyOf(r)] = true
		}
	}
	var first error
	for _, r := range reports {
		if r.Handled {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := h.handle(ctx, r, handled[keyOf(r)]); err != nil {
			if first == nil {
				first = fmt.Errorf("handling interruption report %s: %w", r.ID, err)
			}
			continue
		}
		handled[keyOf(r)] = true
	}
	return first
}

// noticeKey is what makes two reports the same notice: the instance and
// the kind.
type noticeKey struct{ instance, kind string }

func keyOf(r fsm.InterruptionReport) noticeKey { return noticeKey{r.InstanceID, r.Kind} }

// handle acts on one report and marks it handled; duplicate: a report of
// the same notice was handled already.
func (h *Handler) handle(ctx context.Context, r fsm.InterruptionReport, duplicate bool) error {
	log := h.log.With(zap.String(logging.KeyNotice, r.ID), zap.String(logging.KeyInstance, r.InstanceID), zap.String("kind", r.Kind))
	nc := findClaim(h.d.Cache, h.d.State, r.InstanceID)
	action := ActionFor(r.Kind)
	switch {
	case duplicate:
		action = ActionDuplicate
	case nc == nil:
		action = ActionUnknownInstance
	}
	if action != ActionDuplicate {
		switch r.Kind {
		case KindSpotInterruption:
			h.markUnavailable(log, r, nc)
		case KindCapacityReservation:
			h.markReservationUnavailable(log, r, nc)
		}
	}
	switch action {
	case ActionDuplicate:
		log.Info("interruption already handled for this instance and kind; nothing more to do")
	case ActionUnknownInstance:
		log.Info("interruption for an instance without a nodeclaim; nothing to do")
	case ActionEvent:
		if _, known := kindEvents[r.Kind]; !known {
			log.Warn("interruption of an unknown kind; recorded only")
		}
		log = log.With(logging.NodeClaim(nc.Name))
		h.event(nc, r)
		log.Info("interruption recorded; no action for this kind")
	case ActionDelete:
		log = log.With(logging.NodeClaim(nc.Name))
		// The kind's Events come first, even for a NodeClaim already
		// being deleted (Karpenter's notifyForMessage).
		h.event(nc, r)
		if err := h.disrupt(ctx, log, nc, r); err != nil {
			return err
		}
	}
	if err := fsm.Propose(ctx, h.d.Raft, fsm.InterruptionHandledType, fsm.InterruptionHandled{ReportID: r.ID, At: h.cfg.Now()}); err != nil {
		return fmt.Errorf("marking handled: %w", err)
	}
	h.metrics.received.WithLabelValues(r.Kind).Inc()
	h.metrics.actions.WithLabelValues(string(action)).Inc()
	return nil
}

// disrupt commits the termination, annotates and deletes the NodeClaim.
func (h *Handler) disrupt(ctx context.Context, log *zap.Logger, cached *karpv1.NodeClaim, r fsm.InterruptionReport) error {
	if _, ok := h.d.State.Instance(r.InstanceID); ok {
		err := fsm.Propose(ctx, h.d.Raft, fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: termination.TerminationID(r.InstanceID),
			InstanceID: r.InstanceID, Reason: Reason, At: h.cfg.Now()})
		if err != nil {
			return fmt.Errorf("committing termination of instance %s: %w", r.InstanceID, err)
		}
	}
	if cached.DeletionTimestamp != nil {
		log.Info("interrupted nodeclaim already deleting")
		return nil
	}
	deleting := func(nc *karpv1.NodeClaim) bool { return nc.DeletionTimestamp != nil }
	nc, err := annotate.Reason(ctx, h.d.Claims, cached.Name, Reason, deleting)
	if err != nil {
		return err
	}
	if nc == nil {
		log.Info("interrupted nodeclaim already gone")
		return nil
	}
	found, err := h.d.Claims.DeleteNodeClaimIfExists(ctx, cached.Name)
	if err != nil {
		return err
	}
	if !found {
		// Gone between the annotation and the delete: nothing was
		// disrupted, so neither the metric nor TerminatingOnInterruption
		// (Karpenter's deleteNodeClaim returns on NotFound before both).
		log.Info("interrupted nodeclaim already gone")
		return nil
	}
	h.metrics.karp.NodeClaimDisrupted(cached, disruptedReason(r.Kind))
	events.Publish(h.d.Recorder, events.InterruptionTerminates(h.node(cached), cached)...)
	log.Info("initiating delete from interruption message", zap.String("reason", Reason), zap.String("deadline", deadline(r)))
	return nil
}

// event records the kind's Events on nc and its Node; a kind this version
// does not know gets a generic one on nc.
func (h *Handler) event(nc *karpv1.NodeClaim, r fsm.InterruptionReport) {
	if evs, ok := kindEvents[r.Kind]; ok {
		events.Publish(h.d.Recorder, evs(h.node(nc), nc)...)
		return
	}
	h.d.Recorder.Eventf(nc, corev1.EventTypeNormal, "Interruption", "%s notice for instance %s (deadline %s)", r.Kind, r.InstanceID, deadline(r))
}

// node is nc's Node from the cache, or nil.
func (h *Handler) node(nc *karpv1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName == "" {
		return nil
	}
	return h.d.Cache.Node(nc.Status.NodeName)
}

func deadline(r fsm.InterruptionReport) string {
	if r.Deadline.IsZero() {
		return "none"
	}
	return r.Deadline.UTC().Format(time.RFC3339)
}

// markUnavailable makes a reclaimed spot instance's offering unavailable
// (Karpenter's unavailable-offerings cache, its TTL): the type and zone
// the instance was launched with, else its NodeClaim's labels.
func (h *Handler) markUnavailable(log *zap.Logger, r fsm.InterruptionReport, nc *karpv1.NodeClaim) {
	if h.d.Offerings == nil {
		return
	}
	k := cloud.OfferingKey{CapacityType: karpv1.CapacityTypeSpot}
	if inst, ok := h.d.State.Instance(r.InstanceID); ok {
		k.InstanceType, k.Zone = inst.InstanceType, inst.Zone
	} else if nc != nil {
		k.InstanceType, k.Zone = nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone]
	}
	if k.InstanceType == "" || k.Zone == "" {
		log.Info("spot interruption of an instance whose type and zone are unknown; no offering marked unavailable")
		return
	}
	h.d.Offerings.MarkUnavailable(k, r.Kind)
	if h.cfg.OnUnavailable != nil {
		h.cfg.OnUnavailable()
	}
}

// markReservationUnavailable makes the interruptible capacity reservation
// a reclaimed instance ran in take no more instances until EC2 reports it
// again (Karpenter's capacity reservation MarkUnavailable): the
// reservation of its NodeClaim's karpenter.k8s.aws/capacity-reservation-id.
func (h *Handler) markReservationUnavailable(log *zap.Logger, r fsm.InterruptionReport, nc *karpv1.NodeClaim) {
	if h.d.Offerings == nil {
		return
	}
	var id string
	if nc != nil {
		id = nc.Labels[karpv1.LabelCapacityReservationID]
	}
	if id == "" {
		log.Info("capacity reservation interruption of an instance whose reservation is unknown; no reservation marked unavailable")
		return
	}
	h.d.Offerings.MarkReservationUnavailable(id, r.Kind)
	if h.cfg.OnUnavailable != nil {
		h.cfg.OnUnavailable()
	}
}

// findClaim finds an instance's NodeClaim: by provider ID, else through
// the instance's launch intent. Never by node name alone: a report's
// instance ID is what the API checked against the caller's node, and a
// node name beside a made-up instance must not reach another node.
func findClaim(cache Cache, state State, instanceID string) *karpv1.NodeClaim {
	for _, nc := range cache.NodeClaims() {
		if strings.HasSuffix(nc.Status.ProviderID, "/"+instanceID) {
			return nc
		}
	}
	if inst, ok := state.Instance(instanceID); ok {
		if in, ok := state.Intent(inst.IntentID); ok {
			if nc := cache.NodeClaim(in.Spec.NodeClaim); nc != nil {
				return nc
			}
		}
	}
	return nil
}
