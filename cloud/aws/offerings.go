package aws

import (
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud"
)

// MarkUnavailable puts an offering in the cache of unavailable offerings
// for UnavailableTTL (Karpenter's 3 minutes), as a capacity error at
// launch does: until then InstanceTypes reports it unavailable, so the
// scheduler plans around it. The interruption handler calls it for the
// offering of a reclaimed spot instance; reason is logged.
func (p *Provider) MarkUnavailable(k cloud.OfferingKey, reason string) {
	p.unavailable.mark(k)
	p.log.Info("marked offering unavailable", zap.String("reason", reason), zap.String("instance-type", k.InstanceType),
		zap.String("zone", k.Zone), zap.String("capacity-type", k.CapacityType), zap.Duration("ttl", p.opts.UnavailableTTL))
}

// MarkReservationUnavailable makes a capacity reservation take no more
// instances until EC2 reports it again (Karpenter's capacity reservation
// MarkUnavailable), as a reservation's capacity error at launch does. The
// interruption handler calls it for the reservation of an instance whose
// interruptible reservation is reclaimed; reason is logged.
func (p *Provider) MarkReservationUnavailable(id, reason string) {
	p.res.exhausted(id)
	p.log.Info("marked capacity reservation unavailable", zap.String("reason", reason), zap.String("capacity-reservation-id", id))
}
