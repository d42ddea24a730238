package scheduler

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/test/fixture"
)

// The cases in this file port the rest of Karpenter v1.14.1's provisioning
// scheduler suite (pkg/controllers/provisioning/scheduling/suite_test.go:
// custom constraints, instance type compatibility, binpacking, in-flight
// and existing nodes, volume usage), its instance_selection_test.go, and
// the pure scheduling cases of pkg/controllers/provisioning/suite_test.go
// (resource limits, DaemonSets, sidecars, taints, multiple NodePools), on
// the kcluster harness of karpenter_topology_test.go. Expectations are
// Karpenter's unless a comment names a difference.

// Labels and resources of Karpenter's fake cloud provider's types.
const (
	kSize    = fixture.KSize
	kSpecial = fixture.KSpecial
	kInteger = fixture.KInteger
	kGPUA    = fixture.KGPUA
	kGPUB    = fixture.KGPUB
)

type ktypeOpt = func(*catalog.InstanceType)

func kArm(it *catalog.InstanceType) { it.Labels[karpv1.LabelArch] = "arm64" }

func kOS(os string) ktypeOpt {
	return func(it *catalog.InstanceType) { it.Labels[karpv1.LabelOS] = os }
}

func kRes(name corev1.ResourceName, q string) ktypeOpt { return fixture.KRes(name, q) }

func kLabel(k, v string) ktypeOpt { return func(it *catalog.InstanceType) { it.Labels[k] = v } }

// kOfferings replaces the type's offerings: zone/capacity-type/price
// triples.
func kOfferings(offs ...catalog.Offering) ktypeOpt {
	return func(it *catalog.InstanceType) { it.Offerings = offs }
}

// ktype is one of Karpenter's fake instance types (fixture.KarpenterType).
var ktype = fixture.KarpenterType

// kDefaultTypes are the fake cloud provider's default instance types.
func kDefaultTypes() []*catalog.InstanceType { return fixture.KarpenterDefaultTypes() }

// kNumberedTypes is fake.InstanceTypes(n): fake-it-i with i+1 cpu, 2(i+1)Gi
// and 10(i+1) pods.
func kNumberedTypes(n int) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for i := range n {
		out = append(out, ktype(fmt.Sprintf("fake-it-%d", i), strconv.Itoa(i+1), fmt.Sprintf("%dGi", 2*(i+1)),
			kRes(corev1.ResourcePods, strconv.Itoa(10*(i+1)))))
	}
	return out
}

// newKSuite is a cluster with Karpenter's suite NodePool (every capacity
// type) over the given types (the fake provider's defaults when none).
func newKSuite(t *testing.T, types ...*catalog.InstanceType) *kcluster {
	t.Helper()
	if len(types) == 0 {
		types = kDefaultTypes()
	}
	c := newKCluster(t)
	c.in.InstanceTypes["default"] = types
	poolReqs(c.pool(), req(kCT, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved))
	return c
}

func withReq(cpu, mem string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		r := corev1.ResourceList{}
		if cpu != "" {
			r[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			r[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		p.Spec.Containers[0].Resources.Requests = r
	}
}

func withExtended(name corev1.ResourceName, q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q) }
}

func withInit(restartAlways bool, cpu, mem string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		c := corev1.Container{Name: fmt.Sprintf("init-%d", len(p.Spec.InitContainers)), Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
		if cpu != "" {
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		if restartAlways {
			c.RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func withPorts(ports ...int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, port := range ports {
			withHostPort(port, corev1.ProtocolTCP, "")(p)
		}
	}
}

// dsPod is a DaemonSet's pod template.
func dsPod(opts ...func(*corev1.Pod)) *corev1.Pod {
	p := pod("ds", nil, "", "")
	for _, o := range opts {
		o(p)
	}
	return p
}

// bindDS binds a DaemonSet's pod to node n.
func bindDS(n *Node, name string, opts ...func(*corev1.Pod)) {
	p := dsPod(opts...)
	p.Name = name + "-abcde"
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, Controller: ptr(true)}}
	n.Pods = append(n.Pods, p)
}

func (c *kcluster) typeOf(p *corev1.Pod) string {
	c.t.Helper()
	c.scheduled(p)
	return c.nodeOf(p).Labels[karpv1.LabelInstanceType]
}

func (c *kcluster) wantType(p *corev1.Pod, typ string) {
	c.t.Helper()
	if got := c.typeOf(p); got != typ {
		c.t.Fatalf("round %d: %s on %s, want %s\n%s", c.round, p.Name, got, typ, dump(c.last))
	}
}

// wantTypes: each of ps is on a node of type typ.
func (c *kcluster) wantTypes(typ string, ps ...*corev1.Pod) {
	c.t.Helper()
	for _, p := range ps {
		c.wantType(p, typ)
	}
}

// wantCapacity: p's node is of a type with this cpu and memory.
func (c *kcluster) wantCapacity(p *corev1.Pod, cpu, mem string) {
	c.t.Helper()
	typ := c.typeOf(p)
	for _, it := range c.in.InstanceTypes["default"] {
		if it.Name == typ {
			gc, gm := it.Capacity[corev1.ResourceCPU], it.Capacity[corev1.ResourceMemory]
			if gc.Cmp(resource.MustParse(cpu)) != 0 || gm.Cmp(resource.MustParse(mem)) != 0 {
				c.t.Fatalf("round %d: %s on %s (%s, %s), want %s and %s\n%s", c.round, p.Name, typ, gc.String(), gm.String(), cpu, mem, dump(c.last))
			}
			return
		}
	}
	c.t.Fatalf("type %s not in the catalogue", typ)
}

// nodesOf counts the distinct nodes the pods are on.
func (c *kcluster) nodesOf(ps ...*corev1.Pod) int {
	c.t.Helper()
	names := map[string]bool{}
	for _, p := range ps {
		c.scheduled(p)
		names[c.nodeOf(p).Name] = true
	}
	return len(names)
}

func (c *kcluster) wantNodes(n int, ps ...*corev1.Pod) {
	c.t.Helper()
	if got := c.nodesOf(ps...); got != n {
		c.t.Fatalf("round %d: pods on %d nodes, want %d\n%s", c.round, got, n, dump(c.last))
	}
}

func (c *kcluster) wantLabel(p *corev1.Pod, key, val string) {
	c.t.Helper()
	c.scheduled(p)
	if got, ok := c.nodeOf(p).Labels[key]; !ok || got != val {
		c.t.Fatalf("round %d: %s's node has %s=%q (set %v), want %q\n%s", c.round, p.Name, key, got, ok, val, dump(c.last))
	}
}

func (c *kcluster) sameNode(a, b *corev1.Pod) {
	c.t.Helper()
	c.scheduled(a, b)
	if c.nodeOf(a) != c.nodeOf(b) {
		c.t.Fatalf("round %d: %s on %s, %s on %s: want the same node", c.round, a.Name, c.nodeOf(a).Name, b.Name, c.nodeOf(b).Name)
	}
}

func (c *kcluster) otherNode(a, b *corev1.Pod) {
	c.t.Helper()
	c.scheduled(a, b)
	if c.nodeOf(a) == c.nodeOf(b) {
		c.t.Fatalf("round %d: %s and %s both on %s: want different nodes", c.round, a.Name, b.Name, c.nodeOf(a).Name)
	}
}

func runKSuite(t *testing.T, cases []kcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(newKSuite(t)) })
	}
}

