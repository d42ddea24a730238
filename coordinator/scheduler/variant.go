package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
)

// constraints are a pod's scheduling constraints at one relaxation level.
// Preferences are treated as required until relaxed away, one at a time,
// in Karpenter's order.
type constraints struct {
	termIdx  int // required node affinity term in use (terms before it dropped)
	prefNode []corev1.PreferredSchedulingTerm
	prefAff  []corev1.WeightedPodAffinityTerm
	prefAnti []corev1.WeightedPodAffinityTerm
	spreads  []corev1.TopologySpreadConstraint
	// toleratePreferNoSchedule: the last relaxation, when a NodePool has
	// a PreferNoSchedule taint (Karpenter's).
	toleratePreferNoSchedule bool
}

// relax returns the next level, or false when nothing is left to relax.
// preferNoSchedule: some NodePool has a PreferNoSchedule taint, so the last
// level tolerates them (Karpenter adds that step only then).
func (c constraints) relax(p *corev1.Pod, preferNoSchedule bool) (constraints, bool) {
	if na := nodeAffinity(p); na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil &&
		c.termIdx+1 < len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) {
		c.termIdx++
		return c, true
	}
	if len(c.prefAff) > 0 {
		c.prefAff = c.prefAff[1:]
		return c, true
	}
	if len(c.prefAnti) > 0 {
		c.prefAnti = c.prefAnti[1:]
		return c, true
	}
	if len(c.prefNode) > 0 {
		c.prefNode = c.prefNode[1:]
		return c, true
	}
	for i, s := range c.spreads {
		if s.WhenUnsatisfiable == corev1.ScheduleAnyway {
			c.spreads = append(slices.Clone(c.spreads[:i]), c.spreads[i+1:]...)
			return c, true
		}
	}
	if preferNoSchedule && !c.toleratePreferNoSchedule && !toleratesEveryPreferNoSchedule(p.Spec.Tolerations) {
		c.toleratePreferNoSchedule = true
		return c, true
	}
	return c, false
}

// toleratesEveryPreferNoSchedule reports whether a toleration matches every
// PreferNoSchedule taint (operator Exists, no key, effect PreferNoSchedule
// or any): relaxing to tolerate them would change nothing.
func toleratesEveryPreferNoSchedule(tols []corev1.Toleration) bool {
	for _, t := range tols {
		if t.Key == "" && t.Operator == corev1.TolerationOpExists && (t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule) {
			return true
		}
	}
	return false
}

func nodeAffinity(p *corev1.Pod) *corev1.NodeAffinity {
	if p.Spec.Affinity == nil {
		return nil
	}
	return p.Spec.Affinity.NodeAffinity
}

func initialConstraints(p *corev1.Pod) constraints {
	var c constraints
	if na := nodeAffinity(p); na != nil {
		c.prefNode = slices.Clone(na.PreferredDuringSchedulingIgnoredDuringExecution)
		slices.SortStableFunc(c.prefNode, func(a, b corev1.PreferredSchedulingTerm) int { return cmp.Compare(b.Weight, a.Weight) })
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			c.prefAff = sortedWeighted(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if a.PodAntiAffinity != nil {
			c.prefAnti = sortedWeighted(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	c.spreads = p.Spec.TopologySpreadConstraints
	return c
}

func sortedWeighted(in []corev1.WeightedPodAffinityTerm) []corev1.WeightedPodAffinityTerm {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b corev1.WeightedPodAffinityTerm) int { return cmp.Compare(b.Weight, a.Weight) })
	return out
}

// unsupported says why a pod is not planned at all, in Karpenter's words:
// it asks for Dynamic Resource Allocation devices (Karpenter, with the
// IgnoreDRARequests its chart sets, neither plans nor relaxes such pods: a
// node without the device would not do), or a required node selector term
// uses matchFields (Karpenter's pod validation).
func unsupported(p *corev1.Pod) error {
	if hasDRA(p) {
		return errors.New("pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter")
	}
	if na := nodeAffinity(p); na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if t.MatchFields != nil {
				return errors.New("node selector term with matchFields is not supported")
			}
		}
	}
	return nil
}

