package provisioner

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
)

// al2023Images are the AMIs al2023@latest resolves to on amd64, with the
// requirements Karpenter gives each variant.
func al2023Images() []cloud.AMI {
	none := func(key string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpDoesNotExist}
	}
	some := func(key string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpExists}
	}
	created := "2026-01-01T00:00:00.000Z"
	return []cloud.AMI{
		{ID: "ami-standard", Arch: "amd64", CreationDate: created,
			Requirements: []corev1.NodeSelectorRequirement{none(karpv1.LabelInstanceAcceleratorCount), none(karpv1.LabelInstanceGPUCount)}},
		{ID: "ami-neuron", Arch: "amd64", CreationDate: created, Requirements: []corev1.NodeSelectorRequirement{some(karpv1.LabelInstanceAcceleratorCount)}},
		{ID: "ami-nvidia", Arch: "amd64", CreationDate: created, Requirements: []corev1.NodeSelectorRequirement{some(karpv1.LabelInstanceGPUCount)}},
	}
}

// TestLaunchImagePerInstanceType: each launch candidate boots the image
// that suits its type: NVIDIA GPU types the NVIDIA image, Neuron types the
// Neuron image, the others the standard one.
func TestLaunchImagePerInstanceType(t *testing.T) {
	pod := func(name, pool string, res corev1.ResourceName, qty string) *corev1.Pod {
		p := pendingPod(name, "100m")
		p.Spec.NodeSelector = map[string]string{karpv1.LabelNodePool: pool}
		if res != "" {
			p.Spec.Containers[0].Resources.Requests[res] = resource.MustParse(qty)
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{res: resource.MustParse(qty)}
		}
		return p
	}
	family := func(f ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return req(karpv1.LabelInstanceFamily, "In", f...)
	}
	c := &fake.Cache{
		PoolList:  []*karpv1.NodePool{pool("gpu", family("g5", "p4d")), pool("neuron", family("inf2", "trn1")), pool("cpu", family("m5", "c5"))},
		ClassList: []*awsv1.EC2NodeClass{class()},
		PodList: []*corev1.Pod{pod("train", "gpu", awsv1.ResourceNVIDIAGPU, "1"), pod("infer", "neuron", awsv1.ResourceAWSNeuron, "1"),
			pod("web", "cpu", "", "")},
	}
	r := newTestProvisionerOn(t, c, &fakeCloud{amis: al2023Images()})
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gpu": "ami-nvidia", "neuron": "ami-neuron", "cpu": "ami-standard"}
	seen := map[string]bool{}
	for _, in := range r.state.Intents() {
		pool := in.Spec.NodePool
		seen[pool] = true
		if len(in.Spec.Candidates) == 0 {
			t.Errorf("pool %s: no candidates", pool)
		}
		for _, cand := range in.Spec.Candidates {
			if cand.ImageID != want[pool] {
				t.Errorf("pool %s: %s boots %s, want %s", pool, cand.InstanceType, cand.ImageID, want[pool])
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("launched for pools %v, want %v", seen, want)
	}
}