// Karpenter's scheduling suite: "Custom Constraints" (NodePool with
// labels, well-known labels, constraints validation, scheduling logic).
// The preference cases of its well-known labels are in
// TestKarpenterPreferentialFallback.
func TestKarpenterCustomConstraints(t *testing.T) {
	in, notIn := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn
	exists, dne := corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist
	testKey := func(op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
		return req("test-key", op, vals...)
	}
	labelled := func(c *kcluster) {
		c.pool().Spec.Template.ObjectMeta.Labels = map[string]string{"test-key": "test-value"}
	}
	required := func(c *kcluster) { poolReqs(c.pool(), testKey(in, "test-value")) }
	for _, tc := range []struct {
		name  string
		pool  func(c *kcluster)
		opts  []func(*corev1.Pod)
		want  map[string]string // labels of the pod's node; nil: not scheduled
		unset string            // a label the node must not have
	}{
		// NodePool with labels
		{name: "pool labels: an unconstrained pod gets them", pool: labelled, want: map[string]string{"test-key": "test-value"}},
		{name: "pool labels: a conflicting node selector", pool: labelled, opts: []func(*corev1.Pod){withNodeSelector("test-key", "different-value")}},
		{name: "pool labels: a node selector on an undefined key", opts: []func(*corev1.Pod){withNodeSelector("test-key", "test-value")}},
		{name: "pool labels: a matching requirement", pool: labelled, opts: []func(*corev1.Pod){withNodeReqs(testKey(in, "test-value", "another-value"))},
			want: map[string]string{"test-key": "test-value"}},
		{name: "pool labels: a conflicting requirement", pool: labelled, opts: []func(*corev1.Pod){withNodeReqs(testKey(in, "another-value"))}},
		// Well-known labels
		{name: "well-known: the pool's zone", pool: func(c *kcluster) { poolReqs(c.pool(), zoneReq("test-zone-2")) }, want: map[string]string{kZone: "test-zone-2"}},
		{name: "well-known: a node selector within the pool's zones", pool: func(c *kcluster) { poolReqs(c.pool(), zoneReq("test-zone-1", "test-zone-2")) },
			opts: []func(*corev1.Pod){withNodeSelector(kZone, "test-zone-2")}, want: map[string]string{kZone: "test-zone-2"}},
		{name: "well-known: a hostname selector", opts: []func(*corev1.Pod){withNodeSelector(kHost, "red-node")}},
		{name: "well-known: an unknown zone", pool: func(c *kcluster) { poolReqs(c.pool(), zoneReq("test-zone-1")) },
			opts: []func(*corev1.Pod){withNodeSelector(kZone, "unknown")}},
		{name: "well-known: a zone outside the pool's", pool: func(c *kcluster) { poolReqs(c.pool(), zoneReq("test-zone-1")) },
			opts: []func(*corev1.Pod){withNodeSelector(kZone, "test-zone-2")}},
		{name: "well-known: a compatible In requirement", opts: []func(*corev1.Pod){withNodeReqs(zoneReq("test-zone-3"))}, want: map[string]string{kZone: "test-zone-3"}},
		{name: "well-known: an In requirement on an unknown zone", opts: []func(*corev1.Pod){withNodeReqs(zoneReq("unknown"))}},
		{name: "well-known: pool Gt", pool: func(c *kcluster) { poolReqs(c.pool(), req(kInteger, corev1.NodeSelectorOpGt, "8")) }, want: map[string]string{kInteger: "16"}},
		{name: "well-known: pool Lt", pool: func(c *kcluster) { poolReqs(c.pool(), req(kInteger, corev1.NodeSelectorOpLt, "8")) }, want: map[string]string{kInteger: "2"}},
		{name: "well-known: pool Gte", pool: func(c *kcluster) {
			c.pool().Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: kInteger, Operator: karpv1.OpGte, Values: []string{"16"}}}
		}, want: map[string]string{kInteger: "16"}},
		{name: "well-known: pool Lte", pool: func(c *kcluster) {
			c.pool().Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: kInteger, Operator: karpv1.OpLte, Values: []string{"2"}}}
		}, want: map[string]string{kInteger: "2"}},
		// Constraints validation
		{name: "restricted domain karpenter.sh", opts: []func(*corev1.Pod){withNodeReqs(req("karpenter.sh/test", in, "test"))}},
		{name: "restricted domain kubernetes.io", opts: []func(*corev1.Pod){withNodeReqs(req("kubernetes.io/test", in, "test"))}},
		{name: "restricted label karpenter.sh/nodepool value", opts: []func(*corev1.Pod){withNodeReqs(req(karpv1.LabelNodePool, in, "test"))}},
		{name: "a pool requirement in the kubernetes.io domain labels the node", pool: func(c *kcluster) {
			poolReqs(c.pool(), req("kubernetes.io/test", in, "test-value"), req("k8s.io/test", in, "test-value"))
		}, want: map[string]string{"kubernetes.io/test": "test-value", "k8s.io/test": "test-value"}},
		{name: "a pool requirement in a kubernetes.io subdomain labels the node", pool: func(c *kcluster) {
			poolReqs(c.pool(), req("subdomain.kubernetes.io/test", in, "test-value"), req("subdomain.k8s.io/test", in, "test-value"))
		}, want: map[string]string{"subdomain.kubernetes.io/test": "test-value", "subdomain.k8s.io/test": "test-value"}},
		{name: "well-known selector: zone", opts: []func(*corev1.Pod){withNodeSelector(kZone, "test-zone-1")}, want: map[string]string{kZone: "test-zone-1"}},
		{name: "well-known selector: instance type", opts: []func(*corev1.Pod){withNodeSelector(karpv1.LabelInstanceType, "default-instance-type")},
			want: map[string]string{karpv1.LabelInstanceType: "default-instance-type"}},
		{name: "well-known selector: arch", opts: []func(*corev1.Pod){withNodeSelector(kArch, "arm64")}, want: map[string]string{kArch: "arm64"}},
		{name: "well-known selector: os", opts: []func(*corev1.Pod){withNodeSelector(karpv1.LabelOS, "linux")}, want: map[string]string{karpv1.LabelOS: "linux"}},
		{name: "well-known selector: capacity type", opts: []func(*corev1.Pod){withNodeSelector(kCT, "spot")}, want: map[string]string{kCT: "spot"}},
		// Scheduling logic
		{name: "In on an undefined key", opts: []func(*corev1.Pod){withNodeReqs(testKey(in, "test-value"))}},
		{name: "NotIn on an undefined key", opts: []func(*corev1.Pod){withNodeReqs(testKey(notIn, "test-value"))}, want: map[string]string{}, unset: "test-key"},
		{name: "Exists on an undefined key", opts: []func(*corev1.Pod){withNodeReqs(testKey(exists))}},
		{name: "DoesNotExist on an undefined key", opts: []func(*corev1.Pod){withNodeReqs(testKey(dne))}, want: map[string]string{}, unset: "test-key"},
		{name: "pool requirement: an unconstrained pod gets its label", pool: required, want: map[string]string{"test-key": "test-value"}},
		{name: "pool requirement: In on its value", pool: required, opts: []func(*corev1.Pod){withNodeReqs(testKey(in, "test-value"))},
			want: map[string]string{"test-key": "test-value"}},
		{name: "pool requirement: NotIn its value", pool: required, opts: []func(*corev1.Pod){withNodeReqs(testKey(notIn, "test-value"))}},
		{name: "pool requirement: Exists", pool: required, opts: []func(*corev1.Pod){withNodeReqs(testKey(exists))}, want: map[string]string{"test-key": "test-value"}},
		{name: "pool requirement: DoesNotExist", pool: required, opts: []func(*corev1.Pod){withNodeReqs(testKey(dne))}},
		{name: "pool requirement: In another value", pool: required, opts: []func(*corev1.Pod){withNodeReqs(testKey(in, "another-value"))}},
		{name: "pool requirement: NotIn another value", pool: required, opts: []func(*corev1.Pod){withNodeReqs(testKey(notIn, "another-value"))},
			want: map[string]string{"test-key": "test-value"}},
		{name: "Exists does not widen an In on the same key", opts: []func(*corev1.Pod){withNodeReqs(zoneReq("non-existent-zone"), req(kZone, exists))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKSuite(t)
			if tc.pool != nil {
				tc.pool(c)
			}
			p := c.pod(tc.opts...)
			c.provision(p)
			if tc.want == nil {
				c.notScheduled(p)
				return
			}
			for k, v := range tc.want {
				c.wantLabel(p, k, v)
			}
			if _, ok := c.nodeOf(p).Labels[tc.unset]; tc.unset != "" && ok {
				t.Fatalf("node has label %s", tc.unset)
			}
		})
	}
}

