package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/events"
	"github.com/joiner-dev/joiner/internal/logging"
)

// launch writes the launched instance onto the NodeClaim: labels first
// (metadata), then the status.
func (l *Lifecycle) launch(ctx context.Context, log *zap.Logger, nc *karpv1.NodeClaim, in Inputs) error {
	before := slices.Clone(nc.Status.Conditions)
	it := l.instanceType(log, nc, in.Instance.InstanceType)
	meta, status := ApplyLaunch(nc, in.Intent, in.Instance, it, in.Now)
	status = ApplyWaiting(nc, nil, in.Now) || status // no Node can have the new providerID yet
	if meta {
		st := nc.Status
		out, err := l.d.Claims.UpdateNodeClaim(ctx, nc)
		if err != nil {
			return err
		}
		nc = out
		nc.Status = st
	}
	if status {
		if _, err := l.d.Claims.UpdateNodeClaimStatus(ctx, nc); err != nil {
			return err
		}
	}
	l.metrics.launched.WithLabelValues(nc.Labels[karpv1.LabelNodePool]).Inc()
	events.Publish(l.d.Recorder, transitions(before, nc)...)
	log.Info("launched nodeclaim", zap.String("provider-id", nc.Status.ProviderID), logging.InstanceType(in.Instance.InstanceType),
		zap.String(logging.KeyZone, in.Instance.Zone), zap.String(logging.KeyCapacityType, in.Instance.CapacityType))
	return nil
}

// await writes the conditions of a claim that waits (for its launch, its
// Node, or the Node's initialization), when they changed.
func (l *Lifecycle) await(ctx context.Context, cached *karpv1.NodeClaim, in Inputs) error {
	nc := cached.DeepCopy()
	before := slices.Clone(nc.Status.Conditions)
	issues := ConsistencyIssues(nc, in.Node)
	for _, issue := range issues {
		// Karpenter looks every 10 minutes and tells each issue then.
		if l.consistency.Allow(consistencyScan, events.FailedConsistencyCheck, string(nc.UID), issue) {
			l.log.Info("failed consistency check", logging.NodeClaim(nc.Name), zap.String("issue", issue))
			events.Publish(l.d.Recorder, events.ConsistencyIssue(nc, issue))
		}
	}
	changed := ApplyWaiting(nc, in.Node, in.Now)
	if !ApplyConsistency(nc, in.Node, issues, in.Now) && !changed {
		return nil
	}
	if _, err := l.d.Claims.UpdateNodeClaimStatus(ctx, nc); err != nil {
		return fmt.Errorf("writing the conditions of nodeclaim %s: %w", nc.Name, err)
	}
	events.Publish(l.d.Recorder, transitions(before, nc)...)
	return nil
}

// instanceType finds the instance type for capacity and labels: the
// resolved NodeClass's, else the embedded catalogue's defaults.
func (l *Lifecycle) instanceType(log *zap.Logger, nc *karpv1.NodeClaim, name string) *catalog.InstanceType {
	if ref := nc.Spec.NodeClassRef; ref != nil && l.d.Classes != nil {
		if class := l.d.Classes.Class(ref.Name); class != nil {
			if it := view.FindType(class.InstanceTypes, name); it != nil {
				return it
			}
		}
	}
	for _, it := range catalog.InstanceTypes(catalog.Options{}) {
		if it.Name == name {
			labels := make(map[string]string, len(it.Labels))
			for k, v := range it.Labels {
				if k != karpv1.LabelRegion { // the default catalogue's region may not be ours
					labels[k] = v
				}
			}
			return &catalog.InstanceType{Name: it.Name, Labels: labels, Capacity: it.Capacity, Overhead: it.Overhead}
		}
	}
	log.Warn("instance type not in the catalogue: nodeclaim gets no capacity", logging.InstanceType(name))
	return nil
}

// register syncs the Node, records the instance as registered, then marks
// the NodeClaim Registered.
func (l *Lifecycle) register(ctx context.Context, log *zap.Logger, nc *karpv1.NodeClaim, in Inputs) error {
	if MissingUnregisteredTaint(in.Node) {
		// Karpenter's: the node came up without the taint that keeps pods
		// off it until its labels and taints are synced (custom user data).
		log.Error("node joined without the karpenter.sh/unregistered:NoExecute taint, which prevents registration races",
			logging.Node(in.Node.Name))
		events.Publish(l.d.Recorder, events.TaintMissing(nc))
	}
	node := in.Node.DeepCopy()
	if SyncNode(nc, node) {
		if _, err := l.d.Nodes.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("syncing node %s of nodeclaim %s: %w", node.Name, nc.Name, err)
		}
	}
	if err := l.advance(ctx, in.Instance.ID, fsm.InstanceRegistered, node.Name, in.Now); err != nil {
		return err
	}
	before := slices.Clone(nc.Status.Conditions)
	if changed := ApplyRegistered(nc, node.Name, in.Now); ApplyWaiting(nc, node, in.Now) || changed {
		if _, err := l.d.Claims.UpdateNodeClaimStatus(ctx, nc); err != nil {
			return err
		}
	}
	l.metrics.registered.WithLabelValues(nc.Labels[karpv1.LabelNodePool]).Inc()
	l.metrics.karp.NodeRegistered(nc)
	l.recordHealth(nc, true)
	events.Publish(l.d.Recorder, transitions(before, nc)...)
	log.Info("registered nodeclaim", logging.Node(node.Name), zap.String("provider-id", nc.Status.ProviderID))
	return nil
}

