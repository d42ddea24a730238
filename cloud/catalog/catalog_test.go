package catalog

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// usEast1 is the embedded us-east-1 price table.
func usEast1(t testing.TB) *PriceTable {
	t.Helper()
	p, ok := EmbeddedPrices(PriceRegion)
	if !ok {
		t.Fatal("no embedded us-east-1 prices")
	}
	return p
}

func TestEmbeddedDataParses(t *testing.T) {
	c, err := parseCatalogue(instanceTypesCSV, usEast1(t))
	if err != nil {
		t.Fatalf("parsing embedded data: %v", err)
	}
	if got := len(c.entries); got != 1363 {
		t.Errorf("catalogue rows = %d, want 1363 (data README)", got)
	}
	if got := usEast1(t).Len(); got != 1367 {
		t.Errorf("price rows = %d, want 1367 (data README)", got)
	}
	priced := 0
	for i, e := range c.entries {
		if i > 0 && c.entries[i-1].Name >= e.Name {
			t.Errorf("entries not sorted/unique at %q after %q", e.Name, c.entries[i-1].Name)
		}
		if want := e.ENIs*(e.IPv4PerENI-1) + 2; e.MaxPods != want {
			t.Errorf("%s: max_pods %d, want enis*(ipv4_per_eni-1)+2 = %d", e.Name, e.MaxPods, want)
		}
		if !strings.HasPrefix(e.Name, e.Family+".") || e.Name != e.Family+"."+e.Size {
			t.Errorf("%s: family %q size %q do not make up the name", e.Name, e.Family, e.Size)
		}
		if e.HasPrice {
			priced++
			if e.OnDemandPrice <= 0 {
				t.Errorf("%s: price %v", e.Name, e.OnDemandPrice)
			}
		}
	}
	if priced != 1345 {
		t.Errorf("priced rows = %d, want 1345 (data README)", priced)
	}
}

func TestParseErrors(t *testing.T) {
	header := strings.Join(instanceTypeColumns, ",") + "\n"
	good := "m5.large,m5,m,5,large,amd64,2,8192,0,,,3,10,29,nitro,,0.75\n"
	prices := NewPriceTable("us-east-1", "USD", "test", t0Prices, map[string]float64{"m5.large": 0.096})
	for _, tc := range []struct {
		name, types, want string
	}{
		{"bad header", strings.Replace(header, "vcpu", "cpus", 1) + good, `header column 7: want "vcpu", got "cpus"`},
		{"bad vcpu", header + strings.Replace(good, ",2,8192", ",two,8192", 1), `row 2 (m5.large): vcpu "two" is not a non-negative integer`},
		{"bad arch", header + strings.Replace(good, "amd64", "x86_64", 1), `row 2 (m5.large): arch "x86_64"`},
		{"bad bandwidth", header + strings.Replace(good, "0.75", "fast", 1), `network_gbps "fast"`},
		{"short row", header + "m5.large,m5\n", "wrong number of fields"},
		{"duplicate", header + good + good, `"m5.large": duplicate row`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCatalogue([]byte(tc.types), prices)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	e, ok := Lookup("m5.large")
	if !ok {
		t.Fatal("m5.large not found")
	}
	want := Entry{Name: "m5.large", Family: "m5", Category: "m", Generation: 5, Size: "large", Arch: "amd64",
		VCPU: 2, MemoryMiB: 8192, ENIs: 3, IPv4PerENI: 10, MaxPods: 29, Hypervisor: "nitro",
		NetworkGbps: 0.75, OnDemandPrice: 0.096, HasPrice: true}
	if e != want {
		t.Errorf("Lookup(m5.large) = %+v, want %+v", e, want)
	}
	if _, ok := Lookup("p2.xlarge"); ok {
		t.Error("p2.xlarge has a price but no catalogue row; Lookup must not find it")
	}
	if e, ok := Lookup("trn2.48xlarge"); !ok || e.HasPrice {
		t.Errorf("trn2.48xlarge: found %v, HasPrice %v; want found without price", ok, e.HasPrice)
	}
}

func find(t *testing.T, its []*InstanceType, name string) *InstanceType {
	t.Helper()
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("instance type %s not in result", name)
	return nil
}

func mi(n int64) resource.Quantity { return *resource.NewQuantity(n*mib, resource.BinarySI) }

// checkResources compares quantities by value, resource by resource.
func checkResources(t *testing.T, what string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: %s missing", what, name)
			continue
		}
		if g.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s %s = %s, want %s", what, name, g.String(), w)
		}
	}
}