// Karpenter's scheduling suite: custom constraints across pods, and its
// well-known label list scheduled together.
func TestKarpenterCustomConstraintsPods(t *testing.T) {
	testKey := func(op corev1.NodeSelectorOperator, vals ...string) func(*corev1.Pod) {
		return withNodeReqs(req("test-key", op, vals...))
	}
	both := func(c *kcluster) {
		poolReqs(c.pool(), req("test-key", corev1.NodeSelectorOpIn, "test-value", "another-value"))
	}
	runKSuite(t, []kcase{
		{"compatible pods share a node", func(c *kcluster) {
			both(c)
			a, b := c.pod(testKey(corev1.NodeSelectorOpIn, "test-value")), c.pod(testKey(corev1.NodeSelectorOpNotIn, "another-value"))
			c.provision(a, b)
			c.sameNode(a, b)
			c.wantLabel(a, "test-key", "test-value")
		}},
		{"incompatible pods get a node each", func(c *kcluster) {
			both(c)
			a, b := c.pod(testKey(corev1.NodeSelectorOpIn, "test-value")), c.pod(testKey(corev1.NodeSelectorOpIn, "another-value"))
			c.provision(a, b)
			c.otherNode(a, b)
			c.wantLabel(a, "test-key", "test-value")
			c.wantLabel(b, "test-key", "another-value")
		}},
		{"every well-known label selector at once", func(c *kcluster) {
			ps := []*corev1.Pod{c.pod(withNodeSelector(kZone, "test-zone-1")), c.pod(withNodeSelector(karpv1.LabelInstanceType, "default-instance-type")),
				c.pod(withNodeSelector(kArch, "arm64")), c.pod(withNodeSelector(karpv1.LabelOS, "linux")), c.pod(withNodeSelector(kCT, "spot"))}
			c.provision(ps...)
			c.scheduled(ps...)
		}},
	})
}

