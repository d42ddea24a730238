package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/internal/podutil"
)

type solver struct {
	ri *resourceIndex
	// preferNoSchedule: a pool has a PreferNoSchedule taint, so pods
	// relax to tolerate them last (constraints.relax).
	preferNoSchedule bool
	pools            []*pool
	poolOrder        []*pool
	classes          []*class
	groups           map[string]*group
	groupOrder       []*group
	existing         []*Node
	claims           []*claim
	scratch          []*typeInfo
	matchCache       map[string][]*typeInfo
	fitCache         map[fitKey][]*typeInfo
	domainCache      map[string]domainSet
	memPerMilli      float64 // median memory bytes per millicore over usable types
	vols             map[string]PodVolumes
	namespaces       map[string]map[string]string
	bestEffort       bool // MinValuesPolicy BestEffort
	relaxMin         bool // placing a pod with minValues relaxed (BestEffort)
	// reservations: instances left per capacity reservation (see
	// settleReservation).
	reservations map[string]int
	// deferred are the pods placeAll could not place on its pass.
	deferred []unplaced
	plan     Plan

	// shared are the volumes pods share, by pod key (sharedVolumes).
	shared map[string][]volRef
}

// claim is an existing node or a NodeClaim being planned.
type claim struct {
	idx     int
	name    string
	node    *Node // existing node; nil for a new claim
	nodeIdx int
	pool    *pool
	reqs    requirements.Requirements
	types   []*typeInfo // candidates that fit used, cheapest first
	used    vec
	free    vec // existing nodes: allocatable
	merged  []*classPool
	pods    []string
	own     vec    // capacity counted against pool limits
	hostKey string // see host
	ports   []hostPort
	relaxed bool // minValues relaxed (BestEffort)
	// refUnit is the price per allocatable unit of each resource of the
	// claim's first cheapest type (see upgradeOK).
	refUnit [maxResources]float64

	// vols are the shared volumes attached there (see sharedVolumes).
	vols map[volRef]bool
}

// Solve computes a Plan. It is deterministic and does not modify in.
func Solve(in *Input) *Plan {
	s := newSolver(in, in.Pods)
	for _, c := range s.classes {
		s.variant(c, 0)
	}
	for _, c := range s.classes {
		for _, v := range c.variants {
			s.refreshPins(v)
		}
	}
	s.placeAll()
	s.finish()
	return &s.plan
}

// newSolver prepares a solve of in whose classes are those of pods (in.Pods
// for Solve): pools, classes, existing nodes and their pods' anti-affinity.
func newSolver(in *Input, pods []*corev1.Pod) *solver {
	s := &solver{groups: map[string]*group{}, matchCache: map[string][]*typeInfo{}, fitCache: map[fitKey][]*typeInfo{}, domainCache: map[string]domainSet{},
		vols: in.Volumes, namespaces: in.Namespaces, bestEffort: in.MinValuesPolicy == MinValuesBestEffort}
	s.ri = newResourceIndex([][]*corev1.Pod{in.Pods, in.DaemonSetPods}, volumeRequests(in.Volumes))
	s.shared = sharedVolumes(in.Volumes, s.ri)
	s.existing = in.Nodes
	s.buildPools(in)
	s.reservations = newReservations(s.pools)
	s.memPerMilli = memoryPerMilliCPU(s.pools)
	s.buildClasses(pods, in.Moved)
	s.buildExisting(in)
	return s
}

// daemonsToCome is the room an existing node or in-flight claim keeps for
// the DaemonSet pods that will run there but are not bound yet, as
// Karpenter's ExistingNode: the requests of the DaemonSets whose pods
// tolerate its taints and match its labels, minus those of the DaemonSet
// pods bound there, floored at zero. A launching node has none bound, so
// it keeps room for all of them.
func (s *solver) daemonsToCome(daemons []*corev1.Pod, n *Node) vec {
	var want, have vec
	for _, d := range daemons {
		if hasDRA(d) {
			continue
		}
		if _, ok := tolerates(d.Spec.Tolerations, n.Taints, true); !ok || !daemonMatches(d, n.Labels) {
			continue
		}
		r, _ := s.ri.podRequests(d)
		want = want.add(r)
	}
	if want == (vec{}) {
		return want
	}
	for _, p := range n.Pods {
		if podutil.OwnedByDaemonSet(p) {
			r, _ := s.ri.podRequests(p)
			have = have.add(r)
		}
	}
	out := want.sub(have)
	for i := range out {
		out[i] = max(out[i], 0)
	}
	return out
}

// daemonMatches reports whether one of the DaemonSet pod's required node
// selector terms (with its nodeSelector) matches a node's labels.
func daemonMatches(d *corev1.Pod, labels map[string]string) bool {
	n := 1
	if na := nodeAffinity(d); na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		n = max(n, len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms))
	}
	for i := range n {
		if dr, err := nodeRequirements(d, i); err == nil && dr.Matches(labels) {
			return true
		}
	}
	return false
}

