package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
)

// StaticClaim is the NodeClaim a static pool (spec.replicas) launches: no
// pods, the pool's requirements, and every instance type those allow with
// an available offering, cheapest first (at most MaxInstanceTypes, minValues
// kept). Like Karpenter's static NodeClaim template it carries no requests,
// so no instance type is left out for its size or DaemonSet overhead; the
// launch takes the cheapest offering. in supplies NodePools and
// InstanceTypes (the pool's class); pool names a pool of in.NodePools, static
// or not. It is pure.
func StaticClaim(in *Input, pool string) (NodeClaim, error) {
	i := slices.IndexFunc(in.NodePools, func(np *karpv1.NodePool) bool { return np.Name == pool })
	if i < 0 {
		return NodeClaim{}, fmt.Errorf("nodepool %s not found", pool)
	}
	s := &solver{ri: newResourceIndex(nil, nil)}
	p := s.buildPool(0, in.NodePools[i], &Input{InstanceTypes: in.InstanceTypes})
	if p.err != nil {
		return NodeClaim{}, p.err
	}
	cands := make([]cand, 0, len(p.types))
	for _, t := range p.types {
		if o, ok := cheapestOffering(t.it, p.reqs); ok {
			cands = append(cands, cand{t, o.Price})
		}
	}
	if len(cands) == 0 {
		return NodeClaim{}, fmt.Errorf("nodepool %s: no instance type meets its requirements with an available offering (%d instance types; %s)",
			pool, p.expl.InstanceTypes, strings.Join(p.expl.Messages, "; "))
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if c := cmp.Compare(a.price, b.price); c != 0 {
			return c
		}
		return cmp.Compare(a.t.it.Name, b.t.it.Name)
	})
	if p.minValues && len(cands) > MaxInstanceTypes {
		cands = s.keepMinValues(&claim{pool: p, reqs: p.reqs}, cands)
	}
	cands = cands[:min(len(cands), MaxInstanceTypes)]
	nc := NodeClaim{NodePool: p.name, NodeClass: p.nodeClass}
	for _, c := range cands {
		nc.InstanceTypes = append(nc.InstanceTypes, c.t.it.Name)
	}
	first := cands[0].t
	o, _ := cheapestOffering(first.it, p.reqs)
	nc.InstanceType, nc.Zone, nc.CapacityType, nc.Price = first.it.Name, o.Zone, o.CapacityType, o.Price
	nc.Allocatable = s.ri.toList(first.alloc)
	nc.Requirements = p.reqs.Add(requirements.MustNew(karpv1.LabelInstanceType, requirements.OpIn, nc.InstanceTypes...)).NodeSelectorRequirements()
	return nc, nil
}
