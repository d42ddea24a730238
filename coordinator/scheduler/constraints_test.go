package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

func withHostPort(port int32, protocol corev1.Protocol, ip string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: protocol, HostIP: ip})
	}
}

// Host ports follow kube-scheduler's NodePorts: one pod per (protocol,
// port) on a node, unless both bind distinct addresses.
func TestHostPorts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pods  []*corev1.Pod
		nodes int
	}{
		{"same port: a node each", pods(3, "web", nil, "100m", withHostPort(80, "", "")), 3},
		{"other protocol shares", append(pods(1, "tcp", nil, "100m", withHostPort(53, corev1.ProtocolTCP, "")),
			pods(1, "udp", nil, "100m", withHostPort(53, corev1.ProtocolUDP, ""))...), 1},
		{"distinct addresses share", append(pods(1, "a", nil, "100m", withHostPort(80, "", "10.0.0.1")),
			pods(1, "b", nil, "100m", withHostPort(80, "", "10.0.0.2"))...), 1},
		{"wildcard address conflicts with any", append(pods(1, "a", nil, "100m", withHostPort(80, "", "10.0.0.1")),
			pods(1, "b", nil, "100m", withHostPort(80, "", ""))...), 2},
		{"other ports share", append(pods(1, "a", nil, "100m", withHostPort(80, "", "")),
			pods(1, "b", nil, "100m", withHostPort(81, "", ""))...), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := solveOK(t, input(tc.pods...))
			if len(p.NodeClaims) != tc.nodes || len(p.Unschedulable) != 0 {
				t.Fatalf("%d nodeclaims (%d unschedulable), want %d\n%s", len(p.NodeClaims), len(p.Unschedulable), tc.nodes, dump(p))
			}
		})
	}
	// An existing node's bound pod holds its port: a new pod with it goes
	// elsewhere, one without it fits beside.
	in := input(append(pods(1, "web", nil, "100m", withHostPort(80, "", "")), pods(1, "plain", nil, "100m", nil)...)...)
	bound := pod("bound", nil, "100m", "100Mi")
	withHostPort(80, "", "")(bound)
	in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{"topology.kubernetes.io/zone": "test-zone-1"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")},
		Pods:        []*corev1.Pod{bound}}}
	p := solveOK(t, in)
	if len(p.Nominations) != 1 || p.Nominations[0].Pod != "default/plain-0" || len(p.NodeClaims) != 1 {
		t.Fatalf("nominations %v, %d nodeclaims: want plain on n1 and web on a new node", p.Nominations, len(p.NodeClaims))
	}
}

// Topology spread node inclusion policies, as kube-scheduler and Karpenter
// count domains: nodeTaintsPolicy (default Ignore: a pool the pod does not
// tolerate still adds its zones) and nodeAffinityPolicy (default Honor:
// only zones of pools the pod's node affinity allows).
func TestSpreadNodeInclusionPolicies(t *testing.T) {
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	zonePool := func(name string, zones ...string) *karpv1.NodePool {
		np := nodePool(name)
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelZone, Operator: karpv1.OpIn, Values: zones}}
		return np
	}
	spread := func(aff, taints *corev1.NodeInclusionPolicy, mutate func(*corev1.Pod)) []*corev1.Pod {
		return spreadPodsWith(4, func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = aff
			p.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = taints
			if mutate != nil {
				mutate(p)
			}
		})
	}
	for _, tc := range []struct {
		name        string
		pods        []*corev1.Pod
		pools       []*karpv1.NodePool
		placed      int
		wantPerZone map[string]int
	}{
		{name: "taints ignored: the tainted pool's empty zone caps the others",
			pods:   spread(nil, nil, nil),
			pools:  []*karpv1.NodePool{zonePool("open", "test-zone-1", "test-zone-2"), tainted(zonePool("tainted", "test-zone-3"))},
			placed: 2, wantPerZone: map[string]int{"test-zone-1": 1, "test-zone-2": 1}},
		{name: "taints honoured: only tolerated pools' zones count",
			pods:   spread(nil, &honor, nil),
			pools:  []*karpv1.NodePool{zonePool("open", "test-zone-1", "test-zone-2"), tainted(zonePool("tainted", "test-zone-3"))},
			placed: 4, wantPerZone: map[string]int{"test-zone-1": 2, "test-zone-2": 2}},
		{name: "affinity honoured: zones the pod cannot reach do not count",
			pods:   spread(&honor, nil, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: "a"} }),
			pools:  []*karpv1.NodePool{zonePool("a", "test-zone-1"), zonePool("b", "test-zone-2", "test-zone-3")},
			placed: 4, wantPerZone: map[string]int{"test-zone-1": 4}},
		{name: "affinity ignored: every pool's zones count",
			pods:   spread(&ignore, nil, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: "a"} }),
			pools:  []*karpv1.NodePool{zonePool("a", "test-zone-1"), zonePool("b", "test-zone-2", "test-zone-3")},
			placed: 1, wantPerZone: map[string]int{"test-zone-1": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(tc.pods...)
			in.NodePools = tc.pools
			p := solveOK(t, in)
			if got := len(tc.pods) - len(p.Unschedulable); got != tc.placed {
				t.Fatalf("%d placed, want %d\n%s", got, tc.placed, dump(p))
			}
			if got := zones(p); !maps.Equal(got, tc.wantPerZone) {
				t.Fatalf("pods per zone %v, want %v", got, tc.wantPerZone)
			}
		})
	}
}