// Pinned figures, computed by hand from the formulas (DESIGN.md, data
// README), e.g. m5.large:
//
//	memory capacity = 8192 - ceil(8192*0.075)=615        = 7577Mi
//	kube-reserved   = cpu 60m+10m = 70m, memory 11*29+255 = 574Mi, storage 1Gi
//	eviction        = memory 100Mi, storage 10% of 20Gi = 2Gi
//	allocatable     = cpu 1930m, memory 7577-574-100 = 6903Mi, pods 29, storage 17Gi
//
// which matches Karpenter's generated instance-type reference.
func TestPinnedTypes(t *testing.T) {
	its := InstanceTypes(Options{})
	for _, tc := range []struct {
		name        string
		price       float64
		labels      map[string]string
		capacity    map[corev1.ResourceName]string
		allocatable map[corev1.ResourceName]string
	}{
		{
			name: "m5.large", price: 0.096,
			labels: map[string]string{
				"node.kubernetes.io/instance-type": "m5.large", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
				"topology.kubernetes.io/region": "us-east-1", "karpenter.k8s.aws/instance-category": "m",
				"karpenter.k8s.aws/instance-family": "m5", "karpenter.k8s.aws/instance-generation": "5",
				"karpenter.k8s.aws/instance-size": "large", "karpenter.k8s.aws/instance-cpu": "2",
				"karpenter.k8s.aws/instance-memory": "8192", "karpenter.k8s.aws/instance-hypervisor": "nitro",
				"karpenter.k8s.aws/instance-network-bandwidth": "750", "karpenter.k8s.aws/instance-capability-flex": "false",
			},
			capacity:    map[corev1.ResourceName]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi"},
			allocatable: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi"},
		},
		{
			// 1024 - ceil(76.8) = 947Mi; 947 - (11*4+255) - 100 = 548Mi.
			name: "t3.micro", price: 0.0104,
			labels:      map[string]string{"karpenter.k8s.aws/instance-memory": "1024", "karpenter.k8s.aws/instance-network-bandwidth": "64"},
			capacity:    map[corev1.ResourceName]string{"cpu": "2", "memory": "947Mi", "pods": "4"},
			allocatable: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "548Mi", "pods": "4"},
		},
		{
			// arm64: 4096 - 64 = 4032; 4032 - ceil(302.4) = 3729Mi; 3729 - 574 - 100 = 3055Mi.
			name: "c7g.large", price: 0.0725,
			labels:      map[string]string{"kubernetes.io/arch": "arm64", "karpenter.k8s.aws/instance-network-bandwidth": "937"},
			capacity:    map[corev1.ResourceName]string{"cpu": "2", "memory": "3729Mi", "pods": "29"},
			allocatable: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "3055Mi", "pods": "29"},
		},
		{
			// 16384 - ceil(1228.8) = 15155Mi; 15155 - (11*58+255=893) - 100 = 14162Mi;
			// cpu 4000 - (60+10+10) = 3920m.
			name: "g5.xlarge", price: 1.006,
			labels: map[string]string{
				"karpenter.k8s.aws/instance-gpu-name": "a10g", "karpenter.k8s.aws/instance-gpu-count": "1",
				"karpenter.k8s.aws/instance-gpu-memory": "22888", "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
				"karpenter.k8s.aws/instance-local-nvme": "250",
			},
			capacity:    map[corev1.ResourceName]string{"cpu": "4", "memory": "15155Mi", "pods": "58", "nvidia.com/gpu": "1"},
			allocatable: map[corev1.ResourceName]string{"cpu": "3920m", "memory": "14162Mi", "pods": "58", "nvidia.com/gpu": "1"},
		},
		{
			// 1179648 - ceil(88473.6) = 1091174Mi; - (11*737+255=8362) - 100 = 1082712Mi;
			// cpu 96000 - (60+10+10+230) = 95690m.
			name: "p4d.24xlarge", price: 21.957642,
			labels:      map[string]string{"karpenter.k8s.aws/instance-gpu-name": "a100", "karpenter.k8s.aws/instance-gpu-count": "8"},
			capacity:    map[corev1.ResourceName]string{"cpu": "96", "memory": "1091174Mi", "pods": "737", "nvidia.com/gpu": "8"},
			allocatable: map[corev1.ResourceName]string{"cpu": "95690m", "memory": "1082712Mi", "pods": "737", "nvidia.com/gpu": "8"},
		},
		{
			name: "g4ad.xlarge", price: 0.37853,
			labels:   map[string]string{"karpenter.k8s.aws/instance-gpu-manufacturer": "amd", "karpenter.k8s.aws/instance-gpu-name": "radeon-pro-v520"},
			capacity: map[corev1.ResourceName]string{"amd.com/gpu": "1"},
		},
		{
			// bare metal: no hypervisor label.
			name: "m5.metal", price: 4.608,
			capacity: map[corev1.ResourceName]string{"cpu": "96", "pods": "737"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := find(t, its, tc.name)
			for k, v := range tc.labels {
				if it.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, it.Labels[k], v)
				}
			}
			checkResources(t, "capacity", it.Capacity, tc.capacity)
			checkResources(t, "allocatable", it.Allocatable(), tc.allocatable)
			if len(it.Offerings) != 6 {
				t.Fatalf("offerings = %d, want 3 zones x 2 capacity types", len(it.Offerings))
			}
			for _, o := range it.Offerings {
				if !o.Available {
					t.Errorf("offering %+v not available", o)
				}
				switch o.CapacityType {
				case karpv1.CapacityTypeOnDemand:
					if o.Price != tc.price {
						t.Errorf("on-demand price in %s = %v, want %v", o.Zone, o.Price, tc.price)
					}
				case karpv1.CapacityTypeSpot:
					if o.Price <= 0 || o.Price >= tc.price {
						t.Errorf("spot price in %s = %v, want between 0 and on-demand %v", o.Zone, o.Price, tc.price)
					}
				default:
					t.Errorf("unexpected capacity type %q", o.CapacityType)
				}
			}
		})
	}
	if _, ok := find(t, its, "m5.metal").Labels[karpv1.LabelInstanceHypervisor]; ok {
		t.Error("m5.metal has a hypervisor label; bare metal has none")
	}
	if _, ok := find(t, its, "m5.large").Labels[karpv1.LabelInstanceGPUName]; ok {
		t.Error("m5.large has GPU labels")
	}
}

