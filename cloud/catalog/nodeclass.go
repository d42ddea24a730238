package catalog

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// family holds what an AMI family changes in the capacity model, the way
// Karpenter's AWS provider does it.
type family struct {
	name string
	// os is the kubernetes.io/os label value.
	os string
	// eniLimitedPods: without kubelet.maxPods, pods = ENI-limited max pods
	// (else 110).
	eniLimitedPods bool
	// eniLimitedMemoryOverhead: kube-reserved memory is computed from the
	// ENI-limited max pods even when kubelet.maxPods/podsPerCore change the
	// pods capacity (AL2, AL2023, Ubuntu, Custom); else from the pods
	// capacity (Bottlerocket, Windows).
	eniLimitedMemoryOverhead bool
	podsPerCore              bool // kubelet.podsPerCore is honoured
	// ephemeralDevice is the device whose size becomes ephemeral-storage;
	// empty for Custom.
	ephemeralDevice string
	// defaultEphemeral is the default size of that device.
	defaultEphemeral resource.Quantity
	// windowsBuild is the node.kubernetes.io/windows-build label value.
	windowsBuild string
	// amd64Only: the family publishes no arm64 images (Windows), so arm64
	// types are left out.
	amd64Only bool
}

var (
	gi20 = resource.MustParse("20Gi")
	gi50 = resource.MustParse("50Gi")
)

// Linux families share one shape; Bottlerocket and Windows differ.
func linuxFamily(name, ephemeralDevice string) family {
	return family{name: name, os: "linux", eniLimitedPods: true, eniLimitedMemoryOverhead: true,
		podsPerCore: true, ephemeralDevice: ephemeralDevice, defaultEphemeral: gi20}
}

func windowsFamily(name, build string) family {
	return family{name: name, os: "windows", podsPerCore: true,
		ephemeralDevice: "/dev/sda1", defaultEphemeral: gi50, windowsBuild: build, amd64Only: true}
}

var families = map[string]family{
	awsv1.AMIFamilyAL2:    linuxFamily(awsv1.AMIFamilyAL2, "/dev/xvda"),
	awsv1.AMIFamilyAL2023: linuxFamily(awsv1.AMIFamilyAL2023, "/dev/xvda"),
	awsv1.AMIFamilyUbuntu: linuxFamily(awsv1.AMIFamilyUbuntu, "/dev/sda1"),
	awsv1.AMIFamilyCustom: linuxFamily(awsv1.AMIFamilyCustom, ""),
	awsv1.AMIFamilyBottlerocket: {name: awsv1.AMIFamilyBottlerocket, os: "linux", eniLimitedPods: true,
		ephemeralDevice: "/dev/xvdb", defaultEphemeral: gi20},
	awsv1.AMIFamilyWindows2019: windowsFamily(awsv1.AMIFamilyWindows2019, "10.0.17763"),
	awsv1.AMIFamilyWindows2022: windowsFamily(awsv1.AMIFamilyWindows2022, "10.0.20348"),
	awsv1.AMIFamilyWindows2025: windowsFamily(awsv1.AMIFamilyWindows2025, "10.0.26100"),
}

// aliasFamilies maps the family part of an amiSelectorTerms alias.
var aliasFamilies = map[string]string{
	"al2":          awsv1.AMIFamilyAL2,
	"al2023":       awsv1.AMIFamilyAL2023,
	"bottlerocket": awsv1.AMIFamilyBottlerocket,
	"windows2019":  awsv1.AMIFamilyWindows2019,
	"windows2022":  awsv1.AMIFamilyWindows2022,
	"windows2025":  awsv1.AMIFamilyWindows2025,
}

// DefaultAMIFamily is assumed when no NodeClass is given or it names no
// family (neither amiFamily nor an alias).
const DefaultAMIFamily = awsv1.AMIFamilyAL2023

// AMIFamily is the AMI family of a NodeClass: spec.amiFamily, else the
// family of its alias term, else DefaultAMIFamily. Unknown names fall back
// to DefaultAMIFamily too (validation rejects them earlier).
func AMIFamily(nc *awsv1.EC2NodeClass) string {
	return familyOf(nc).name
}

// WindowsBuild is the node.kubernetes.io/windows-build of an AMI family's
// nodes ("10.0.20348" for Windows2022); "" for Linux families.
func WindowsBuild(amiFamily string) string {
	return families[amiFamily].windowsBuild
}

func familyOf(nc *awsv1.EC2NodeClass) family {
	if nc == nil {
		return families[DefaultAMIFamily]
	}
	if f := nc.Spec.AMIFamily; f != nil && *f != "" {
		if fam, ok := families[*f]; ok {
			return fam
		}
		return families[DefaultAMIFamily]
	}
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias == "" {
			continue
		}
		name, _, _ := strings.Cut(t.Alias, "@")
		if f, ok := aliasFamilies[strings.ToLower(name)]; ok {
			return families[f]
		}
	}
	return families[DefaultAMIFamily]
}