// initialize labels the Node initialized, records the instance as ready,
// then marks the NodeClaim Initialized (and Ready).
func (l *Lifecycle) initialize(ctx context.Context, log *zap.Logger, nc *karpv1.NodeClaim, in Inputs) error {
	if in.Node.Labels[karpv1.LabelInitialized] != "true" {
		node := in.Node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[karpv1.LabelInitialized] = "true"
		if _, err := l.d.Nodes.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("labelling node %s of nodeclaim %s initialized: %w", node.Name, nc.Name, err)
		}
	}
	if err := l.advance(ctx, in.Instance.ID, fsm.InstanceReady, in.Node.Name, in.Now); err != nil {
		return err
	}
	before := slices.Clone(nc.Status.Conditions)
	if ApplyInitialized(nc, in.Now) {
		if _, err := l.d.Claims.UpdateNodeClaimStatus(ctx, nc); err != nil {
			return err
		}
	}
	took := max(in.Now.Sub(nc.CreationTimestamp.Time), 0)
	l.metrics.initialized.WithLabelValues(nc.Labels[karpv1.LabelNodePool]).Inc()
	l.metrics.initDuration.Observe(took.Seconds())
	events.Publish(l.d.Recorder, transitions(before, nc)...)
	log.Info("initialized nodeclaim", logging.Node(in.Node.Name), zap.Duration("after", took.Round(time.Millisecond)))
	return nil
}

// advance commits InstanceStatus to moves an instance forward, only when it
// is behind: an instance already further (draining, terminating) is left.
func (l *Lifecycle) advance(ctx context.Context, id string, to fsm.InstanceState, node string, now time.Time) error {
	inst, ok := l.d.State.Instance(id)
	if !ok || !behind(inst.State, to) {
		return nil
	}
	err := fsm.Propose(ctx, l.d.Raft, fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: id, State: to, NodeName: node, At: now})
	if err != nil && !errors.Is(err, fsm.ErrBackwardTransition) {
		return fmt.Errorf("recording instance %s %s: %w", id, to, err)
	}
	return nil
}

// behind reports whether an instance in state s has yet to reach to on the
// way up (launched -> registered -> ready).
func behind(s, to fsm.InstanceState) bool {
	switch to {
	case fsm.InstanceRegistered:
		return s == fsm.InstanceLaunched
	case fsm.InstanceReady:
		return s == fsm.InstanceLaunched || s == fsm.InstanceRegistered
	}
	return false
}

// terminate commits the termination intent of a claim's instance (the
// shared protocol: the termination controller terminates it once the
// NodeClaim is deleted).
func (l *Lifecycle) terminate(ctx context.Context, nc *karpv1.NodeClaim, inst fsm.Instance, reason string, now time.Time) error {
	if inst.ID == "" {
		return nil
	}
	err := fsm.Propose(ctx, l.d.Raft, fsm.TerminationIntentType, fsm.TerminationIntentCmd{ID: "term-" + inst.ID, InstanceID: inst.ID, Reason: reason, At: now})
	if err != nil {
		return fmt.Errorf("recording termination of instance %s of nodeclaim %s: %w", inst.ID, nc.Name, err)
	}
	return nil
}

// delete annotates the reason and deletes the NodeClaim; its finalizer
// hands it to the termination controller.
func (l *Lifecycle) delete(ctx context.Context, log *zap.Logger, nc *karpv1.NodeClaim, reason, why string) (err error) {
	l.mu.Lock()
	if l.deleting[nc.UID] {
		l.mu.Unlock()
		return nil // GC and a pass raced to the same claim
	}
	l.deleting[nc.UID] = true
	l.mu.Unlock()
	defer func() {
		if err != nil {
			l.mu.Lock()
			delete(l.deleting, nc.UID)
			l.mu.Unlock()
		}
	}()
	if nc.Annotations[karpv1.AnnotationDisruptionReason] == "" {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[karpv1.AnnotationDisruptionReason] = reason
		if _, err := l.d.Claims.UpdateNodeClaim(ctx, nc); err != nil {
			return err
		}
	}
	if err := l.d.Claims.DeleteNodeClaim(ctx, nc.Name); err != nil {
		return err
	}
	l.metrics.deleted.WithLabelValues(nc.Labels[karpv1.LabelNodePool], reason).Inc()
	l.metrics.karp.NodeClaimDisrupted(nc, disruptedReason(reason))
	log.Info("deleted nodeclaim", zap.String("reason", reason), zap.String("detail", why))
	return nil
}
