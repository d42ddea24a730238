package catalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// TestInstanceTypeOverheadAsKarpenter ports Karpenter's instancetype
// suite cases TestNodeClassOverrides does not already pin (m5.large:
// capacity memory 7577Mi, 2 vCPU, ENI-limited 29 pods; AL2023 unless the
// case says otherwise).
func TestInstanceTypeOverheadAsKarpenter(t *testing.T) {
	const m5 = "m5.large"
	runOverrideCases(t, []overrideCase{
		{
			// "limited pod density to be the default pods number when
			// pods-per-core is 0": 0 is no cap.
			name: "podsPerCore 0 keeps the ENI-limited pods", typ: m5,
			nc:       nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{PodsPerCore: ptr(int32(0))})),
			capacity: map[corev1.ResourceName]string{"pods": "29"},
		},
		{
			// "the minimum of pods-per-core and max-pods": 2*2 = 4 < 20.
			name: "podsPerCore below maxPods wins", typ: m5,
			nc:       nodeClass("AL2", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(20)), PodsPerCore: ptr(int32(2))})),
			capacity: map[corev1.ResourceName]string{"pods": "4"},
		},
		{
			// AL2: kube-reserved memory from the ENI-limited 29 pods
			// whatever maxPods says: 7577 - 574 - 100 = 6903Mi.
			name: "maxPods on AL2 keeps ENI-limited memory overhead", typ: m5,
			nc:          nodeClass("AL2", kubelet(awsv1.KubeletConfiguration{MaxPods: ptr(int32(10))})),
			capacity:    map[corev1.ResourceName]string{"pods": "10"},
			allocatable: map[corev1.ResourceName]string{"pods": "10", "memory": "6903Mi"},
		},
		{
			// Ubuntu takes the Linux defaults.
			name: "Ubuntu defaults", typ: m5,
			nc:          nodeClass("Ubuntu", nil),
			capacity:    map[corev1.ResourceName]string{"pods": "29", "ephemeral-storage": "20Gi"},
			allocatable: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "ephemeral-storage": "17Gi"},
		},
		{
			// "evictionHard value with mixed percentage/value types":
			// memory 1Gi absolute, nodefs 15 % of 20Gi = 3Gi; 7577 - 574 - 1024 = 5979Mi; 20 - 1 - 3 = 16Gi.
			name: "evictionHard mixing a quantity and a percentage", typ: m5,
			nc: nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{EvictionHard: map[string]string{
				"memory.available": "1Gi", "nodefs.available": "15%"}})),
			allocatable: map[corev1.ResourceName]string{"memory": "5979Mi", "ephemeral-storage": "16Gi"},
		},
		{
			// "override system reserved cpus" beside kube-reserved defaults:
			// 2000 - 70 - 500 = 1430m.
			name: "systemReserved cpu adds to the default kube-reserved cpu", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{SystemReserved: map[string]string{"cpu": "500m"}})),
			allocatable: map[corev1.ResourceName]string{"cpu": "1430m", "memory": "6903Mi"},
		},
		{
			// kubeReserved ephemeral-storage replaces the 1Gi default: 20 - 3 - 2 = 15Gi.
			name: "kubeReserved ephemeral-storage", typ: m5,
			nc:          nodeClass("AL2023", kubelet(awsv1.KubeletConfiguration{KubeReserved: map[string]string{"ephemeral-storage": "3Gi"}})),
			allocatable: map[corev1.ResourceName]string{"ephemeral-storage": "15Gi", "cpu": "1930m"},
		},
		{
			// Bottlerocket's ENI-limited density without kubelet settings.
			name: "Bottlerocket defaults", typ: m5,
			nc:          nodeClass("Bottlerocket", nil),
			capacity:    map[corev1.ResourceName]string{"pods": "29", "ephemeral-storage": "20Gi"},
			allocatable: map[corev1.ResourceName]string{"memory": "6903Mi"},
		},
	})
}

// TestCapabilityFlexLabel: every type carries
// karpenter.k8s.aws/instance-capability-flex, "true" for the flex
// families (c7i-flex), "false" for the rest, as Karpenter's requirements.
func TestCapabilityFlexLabel(t *testing.T) {
	its := InstanceTypes(Options{IncludeUnpriced: true})
	for name, want := range map[string]string{"c7i-flex.large": "true", "m7i-flex.xlarge": "true", "c7i.large": "false", "m5.large": "false"} {
		if got := find(t, its, name).Labels[karpv1.LabelInstanceCapabilityFlex]; got != want {
			t.Errorf("%s: %s = %q, want %q", name, karpv1.LabelInstanceCapabilityFlex, got, want)
		}
	}
	for _, it := range its {
		if _, ok := it.Labels[karpv1.LabelInstanceCapabilityFlex]; !ok {
			t.Fatalf("%s has no %s label", it.Name, karpv1.LabelInstanceCapabilityFlex)
		}
	}
}