func TestM5LargeOverheadParts(t *testing.T) {
	it := find(t, InstanceTypes(Options{}), "m5.large")
	checkResources(t, "kube-reserved", it.Overhead.KubeReserved, map[corev1.ResourceName]string{"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"})
	checkResources(t, "eviction", it.Overhead.EvictionThreshold, map[corev1.ResourceName]string{"memory": "100Mi", "ephemeral-storage": "2Gi"})
	if len(it.Overhead.SystemReserved) != 0 {
		t.Errorf("system-reserved = %v, want empty by default", it.Overhead.SystemReserved)
	}
	if got := it.Offerings[0]; got != (Offering{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true}) {
		t.Errorf("first offering = %+v", got)
	}
	// Default spot model: m ratio 0.40, +2 % per zone letter.
	wantSpot := map[string]float64{"us-east-1a": 0.0384, "us-east-1b": 0.039168, "us-east-1c": 0.039936}
	for _, o := range it.Offerings {
		if o.CapacityType == "spot" && o.Price != wantSpot[o.Zone] {
			t.Errorf("spot price in %s = %v, want %v", o.Zone, o.Price, wantSpot[o.Zone])
		}
	}
}

func ptr[T any](v T) *T { return &v }

func nodeClass(family string, mutate func(*awsv1.EC2NodeClassSpec)) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	if family != "" {
		nc.Spec.AMIFamily = ptr(family)
	}
	if mutate != nil {
		mutate(&nc.Spec)
	}
	return nc
}

func kubelet(k awsv1.KubeletConfiguration) func(*awsv1.EC2NodeClassSpec) {
	return func(s *awsv1.EC2NodeClassSpec) { s.Kubelet = &k }
}

func bdm(device string, size string, root bool) *awsv1.BlockDeviceMapping {
	m := &awsv1.BlockDeviceMapping{RootVolume: root, EBS: &awsv1.BlockDevice{VolumeSize: ptr(resource.MustParse(size))}}
	if device != "" {
		m.DeviceName = ptr(device)
	}
	return m
}

