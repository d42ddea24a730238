package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// pool is a NodePool prepared for one Solve.
type pool struct {
	idx       int
	name      string
	nodeClass string
	weight    int32
	reqs      requirements.Requirements
	taints    []corev1.Taint
	types     []*typeInfo // usable, cheapest first
	// allTypes are types plus those its limits exclude: Karpenter takes
	// topology domains from every type a pool offers, limits aside.
	allTypes []*typeInfo
	typeKeys map[string]bool
	// daemons are the DaemonSets the pool's nodes may run (the types
	// decide which run on each: typeInfo.daemon); daemonKey names them.
	daemons   []daemonPod
	daemonKey string
	// daemonPorts: some of those DaemonSets take host ports (each type's
	// are in typeInfo.daemonPorts).
	daemonPorts bool
	limited     bool
	limit       vec // cpu, memory, ...; math.MaxInt64 when unset
	limNodes    int64
	committed   vec // existing usage + chosen capacity of planned claims
	nodes       int64
	minValues   bool
	seq         int
	expl        PoolExplanation
	err         error // pool unusable (bad requirements, missing class)
}

// daemonPod is a DaemonSet's pod as a pool sees it: its requests, and its
// required node selector terms (each with its nodeSelector) the pool's
// requirements allow.
type daemonPod struct {
	req   vec
	terms []requirements.Requirements
	ports []hostPort
}

// typeInfo is an instance type as one pool sees it.
type typeInfo struct {
	it       *catalog.InstanceType
	alloc    vec // allocatable minus the DaemonSet overhead
	daemon   vec // the requests of the pool's DaemonSets that run on the type
	capacity vec
	minPrice float64 // cheapest available offering the pool allows
	// daemonPorts are the host ports those DaemonSets take: a new node's
	// are taken from the start (Karpenter's overhead group host ports).
	daemonPorts []hostPort
}

func (s *solver) buildPools(in *Input) {
	for _, np := range in.NodePools {
		// A static pool (spec.replicas) keeps its own node count and never
		// provisions for pods (Karpenter's NewScheduler leaves it out); its
		// existing nodes still take pods.
		if np.Spec.Replicas != nil {
			continue
		}
		s.pools = append(s.pools, s.buildPool(len(s.pools), np, in))
	}
	// Higher weight first, then name descending: Karpenter's OrderByWeight
	// (of two pools of equal weight, "zeta" is tried before "alpha").
	s.poolOrder = slices.Clone(s.pools)
	slices.SortStableFunc(s.poolOrder, func(a, b *pool) int {
		if a.weight != b.weight {
			return cmp.Compare(b.weight, a.weight)
		}
		return cmp.Compare(b.name, a.name)
	})
}

