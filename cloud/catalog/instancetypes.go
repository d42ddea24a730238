package catalog

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Options say for which region, zones and NodeClass instance types are
// built.
type Options struct {
	// Region becomes topology.kubernetes.io/region; default PriceRegion.
	Region string
	// Prices are the on-demand prices of the offerings (and the base of
	// the modelled spot prices); nil means PricesFor(Region): the region's
	// embedded prices, else us-east-1's.
	Prices *PriceTable
	// Zones get one offering per capacity type; default DefaultZones(Region).
	Zones []string
	// NodeClass shapes capacity and overhead (AMI family, kubelet block,
	// block device mappings, instance store policy); nil means an AL2023
	// NodeClass with no kubelet block and default volumes.
	NodeClass *awsv1.EC2NodeClass
	// SpotPrice models spot prices; the zero value is DefaultSpotModel.
	SpotPrice SpotModel
	// IncludeUnpriced keeps types without an on-demand price; their
	// offerings then have price 0 and Available false.
	IncludeUnpriced bool
}

// DefaultZones are the zones Joiner assumes in a region when none are
// configured: <region>a, b and c.
func DefaultZones(region string) []string {
	if region == "" {
		region = PriceRegion
	}
	return []string{region + "a", region + "b", region + "c"}
}

const (
	mib = 1024 * 1024
	// vmMemoryOverheadPercent is Karpenter's default
	// --vm-memory-overhead-percent.
	vmMemoryOverheadPercent = 0.075
	// arm64ReservedMiB is what Graviton kernels reserve (CMA) out of the
	// reported memory.
	arm64ReservedMiB = 64
	// defaultPods applies to families without ENI-limited pod density
	// (Windows) when kubelet.maxPods is unset.
	defaultPods = 110
)

var (
	evictionMemoryDefault = resource.MustParse("100Mi")
	kubeReservedStorage   = resource.MustParse("1Gi")
)

// Eviction signals that reduce allocatable.
const (
	signalMemoryAvailable = "memory.available"
	signalNodeFSAvailable = "nodefs.available"
)

// InstanceTypes returns the instance types of the catalogue for opts, sorted
// by name: every priced type (every type with IncludeUnpriced), except arm64
// types for Windows NodeClasses, which have no arm64 images.
//
// Results are cached per distinct opts (the NodeClass counts only through
// the fields that matter here), so calling it per NodeClass and per
// scheduling round is cheap. The returned slice is the caller's; the
// InstanceTypes it points to are shared and must not be modified.
func InstanceTypes(opts Options) []*InstanceType {
	key := cacheKey(opts)
	typesCache.Lock()
	its, ok := typesCache.m[key]
	typesCache.Unlock()
	if !ok {
		its = buildInstanceTypes(opts)
		typesCache.Lock()
		if len(typesCache.m) >= maxCacheEntries {
			clear(typesCache.m)
		}
		typesCache.m[key] = its
		typesCache.Unlock()
	}
	return slices.Clone(its)
}

const maxCacheEntries = 64

var typesCache = struct {
	sync.Mutex
	m map[string][]*InstanceType
}{m: map[string][]*InstanceType{}}

// kubeletKey is the part of the kubelet block that shapes capacity and
// overhead.
type kubeletKey struct {
	MaxPods, PodsPerCore                       *int32
	KubeReserved, SystemReserved, EvictionHard map[string]string
}

