package view

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/scheduler"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
)

func claim(name, volume, class string, bound bool) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	if class != "" {
		c.Spec.StorageClassName = &class
	}
	if bound {
		c.Annotations = map[string]string{karpv1.AnnotationBindCompleted: "yes"}
		c.Status.Phase = corev1.ClaimBound
	}
	return c
}

func zonalPV(name string, zones ...string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: scheduler.EBSDriver, VolumeHandle: "vol-1"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: zones}}}}}}}}
}

func localPV(name, host string, extra ...corev1.NodeSelectorRequirement) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disk"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: append([]corev1.NodeSelectorRequirement{{Key: karpv1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}, extra...)}}}}}}
}

func storageClass(name, provisioner string, mode storagev1.VolumeBindingMode, zoneTerms ...[]string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	for _, zs := range zoneTerms {
		sc.AllowedTopologies = append(sc.AllowedTopologies, corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: karpv1.LabelZone, Values: zs}}})
	}
	return sc
}

func podWith(vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "default"}, Spec: corev1.PodSpec{Volumes: vols}}
}

func pvcVol(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func zoneIn(zones ...string) []corev1.NodeSelectorRequirement {
	return []corev1.NodeSelectorRequirement{{Key: karpv1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: zones}}
}

// TestPodVolumes follows Karpenter's volume topology: what a pod's claims
// ask of its node, and when a pod cannot be scheduled yet.
func TestPodVolumes(t *testing.T) {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	deleting := claim("deleting", "", "gp3", false)
	deleting.DeletionTimestamp = &metav1.Time{}
	lost := claim("lost", "pv-gone", "gp3", false)
	lost.Status.Phase = corev1.ClaimLost
	goingPV := zonalPV("pv-going", "us-east-1a")
	goingPV.DeletionTimestamp = &metav1.Time{}
	st := &fake.Storage{
		PVCs: []*corev1.PersistentVolumeClaim{
			claim("bound", "pv-a", "gp3", true),
			claim("not-marked", "pv-a", "gp3", false),
			claim("local", "pv-local", "", true),
			claim("local-zonal", "pv-local-zonal", "", true),
			claim("wffc", "", "gp3", false),
			claim("wffc-any", "", "any-zone", false),
			claim("intree", "", "intree", false),
			claim("immediate", "", "fast", false),
			claim("no-class", "", "", false),
			claim("missing-class", "", "nope", false),
			claim("missing-pv", "pv-nope", "gp3", true),
			claim("going-pv", "pv-going", "gp3", true),
			claim("db-0-scratch", "", "gp3", false),
			deleting, lost,
		},
		PVs: []*corev1.PersistentVolume{zonalPV("pv-a", "us-east-1a"), localPV("pv-local", "ip-10-0-0-1"),
			localPV("pv-local-zonal", "ip-10-0-0-1", zoneIn("us-east-1c")...), goingPV},
		StorageClasses: []*storagev1.StorageClass{
			storageClass("gp3", scheduler.EBSDriver, wffc, []string{"us-east-1a"}, []string{"us-east-1b"}),
			storageClass("any-zone", scheduler.EBSDriver, wffc),
			storageClass("intree", karpv1.ProvisionerAWSEBSInTree, wffc),
			storageClass("fast", scheduler.EBSDriver, immediate),
		},
	}
	ebs := func(n int64) map[string]int64 { return map[string]int64{scheduler.EBSDriver: n} }
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		reqs   []corev1.NodeSelectorRequirement
		attach map[string]int64
		err    string
	}{
		{name: "no claims", pod: podWith(corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})},
		{name: "bound zonal volume pins the zone", pod: podWith(pvcVol("data", "bound")), reqs: zoneIn("us-east-1a"), attach: ebs(1)},
		{name: "local volume: hostname dropped, any node", pod: podWith(pvcVol("data", "local"))},
		{name: "local volume keeps its other terms", pod: podWith(pvcVol("data", "local-zonal")), reqs: zoneIn("us-east-1c")},
		{name: "WaitForFirstConsumer: allowed topologies joined", pod: podWith(pvcVol("data", "wffc")), reqs: zoneIn("us-east-1a", "us-east-1b"), attach: ebs(1)},
		{name: "WaitForFirstConsumer without topologies", pod: podWith(pvcVol("data", "wffc-any")), attach: ebs(1)},
		{name: "in-tree EBS provisioner counts as the CSI driver", pod: podWith(pvcVol("data", "intree")), attach: ebs(1)},
		{name: "inline EBS volume", pod: podWith(corev1.Volume{Name: "old", VolumeSource: corev1.VolumeSource{
			AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}}}), attach: ebs(1)},
		{name: "two claims count twice", pod: podWith(pvcVol("a", "bound"), pvcVol("b", "wffc")),
			reqs: append(zoneIn("us-east-1a"), zoneIn("us-east-1a", "us-east-1b")...), attach: ebs(2)},
		{name: "ephemeral volume uses <pod>-<volume>", pod: podWith(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{}}}), reqs: zoneIn("us-east-1a", "us-east-1b"), attach: ebs(1)},
		{name: "missing claim", pod: podWith(pvcVol("data", "ghost")), err: "persistentvolumeclaim default/ghost not found"},
		{name: "claim being deleted", pod: podWith(pvcVol("data", "deleting")), err: "is being deleted"},
		{name: "lost claim", pod: podWith(pvcVol("data", "lost")), err: `bound to persistentvolume "pv-gone", which does not exist`},
		{name: "bound without bind-completed", pod: podWith(pvcVol("data", "not-marked")), err: "not bound yet"},
		{name: "volume missing", pod: podWith(pvcVol("data", "missing-pv")), err: `persistentvolume "pv-nope" not found`},
		{name: "volume being deleted", pod: podWith(pvcVol("data", "going-pv")), err: `persistentvolume "pv-going" is being deleted`},
		{name: "unbound without a class", pod: podWith(pvcVol("data", "no-class")), err: "names no storage class"},
		{name: "class missing", pod: podWith(pvcVol("data", "missing-class")), err: `storageclass "nope" not found`},
		{name: "immediate binding must be bound first", pod: podWith(pvcVol("data", "immediate")), err: "binds immediately"},
		{name: "one bad claim spoils the pod", pod: podWith(pvcVol("a", "bound"), pvcVol("b", "ghost")), err: "ghost not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podVolumes(tc.pod, st)
			if tc.err != "" {
				if !strings.Contains(got.Err, tc.err) || got.Requirements != nil || got.Attachments != nil {
					t.Fatalf("got %+v, want error containing %q", got, tc.err)
				}
				return
			}
			if got.Err != "" {
				t.Fatalf("unexpected error %q", got.Err)
			}
			if !reflect.DeepEqual(got.Requirements, tc.reqs) {
				t.Errorf("requirements %v, want %v", got.Requirements, tc.reqs)
			}
			if !reflect.DeepEqual(got.Attachments, tc.attach) {
				t.Errorf("attachments %v, want %v", got.Attachments, tc.attach)
			}
		})
	}
}