func tainted(np *karpv1.NodePool) *karpv1.NodePool {
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	return np
}

func spreadPodsWith(n int, mutate func(*corev1.Pod)) []*corev1.Pod {
	app := map[string]string{"app": "s"}
	sel := &metav1.LabelSelector{MatchLabels: app}
	return pods(n, "s", app, "100m", func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		mutate(p)
	})
}

func withPVC(claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: claim,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

// Volume topology: a pod's volumes' node requirements (the view derives
// them from PersistentVolumes and StorageClasses) join its own, so a pod
// whose claim is bound to a zonal volume lands in that zone; a pod whose
// claim cannot be scheduled yet says why.
func TestVolumeTopology(t *testing.T) {
	zoneB := []corev1.NodeSelectorRequirement{{Key: karpv1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-2"}}}
	wffc := []corev1.NodeSelectorRequirement{{Key: karpv1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-1", "test-zone-3"}}}
	for _, tc := range []struct {
		name    string
		vols    PodVolumes
		zones   []string
		unsched string
	}{
		{"bound to a zonal volume", PodVolumes{Requirements: zoneB}, []string{"test-zone-2"}, ""},
		{"WaitForFirstConsumer with allowed topologies", PodVolumes{Requirements: wffc}, []string{"test-zone-1", "test-zone-3"}, ""},
		{"no volume constraint", PodVolumes{}, []string{"test-zone-1", "test-zone-2", "test-zone-3"}, ""},
		{"claim not schedulable yet", PodVolumes{Err: `persistentvolumeclaim "data" not found`}, nil, "not found"},
		{"volume zone no pool offers", PodVolumes{Requirements: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelZone,
			Operator: corev1.NodeSelectorOpIn, Values: []string{"test-zone-9"}}}}, nil, "zone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(pods(1, "db", nil, "100m", withPVC("data"))...)
			in.Volumes = map[string]PodVolumes{"default/db-0": tc.vols}
			p := solveOK(t, in)
			if tc.unsched != "" {
				wantUnschedulable(t, p, 1, tc.unsched)
				return
			}
			if len(p.NodeClaims) != 1 || !slices.Contains(tc.zones, p.NodeClaims[0].Zone) {
				t.Fatalf("claims %+v, want one in %v", p.NodeClaims, tc.zones)
			}
			var zr []string
			for _, r := range p.NodeClaims[0].Requirements {
				if r.Key == karpv1.LabelZone {
					zr = r.Values
				}
			}
			for _, z := range zr {
				if !slices.Contains(tc.zones, z) {
					t.Fatalf("claim may launch in %s, outside %v", z, tc.zones)
				}
			}
		})
	}
}

// Attach limits: an existing node takes no more volumes of a driver than
// its CSINode allows; a new node no more EBS volumes than its type can
// attach (26 on Nitro).
func TestVolumeAttachLimits(t *testing.T) {
	vols := func(n int, perPod int64) map[string]PodVolumes {
		out := map[string]PodVolumes{}
		for i := range n {
			out[fmt.Sprintf("default/db-%d", i)] = PodVolumes{Attachments: map[string]int64{EBSDriver: perPod}}
		}
		return out
	}
	t.Run("existing node's CSINode limit", func(t *testing.T) {
		in := input(pods(3, "db", nil, "100m", withPVC("data"))...)
		in.Volumes = vols(3, 1)
		in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{karpv1.LabelZone: "test-zone-1", karpv1.LabelNodePool: "default"},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
				corev1.ResourcePods: resource.MustParse("50"), AttachResource(EBSDriver): resource.MustParse("2")}}}
		p := solveOK(t, in)
		if len(p.Nominations) != 2 || len(p.NodeClaims) != 1 {
			t.Fatalf("%d nominations, %d claims; want 2 on n1 (its limit) and 1 new\n%s", len(p.Nominations), len(p.NodeClaims), dump(p))
		}
	})
	t.Run("new node's type limit", func(t *testing.T) {
		in := input(pods(30, "db", nil, "10m", withPVC("data"))...)
		in.InstanceTypes["default"] = fakeTypes(50)[40:] // room for 30 pods on one node
		for _, it := range in.InstanceTypes["default"] {
			it.Labels[karpv1.LabelInstanceHypervisor] = "nitro"
		}
		in.Volumes = vols(30, 1)
		p := solveOK(t, in)
		if len(p.NodeClaims) != 2 {
			t.Fatalf("%d claims, want 2 (26 EBS volumes per Nitro node)\n%s", len(p.NodeClaims), dump(p))
		}
		// The attach count is the scheduler's, not a resource the node
		// registers: a NodeClaim requesting it would never be Initialized.
		for _, nc := range p.NodeClaims {
			for name := range nc.Requests {
				if strings.HasPrefix(string(name), "attachable-volumes-csi-") {
					t.Errorf("claim %s requests %s: %v", nc.Name, name, nc.Requests)
				}
			}
			for name := range nc.Allocatable {
				if strings.HasPrefix(string(name), "attachable-volumes-csi-") {
					t.Errorf("claim %s's allocatable lists %s", nc.Name, name)
				}
			}
		}
	})
	t.Run("a driver the node does not list is not limited", func(t *testing.T) {
		in := input(pods(3, "db", nil, "100m", withPVC("data"))...)
		in.Volumes = map[string]PodVolumes{}
		for i := range 3 {
			in.Volumes[fmt.Sprintf("default/db-%d", i)] = PodVolumes{Attachments: map[string]int64{"efs.csi.aws.com": 1}}
		}
		in.Nodes = []*Node{{Name: "n1", Labels: map[string]string{karpv1.LabelZone: "test-zone-1"},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
				corev1.ResourcePods: resource.MustParse("50")}}}
		p := solveOK(t, in)
		if len(p.Nominations) != 3 {
			t.Fatalf("%d nominations, want 3", len(p.Nominations))
		}
	})
}