// Karpenter's scheduling suite: "Instance Type Compatibility" and its
// "Provider Specific Labels".
func TestKarpenterInstanceTypeCompatibility(t *testing.T) {
	bothArchs := func(c *kcluster) { poolReqs(c.pool(), req(kArch, corev1.NodeSelectorOpIn, "arm64", "amd64")) }
	amd := func(c *kcluster) { poolReqs(c.pool(), req(kArch, corev1.NodeSelectorOpIn, "amd64")) }
	gpus := func(c *kcluster) {
		its := kNumberedTypes(5)
		its[0].Capacity["karpenter.sh/super-great-gpu"] = resource.MustParse("25")
		its[1].Capacity["karpenter.sh/even-better-gpu"] = resource.MustParse("25")
		c.in.InstanceTypes["default"] = its
	}
	twoNodes := func(c *kcluster, a, b func(*corev1.Pod)) {
		pa, pb := c.pod(a), c.pod(b)
		c.provision(pa, pb)
		c.otherNode(pa, pb)
	}
	runKSuite(t, []kcase{
		{"more than any type has", func(c *kcluster) {
			p := c.pod(withReq("512", ""))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"different archs on different nodes", func(c *kcluster) {
			bothArchs(c)
			twoNodes(c, withNodeSelector(kArch, "amd64"), withNodeSelector(kArch, "arm64"))
		}},
		{"a pod's instance type outside the pool's arch", func(c *kcluster) {
			amd(c)
			p := c.pod(withNodeReqs(req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "arm-instance-type")))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"a pod's OS no pool type runs", func(c *kcluster) {
			amd(c)
			p := c.pod(withNodeReqs(req(karpv1.LabelOS, corev1.NodeSelectorOpIn, "ios")))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"only a type of the excluded arch is large enough", func(c *kcluster) {
			amd(c)
			p := c.pod(withReq("14", ""))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"different operating systems on different nodes", func(c *kcluster) {
			// Karpenter's fake types each run linux, windows and darwin;
			// Joiner's catalogue has one OS per type, so a windows copy each.
			for _, it := range kDefaultTypes() {
				w := ktype("win-"+it.Name, it.Capacity.Cpu().String(), it.Capacity.Memory().String(), kOS("windows"))
				c.in.InstanceTypes["default"] = append(c.in.InstanceTypes["default"], w)
			}
			bothArchs(c)
			twoNodes(c, withNodeSelector(karpv1.LabelOS, "linux"), withNodeSelector(karpv1.LabelOS, "windows"))
		}},
		{"different instance type selectors on different nodes", func(c *kcluster) {
			bothArchs(c)
			twoNodes(c, withNodeSelector(karpv1.LabelInstanceType, "small-instance-type"), withNodeSelector(karpv1.LabelInstanceType, "default-instance-type"))
		}},
		{"different zone selectors on different nodes", func(c *kcluster) {
			bothArchs(c)
			twoNodes(c, withNodeSelector(kZone, "test-zone-1"), withNodeSelector(kZone, "test-zone-2"))
		}},
		{"resources no single type has together go to different nodes", func(c *kcluster) {
			gpus(c)
			twoNodes(c, withExtended("karpenter.sh/super-great-gpu", "1"), withExtended("karpenter.sh/even-better-gpu", "1"))
		}},
		{"a pod needing resources no single type has", func(c *kcluster) {
			gpus(c)
			p := c.pod(withExtended("karpenter.sh/super-great-gpu", "1"), withExtended("karpenter.sh/even-better-gpu", "1"))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"provider labels filter types", func(c *kcluster) {
			c.in.InstanceTypes["default"] = kNumberedTypes(5)
			large, small := c.pod(withNodeSelector(kSize, "large")), c.pod(withNodeSelector(kSize, "small"))
			c.provision(large, small)
			c.wantType(large, "fake-it-4")
			c.wantType(small, "fake-it-0")
		}},
		{"incompatible provider labels", func(c *kcluster) {
			c.in.InstanceTypes["default"] = kNumberedTypes(5)
			a := c.pod(withNodeSelector(kSize, "large", karpv1.LabelInstanceType, "fake-it-0"))
			b := c.pod(withNodeSelector(kSize, "small", karpv1.LabelInstanceType, "fake-it-4"))
			c.provision(a, b)
			c.notScheduled(a, b)
		}},
		{"an optional label some types have", func(c *kcluster) {
			c.in.InstanceTypes["default"] = kNumberedTypes(5)
			p := c.pod(withNodeReqs(req(kSpecial, corev1.NodeSelectorOpExists)))
			c.provision(p)
			c.wantLabel(p, kSpecial, "optional")
			c.wantType(p, "fake-it-4")
		}},
		{"without an optional label when it is disallowed", func(c *kcluster) {
			c.in.InstanceTypes["default"] = kNumberedTypes(5)
			c.in.NodePools = []*karpv1.NodePool{nodePool("default")}
			p := c.pod(withNodeReqs(req(kSpecial, corev1.NodeSelectorOpDoesNotExist)))
			c.provision(p)
			c.scheduled(p)
			if _, ok := c.nodeOf(p).Labels[kSpecial]; ok {
				t.Fatalf("node of %s has %s", c.typeOf(p), kSpecial)
			}
		}},
	})
}

// Karpenter's scheduling suite: "Binpacking".
func TestKarpenterBinpacking(t *testing.T) {
	amd := withNodeSelector(kArch, "amd64")
	runKSuite(t, []kcase{
		{"a small pod on the smallest type", func(c *kcluster) {
			p := c.pod(withReq("", "100M"))
			c.provision(p)
			c.wantType(p, "small-instance-type")
		}},
		{"a 2000M pod on the smallest type that holds it", func(c *kcluster) {
			p := c.pod(withReq("", "2000M"))
			c.provision(p)
			c.wantType(p, "small-instance-type")
		}},
		{"pod overhead (runtime class) counts", func(c *kcluster) {
			p := c.pod(withReq("1", ""), func(p *corev1.Pod) {
				p.Spec.RuntimeClassName = ptr("my-runtime-class")
				p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")} // set by admission
			})
			c.provision(p)
			c.wantType(p, "default-instance-type")
		}},
		{"several small pods on one smallest node", func(c *kcluster) {
			ps := c.pods(5, withReq("", "10M"))
			c.provision(ps...)
			c.wantNodes(1, ps...)
			c.wantType(ps[0], "small-instance-type")
		}},
		{"new nodes when a node is full", func(c *kcluster) {
			ps := c.pods(40, amd, withReq("", "1.8G"))
			c.provision(ps...)
			c.wantNodes(20, ps...)
			c.wantTypes("default-instance-type", ps...)
		}},
		{"small and large pods packed together", func(c *kcluster) {
			ps := append(c.pods(40, amd, withReq("", "1.8G")), c.pods(20, amd, withReq("", "400M"))...)
			c.provision(ps...)
			c.wantNodes(20, ps...)
			c.wantTypes("default-instance-type", ps...)
		}},
		{"nodes packed tightly", func(c *kcluster) {
			c.in.InstanceTypes["default"] = kNumberedTypes(5)
			big, small := c.pod(withReq("4.5", "")), c.pod(withReq("1", ""))
			c.provision(big, small)
			c.otherNode(big, small)
			if c.typeOf(big) == c.typeOf(small) {
				t.Fatalf("both on %s, want the small pod on a smaller type", c.typeOf(big))
			}
		}},
		{"a zero request of a resource no type has", func(c *kcluster) {
			p := c.pod(withExtended("foo.com/weird-resources", "0"))
			c.provision(p)
			c.scheduled(p)
		}},
		{"more memory than any type has", func(c *kcluster) {
			p := c.pod(withReq("", "2Ti"))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"new nodes when a node is full of pods", func(c *kcluster) {
			ps := c.pods(25, amd, withReq("1m", "1m"))
			c.provision(ps...)
			c.wantNodes(5, ps...)
			c.wantTypes("small-instance-type", ps...)
		}},
		{"init containers count", func(c *kcluster) {
			p := c.pod(withReq("1", "1Gi"), withInit(false, "2", "1Gi"))
			c.provision(p)
			c.wantType(p, "default-instance-type")
		}},
		{"an init container larger than every type", func(c *kcluster) {
			p := c.pod(withReq("1", "1Gi"), withInit(false, "2", "1Ti"))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"every type that fits is a candidate, the cheapest chosen", func(c *kcluster) {
			off := func(price float64) ktypeOpt {
				return kOfferings(catalogOffering("test-zone-1a", karpv1.CapacityTypeOnDemand, price))
			}
			c.in.InstanceTypes["default"] = []*catalog.InstanceType{ktype("medium", "2", "2Gi", off(3)), ktype("small", "1", "1Gi", off(2)),
				ktype("large", "4", "4Gi", off(1))}
			p := c.pod(withReq("1m", "1Mi"))
			c.provision(p)
			c.wantType(p, "large")
			got := slices.Sorted(slices.Values(c.last.NodeClaims[0].InstanceTypes))
			if !slices.Equal(got, []string{"large", "medium", "small"}) {
				t.Fatalf("candidates %v, want all three", got)
			}
		}},
	})
}

// Karpenter's provisioning suite: requests of containers, init containers,
// restartable (sidecar) init containers and pod-level resources. Types of
// 10/4Gi, 11/5Gi and 12/6Gi are added; the pod needs the middle one.
func TestKarpenterSidecars(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []func(*corev1.Pod)
	}{
		{"an init container before a sidecar", []func(*corev1.Pod){withReq("6", "2Gi"), withInit(false, "10", "4Gi"), withInit(true, "4.9", "2.9Gi")}},
		{"a sidecar before a smaller init container", []func(*corev1.Pod){withReq("6", "2Gi"), withInit(true, "4.9", "2.9Gi"), withInit(false, "5", "1Gi")}},
		{"a sidecar before a larger init container", []func(*corev1.Pod){withReq("5", "1Gi"), withInit(true, "4.9", "2.9Gi"), withInit(false, "6", "2Gi")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKSuite(t)
			for i, sz := range [][2]string{{"10", "4Gi"}, {"11", "5Gi"}, {"12", "6Gi"}} {
				c.in.InstanceTypes["default"] = append(c.in.InstanceTypes["default"], ktype(fmt.Sprintf("sized-%d", i), sz[0], sz[1]))
			}
			p := c.pod(tc.opts...)
			c.provision(p)
			c.wantCapacity(p, "11", "5Gi")
		})
	}
	t.Run("pod-level resources", func(t *testing.T) {
		c := newKSuite(t)
		for i, sz := range [][2]string{{"10", "4Gi"}, {"11", "5Gi"}, {"12", "6Gi"}} {
			c.in.InstanceTypes["default"] = append(c.in.InstanceTypes["default"], ktype(fmt.Sprintf("sized-%d", i), sz[0], sz[1]))
		}
		p := c.pod(withReq("5", "1Gi"), withInit(false, "6", "2Gi"), withInit(true, "4", "2Gi"), func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9.9"),
				corev1.ResourceMemory: resource.MustParse("3.9Gi")}}
		})
		c.provision(p)
		c.wantCapacity(p, "10", "4Gi")
	})
}

// Karpenter's scheduling suite: "In-Flight Nodes" (the nodes of earlier
// rounds) and "Existing Nodes".
func TestKarpenterInFlightNodes(t *testing.T) {
	small := withReq("10m", "")
	runKSuite(t, []kcase{
		{"an in-flight node that can take the pod", func(c *kcluster) {
			a := c.pod(small)
			c.provision(a)
			b := c.pod(small)
			c.provision(b)
			c.sameNode(a, b)
		}},
		{"an in-flight node that can take the pod (node selectors)", func(c *kcluster) {
			a := c.pod(small, withNodeReqs(zoneReq("test-zone-2")))
			c.provision(a)
			b := c.pod(small, withNodeReqs(zoneReq("test-zone-1", "test-zone-2")))
			c.provision(b)
			c.sameNode(a, b)
			d := c.pod(small, withNodeReqs(zoneReq("test-zone-1", "test-zone-3")))
			c.provision(d)
			c.otherNode(a, d)
		}},
		{"a second node when the pod does not fit the first", func(c *kcluster) {
			a := c.pod(withReq("1001m", ""))
			c.provision(a)
			b := c.pod(withReq("1", ""))
			c.provision(b)
			c.otherNode(a, b)
		}},
		{"a second node when the pod does not match the first", func(c *kcluster) {
			a := c.pod(small)
			c.provision(a)
			b := c.pod(withNodeSelector(kArch, "arm64"))
			c.provision(b)
			c.otherNode(a, b)
		}},
		{"zonal spread balanced with in-flight nodes", func(c *kcluster) {
			spread := func(n int) []*corev1.Pod { return c.pods(n, withLabels(kLabels), withSpreads(tsc(kZone, 1, kSel))) }
			c.provision(spread(4)...)
			c.wantSkew(kSel, kZone, 1, 1, 2)
			nodes := c.nodeCount()
			c.provision(spread(5)...)
			c.wantSkew(kSel, kZone, 3, 3, 3)
			if c.nodeCount() != nodes {
				t.Fatalf("%d nodes, want the %d in flight to take the pods", c.nodeCount(), nodes)
			}
		}},
		{"hostname spread balanced with in-flight nodes", func(c *kcluster) {
			spread := func(n int) []*corev1.Pod { return c.pods(n, withLabels(kLabels), withSpreads(tsc(kHost, 1, kSel))) }
			c.provision(spread(4)...)
			c.wantSkew(kSel, kHost, 1, 1, 1, 1)
			c.provision(spread(5)...)
			c.wantSkew(kSel, kHost, 1, 1, 1, 1, 1, 1, 1, 1, 1)
		}},
		{"a bound DaemonSet pod no longer needs room kept for it", func(c *kcluster) {
			c.in.DaemonSetPods = []*corev1.Pod{dsPod(withReq("1", "1Gi"))}
			a := c.pod(withReq("8", ""))
			c.provision(a)
			n := c.nodeOf(a)
			c.deletePods([]*corev1.Pod{a}, func(*Node) bool { return true })
			bindDS(n, "ds", withReq("1", "2Gi"))
			b := c.pod(withReq("14.9", ""))
			c.provision(b)
			if c.nodeOf(b) != n {
				t.Fatalf("%s on a new node, want the one with room for it\n%s", b.Name, dump(c.last))
			}
		}},
		{"a DaemonSet pod bound where its selector did not predict", func(c *kcluster) {
			c.in.DaemonSetPods = []*corev1.Pod{dsPod(withNodeSelector("my-node-label", "value"), withReq("1", "1Gi")), dsPod(withReq("1m", ""))}
			a := c.pod(withReq("8", ""))
			c.provision(a)
			n := c.nodeOf(a)
			n.Labels["my-node-label"] = "value"
			c.deletePods([]*corev1.Pod{a}, func(*Node) bool { return true })
			bindDS(n, "ds", withNodeSelector("my-node-label", "value"), withReq("1", "2Gi"))
			b := c.pod(withReq("15.5", ""))
			c.provision(b)
			if c.nodeOf(b) == n {
				t.Fatalf("%s on %s, which has 14.9 cpu left", b.Name, n.Name)
			}
		}},
		{"DaemonSets selecting karpenter.sh/initialized or registered count on new nodes", func(c *kcluster) {
			c.in.DaemonSetPods = []*corev1.Pod{
				dsPod(withNodeReqs(req(karpv1.LabelInitialized, corev1.NodeSelectorOpIn, "true")), withReq("1", "")),
				dsPod(withNodeReqs(req(karpv1.LabelRegistered, corev1.NodeSelectorOpIn, "true")), withReq("1", "")),
			}
			p := c.pod(withReq("2", ""))
			c.provision(p)
			c.wantCapacity(p, "16", "128Gi")
			for _, r := range c.last.NodeClaims[0].Requirements {
				if r.Key == karpv1.LabelInitialized || r.Key == karpv1.LabelRegistered {
					t.Fatalf("claim requires %s", r.Key)
				}
			}
		}},
		{"in-flight nodes packed before new ones", func(c *kcluster) {
			c.in.InstanceTypes["default"] = []*catalog.InstanceType{ktype("medium", "4.25", "4Gi", kRes(corev1.ResourcePods, "4"))}
			for _, n := range []int{3, 7, 1, 9, 2, 5, 8, 4, 6, 0} {
				ps := c.pods(n, withReq("1", ""))
				c.provision(ps...)
				c.scheduled(ps...)
			}
			free := 0
			for _, n := range c.in.Nodes {
				used := resource.Quantity{}
				for _, p := range n.Pods {
					used.Add(*p.Spec.Containers[0].Resources.Requests.Cpu())
				}
				left := n.Allocatable.Cpu().DeepCopy()
				left.Sub(used)
				if left.Cmp(resource.MustParse("1")) >= 0 {
					free++
				}
			}
			if free > 1 {
				t.Fatalf("%d nodes with a cpu or more free, want at most 1", free)
			}
		}},
		{"self pod affinity onto an in-flight node its pod is not bound to yet", func(c *kcluster) {
			aff := map[string]string{"security": "s2"}
			ps := c.pods(2, withLabels(aff), withPodAffinity(podTerm(kZone, &metav1.LabelSelector{MatchLabels: aff})))
			c.provision(ps[0])
			c.in.Nodes[0].InFlight = true
			c.deletePods(ps[:1], func(*Node) bool { return true }) // nominated, not bound
			c.provision(ps[1])
			if c.nodeCount() != 1 {
				t.Fatalf("%d nodes, want the in-flight one only\n%s", c.nodeCount(), dump(c.last))
			}
		}},
	})
}

// Karpenter's scheduling suite: "Existing Nodes".
func TestKarpenterExistingNodes(t *testing.T) {
	unowned := func(c *kcluster, cpu, mem string) *Node {
		n := existingNode("unowned", nil, nil, cpu)
		n.Allocatable[corev1.ResourceMemory] = resource.MustParse(mem)
		c.in.Nodes = append(c.in.Nodes, n)
		return n
	}
	runKSuite(t, []kcase{
		{"a pod onto a node Karpenter does not own", func(c *kcluster) {
			n := unowned(c, "10", "10Gi")
			p := c.pod(withReq("10m", ""))
			c.provision(p)
			if c.nodeOf(p) != n {
				t.Fatalf("%s not on the existing node", p.Name)
			}
		}},
		{"many pods onto a node Karpenter does not own", func(c *kcluster) {
			n := unowned(c, "10", "100Gi")
			ps := c.pods(100, withReq("10m", ""))
			c.provision(ps...)
			for _, p := range ps {
				if c.nodeOf(p) != n {
					t.Fatalf("%s not on the existing node", p.Name)
				}
			}
		}},
		{"a pod the existing node cannot take waits for a NodePool", func(c *kcluster) {
			unowned(c, "10", "10Gi")
			pools := c.in.NodePools
			c.in.NodePools = nil
			p := c.pod(withNodeReqs(zoneReq("test-zone-1")))
			c.provision(p)
			c.notScheduled(p)
			c.in.NodePools = pools
			c.provision(p)
			c.scheduled(p)
		}},
		{"DaemonSet overhead not compatible with an existing node is not taken from it", func(c *kcluster) {
			n := unowned(c, "1", "1Gi")
			c.in.DaemonSetPods = []*corev1.Pod{dsPod(withReq("100", "100Gi"), withNodeReqs(zoneReq("test-zone-1")))}
			p := c.pod(withReq("1", "1Gi"))
			c.provision(p)
			if c.nodeOf(p) != n {
				t.Fatalf("%s not on the existing node\n%s", p.Name, dump(c.last))
			}
			// new nodes would all carry the DaemonSet, which no type holds
			p2 := c.pod(withReq("1", "1Gi"))
			c.provision(p2)
			c.notScheduled(p2)
		}},
	})
}

// Karpenter's scheduling suite: "VolumeUsage" (the cases whose input is
// the scheduler's: attach counts and volume requirements).
func TestKarpenterVolumeUsage(t *testing.T) {
	const driver = "fake.csi.provider"
	big := func(c *kcluster) {
		c.in.InstanceTypes["default"] = []*catalog.InstanceType{ktype("instance-type", "1024", "4Gi", kRes(corev1.ResourcePods, "1024"))}
		c.in.Volumes = map[string]PodVolumes{}
	}
	runKSuite(t, []kcase{
		{"volume limits need a second node", func(c *kcluster) {
			big(c)
			first := c.pod(withNodeSelector(kZone, "test-zone-1"))
			c.provision(first)
			c.nodeOf(first).Allocatable[AttachResource(driver)] = resource.MustParse("10") // its CSINode
			ps := c.pods(6)
			for _, p := range ps {
				c.in.Volumes[podName(p)] = PodVolumes{Requirements: []corev1.NodeSelectorRequirement{zoneReq("test-zone-1")},
					Attachments: map[string]int64{driver: 2}}
			}
			c.provision(ps...)
			c.scheduled(ps...)
			if c.nodeCount() != 2 {
				t.Fatalf("%d nodes, want 2 (the first takes five pods' ten volumes)\n%s", c.nodeCount(), dump(c.last))
			}
		}},
		{"a volume with several zones (PV terms or StorageClass topologies, joined)", func(c *kcluster) {
			lbl := map[string]string{"app": "multi-zone-app"}
			ps := c.pods(2, withLabels(lbl), withPodAntiAffinity(podTerm(kZone, &metav1.LabelSelector{MatchLabels: lbl})))
			c.in.Volumes = map[string]PodVolumes{}
			for _, p := range ps {
				c.in.Volumes[podName(p)] = PodVolumes{Requirements: []corev1.NodeSelectorRequirement{zoneReq("test-zone-1", "test-zone-2")}}
			}
			c.provision(ps...)
			z0, z1 := c.nodeOf(ps[0]), c.nodeOf(ps[1])
			c.scheduled(ps...)
			if z0.Labels[kZone] == z1.Labels[kZone] || !slices.Contains([]string{"test-zone-1", "test-zone-2"}, z0.Labels[kZone]) ||
				!slices.Contains([]string{"test-zone-1", "test-zone-2"}, z1.Labels[kZone]) {
				t.Fatalf("zones %s and %s, want zone 1 and zone 2", z0.Labels[kZone], z1.Labels[kZone])
			}
		}},
	})
}

// Karpenter's provisioning suite: "Resource Limits".
func TestKarpenterResourceLimits(t *testing.T) {
	limit := func(c *kcluster, name corev1.ResourceName, q string) {
		c.pool().Spec.Limits = karpv1.Limits{name: resource.MustParse(q)}
	}
	anti := func(c *kcluster, n int) []*corev1.Pod {
		lbl := map[string]string{"app": "foo"}
		return c.pods(n, withLabels(lbl), withReq("1.5", ""), withPodAntiAffinity(podTerm(kHost, &metav1.LabelSelector{MatchLabels: lbl})))
	}
	runKSuite(t, []kcase{
		{"limits already exceeded by a NodeClaim", func(c *kcluster) {
			limit(c, corev1.ResourceCPU, "20")
			c.in.Nodes = append(c.in.Nodes, &Node{Name: "claimed", InFlight: true, Labels: map[string]string{karpv1.LabelNodePool: "default"},
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}})
			p := c.pod()
			c.provision(p)
			c.notScheduled(p)
		}},
		{"a node that meets the limit exactly", func(c *kcluster) {
			limit(c, corev1.ResourceCPU, "2")
			p := c.pod(withReq("1.75", ""))
			c.provision(p)
			c.scheduled(p)
		}},
		{"partially scheduled when the limit would be exceeded", func(c *kcluster) {
			limit(c, corev1.ResourceCPU, "3")
			ps := anti(c, 2)
			c.provision(ps...)
			if len(c.unscheduled) != 1 {
				t.Fatalf("%d pending, want 1\n%s", len(c.unscheduled), dump(c.last))
			}
		}},
		{"no node within the limit", func(c *kcluster) {
			limit(c, corev1.ResourceCPU, "2")
			p := c.pod(withReq("2.1", ""))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"a pods limit below every GPU type's pods", func(c *kcluster) {
			limit(c, corev1.ResourcePods, "1")
			p := c.pod(withExtended(kGPUA, "1"))
			c.provision(p)
			c.notScheduled(p)
		}},
		{"the limit reached in an earlier round", func(c *kcluster) {
			limit(c, corev1.ResourceCPU, "2")
			a := c.pod(withReq("1.75", ""))
			c.provision(a)
			c.scheduled(a)
			b := c.pod(withReq("1.75", ""))
			c.provision(b)
			c.notScheduled(b)
		}},
		{"the nodes limit", func(c *kcluster) {
			limit(c, "nodes", "2")
			for i, want := range []bool{true, true, false} {
				p := anti(c, 1)[0]
				c.provision(p)
				if (c.nodeOf(p) != nil) != want {
					t.Fatalf("pod %d: scheduled %v, want %v", i, c.nodeOf(p) != nil, want)
				}
			}
		}},
	})
}

// Karpenter's provisioning suite: "Daemonsets". The default types hold
// 2 cpu/2Gi (small) or 4 cpu/4Gi; the pod (1 cpu, 1Gi) needs the larger
// one only when the DaemonSet (2 cpu, 2Gi unless said) counts.
func TestKarpenterDaemonSets(t *testing.T) {
	podReq := withReq("1", "1Gi")
	ds := func(opts ...func(*corev1.Pod)) *corev1.Pod {
		return dsPod(append([]func(*corev1.Pod){withReq("2", "2Gi")}, opts...)...)
	}
	for _, tc := range []struct {
		name    string
		pool    func(np *karpv1.NodePool)
		ds      []*corev1.Pod
		pod     []func(*corev1.Pod)
		counted bool // the node is 4/4Gi (false: 2/2Gi)
		pending bool
		check   func(c *kcluster, p *corev1.Pod)
	}{
		{name: "a DaemonSet counts", ds: []*corev1.Pod{ds()}, counted: true},
		{name: "a DaemonSet counts on a pool with startup taints", pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "foo.com/taint", Effect: corev1.TaintEffectNoSchedule}}
		}, ds: []*corev1.Pod{ds()}, counted: true},
		{name: "overhead larger than every type", ds: []*corev1.Pod{dsPod(withReq("10000", "10000Gi"))}, pod: []func(*corev1.Pod){withReq("", "")}, pending: true},
		{name: "limits defaulted into requests", ds: []*corev1.Pod{dsPod(withReq("1", "10000Gi"))}, pod: []func(*corev1.Pod){withReq("", "")}, pending: true},
		{name: "the larger of containers and init containers", ds: []*corev1.Pod{dsPod(withReq("1", "1Gi"), withInit(false, "3", "3Gi"))},
			pod: []func(*corev1.Pod){withReq("", "")}, counted: true},
		{name: "an init container larger than every type", ds: []*corev1.Pod{dsPod(withReq("1", "1Gi"), withInit(false, "1", "10000Gi"))},
			pod: []func(*corev1.Pod){withReq("", "")}, pending: true},
		{name: "an init container alone larger than every type", ds: []*corev1.Pod{dsPod(withReq("", ""), withInit(false, "10000", "10000Gi"))},
			pod: []func(*corev1.Pod){withReq("", "")}, pending: true},
		{name: "no requests at all", ds: []*corev1.Pod{dsPod(withReq("", ""))}, pod: []func(*corev1.Pod){withReq("", "")},
			check: func(c *kcluster, p *corev1.Pod) { c.scheduled(p) }},
		{name: "a DaemonSet not tolerating the pool's taint", pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoSchedule}}
		}, ds: []*corev1.Pod{ds()}, pod: []func(*corev1.Pod){withToleration(corev1.Toleration{Operator: corev1.TolerationOpExists})}},
		{name: "a DaemonSet selecting a label no node has", ds: []*corev1.Pod{ds(withNodeSelector("node", "invalid"))}},
		{name: "a DaemonSet for a type that does not exist", ds: []*corev1.Pod{ds(withNodeReqs(req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "non-existent-instance-type")))}},
		{name: "a DaemonSet selecting the pool's custom label", pool: func(np *karpv1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{"purpose": "monitoring"}
		}, ds: []*corev1.Pod{ds(withNodeSelector("purpose", "monitoring"))}, counted: true},
		{name: "DaemonSets filtered by instance type labels", ds: []*corev1.Pod{
			dsPod(withReq("1", ""), withNodeReqs(req(kSize, corev1.NodeSelectorOpIn, "small"))),
			dsPod(withReq("10", ""), withNodeReqs(req(kSize, corev1.NodeSelectorOpIn, "large"))),
		}, counted: true},
		{name: "a DaemonSet's NotIn on a key nodes lack", ds: []*corev1.Pod{ds(withNodeReqs(req("foo", corev1.NodeSelectorOpNotIn, "bar")))},
			pod: []func(*corev1.Pod){withNodeReqs(zoneReq("test-zone-2"))}, counted: true},
		{name: "a DaemonSet whose second term matches the pool's label", pool: func(np *karpv1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{"foo": "bar"}
		}, ds: []*corev1.Pod{ds(withAffinity([]corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "voo")},
			[]corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "bar")}))}, counted: true},
		{name: "a DaemonSet with an incompatible preference", ds: []*corev1.Pod{ds(withNodePrefs(req("node", corev1.NodeSelectorOpIn, "invalid")))}, counted: true},
		{name: "a DaemonSet on a PreferNoSchedule pool", pool: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "test", Effect: corev1.TaintEffectPreferNoSchedule}}
		}, ds: []*corev1.Pod{ds()}, counted: true},
		// Karpenter: "should account for daemonset hostports"
		{name: "a host port every node's DaemonSet binds", ds: []*corev1.Pod{ds(withPorts(8080))}, pod: []func(*corev1.Pod){withPorts(8080)},
			check: func(c *kcluster, p *corev1.Pod) {
				c.notScheduled(p)
				if len(c.last.NodeClaims) != 0 {
					c.t.Fatalf("%d claims for a pod no node can take", len(c.last.NodeClaims))
				}
			}},
		{name: "host ports of a DaemonSet that would not run on the node", ds: []*corev1.Pod{
			dsPod(withReq("4", "4Gi"), withNodeReqs(req(kSize, corev1.NodeSelectorOpIn, "large")), withPorts(8080)),
			dsPod(withReq("2", "2Gi"), withNodeReqs(req(kSize, corev1.NodeSelectorOpIn, "small")), withPorts(8081)),
		}, pod: []func(*corev1.Pod){withNodeReqs(req(kSize, corev1.NodeSelectorOpIn, "small")), withPorts(8080)}, counted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKCluster(t)
			c.in.InstanceTypes["default"] = kDefaultTypes()
			if tc.pool != nil {
				tc.pool(c.pool())
			}
			c.in.DaemonSetPods = tc.ds
			p := c.pod(append([]func(*corev1.Pod){podReq}, tc.pod...)...)
			c.provision(p)
			switch {
			case tc.check != nil:
				tc.check(c, p)
			case tc.pending:
				c.notScheduled(p)
			case tc.counted:
				c.wantCapacity(p, "4", "4Gi")
			default:
				c.wantCapacity(p, "2", "2Gi")
			}
		})
	}
}

