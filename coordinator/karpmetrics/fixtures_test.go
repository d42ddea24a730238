package karpmetrics_test

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/view"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
	"github.com/joiner-dev/joiner/test/fixture"
)

// cache is the fake cache with Synced.
type cache struct {
	fake.Cache
	synced bool
}

func (c *cache) Synced() bool { return c.synced }

// classes are published classes.
type classes map[string]*view.Class

func (c classes) Classes() map[string]*view.Class { return c }

type fixtures struct {
	now     time.Time
	cache   *cache
	classes classes
}

// newFixtures: a NodePool "default" (limit 100 cpu, 8 cpu in use), its
// spot NodeClaim and Node n-1 (t-4, 4 vCPU, zone z-a) created an hour ago,
// a pod p-1 (1 cpu) and a DaemonSet pod ds-1 (100m) running and ready on
// it, a pending pod p-2 created a minute ago, and the class "default"
// offering t-4 spot in z-a at $0.10/h.
func newFixtures() *fixtures {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	pool := fixture.NodePool("default", karpv1.CapacityTypeSpot)
	pool.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("100")}
	pool.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}

	labels := map[string]string{karpv1.LabelNodePool: "default", karpv1.LabelCapacityType: karpv1.CapacityTypeSpot, karpv1.LabelZone: "z-a",
		karpv1.LabelInstanceType: "t-4", karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux"}
	created := metav1.NewTime(now.Add(-time.Hour))
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: labels, CreationTimestamp: created}}
	nc.Spec.NodeClassRef = fixture.NodeClassRef()
	nc.Status.NodeName = "n-1"
	nc.Status.ProviderID = "aws:///z-a/i-1"
	capacity := fixture.PerCPU(4)
	alloc := capacity.DeepCopy()
	alloc[corev1.ResourceCPU] = resource.MustParse("3920m")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-1", Labels: labels, CreationTimestamp: created},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}, Status: corev1.NodeStatus{Capacity: capacity, Allocatable: alloc}}

	ready := func(p *corev1.Pod, at time.Time) *corev1.Pod {
		p.UID = types.UID("uid-" + p.Name)
		p.CreationTimestamp = metav1.NewTime(at.Add(-30 * time.Second))
		p.Spec.NodeName = "n-1"
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(-20 * time.Second))},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)},
		}
		return p
	}
	app := ready(fixture.Pod("p-1", "1"), now.Add(-time.Minute))
	app.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "p"}}
	yes := true
	ds := ready(fixture.Pod("ds-1", "100m"), now.Add(-time.Minute))
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: &yes}}
	pending := fixture.Pod("p-2", "1")
	pending.UID = "uid-p-2"
	pending.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	pending.Status.Phase = corev1.PodPending

	it := fixture.InstanceType("t-4", 4, catalog.Offering{Zone: "z-a", CapacityType: karpv1.CapacityTypeSpot, Price: 0.1, Available: true},
		catalog.Offering{Zone: "z-b", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.2})
	it.Labels[karpv1.LabelInstanceCPU] = "4"
	it.Labels[karpv1.LabelInstanceMemory] = "16384"
	return &fixtures{now: now,
		cache: &cache{synced: true, Cache: fake.Cache{PoolList: []*karpv1.NodePool{pool}, ClaimList: []*karpv1.NodeClaim{nc},
			NodeList: []*corev1.Node{node}, PodList: []*corev1.Pod{app, ds, pending}}},
		classes: classes{"default": {InstanceTypes: []*catalog.InstanceType{it}}},
	}
}

// pendingCopy is the pod as it was before it was bound.
func pendingCopy(p *corev1.Pod) *corev1.Pod {
	out := p.DeepCopy()
	out.Spec.NodeName = ""
	out.Status.Phase = corev1.PodPending
	out.Status.Conditions = nil
	return out
}
