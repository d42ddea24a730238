package catalog

import (
	"slices"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/api/requirements"
)

// TestHardwareLabelRequirements: NodePool requirements on the processor,
// EBS, encryption-in-transit and tenancy labels Karpenter gives every type
// match the catalogue's types as the model says (HardwareOf), and a type
// without an EBS bandwidth matches DoesNotExist as Karpenter's does.
func TestHardwareLabelRequirements(t *testing.T) {
	its := InstanceTypes(Options{IncludeUnpriced: true})
	for _, tc := range []struct {
		key, op string
		values  []string
		match   []string
		noMatch []string
	}{
		{karpv1.LabelInstanceCPUManufacturer, "In", []string{"intel"},
			[]string{"m5.large", "c7i.large", "c7i-flex.large", "p5en.48xlarge", "t2.micro"},
			[]string{"m6g.large", "m5a.large", "c7a.large", "g5.xlarge", "m8azn.large", "t4g.micro"}},
		{karpv1.LabelInstanceCPUManufacturer, "In", []string{"amd"},
			[]string{"m5a.large", "m5ad.large", "c7a.large", "g4ad.xlarge", "g5.xlarge", "inf2.xlarge", "hpc6a.48xlarge"},
			[]string{"m5.large", "m6g.large", "m6i.large"}},
		{karpv1.LabelInstanceCPUManufacturer, "In", []string{"aws"},
			[]string{"m6g.large", "a1.large", "c7gn.large", "t4g.micro"},
			[]string{"m5.large", "m5a.large"}},
		{karpv1.LabelInstanceCPUManufacturer, "NotIn", []string{"aws"},
			[]string{"m5.large", "m5a.large"}, []string{"m6g.large"}},
		{karpv1.LabelInstanceCPUSustainedClockSpeedMhz, "Gt", []string{"3400"},
			[]string{"m6i.large", "m7a.large", "z1d.large", "m5zn.large"},
			[]string{"m5.large", "m6g.large", "c5.large", "m5a.large"}},
		{karpv1.LabelInstanceCPUSustainedClockSpeedMhz, "In", []string{"3100"},
			[]string{"m5.large", "r5.large", "t3.micro"}, []string{"c5.large"}},
		{karpv1.LabelInstanceEBSBandwidth, "Gt", []string{"9999"},
			[]string{"m6i.large", "m5.24xlarge", "m7g.large"}, []string{"m5.large", "m4.large", "t2.micro"}},
		{karpv1.LabelInstanceEBSBandwidth, "DoesNotExist", nil,
			[]string{"t2.micro", "m3.medium"}, []string{"m5.large", "m4.large"}},
		{karpv1.LabelInstanceEncryptionInTransitSupported, "In", []string{"true"},
			[]string{"m6i.large", "c5n.large", "m5dn.large", "c6gn.large", "m7g.large", "c5a.large", "p5.48xlarge"},
			[]string{"m5.large", "m6g.large", "m4.large", "t3.micro"}},
		{karpv1.LabelInstanceEncryptionInTransitSupported, "In", []string{"false"},
			[]string{"m5.large", "m6g.large", "m4.large"}, []string{"m6i.large"}},
		{karpv1.LabelInstanceTenancy, "In", []string{"default"}, []string{"m5.large", "m6g.large"}, nil},
		{karpv1.LabelInstanceTenancy, "In", []string{"dedicated"}, nil, []string{"m5.large"}},
	} {
		r, err := requirements.New(tc.key, tc.op, tc.values...)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Concat(tc.match, tc.noMatch) {
			v, ok := find(t, its, name).Labels[tc.key]
			want := slices.Contains(tc.match, name)
			if got := r.Matches(v, ok); got != want {
				t.Errorf("%s %s %v on %s (label %q, present %v): matches %v, want %v", tc.key, tc.op, tc.values, name, v, ok, got, want)
			}
		}
	}
}

// TestHardwareLabelsEveryType: every type carries the labels Karpenter
// always sets, with the values Karpenter would compute from HardwareOf.
func TestHardwareLabelsEveryType(t *testing.T) {
	for _, it := range InstanceTypes(Options{IncludeUnpriced: true}) {
		for _, k := range []string{karpv1.LabelInstanceCPUManufacturer, karpv1.LabelInstanceCPUSustainedClockSpeedMhz,
			karpv1.LabelInstanceEncryptionInTransitSupported, karpv1.LabelInstanceTenancy} {
			if v := it.Labels[k]; v == "" || v == "0" {
				t.Errorf("%s: label %s = %q", it.Name, k, v)
			}
		}
		e, _ := Lookup(it.Name)
		h := HardwareOf(e)
		_, hasEBS := it.Labels[karpv1.LabelInstanceEBSBandwidth]
		if hasEBS != (h.EBSOptimizedSupport == "default") || (h.EBSOptimizedSupport == "unsupported") != (h.EBSMaxBandwidthMbps == nil) {
			t.Errorf("%s: ebs label present %v, support %q, bandwidth %v", it.Name, hasEBS, h.EBSOptimizedSupport, h.EBSMaxBandwidthMbps)
		}
	}
}

// TestHardwareSetLabels: SetLabels mirrors Karpenter's computeRequirements
// on an EC2 answer: manufacturer lower-cased, clock rounded to MHz (0 when
// EC2 gives none), EBS bandwidth only when EBS-optimized by default, stale
// labels removed.
func TestHardwareSetLabels(t *testing.T) {
	mbps := int32(4750)
	for _, tc := range []struct {
		name string
		hw   Hardware
		want map[string]string
	}{
		{"full", Hardware{CPUManufacturer: "Intel", SustainedClockGHz: 3.1, EBSOptimizedSupport: "default", EBSMaxBandwidthMbps: &mbps, EncryptionInTransit: true},
			map[string]string{karpv1.LabelInstanceCPUManufacturer: "intel", karpv1.LabelInstanceCPUSustainedClockSpeedMhz: "3100",
				karpv1.LabelInstanceEBSBandwidth: "4750", karpv1.LabelInstanceEncryptionInTransitSupported: "true"}},
		{"optional EBS, no clock", Hardware{CPUManufacturer: "AMD", EBSOptimizedSupport: "supported", EBSMaxBandwidthMbps: &mbps},
			map[string]string{karpv1.LabelInstanceCPUManufacturer: "amd", karpv1.LabelInstanceCPUSustainedClockSpeedMhz: "0",
				karpv1.LabelInstanceEncryptionInTransitSupported: "false"}},
		{"nothing known", Hardware{}, map[string]string{karpv1.LabelInstanceEncryptionInTransitSupported: "false"}},
	} {
		l := map[string]string{karpv1.LabelInstanceEBSBandwidth: "1", karpv1.LabelInstanceCPUManufacturer: "x", "other": "kept"}
		tc.hw.SetLabels(l)
		tc.want["other"] = "kept"
		if len(l) != len(tc.want) {
			t.Errorf("%s: labels %v, want %v", tc.name, l, tc.want)
		}
		for k, v := range tc.want {
			if l[k] != v {
				t.Errorf("%s: label %s = %q, want %q", tc.name, k, l[k], v)
			}
		}
	}
}
