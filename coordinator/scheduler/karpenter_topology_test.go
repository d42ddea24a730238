package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// The cases in this file port Karpenter v1.14.1's provisioning scheduler
// suites (pkg/controllers/provisioning/scheduling: topology_test.go and
// suite_test.go's "Preferential Fallback" and well-known-label preference
// cases) into Joiner's fixtures. Karpenter provisions in rounds
// (ExpectProvisioned), each round's nodes and bound pods seen by the next;
// kcluster does the same: every claim of a plan becomes an existing Node
// (labels of its chosen offering, the claim name as hostname) holding its
// pods, every nomination binds its pod. Expectations are Karpenter's unless
// a comment names a difference.

// kcluster is a cluster provisioned in rounds.
type kcluster struct {
	t     *testing.T
	in    *Input
	round int
	seq   int
	// unscheduled are the pods the last round left pending.
	unscheduled []*corev1.Pod
	last        *Plan
}

func newKCluster(t *testing.T, pools ...*karpv1.NodePool) *kcluster {
	t.Helper()
	if len(pools) == 0 {
		pools = []*karpv1.NodePool{nodePool("default")}
	}
	return &kcluster{t: t, in: &Input{NodePools: pools, InstanceTypes: map[string][]*catalog.InstanceType{"default": fakeTypes(16)}}}
}

// withArm adds an arm64 copy of every instance type.
func (c *kcluster) withArm() *kcluster {
	its := c.in.InstanceTypes["default"]
	for _, it := range fakeTypes(len(its)) {
		it.Name = "arm-" + it.Name
		it.Labels[karpv1.LabelInstanceType] = it.Name
		it.Labels[karpv1.LabelArch] = "arm64"
		its = append(its, it)
	}
	c.in.InstanceTypes["default"] = its
	return c
}

func (c *kcluster) pool() *karpv1.NodePool { return c.in.NodePools[0] }

// pods makes n pods with unique names in namespace default.
func (c *kcluster) pods(n int, opts ...func(*corev1.Pod)) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for range n {
		c.seq++
		p := pod(fmt.Sprintf("p-%03d", c.seq), nil, "", "")
		for _, o := range opts {
			o(p)
		}
		out = append(out, p)
	}
	return out
}

func (c *kcluster) pod(opts ...func(*corev1.Pod)) *corev1.Pod { return c.pods(1, opts...)[0] }

// provision plans the pods on the cluster as it is, checks the plan, and
// binds it: claims become nodes.
func (c *kcluster) provision(pods ...*corev1.Pod) *Plan {
	c.t.Helper()
	c.round++
	in := *c.in
	in.Pods = pods
	plan := Solve(&in)
	if err := verifyPlan(&in, plan); err != nil {
		c.t.Fatalf("round %d: plan violates constraints: %v\n%s", c.round, err, dump(plan))
	}
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[podName(p)] = p
	}
	for _, nm := range plan.Nominations {
		for _, n := range c.in.Nodes {
			if n.Name == nm.Node {
				n.Pods = append(n.Pods, byName[nm.Pod])
			}
		}
	}
	types := map[string]*catalog.InstanceType{}
	for _, it := range c.in.InstanceTypes["default"] {
		types[it.Name] = it
	}
	for _, nc := range plan.NodeClaims {
		var np *karpv1.NodePool
		for _, p := range c.in.NodePools {
			if p.Name == nc.NodePool {
				np = p
			}
		}
		lbls := offeringLabels(types[nc.InstanceType], np, nc.Zone, nc.CapacityType)
		for _, r := range nc.Requirements {
			if _, ok := lbls[r.Key]; !ok && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				lbls[r.Key] = r.Values[0]
			}
		}
		name := fmt.Sprintf("r%d-%s", c.round, nc.Name)
		lbls[karpv1.LabelHostname] = name
		capacity := nc.Allocatable
		if it := types[nc.InstanceType]; it != nil {
			capacity = it.Capacity // what NodePool limits count
		}
		n := &Node{Name: name, Labels: lbls, Taints: slices.Clone(np.Spec.Template.Spec.Taints),
			Allocatable: nc.Allocatable, Capacity: capacity}
		for _, key := range nc.Pods {
			n.Pods = append(n.Pods, byName[key])
		}
		c.in.Nodes = append(c.in.Nodes, n)
	}
	c.unscheduled, c.last = nil, plan
	for _, u := range plan.Unschedulable {
		c.unscheduled = append(c.unscheduled, byName[u.Pod])
	}
	return plan
}

// nodeOf is the node a pod is bound to, nil when it is pending.
func (c *kcluster) nodeOf(p *corev1.Pod) *Node {
	for _, n := range c.in.Nodes {
		if slices.Contains(n.Pods, p) {
			return n
		}
	}
	return nil
}

func (c *kcluster) scheduled(ps ...*corev1.Pod) {
	c.t.Helper()
	for _, p := range ps {
		if c.nodeOf(p) == nil {
			c.t.Fatalf("round %d: %s not scheduled: %v", c.round, p.Name, c.last.Unschedulable)
		}
	}
}

func (c *kcluster) notScheduled(ps ...*corev1.Pod) {
	c.t.Helper()
	for _, p := range ps {
		if n := c.nodeOf(p); n != nil {
			c.t.Fatalf("round %d: %s scheduled on %s, want pending", c.round, p.Name, n.Name)
		}
	}
}

