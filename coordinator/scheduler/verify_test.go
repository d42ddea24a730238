package scheduler

import (
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// placed is where a pod ended up, with the node's final labels and taints.
type placed struct {
	pod    *corev1.Pod
	node   string
	labels map[string]string
	taints []corev1.Taint
}

// verifyPlan checks a plan independently of the solver: every pod is
// accounted for once; every claim's chosen type holds its pods and daemon
// overhead; node selectors, affinity, taints, topology spread, pod
// (anti-)affinity and pool limits all hold on the final placement.
func verifyPlan(in *Input, plan *Plan) error {
	pods := map[string]*corev1.Pod{}
	for _, p := range in.Pods {
		pods[podName(p)] = p
	}
	seen := map[string]bool{}
	mark := func(name string) error {
		if seen[name] {
			return fmt.Errorf("pod %s placed twice", name)
		}
		if pods[name] == nil {
			return fmt.Errorf("unknown pod %s in plan", name)
		}
		seen[name] = true
		return nil
	}
	types := map[string]*catalog.InstanceType{}
	for _, its := range in.InstanceTypes {
		for _, it := range its {
			types[it.Name] = it
		}
	}
	pools := map[string]*karpv1.NodePool{}
	for _, np := range in.NodePools {
		pools[np.Name] = np
	}
	var all []placed
	usage := map[string]corev1.ResourceList{}
	nodesPerPool := map[string]int64{}
	for _, n := range in.Nodes {
		for _, p := range n.Pods {
			all = append(all, placed{pod: p, node: n.Name, labels: n.Labels, taints: n.Taints})
		}
		if pool := n.Labels[karpv1.LabelNodePool]; pool != "" {
			nodesPerPool[pool]++
			addList(usage, pool, n.Capacity)
		}
	}
	nodes := map[string]*Node{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	for _, nm := range plan.Nominations {
		if err := mark(nm.Pod); err != nil {
			return err
		}
		n := nodes[nm.Node]
		if n == nil {
			return fmt.Errorf("pod %s nominated to unknown node %s", nm.Pod, nm.Node)
		}
		all = append(all, placed{pod: pods[nm.Pod], node: n.Name, labels: n.Labels, taints: n.Taints})
	}
	for _, u := range plan.Unschedulable {
		if err := mark(u.Pod); err != nil {
			return err
		}
		if u.Reason == "" {
			return fmt.Errorf("pod %s unschedulable without a reason", u.Pod)
		}
	}
	for _, nc := range plan.NodeClaims {
		it := types[nc.InstanceType]
		if it == nil {
			return fmt.Errorf("claim %s: unknown instance type %q", nc.Name, nc.InstanceType)
		}
		np := pools[nc.NodePool]
		lbls := map[string]string{}
		for k, v := range it.Labels {
			lbls[k] = v
		}
		for k, v := range np.Spec.Template.ObjectMeta.Labels {
			lbls[k] = v
		}
		lbls[karpv1.LabelZone], lbls[karpv1.LabelCapacityType], lbls[karpv1.LabelNodePool] = nc.Zone, nc.CapacityType, nc.NodePool
		lbls[karpv1.LabelHostname] = nc.Name
		poolReqs, _ := requirements.FromNodePool(np.Spec.Template.Spec.Requirements)
		if err := poolReqs.Match(lbls); err != nil {
			return fmt.Errorf("claim %s breaks its pool's requirements: %w", nc.Name, err)
		}
		okOffer := false
		for _, o := range it.Offerings {
			if o.Zone == nc.Zone && o.CapacityType == nc.CapacityType && o.Available && math.Abs(o.Price-nc.Price) < 1e-9 {
				okOffer = true
			}
		}
		if !okOffer {
			return fmt.Errorf("claim %s: no available offering %s/%s at %v", nc.Name, nc.Zone, nc.CapacityType, nc.Price)
		}
		if len(nc.InstanceTypes) > MaxInstanceTypes || !slices.Contains(nc.InstanceTypes, nc.InstanceType) {
			return fmt.Errorf("claim %s: candidates %d, chosen type listed: %v", nc.Name, len(nc.InstanceTypes), slices.Contains(nc.InstanceTypes, nc.InstanceType))
		}
		// resources
		need := corev1.ResourceList{}
		for _, name := range nc.Pods {
			if err := mark(name); err != nil {
				return err
			}
			p := pods[name]
			addList(need, "", podNeed(p))
			all = append(all, placed{pod: p, node: nc.Name, labels: lbls, taints: np.Spec.Template.Spec.Taints})
		}
		for _, d := range in.DaemonSetPods {
			if _, ok := tolerates(d.Spec.Tolerations, np.Spec.Template.Spec.Taints); ok {
				addList(need, "", podNeed(d))
			}
		}
		alloc := it.Allocatable()
		for r, q := range need {
			a := alloc[r]
			if q.Cmp(a) > 0 {
				return fmt.Errorf("claim %s (%s): %s requested %s > allocatable %s", nc.Name, nc.InstanceType, r, q.String(), a.String())
			}
		}
		nodesPerPool[nc.NodePool]++
		addList(usage, nc.NodePool, it.Capacity)
	}
	// existing nodes: bound plus nominated pods within allocatable
	onNode := map[string]corev1.ResourceList{}
	for _, pl := range all {
		if n := nodes[pl.node]; n != nil {
			addList(onNode, pl.node, podNeed(pl.pod))
		}
	}
	for name, need := range onNode {
		alloc := nodes[name].Allocatable
		for r, q := range need {
			if a := alloc[r]; q.Cmp(a) > 0 && !q.IsZero() {
				return fmt.Errorf("existing node %s: %s requested %s > allocatable %s", name, r, q.String(), a.String())
			}
		}
	}
	for name := range pods {
		if !seen[name] {
			return fmt.Errorf("pod %s missing from the plan", name)
		}
	}
	// limits
	for _, np := range in.NodePools {
		for r, lim := range np.Spec.Limits {
			if r == "nodes" {
				if nodesPerPool[np.Name] > lim.Value() {
					return fmt.Errorf("pool %s: %d nodes > limit %d", np.Name, nodesPerPool[np.Name], lim.Value())
				}
				continue
			}
			u := usage[np.Name][r]
			if u.Cmp(lim) > 0 {
				return fmt.Errorf("pool %s: %s %s > limit %s", np.Name, r, u.String(), lim.String())
			}
		}
	}
	// per-pod constraints
	for _, pl := range all {
		p := pl.pod
		if !isNew(in, p) {
			if err := antiOK(p, pl, all); err != nil {
				return fmt.Errorf("existing pod %s on %s: %w", podName(p), pl.node, err)
			}
			continue
		}
		if err := nodeSelectorOK(p, pl.labels); err != nil {
			return fmt.Errorf("pod %s on %s: %w", podName(p), pl.node, err)
		}
		if t, ok := tolerates(p.Spec.Tolerations, pl.taints); !ok {
			return fmt.Errorf("pod %s on %s does not tolerate %v", podName(p), pl.node, t)
		}
		if err := topologyOK(p, pl, all); err != nil {
			return fmt.Errorf("pod %s on %s: %w", podName(p), pl.node, err)
		}
	}
	return nil
}

func isNew(in *Input, p *corev1.Pod) bool { return slices.Contains(in.Pods, p) }

func podNeed(p *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		addList(out, "", c.Resources.Requests)
	}
	for _, c := range p.Spec.InitContainers {
		for r, q := range c.Resources.Requests {
			if cur := out[r]; q.Cmp(cur) > 0 {
				out[r] = q.DeepCopy()
			}
		}
	}
	addList(out, "", p.Spec.Overhead)
	return out
}

func addList(dst interface{}, key string, l corev1.ResourceList) {
	var m corev1.ResourceList
	switch d := dst.(type) {
	case corev1.ResourceList:
		m = d
	case map[string]corev1.ResourceList:
		if d[key] == nil {
			d[key] = corev1.ResourceList{}
		}
		m = d[key]
	}
	for r, q := range l {
		cur := m[r]
		cur.Add(q)
		m[r] = cur
	}
}

func nodeSelectorOK(p *corev1.Pod, lbls map[string]string) error {
	if err := requirements.FromLabels(p.Spec.NodeSelector).Match(lbls); err != nil {
		return err
	}
	na := nodeAffinity(p)
	if na == nil || na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var last error
	for _, t := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		r, err := requirements.FromNodeSelector(t.MatchExpressions)
		if err != nil {
			return err
		}
		if last = r.Match(lbls); last == nil {
			return nil
		}
	}
	return fmt.Errorf("no required node affinity term matches: %w", last)
}