// Karpenter's provisioning suite: "Taints", "Multiple NodePools" and the
// PreferNoSchedule preferential fallback.
func TestKarpenterTaintsAndPools(t *testing.T) {
	pool := func(name string, weight int32, mutate func(*karpv1.NodePool)) *karpv1.NodePool {
		np := nodePool(name)
		if weight > 0 {
			np.Spec.Weight = ptr(weight)
		}
		if mutate != nil {
			mutate(np)
		}
		return np
	}
	preferNo := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "foo", Value: "bar", Effect: corev1.TaintEffectPreferNoSchedule}}
	}
	for _, tc := range []struct {
		name  string
		pools []*karpv1.NodePool
		pods  func(c *kcluster) []*corev1.Pod
		want  string // the pool every pod's node comes from; "!x": not x
	}{
		{name: "pods tolerating the pool's taint every way", pools: []*karpv1.NodePool{pool("gpu", 0, func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		})}, pods: func(c *kcluster) []*corev1.Pod {
			return []*corev1.Pod{
				c.pod(withToleration(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule})),
				c.pod(withToleration(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
				c.pod(withToleration(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})),
				c.pod(withToleration(corev1.Toleration{Operator: corev1.TolerationOpExists})),
			}
		}, want: "gpu"},
		{name: "a PreferNoSchedule pool after every node preference is relaxed", pools: []*karpv1.NodePool{pool("tainted", 0, preferNo)},
			pods: func(c *kcluster) []*corev1.Pod {
				return []*corev1.Pod{c.pod(withNodePrefs(zoneReq("invalid")), withNodePrefs(req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "invalid")))}
			}, want: "tainted"},
		{name: "a NodePool selected by name", pools: []*karpv1.NodePool{pool("a", 0, nil), pool("b", 0, nil)},
			pods: func(c *kcluster) []*corev1.Pod {
				return []*corev1.Pod{c.pod(withNodeSelector(karpv1.LabelNodePool, "a"))}
			}, want: "a"},
		{name: "a NodePool selected by its labels", pools: []*karpv1.NodePool{pool("a", 0, func(np *karpv1.NodePool) {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{"foo": "bar"}
		}), pool("b", 0, nil)}, pods: func(c *kcluster) []*corev1.Pod { return []*corev1.Pod{c.pod(withNodeSelector("foo", "bar"))} }, want: "a"},
		{name: "a PreferNoSchedule pool avoided while another matches", pools: []*karpv1.NodePool{pool("a", 0, preferNo), pool("b", 0, nil)},
			pods: func(c *kcluster) []*corev1.Pod { return []*corev1.Pod{c.pod()} }, want: "!a"},
		{name: "the heaviest pool always", pools: []*karpv1.NodePool{pool("a", 0, nil), pool("b", 20, nil), pool("c", 100, nil)},
			pods: func(c *kcluster) []*corev1.Pod { return c.pods(3) }, want: "c"},
		{name: "a selected pool over heavier ones", pools: []*karpv1.NodePool{pool("a", 0, nil), pool("b", 20, nil), pool("c", 100, nil)},
			pods: func(c *kcluster) []*corev1.Pod {
				return []*corev1.Pod{c.pod(withNodeSelector(karpv1.LabelNodePool, "a"))}
			}, want: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKCluster(t, tc.pools...)
			c.in.InstanceTypes["default"] = kDefaultTypes()
			ps := tc.pods(c)
			c.provision(ps...)
			for _, p := range ps {
				c.scheduled(p)
				got := c.nodeOf(p).Labels[karpv1.LabelNodePool]
				if not, ok := cutPrefix(tc.want, "!"); ok && got == not || !ok && got != tc.want {
					t.Fatalf("%s from pool %s, want %s", p.Name, got, tc.want)
				}
			}
		})
	}
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

