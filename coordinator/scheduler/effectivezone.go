package scheduler

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
)

// The effective zones of EffectiveZones that are not a zone name.
const (
	// ZoneFlexible: the pod may still go to more than one zone.
	ZoneFlexible = "flexible"
	// ZoneNone: no zone meets all of the pod's zone signals.
	ZoneNone = "none"
)

// EffectiveZones counts the pods of in whose phase is Pending by their
// effective zone (Karpenter's karpenter_scheduler_pending_pods_by_effective_zone_count):
// the one zone that the pod's required zone requirement (nodeSelector and
// its first required node affinity term), its volumes' zones and its own
// zone topology constraints (spreads, pod affinity and anti-affinity, at
// the counts of the existing nodes, preferences still in force) all allow,
// ZoneFlexible when more than one is left, ZoneNone when none is. The
// candidates are the values of the required zone requirement when it is
// one In, else those of the volumes, else those of the topology
// constraints; a pod with none of the three is ZoneFlexible. NodePools'
// zones and offerings are not intersected (as Karpenter). Pods whose
// volumes cannot be scheduled yet (PodVolumes.Err) are left out, as
// Karpenter leaves them out of its solve.
//
// Where Joiner's rules differ from Karpenter's: a pod that owns several
// zone constraints whose domains do not meet is ZoneNone (Karpenter
// intersects them to nothing and then ignores them), and a pod whose pod
// affinity selects itself and no placed pod is not held to a zone
// (Karpenter reports the domain it would pick at random).
//
// EffectiveZones is pure and does not modify in; it builds the solver
// only when some pending pod has a zone topology constraint.
func EffectiveZones(in *Input) map[string]int {
	out := map[string]int{}
	var topo []*corev1.Pod
	for _, p := range in.Pods {
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		if in.Volumes[podName(p)].Err != "" {
			continue
		}
		if ownsZoneTopology(p) {
			topo = append(topo, p)
			continue
		}
		out[effectiveZone(p, in.Volumes[podName(p)], nil)]++
	}
	if len(topo) == 0 {
		return out
	}
	s := newSolver(in, topo)
	for _, c := range s.classes {
		zone := ZoneNone
		if domains, ok := s.zoneDomains(c); ok {
			zone = effectiveZone(c.rep, in.Volumes[podName(c.rep)], domains)
		}
		out[zone] += len(c.pods)
	}
	return out
}

// ownsZoneTopology reports whether p has a topology spread constraint or
// a pod (anti-)affinity term, required or preferred, over zones.
func ownsZoneTopology(p *corev1.Pod) bool {
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		if tsc.TopologyKey == karpv1.LabelZone {
			return true
		}
	}
	a := p.Spec.Affinity
	if a == nil {
		return false
	}
	zonal := func(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) bool {
		for _, t := range req {
			if t.TopologyKey == karpv1.LabelZone {
				return true
			}
		}
		for _, t := range pref {
			if t.PodAffinityTerm.TopologyKey == karpv1.LabelZone {
				return true
			}
		}
		return false
	}
	if pa := a.PodAffinity; pa != nil && zonal(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	pa := a.PodAntiAffinity
	return pa != nil && zonal(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
}

// zoneDomains are the zones a class's own zone topology constraints allow
// its next pod at the existing counts, nil when it owns none; false when
// they allow none. The constraints are those of its first variant (no
// preference relaxed); the groups that merely count its pods are left
// out, as Karpenter's GetTopologyZoneConstraints leaves them. A variant
// that cannot be compiled (unsatisfiable requirements) says nothing here:
// the requirements themselves decide.
func (s *solver) zoneDomains(c *class) ([]string, bool) {
	v := s.variant(c, 0)
	if v == nil || v.err != nil {
		return nil, true
	}
	owns := slices.ContainsFunc(v.spreads, func(sc spreadC) bool { return sc.g.key == karpv1.LabelZone })
	zonal := func(g *group) bool { return g.key == karpv1.LabelZone }
	if !owns && !slices.ContainsFunc(v.affs, zonal) && !slices.ContainsFunc(v.antis, zonal) {
		return nil, true
	}
	var rule *domainRule
	rules := s.domainRules(v, nil)
	for i := range rules {
		if rules[i].key == karpv1.LabelZone {
			rule = &rules[i]
		}
	}
	if rule == nil {
		return nil, true
	}
	cands := rule.allowed
	if rule.any {
		// anti-affinity alone: every zone a node of the cluster or of a
		// pool can be in, less the forbidden ones
		cands = s.spreadDomains(v, karpv1.LabelZone, &nodeFilter{})
	}
	podReq := v.reqs.Get(karpv1.LabelZone)
	var out []string
	for _, d := range cands {
		if rule.ok(d) && (podReq == nil || podReq.Has(d)) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, false
	}
	return out, true
}

// effectiveZone intersects a pod's required zone requirement, its volumes'
// zones and its topology domains (nil: unconstrained).
func effectiveZone(p *corev1.Pod, vol PodVolumes, topo []string) string {
	strict, err := nodeRequirements(p, 0)
	if err != nil {
		return ZoneNone
	}
	zoneReq := strict.Get(karpv1.LabelZone)
	volReq := volumeZone(vol)
	var cands []string
	switch {
	case zoneReq != nil && zoneReq.Operator() == requirements.OpIn:
		cands = zoneReq.Values()
	case volReq != nil:
		cands = volReq.Values()
	case len(topo) > 0:
		cands = topo
	default:
		return ZoneFlexible
	}
	match := ""
	n := 0
	for _, z := range cands {
		if (zoneReq != nil && !zoneReq.Has(z)) || (volReq != nil && !volReq.Has(z)) ||
			(len(topo) > 0 && !slices.Contains(topo, z)) {
			continue
		}
		if n++; n > 1 {
			return ZoneFlexible
		}
		match = z
	}
	if n == 0 {
		return ZoneNone
	}
	return match
}

// volumeZone is the zones a pod's volumes hold it to when that is one In
// requirement (their alternatives already joined, see PodVolumes), else
// nil.
func volumeZone(vol PodVolumes) *requirements.Requirement {
	if len(vol.Requirements) == 0 {
		return nil
	}
	reqs, err := requirements.FromNodeSelector(vol.Requirements)
	if err != nil {
		return nil
	}
	r := reqs.Get(karpv1.LabelZone)
	if r == nil || r.Operator() != requirements.OpIn {
		return nil
	}
	return r
}