// buildPool prepares one pool (index i among the solver's pools).
func (s *solver) buildPool(i int, np *karpv1.NodePool, in *Input) *pool {
	p := &pool{idx: i, name: np.Name, limNodes: -1}
	p.expl.NodePool = np.Name
	if np.Spec.Weight != nil {
		p.weight = *np.Spec.Weight
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		p.nodeClass = ref.Name
	}
	p.taints = np.Spec.Template.Spec.Taints
	for _, t := range p.taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			s.preferNoSchedule = true
		}
	}
	reqs, err := requirements.FromNodePool(np.Spec.Template.Spec.Requirements)
	if err != nil {
		p.err = fmt.Errorf("nodepool %s: spec.template.spec.%w", np.Name, err)
	}
	reqs = reqs.Intersect(requirements.FromLabels(np.Spec.Template.ObjectMeta.Labels))
	reqs = reqs.Add(requirements.MustNew(karpv1.LabelNodePool, requirements.OpIn, np.Name))
	p.reqs = reqs
	for _, r := range reqs.All() {
		if r.MinValues != nil {
			p.minValues = true
		}
	}
	if p.err == nil {
		if err := reqs.Satisfiable(); err != nil {
			p.err = fmt.Errorf("nodepool %s: %w", np.Name, err)
		}
	}
	for i := range p.limit {
		p.limit[i] = math.MaxInt64
	}
	for n, q := range np.Spec.Limits {
		if n == "nodes" {
			p.limNodes = q.Value()
			p.limited = true
			continue
		}
		if slot, ok := s.ri.slot[n]; ok && slot < maxResources {
			p.limit[slot] = quantity(slot, q)
			p.limited = true
		}
	}
	// The DaemonSets this pool's nodes may run; each type then charges
	// those its labels allow (Karpenter's DaemonSet overhead groups). A
	// new node will be registered and initialized, so DaemonSets selecting
	// those labels run there (Karpenter's NodeClaimTemplate adds them for
	// this simulation only; claims never require them).
	daemonReqs := reqs.Add(requirements.MustNew(karpv1.LabelRegistered, requirements.OpIn, "true")).
		Add(requirements.MustNew(karpv1.LabelInitialized, requirements.OpIn, "true"))
	for _, d := range in.DaemonSetPods {
		if hasDRA(d) { // Karpenter, ignoring DRA requests, leaves them out
			continue
		}
		if _, ok := tolerates(d.Spec.Tolerations, p.taints, true); !ok {
			continue
		}
		terms := daemonTerms(d, daemonReqs)
		if len(terms) == 0 {
			continue
		}
		r, _ := s.ri.podRequests(d)
		ports := hostPorts(d)
		p.daemons = append(p.daemons, daemonPod{req: r, terms: terms, ports: ports})
		p.daemonPorts = p.daemonPorts || len(ports) > 0
		p.daemonKey += fmt.Sprint(podName(d), r, terms, ports, ";")
	}
	// existing usage
	for _, n := range in.Nodes {
		if n.Labels[karpv1.LabelNodePool] != p.name {
			continue
		}
		c := n.Capacity
		if c == nil {
			c = n.Allocatable
		}
		p.committed = p.committed.add(s.ri.toVec(c, nil))
		p.nodes++
	}
	s.prepareTypes(p, in.InstanceTypes[p.nodeClass], in.TypeTables)
	if p.err == nil && in.InstanceTypes[p.nodeClass] == nil {
		p.err = fmt.Errorf("nodepool %s: no instance types for node class %q", p.name, p.nodeClass)
	}
	return p
}

// daemonTerms are the DaemonSet pod's required node selector terms (each
// with its nodeSelector; the nodeSelector alone when it has none) a node of
// a pool with these requirements could satisfy, as Karpenter's
// isDaemonPodCompatible: keys both constrain must intersect, and a key only
// the pod constrains must be a well-known one (the instance type decides
// it) or one it allows to be absent (the pool's nodes will not have it).
func daemonTerms(d *corev1.Pod, pool requirements.Requirements) []requirements.Requirements {
	n := 1
	if na := nodeAffinity(d); na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		n = max(n, len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms))
	}
	var out []requirements.Requirements
	for i := range n {
		dr, err := nodeRequirements(d, i)
		if err != nil || dr.Compatible(pool) != nil {
			continue
		}
		ok := true
		for _, r := range dr.All() {
			if pool.Get(r.Key) == nil && !karpv1.WellKnownLabels[r.Key] && !r.AbsentOK() {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, dr)
		}
	}
	return out
}

// daemonOn is the requests and host ports of the pool's DaemonSets that
// run on a type: one of their terms allows its labels.
func (p *pool) daemonOn(it *catalog.InstanceType) (vec, []hostPort) {
	var out vec
	var ports []hostPort
	for _, d := range p.daemons {
		for _, t := range d.terms {
			if p.matchLabels(it, t) {
				out = out.add(d.req)
				ports = append(ports, d.ports...)
				break
			}
		}
	}
	return out, ports
}

// The reasons an Exclusion counts instance types for.
const (
	// ExcludedRequirements: the type does not meet the NodePool's requirements.
	ExcludedRequirements = "requirements"
	// ExcludedNoOffering: no available offering matches the NodePool's
	// zones and capacity types.
	ExcludedNoOffering = "no offering"
	// ExcludedTooSmall: the NodePool's DaemonSet overhead does not fit.
	ExcludedTooSmall = "too small for daemonsets"
	// ExcludedLimits: a node of the type would breach the NodePool's limits.
	ExcludedLimits = "limits"
)