func TestNodeClassOverrides(t *testing.T) {
	const m5 = "m5.large" // capacity memory 7577Mi, ENI pods 29
	runOverrideCases(t, []overrideCase{
		{
			name: "maxPods raises pods; AL2023 keeps ENI-limited memory overhead", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))})),
			allocatable: map[corev1.ResourceName]string{"pods": "110", "memory": "6903Mi"},
		},
		{
			// 7577 - (11*110+255 = 1465) - 100 = 6012Mi.
			name: "maxPods on Bottlerocket charges memory per pod", typ: m5,
			nc:          nodeClass("Bottlerocket", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))})),
			allocatable: map[corev1.ResourceName]string{"pods": "110", "memory": "6012Mi"},
		},
		{
			name: "podsPerCore caps pods at podsPerCore*vcpu", typ: m5,
			nc:          nodeClass("AL2", kubelet(awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(4))})),
			allocatable: map[corev1.ResourceName]string{"pods": "8", "memory": "6903Mi"},
		},
		{
			name: "podsPerCore above the ENI limit changes nothing", typ: m5,
			nc:          nodeClass("AL2", kubelet(awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(50))})),
			allocatable: map[corev1.ResourceName]string{"pods": "29"},
		},
		{
			name: "podsPerCore caps an explicit maxPods", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(110)), PodsPerCore: ptr(int32(10))})),
			allocatable: map[corev1.ResourceName]string{"pods": "20"},
		},
		{
			name: "Bottlerocket ignores podsPerCore", typ: m5,
			nc:          nodeClass("Bottlerocket", kubelet(awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(4))})),
			allocatable: map[corev1.ResourceName]string{"pods": "29"},
		},
		{
			name: "kubeReserved replaces cpu and memory, keeps storage default", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{KubeReserved: map[string]string{"cpu": "200m", "memory": "1Gi", "pid": "100"}})),
			allocatable: map[corev1.ResourceName]string{"cpu": "1800m", "memory": "6453Mi", "ephemeral-storage": "17Gi"},
		},
		{
			name: "systemReserved adds to kube-reserved", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "100m", "memory": "200Mi", "ephemeral-storage": "1Gi"}})),
			allocatable: map[corev1.ResourceName]string{"cpu": "1830m", "memory": "6703Mi", "ephemeral-storage": "16Gi"},
		},
		{
			// memory: ceil(7577Mi * 5%) = 397253018 bytes; 7577Mi - 574Mi - that = 6945924710.
			// storage: 15% of 20Gi = 3Gi; 20 - 1 - 3 = 16Gi.
			name: "evictionHard percentages are of capacity", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "15%"}})),
			allocatable: map[corev1.ResourceName]string{"memory": "6945924710", "ephemeral-storage": "16Gi"},
		},
		{
			name: "evictionHard absolute memory keeps the storage default", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "500Mi"}})),
			allocatable: map[corev1.ResourceName]string{"memory": "6503Mi", "ephemeral-storage": "17Gi"},
		},
		{
			name: "evictionSoft does not count beside evictionHard", typ: m5,
			nc: nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{
				EvictionHard: map[string]string{"memory.available": "500Mi"},
				EvictionSoft: map[string]string{"memory.available": "1Gi"},
			})),
			allocatable: map[corev1.ResourceName]string{"memory": "6503Mi"},
		},
		{
			name: "evictionSoft alone keeps the default", typ: m5,
			nc: nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{
				EvictionSoft: map[string]string{"memory.available": "500Mi", "nodefs.available": "50%"},
			})),
			allocatable: map[corev1.ResourceName]string{"memory": "6903Mi", "ephemeral-storage": "17Gi"},
		},
		{
			name: "evictionHard 100% disables the threshold", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "100%"}})),
			allocatable: map[corev1.ResourceName]string{"memory": "7003Mi"},
		},
		{
			name: "Bottlerocket ignores evictionSoft", typ: m5,
			nc: nodeClass("Bottlerocket", kubelet(awsv1.KubeletConfiguration{
				EvictionHard: map[string]string{"memory.available": "500Mi"},
				EvictionSoft: map[string]string{"memory.available": "1Gi"},
			})),
			allocatable: map[corev1.ResourceName]string{"memory": "6503Mi"},
		},
		{
			// 75 GB NVMe: 75e9 - 1Gi - 7.5e9 = 66426258176.
			name: "RAID0 instance store sizes ephemeral-storage", typ: "m5d.large",
			nc:          nodeClass("AL2023", func(s *awsv1.EC2NodeClassSpec) { s.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0) }),
			capacity:    map[corev1.ResourceName]string{"ephemeral-storage": "75G"},
			allocatable: map[corev1.ResourceName]string{"ephemeral-storage": "66426258176"},
		},
		{
			name: "RAID0 without instance store keeps the root volume", typ: m5,
			nc:       nodeClass("AL2023", func(s *awsv1.EC2NodeClassSpec) { s.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0) }),
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "20Gi"},
		},
		{
			name: "rootVolume mapping sizes ephemeral-storage", typ: m5,
			nc: nodeClass("AL2023", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/xvdb", "200Gi", false), bdm("/dev/xvda", "100Gi", true)}
			}),
			capacity:    map[corev1.ResourceName]string{"ephemeral-storage": "100Gi"},
			allocatable: map[corev1.ResourceName]string{"ephemeral-storage": "89Gi"},
		},
		{
			name: "mapping of the family's root device without rootVolume", typ: m5,
			nc: nodeClass("AL2", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "40Gi", false)}
			}),
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "40Gi"},
		},
		{
			name: "a mapping of another device leaves the default", typ: m5,
			nc: nodeClass("AL2023", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/xvdb", "500Gi", false)}
			}),
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "20Gi"},
		},
		{
			name: "Bottlerocket ephemeral device is the data volume", typ: m5,
			nc: nodeClass("Bottlerocket", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "4Gi", false), bdm("/dev/xvdb", "60Gi", false)}
			}),
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "60Gi"},
		},
		{
			name: "Custom takes the last mapping", typ: m5,
			nc: nodeClass("Custom", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/sda1", "30Gi", false), bdm("/dev/sdb", "70Gi", false)}
			}),
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "70Gi"},
		},
		{
			name: "Custom with a last mapping of no size uses 20Gi", typ: m5,
			nc: nodeClass("Custom", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/sda1", "30Gi", false), nil}
			}),
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "20Gi"},
		},
		{
			name: "Ubuntu root device is /dev/sda1", typ: m5,
			nc: nodeClass("Ubuntu", func(s *awsv1.EC2NodeClassSpec) {
				s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/sda1", "80Gi", false)}
			}),
			capacity: map[corev1.ResourceName]string{"ephemeral-storage": "80Gi"},
		},
		{
			// Windows: 110 pods, kube-reserved memory 11*110+255 = 1465Mi; 7577-1465-100 = 6012Mi;
			// 50Gi root: 50 - 1 - 5 = 44Gi.
			name: "Windows: 110 pods, 50Gi root, os windows", typ: m5,
			nc:          nodeClass("Windows2022", nil),
			labels:      map[string]string{"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"},
			capacity:    map[corev1.ResourceName]string{"pods": "110", "ephemeral-storage": "50Gi"},
			allocatable: map[corev1.ResourceName]string{"memory": "6012Mi", "ephemeral-storage": "44Gi"},
		},
		{
			// Karpenter's ENILimitedPods: (3 - 1) * (10 - 1) + 2 = 20 pods;
			// memory 7577 - (11*20+255) - 100 = 7002Mi.
			name: "an efa-only interface on card 0 takes an ENI from the pods", typ: m5,
			nc: nodeClass("AL2023", func(s *awsv1.EC2NodeClassSpec) {
				s.NetworkInterfaces = []*awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
					{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly}}
			}),
			capacity:    map[corev1.ResourceName]string{"pods": "20"},
			allocatable: map[corev1.ResourceName]string{"memory": "7002Mi"},
		},
		{
			name: "an efa-only interface on another card does not", typ: m5,
			nc: nodeClass("AL2023", func(s *awsv1.EC2NodeClassSpec) {
				s.NetworkInterfaces = []*awsv1.NetworkInterface{{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly}}
			}),
			capacity: map[corev1.ResourceName]string{"pods": "29"},
		},
		{
			name: "family from the alias term", typ: m5,
			nc: nodeClass("", func(s *awsv1.EC2NodeClassSpec) {
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
				s.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))}
			}),
			allocatable: map[corev1.ResourceName]string{"pods": "110", "memory": "6012Mi"},
		},
	})
}