// cacheKey encodes every input InstanceTypes depends on, and nothing else.
func cacheKey(opts Options) string {
	type bdm struct {
		Device string `json:",omitempty"`
		Size   string `json:",omitempty"`
		Root   bool   `json:",omitempty"`
	}
	k := struct {
		Region, Family string
		Prices         string
		Zones          []string
		Spot           SpotModel
		Unpriced       bool
		Kubelet        *kubeletKey `json:",omitempty"`
		BDMs           []bdm       `json:",omitempty"`
		Store          string      `json:",omitempty"`
		EFAOnly        int         `json:",omitempty"`
	}{Region: opts.Region, Family: familyOf(opts.NodeClass).name, Prices: pricesOf(opts).key, Zones: opts.Zones,
		Spot: opts.SpotPrice, Unpriced: opts.IncludeUnpriced}
	if nc := opts.NodeClass; nc != nil {
		if kc := nc.Spec.Kubelet; kc != nil {
			k.Kubelet = &kubeletKey{kc.MaxPods, kc.PodsPerCore, kc.KubeReserved, kc.SystemReserved, kc.EvictionHard}
		}
		for _, m := range nc.Spec.BlockDeviceMappings {
			// A nil mapping stays in as an empty one: position matters
			// (Custom sizes ephemeral-storage from the last mapping).
			var b bdm
			if m == nil {
				k.BDMs = append(k.BDMs, b)
				continue
			}
			b.Root = m.RootVolume
			if m.DeviceName != nil {
				b.Device = *m.DeviceName
			}
			if m.EBS != nil && m.EBS.VolumeSize != nil {
				b.Size = m.EBS.VolumeSize.String()
			}
			k.BDMs = append(k.BDMs, b)
		}
		if nc.Spec.InstanceStorePolicy != nil {
			k.Store = string(*nc.Spec.InstanceStorePolicy)
		}
		k.EFAOnly = efaOnlyInterfaces(nc)
	}
	b, err := json.Marshal(k)
	if err != nil {
		panic(fmt.Sprintf("catalog: encoding cache key: %v", err))
	}
	return string(b)
}

func buildInstanceTypes(opts Options) []*InstanceType {
	region := opts.Region
	if region == "" {
		region = PriceRegion
	}
	zones := slices.Clone(opts.Zones)
	if len(zones) == 0 {
		zones = DefaultZones(region)
	}
	slices.Sort(zones)
	zones = slices.Compact(zones)
	fam := familyOf(opts.NodeClass)
	var kubelet *awsv1.KubeletConfiguration
	if opts.NodeClass != nil {
		kubelet = opts.NodeClass.Spec.Kubelet
	}

	efaOnly := efaOnlyInterfaces(opts.NodeClass)
	prices := pricesOf(opts)
	entries := Entries()
	out := make([]*InstanceType, 0, len(entries))
	for _, e := range entries {
		e.OnDemandPrice, e.HasPrice = prices.Price(e.Name) // the region's, for offerings and the spot model
		if (!e.HasPrice && !opts.IncludeUnpriced) || (fam.amd64Only && e.Arch != "amd64") {
			continue
		}
		e.MaxPods = eniLimitedPods(e, efaOnly)
		it := &InstanceType{
			Name:      e.Name,
			Labels:    labels(e, fam, region),
			Capacity:  capacity(e, fam, opts.NodeClass),
			Offerings: offerings(e, zones, opts.SpotPrice),
		}
		it.Overhead = overhead(e, fam, kubelet, it.Capacity)
		out = append(out, it)
	}
	return out
}

// efaOnlyInterfaces counts the class's efa-only network interfaces on the
// default network card.
func efaOnlyInterfaces(nc *awsv1.EC2NodeClass) int {
	n := 0
	if nc != nil {
		for _, ni := range nc.Spec.NetworkInterfaces {
			if ni != nil && ni.NetworkCardIndex == 0 && ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
				n++
			}
		}
	}
	return n
}

// eniLimitedPods is the VPC CNI's pod limit of a type (Karpenter's
// ENILimitedPods): the default card's interfaces less the class's efa-only
// ones there (they take an interface but carry no IP), times the IPv4
// addresses per interface less one, plus two; none when no interface is
// left.
func eniLimitedPods(e Entry, efaOnly int) int {
	if efaOnly == 0 || e.ENIs == 0 {
		return e.MaxPods
	}
	usable := e.ENIs - efaOnly
	if usable <= 0 {
		return 0
	}
	return usable*(e.IPv4PerENI-1) + 2
}