// namespaceSelector in a pod (anti-)affinity term selects the pods of the
// namespaces whose labels match (with the term's namespaces).
func TestAffinityNamespaceSelector(t *testing.T) {
	web := pod("web", map[string]string{"app": "web"}, "100m", "100Mi")
	web.Namespace = "team-a"
	other := pod("web-b", map[string]string{"app": "web"}, "100m", "100Mi")
	other.Namespace = "team-b"
	anti := func(sel *metav1.LabelSelector) *corev1.Pod {
		p := pod("cache", map[string]string{"app": "cache"}, "100m", "100Mi")
		p.Namespace = "infra"
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: karpv1.LabelHostname,
			NamespaceSelector: sel}}}}
		return p
	}
	node := func(name string, p *corev1.Pod) *Node {
		return &Node{Name: name, Labels: map[string]string{karpv1.LabelZone: "test-zone-1"}, Pods: []*corev1.Pod{p},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
				corev1.ResourcePods: resource.MustParse("50")}}
	}
	ns := map[string]map[string]string{"team-a": {"tier": "front"}, "team-b": {"tier": "back"}, "infra": {}}
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		want string // the node the cache pod goes to ("" a new one)
	}{
		{"selector matches team-a only: n2 (team-b's web) is fine", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}, "n2"},
		{"empty selector: every namespace, both nodes excluded", &metav1.LabelSelector{}, ""},
		{"no selector: the pod's own namespace, n1 is fine", nil, "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(anti(tc.sel))
			in.Nodes = []*Node{node("n1", web), node("n2", other)}
			in.Namespaces = ns
			p := solveOK(t, in)
			got := ""
			if len(p.Nominations) == 1 {
				got = p.Nominations[0].Node
			}
			if tc.want == "" && (len(p.NodeClaims) != 1 || len(p.Nominations) != 0) || tc.want != "" && got != tc.want && tc.want != "n1" {
				t.Fatalf("nominations %v, %d claims; want %q", p.Nominations, len(p.NodeClaims), tc.want)
			}
		})
	}
}

