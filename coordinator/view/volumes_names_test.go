package view

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
)

// TestPodVolumeNames: each volume a pod attaches is named (its claim's
// namespace/name, an inline EBS volume's ID) and counted once per pod, so
// the scheduler counts a volume several pods share once per node, as
// Karpenter's VolumeUsage does.
func TestPodVolumeNames(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	st := &fake.Storage{
		PVCs:           []*corev1.PersistentVolumeClaim{claim("bound", "pv-a", "gp3", true), claim("wffc", "", "gp3", false), claim("db-0-scratch", "", "gp3", false)},
		PVs:            []*corev1.PersistentVolume{zonalPV("pv-a", "us-east-1a")},
		StorageClasses: []*storagev1.StorageClass{storageClass("gp3", scheduler.EBSDriver, wffc)},
	}
	ebs := func(names ...string) map[string][]string { return map[string][]string{scheduler.EBSDriver: names} }
	inline := corev1.Volume{Name: "old", VolumeSource: corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}}}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		attach int64
		names  map[string][]string
	}{
		{name: "a claim", pod: podWith(pvcVol("data", "bound")), attach: 1, names: ebs("default/bound")},
		{name: "the same claim mounted twice counts once", pod: podWith(pvcVol("a", "bound"), pvcVol("b", "bound")), attach: 1, names: ebs("default/bound")},
		{name: "two claims", pod: podWith(pvcVol("a", "bound"), pvcVol("b", "wffc")), attach: 2, names: ebs("default/bound", "default/wffc")},
		{name: "an inline EBS volume by its ID", pod: podWith(inline, inline), attach: 1, names: ebs("vol-1")},
		{name: "an ephemeral volume's claim", pod: podWith(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}),
			attach: 1, names: ebs("default/db-0-scratch")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podVolumes(tc.pod, st)
			if got.Attachments[scheduler.EBSDriver] != tc.attach || !reflect.DeepEqual(got.Volumes, tc.names) {
				t.Fatalf("attachments %v, names %v; want %d and %v", got.Attachments, got.Volumes, tc.attach, tc.names)
			}
		})
	}
}