// pricesOf is the price table InstanceTypes uses for opts.
func pricesOf(opts Options) *PriceTable {
	if opts.Prices != nil {
		return opts.Prices
	}
	t, _ := PricesFor(opts.Region)
	return t
}

func labels(e Entry, fam family, region string) map[string]string {
	l := map[string]string{
		karpv1.LabelInstanceType:       e.Name,
		karpv1.LabelArch:               e.Arch,
		karpv1.LabelOS:                 fam.os,
		karpv1.LabelRegion:             region,
		karpv1.LabelInstanceCategory:   e.Category,
		karpv1.LabelInstanceFamily:     e.Family,
		karpv1.LabelInstanceGeneration: strconv.Itoa(e.Generation),
		karpv1.LabelInstanceSize:       e.Size,
		karpv1.LabelInstanceCPU:        strconv.Itoa(e.VCPU),
		karpv1.LabelInstanceMemory:     strconv.FormatInt(e.MemoryMiB, 10),
		// Every type says whether it is a flex one (c7i-flex), as Karpenter's.
		karpv1.LabelInstanceCapabilityFlex: strconv.FormatBool(strings.Contains(e.Family, "-flex")),
		// Joiner launches shared-tenancy instances only (Karpenter's types
		// allow default and dedicated; its nodes carry the one launched).
		karpv1.LabelInstanceTenancy: karpv1.TenancyDefault,
	}
	HardwareOf(e).SetLabels(l)
	if fam.windowsBuild != "" {
		l[karpv1.LabelWindowsBuild] = fam.windowsBuild
	}
	if e.Hypervisor != "" {
		l[karpv1.LabelInstanceHypervisor] = e.Hypervisor
	}
	if e.GPUName != "" {
		l[karpv1.LabelInstanceGPUName] = e.GPUName
		l[karpv1.LabelInstanceGPUManufacturer] = gpuManufacturer(e.GPUName)
		l[karpv1.LabelInstanceGPUCount] = strconv.Itoa(e.GPUCount)
		l[karpv1.LabelInstanceGPUMemory] = strconv.FormatInt(e.GPUMemoryMiB, 10)
	}
	if n, ok := neuronDevices[e.Name]; ok {
		l[karpv1.LabelInstanceAcceleratorName] = n.name
		l[labelInstanceAcceleratorManufacturer] = "aws"
		l[karpv1.LabelInstanceAcceleratorCount] = strconv.FormatInt(n.devices, 10)
	}
	if e.LocalNVMeGB > 0 {
		l[karpv1.LabelInstanceLocalNVME] = strconv.FormatInt(e.LocalNVMeGB, 10)
	}
	if e.NetworkGbps > 0 {
		l[karpv1.LabelInstanceNetworkBandwidth] = strconv.FormatInt(int64(math.Round(e.NetworkGbps*1000)), 10)
	}
	return l
}

// gpuManufacturer: the catalogue's only AMD GPU is the Radeon Pro V520
// (g4ad); every other GPU is NVIDIA's.
func gpuManufacturer(gpuName string) string {
	if strings.HasPrefix(gpuName, "radeon") {
		return "amd"
	}
	return "nvidia"
}

// MemoryCapacityMiB is the memory a node of this type reports, as Karpenter
// models it: raw memory, minus 64 MiB on arm64, minus ceil(7.5 %) VM
// overhead.
func MemoryCapacityMiB(e Entry) int64 {
	m := e.MemoryMiB
	if e.Arch == "arm64" {
		m -= arm64ReservedMiB
	}
	// Same float expression (bytes × 0.075 / 1024 / 1024) as Karpenter, so
	// rounding agrees at exact multiples.
	return m - int64(math.Ceil(float64(m*mib)*vmMemoryOverheadPercent/1024/1024))
}