func selMatches(ls *metav1.LabelSelector, p *corev1.Pod, ns string) bool {
	if ls == nil || p.Namespace != ns {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	return err == nil && s.Matches(labels.Set(p.Labels))
}

func domainOf(pl placed, key string) (string, bool) {
	if key == karpv1.LabelHostname {
		return pl.node, true
	}
	v, ok := pl.labels[key]
	return v, ok
}

// topologyOK checks DoNotSchedule spreads (zone: max-min over seen domains
// plus the pool's zones <= maxSkew; hostname: count <= maxSkew), required
// anti-affinity (no other matching pod in the domain) and required
// affinity (some matching pod in the domain).
func topologyOK(p *corev1.Pod, me placed, all []placed) error {
	myDom := func(key string) string { d, _ := domainOf(me, key); return d }
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		counts := map[string]int{}
		for _, o := range all {
			if selMatches(tsc.LabelSelector, o.pod, p.Namespace) {
				if d, ok := domainOf(o, tsc.TopologyKey); ok {
					counts[d]++
				}
			}
		}
		if tsc.TopologyKey == karpv1.LabelHostname {
			if counts[me.node] > int(tsc.MaxSkew) {
				return fmt.Errorf("hostname spread: %d matching pods on the node > maxSkew %d", counts[me.node], tsc.MaxSkew)
			}
			continue
		}
		lo, hi := math.MaxInt, 0
		for _, n := range counts {
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > int(tsc.MaxSkew) {
			return fmt.Errorf("%s spread: skew %d > %d (%v)", tsc.TopologyKey, hi-lo, tsc.MaxSkew, counts)
		}
	}
	if err := antiOK(p, me, all); err != nil {
		return err
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				doms := map[string]bool{}
				for _, o := range all {
					if selMatches(t.LabelSelector, o.pod, p.Namespace) {
						if d, ok := domainOf(o, t.TopologyKey); ok {
							doms[d] = true
						}
					}
				}
				// self-affine groups must end up in a single domain unless
				// existing pods already spread them
				if len(doms) > 1 && selMatches(t.LabelSelector, p, p.Namespace) {
					return fmt.Errorf("affinity: matching pods in %d %s domains", len(doms), t.TopologyKey)
				}
				if !doms[myDom(t.TopologyKey)] {
					return fmt.Errorf("affinity: no matching pod in %s", myDom(t.TopologyKey))
				}
			}
		}
	}
	return nil
}

// antiOK: no other pod matching one of p's required anti-affinity terms
// shares the term's domain with p (checked for every pod, so it covers
// both directions).
func antiOK(p *corev1.Pod, me placed, all []placed) error {
	myDom := func(key string) string { d, _ := domainOf(me, key); return d }
	if a := p.Spec.Affinity; a != nil {
		if a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				for _, o := range all {
					if o.pod == p || !selMatches(t.LabelSelector, o.pod, p.Namespace) {
						continue
					}
					if d, ok := domainOf(o, t.TopologyKey); ok && d == myDom(t.TopologyKey) {
						return fmt.Errorf("anti-affinity: %s shares %s=%s", podName(o.pod), t.TopologyKey, d)
					}
				}
			}
		}
	}
	return nil
}