// hasDRA reports whether the pod or any of its containers claims
// Dynamic Resource Allocation resources (Karpenter's HasDRARequirements).
func hasDRA(p *corev1.Pod) bool {
	if len(p.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if len(cs[i].Resources.Claims) > 0 {
				return true
			}
		}
	}
	return false
}

// nodeRequirements is nodeSelector ∩ the required node affinity term termIdx.
func nodeRequirements(p *corev1.Pod, termIdx int) (requirements.Requirements, error) {
	reqs := requirements.FromLabels(p.Spec.NodeSelector)
	if na := nodeAffinity(p); na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if termIdx < len(terms) {
			r, err := requirements.FromNodeSelector(terms[termIdx].MatchExpressions)
			if err != nil {
				return reqs, fmt.Errorf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].%w", termIdx, err)
			}
			reqs = reqs.Intersect(r)
		}
	}
	return reqs, nil
}

// variant is a class compiled at one relaxation level.
type variant struct {
	c     *class
	level int
	cons  constraints
	err   error
	reqs  requirements.Requirements
	// strict are the pod's own node requirements at this level (its
	// nodeSelector and required term): what its spreads' domains are
	// limited to (Karpenter's StrictRequirements), not its preferences or
	// its volumes' topology.
	strict  requirements.Requirements
	pools   []*classPool // compatible pools, weight order
	byPool  []*classPool // by pool index (nil: incompatible)
	reasons []string     // why pools were incompatible
	spreads []spreadC
	affs    []*group
	antis   []*group
	// reqAntis are the required anti-affinity terms: pods placed with them
	// repel matching pods (preferred terms do not).
	reqAntis []*group
	// pinKeys are the non-hostname topology keys a claim must have a single
	// value for before this class's pods land on it.
	pinKeys []string
	nodeOK  map[int]bool // existing node index -> compatible (lazy)
	jump    skipList     // skips claims that can never take this variant
	jump0   skipList     // same for the no-upgrade pass
	topo    bool         // has any topology constraint or membership
}

type classPool struct {
	p     *pool
	reqs  requirements.Requirements
	types []*typeInfo
	zones []string // zones of available offerings of types (sorted)
	cts   []string
	// trivial: the class adds no requirement to the pool's
	trivial bool
}

type spreadC struct {
	g          *group
	maxSkew    int32
	minDomains int32
	domains    []string // eligible domains (non-hostname keys)
	self       bool
}

func (s *solver) variant(c *class, level int) *variant {
	for len(c.variants) <= level {
		if c.noMore {
			return nil
		}
		var cons constraints
		if len(c.variants) == 0 {
			cons = initialConstraints(c.rep)
		} else {
			next, ok := c.variants[len(c.variants)-1].cons.relax(c.rep, s.preferNoSchedule)
			if !ok {
				c.noMore = true
				return nil
			}
			cons = next
		}
		c.variants = append(c.variants, s.compile(c, cons, len(c.variants)))
	}
	return c.variants[level]
}

