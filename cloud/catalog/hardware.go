package catalog

import (
	"math"
	"strconv"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Hardware is what EC2's DescribeInstanceTypes says of a type's processor,
// EBS and network encryption that the catalogue's columns do not hold. The
// embedded catalogue has no such columns, so HardwareOf derives the values
// from the type's name, architecture, generation and size: a model, not a
// measurement. The simulator answers DescribeInstanceTypes with it and
// InstanceTypes labels types with it, so plans and the simulator agree;
// against AWS the provider (cloud/aws) labels types with EC2's own answer.
type Hardware struct {
	// CPUManufacturer is ProcessorInfo.Manufacturer as EC2 spells it:
	// "Intel", "AMD", "AWS" or "Apple".
	CPUManufacturer string
	// SustainedClockGHz is ProcessorInfo.SustainedClockSpeedInGhz.
	SustainedClockGHz float64
	// EBSOptimizedSupport is EbsInfo.EbsOptimizedSupport: "default",
	// "supported" or "unsupported".
	EBSOptimizedSupport string
	// EBSMaxBandwidthMbps is EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps;
	// nil when EC2 sends no EbsOptimizedInfo (types that cannot be
	// EBS-optimized).
	EBSMaxBandwidthMbps *int32
	// EncryptionInTransit is NetworkInfo.EncryptionInTransitSupported.
	EncryptionInTransit bool
}

// EC2's spellings of processor manufacturers.
const (
	ManufacturerIntel = "Intel"
	ManufacturerAMD   = "AMD"
	ManufacturerAWS   = "AWS"
	ManufacturerApple = "Apple"
)

// HardwareOf derives a catalogue type's Hardware. The model:
//
//   - manufacturer: arm64 types are AWS Graviton (mac2 families: Apple);
//     an x86 family whose suffix after the generation digits contains an
//     'a' (m5a, c7a, hpc6a, g4ad, m8azn) is AMD, as are the accelerated
//     families amdFamilies lists (g5, g6, p5, inf2, ...); every other x86
//     family is Intel;
//   - sustained clock: familyClockGHz, else a figure per manufacturer and
//     generation (Graviton2 2.5, Graviton3 2.6, Graviton4 2.8 GHz, ...);
//   - EBS: Xen burstable types are not EBS-optimized, Xen types of
//     generation 3 and older optionally, every other type by default;
//     maximum bandwidth grows with vCPUs within a per-generation floor and
//     cap (ebsBandwidthMbps);
//   - encryption in transit: Nitro (and bare-metal) types of generation 7
//     and later, x86 ones of generation 6, and older network-optimized
//     families (an 'n' in the suffix: c5n, m5dn, c6gn, g4dn) plus
//     encryptionFamilies; never Xen types.
func HardwareOf(e Entry) Hardware {
	h := Hardware{CPUManufacturer: cpuManufacturer(e)}
	h.SustainedClockGHz = sustainedClockGHz(e, h.CPUManufacturer)
	switch {
	case e.Hypervisor == "xen" && e.Category == "t":
		h.EBSOptimizedSupport = "unsupported"
	case e.Hypervisor == "xen" && e.Generation <= 3:
		h.EBSOptimizedSupport = "supported"
	default:
		h.EBSOptimizedSupport = "default"
	}
	if h.EBSOptimizedSupport != "unsupported" {
		mbps := ebsBandwidthMbps(e)
		h.EBSMaxBandwidthMbps = &mbps
	}
	h.EncryptionInTransit = encryptionInTransit(e, h.CPUManufacturer)
	return h
}

// familySuffix is what follows a family's generation digits, up to any
// '-' (m5ad → "ad", c7i-flex → "i", u7in-16tb → "in", p6-b200 → "").
func familySuffix(e Entry) string {
	s := strings.TrimPrefix(e.Family, e.Category)
	s = strings.TrimPrefix(s, strconv.Itoa(e.Generation))
	s, _, _ = strings.Cut(s, "-")
	return s
}

// amdFamilies are x86 families with AMD processors whose names do not say
// so.
var amdFamilies = map[string]bool{
	"g5": true, "g6": true, "g6e": true, "g6f": true, "gr6": true, "gr6f": true,
	"p5": true, "p5e": true, "inf2": true,
}

func cpuManufacturer(e Entry) string {
	switch {
	case e.Arch == "arm64" && strings.HasPrefix(e.Family, "mac"):
		return ManufacturerApple
	case e.Arch == "arm64":
		return ManufacturerAWS
	case amdFamilies[e.Family] || strings.Contains(familySuffix(e), "a"):
		return ManufacturerAMD
	default:
		return ManufacturerIntel
	}
}

// familyClockGHz are sustained clock speeds of families that differ from
// their manufacturer and generation's.
var familyClockGHz = map[string]float64{
	"a1": 2.3, "c5": 3.4, "c5d": 3.4, "c5n": 3.4, "c5a": 3.3, "c5ad": 3.3,
	"t3": 3.1, "m5zn": 4.5, "x2iezn": 4.5, "z1d": 4.0, "r7iz": 3.9, "m8azn": 5.0, "g4ad": 3.0,
}

func sustainedClockGHz(e Entry, manufacturer string) float64 {
	if ghz, ok := familyClockGHz[e.Family]; ok {
		return ghz
	}
	g := e.Generation
	switch manufacturer {
	case ManufacturerAWS:
		switch {
		case g >= 8:
			return 2.8
		case g == 7:
			return 2.6
		default:
			return 2.5
		}
	case ManufacturerAMD:
		switch {
		case g >= 8:
			return 4.5
		case g == 7:
			return 3.7
		case g == 6:
			return 3.6
		default:
			return 2.5
		}
	case ManufacturerApple:
		return 3.2
	default:
		switch {
		case g >= 8:
			return 3.9
		case g == 7:
			return 3.2
		case g == 6:
			return 3.5
		case g == 5:
			return 3.1
		default:
			return 2.5
		}
	}
}

// ebsBandwidthMbps: Xen types 250 Mbps per vCPU (500 to 14000); Nitro
// types of generation 5 and older 200 per vCPU (4750 to 19000), of
// generations 6 and 7 312 per vCPU (10000 to 40000), later ones 400 per
// vCPU (10000 to 60000).
func ebsBandwidthMbps(e Entry) int32 {
	per, lo, hi := int32(400), int32(10000), int32(60000)
	switch {
	case e.Hypervisor == "xen":
		per, lo, hi = 250, 500, 14000
	case e.Generation <= 5:
		per, lo, hi = 200, 4750, 19000
	case e.Generation <= 7:
		per, lo, hi = 312, 10000, 40000
	}
	return min(max(per*int32(e.VCPU), lo), hi)
}

// encryptionFamilies are families older than generation 6 (or Graviton2)
// that encrypt traffic in transit although their names carry no 'n'.
var encryptionFamilies = map[string]bool{
	"c5a": true, "c5ad": true, "d3": true, "g4ad": true, "g5": true, "i4i": true,
	"inf1": true, "inf2": true, "p4d": true, "p4de": true, "p5": true, "p5e": true,
	"trn1": true, "trn2": true, "vt1": true, "dl2q": true,
}

func encryptionInTransit(e Entry, manufacturer string) bool {
	switch {
	case e.Hypervisor == "xen":
		return false
	case e.Generation >= 7:
		return true
	case e.Generation == 6 && manufacturer != ManufacturerAWS:
		return true
	default:
		return encryptionFamilies[e.Family] || strings.Contains(familySuffix(e), "n")
	}
}

// HardwareLabels are the labels Hardware.SetLabels sets.
var HardwareLabels = []string{
	karpv1.LabelInstanceCPUManufacturer, karpv1.LabelInstanceCPUSustainedClockSpeedMhz,
	karpv1.LabelInstanceEBSBandwidth, karpv1.LabelInstanceEncryptionInTransitSupported,
}

// SetLabels sets Karpenter's labels of h in l (its computeRequirements):
// the CPU manufacturer in lower case (spaces as dashes) when known, the
// sustained clock speed in MHz whenever the processor is known (0 when EC2
// gives no speed), the maximum EBS bandwidth only for types EBS-optimized
// by default, and whether traffic is encrypted in transit always. Labels
// it does not set are removed, so a type without, say, an EBS bandwidth
// matches a DoesNotExist requirement as Karpenter's does.
func (h Hardware) SetLabels(l map[string]string) {
	for _, k := range HardwareLabels {
		delete(l, k)
	}
	if h.CPUManufacturer != "" {
		l[karpv1.LabelInstanceCPUManufacturer] = strings.ToLower(strings.ReplaceAll(h.CPUManufacturer, " ", "-"))
	}
	if h.CPUManufacturer != "" || h.SustainedClockGHz > 0 {
		l[karpv1.LabelInstanceCPUSustainedClockSpeedMhz] = strconv.Itoa(int(math.Round(h.SustainedClockGHz * 1000)))
	}
	if h.EBSOptimizedSupport == "default" && h.EBSMaxBandwidthMbps != nil {
		l[karpv1.LabelInstanceEBSBandwidth] = strconv.Itoa(int(*h.EBSMaxBandwidthMbps))
	}
	l[karpv1.LabelInstanceEncryptionInTransitSupported] = strconv.FormatBool(h.EncryptionInTransit)
}