func (s *solver) prepareTypes(p *pool, its []*catalog.InstanceType, tables *TypeTables) {
	t := tables.lookup(s, p, its)
	p.typeKeys = t.keys
	p.expl.InstanceTypes = len(its)
	exLimit := 0
	p.types = make([]*typeInfo, 0, len(t.types))
	p.allTypes = t.types
	for _, ti := range t.types {
		if p.limited && !p.withinLimits(ti.capacity, vec{}) {
			exLimit++
			continue
		}
		p.types = append(p.types, ti)
	}
	add := func(reason, why string, n int) {
		if n == 0 {
			return
		}
		p.expl.Excluded = append(p.expl.Excluded, Exclusion{Reason: reason, Count: n})
		p.expl.Messages = append(p.expl.Messages, fmt.Sprintf("%d out of %d instance types were excluded because %s", n, len(its), why))
	}
	add(ExcludedRequirements, "they do not meet the nodepool requirements", t.exReq)
	add(ExcludedNoOffering, "no available offering matches the nodepool's zones and capacity types", t.exOff)
	add(ExcludedTooSmall, "daemonset overhead does not fit", t.exSmall)
	add(ExcludedLimits, "they would breach limits", exLimit)
	// Karpenter's Strict policy drops such a pool altogether (its
	// NoCompatibleInstanceTypes Event says so); BestEffort relaxes minValues.
	p.expl.MinValuesUnmet = t.minValuesUnmet && !s.bestEffort
}

// TypeTables keeps each pool's instance-type table (the types its
// requirements, offerings and DaemonSet overhead allow, cheapest first)
// between Solve calls over the same NodePools and catalogue: the
// simulations of one disruption pass build the same tables again for
// every candidate otherwise. Use one for one pass; nil keeps none. Not
// safe for concurrent use.
type TypeTables struct {
	m map[typeTableKey]*typeTable
}

// typeTableKey is what a pool's table depends on besides the NodePool
// itself: the catalogue slice, the DaemonSet overhead and the resource
// slots of the Solve.
type typeTableKey struct {
	pool   string
	reqs   string
	first  *catalog.InstanceType
	n      int
	daemon string
	slots  string
}

type typeTable struct {
	keys                  map[string]bool
	types                 []*typeInfo
	exReq, exOff, exSmall int
	// minValuesUnmet: the types the requirements and offerings allow (too
	// small for the DaemonSets or not) leave fewer distinct values of a key
	// than the pool's minValues for it asks.
	minValuesUnmet bool
}

func (tt *TypeTables) lookup(s *solver, p *pool, its []*catalog.InstanceType) *typeTable {
	if tt == nil {
		return s.buildTypeTable(p, its)
	}
	k := typeTableKey{pool: p.name, reqs: p.reqs.String(), n: len(its), daemon: p.daemonKey, slots: fmt.Sprint(s.ri.names)}
	if len(its) > 0 {
		k.first = its[0]
	}
	if t, ok := tt.m[k]; ok {
		return t
	}
	t := s.buildTypeTable(p, its)
	if tt.m == nil {
		tt.m = map[typeTableKey]*typeTable{}
	}
	tt.m[k] = t
	return t
}