func (s *solver) buildExisting(in *Input) {
	for i, n := range in.Nodes {
		cl := &claim{idx: len(s.claims), name: n.Name, node: n, nodeIdx: i}
		cl.free = s.ri.nodeVec(n.Allocatable)
		for _, p := range n.Pods {
			r, _ := s.ri.podRequests(p)
			if len(s.shared) > 0 {
				refs := s.shared[podName(p)]
				r = lessAttached(r, cl, refs)
				attach(cl, refs)
			}
			cl.used = cl.used.add(r)
			cl.ports = append(cl.ports, hostPorts(p)...)
		}
		cl.used = cl.used.add(s.daemonsToCome(in.DaemonSetPods, n))
		s.claims = append(s.claims, cl)
	}
	// existing pods' required anti-affinity terms forbid their domains to
	// pods matching them
	for _, n := range in.Nodes {
		for _, p := range n.Pods {
			if ignoredForTopology(p) || p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
				continue
			}
			for _, t := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				g, err := s.termGroup(p, t)
				if err != nil {
					continue
				}
				g.anti = true
				d, ok := n.Labels[t.TopologyKey]
				if t.TopologyKey == karpv1.LabelHostname {
					d, ok = n.Name, true
				}
				if ok {
					g.owners[d]++
				}
			}
		}
	}
}