// minValues: Strict refuses a pod no claim can keep minValues for;
// BestEffort places it with minValues relaxed and says so on the claim.
func TestMinValuesPolicy(t *testing.T) {
	in := func(policy MinValuesPolicy) *Input {
		i := input(pod("a", nil, "40", ""))
		i.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType,
			Operator: karpv1.OpExists, MinValues: ptr(20)}}
		i.MinValuesPolicy = policy
		return i
	}
	strict := Solve(in(MinValuesStrict))
	wantUnschedulable(t, strict, 1, "minValues")
	best := solveOK(t, in(MinValuesBestEffort))
	if len(best.NodeClaims) != 1 || !best.NodeClaims[0].MinValuesRelaxed || len(best.NodeClaims[0].InstanceTypes) != 10 {
		t.Fatalf("BestEffort: %+v, want one claim with minValues relaxed over the 10 types that fit", best.NodeClaims)
	}
	// A relaxed claim takes more pods rather than a new claim per pod
	// (Karpenter's CanAdd relaxes minValues on in-flight NodeClaims).
	more := in(MinValuesBestEffort)
	more.NodePools[0].Spec.Template.Spec.Requirements[0].MinValues = ptr(60) // more than the 50 types
	more.Pods = pods(3, "m", nil, "1", nil)
	if p := solveOK(t, more); len(p.NodeClaims) != 1 || !p.NodeClaims[0].MinValuesRelaxed {
		t.Fatalf("BestEffort, 3 pods: want one claim with minValues relaxed:\n%s", dump(p))
	}
	// When minValues can be kept, BestEffort keeps it.
	ok := in(MinValuesBestEffort)
	ok.Pods = []*corev1.Pod{pod("a", nil, "4", "")}
	if p := solveOK(t, ok); len(p.NodeClaims) != 1 || p.NodeClaims[0].MinValuesRelaxed {
		t.Fatalf("BestEffort with room: %+v, want minValues kept", p.NodeClaims)
	}
}

// TestMinValuesOnOfferingKeys: minValues on zone and capacity type count
// the values of the types' offerings (Karpenter's SatisfiesMinValues reads
// them from each type's requirements), not the types' labels, which carry
// neither; the fake types offer spot in zones 1-2 and on-demand in 1-3.
func TestMinValuesOnOfferingKeys(t *testing.T) {
	mv := func(key string, n int, vals ...string) karpv1.NodeSelectorRequirementWithMinValues {
		if len(vals) == 0 {
			return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: karpv1.OpExists, MinValues: ptr(n)}
		}
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: karpv1.OpIn, Values: vals, MinValues: ptr(n)}
	}
	for _, tc := range []struct {
		name  string
		reqs  []karpv1.NodeSelectorRequirementWithMinValues
		pod   func(*corev1.Pod)
		types func([]*catalog.InstanceType)
		want  bool // a claim
	}{
		{name: "capacity type", reqs: []karpv1.NodeSelectorRequirementWithMinValues{
			mv(karpv1.LabelCapacityType, 2, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand)}, want: true},
		{name: "zone", reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(karpv1.LabelZone, 3)}, want: true},
		{name: "zone and instance type", reqs: []karpv1.NodeSelectorRequirementWithMinValues{
			mv(karpv1.LabelZone, 2), mv(karpv1.LabelInstanceType, 5)}, want: true},
		{name: "more zones than offered", reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(karpv1.LabelZone, 4)}},
		// Karpenter counts the type's values, not the claim's: a pod pinned
		// to one zone still gets a claim.
		{name: "pod pinned to a zone", reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(karpv1.LabelZone, 2)},
			pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelZone: "test-zone-1"} }, want: true},
		// Unavailable offerings give no value.
		{name: "unavailable on-demand", reqs: []karpv1.NodeSelectorRequirementWithMinValues{mv(karpv1.LabelCapacityType, 2)},
			types: func(its []*catalog.InstanceType) {
				for _, it := range its {
					for i := range it.Offerings {
						it.Offerings[i].Available = it.Offerings[i].CapacityType == karpv1.CapacityTypeSpot
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(pod("a", nil, "1", ""))
			in.NodePools[0].Spec.Template.Spec.Requirements = tc.reqs
			if tc.pod != nil {
				tc.pod(in.Pods[0])
			}
			if tc.types != nil {
				tc.types(in.InstanceTypes["default"])
			}
			if !tc.want {
				wantUnschedulable(t, Solve(in), 1, "minValues")
				return
			}
			p := solveOK(t, in)
			if len(p.NodeClaims) != 1 || len(p.Unschedulable) != 0 || p.NodeClaims[0].MinValuesRelaxed {
				t.Fatalf("want one claim keeping minValues:\n%s", dump(p))
			}
		})
	}
}