func (s *solver) compile(c *class, cons constraints, level int) *variant {
	v := &variant{c: c, level: level, cons: cons, byPool: make([]*classPool, len(s.pools))}
	p := c.rep
	if !c.reqOK {
		v.err = fmt.Errorf("requests more distinct extended resources than the scheduler tracks (%d)", maxResources-numFixed)
		return v
	}
	if err := unsupported(p); err != nil {
		v.err = err
		return v
	}
	reqs, err := nodeRequirements(p, cons.termIdx)
	if err != nil {
		v.err = err
		return v
	}
	v.strict = reqs
	if vol, ok := s.vols[podName(p)]; ok {
		if vol.Err != "" {
			v.err = errors.New(vol.Err)
			return v
		}
		vr, err := requirements.FromNodeSelector(vol.Requirements)
		if err != nil {
			v.err = fmt.Errorf("volume topology: %w", err)
			return v
		}
		reqs = reqs.Intersect(vr)
	}
	// the heaviest preferred term left is required (Karpenter's
	// NewPodRequirements); relaxing drops it for the next
	for _, t := range cons.prefNode[:min(1, len(cons.prefNode))] {
		r, err := requirements.FromNodeSelector(t.Preference.MatchExpressions)
		if err != nil {
			v.err = fmt.Errorf("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution: %w", err)
			return v
		}
		reqs = reqs.Intersect(r)
	}
	v.reqs = reqs
	if err := reqs.Satisfiable(); err != nil {
		v.err = err
		return v
	}
	// pools
	for _, pl := range s.poolOrder {
		cp, why := s.classPool(v, pl)
		if cp == nil {
			v.reasons = append(v.reasons, fmt.Sprintf("nodepool %s: %s", pl.name, why))
			continue
		}
		v.pools = append(v.pools, cp)
		v.byPool[pl.idx] = cp
	}
	// topology
	keys := map[string]bool{}
	for _, tsc := range cons.spreads {
		sel, err := spreadSelector(p, tsc)
		if err != nil {
			v.err = fmt.Errorf("spec.topologySpreadConstraints: %w", err)
			return v
		}
		filter, err := spreadFilter(p, tsc)
		if err != nil {
			v.err = fmt.Errorf("spec.topologySpreadConstraints: %w", err)
			return v
		}
		g := s.groupWith(tsc.TopologyKey, []string{p.Namespace}, false, sel, filter)
		sc := spreadC{g: g, maxSkew: tsc.MaxSkew, self: g.matches(p)}
		if tsc.MinDomains != nil {
			sc.minDomains = *tsc.MinDomains
		}
		if tsc.TopologyKey != karpv1.LabelHostname {
			sc.domains = s.spreadDomains(v, tsc.TopologyKey, filter)
		}
		if tsc.WhenUnsatisfiable == corev1.DoNotSchedule {
			g.owned(sc)
		}
		v.spreads = append(v.spreads, sc)
		keys[tsc.TopologyKey] = true
	}
	var aff, anti []corev1.PodAffinityTerm
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			aff = append(aff, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		if a.PodAntiAffinity != nil {
			anti = append(anti, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
	}
	for _, t := range cons.prefAff {
		aff = append(aff, t.PodAffinityTerm)
	}
	for _, t := range cons.prefAnti {
		anti = append(anti, t.PodAffinityTerm)
	}
	nReqAnti := len(anti) - len(cons.prefAnti)
	for i, list := range [][]corev1.PodAffinityTerm{aff, anti} {
		for j, t := range list {
			g, err := s.termGroup(p, t)
			if err != nil {
				v.err = fmt.Errorf("spec.affinity: %w", err)
				return v
			}
			if i == 0 {
				v.affs = append(v.affs, g)
				if j < len(aff)-len(cons.prefAff) {
					g.affinity = true
				}
			} else {
				g.anti = true
				v.antis = append(v.antis, g)
				if j < nReqAnti {
					v.reqAntis = append(v.reqAntis, g)
				}
			}
			keys[t.TopologyKey] = true
		}
	}
	for _, g := range c.memberOf {
		keys[g.key] = true
	}
	for k := range keys {
		if k != karpv1.LabelHostname {
			v.pinKeys = append(v.pinKeys, k)
		}
	}
	slices.Sort(v.pinKeys)
	v.topo = len(keys) > 0
	return v
}

// classPool checks a variant against a pool; nil and a reason when they
// cannot meet.
func (s *solver) classPool(v *variant, pl *pool) (*classPool, string) {
	if pl.err != nil {
		return nil, pl.err.Error()
	}
	if t, ok := tolerates(v.c.rep.Spec.Tolerations, pl.taints, v.cons.toleratePreferNoSchedule); !ok {
		return nil, fmt.Sprintf("did not tolerate taint %s=%s:%s", t.Key, t.Value, t.Effect)
	}
	for _, r := range v.reqs.All() {
		if pr := pl.reqs.Get(r.Key); pr != nil {
			if !pr.Intersects(r) {
				return nil, fmt.Sprintf("incompatible requirements: %s, nodepool has %s", r, pr)
			}
			continue
		}
		if offeringKeys[r.Key] || pl.typeKeys[r.Key] {
			continue
		}
		if !r.AbsentOK() {
			return nil, fmt.Sprintf("incompatible requirements: label %s is not provided by the nodepool (%s)", r.Key, r)
		}
	}
	merged := pl.reqs.Intersect(v.reqs)
	cp := &classPool{p: pl, reqs: merged, trivial: v.reqs.Len() == 0}
	matchedTypes := s.matching(pl, v.reqs, merged)
	matched := len(matchedTypes)
	var largest vec
	cp.types = s.fitting(matchedTypes, v.c.req)
	if pl.daemonPorts && len(v.c.ports) > 0 {
		// only types whose DaemonSets leave the pod's host ports free
		n := len(cp.types)
		cp.types = slices.DeleteFunc(slices.Clone(cp.types), func(t *typeInfo) bool { return !portsFree(t.daemonPorts, v.c.ports) })
		if n > 0 && len(cp.types) == 0 {
			return nil, "a DaemonSet takes the pod's host port"
		}
	}
	for _, t := range matchedTypes {
		largest = largest.max(t.alloc)
	}
	if matched == 0 {
		return nil, fmt.Sprintf("no instance type satisfies requirements %s", merged)
	}
	if len(cp.types) == 0 {
		return nil, fmt.Sprintf("no instance type has enough resources: requests %s, largest allocatable %s", s.fmtVec(v.c.req), s.fmtVec(largest))
	}
	// domains come from every matching type's offerings (like Karpenter,
	// which takes them from the pool's offerings); cached with the match
	cp.zones, cp.cts = s.domainsFor(pl, v.reqs, merged, matchedTypes)
	return cp, ""
}

// domainsOf lists the values key can take on new nodes of a class pool.
func (cp *classPool) domainsOf(key string) []string {
	switch key {
	case karpv1.LabelZone:
		return cp.zones
	case karpv1.LabelCapacityType:
		return cp.cts
	}
	if r := cp.reqs.Get(key); r != nil {
		return r.Values()
	}
	// a type label
	seen := map[string]bool{}
	for _, t := range cp.types {
		if v, ok := t.it.Labels[key]; ok {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// spreadDomains are the domains of key a spread counts (kube-scheduler's
// and Karpenter's node inclusion policies): those of every pool and
// existing node the filter lets in, intersected with what the pod itself
// allows (its nodeSelector and required node affinity term at this
// relaxation level; preferences and volume topology narrow where the pod
// goes, not which domains count). With the default
// nodeTaintsPolicy Ignore, a pool whose taints the pod does not tolerate
// still adds its domains (an empty domain there lowers the minimum).
func (s *solver) spreadDomains(v *variant, key string, f *nodeFilter) []string {
	seen := map[string]bool{}
	podReq := v.strict.Get(key)
	add := func(d string) {
		if podReq == nil || podReq.Has(d) {
			seen[d] = true
		}
	}
	for _, pl := range s.poolOrder {
		if pl.err != nil || (f.honorTaints && !f.tolerates(pl.taints)) {
			continue
		}
		for _, reqs := range f.terms() {
			if pl.reqs.Compatible(reqs) != nil {
				continue
			}
			merged := pl.reqs.Intersect(reqs)
			types := s.matching(pl, reqs, merged)
			limited := len(pl.allTypes) > len(pl.types)
			if limited {
				types = nil
				m := pl.matcher(merged)
				for _, t := range pl.allTypes {
					if m.match(t) {
						types = append(types, t)
					}
				}
			}
			if len(types) == 0 {
				continue
			}
			switch key {
			case karpv1.LabelZone, karpv1.LabelCapacityType:
				var zones, cts []string
				if limited {
					zones, cts = offeringDomains(types, merged)
				} else {
					zones, cts = s.domainsFor(pl, reqs, merged, types)
				}
				vals := zones
				if key == karpv1.LabelCapacityType {
					vals = cts
				}
				for _, d := range vals {
					add(d)
				}
			default:
				if r := merged.Get(key); r != nil && len(r.Values()) > 0 {
					for _, d := range r.Values() {
						add(d)
					}
					continue
				}
				for _, t := range types {
					if d, ok := t.it.Labels[key]; ok {
						add(d)
					}
				}
			}
		}
	}
	for _, n := range s.existing {
		if d, ok := n.Labels[key]; ok && f.matchesNode(n.Labels, n.Taints) {
			add(d)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// nodeFilter is which nodes a topology spread counts (its node inclusion
// policies): with nodeAffinityPolicy Honor (the default) only nodes that
// match the pod's nodeSelector and one of its required node affinity
// terms; with nodeTaintsPolicy Honor only nodes whose taints the pod
// tolerates (the default, Ignore, counts every node). A nil filter counts
// every node (pod affinity and anti-affinity).
type nodeFilter struct {
	key         string // identity, part of the group's
	reqs        []requirements.Requirements
	honorTaints bool
	tolerations []corev1.Toleration
}

// spreadFilter builds the filter of a pod's spread constraint.
func spreadFilter(p *corev1.Pod, tsc corev1.TopologySpreadConstraint) (*nodeFilter, error) {
	f := &nodeFilter{}
	var w keyWriter
	if tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		sel := requirements.FromLabels(p.Spec.NodeSelector)
		terms := []requirements.Requirements{sel}
		if na := nodeAffinity(p); na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms = nil
			for _, t := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				r, err := requirements.FromNodeSelector(t.MatchExpressions)
				if err != nil {
					return nil, err
				}
				terms = append(terms, sel.Intersect(r))
			}
		}
		f.reqs = terms
		w.sep('A')
		for _, r := range terms {
			w.s(r.String())
		}
	}
	if tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		f.honorTaints, f.tolerations = true, p.Spec.Tolerations
		w.tolerations(p.Spec.Tolerations)
	}
	f.key = string(w.b)
	return f, nil
}

// terms are the requirement sets a node may match (one that allows all
// when the filter does not honour node affinity).
func (f *nodeFilter) terms() []requirements.Requirements {
	if f == nil || len(f.reqs) == 0 {
		return []requirements.Requirements{{}}
	}
	return f.reqs
}

func (f *nodeFilter) tolerates(taints []corev1.Taint) bool {
	_, ok := tolerates(f.tolerations, taints, true)
	return ok
}

// matchesNode reports whether an existing node counts.
func (f *nodeFilter) matchesNode(labels map[string]string, taints []corev1.Taint) bool {
	return f.matches(taints, func(r requirements.Requirements) bool { return r.Matches(labels) })
}

// matchesClaim reports whether a planned claim counts: its requirements
// are compatible with one term (Karpenter's matchesRequirements) and, when
// taints are honoured, the pod tolerates its pool's.
func (f *nodeFilter) matchesClaim(reqs requirements.Requirements, taints []corev1.Taint) bool {
	return f.matches(taints, func(r requirements.Requirements) bool { return reqs.Compatible(r) == nil })
}

// matches: no filter, or (when taints are honoured) the pod tolerates
// taints and one of the filter's terms, if any, holds.
func (f *nodeFilter) matches(taints []corev1.Taint, term func(requirements.Requirements) bool) bool {
	if f == nil {
		return true
	}
	if f.honorTaints && !f.tolerates(taints) {
		return false
	}
	return len(f.reqs) == 0 || slices.ContainsFunc(f.reqs, term)
}

func spreadSelector(p *corev1.Pod, tsc corev1.TopologySpreadConstraint) (labels.Selector, error) {
	ls := tsc.LabelSelector
	if len(tsc.MatchLabelKeys) > 0 {
		ls = ls.DeepCopy()
		if ls == nil {
			ls = &metav1.LabelSelector{}
		}
		if ls.MatchLabels == nil {
			ls.MatchLabels = map[string]string{}
		}
		for _, k := range tsc.MatchLabelKeys {
			if val, ok := p.Labels[k]; ok {
				ls.MatchLabels[k] = val
			}
		}
	}
	if ls == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// termGroup is the group of a pod (anti-)affinity term.
func (s *solver) termGroup(p *corev1.Pod, t corev1.PodAffinityTerm) (*group, error) {
	var sel labels.Selector = labels.Nothing()
	if t.LabelSelector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(t.LabelSelector); err != nil {
			return nil, err
		}
	}
	// The term's namespaces and those its namespaceSelector matches (an
	// empty selector: every namespace); neither: the pod's own.
	ns := slices.Clone(t.Namespaces)
	all := false
	if t.NamespaceSelector != nil {
		if len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
			all = true
		} else {
			nsSel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
			if err != nil {
				return nil, fmt.Errorf("namespaceSelector: %w", err)
			}
			for _, name := range slices.Sorted(maps.Keys(s.namespaces)) {
				if nsSel.Matches(labels.Set(s.namespaces[name])) && !slices.Contains(ns, name) {
					ns = append(ns, name)
				}
			}
		}
	}
	if len(ns) == 0 && !all && t.NamespaceSelector == nil {
		ns = []string{p.Namespace}
	}
	return s.group(t.TopologyKey, ns, all, sel), nil
}

// group is the pods matching a selector in some namespaces, counted per
// domain of a topology key. Anti-affinity groups also count the pods that
// carry the term (owners): a pod matching the selector may not join their
// domain.
//
// A plan must hold whichever order kube-scheduler binds its pods in, so a
// constraint binds every pod its selector counts, not only the pods that
// carry it: a pod that merely matches a required spread's selector is
// placed within the spread's skew (spread), and one that matches a
// required affinity term goes where the group already is (affinity).
type group struct {
	key    string
	sel    labels.Selector
	ns     []string
	allNS  bool
	anti   bool
	counts map[string]int32
	owners map[string]int32
	total  int32
	// spread is the tightest DoNotSchedule spread counting this group
	// (nil: none): the least maxSkew, the largest minDomains and every
	// owner's eligible domains.
	spread *spreadC
	// affinity: a required pod affinity term selects this group.
	affinity bool
	// filter is which nodes count (a spread's node inclusion policies).
	filter *nodeFilter
}

// owned records a DoNotSchedule spread that counts the group.
func (g *group) owned(sc spreadC) {
	if g.spread == nil {
		c := sc
		c.domains = slices.Clone(sc.domains)
		g.spread = &c
		return
	}
	g.spread.maxSkew = min(g.spread.maxSkew, sc.maxSkew)
	g.spread.minDomains = max(g.spread.minDomains, sc.minDomains)
	for _, d := range sc.domains {
		if !slices.Contains(g.spread.domains, d) {
			g.spread.domains = append(g.spread.domains, d)
		}
	}
	slices.Sort(g.spread.domains)
}

// floor is the least count over the spread's eligible domains, 0 when they
// are fewer than minDomains (kube-scheduler's global minimum).
func (g *group) floor() int32 {
	sp := g.spread
	if len(sp.domains) == 0 || int32(len(sp.domains)) < sp.minDomains {
		return 0
	}
	lo := int32(math.MaxInt32)
	for _, d := range sp.domains {
		lo = min(lo, g.counts[d])
	}
	return lo
}

func (g *group) matches(p *corev1.Pod) bool {
	if !g.allNS && !slices.Contains(g.ns, p.Namespace) {
		return false
	}
	return g.sel.Matches(labels.Set(p.Labels))
}

func (s *solver) group(key string, ns []string, all bool, sel labels.Selector) *group {
	return s.groupWith(key, ns, all, sel, nil)
}

// groupWith is the group of a selector counted on the nodes filter lets
// in (nil: every node).
func (s *solver) groupWith(key string, ns []string, all bool, sel labels.Selector, filter *nodeFilter) *group {
	ns = slices.Clone(ns)
	slices.Sort(ns)
	id := key + "\x00" + strings.Join(ns, ",") + "\x00" + fmt.Sprint(all) + "\x00" + sel.String()
	if filter != nil && filter.key != "" {
		id += "\x00" + filter.key
	} else {
		filter = nil
	}
	if g, ok := s.groups[id]; ok {
		return g
	}
	g := &group{key: key, sel: sel, ns: ns, allNS: all, counts: map[string]int32{}, owners: map[string]int32{}, filter: filter}
	s.groups[id] = g
	s.groupOrder = append(s.groupOrder, g)
	for _, c := range s.classes {
		if g.matches(c.rep) {
			c.memberOf = append(c.memberOf, g)
		}
	}
	for _, n := range s.existing {
		d, ok := n.Labels[key]
		if key == karpv1.LabelHostname {
			d, ok = n.Name, true
		}
		if !ok || !filter.matchesNode(n.Labels, n.Taints) {
			continue
		}
		for _, ep := range n.Pods {
			if !ignoredForTopology(ep) && g.matches(ep) {
				g.counts[d]++
				g.total++
			}
		}
	}
	return g
}

// matching returns the pool's types that satisfy merged requirements,
// cached per pool and pod requirements (many classes share them).
func (s *solver) matching(pl *pool, podReqs, merged requirements.Requirements) []*typeInfo {
	if podReqs.Len() == 0 {
		return pl.types // already filtered by the pool's own requirements
	}
	key := strconv.Itoa(pl.idx) + "\x00" + podReqs.String()
	if m, ok := s.matchCache[key]; ok {
		return m
	}
	var out []*typeInfo
	m := pl.matcher(merged)
	for _, t := range pl.types {
		if m.match(t) {
			out = append(out, t)
		}
	}
	s.matchCache[key] = out
	return out
}

// fitKey identifies a list of matching types (by its backing array: the
// lists come from matchCache or a pool) and a request.
type fitKey struct {
	types *(*typeInfo)
	n     int
	req   vec
}

// fitting is the types of a matching list whose allocatable fits req,
// shared by every class with the same list and request (read-only).
func (s *solver) fitting(types []*typeInfo, req vec) []*typeInfo {
	if len(types) == 0 {
		return nil
	}
	key := fitKey{types: unsafe.SliceData(types), n: len(types), req: req}
	if out, ok := s.fitCache[key]; ok {
		return out
	}
	n := 0
	for _, t := range types {
		if req.fits(t.alloc) {
			n++
		}
	}
	out := make([]*typeInfo, 0, n)
	for _, t := range types {
		if req.fits(t.alloc) {
			out = append(out, t)
		}
	}
	s.fitCache[key] = out
	return out
}

type domainSet struct{ zones, cts []string }

func (s *solver) domainsFor(pl *pool, podReqs, merged requirements.Requirements, types []*typeInfo) ([]string, []string) {
	key := strconv.Itoa(pl.idx) + "\x00" + podReqs.String()
	if d, ok := s.domainCache[key]; ok {
		return d.zones, d.cts
	}
	var d domainSet
	d.zones, d.cts = offeringDomains(types, merged)
	s.domainCache[key] = d
	return d.zones, d.cts
}

// offeringDomains are the zones and capacity types of the types' offerings
// merged allows.
func offeringDomains(types []*typeInfo, merged requirements.Requirements) ([]string, []string) {
	zs, cs := map[string]bool{}, map[string]bool{}
	off := offeringReqsOf(merged)
	for _, t := range types {
		for _, o := range t.it.Offerings {
			if off.allows(o) {
				zs[o.Zone], cs[o.CapacityType] = true, true
			}
		}
	}
	return slices.Sorted(maps.Keys(zs)), slices.Sorted(maps.Keys(cs))
}

// ignoredForTopology: a pod on a node that counts for no spread or pod
// (anti-)affinity (Karpenter's IgnoredForTopology, kube-scheduler's spread
// counting): one that is terminating or has finished. It still takes its
// room on the node.
func ignoredForTopology(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
