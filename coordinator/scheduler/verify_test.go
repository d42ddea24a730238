package scheduler

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

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
		lbls := offeringLabels(it, np, nc.Zone, nc.CapacityType)
		// keys only the pool's or the pods' requirements name (a custom
		// label) take the claim's single value
		for _, r := range nc.Requirements {
			if _, ok := lbls[r.Key]; !ok && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				lbls[r.Key] = r.Values[0]
			}
		}
		lbls[karpv1.LabelHostname] = nc.Name
		poolReqs := templateReqs(np)
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
		// The DaemonSets whose pods would run on the node: they tolerate
		// its taints and match its labels (type, offering and pool).
		for _, d := range in.DaemonSetPods {
			if _, ok := tolerates(d.Spec.Tolerations, np.Spec.Template.Spec.Taints, true); ok && daemonMatches(d, lbls) {
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
	// limits: a pool the plan launches nothing from may already be over
	// them (its existing nodes); it only must not grow.
	for _, np := range in.NodePools {
		if !slices.ContainsFunc(plan.NodeClaims, func(nc NodeClaim) bool { return nc.NodePool == np.Name }) {
			continue
		}
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
	// host ports: one pod per port, protocol and address on a node
	ports := map[string][]hostPort{}
	for _, pl := range all {
		hp := hostPorts(pl.pod)
		if !portsFree(ports[pl.node], hp) {
			return fmt.Errorf("pod %s on %s: host port %v already taken there", podName(pl.pod), pl.node, hp)
		}
		ports[pl.node] = append(ports[pl.node], hp...)
	}
	if err := attachmentsOK(in, plan, all); err != nil {
		return err
	}
	// per-pod constraints
	cnt := &counter{all: all, memo: map[string]map[string]int{}, namespaces: in.Namespaces}
	domainMemo := map[string][]string{}
	newPods := map[*corev1.Pod]bool{}
	for _, p := range in.Pods {
		newPods[p] = true
	}
	for _, pl := range all {
		p := pl.pod
		if !newPods[p] {
			if p.DeletionTimestamp != nil { // terminating: out of topology, as Karpenter's
				continue
			}
			if err := antiOK(p, pl, cnt); err != nil {
				return fmt.Errorf("existing pod %s on %s: %w", podName(p), pl.node, err)
			}
			continue
		}
		if err := nodeSelectorOK(p, pl.labels); err != nil {
			return fmt.Errorf("pod %s on %s: %w", podName(p), pl.node, err)
		}
		if t, ok := tolerates(p.Spec.Tolerations, pl.taints, true); !ok {
			return fmt.Errorf("pod %s on %s does not tolerate %v", podName(p), pl.node, t)
		}
		eligible := func(tsc corev1.TopologySpreadConstraint) []string {
			id := fmt.Sprint(tsc.TopologyKey, tsc.NodeAffinityPolicy, tsc.NodeTaintsPolicy, p.Spec.NodeSelector, nodeAffinity(p), p.Spec.Tolerations)
			if d, ok := domainMemo[id]; ok {
				return d
			}
			d := eligibleDomains(in, p, tsc)
			domainMemo[id] = d
			return d
		}
		if err := topologyOK(p, pl, cnt, eligible); err != nil {
			return fmt.Errorf("pod %s on %s: %w", podName(p), pl.node, err)
		}
	}
	return nil
}

// offeringLabels are the labels of a node of type it from pool np in zone
// with capacity type ct.
func offeringLabels(it *catalog.InstanceType, np *karpv1.NodePool, zone, ct string) map[string]string {
	lbls := maps.Clone(it.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	maps.Copy(lbls, np.Spec.Template.ObjectMeta.Labels)
	lbls[karpv1.LabelZone], lbls[karpv1.LabelCapacityType], lbls[karpv1.LabelNodePool] = zone, ct, np.Name
	return lbls
}

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
	if ls == nil || (ns != "*" && !slices.Contains(strings.Split(ns, ","), p.Namespace)) {
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

// eligibleDomains are the domains a spread of the pod counts, as
// kube-scheduler and Karpenter take them: the values of the key on every
// pool's offerings (pools whose taints the pod does not tolerate included
// unless nodeTaintsPolicy is Honor; restricted to the pod's node affinity
// unless nodeAffinityPolicy is Ignore) and on the existing nodes the same
// policies let in, within what the pod's own requirements allow. Empty
// domains count: kube-scheduler's minimum is taken over them.
func eligibleDomains(in *Input, p *corev1.Pod, tsc corev1.TopologySpreadConstraint) []string {
	key := tsc.TopologyKey
	honorAff := tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
	honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
	seen := map[string]bool{}
	podReqs, _ := nodeRequirements(p, 0)
	filter := podReqs
	if !honorAff {
		filter = requirements.Requirements{}
	}
	podKey := podReqs.Get(key)
	for _, np := range in.NodePools {
		if _, ok := tolerates(p.Spec.Tolerations, np.Spec.Template.Spec.Taints, true); honorTaints && !ok {
			continue
		}
		poolReqs := templateReqs(np)
		for _, it := range in.InstanceTypes[np.Spec.Template.Spec.NodeClassRef.Name] {
			for _, o := range it.Offerings {
				lbls := offeringLabels(it, np, o.Zone, o.CapacityType)
				// a key the pool's requirements name but no type label
				// sets: each of its values is a domain
				vals := []string{lbls[key]}
				if _, ok := lbls[key]; !ok {
					vals = nil
					if r := poolReqs.Get(key); r != nil {
						vals = r.Values()
					}
				}
				for _, v := range vals {
					lbls[key] = v
					if !o.Available || poolReqs.Match(lbls) != nil || filter.Match(lbls) != nil {
						continue
					}
					if podKey == nil || podKey.Has(v) {
						seen[v] = true
					}
				}
			}
		}
	}
	for _, n := range in.Nodes {
		v, ok := n.Labels[key]
		if !ok || (podKey != nil && !podKey.Has(v)) || (honorAff && nodeSelectorOK(p, n.Labels) != nil) {
			continue
		}
		if _, tol := tolerates(p.Spec.Tolerations, n.Taints, true); honorTaints && !tol {
			continue
		}
		seen[v] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// counter counts the placed pods matching a selector per domain of a key,
// once per distinct (namespace, selector, key): the checks below ask the
// same questions for thousands of pods.
type counter struct {
	all        []placed
	memo       map[string]map[string]int
	namespaces map[string]map[string]string
}

func (c *counter) counts(ls *metav1.LabelSelector, ns, key string) map[string]int {
	return c.countsOn(ls, ns, key, "", nil)
}

// countsOn counts only on the nodes on() lets in (a spread's node
// inclusion policies); filterID names the filter for the memo.
func (c *counter) countsOn(ls *metav1.LabelSelector, ns, key, filterID string, on func(placed) bool) map[string]int {
	id := ns + "\x00" + metav1.FormatLabelSelector(ls) + "\x00" + key + "\x00" + filterID
	if m, ok := c.memo[id]; ok {
		return m
	}
	m := map[string]int{}
	for _, o := range c.all {
		if o.pod.DeletionTimestamp == nil && (on == nil || on(o)) && selMatches(ls, o.pod, ns) {
			if d, ok := domainOf(o, key); ok {
				m[d]++
			}
		}
	}
	c.memo[id] = m
	return m
}

// topologyOK checks, on the final layout and counting every pod that
// matches the selectors (whichever order they bind in): DoNotSchedule
// spreads as kube-scheduler does for the pod (matching pods in its domain
// minus the least count over its eligible domains, empty ones included,
// <= maxSkew; fewer eligible domains than minDomains make that minimum 0;
// on hostname, new nodes are always eligible and empty), required
// anti-affinity (no other matching pod in the domain) and required
// affinity (a matching pod in the domain, and the matching pods of a
// self-affine group in one domain).
func topologyOK(p *corev1.Pod, me placed, c *counter, eligible func(corev1.TopologySpreadConstraint) []string) error {
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		honorAff := tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
		honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		on := func(o placed) bool {
			if honorAff && nodeSelectorOK(p, o.labels) != nil {
				return false
			}
			if _, ok := tolerates(p.Spec.Tolerations, o.taints, true); honorTaints && !ok {
				return false
			}
			return true
		}
		filterID := fmt.Sprint(honorAff, honorTaints, p.Spec.NodeSelector, nodeAffinity(p), p.Spec.Tolerations)
		counts := c.countsOn(withMatchLabelKeys(p, tsc), p.Namespace, tsc.TopologyKey, filterID, on)
		mine, _ := domainOf(me, tsc.TopologyKey)
		if tsc.TopologyKey == karpv1.LabelHostname {
			if counts[mine] > int(tsc.MaxSkew) {
				return fmt.Errorf("hostname spread: %d matching pods on the node > maxSkew %d", counts[mine], tsc.MaxSkew)
			}
			continue
		}
		doms := eligible(tsc)
		lo := math.MaxInt
		for _, d := range doms {
			lo = min(lo, counts[d])
		}
		if lo == math.MaxInt || (tsc.MinDomains != nil && len(doms) < int(*tsc.MinDomains)) {
			lo = 0
		}
		if counts[mine]-lo > int(tsc.MaxSkew) {
			return fmt.Errorf("%s spread: %d matching pods in %s, %d in the emptiest of %v: skew %d > %d (counts %v)",
				tsc.TopologyKey, counts[mine], mine, lo, doms, counts[mine]-lo, tsc.MaxSkew, counts)
		}
	}
	if err := antiOK(p, me, c); err != nil {
		return err
	}
	if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
		for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			ns := termNamespaces(c.namespaces, p, t)
			counts := c.counts(t.LabelSelector, ns, t.TopologyKey)
			mine, _ := domainOf(me, t.TopologyKey)
			// self-affine groups must end up in a single domain (any bind
			// order then finds a matching pod there)
			if len(counts) > 1 && selMatches(t.LabelSelector, p, ns) {
				return fmt.Errorf("affinity: matching pods in %d %s domains", len(counts), t.TopologyKey)
			}
			if counts[mine] == 0 {
				return fmt.Errorf("affinity: no matching pod in %s", mine)
			}
		}
	}
	return nil
}

// antiOK: no other pod matching one of p's required anti-affinity terms
// shares the term's domain with p (checked for every pod, so it covers
// both directions).
func antiOK(p *corev1.Pod, me placed, c *counter) error {
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			mine, ok := domainOf(me, t.TopologyKey)
			if !ok {
				continue
			}
			ns := termNamespaces(c.namespaces, p, t)
			n := c.counts(t.LabelSelector, ns, t.TopologyKey)[mine]
			if selMatches(t.LabelSelector, p, ns) {
				n-- // itself
			}
			if n > 0 {
				return fmt.Errorf("anti-affinity: %d other matching pod(s) share %s=%s", n, t.TopologyKey, mine)
			}
		}
	}
	return nil
}

// templateReqs are a pool's requirements and template labels.
func templateReqs(np *karpv1.NodePool) requirements.Requirements {
	r, _ := requirements.FromNodePool(np.Spec.Template.Spec.Requirements)
	return r.Intersect(requirements.FromLabels(np.Spec.Template.ObjectMeta.Labels))
}

// withMatchLabelKeys is a spread's selector with its matchLabelKeys set to
// the pod's values (keys the pod lacks left out).
func withMatchLabelKeys(p *corev1.Pod, tsc corev1.TopologySpreadConstraint) *metav1.LabelSelector {
	if len(tsc.MatchLabelKeys) == 0 || tsc.LabelSelector == nil {
		return tsc.LabelSelector
	}
	ls := tsc.LabelSelector.DeepCopy()
	if ls.MatchLabels == nil {
		ls.MatchLabels = map[string]string{}
	}
	for _, k := range tsc.MatchLabelKeys {
		if v, ok := p.Labels[k]; ok {
			ls.MatchLabels[k] = v
		}
	}
	return ls
}

// termNamespaces are the namespaces a pod (anti-)affinity term selects,
// as selMatches takes them: "*" for all (an empty namespaceSelector), else
// the term's namespaces and those its namespaceSelector matches, or the
// pod's own when it names none.
func termNamespaces(nsLabels map[string]map[string]string, p *corev1.Pod, t corev1.PodAffinityTerm) string {
	ns := slices.Clone(t.Namespaces)
	if t.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
		if err == nil && sel.Empty() {
			return "*"
		}
		for name, l := range nsLabels {
			if err == nil && sel.Matches(labels.Set(l)) {
				ns = append(ns, name)
			}
		}
	}
	if len(ns) == 0 && t.NamespaceSelector == nil {
		ns = []string{p.Namespace}
	}
	slices.Sort(ns)
	return strings.Join(ns, ",")
}

