package disruption

import (
	"fmt"
	"math"
	"sort"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
)

// staticDrift replaces drifted nodes of static pools (spec.replicas) one
// for one with a node of the pool, without simulating where their pods go
// (Karpenter's StaticDrift): per pool, none while the pool is over its
// replicas (a scale-down is due first), else as many as both its Drifted
// budget and its limits.nodes allow (a replacement counts against the
// limit until its candidate is gone). Drift's disruption class applies: a
// terminationGracePeriod lets it past pod-level blocks. One decision
// carries every pool's replacements.
func (d *decider) staticDrift() (*Decision, error) {
	var byPool map[string][]*Node
	why := map[*Node]string{}
	for _, n := range d.in.Nodes {
		pool := d.pools[n.Pool()]
		if pool == nil || !isStatic(pool) {
			continue
		}
		r := d.driftCandidate(n, MethodStaticDrift)
		if r == "" {
			continue
		}
		if byPool == nil {
			byPool = map[string][]*Node{}
		}
		why[n] = r
		byPool[pool.Name] = append(byPool[pool.Name], n)
	}
	if len(byPool) == 0 {
		return nil, nil
	}
	budget := d.budgets(karpv1.DisruptionReasonDrifted)
	pools := make([]string, 0, len(byPool))
	for pn := range byPool {
		pools = append(pools, pn)
	}
	sort.Strings(pools)
	dec := &Decision{Method: MethodStaticDrift, Reason: karpv1.DisruptionReasonDrifted}
	var msgs []string
	for _, pn := range pools {
		pool, cands := d.pools[pn], byPool[pn]
		sort.SliceStable(cands, func(i, j int) bool {
			return cands[i].NodeClaim.CreationTimestamp.Before(&cands[j].NodeClaim.CreationTimestamp)
		})
		skipAll := func(format string, args ...any) {
			for _, n := range cands {
				d.blocked(n, MethodStaticDrift, "drifted (%s) but %s", why[n], fmt.Sprintf(format, args...))
			}
		}
		if budget[pn] <= 0 {
			skipAll("the disruption budget of nodepool %s for reason Drifted allows no more disruptions", pn)
			continue
		}
		c := d.staticCount(pn)
		replicas := *pool.Spec.Replicas
		if int64(c.Active+c.PendingDisruption) > replicas {
			skipAll("static nodepool %s has %d nodeclaims for %d replicas: a scale-down or a replacement is under way", pn, c.Active+c.PendingDisruption, replicas)
			continue
		}
		n := min(int64(budget[pn]), int64(len(cands)), StaticHeadroom(pool, c))
		if n <= 0 {
			lim := pool.Spec.Limits[karpv1.ResourceNodes]
			skipAll("static nodepool %s is at its limits.nodes (%s): no room for a replacement", pn, lim.String())
			continue
		}
		rep, err := scheduler.StaticClaim(&scheduler.Input{NodePools: d.in.NodePools, InstanceTypes: d.in.InstanceTypes}, pn)
		if err != nil {
			skipAll("no replacement can be made: %v", err)
			continue
		}
		for i, cand := range cands {
			if int64(i) >= n {
				d.blocked(cand, MethodStaticDrift, "drifted (%s) but static nodepool %s replaces only %d node(s) at a time now (budget, limits.nodes)", why[cand], pn, n)
				continue
			}
			dec.Candidates = append(dec.Candidates, cand)
			dec.Replacements = append(dec.Replacements, rep)
			dec.Savings += cand.Price - rep.Price
			msgs = append(msgs, cand.Name()+": "+why[cand])
		}
	}
	if len(dec.Candidates) == 0 {
		return nil, nil
	}
	dec.Message = "drifted (static nodepool, replaced one for one): " + strings.Join(msgs, "; ")
	return dec, nil
}

// staticCount is a static pool's NodeClaims by state: Input.StaticCounts,
// else its managed nodes (marked for deletion: deleting).
func (d *decider) staticCount(pool string) StaticCount {
	if c, ok := d.in.StaticCounts[pool]; ok {
		return c
	}
	var c StaticCount
	for _, n := range d.in.Nodes {
		if n.NodeClaim == nil || n.Pool() != pool {
			continue
		}
		if d.deleting(n) {
			c.Deleting++
		} else {
			c.Active++
		}
	}
	return c
}

// StaticHeadroom is how many more NodeClaims a static pool's limits.nodes
// admits: the limit less every NodeClaim it has (active, deleting, pending
// disruption), never negative; unlimited without a limit (Karpenter's
// NodePoolState.ReserveNodeCount).
func StaticHeadroom(pool *karpv1.NodePool, c StaticCount) int64 {
	q, ok := pool.Spec.Limits[karpv1.ResourceNodes]
	if !ok {
		return math.MaxInt64
	}
	return max(0, q.Value()-int64(c.Active+c.Deleting+c.PendingDisruption))
}