// overrideCase is one row of a node class override table: type typ under
// node class nc must carry labels and the capacity and allocatable
// amounts named (the rest is not checked).
type overrideCase struct {
	name        string
	typ         string
	nc          *awsv1.EC2NodeClass
	labels      map[string]string
	capacity    map[corev1.ResourceName]string
	allocatable map[corev1.ResourceName]string
}

func runOverrideCases(t *testing.T, cases []overrideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := find(t, InstanceTypes(Options{NodeClass: tc.nc}), tc.typ)
			for k, v := range tc.labels {
				if it.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, it.Labels[k], v)
				}
			}
			checkResources(t, "capacity", it.Capacity, tc.capacity)
			checkResources(t, "allocatable", it.Allocatable(), tc.allocatable)
		})
	}
}

func TestAMIFamily(t *testing.T) {
	for _, tc := range []struct {
		nc   *awsv1.EC2NodeClass
		want string
	}{
		{nil, "AL2023"},
		{nodeClass("", nil), "AL2023"},
		{nodeClass("AL2", nil), "AL2"},
		{nodeClass("", func(s *awsv1.EC2NodeClassSpec) {
			s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "windows2025@latest"}}
		}), "Windows2025"},
		{nodeClass("Custom", func(s *awsv1.EC2NodeClassSpec) {
			s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2@v20240807"}}
		}), "Custom"},
	} {
		if got := AMIFamily(tc.nc); got != tc.want {
			t.Errorf("AMIFamily(%+v) = %q, want %q", tc.nc, got, tc.want)
		}
	}
}