// attachmentsOK: on every node the volumes of its pods stay within its
// attach limit per CSI driver (its CSINode's count; a new node's type's
// EBS limit), a volume several pods there use counted once.
func attachmentsOK(in *Input, plan *Plan, all []placed) error {
	if len(in.Volumes) == 0 {
		return nil
	}
	type named struct{ node, driver, name string }
	seen := map[named]bool{}
	count := map[[2]string]int64{} // node, driver
	for _, pl := range all {
		v := in.Volumes[podName(pl.pod)]
		for driver, n := range v.Attachments {
			unnamed := n - int64(len(v.Volumes[driver]))
			for _, name := range v.Volumes[driver] {
				if k := (named{pl.node, driver, name}); !seen[k] {
					seen[k] = true
					count[[2]string{pl.node, driver}]++
				}
			}
			count[[2]string{pl.node, driver}] += unnamed
		}
	}
	limit := map[string]func(driver string) int64{}
	for _, n := range in.Nodes {
		limit[n.Name] = func(driver string) int64 {
			if q, ok := n.Allocatable[AttachResource(driver)]; ok {
				return q.Value()
			}
			return unlimited
		}
	}
	types := map[string]*catalog.InstanceType{}
	for _, its := range in.InstanceTypes {
		for _, it := range its {
			types[it.Name] = it
		}
	}
	for _, nc := range plan.NodeClaims {
		it := types[nc.InstanceType]
		limit[nc.Name] = func(driver string) int64 { return attachLimit(it, driver) }
	}
	for k, n := range count {
		if l := limit[k[0]]; l != nil && n > l(k[1]) {
			return fmt.Errorf("node %s: %d volumes of %s attached, limit %d", k[0], n, k[1], l(k[1]))
		}
	}
	return nil
}
