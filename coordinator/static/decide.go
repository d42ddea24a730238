package static

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// Input is what Decide looks at. Nothing in it is modified.
type Input struct {
	Now time.Time
	// NodePools are the static pools (spec.replicas set), defaulted; pools
	// without replicas, being deleted, or whose nodeClassRef names another
	// provider's class (Karpenter's IsManaged) are ignored.
	NodePools []*karpv1.NodePool
	// Ready names the pools that may launch now (valid, their class ready:
	// Karpenter's NodePool Ready condition). Scale-down needs no readiness.
	Ready map[string]bool
	// Claims are every pool's NodeClaims (Collect).
	Claims []Claim
}

// Launch asks for Count new NodeClaims of Pool.
type Launch struct {
	Pool  string
	Count int
	// Message says why, for logs.
	Message string
}

// Deletion is one NodeClaim to delete to scale Pool down.
type Deletion struct {
	Pool, NodeClaim string
	// Why it was picked (not launched yet, empty, cheapest to disrupt).
	Why string
}

// Note says why a pool that is short or over its replicas is left alone.
type Note struct {
	Pool, Message string
}

// Result is Decide's answer.
type Result struct {
	Launches  []Launch
	Deletions []Deletion
	Notes     []Note
}

// Decide brings every static pool toward its replicas: launches for the
// pools short of them (within limits.nodes) and deletions for those over
// them. Pure: no I/O, no clock (Input.Now).
func Decide(in *Input) *Result {
	byPool := map[string][]Claim{}
	for _, c := range in.Claims {
		byPool[c.Pool] = append(byPool[c.Pool], c)
	}
	counts := Counts(in.Claims)
	pools := slices.Clone(in.NodePools)
	sort.SliceStable(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	res := &Result{}
	for _, np := range pools {
		if np.Spec.Replicas == nil || np.DeletionTimestamp != nil || !awsv1.Manages(np.Spec.Template.Spec.NodeClassRef) {
			continue
		}
		replicas := *np.Spec.Replicas
		c := counts[np.Name]
		// Scale up. Claims pending disruption count as present: their
		// replacements are on the way (or are among the active ones).
		if in.Ready[np.Name] && int64(c.Active+c.PendingDisruption) < replicas {
			want := replicas - int64(c.Active)
			n := min(want, disruption.StaticHeadroom(np, c))
			if n <= 0 {
				lim := np.Spec.Limits[karpv1.ResourceNodes]
				res.Notes = append(res.Notes, Note{Pool: np.Name, Message: fmt.Sprintf(
					"nodepool node limit reached: %d of %d replicas, limits.nodes %s counts %d nodeclaim(s) (%d deleting)",
					c.Active, replicas, lim.String(), c.Active+c.Deleting+c.PendingDisruption, c.Deleting)})
			} else {
				res.Launches = append(res.Launches, Launch{Pool: np.Name, Count: int(n),
					Message: fmt.Sprintf("%d of %d replicas, launching %d", c.Active, replicas, n)})
			}
		}
		// Scale down: only active claims count (one pending disruption has
		// a replacement among them).
		if excess := int64(c.Active) - replicas; excess > 0 {
			res.Deletions = append(res.Deletions, scaleDown(in.Now, np.Name, byPool[np.Name], int(excess))...)
		}
	}
	return res
}

// scaleDown picks n claims of a pool to delete, in Karpenter's order: not
// launched yet (its NodeClaims by name), then empty nodes (no pods, or
// DaemonSet pods only with none under do-not-disrupt), then the others by
// disruption cost (do-not-disrupt ones last).
func scaleDown(now time.Time, pool string, claims []Claim, n int) []Deletion {
	var out []Deletion
	take := func(c Claim, why string) bool {
		if len(out) == n {
			return false
		}
		out = append(out, Deletion{Pool: pool, NodeClaim: c.Name, Why: why})
		return true
	}
	var resolved []Claim
	for _, c := range claims {
		if c.State != Active || !c.Object {
			continue
		}
		if !c.Resolved {
			take(c, "not launched yet")
			continue
		}
		resolved = append(resolved, c)
	}
	type ranked struct {
		c          Claim
		doNotEvict bool
		cost       float64
	}
	var busy []ranked
	for _, c := range resolved {
		if empty(c.Pods, now) {
			take(c, "no pods to move")
			continue
		}
		busy = append(busy, ranked{c: c, doNotEvict: slices.ContainsFunc(c.Pods, func(p *corev1.Pod) bool { return podutil.DoNotDisruptActive(p, now) }),
			cost: reschedulingCost(c.Pods) * lifetimeRemaining(c, now)})
	}
	slices.SortStableFunc(busy, func(a, b ranked) int {
		if a.doNotEvict != b.doNotEvict {
			if a.doNotEvict {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.cost, b.cost)
	})
	for _, r := range busy {
		why := fmt.Sprintf("cheapest to disrupt (cost %.2f)", r.cost)
		if r.doNotEvict {
			why = "a do-not-disrupt pod, but the pool is still over its replicas"
		}
		if !take(r.c, why) {
			break
		}
	}
	return out
}

// empty: no pods, or only DaemonSet pods none of which is under
// do-not-disrupt.
func empty(pods []*corev1.Pod, now time.Time) bool {
	for _, p := range pods {
		if !podutil.OwnedByDaemonSet(p) || podutil.DoNotDisruptActive(p, now) {
			return false
		}
	}
	return true
}

// reschedulingCost is the sum of the pods' eviction costs (DaemonSet pods
// included, negative costs too: Karpenter's ReschedulingCost).
func reschedulingCost(pods []*corev1.Pod) float64 {
	c := 0.0
	for _, p := range pods {
		c += disruption.EvictionCost(p)
	}
	return c
}

// lifetimeRemaining is the fraction of the NodeClaim's expireAfter left, 1
// without one (Karpenter's LifetimeRemaining).
func lifetimeRemaining(c Claim, now time.Time) float64 {
	d := c.ExpireAfter.Duration
	if c.ExpireAfter.IsNever() || d == nil || *d <= 0 {
		return 1
	}
	left := float64(*d-now.Sub(c.Created)) / float64(*d)
	return math.Max(0, math.Min(1, left))
}