// buildTypeTable lists the types pool p may launch before its limits:
// matching its requirements, with an offering it allows, and room for its
// DaemonSets; cheapest first, then by name.
func (s *solver) buildTypeTable(p *pool, its []*catalog.InstanceType) *typeTable {
	t := &typeTable{keys: map[string]bool{}}
	for _, it := range its {
		for k := range it.Labels {
			t.keys[k] = true
		}
	}
	// matchLabels reads the pool's type keys.
	p.typeKeys = t.keys
	off := offeringReqsOf(p.reqs)
	infos := make([]typeInfo, 0, len(its))
	// labelSets are the labels of the types the requirements and offerings
	// allow and of their allowed offerings (zone, capacity type): what
	// Karpenter checks the pool's minValues against.
	var labelSets []map[string]string
	offered := map[[2]string]bool{}
	for _, it := range its {
		ti := typeInfo{it: it, minPrice: math.Inf(1)}
		if !p.matchLabels(it, p.reqs) {
			t.exReq++
			continue
		}
		for _, o := range it.Offerings {
			if off.allows(o) {
				ti.minPrice = min(ti.minPrice, o.Price)
				if p.minValues && !offered[[2]string{o.Zone, o.CapacityType}] {
					offered[[2]string{o.Zone, o.CapacityType}] = true
					labelSets = append(labelSets, map[string]string{karpv1.LabelZone: o.Zone, karpv1.LabelCapacityType: o.CapacityType})
				}
			}
		}
		if math.IsInf(ti.minPrice, 1) {
			t.exOff++
			continue
		}
		if p.minValues {
			labelSets = append(labelSets, it.Labels)
		}
		ti.capacity = s.ri.toVec(it.Capacity, nil)
		for i := numFixed; i < min(len(s.ri.names), maxResources); i++ {
			if driver, ok := s.ri.isAttach(i); ok {
				ti.capacity[i] = attachLimit(it, driver)
			}
		}
		// allocatable = capacity - overhead, floored at zero (as
		// InstanceType.Allocatable, without building resource lists)
		alloc := ti.capacity.sub(s.ri.toVec(it.Overhead.KubeReserved, nil)).sub(s.ri.toVec(it.Overhead.SystemReserved, nil)).sub(s.ri.toVec(it.Overhead.EvictionThreshold, nil))
		for i := range alloc {
			alloc[i] = max(alloc[i], 0)
		}
		ti.daemon, ti.daemonPorts = p.daemonOn(it)
		if !ti.daemon.fits(alloc) {
			t.exSmall++
			continue
		}
		ti.alloc = alloc.sub(ti.daemon)
		// infos never grows past its capacity, so these pointers hold.
		infos = append(infos, ti)
		t.types = append(t.types, &infos[len(infos)-1])
	}
	slices.SortStableFunc(t.types, func(a, b *typeInfo) int {
		if c := cmp.Compare(a.minPrice, b.minPrice); c != 0 {
			return c
		}
		return cmp.Compare(a.it.Name, b.it.Name)
	})
	if p.minValues {
		t.minValuesUnmet = p.reqs.MinValuesError(slices.Values(labelSets)) != nil
	}
	return t
}

// withinLimits: would adding capacity c (after giving back own) keep the
// pool under its limits?
func (p *pool) withinLimits(c, own vec) bool {
	for i := range c {
		if p.limit[i] != math.MaxInt64 && p.committed[i]-own[i]+c[i] > p.limit[i] {
			return false
		}
	}
	return true
}

// matchLabels checks the label part of reqs against a type; zone,
// capacity type and reservation labels are left to the offerings, keys no
// type carries to the pool/pod compatibility check.
func (p *pool) matchLabels(it *catalog.InstanceType, reqs requirements.Requirements) bool {
	for _, r := range reqs.All() {
		if offeringKeys[r.Key] || !p.typeKeys[r.Key] {
			continue
		}
		v, ok := it.Labels[r.Key]
		if !r.Matches(v, ok) {
			return false
		}
	}
	return true
}

// matchType checks labels and that an available offering matches zone,
// capacity type and reservation labels.
func (p *pool) matchType(t *typeInfo, reqs requirements.Requirements) bool {
	m := p.matcher(reqs)
	return m.match(t)
}

// typeMatcher is matchType with the requirement lookups hoisted out of
// loops over types.
type typeMatcher struct {
	p         *pool
	labelReqs []*requirements.Requirement
	off       offeringReqs
}

func (p *pool) matcher(reqs requirements.Requirements) typeMatcher {
	m := typeMatcher{p: p, off: offeringReqsOf(reqs)}
	for _, r := range reqs.All() {
		if !offeringKeys[r.Key] && p.typeKeys[r.Key] {
			m.labelReqs = append(m.labelReqs, r)
		}
	}
	return m
}

func (m *typeMatcher) match(t *typeInfo) bool {
	for _, r := range m.labelReqs {
		v, ok := t.it.Labels[r.Key]
		if !r.Matches(v, ok) {
			return false
		}
	}
	for _, o := range t.it.Offerings {
		if m.off.allows(o) {
			return true
		}
	}
	return false
}

func cheapestOffering(it *catalog.InstanceType, reqs requirements.Requirements) (catalog.Offering, bool) {
	off := offeringReqsOf(reqs)
	best, found := catalog.Offering{}, false
	for _, o := range it.Offerings {
		if !off.allows(o) {
			continue
		}
		if !found || o.Price < best.Price || (o.Price == best.Price && (o.Zone < best.Zone || (o.Zone == best.Zone && o.CapacityType > best.CapacityType))) {
			best, found = o, true
		}
	}
	return best, found
}