func (s *solver) buildClasses(pods []*corev1.Pod, moved map[string]bool) {
	byKey := map[string]*class{}
	var w keyWriter
	for _, p := range pods {
		req, ok := s.ri.podRequests(p)
		key := w.classKey(p, req, s.vols[podName(p)])
		mv := moved[podName(p)]
		if mv {
			key += "\x00moved"
		}
		c := byKey[key]
		if c == nil {
			c = &class{key: key, rep: p, req: req, reqOK: ok, ports: hostPorts(p), moved: mv}
			byKey[key] = c
			s.classes = append(s.classes, c)
		}
		c.pods = append(c.pods, p)
	}
	for _, c := range s.classes {
		c.volRefs = s.volumeRefs(c.pods)
	}
	// pods whose required hostname anti-affinity forces a node each go
	// first, then those whose hostname spread caps them per node: the nodes
	// they open are then filled by everything else, so the plan has no more
	// nodes than they force. Then largest first by size =
	// cpu + memory expressed in cpu at the catalogue's typical memory per
	// cpu (Karpenter sorts by cpu alone; mixing cpu- and memory-heavy pods
	// keeps nodes balanced, so fewer are memory-bound); then cpu, memory
	// and the key break ties.
	for _, c := range s.classes {
		c.size = float64(c.req[resCPU]) + float64(c.req[resMemory])/s.memPerMilli
		c.forcing = hostAntiAffine(c.rep)
		if len(c.ports) > 0 && len(c.pods) > 1 {
			c.forcing = max(c.forcing, 2) // a host port is a node per pod of the class
		}
	}
	slices.SortFunc(s.classes, func(a, b *class) int {
		if c := cmp.Compare(b.forcing, a.forcing); c != 0 {
			return c
		}
		if c := cmp.Compare(b.size, a.size); c != 0 {
			return c
		}
		if c := cmp.Compare(b.req[resCPU], a.req[resCPU]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.req[resMemory], a.req[resMemory]); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	for _, c := range s.classes {
		slices.SortStableFunc(c.pods, func(a, b *corev1.Pod) int {
			if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
}

func (s *solver) refreshPins(v *variant) {
	keys := map[string]bool{}
	for _, sc := range v.spreads {
		keys[sc.g.key] = true
	}
	for _, g := range v.affs {
		keys[g.key] = true
	}
	for _, g := range v.antis {
		keys[g.key] = true
	}
	for _, g := range v.c.memberOf {
		keys[g.key] = true
	}
	v.topo = len(keys) > 0
	v.pinKeys = v.pinKeys[:0]
	for k := range keys {
		if k != karpv1.LabelHostname {
			v.pinKeys = append(v.pinKeys, k)
		}
	}
	slices.Sort(v.pinKeys)
}

// domainRule is what topology allows for one non-hostname key, per pod.
type domainRule struct {
	key       string
	allowed   []string // nil: any
	any       bool
	forbidden []string
	prefer    *group // spread group whose least-loaded domain is preferred
	// optional: the key is pinned only to count this pod in groups it is
	// a member of; a claim with no value for it may still take the pod
	optional bool
}

func (r *domainRule) ok(d string) bool {
	if !r.any && !slices.Contains(r.allowed, d) {
		return false
	}
	return !slices.Contains(r.forbidden, d)
}

// rules computes the per-pod domain rules of a variant from current counts.
func (s *solver) rules(v *variant) []domainRule { return s.domainRules(v, v.c.memberOf) }

// domainRules are the rules of a variant's own constraints and of members,
// the groups that count its pods (rules: every group of its class).
func (s *solver) domainRules(v *variant, members []*group) []domainRule {
	if len(v.pinKeys) == 0 {
		return nil
	}
	out := make([]domainRule, len(v.pinKeys))
	for i, k := range v.pinKeys {
		out[i] = domainRule{key: k, any: true, optional: true}
	}
	own := func(k string) {
		for i := range out {
			if out[i].key == k {
				out[i].optional = false
			}
		}
	}
	for _, sc := range v.spreads {
		own(sc.g.key)
	}
	for _, g := range v.affs {
		own(g.key)
	}
	for _, g := range v.antis {
		own(g.key)
	}
	rule := func(k string) *domainRule {
		for i := range out {
			if out[i].key == k {
				return &out[i]
			}
		}
		return nil
	}
	restrict := func(r *domainRule, allowed []string) {
		if r.any {
			r.any, r.allowed = false, allowed
			return
		}
		r.allowed = slices.DeleteFunc(slices.Clone(r.allowed), func(d string) bool { return !slices.Contains(allowed, d) })
	}
	for _, sc := range v.spreads {
		r := rule(sc.g.key)
		if r == nil {
			continue
		}
		minCount := int32(math.MaxInt32)
		nonEmpty := 0
		for _, d := range sc.domains {
			n := sc.g.counts[d]
			minCount = min(minCount, n)
			if n > 0 {
				nonEmpty++
			}
		}
		if len(sc.domains) == 0 || int32(len(sc.domains)) < sc.minDomains {
			minCount = 0
		}
		self := int32(0)
		if sc.self {
			self = 1
		}
		allowed := make([]string, 0, len(sc.domains))
		for _, d := range sc.domains {
			if sc.g.counts[d]+self-minCount <= sc.maxSkew {
				allowed = append(allowed, d)
			}
		}
		restrict(r, allowed)
		r.prefer = sc.g
	}
	for _, g := range v.affs {
		r := rule(g.key)
		if r == nil || (g.total == 0 && g.matches(v.c.rep)) {
			continue
		}
		restrict(r, occupied(g.counts))
	}
	for _, g := range v.antis {
		if r := rule(g.key); r != nil {
			for d, n := range g.counts {
				if n > 0 {
					r.forbidden = append(r.forbidden, d)
				}
			}
		}
	}
	for _, g := range members {
		r := rule(g.key)
		if r == nil {
			continue
		}
		if g.anti {
			for d, n := range g.owners {
				if n > 0 {
					r.forbidden = append(r.forbidden, d)
					r.optional = false
				}
			}
		}
		// Counted by a required spread: stay within its skew, wherever
		// this pod binds relative to the spread's own pods.
		if sp := g.spread; sp != nil {
			lo := g.floor()
			for _, d := range sp.domains {
				if g.counts[d]+1-lo > sp.maxSkew {
					r.forbidden = append(r.forbidden, d)
					r.optional = false
				}
			}
			if r.prefer == nil {
				r.prefer = g
			}
		}
		// Counted by a required affinity term: join the group's domain.
		if g.affinity && g.total > 0 {
			restrict(r, occupied(g.counts))
			r.optional = false
		}
	}
	return out
}

// place puts one pod, relaxing preferences one at a time when needed, and
// says why it could not ("" when placed). The constraints that merely count
// a pod (see group) are never relaxed: a plan that breaks them works only
// if kube-scheduler binds its pods in one order, which it does not promise.
func (s *solver) place(c *class, p *corev1.Pod) string {
	var reasons []string
	for level := 0; ; level++ {
		v := s.variant(c, level)
		if v == nil {
			break
		}
		if v.err != nil {
			// a preference can make a level unsatisfiable: relax on
			reasons = []string{v.err.Error()}
			continue
		}
		why := s.tryPlace(v, p)
		if why == "" {
			return ""
		}
		reasons = []string{why}
	}
	// MinValuesPolicy BestEffort: nothing keeps minValues, so the pod goes
	// where it would fit with minValues relaxed (Karpenter's BestEffort).
	if s.bestEffort && !s.relaxMin && len(reasons) > 0 && strings.Contains(reasons[0], "minValues") {
		s.relaxMin = true
		defer func() { s.relaxMin = false }()
		if v := s.variant(c, 0); v != nil && v.err == nil && s.tryPlace(v, p) == "" {
			return ""
		}
	}
	return strings.Join(reasons, "; ")
}

// unplaced is a pod place could not put yet.
type unplaced struct {
	c   *class
	p   *corev1.Pod
	why string
}

// placeOrDefer places a pod or keeps it for placeDeferred.
func (s *solver) placeOrDefer(c *class, p *corev1.Pod) {
	if why := s.place(c, p); why != "" {
		s.deferred = append(s.deferred, unplaced{c, p, why})
	}
}

// placeDeferred tries the pods that did not fit again, in their order,
// while a pass places one (Karpenter's queue: a pod whose required
// affinity selects pods placed after it fits once they are); the rest are
// unschedulable.
func (s *solver) placeDeferred() {
	for len(s.deferred) > 0 {
		var left []unplaced
		for _, u := range s.deferred {
			if why := s.place(u.c, u.p); why != "" {
				u.why = why
				left = append(left, u)
			}
		}
		done := len(left) == len(s.deferred)
		s.deferred = left
		if done {
			break
		}
	}
	for _, u := range s.deferred {
		s.plan.Unschedulable = append(s.plan.Unschedulable, Unschedulable{Pod: podName(u.p), Reason: u.why})
	}
	s.deferred = nil
}

// verdict of checking a claim for a variant.
type verdict struct {
	ok        bool
	monotone  bool // the claim will never take this variant
	relaxed   bool // taken with the pool's minValues relaxed
	minValues bool // refused for minValues alone
	reqs      requirements.Requirements
	reqsDirty bool
	cp        *classPool
	pins      []string // key, value pairs to pin
}

// placeOnClaim commits p to the first claim (skipping those jump says can
// never take v, and marking the new ones) that takes it, without growing
// its cheapest type when noUpgrade; false when none does.
func (s *solver) placeOnClaim(v *variant, p *corev1.Pod, rules []domainRule, jump *skipList, noUpgrade bool) bool {
	for i := jump.next(0, len(s.claims)); i < len(s.claims); i = jump.next(i+1, len(s.claims)) {
		cl := s.claims[i]
		vd := s.check(cl, v, p, rules, noUpgrade)
		if !vd.ok && vd.minValues && s.bestEffort && !s.relaxMin {
			// BestEffort: a planned claim takes the pod with its
			// minValues relaxed before a new claim is opened (Karpenter's
			// CanAdd relaxes them on in-flight NodeClaims too).
			vd = s.checkRelaxed(cl, v, p, rules, noUpgrade)
		}
		if vd.ok {
			s.commit(cl, v, p, vd)
			return true
		}
		if vd.monotone {
			jump.kill(i)
		}
	}
	return false
}

// occupied are the domains with a count above zero, sorted.
func occupied(counts map[string]int32) []string {
	var out []string
	for d, n := range counts {
		if n > 0 {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func (s *solver) tryPlace(v *variant, p *corev1.Pod) string {
	rules := s.rules(v)
	// pass 1: a claim that takes the pod without growing its cheapest type;
	// pass 2: first fit
	if s.placeOnClaim(v, p, rules, &v.jump0, true) || s.placeOnClaim(v, p, rules, &v.jump, false) {
		return ""
	}
	// new claim from the first pool that can take it
	var reasons []string
	reasons = append(reasons, v.reasons...)
	for _, cp := range v.pools {
		pl := cp.p
		if pl.limNodes >= 0 && pl.nodes+1 > pl.limNodes {
			reasons = append(reasons, fmt.Sprintf("nodepool %s: limit of %d nodes reached", pl.name, pl.limNodes))
			continue
		}
		cl := &claim{idx: len(s.claims), pool: pl, reqs: cp.reqs, types: cp.types, merged: []*classPool{cp}}
		if pl.daemonPorts {
			// the ports of the DaemonSets of any type the claim may become
			for _, t := range cp.types {
				for _, hp := range t.daemonPorts {
					if !slices.Contains(cl.ports, hp) {
						cl.ports = append(cl.ports, hp)
					}
				}
			}
		}
		pl.seq++
		cl.name = pl.name + "-" + strconv.Itoa(pl.seq)
		vd := s.check(cl, v, p, rules, false)
		if !vd.ok && vd.minValues && s.bestEffort && !s.relaxMin {
			vd = s.checkRelaxed(cl, v, p, rules, false)
		}
		if !vd.ok {
			pl.seq--
			if vd.minValues {
				reasons = append(reasons, fmt.Sprintf("nodepool %s: no instance type set keeps the pool's minValues", pl.name))
				continue
			}
			if pl.limited {
				reasons = append(reasons, fmt.Sprintf("nodepool %s: no instance type fits within limits and topology", pl.name))
			} else {
				reasons = append(reasons, fmt.Sprintf("nodepool %s: topology constraints cannot be met", pl.name))
			}
			continue
		}
		cl.types = nil // commit fills it from scratch
		pl.nodes++
		s.claims = append(s.claims, cl)
		s.commit(cl, v, p, vd)
		return ""
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no nodepool")
	}
	return strings.Join(reasons, "; ")
}

// checkRelaxed is check with the claim's pool's minValues relaxed: under
// BestEffort a pool's minValues give way before a new claim is opened for
// a pod a planned claim could take, and before a lighter pool is tried
// (Karpenter's CanAdd and addToNewNodeClaim relax them per NodeClaim and
// per NodeClaim template, in weight order).
func (s *solver) checkRelaxed(cl *claim, v *variant, p *corev1.Pod, rules []domainRule, noUpgrade bool) verdict {
	s.relaxMin = true
	defer func() { s.relaxMin = false }()
	return s.check(cl, v, p, rules, noUpgrade)
}

// check decides whether cl can take p, a pod of v. noUpgrade restricts to
// claims whose current cheapest candidate still fits.
func (s *solver) check(cl *claim, v *variant, p *corev1.Pod, rules []domainRule, noUpgrade bool) verdict {
	if !portsFree(cl.ports, v.c.ports) {
		return verdict{monotone: true} // ports only get taken
	}
	used := cl.used.add(s.reqOn(cl, v.c, p))
	if cl.node != nil {
		return s.checkExisting(cl, v, rules, used, noUpgrade)
	}
	cp := v.byPool[cl.pool.idx]
	if cp == nil {
		return verdict{monotone: true}
	}
	// hostname topology (monotone except affinity)
	if !s.hostnameOK(cl.host(), v) {
		return verdict{monotone: !s.hasHostAffinity(v)}
	}
	reqs, dirty := cl.reqs, false
	// resources first: pinning a domain only narrows the candidates; a
	// claim too full for one pod of a class sharing volumes may still
	// take another whose volumes it has
	if !s.anyType(cl, cp, reqs, false, used, noUpgrade) {
		return verdict{monotone: v.c.volRefs == nil}
	}
	if !cp.trivial && !slices.Contains(cl.merged, cp) && cl.types != nil {
		if err := reqs.Compatible(cp.reqs); err != nil {
			return verdict{monotone: true}
		}
		reqs, dirty = reqs.Intersect(cp.reqs), true
	}
	var pins []string
	nonMono := false
	for i := range rules {
		r := &rules[i]
		cur := reqs.Get(r.key)
		if cur != nil && len(cur.Values()) == 1 {
			if !r.ok(cur.Values()[0]) {
				return verdict{}
			}
			continue
		}
		nonMono = true
		d, ok := s.pickDomain(cl, cp, reqs, r, used, noUpgrade)
		if !ok {
			if r.optional && len(cp.domainsOf(r.key)) == 0 {
				continue // no node here has the key: nothing to count
			}
			return verdict{}
		}
		reqs, dirty = reqs.Add(requirements.MustNew(r.key, requirements.OpIn, d)), true
		pins = append(pins, r.key, d)
	}
	if !s.anyType(cl, cp, reqs, dirty, used, noUpgrade) {
		return verdict{monotone: !nonMono}
	}
	relaxed := false
	if cl.pool.minValues && !s.minValuesOK(cl, cp, reqs, used) {
		if !s.relaxMin {
			return verdict{monotone: !nonMono, minValues: true}
		}
		relaxed = true
	}
	return verdict{ok: true, reqs: reqs, reqsDirty: dirty, cp: cp, pins: pins, relaxed: relaxed}
}

func (s *solver) hasHostAffinity(v *variant) bool {
	for _, g := range v.affs {
		if g.key == karpv1.LabelHostname {
			return true
		}
	}
	return false
}

// hostnameOK checks hostname-keyed spread, affinity and anti-affinity.
func (s *solver) hostnameOK(host string, v *variant) bool {
	if !v.topo {
		return true
	}
	for _, sc := range v.spreads {
		if sc.g.key != karpv1.LabelHostname {
			continue
		}
		self := int32(0)
		if sc.self {
			self = 1
		}
		// a new node is always a possible domain, so the minimum is 0
		if sc.g.counts[host]+self > sc.maxSkew {
			return false
		}
	}
	for _, g := range v.antis {
		if g.key == karpv1.LabelHostname && g.counts[host] > 0 {
			return false
		}
	}
	for _, g := range v.c.memberOf {
		if g.key != karpv1.LabelHostname {
			continue
		}
		if g.anti && g.owners[host] > 0 {
			return false
		}
		// a new node is always an eligible, empty domain: the floor is 0
		if g.spread != nil && g.counts[host]+1 > g.spread.maxSkew {
			return false
		}
		if g.affinity && g.total > 0 && g.counts[host] == 0 {
			return false
		}
	}
	for _, g := range v.affs {
		if g.key == karpv1.LabelHostname && g.counts[host] == 0 && !(g.total == 0 && g.matches(v.c.rep)) {
			return false
		}
	}
	return true
}

// pickDomain chooses a value of r.key for a claim not yet pinned: allowed
// by the rule, by the claim's requirements, keeping a fitting type; the
// least loaded domain of a spread first, then by name.
func (s *solver) pickDomain(cl *claim, cp *classPool, reqs requirements.Requirements, r *domainRule, used vec, noUpgrade bool) (string, bool) {
	cands := cp.domainsOf(r.key)
	cur := reqs.Get(r.key)
	var best string
	var bestN int32 = math.MaxInt32
	found := false
	for _, d := range cands {
		if (cur != nil && !cur.Has(d)) || !r.ok(d) {
			continue
		}
		n := int32(0)
		if r.prefer != nil {
			n = r.prefer.counts[d]
		}
		if found && n >= bestN {
			continue
		}
		trial := reqs.Add(requirements.MustNew(r.key, requirements.OpIn, d))
		if !s.anyType(cl, cp, trial, true, used, noUpgrade) {
			continue
		}
		best, bestN, found = d, n, true
	}
	return best, found
}

// anyType reports whether some candidate of cl fits used under reqs.
func (s *solver) anyType(cl *claim, cp *classPool, reqs requirements.Requirements, dirty bool, used vec, noUpgrade bool) bool {
	types := cl.types
	if types == nil {
		types = cp.types
	}
	pl := cl.pool
	var m typeMatcher
	if dirty {
		m = pl.matcher(reqs)
	}
	bottleneck := -1
	for i, t := range types {
		if noUpgrade && i > 0 {
			return false
		}
		if i > 0 && cl.types != nil {
			if bottleneck < 0 {
				bottleneck = mostShort(used, types[0].alloc)
			}
			if !upgradeOK(cl, t, bottleneck) {
				continue
			}
		}
		if !used.fits(t.alloc) {
			continue
		}
		if pl.limited && !pl.withinLimits(t.capacity, cl.own) {
			continue
		}
		if dirty && !m.match(t) {
			continue
		}
		return true
	}
	return false
}

// upgradeEfficiency is how much dearer per unit of the resource that
// forces it a type a claim grows into may be than the claim's first type.
const upgradeEfficiency = 1.25

// upgradeOK reports whether a claim may grow into type t when its usage no
// longer fits its cheapest type for lack of resource r (the one it is
// shortest of): t may cost at most upgradeEfficiency times the claim's
// first type per allocatable unit of r. A pod that would push a claim of
// m5a.4xlarge (0.043 $/vCPU) into the only bigger type left, m5zn.6xlarge
// (0.083 $/vCPU), or a claim of one-GPU g4dn.xlarge pods into a two-GPU
// type at 2.6 times the price per GPU, starts a new claim instead; growing
// along a family (xlarge to 2xlarge), or from c to r for memory, is
// allowed. With prices proportional to size (Karpenter's benchmark types)
// every upgrade is allowed.
func upgradeOK(cl *claim, t *typeInfo, r int) bool {
	ref := cl.refUnit[r]
	if ref == 0 {
		return true
	}
	return perUnit(t)[r] <= ref*upgradeEfficiency
}

// mostShort is the resource used exceeds alloc by the largest fraction of
// alloc (cpu when none does).
func mostShort(used, alloc vec) int {
	best, worst := resCPU, 1.0
	for r := range used {
		if used[r] <= 0 || alloc[r] <= 0 {
			continue
		}
		if f := float64(used[r]) / float64(alloc[r]); f > worst {
			best, worst = r, f
		}
	}
	return best
}

// perUnit is a type's price per allocatable unit of each resource (0 where
// it has none).
func perUnit(t *typeInfo) [maxResources]float64 {
	var out [maxResources]float64
	for r, a := range t.alloc {
		if a > 0 {
			out[r] = t.minPrice / float64(a)
		}
	}
	return out
}

func (s *solver) checkExisting(cl *claim, v *variant, rules []domainRule, used vec, noUpgrade bool) verdict {
	n := cl.node
	if v.nodeOK == nil {
		v.nodeOK = map[int]bool{}
	}
	ok, seen := v.nodeOK[cl.nodeIdx]
	if !seen {
		_, tol := tolerates(v.c.rep.Spec.Tolerations, n.Taints, v.cons.toleratePreferNoSchedule)
		ok = tol && v.reqs.Matches(n.Labels)
		v.nodeOK[cl.nodeIdx] = ok
	}
	if !ok || (n.NoMovedPods && v.c.moved) {
		return verdict{monotone: true}
	}
	if !used.fits(cl.free) {
		return verdict{monotone: v.c.volRefs == nil}
	}
	if !s.hostnameOK(n.Name, v) {
		return verdict{monotone: !s.hasHostAffinity(v)}
	}
	for i := range rules {
		d, has := n.Labels[rules[i].key]
		if !has && rules[i].optional {
			continue
		}
		if !has || !rules[i].ok(d) {
			return verdict{}
		}
	}
	return verdict{ok: true}
}

// commit records the placement.
func (s *solver) commit(cl *claim, v *variant, p *corev1.Pod, vd verdict) {
	cl.used = cl.used.add(s.reqOn(cl, v.c, p))
	if v.c.volRefs != nil {
		attach(cl, v.c.volRefs[p])
	}
	cl.relaxed = cl.relaxed || vd.relaxed
	cl.ports = append(cl.ports, v.c.ports...)
	name := podName(p)
	if cl.node != nil {
		s.plan.Nominations = append(s.plan.Nominations, Nomination{Pod: name, Node: cl.name})
	} else {
		pl := cl.pool
		src := cl.types
		if src == nil {
			src = vd.cp.types
		}
		s.scratch = s.scratch[:0]
		var m typeMatcher
		if vd.reqsDirty {
			m = pl.matcher(vd.reqs)
		}
		for _, t := range src {
			if !cl.used.fits(t.alloc) || (vd.reqsDirty && !m.match(t)) {
				continue
			}
			if pl.limited && !pl.withinLimits(t.capacity, cl.own) {
				continue
			}
			s.scratch = append(s.scratch, t)
		}
		if cl.types == nil {
			cl.types = slices.Clone(s.scratch)
			if len(cl.types) > 0 {
				cl.refUnit = perUnit(cl.types[0])
			}
		} else {
			cl.types = append(cl.types[:0], s.scratch...)
		}
		cl.reqs = vd.reqs
		if !slices.Contains(cl.merged, vd.cp) {
			cl.merged = append(cl.merged, vd.cp)
		}
		if pl.limited && len(cl.types) > 0 {
			pl.committed = pl.committed.sub(cl.own).add(cl.types[0].capacity)
			cl.own = cl.types[0].capacity
		}
		cl.pods = append(cl.pods, name)
	}
	// topology counts
	for _, g := range v.c.memberOf {
		if !s.counts(g, cl) {
			continue
		}
		if d, ok := s.domain(cl, g.key); ok {
			g.counts[d]++
			g.total++
		}
	}
	for _, g := range v.reqAntis {
		if d, ok := s.domain(cl, g.key); ok {
			g.owners[d]++
		}
	}
}

// counts reports whether a group counts pods on the claim (its filter).
func (s *solver) counts(g *group, cl *claim) bool {
	if g.filter == nil {
		return true
	}
	if cl.node != nil {
		return g.filter.matchesNode(cl.node.Labels, cl.node.Taints)
	}
	return g.filter.matchesClaim(cl.reqs, cl.pool.taints)
}

// domain is the value of key on a claim when it is known.
func (s *solver) domain(cl *claim, key string) (string, bool) {
	if key == karpv1.LabelHostname {
		return cl.host(), true
	}
	if cl.node != nil {
		d, ok := cl.node.Labels[key]
		return d, ok
	}
	if r := cl.reqs.Get(key); r != nil && len(r.Values()) == 1 {
		return r.Values()[0], true
	}
	return "", false
}

func (s *solver) fmtVec(v vec) string {
	var parts []string
	for i, n := range s.ri.names {
		if i >= maxResources {
			break
		}
		if v[i] == 0 && i != resCPU && i != resMemory {
			continue
		}
		switch i {
		case resCPU:
			parts = append(parts, fmt.Sprintf("cpu=%dm", v[i]))
		case resMemory:
			parts = append(parts, fmt.Sprintf("memory=%dMi", v[i]>>20))
		case resEphemeral:
			parts = append(parts, fmt.Sprintf("ephemeral-storage=%dGi", v[i]>>30))
		default:
			parts = append(parts, fmt.Sprintf("%s=%d", n, v[i]))
		}
	}
	return strings.Join(parts, ",")
}

// finish picks each claim's offering and fills the plan.
func (s *solver) finish() {
	for _, cl := range s.claims {
		if cl.node != nil || len(cl.pods) == 0 {
			continue
		}
		offReserved := s.settleReservation(cl)
		// types are sorted by their cheapest offering anywhere in the pool;
		// a claim's real price is never lower, so stop once the cut-off
		// candidate is cheaper than the next type could be.
		cands := make([]cand, 0, min(len(cl.types), 2*MaxInstanceTypes))
		for _, t := range cl.types {
			if !cl.pool.minValues && len(cands) >= MaxInstanceTypes && t.minPrice > cands[MaxInstanceTypes-1].price {
				break
			}
			o, ok := cheapestOffering(t.it, cl.reqs)
			if !ok {
				continue
			}
			cands = append(cands, cand{t, o.Price})
			if !cl.pool.minValues && len(cands) >= MaxInstanceTypes {
				slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.price, b.price) })
			}
		}
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.price, b.price) })
		if len(cands) == 0 && offReserved {
			for _, p := range cl.pods {
				s.plan.Unschedulable = append(s.plan.Unschedulable, Unschedulable{Pod: p,
					Reason: "the capacity reservations its node could use are taken by other planned nodes"})
			}
			continue
		}
		if cl.pool.minValues && !cl.relaxed && len(cands) > MaxInstanceTypes {
			cands = s.keepMinValues(cl, cands)
		}
		if cl.pool.limited && len(cl.types) > 0 {
			// the limit was accounted against the first candidate
			for i, c := range cands {
				if c.t == cl.types[0] {
					cands[0], cands[i] = cands[i], cands[0]
					break
				}
			}
		}
		nc := NodeClaim{Name: cl.name, NodePool: cl.pool.name, NodeClass: cl.pool.nodeClass, Pods: cl.pods, MinValuesRelaxed: cl.relaxed}
		n := min(len(cands), MaxInstanceTypes)
		for _, c := range cands[:n] {
			nc.InstanceTypes = append(nc.InstanceTypes, c.t.it.Name)
		}
		if len(cands) > 0 {
			t := cands[0].t
			o, _ := cheapestOffering(t.it, cl.reqs)
			nc.InstanceType, nc.Zone, nc.CapacityType, nc.Price = t.it.Name, o.Zone, o.CapacityType, o.Price
			nc.Allocatable = s.ri.toList(t.alloc.add(t.daemon))
			nc.Requests = s.ri.requestList(cl.used.add(t.daemon))
		} else {
			nc.Requests = s.ri.requestList(cl.used)
		}
		reqs := cl.reqs
		if len(nc.InstanceTypes) > 0 {
			reqs = reqs.Add(requirements.MustNew(karpv1.LabelInstanceType, requirements.OpIn, nc.InstanceTypes...))
		}
		nc.Requirements = reqs.NodeSelectorRequirements()
		s.plan.TotalPrice += nc.Price
		s.plan.NodeClaims = append(s.plan.NodeClaims, nc)
	}
	for _, p := range s.pools {
		s.plan.NodePools = append(s.plan.NodePools, p.expl)
	}
	slices.SortStableFunc(s.plan.Unschedulable, func(a, b Unschedulable) int { return strings.Compare(a.Pod, b.Pod) })
}

// skipList finds the next claim not yet ruled out for a variant: a claim
// that can never take the variant again is killed. It is a bitset of the
// killed claims (Karpenter's benchmark pods make about one class per two
// pods, so one int32 per claim and class cost 40 MB at 5000 pods; a bit
// costs 1/32 of that), scanned a word of 64 claims at a time.
type skipList struct{ dead []uint64 }

// next returns the first claim at or after i that is not killed, or n.
func (l *skipList) next(i, n int) int {
	for i < n {
		w := i >> 6
		if w >= len(l.dead) {
			return i
		}
		if live := ^l.dead[w] >> (i & 63); live != 0 {
			return min(i+bits.TrailingZeros64(live), n)
		}
		i = (w + 1) << 6
	}
	return n
}

// kill rules claim i out.
func (l *skipList) kill(i int) {
	w := i >> 6
	for len(l.dead) <= w {
		l.dead = append(l.dead, 0)
	}
	l.dead[w] |= 1 << (i & 63)
}

// minValuesOK: the candidates left after placing keep at least minValues
// distinct values of every key that asks for it (MinValuesPolicy Strict),
// counted as Karpenter counts them (TypeValues: zone and capacity type
// come from the types' offerings).
func (s *solver) minValuesOK(cl *claim, cp *classPool, reqs requirements.Requirements, used vec) bool {
	types := cl.types
	if types == nil {
		types = cp.types
	}
	pl := cl.pool
	for _, r := range reqs.All() {
		if r.MinValues == nil {
			continue
		}
		seen := map[string]struct{}{}
		for _, t := range types {
			if !used.fits(t.alloc) || (pl.limited && !pl.withinLimits(t.capacity, cl.own)) || !pl.matchType(t, reqs) {
				continue
			}
			for v := range TypeValues(t.it, r.Key) {
				seen[v] = struct{}{}
			}
			if len(seen) >= *r.MinValues {
				break
			}
		}
		if len(seen) < *r.MinValues {
			return false
		}
	}
	return true
}

// hostAntiAffine ranks how strongly a pod forces nodes: 2 when it has a
// required hostname anti-affinity term matching itself (each replica needs
// its own node), 1 when it has a DoNotSchedule hostname spread matching
// itself (at most maxSkew per node), else 0.
func hostAntiAffine(p *corev1.Pod) int {
	selfMatch := func(ls *metav1.LabelSelector) bool {
		if ls == nil {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		return err == nil && sel.Matches(labels.Set(p.Labels))
	}
	if p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil {
		for _, t := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.TopologyKey == karpv1.LabelHostname && selfMatch(t.LabelSelector) {
				return 2
			}
		}
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.TopologyKey == karpv1.LabelHostname && c.WhenUnsatisfiable == corev1.DoNotSchedule && selfMatch(c.LabelSelector) {
			return 1
		}
	}
	return 0
}

type cand struct {
	t     *typeInfo
	price float64
}

// keepMinValues reorders price-sorted candidates so that the first
// MaxInstanceTypes keep minValues distinct values of every key that asks
// for it: for each such key, the cheapest type giving each value
// (TypeValues) is pulled forward until the minimum is met; the rest follow
// by price.
func (s *solver) keepMinValues(cl *claim, cands []cand) []cand {
	picked := make([]bool, len(cands))
	var first []cand
	for _, r := range cl.reqs.All() {
		if r.MinValues == nil {
			continue
		}
		seen := map[string]bool{}
		for i, c := range cands {
			if len(seen) >= *r.MinValues {
				break
			}
			fresh := false
			for v := range TypeValues(c.t.it, r.Key) {
				if !seen[v] {
					seen[v], fresh = true, true
				}
			}
			if fresh && !picked[i] {
				picked[i] = true
				first = append(first, c)
			}
		}
	}
	for i, c := range cands {
		if !picked[i] {
			first = append(first, c)
		}
	}
	head := first[:min(len(first), MaxInstanceTypes)]
	slices.SortStableFunc(head, func(a, b cand) int { return cmp.Compare(a.price, b.price) })
	return first
}

// memoryPerMilliCPU is the median bytes of allocatable memory per
// allocatable millicore over the pools' usable types (1 GiB per core when
// there are none).
func memoryPerMilliCPU(pools []*pool) float64 {
	var ratios []float64
	for _, p := range pools {
		for _, t := range p.types {
			if t.alloc[resCPU] > 0 && t.alloc[resMemory] > 0 {
				ratios = append(ratios, float64(t.alloc[resMemory])/float64(t.alloc[resCPU]))
			}
		}
	}
	if len(ratios) == 0 {
		return float64(1<<30) / 1000
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// placeAll places pods in class order, except that cpu-heavy and
// memory-heavy pods (relative to the catalogue's memory per cpu) are
// interleaved so the running totals stay balanced: first-fit then fills
// nodes with a mix instead of exhausting one resource and stranding the
// other. Classes that force a node per pod go first, unmixed.
func (s *solver) placeAll() {
	var cpuQ, memQ []*class
	for _, c := range s.classes {
		switch {
		case c.forcing > 0:
			for _, p := range c.pods {
				s.placeOrDefer(c, p)
			}
		case float64(c.req[resCPU]) >= float64(c.req[resMemory])/s.memPerMilli:
			cpuQ = append(cpuQ, c)
		default:
			memQ = append(memQ, c)
		}
	}
	var cpuSum, memSum float64
	ci, cj, mi, mj := 0, 0, 0, 0
	for ci < len(cpuQ) || mi < len(memQ) {
		var c *class
		if mi >= len(memQ) || (ci < len(cpuQ) && cpuSum <= memSum) {
			c = cpuQ[ci]
			s.placeOrDefer(c, c.pods[cj])
			if cj++; cj == len(c.pods) {
				ci, cj = ci+1, 0
			}
		} else {
			c = memQ[mi]
			s.placeOrDefer(c, c.pods[mj])
			if mj++; mj == len(c.pods) {
				mi, mj = mi+1, 0
			}
		}
		cpuSum += float64(c.req[resCPU])
		memSum += float64(c.req[resMemory]) / s.memPerMilli
	}
	s.placeDeferred()
}

// host is the claim's hostname topology domain. Planned claims get a name
// no Node can have ("/" is not allowed in node names), so they never share
// a domain with an existing node of the same name.
func (cl *claim) host() string {
	if cl.hostKey == "" {
		if cl.node != nil {
			cl.hostKey = cl.name
		} else {
			cl.hostKey = "nodeclaim/" + cl.name
		}
	}
	return cl.hostKey
}
