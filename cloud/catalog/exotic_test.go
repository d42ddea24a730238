package catalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestExoticAsKarpenter ports the per-resource entries of Karpenter
// v1.14.1's ExoticInstanceFilter tests (pkg/providers/instance/filter):
// "should reject instance types with exotic resources" (each of
// WellKnownExoticResources), "should not reject instance types with normal
// resources" (the rest of WellKnownResources) and "should reject metal
// instance types". The filter itself is cloud/aws's
// TestExoticInstanceFilterAsKarpenter.
func TestExoticAsKarpenter(t *testing.T) {
	one := resource.MustParse("1")
	for _, tc := range []struct {
		resource corev1.ResourceName
		exotic   bool
	}{
		{awsv1.ResourceNVIDIAGPU, true}, {awsv1.ResourceAMDGPU, true}, {awsv1.ResourceAWSNeuron, true},
		{resourceAWSNeuronCore, true}, {resourceHabanaGaudi, true},
		{corev1.ResourceCPU, false}, {corev1.ResourceMemory, false}, {corev1.ResourceEphemeralStorage, false},
		{corev1.ResourcePods, false}, {awsv1.ResourceAWSPodENI, false}, {awsv1.ResourceEFA, false},
	} {
		it := &InstanceType{Name: "t", Capacity: corev1.ResourceList{tc.resource: one}}
		if got := it.Exotic(); got != tc.exotic {
			t.Errorf("a type with %s: exotic %v, want %v", tc.resource, got, tc.exotic)
		}
		it.Capacity[tc.resource] = resource.MustParse("0")
		if it.Exotic() {
			t.Errorf("a type with 0 %s is exotic", tc.resource)
		}
	}
	if !(&InstanceType{Labels: map[string]string{karpv1.LabelInstanceSize: "metal-24xl"}}).Exotic() {
		t.Error("a metal size is not exotic")
	}
	// The catalogue's own types.
	types := map[string]*InstanceType{}
	for _, it := range InstanceTypes(Options{}) {
		types[it.Name] = it
	}
	for name, want := range map[string]bool{"m5.large": false, "c6i.32xlarge": false, "m5.metal": true, "p3dn.24xlarge": true, "g5.xlarge": true,
		"g4ad.xlarge": true, "inf2.xlarge": true, "trn1.2xlarge": true} {
		it := types[name]
		if it == nil {
			t.Fatalf("%s not in the catalogue", name)
		}
		if it.Exotic() != want {
			t.Errorf("%s: exotic %v, want %v", name, it.Exotic(), want)
		}
	}
}
