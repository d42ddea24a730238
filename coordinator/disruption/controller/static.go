package controller

import (
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/coordinator/disruption"
)

// recountStatic checks a static drift decision against the static pools'
// NodeClaims counted now (under the static lock): per pool, no replacement
// while the pool is over its replicas, and no more than its limits.nodes
// admits. It returns the decision trimmed to what still holds, nil when
// nothing does.
func (c *Controller) recountStatic(v *pass, dec *disruption.Decision) *disruption.Decision {
	counts := c.d.Static.Counts(c.cfg.Now())
	room := map[string]int64{}
	out := *dec
	out.Candidates, out.Replacements, out.Savings = nil, nil, 0
	for i, n := range dec.Candidates {
		pool := dec.Replacements[i].NodePool
		np := v.snap.NodePool(pool)
		if np == nil || np.Spec.Replicas == nil {
			continue
		}
		r, ok := room[pool]
		if !ok {
			cnt := counts[pool]
			r = disruption.StaticHeadroom(np, cnt)
			if int64(cnt.Active+cnt.PendingDisruption) > *np.Spec.Replicas {
				r = 0
			}
		}
		if r <= 0 {
			c.log.Info("static drift postponed: the nodepool has no room for a replacement now", zap.String("node", n.Name()),
				zap.String("nodepool", pool))
			room[pool] = 0
			continue
		}
		room[pool] = r - 1
		out.Candidates = append(out.Candidates, n)
		out.Replacements = append(out.Replacements, dec.Replacements[i])
		out.Savings += n.Price - dec.Replacements[i].Price
	}
	if len(out.Candidates) == 0 {
		return nil
	}
	return &out
}