func TestZonesAndRegion(t *testing.T) {
	if got := DefaultZones("eu-west-1"); strings.Join(got, ",") != "eu-west-1a,eu-west-1b,eu-west-1c" {
		t.Errorf("DefaultZones(eu-west-1) = %v", got)
	}
	its := InstanceTypes(Options{Region: "eu-west-1", Zones: []string{"eu-west-1b", "eu-west-1a", "eu-west-1b"}})
	it := find(t, its, "m5.large")
	if it.Labels[karpv1.LabelRegion] != "eu-west-1" {
		t.Errorf("region label = %q", it.Labels[karpv1.LabelRegion])
	}
	var got []string
	for _, o := range it.Offerings {
		got = append(got, o.Zone+"/"+o.CapacityType)
	}
	want := "eu-west-1a/on-demand,eu-west-1a/spot,eu-west-1b/on-demand,eu-west-1b/spot"
	if strings.Join(got, ",") != want {
		t.Errorf("offerings = %v, want %s (sorted, deduplicated zones)", got, want)
	}
}

func TestWindowsHasNoArm64(t *testing.T) {
	its := InstanceTypes(Options{NodeClass: nodeClass("Windows2019", nil)})
	for _, it := range its {
		if it.Labels[karpv1.LabelArch] != "amd64" {
			t.Fatalf("%s (%s) offered for Windows", it.Name, it.Labels[karpv1.LabelArch])
		}
	}
	if len(its) == 0 || len(its) >= 1345 {
		t.Errorf("Windows instance types = %d, want the amd64 subset of 1345", len(its))
	}
}

func TestUnpriced(t *testing.T) {
	if n := len(InstanceTypes(Options{})); n != 1345 {
		t.Errorf("priced instance types = %d, want 1345", n)
	}
	its := InstanceTypes(Options{IncludeUnpriced: true})
	if len(its) != 1363 {
		t.Errorf("with unpriced = %d, want 1363", len(its))
	}
	for _, o := range find(t, its, "trn2.48xlarge").Offerings {
		if o.Available || o.Price != 0 {
			t.Errorf("unpriced offering %+v must be unavailable with price 0", o)
		}
	}
}

func TestSpotModel(t *testing.T) {
	e, _ := Lookup("c5.large") // 0.085
	custom := SpotModel{Ratios: map[string]float64{"c": 0.5}, DefaultRatio: 0.9, ZoneStep: 0.1}
	for _, tc := range []struct {
		m    SpotModel
		zone string
		want float64
	}{
		{SpotModel{}, "us-east-1a", 0.0323},   // 0.085*0.38
		{SpotModel{}, "us-east-1c", 0.033592}, // *1.04
		{custom, "us-east-1a", 0.0425},
		{custom, "us-east-1b", 0.04675},
		{SpotModel{DefaultRatio: 0.9}, "us-east-1a", 0.0765},
	} {
		if got := tc.m.Price(e, tc.zone); got != tc.want {
			t.Errorf("%+v.Price(c5.large, %s) = %v, want %v", tc.m, tc.zone, got, tc.want)
		}
	}
	it := find(t, InstanceTypes(Options{SpotPrice: custom, Zones: []string{"us-east-1a"}}), "c5.large")
	if it.Offerings[1].Price != 0.0425 {
		t.Errorf("custom spot model not applied: %+v", it.Offerings)
	}
}

// Every priced row yields a usable instance type for the Linux families.
// (Windows reserves memory for 110 pods, which leaves nothing on the
// smallest burstable types: allocatable memory 0, as in Karpenter.)
func TestEveryPricedTypeIsValid(t *testing.T) {
	for _, nc := range []*awsv1.EC2NodeClass{nil, nodeClass("AL2", nil), nodeClass("Bottlerocket", nil)} {
		for _, it := range InstanceTypes(Options{NodeClass: nc}) {
			a := it.Allocatable()
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
				q, ok := a[r]
				if !ok || q.Sign() <= 0 {
					t.Errorf("%s (%s): allocatable %s = %v, want > 0", it.Name, AMIFamily(nc), r, q.String())
				}
			}
			if len(it.Offerings) != 6 {
				t.Errorf("%s: %d offerings", it.Name, len(it.Offerings))
			}
			for _, o := range it.Offerings {
				if !o.Available || o.Price <= 0 {
					t.Errorf("%s: offering %+v", it.Name, o)
				}
			}
			if it.Labels[karpv1.LabelInstanceType] != it.Name {
				t.Errorf("%s: instance-type label %q", it.Name, it.Labels[karpv1.LabelInstanceType])
			}
		}
	}
}