// podsCapacity: kubelet.maxPods if set, else ENI-limited max pods (110 for
// families without ENI-limited density), capped at podsPerCore × vCPU when
// podsPerCore > 0 and the family honours it.
func podsCapacity(e Entry, fam family, k *awsv1.KubeletConfiguration) int64 {
	var n int64
	switch {
	case k != nil && k.MaxPods != nil:
		n = int64(*k.MaxPods)
	case fam.eniLimitedPods:
		n = int64(e.MaxPods)
	default:
		n = defaultPods
	}
	if k != nil && k.PodsPerCore != nil && *k.PodsPerCore > 0 && fam.podsPerCore {
		n = min(n, int64(*k.PodsPerCore)*int64(e.VCPU))
	}
	return n
}

func capacity(e Entry, fam family, nc *awsv1.EC2NodeClass) corev1.ResourceList {
	var k *awsv1.KubeletConfiguration
	if nc != nil {
		k = nc.Spec.Kubelet
	}
	c := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(e.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(MemoryCapacityMiB(e)*mib, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(podsCapacity(e, fam, k), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: ephemeralStorage(e, fam, nc),
	}
	if e.GPUCount > 0 {
		name := awsv1.ResourceNVIDIAGPU
		if gpuManufacturer(e.GPUName) == "amd" {
			name = awsv1.ResourceAMDGPU
		}
		c[name] = *resource.NewQuantity(int64(e.GPUCount), resource.DecimalSI)
	}
	if n, ok := neuronDevices[e.Name]; ok {
		c[awsv1.ResourceAWSNeuron] = *resource.NewQuantity(n.devices, resource.DecimalSI)
		c[resourceAWSNeuronCore] = *resource.NewQuantity(n.devices*n.coresPerDevice, resource.DecimalSI)
	}
	return c
}

// ephemeralStorage follows Karpenter: with instanceStorePolicy RAID0 and
// local NVMe, the NVMe total (decimal GB); else the size of the mapping
// marked rootVolume; else (Custom) the last mapping's size; else the
// mapping of the family's ephemeral device; else the family default.
func ephemeralStorage(e Entry, fam family, nc *awsv1.EC2NodeClass) resource.Quantity {
	if nc == nil {
		return fam.defaultEphemeral.DeepCopy()
	}
	if p := nc.Spec.InstanceStorePolicy; p != nil && *p == awsv1.InstanceStorePolicyRAID0 && e.LocalNVMeGB > 0 {
		return *resource.NewScaledQuantity(e.LocalNVMeGB, resource.Giga)
	}
	bdms := nc.Spec.BlockDeviceMappings
	size := func(m *awsv1.BlockDeviceMapping) *resource.Quantity {
		if m == nil || m.EBS == nil {
			return nil
		}
		return m.EBS.VolumeSize
	}
	if len(bdms) > 0 {
		for _, m := range bdms {
			if m != nil && m.RootVolume {
				if s := size(m); s != nil {
					return s.DeepCopy()
				}
			}
		}
		if fam.ephemeralDevice == "" { // Custom
			if s := size(bdms[len(bdms)-1]); s != nil {
				return s.DeepCopy()
			}
			return fam.defaultEphemeral.DeepCopy()
		}
		for _, m := range bdms {
			if m != nil && m.DeviceName != nil && *m.DeviceName == fam.ephemeralDevice {
				if s := size(m); s != nil {
					return s.DeepCopy()
				}
			}
		}
	}
	return fam.defaultEphemeral.DeepCopy()
}

// kubeReservedCPUMilli is the EKS kube-reserved CPU: 6 % of the first core,
// 1 % of the second, 0.5 % of cores 3-4 and 0.25 % of the rest, each range
// truncated to whole millicores.
func kubeReservedCPUMilli(vcpu int) int64 {
	cpu := int64(vcpu) * 1000
	var total int64
	for _, r := range []struct {
		start, end int64
		pct        float64
	}{{0, 1000, 0.06}, {1000, 2000, 0.01}, {2000, 4000, 0.005}, {4000, math.MaxInt64, 0.0025}} {
		if cpu <= r.start {
			break
		}
		total += int64(float64(min(cpu, r.end)-r.start) * r.pct)
	}
	return total
}

// reservedKeys are the resources a kubeReserved/systemReserved entry may
// set; "pid" is valid there but not a schedulable resource.
var reservedKeys = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

func overhead(e Entry, fam family, k *awsv1.KubeletConfiguration, capacity corev1.ResourceList) Overhead {
	pods := capacity[corev1.ResourcePods]
	memPods := pods.Value()
	if fam.eniLimitedMemoryOverhead {
		memPods = int64(e.MaxPods)
	}
	kube := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(kubeReservedCPUMilli(e.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((11*memPods+255)*mib, resource.BinarySI),
		corev1.ResourceEphemeralStorage: kubeReservedStorage.DeepCopy(),
	}
	system := corev1.ResourceList{}
	var hard map[string]string
	if k != nil {
		applyReserved(kube, k.KubeReserved)
		applyReserved(system, k.SystemReserved)
		hard = k.EvictionHard
	}
	return Overhead{
		KubeReserved:      kube,
		SystemReserved:    system,
		EvictionThreshold: evictionThreshold(capacity, hard),
	}
}

// applyReserved overrides per resource; values that do not parse are
// skipped (NodeClass validation rejects them before they get here).
func applyReserved(dst corev1.ResourceList, src map[string]string) {
	for _, name := range reservedKeys {
		v, ok := src[string(name)]
		if !ok {
			continue
		}
		if q, err := resource.ParseQuantity(v); err == nil {
			dst[name] = q
		}
	}
}

// evictionThreshold: 100Mi of memory and 10 % of ephemeral-storage by
// default; memory.available / nodefs.available in evictionHard replace the
// default for their resource. Percentages are of capacity. evictionSoft
// does not count: it only warns before evicting (Karpenter v1.14).
func evictionThreshold(capacity corev1.ResourceList, hard map[string]string) corev1.ResourceList {
	storage := capacity[corev1.ResourceEphemeralStorage]
	out := corev1.ResourceList{
		corev1.ResourceMemory:           evictionMemoryDefault.DeepCopy(),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(math.Ceil(float64(storage.Value())/100*10)), resource.BinarySI),
	}
	for signal, name := range map[string]corev1.ResourceName{
		signalMemoryAvailable: corev1.ResourceMemory,
		signalNodeFSAvailable: corev1.ResourceEphemeralStorage,
	} {
		if v, ok := hard[signal]; ok {
			if q, ok := evictionSignal(capacity[name], v); ok {
				out[name] = q
			}
		}
	}
	return out
}

// evictionSignal is an eviction threshold in resource units: a percentage
// of capacity (rounded up to a whole unit; "100%" disables the threshold,
// as the kubelet reads it: 0) or an absolute quantity.
func evictionSignal(capacity resource.Quantity, v string) (resource.Quantity, bool) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return resource.Quantity{}, false
		}
		if f == 100 {
			f = 0
		}
		return *resource.NewQuantity(int64(math.Ceil(capacity.AsApproximateFloat64()/100*f)), resource.BinarySI), true
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}, false
	}
	return q, true
}

// offerings: one per zone and capacity type, sorted by zone then capacity
// type (on-demand before spot).
func offerings(e Entry, zones []string, spot SpotModel) []Offering {
	out := make([]Offering, 0, 2*len(zones))
	for _, z := range zones {
		out = append(out,
			Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: e.OnDemandPrice, Available: e.HasPrice},
			Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: spot.Price(e, z), Available: e.HasPrice},
		)
	}
	return out
}
