package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/internal/logging"
)

// CollectGarbage checks every live instance in raft against the cloud. One
// that is terminated, or unknown to the cloud past the grace period, is
// recorded as terminated (a termination intent exists) or lost (unless
// its Node still says Ready: kubeletReady), and its
// NodeClaim is deleted (Karpenter: "garbage collecting nodeclaim with no
// cloudprovider representation"); the planner then sees its pods as
// pending again. The same listing demotes reserved NodeClaims whose
// reservation ended (syncCapacityTypes); NodeClaims of capacity blocks
// about to end are deleted (expireCapacityBlocks). It returns the IDs of
// the instances it found gone.
func (l *Lifecycle) CollectGarbage(ctx context.Context) ([]string, error) {
	terminating := map[string]bool{}
	for _, t := range l.d.State.Terminations() {
		terminating[t.InstanceID] = true
	}
	// One List answers for every running instance; only those missing
	// from it are asked for one by one (terminated, or not found).
	insts, err := l.d.Cloud.List(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing cluster instances: %w", err)
	}
	if l.d.Fleet != nil {
		l.d.Fleet.Publish(insts)
	}
	syncErr := cmp.Or(l.syncCapacityTypes(ctx, insts), l.expireCapacityBlocks(ctx))
	listed := make(map[string]bool, len(insts))
	for _, ci := range insts {
		if ci.State != "terminated" {
			listed[ci.ID] = true
		}
	}
	var gone []string
	var first error
	for _, inst := range l.d.State.Instances() {
		if inst.State.Terminal() || listed[inst.ID] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return gone, err
		}
		ci, err := l.d.Cloud.Get(ctx, inst.ID)
		state := CloudRunning
		switch {
		case errors.Is(err, cloud.ErrNotFound):
			state = CloudNotFound
		case err != nil:
			if first == nil {
				first = fmt.Errorf("getting instance %s: %w", inst.ID, err)
			}
			continue
		case ci.State == "terminated":
			state = CloudTerminated
		}
		verdict := DecideGC(inst, state, terminating[inst.ID], l.cfg.Now(), l.cfg.GCGrace)
		if verdict == Keep {
			continue
		}
		if verdict == Lost && l.kubeletReady(ProviderID(inst)) {
			l.log.Debug("instance not found, but its node says Ready: kept", zap.String(logging.KeyInstance, inst.ID))
			continue
		}
		if err := l.collect(ctx, inst, verdict); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		gone = append(gone, inst.ID)
	}
	adopted, err := l.collectAdopted(ctx, listed)
	gone = append(gone, adopted...)
	first = cmp.Or(first, err, syncErr)
	return gone, first
}

// collectAdopted deletes registered NodeClaims Karpenter made (no launch
// intent in raft) whose instance the cloud no longer has, as Karpenter's
// garbage collection does: an instance missing from the listing is looked
// up once more, and only one not found or terminated counts. One not
// registered yet is left to the registration timeout (Karpenter's: the
// cloud's word alone does not delete it).
func (l *Lifecycle) collectAdopted(ctx context.Context, listed map[string]bool) ([]string, error) {
	var gone []string
	var first error
	for _, nc := range l.d.Cache.NodeClaims() {
		id := cloud.InstanceID(nc.Status.ProviderID)
		if nc.Annotations[karpv1.AnnotationLaunchID] != "" || id == "" || listed[id] || l.beingDeleted(nc) || !awsv1.ManagesNodeClaim(nc) ||
			!isTrue(nc.Status.Conditions, karpv1.ConditionRegistered) || l.cfg.Now().Sub(launchedAt(nc)) < l.cfg.GCGrace {
			continue
		}
		ci, err := l.d.Cloud.Get(ctx, id)
		switch {
		case errors.Is(err, cloud.ErrNotFound):
		case err != nil:
			if first == nil {
				first = fmt.Errorf("getting instance %s of nodeclaim %s: %w", id, nc.Name, err)
			}
			continue
		case ci.State != "terminated":
			continue
		}
		if l.kubeletReady(nc.Status.ProviderID) {
			l.log.Debug("instance gone, but its node says Ready: kept", zap.String(logging.KeyInstance, id), logging.NodeClaim(nc.Name))
			continue
		}
		nc = nc.DeepCopy()
		log := l.log.With(zap.String(logging.KeyInstance, id), logging.NodeClaim(nc.Name))
		l.d.Recorder.Eventf(nc, corev1.EventTypeWarning, "InstanceGone", "Instance %s is gone", id)
		log.Info("garbage collecting adopted nodeclaim with no cloudprovider representation")
		if err := l.delete(ctx, log, nc, ReasonInstanceGone, "instance "+id+" is gone"); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		gone = append(gone, id)
	}
	return gone, first
}

// kubeletReady reports whether the Node of providerID says Ready: its
// kubelet runs, whatever the cloud answered (an instance lookup can miss a
// live instance), so Karpenter's garbage collection leaves such a
// NodeClaim alone, and so does this.
func (l *Lifecycle) kubeletReady(providerID string) bool {
	node := l.d.Cache.NodeByProviderID(providerID)
	return node != nil && nodeReady(node)
}

// collect records one gone instance and deletes its NodeClaim.
func (l *Lifecycle) collect(ctx context.Context, inst fsm.Instance, verdict GCVerdict) error {
	to := fsm.InstanceLost
	if verdict == Terminated {
		to = fsm.InstanceTerminated
	}
	err := fsm.Propose(ctx, l.d.Raft, fsm.InstanceStatusType, fsm.InstanceStatus{InstanceID: inst.ID, State: to, At: l.cfg.Now()})
	if err != nil && !errors.Is(err, fsm.ErrBackwardTransition) {
		return fmt.Errorf("recording instance %s %s: %w", inst.ID, to, err)
	}
	l.metrics.instancesGone.WithLabelValues(string(to)).Inc()
	log := l.log.With(zap.String(logging.KeyInstance, inst.ID), logging.InstanceType(inst.InstanceType))
	log.Info("instance gone from the cloud", zap.String("state", string(to)))
	in, ok := l.d.State.Intent(inst.IntentID)
	if !ok || in.Spec.NodeClaim == "" {
		return nil
	}
	nc := l.d.Cache.NodeClaim(in.Spec.NodeClaim)
	if nc == nil || l.beingDeleted(nc) {
		return nil
	}
	nc = nc.DeepCopy()
	l.d.Recorder.Eventf(nc, corev1.EventTypeWarning, "InstanceGone", "Instance %s is %s", inst.ID, to)
	log = log.With(logging.NodeClaim(nc.Name), logging.NodePool(in.Spec.NodePool))
	log.Info("garbage collecting nodeclaim with no cloudprovider representation")
	return l.delete(ctx, log, nc, ReasonInstanceGone, "instance "+inst.ID+" is "+string(to))
}