// Karpenter's instance_selection_test.go: the cheapest type among the
// assorted catalogue (every cpu 1-64 × memory 1-128Gi × zone × capacity
// type × OS × arch, one offering each), and every candidate of the claim
// meeting the pod's and pool's requirements.
func TestKarpenterInstanceSelection(t *testing.T) {
	assorted := func() []*catalog.InstanceType {
		var out []*catalog.InstanceType
		for _, cpu := range []int{1, 2, 4, 8, 16, 32, 64} {
			for _, mem := range []int{1, 2, 4, 8, 16, 32, 64, 128} {
				for _, zone := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
					for _, ct := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
						for _, os := range []string{"linux", "windows"} {
							for _, arch := range []string{"amd64", "arm64"} {
								name := fmt.Sprintf("%d-cpu-%d-mem-%s-%s-%s-%s", cpu, mem, arch, os, zone, ct)
								price := 0.1*float64(cpu) + 0.1*float64(int64(mem)<<30)/1e9
								out = append(out, ktype(name, strconv.Itoa(cpu), fmt.Sprintf("%dGi", mem), kOS(os), kLabel(kArch, arch),
									kOfferings(catalogOffering(zone, ct, price))))
							}
						}
					}
				}
			}
		}
		return out
	}
	r := func(k string, v ...string) corev1.NodeSelectorRequirement {
		return req(k, corev1.NodeSelectorOpIn, v...)
	}
	od := karpv1.CapacityTypeOnDemand
	for _, tc := range []struct {
		name string
		pool []corev1.NodeSelectorRequirement
		pod  []corev1.NodeSelectorRequirement
		none bool
	}{
		{name: "no constraint"},
		{name: "pod arch amd64", pod: []corev1.NodeSelectorRequirement{r(kArch, "amd64")}},
		{name: "pod arch arm64", pod: []corev1.NodeSelectorRequirement{r(kArch, "arm64")}},
		{name: "pool arch amd64", pool: []corev1.NodeSelectorRequirement{r(kArch, "amd64")}},
		{name: "pool arch arm64", pool: []corev1.NodeSelectorRequirement{r(kArch, "arm64")}},
		{name: "pool os windows", pool: []corev1.NodeSelectorRequirement{r(karpv1.LabelOS, "windows")}},
		{name: "pod os windows", pod: []corev1.NodeSelectorRequirement{r(karpv1.LabelOS, "windows")}},
		{name: "pod os linux", pod: []corev1.NodeSelectorRequirement{r(karpv1.LabelOS, "linux")}},
		{name: "pool zone 2", pool: []corev1.NodeSelectorRequirement{zoneReq("test-zone-2")}},
		{name: "pod zone 2", pod: []corev1.NodeSelectorRequirement{zoneReq("test-zone-2")}},
		{name: "pool spot", pool: []corev1.NodeSelectorRequirement{r(kCT, "spot")}},
		{name: "pod spot", pod: []corev1.NodeSelectorRequirement{r(kCT, "spot")}},
		{name: "pool on-demand in zone 1", pool: []corev1.NodeSelectorRequirement{r(kCT, od), zoneReq("test-zone-1")}},
		{name: "pod spot in zone 1", pod: []corev1.NodeSelectorRequirement{r(kCT, "spot"), zoneReq("test-zone-1")}},
		{name: "pool spot, pod zone 2", pool: []corev1.NodeSelectorRequirement{r(kCT, "spot")}, pod: []corev1.NodeSelectorRequirement{zoneReq("test-zone-2")}},
		{name: "pool on-demand/zone 1/arm64/windows", pool: []corev1.NodeSelectorRequirement{r(kCT, od), zoneReq("test-zone-1"), r(kArch, "arm64"), r(karpv1.LabelOS, "windows")}},
		{name: "pool spot/zone 2, pod amd64/linux", pool: []corev1.NodeSelectorRequirement{r(kCT, "spot"), zoneReq("test-zone-2")},
			pod: []corev1.NodeSelectorRequirement{r(kArch, "amd64"), r(karpv1.LabelOS, "linux")}},
		{name: "pod spot/zone 2/amd64/linux", pod: []corev1.NodeSelectorRequirement{r(kCT, "spot"), zoneReq("test-zone-2"), r(kArch, "amd64"), r(karpv1.LabelOS, "linux")}},
		{name: "pod arm, no arm type", pod: []corev1.NodeSelectorRequirement{r(kArch, "arm")}, none: true},
		{name: "pod arm in zone 2, no arm type", pod: []corev1.NodeSelectorRequirement{r(kArch, "arm"), zoneReq("test-zone-2")}, none: true},
		{name: "pool arm, pod zone 2, no arm type", pool: []corev1.NodeSelectorRequirement{r(kArch, "arm")}, pod: []corev1.NodeSelectorRequirement{zoneReq("test-zone-2")}, none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKSuite(t, assorted()...)
			pr := []corev1.NodeSelectorRequirement{req(kCT, corev1.NodeSelectorOpIn, "spot", od), r(kArch, "arm64", "amd64")}
			poolReqs(c.pool(), append(pr, tc.pool...)...)
			var opts []func(*corev1.Pod)
			if len(tc.pod) > 0 {
				opts = append(opts, withNodeReqs(tc.pod...))
			}
			p := c.pod(opts...)
			c.provision(p)
			if tc.none {
				c.notScheduled(p)
				if len(c.last.NodeClaims) != 0 {
					t.Fatalf("claims planned for nothing: %v", c.last.NodeClaims)
				}
				return
			}
			c.scheduled(p)
			nc := c.last.NodeClaims[0]
			if minPrice := 0.1 + 0.1*float64(int64(1)<<30)/1e9; nc.Price != minPrice {
				t.Fatalf("price %v, want the cheapest %v", nc.Price, minPrice)
			}
			all := append(slices.Clone(tc.pool), tc.pod...)
			types := map[string]*catalog.InstanceType{}
			for _, it := range c.in.InstanceTypes["default"] {
				types[it.Name] = it
			}
			for _, name := range nc.InstanceTypes {
				it := types[name]
				for _, rq := range all {
					var v string
					switch rq.Key {
					case kZone:
						v = it.Offerings[0].Zone
					case kCT:
						v = it.Offerings[0].CapacityType
					default:
						v = it.Labels[rq.Key]
					}
					if !slices.Contains(rq.Values, v) {
						t.Fatalf("candidate %s has %s=%s, outside %v", name, rq.Key, v, rq.Values)
					}
				}
			}
		})
	}
	t.Run("three pods on one node of a type with room for them", func(t *testing.T) {
		for _, cpu := range []string{"0.1", "1.0", "2", "2.5", "4", "8", "16"} {
			for _, mem := range []string{"0.1", "1.0", "2", "4", "8", "16", "32"} {
				c := newKSuite(t, assorted()...)
				poolReqs(c.pool(), req(kCT, corev1.NodeSelectorOpIn, "spot", od), r(kArch, "arm64", "amd64"))
				ps := c.pods(3, withReq(cpu, mem+"Gi"))
				c.provision(ps...)
				c.wantNodes(1, ps...)
				need := resource.MustParse(cpu)
				for _, it := range c.in.InstanceTypes["default"] {
					if !slices.Contains(c.last.NodeClaims[0].InstanceTypes, it.Name) {
						continue
					}
					total := need.DeepCopy()
					total.Add(need)
					total.Add(need)
					total.Add(resource.MustParse("100m"))
					if total.Cmp(it.Capacity[corev1.ResourceCPU]) >= 0 {
						t.Fatalf("%s/%s: candidate %s has too little cpu", cpu, mem, it.Name)
					}
				}
			}
		}
	})
	t.Run("the cheaper on-demand type although another's spot is cheaper", func(t *testing.T) {
		mk := func(name string, od, spot float64) *catalog.InstanceType {
			return ktype(name, "1", "1Gi", kOfferings(catalogOffering("test-zone-1a", karpv1.CapacityTypeOnDemand, od),
				catalogOffering("test-zone-1a", karpv1.CapacityTypeSpot, spot)))
		}
		c := newKSuite(t, mk("test-instance1", 1.0, 0.2), mk("test-instance2", 1.3, 0.1))
		poolReqs(c.pool(), r(kCT, od))
		p := c.pod()
		c.provision(p)
		c.wantType(p, "test-instance1")
	})
}

