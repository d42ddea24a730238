package lifecycle

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/internal/logging"
)

// reservationLabels are the capacity reservation labels of an instance
// launched into a reservation: its reservation's ID, type and
// interruptibility, from the frozen candidate it was launched from (one
// reservation per instance type and zone in a launch). None for an
// instance that is not reserved.
func reservationLabels(in fsm.LaunchIntent, inst fsm.Instance) map[string]string {
	if inst.CapacityType != karpv1.CapacityTypeReserved {
		return nil
	}
	for _, c := range in.Spec.Candidates {
		if c.CapacityType == karpv1.CapacityTypeReserved && c.InstanceType == inst.InstanceType && c.Zone == inst.Zone {
			return map[string]string{karpv1.LabelCapacityReservationID: c.ReservationID,
				karpv1.LabelCapacityReservationType: c.ReservationType, karpv1.LabelCapacityReservationInterruptible: strconv.FormatBool(c.Interruptible)}
		}
	}
	return nil
}

// DemoteReserved turns reserved labels on-demand, as Karpenter does when a
// reservation expires or is cancelled: karpenter.sh/capacity-type becomes
// on-demand and the reservation ID and type labels go. It reports whether
// the labels changed (only labels saying reserved change).
func DemoteReserved(labels map[string]string) bool {
	if labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeReserved {
		return false
	}
	labels[karpv1.LabelCapacityType] = karpv1.CapacityTypeOnDemand
	for _, k := range karpv1.ReservedCapacityLabels {
		delete(labels, k)
	}
	return true
}

// syncCapacityTypes is Karpenter's capacityreservation.capacitytype
// controller over one instance listing: a NodeClaim labelled reserved whose
// instance the cloud now reports on-demand (its reservation ended) is
// demoted, and so is its registered Node. NodeClaims being deleted are
// left alone. It returns the first error; the others still get their turn.
func (l *Lifecycle) syncCapacityTypes(ctx context.Context, insts []cloud.Instance) error {
	onDemand := map[string]bool{}
	for _, ci := range insts {
		if ci.CapacityType == karpv1.CapacityTypeOnDemand && !ci.Gone() {
			onDemand[ci.ID] = true
		}
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, cached := range l.d.Cache.NodeClaims() {
		id := cloud.InstanceID(cached.Status.ProviderID)
		if !onDemand[id] || cached.DeletionTimestamp != nil || cached.Labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeReserved {
			continue
		}
		nc := cached.DeepCopy()
		DemoteReserved(nc.Labels)
		if _, err := l.d.Claims.UpdateNodeClaim(ctx, nc); err != nil {
			keep(fmt.Errorf("demoting nodeclaim %s to on-demand: %w", nc.Name, err))
			continue
		}
		l.log.Info("capacity reservation ended: nodeclaim is on-demand now", logging.NodeClaim(nc.Name),
			zap.String(logging.KeyInstance, id))
		node := l.d.Cache.NodeByProviderID(cached.Status.ProviderID)
		if node == nil || node.DeletionTimestamp != nil || node.Labels[karpv1.LabelRegistered] != "true" {
			continue
		}
		node = node.DeepCopy()
		if !DemoteReserved(node.Labels) {
			continue
		}
		if _, err := l.d.Nodes.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			keep(fmt.Errorf("demoting node %s of nodeclaim %s to on-demand: %w", node.Name, nc.Name, err))
		}
	}
	return first
}

// ReasonCapacityBlockExpiring: the NodeClaim's capacity block ends soon.
const ReasonCapacityBlockExpiring = "capacity_block_expiring"

// capacityBlockNotice is how long before its capacity block ends a
// NodeClaim is deleted: 40 minutes, 10 before EC2 starts reclaiming the
// instances (Karpenter's capacityreservation.expiration controller).
const capacityBlockNotice = 40 * time.Minute

// expireCapacityBlocks deletes the NodeClaims launched into a capacity
// block that ends within capacityBlockNotice (the end its class resolved),
// so their pods move before EC2 takes the instances back. It returns the
// first error; the others still get their turn.
func (l *Lifecycle) expireCapacityBlocks(ctx context.Context) error {
	if l.d.Classes == nil {
		return nil
	}
	now := l.cfg.Now()
	var first error
	for _, cached := range l.d.Cache.NodeClaims() {
		id := cached.Labels[karpv1.LabelCapacityReservationID]
		if id == "" || cached.Labels[karpv1.LabelCapacityReservationType] != string(awsv1.CapacityReservationTypeCapacityBlock) ||
			cached.Spec.NodeClassRef == nil || l.beingDeleted(cached) {
			continue
		}
		class := l.d.Classes.Class(cached.Spec.NodeClassRef.Name)
		if class == nil {
			continue
		}
		for _, r := range class.Resolved.CapacityReservations {
			if r.ID != id || r.EndTime == nil || now.Before(r.EndTime.Add(-capacityBlockNotice)) {
				continue
			}
			nc := cached.DeepCopy()
			log := l.log.With(logging.NodeClaim(nc.Name), zap.String("capacity-reservation-id", id))
			if err := l.delete(ctx, log, nc, ReasonCapacityBlockExpiring, "capacity block "+id+" ends at "+r.EndTime.UTC().Format(time.RFC3339)); err != nil && first == nil {
				first = fmt.Errorf("deleting nodeclaim %s of expiring capacity block %s: %w", nc.Name, id, err)
			}
		}
	}
	return first
}
