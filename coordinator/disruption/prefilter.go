package disruption

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// res is a pod or node's cpu (milli), memory (bytes) and pod count.
type res [3]int64

var resNames = [3]string{"cpu", "memory", "pods"}

func (a res) add(b res) res { return res{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }

// podRes under-estimates a pod's requests (containers only, no init
// containers or overhead), so checks built on it never reject a move the
// scheduler would accept.
func podRes(p *corev1.Pod) res {
	r := res{0, 0, 1}
	for i := range p.Spec.Containers {
		req := p.Spec.Containers[i].Resources.Requests
		r[0] += req.Cpu().MilliValue()
		r[1] += req.Memory().Value()
	}
	return r
}

func listRes(l corev1.ResourceList) res {
	return res{l.Cpu().MilliValue(), l.Memory().Value(), l.Pods().Value()}
}

// capacityBound is a cheap necessary condition for consolidation, checked
// before the scheduler runs: the candidates' pods can only move if, for
// each of cpu, memory and pods, their requests fit in the free capacity of
// the remaining nodes plus the largest instance type cheaper than the
// candidates. Free capacity is over-estimated and requests under-estimated,
// so it only rejects moves the simulation would reject too; it turns the
// common "cluster is packed" pass from one scheduler run per candidate into
// arithmetic.
type capacityBound struct {
	free     map[*Node]res
	freeSum  res
	typeCaps []typeCap // capacity and cheapest price of every type
}

type typeCap struct {
	price float64
	cap   res
}

func (d *decider) buildBound() *capacityBound {
	b := &capacityBound{free: map[*Node]res{}}
	for _, n := range d.in.Nodes {
		if d.deleting(n) {
			continue
		}
		f := listRes(n.Node.Allocatable)
		for _, p := range n.Node.Pods {
			r := podRes(p)
			for i := range f {
				f[i] -= r[i]
			}
		}
		for i := range f {
			f[i] = max(f[i], 0)
		}
		b.free[n] = f
		b.freeSum = b.freeSum.add(f)
	}
	// The cheapest offering of each type any pool may launch, honouring only
	// the pools' capacity-type and zone "In" requirements (anything else
	// would only narrow it further).
	for _, pool := range d.in.NodePools {
		ref := pool.Spec.Template.Spec.NodeClassRef
		if ref == nil {
			continue
		}
		cts, zones := inValues(pool, karpv1.LabelCapacityType), inValues(pool, karpv1.LabelZone)
		for _, it := range d.in.InstanceTypes[ref.Name] {
			cheapest := -1.0
			for _, o := range it.Offerings {
				if !o.Available || (cts != nil && !cts[o.CapacityType]) || (zones != nil && !zones[o.Zone]) {
					continue
				}
				if cheapest < 0 || o.Price < cheapest {
					cheapest = o.Price
				}
			}
			if cheapest >= 0 {
				b.typeCaps = append(b.typeCaps, typeCap{price: cheapest, cap: listRes(it.Capacity)})
			}
		}
	}
	return b
}

// impossible says why cands' pods cannot move at any price below theirs, or
// "" when the scheduler has to decide.
func (b *capacityBound) impossible(cands []*Node) string {
	var need, ownFree res
	cur := 0.0
	for _, n := range cands {
		cur += n.Price
		ownFree = ownFree.add(b.free[n])
		for _, p := range n.Node.Pods {
			if podutil.Reschedulable(p) {
				need = need.add(podRes(p))
			}
		}
	}
	var biggest res
	for _, t := range b.typeCaps {
		if t.price < cur {
			for i := range biggest {
				biggest[i] = max(biggest[i], t.cap[i])
			}
		}
	}
	for i := range need {
		avail := b.freeSum[i] - ownFree[i] + biggest[i]
		if need[i] > avail {
			return fmt.Sprintf("its pods request %d %s, more than the %d free on the remaining nodes plus the largest cheaper instance type", need[i], resNames[i], avail)
		}
	}
	return ""
}

// inValues is the set a pool's "In" requirements allow for key, nil when
// unconstrained.
func inValues(pool *karpv1.NodePool, key string) map[string]bool {
	var out map[string]bool
	for _, r := range pool.Spec.Template.Spec.Requirements {
		if r.Key != key || r.Operator != karpv1.OpIn {
			continue
		}
		set := map[string]bool{}
		for _, v := range r.Values {
			if out == nil || out[v] {
				set[v] = true
			}
		}
		out = set
	}
	return out
}