func resetCache() {
	typesCache.Lock()
	clear(typesCache.m)
	typesCache.Unlock()
}

func TestDeterministicAndCached(t *testing.T) {
	nc := nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{
		MaxPods:      ptr(int32(50)),
		EvictionHard: map[string]string{"memory.available": "5%", "nodefs.available": "10%"},
		KubeReserved: map[string]string{"cpu": "100m", "memory": "300Mi"},
	}))
	opts := Options{NodeClass: nc, Zones: []string{"us-east-1c", "us-east-1a"}}
	encode := func(its []*InstanceType) string {
		b, err := json.Marshal(its)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	resetCache()
	first := encode(InstanceTypes(opts))
	resetCache()
	second := encode(InstanceTypes(Options{NodeClass: nc.DeepCopy(), Zones: []string{"us-east-1a", "us-east-1c"}}))
	if first != second {
		t.Fatal("two builds from equal inputs differ")
	}
	a, b := InstanceTypes(opts), InstanceTypes(opts)
	if a[0] != b[0] {
		t.Error("equal options were not served from the cache")
	}
	a[0] = nil
	if b[0] == nil {
		t.Error("callers share the returned slice")
	}
	other := InstanceTypes(Options{NodeClass: nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(51))})), Zones: opts.Zones})
	if other[0] == b[0] {
		t.Error("a different kubelet block was served from the cache")
	}
	for i := 1; i < len(b); i++ {
		if b[i-1].Name >= b[i].Name {
			t.Fatalf("not sorted by name at %s, %s", b[i-1].Name, b[i].Name)
		}
	}
}

func TestKubeReservedCPU(t *testing.T) {
	for vcpu, want := range map[int]int64{1: 60, 2: 70, 3: 75, 4: 80, 8: 90, 96: 310, 448: 1190} {
		if got := kubeReservedCPUMilli(vcpu); got != want {
			t.Errorf("kubeReservedCPUMilli(%d) = %d, want %d", vcpu, got, want)
		}
	}
}

func BenchmarkInstanceTypes(b *testing.B) {
	nc := nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))}))
	b.Run("cached", func(b *testing.B) {
		opts := Options{NodeClass: nc}
		InstanceTypes(opts)
		b.ReportAllocs()
		for b.Loop() {
			InstanceTypes(opts)
		}
	})
	b.Run("build", func(b *testing.B) {
		opts := Options{NodeClass: nc}
		b.ReportAllocs()
		for b.Loop() {
			buildInstanceTypes(opts)
		}
	})
}

// Allocatable figures printed in Karpenter's generated instance-type
// reference (AL2023, no block device mappings), for rows that exercise the
// edge cases: 1 vCPU, arm64, memory that is an exact multiple of the 7.5 %
// (c3.2xlarge, i8g.large), odd memory sizes (c1.medium, m2.xlarge), low ENI
// limits, many cores, unpriced types.
func TestMatchesKarpenterReference(t *testing.T) {
	its := InstanceTypes(Options{IncludeUnpriced: true})
	for _, tc := range []struct{ name, cpu, memory, pods string }{
		{"a1.medium", "940m", "1392Mi", "8"},
		{"a1.large", "1930m", "3055Mi", "29"},
		{"c1.medium", "1930m", "1122Mi", "12"},
		{"c3.2xlarge", "7910m", "13215Mi", "58"},
		{"i8g.large", "1930m", "14422Mi", "29"},
		{"m2.xlarge", "1930m", "15203Mi", "58"},
		{"m4.large", "1930m", "7002Mi", "20"},
		{"t4g.small", "1930m", "1359Mi", "11"},
		{"x1e.xlarge", "3920m", "114884Mi", "29"},
		{"inf1.24xlarge", "95690m", "177976Mi", "321"},
		{"trn1.32xlarge", "127610m", "481894Mi", "247"},
		{"trn2.48xlarge", "191450m", "1938410Mi", "100"},
		{"u7in-16tb.224xlarge", "893690m", "15514235Mi", "394"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := find(t, its, tc.name)
			checkResources(t, "allocatable", it.Allocatable(), map[corev1.ResourceName]string{
				"cpu": tc.cpu, "memory": tc.memory, "pods": tc.pods, "ephemeral-storage": "17Gi",
			})
		})
	}
}