func TestMergeAlternatives(t *testing.T) {
	hostA := []corev1.NodeSelectorRequirement{{Key: karpv1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}
	for _, tc := range []struct {
		name string
		alts [][]corev1.NodeSelectorRequirement
		want []corev1.NodeSelectorRequirement
	}{
		{name: "none"},
		{name: "one", alts: [][]corev1.NodeSelectorRequirement{zoneIn("z1")}, want: zoneIn("z1")},
		{name: "same key joined, sorted, deduplicated", alts: [][]corev1.NodeSelectorRequirement{zoneIn("z2"), zoneIn("z1", "z2")}, want: zoneIn("z1", "z2")},
		{name: "different keys: the first term", alts: [][]corev1.NodeSelectorRequirement{zoneIn("z1"), hostA}, want: zoneIn("z1")},
	} {
		if got := mergeAlternatives(tc.alts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBuildVolumesAndAttachLimits: the view carries pods' volume needs,
// namespace labels, and existing nodes' CSI attach limits.
func TestBuildVolumesAndAttachLimits(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	limit := int32(25)
	p := pendingPod("db")
	p.Spec.Volumes = []corev1.Volume{pvcVol("data", "data-db")}
	c := &fake.Cache{PoolList: []*karpv1.NodePool{pool("general")}, PodList: []*corev1.Pod{p, pendingPod("plain")}, NodeList: []*corev1.Node{n}}
	c.Storage = fake.Storage{
		PVCs:           []*corev1.PersistentVolumeClaim{claim("data-db", "", "gp3", false)},
		StorageClasses: []*storagev1.StorageClass{storageClass("gp3", scheduler.EBSDriver, wffc, []string{"us-east-1b"})},
		CSINodes: []*storagev1.CSINode{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: scheduler.EBSDriver, NodeID: "i-1", Allocatable: &storagev1.VolumeNodeResources{Count: &limit}},
			{Name: "efs.csi.aws.com", NodeID: "i-1"}}}}},
		NamespaceList: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"team": "a"}}}},
	}
	v := (&Builder{Cache: c, State: fsm.New(), Classes: classes(), MinValuesPolicy: scheduler.MinValuesBestEffort}).Build(now)
	if got := v.Volumes["default/db"]; !reflect.DeepEqual(got.Requirements, zoneIn("us-east-1b")) || got.Attachments[scheduler.EBSDriver] != 1 {
		t.Errorf("volumes of default/db: %+v", got)
	}
	if _, ok := v.Volumes["default/plain"]; ok {
		t.Error("a pod without claims has volume needs")
	}
	if v.Namespaces["default"]["team"] != "a" {
		t.Errorf("namespaces %v", v.Namespaces)
	}
	var sn *scheduler.Node
	for _, x := range v.Nodes {
		if x.Name == "n1" {
			sn = x
		}
	}
	if sn == nil {
		t.Fatal("node n1 missing from the view")
	}
	q := sn.Allocatable[scheduler.AttachResource(scheduler.EBSDriver)]
	if q.Value() != 25 {
		t.Errorf("EBS attach limit %v, want 25", q.String())
	}
	if _, ok := sn.Allocatable[scheduler.AttachResource("efs.csi.aws.com")]; ok {
		t.Error("a driver without a count got a limit")
	}
	if _, ok := n.Status.Allocatable[scheduler.AttachResource(scheduler.EBSDriver)]; ok {
		t.Error("the cached Node was modified")
	}
	in := v.SchedulerInput(v.Pending, v.Nodes)
	if in.MinValuesPolicy != scheduler.MinValuesBestEffort || in.Volumes == nil || in.Namespaces == nil {
		t.Errorf("scheduler input lost the view's volumes, namespaces or policy: %+v", in)
	}
}