// Karpenter's instance_selection_test.go: "MinValues".
func TestKarpenterInstanceSelectionMinValues(t *testing.T) {
	const gen = "karpenter/numerical-value"
	spot := func(price float64) ktypeOpt {
		return kOfferings(catalogOffering("test-zone-1-spot", karpv1.CapacityTypeSpot, price))
	}
	typ := func(name, cpu string, price float64, genv string, opts ...ktypeOpt) *catalog.InstanceType {
		opts = append([]ktypeOpt{kArm, spot(price)}, opts...)
		if genv != "" {
			opts = append(opts, kLabel(gen, genv))
		}
		return ktype(name, cpu, cpu+"Gi", opts...)
	}
	mv := func(key string, op karpv1.NodeSelectorOperator, minV int, vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals, MinValues: ptr(minV)}
	}
	it := karpv1.LabelInstanceType
	for _, tc := range []struct {
		name    string
		types   []*catalog.InstanceType
		reqs    []karpv1.NodeSelectorRequirementWithMinValues
		podReq  []corev1.NodeSelectorRequirement
		pending bool
	}{
		{name: "instance-type minValues", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, ""), typ("instance-type-2", "4", 1, "")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(it, karpv1.OpIn, 2, "instance-type-1", "instance-type-2")}},
		{name: "minValues with Gt", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, "2"), typ("instance-type-2", "1", 1, "3"), typ("instance-type-3", "4", 1.2, "4")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(gen, karpv1.OpGt, 2, "2")}},
		{name: "minValues with Gt unmet", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, "2"), typ("instance-type-2", "4", 1, "3")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(gen, karpv1.OpExists, 2)}, podReq: []corev1.NodeSelectorRequirement{req(gen, corev1.NodeSelectorOpGt, "2")},
			pending: true},
		{name: "minValues with Lt", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, "2"), typ("instance-type-2", "2", 1, "3"), typ("instance-type-3", "4", 1.2, "4")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(gen, karpv1.OpLt, 2, "4")}},
		{name: "minValues with Lt unmet", types: []*catalog.InstanceType{typ("instance-type-1", "2", 0.52, "2"), typ("instance-type-2", "4", 1.2, "4")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(gen, karpv1.OpLt, 2, "4")}, pending: true},
		{name: "the larger minValues of In and NotIn", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, ""), typ("instance-type-2", "2", 1, ""), typ("instance-type-3", "4", 1.2, "")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(it, karpv1.OpIn, 1, "instance-type-1", "instance-type-2", "instance-type-3"), mv(it, karpv1.OpNotIn, 2, "instance-type-3")}},
		{name: "the larger minValues of Gt and Lt", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, "2"), typ("instance-type-2", "1", 1, "3"),
			typ("instance-type-3", "4", 1.2, "4"), typ("instance-type-4", "4", 1.2, "5")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(gen, karpv1.OpGt, 1, "2"), mv(gen, karpv1.OpLt, 2, "5")}},
		{name: "more types than the catalogue has", types: kNumberedTypes(10), reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(it, karpv1.OpExists, 11)}, pending: true},
		{name: "the larger minValues of Exists and In", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, ""), typ("instance-type-2", "4", 1, "")},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(it, karpv1.OpExists, 1), mv(it, karpv1.OpIn, 2, "instance-type-1", "instance-type-2")}},
		{name: "minValues on two keys", types: []*catalog.InstanceType{typ("instance-type-1", "1", 0.52, ""), typ("instance-type-2", "4", 1, "", kLabel(kArch, "amd64"))},
			reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(kArch, karpv1.OpExists, 2), mv(it, karpv1.OpIn, 1, "instance-type-1", "instance-type-2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKSuite(t, tc.types...)
			c.pool().Spec.Template.Spec.Requirements = tc.reqs
			var opts []func(*corev1.Pod)
			if len(tc.podReq) > 0 {
				opts = append(opts, withNodeReqs(tc.podReq...))
			}
			ps := c.pods(2, append(opts, withReq("0.9", "0.9Gi"))...)
			c.provision(ps...)
			if tc.pending {
				c.notScheduled(ps...)
				return
			}
			// together they fit only the type minValues must not be
			// narrowed to: a node each, two candidate types at least
			c.otherNode(ps[0], ps[1])
			if n := len(c.last.NodeClaims[0].InstanceTypes); n < 2 {
				t.Fatalf("%d candidate types, want at least 2\n%s", n, dump(c.last))
			}
		})
	}
}

// Karpenter's fake cloud provider registers its type labels as well-known
// (so DaemonSets may select them); Joiner's real catalogue labels all are.
func init() {
	for _, k := range []string{kSize, kSpecial, kInteger} {
		karpv1.WellKnownLabels[k] = true
	}
}