func TestNeuron(t *testing.T) {
	its := InstanceTypes(Options{IncludeUnpriced: true})
	for _, tc := range []struct{ name, accel, devices, cores string }{
		{"inf1.6xlarge", "inferentia", "4", "16"},
		{"inf2.48xlarge", "inferentia2", "12", "24"},
		{"trn1.2xlarge", "trainium", "1", "2"},
		{"trn2.48xlarge", "trainium2", "16", "128"},
	} {
		it := find(t, its, tc.name)
		if it.Labels[karpv1.LabelInstanceAcceleratorName] != tc.accel || it.Labels[karpv1.LabelInstanceAcceleratorCount] != tc.devices ||
			it.Labels[labelInstanceAcceleratorManufacturer] != "aws" {
			t.Errorf("%s: accelerator labels %v", tc.name, it.Labels)
		}
		checkResources(t, tc.name, it.Capacity, map[corev1.ResourceName]string{"aws.amazon.com/neuron": tc.devices, "aws.amazon.com/neuroncore": tc.cores})
		if _, ok := it.Labels[karpv1.LabelInstanceGPUName]; ok {
			t.Errorf("%s: Neuron devices are not GPUs", tc.name)
		}
	}
	// Every Inferentia/Trainium row is covered, and the table names no
	// type the catalogue lacks.
	for _, e := range Entries() {
		_, ok := neuronDevices[e.Name]
		if (e.Category == "inf" || e.Category == "trn") != ok {
			t.Errorf("%s (category %s): neuron table entry present = %v", e.Name, e.Category, ok)
		}
	}
	for name := range neuronDevices {
		if _, ok := Lookup(name); !ok {
			t.Errorf("neuron table names %s, which is not in the catalogue", name)
		}
	}
	if _, ok := find(t, its, "m5.large").Capacity[awsv1.ResourceAWSNeuron]; ok {
		t.Error("m5.large has a neuron resource")
	}
}

// InstanceTypes is called from several controllers at once; run with -race.
func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	results := make([][]*InstanceType, 8)
	for i := range results {
		wg.Go(func() {
			nc := nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(10 + i%2))}))
			results[i] = InstanceTypes(Options{NodeClass: nc})
		})
	}
	wg.Wait()
	for i, r := range results {
		want := strconv.Itoa(10 + i%2)
		if got := find(t, r, "m5.large").Capacity.Pods().String(); got != want {
			t.Errorf("goroutine %d: pods %s, want %s", i, got, want)
		}
	}
}

// BenchmarkParse is the one-time cost of parsing the embedded CSVs.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseCatalogue(instanceTypesCSV, usEast1(b)); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCacheKeyIgnoresIrrelevantFields(t *testing.T) {
	base := func() *awsv1.EC2NodeClass {
		return nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(20))}))
	}
	a := base()
	b := base()
	b.Name = "other"
	b.Spec.Kubelet.ClusterDNS = []string{"10.0.0.10"}
	b.Spec.Kubelet.EvictionSoftGracePeriod = map[string]karpv1.Duration{"memory.available": {}}
	b.Spec.Kubelet.EvictionSoft = map[string]string{"memory.available": "1Gi"} // only warns: no overhead
	b.Spec.Tags = map[string]string{"team": "a"}
	if cacheKey(Options{NodeClass: a}) != cacheKey(Options{NodeClass: b}) {
		t.Error("fields that do not shape instance types changed the cache key")
	}
	for name, mutate := range map[string]func(*awsv1.EC2NodeClass){
		"family":   func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = ptr("Bottlerocket") },
		"maxPods":  func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet.MaxPods = ptr(int32(21)) },
		"reserved": func(nc *awsv1.EC2NodeClass) { nc.Spec.Kubelet.SystemReserved = map[string]string{"cpu": "1"} },
		"eviction": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.Kubelet.EvictionHard = map[string]string{"memory.available": "1Gi"}
		},
		"volume": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{bdm("/dev/xvda", "30Gi", true)}
		},
		"store": func(nc *awsv1.EC2NodeClass) { nc.Spec.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0) },
		"efa-only": func(nc *awsv1.EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{InterfaceType: awsv1.InterfaceTypeEFAOnly, DeviceIndex: 1}}
		},
	} {
		c := base()
		mutate(c)
		if cacheKey(Options{NodeClass: a}) == cacheKey(Options{NodeClass: c}) {
			t.Errorf("%s: change did not change the cache key", name)
		}
	}
}
