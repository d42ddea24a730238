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