// TestMinValuesOnOfferingKeysCandidates: when the cheapest MaxInstanceTypes
// types offer a single capacity type, a type offering the other is pulled
// into the claim's candidates so that they keep capacity-type minValues.
func TestMinValuesOnOfferingKeysCandidates(t *testing.T) {
	in := input(pod("a", nil, "1", ""))
	its := fakeTypes(MaxInstanceTypes + 20)
	for _, it := range its[:MaxInstanceTypes+10] {
		it.Offerings = slices.DeleteFunc(it.Offerings, func(o catalog.Offering) bool { return o.CapacityType == karpv1.CapacityTypeOnDemand })
	}
	in.InstanceTypes["default"] = its
	in.NodePools[0].Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelCapacityType,
		Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}, MinValues: ptr(2)}}
	p := solveOK(t, in)
	if len(p.NodeClaims) != 1 {
		t.Fatalf("want one claim:\n%s", dump(p))
	}
	got := p.NodeClaims[0].InstanceTypes
	if len(got) != MaxInstanceTypes || !slices.Contains(got, its[MaxInstanceTypes+10].Name) {
		t.Fatalf("candidates %v: want %d, with %s (the cheapest on-demand type)", got, MaxInstanceTypes, its[MaxInstanceTypes+10].Name)
	}
}

// TestClaimsGrowOnlyIntoEfficientTypes: a claim grows into a bigger type
// only when that type is about as cheap per unit of the resource the claim
// ran out of; otherwise the pod starts a new claim. On the embedded
// catalogue, Karpenter's perf-suite pool (c/m/r, amd64, on-demand, under 32
// vCPU) once packed 26 pods of 900m/3100Mi onto m5zn.6xlarge (1.98 $/h,
// twice the price per vCPU of m5a.4xlarge), and two one-GPU pods onto a
// two-GPU g5g.16xlarge (2.74 $/h) instead of two g4dn.xlarge (0.53 $/h).
func TestClaimsGrowOnlyIntoEfficientTypes(t *testing.T) {
	its := catalog.InstanceTypes(catalog.Options{})
	perf := nodePool("perf")
	perf.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		{Key: karpv1.LabelArch, Operator: karpv1.OpIn, Values: []string{"amd64"}},
		{Key: karpv1.LabelInstanceCategory, Operator: karpv1.OpIn, Values: []string{"c", "m", "r"}},
		{Key: karpv1.LabelInstanceCPU, Operator: karpv1.OpLt, Values: []string{"32"}},
	}
	gpu := nodePool("gpu")
	gpu.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelInstanceGPUManufacturer, Operator: karpv1.OpIn, Values: []string{"nvidia"}},
		{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
	}
	small := func(n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			out = append(out, pod(fmt.Sprintf("small-%03d", i), nil, "900m", "3100Mi"))
		}
		return out
	}
	gpuPods := func(n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			p := pod(fmt.Sprintf("train-%d", i), nil, "2", "8Gi")
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		pool      *karpv1.NodePool
		pods      []*corev1.Pod
		notTypes  []string
		wantClaim int
	}{
		{name: "cpu-bound pods stay on efficient types", pool: perf, pods: small(26), notTypes: []string{"m5zn.6xlarge", "m8azn.6xlarge"}},
		{name: "one GPU each: two one-GPU nodes", pool: gpu, pods: gpuPods(2), notTypes: []string{"g5g.16xlarge"}, wantClaim: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: tc.pods, NodePools: []*karpv1.NodePool{tc.pool},
				InstanceTypes: map[string][]*catalog.InstanceType{"default": its}}
			plan := Solve(in)
			if len(plan.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %+v", plan.Unschedulable)
			}
			for _, c := range plan.NodeClaims {
				if slices.Contains(tc.notTypes, c.InstanceType) {
					t.Errorf("claim %s on %s (%.3f $/h) with %d pods", c.Name, c.InstanceType, c.Price, len(c.Pods))
				}
			}
			if tc.wantClaim > 0 && len(plan.NodeClaims) != tc.wantClaim {
				t.Errorf("%d claims, want %d", len(plan.NodeClaims), tc.wantClaim)
			}
			if err := verifyPlan(in, plan); err != nil {
				t.Error(err)
			}
			t.Logf("%d claims, %.3f $/h", len(plan.NodeClaims), plan.TotalPrice)
		})
	}
}
