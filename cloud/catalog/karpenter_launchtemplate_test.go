package catalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// fitting names the instance types of nc whose allocatable holds requests
// (each resource named there; the rest is not checked).
func fitting(nc *awsv1.EC2NodeClass, requests corev1.ResourceList) []string {
	var out []string
	for _, it := range InstanceTypes(Options{NodeClass: nc}) {
		alloc := it.Allocatable()
		fits := true
		for name, q := range requests {
			a, ok := alloc[name]
			if !ok || a.Cmp(q) < 0 {
				fits = false
				break
			}
		}
		if fits {
			out = append(out, it.Name)
		}
	}
	return out
}

// TestEphemeralStorageAsKarpenter ports the "Ephemeral Storage" context of
// Karpenter's launchtemplate suite_test.go. Karpenter provisions pods and
// checks whether they schedule; here the question is the one the scheduler
// asks: does some instance type of the class have the ephemeral-storage
// (and the rest) allocatable. Karpenter's default class is AL2023 (20Gi
// root volume: allocatable 20 - 1 kube-reserved - 2 eviction = 17Gi).
func TestEphemeralStorageAsKarpenter(t *testing.T) {
	al2023 := func(mutate func(*awsv1.EC2NodeClassSpec)) *awsv1.EC2NodeClass { return nodeClass("AL2023", mutate) }
	custom := func(mutate func(*awsv1.EC2NodeClassSpec)) *awsv1.EC2NodeClass { return nodeClass("Custom", mutate) }
	bdms := func(ms ...*awsv1.BlockDeviceMapping) func(*awsv1.EC2NodeClassSpec) {
		return func(s *awsv1.EC2NodeClassSpec) { s.BlockDeviceMappings = ms }
	}
	storage := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}
	}
	for _, tc := range []struct {
		karpenter string // the It(...) ported
		nc        *awsv1.EC2NodeClass
		requests  corev1.ResourceList
		fits      bool
	}{
		{"should pack pods when a daemonset has an ephemeral-storage request", al2023(nil), corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}, true},
		{"should pack pods with any ephemeral-storage request", al2023(nil), storage("1G"), true},
		{"should pack pods with large ephemeral-storage request", al2023(nil), storage("10Gi"), true},
		{"should not pack pods if the sum of pod ephemeral-storage and overhead exceeds node capacity", al2023(nil), storage("19Gi"), false},
		{"should pack pods if the pod's ephemeral-storage exceeds node capacity and instance storage is mounted",
			al2023(func(s *awsv1.EC2NodeClassSpec) { s.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0) }), storage("5000Gi"), true},
		// Two 10Gi pods need two nodes: one node holds 10Gi but not 20Gi.
		{"should launch multiple nodes if sum of pod ephemeral-storage requests exceeds a single nodes capacity (one pod)", al2023(nil), storage("10Gi"), true},
		{"should launch multiple nodes if sum of pod ephemeral-storage requests exceeds a single nodes capacity (both pods)", al2023(nil), storage("20Gi"), false},
		{"should only pack pods with ephemeral-storage requests that will fit on an available node (10Gi)", al2023(nil), storage("10Gi"), true},
		{"should only pack pods with ephemeral-storage requests that will fit on an available node (150Gi)", al2023(nil), storage("150Gi"), false},
		// Karpenter's case applies no EC2NodeClass (nothing launches);
		// what it pins for a class is the 150Gi refusal above.
		{"should not pack pod if no available instance types have enough storage", al2023(nil), storage("150Gi"), false},
		{"should pack pods using the blockdevicemappings from the provider spec when defined",
			al2023(bdms(bdm("/dev/xvda", "50G", false), bdm("/dev/xvdb", "20G", false))), storage("25Gi"), true},
		{"should pack pods using blockdevicemappings for Custom AMIFamily",
			custom(bdms(bdm("/dev/xvda", "20G", false), bdm("/dev/xvdb", "40G", false))), storage("25Gi"), true},
		{"should pack pods using the configured root volume in blockdevicemappings",
			custom(bdms(bdm("/dev/xvda", "20G", false), bdm("/dev/xvdb", "40G", true), bdm("/dev/xvdc", "20G", false))), storage("25Gi"), true},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			got := fitting(tc.nc, tc.requests)
			if (len(got) > 0) != tc.fits {
				t.Errorf("%d instance types hold %v, want fits=%v (e.g. %v)", len(got), tc.requests, tc.fits, got[:min(len(got), 3)])
			}
		})
	}
	// The RAID0 case also pins the node Karpenter launches:
	// m6idn.32xlarge, whose ephemeral-storage is its 7600G of NVMe.
	raid := al2023(func(s *awsv1.EC2NodeClassSpec) { s.InstanceStorePolicy = ptr(awsv1.InstanceStorePolicyRAID0) })
	checkResources(t, "m6idn.32xlarge RAID0 capacity", find(t, InstanceTypes(Options{NodeClass: raid}), "m6idn.32xlarge").Capacity,
		map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "7600G"})
}

// TestMemoryOverheadAsKarpenter ports the "AL2" and "Bottlerocket"
// contexts of Karpenter's launchtemplate suite_test.go: the memory
// overhead (kube-reserved + eviction threshold) of m5.xlarge, 58
// ENI-limited pods.
func TestMemoryOverheadAsKarpenter(t *testing.T) {
	for _, tc := range []struct {
		karpenter string
		family    string
		kubelet   *awsv1.KubeletConfiguration
		want      string
	}{
		// 11*58+255 = 893Mi kube-reserved + 100Mi eviction.
		{"AL2: should calculate memory overhead based on eni limited pods", "AL2", &awsv1.KubeletConfiguration{}, "993Mi"},
		{"Bottlerocket: should calculate memory overhead based on eni limited pods", "Bottlerocket", &awsv1.KubeletConfiguration{}, "993Mi"},
		// 11*110+255 = 1465Mi + 100Mi.
		{"Bottlerocket: should calculate memory overhead based on max pods", "Bottlerocket", &awsv1.KubeletConfiguration{MaxPods: ptr(int32(110))}, "1565Mi"},
	} {
		t.Run(tc.karpenter, func(t *testing.T) {
			it := find(t, InstanceTypes(Options{NodeClass: nodeClass(tc.family, kubelet(*tc.kubelet))}), "m5.xlarge")
			got := it.Overhead.Total()[corev1.ResourceMemory]
			if got.Cmp(resource.MustParse(tc.want)) != 0 {
				t.Errorf("memory overhead = %s, want %s", got.String(), tc.want)
			}
		})
	}
}