// deletePods removes bound pods whose node drop() selects.
func (c *kcluster) deletePods(ps []*corev1.Pod, drop func(*Node) bool) {
	for _, n := range c.in.Nodes {
		if drop(n) {
			n.Pods = slices.DeleteFunc(n.Pods, func(p *corev1.Pod) bool { return slices.Contains(ps, p) })
		}
	}
}

// skew is Karpenter's ExpectSkew: how many bound, live pods of namespace
// default the selector matches (all pods when nil) per domain of key, domains
// without any left out, sorted.
func (c *kcluster) skew(sel *metav1.LabelSelector, key string) []int {
	counts := map[string]int{}
	for _, n := range c.in.Nodes {
		d, ok := n.Labels[key]
		if !ok {
			continue
		}
		for _, p := range n.Pods {
			if !ignoredForTopology(p) && p.Namespace == "default" && (sel == nil || selMatches(sel, p, "default")) {
				counts[d]++
			}
		}
	}
	out := slices.Collect(maps.Values(counts))
	slices.Sort(out)
	return out
}

func (c *kcluster) wantSkew(sel *metav1.LabelSelector, key string, want ...int) {
	c.t.Helper()
	slices.Sort(want)
	if got := c.skew(sel, key); !slices.Equal(got, want) {
		c.t.Fatalf("round %d: %s skew %v, want %v", c.round, key, got, want)
	}
}

// wantDomains is wantSkew naming the domains.
func (c *kcluster) wantDomains(sel *metav1.LabelSelector, key string, want map[string]int) {
	c.t.Helper()
	got := map[string]int{}
	for _, n := range c.in.Nodes {
		for _, p := range n.Pods {
			if d, ok := n.Labels[key]; ok && !ignoredForTopology(p) && p.Namespace == "default" && selMatches(sel, p, "default") {
				got[d]++
			}
		}
	}
	if !maps.Equal(got, want) {
		c.t.Fatalf("round %d: %s counts %v, want %v", c.round, key, got, want)
	}
}

// wantMaxSkew: no two domains of key differ by more than max.
func (c *kcluster) wantMaxSkew(sel *metav1.LabelSelector, key string, maxSkew int) {
	c.t.Helper()
	got := c.skew(sel, key)
	if len(got) > 0 && got[len(got)-1]-got[0] > maxSkew {
		c.t.Fatalf("round %d: %s skew %v exceeds %d", c.round, key, got, maxSkew)
	}
}

// wantAtMost: no domain of key holds more than limit.
func (c *kcluster) wantAtMost(sel *metav1.LabelSelector, key string, limit int) {
	c.t.Helper()
	got := c.skew(sel, key)
	if len(got) > 0 && got[len(got)-1] > limit {
		c.t.Fatalf("round %d: %s skew %v, want none above %d", c.round, key, got, limit)
	}
}

func (c *kcluster) nodeCount() int { return len(c.in.Nodes) }

// Pod options.

var kLabels = map[string]string{"test": "test"}
var kSel = &metav1.LabelSelector{MatchLabels: kLabels}

func withLabels(l map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		maps.Copy(p.Labels, l)
	}
}

func withCPU(q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(q)
	}
}

func withSpreads(tscs ...corev1.TopologySpreadConstraint) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints = tscs }
}

func withNodeSelector(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func ensureAffinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

// withNodeReqs requires one node selector term of rs.
func withNodeReqs(rs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ensureAffinity(p).NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: rs}}}}
	}
}

// withNodePrefs prefers (weight 1) one term of rs, keeping required terms.
func withNodePrefs(rs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: rs}})
	}
}

func podTerm(key string, sel *metav1.LabelSelector) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: key}
}

func withPodAffinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ensureAffinity(p).PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
	}
}

func withPodAntiAffinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ensureAffinity(p).PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}
	}
}

func withPodAffinityPref(weight int32, t corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ensureAffinity(p).PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: weight, PodAffinityTerm: t}}}
	}
}

func withPodAntiAffinityPref(weight int32, t corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ensureAffinity(p).PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: weight, PodAffinityTerm: t}}}
	}
}

func withNamespace(ns string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Namespace = ns } }

func withToleration(t corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, t) }
}

// tsc is a topology spread of the pods sel selects over key.
func tsc(key string, maxSkew int32, sel *metav1.LabelSelector) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: maxSkew, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}
}

func anyway(c corev1.TopologySpreadConstraint) corev1.TopologySpreadConstraint {
	c.WhenUnsatisfiable = corev1.ScheduleAnyway
	return c
}

func zoneReq(zones ...string) corev1.NodeSelectorRequirement {
	return req(karpv1.LabelZone, corev1.NodeSelectorOpIn, zones...)
}

func poolReqs(np *karpv1.NodePool, rs ...corev1.NodeSelectorRequirement) {
	np.Spec.Template.Spec.Requirements = nil
	for _, r := range rs {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: karpv1.NodeSelectorOperator(r.Operator), Values: r.Values})
	}
}

func existingNode(name string, lbls map[string]string, taints []corev1.Taint, cpu string, pods ...*corev1.Pod) *Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	l := map[string]string{karpv1.LabelHostname: name}
	maps.Copy(l, lbls)
	return &Node{Name: name, Labels: l, Taints: taints, Allocatable: alloc, Capacity: alloc, Pods: pods}
}

var (
	kZone = karpv1.LabelZone
	kHost = karpv1.LabelHostname
	kCT   = karpv1.LabelCapacityType
	kArch = karpv1.LabelArch
)

func catalogOffering(zone, ct string, price float64) catalog.Offering {
	return catalog.Offering{Zone: zone, CapacityType: ct, Price: price, Available: true}
}
