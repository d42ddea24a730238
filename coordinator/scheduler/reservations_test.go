package scheduler

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// reservedTypes are fakeTypes(4) with capacity reservation cr-1 of
// fake-it-1 (2 vCPU) in test-zone-1, priced as the provider prices it.
func reservedTypes(capacity int, available bool) []*catalog.InstanceType {
	types := fakeTypes(4)
	it := types[1]
	it.Offerings = append(it.Offerings, catalog.Offering{Zone: "test-zone-1", CapacityType: karpv1.CapacityTypeReserved,
		Price: it.Offerings[0].Price / 1e7, Available: available, ReservationID: "cr-1", ReservationType: "default", ReservationCapacity: capacity})
	return types
}

// hostPods are n pods of 1500m that each need a node of their own.
func hostPods(n int, nodeSelector map[string]string) []*corev1.Pod {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "r"}}
	var out []*corev1.Pod
	for i := range n {
		p := pod(fmt.Sprintf("r-%d", i), map[string]string{"app": "r"}, "1500m", "1Gi")
		p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, sel)
		p.Spec.NodeSelector = nodeSelector
		out = append(out, p)
	}
	return out
}

// TestReservedCapacity: a claim launches into a reservation while it has
// instances left (its offering is nearly free, so it comes first), one
// instance per claim; later claims fall back to spot or on-demand in the
// same plan, or are unschedulable when the pool or the pods want reserved
// capacity only. Pools that do not allow reserved, pods in other zones and
// unavailable or empty reservations get none.
func TestReservedCapacity(t *testing.T) {
	tests := []struct {
		name          string
		capacity      int
		available     bool
		poolTypes     []string // karpenter.sh/capacity-type In (nil: any)
		nodeSelector  map[string]string
		reserved      int
		other         int
		unschedulable int
	}{
		{"two reserved, three fall back", 2, true, nil, nil, 2, 3, 0},
		{"pool allows reserved", 2, true, []string{"reserved", "on-demand"}, nil, 2, 3, 0},
		{"pool without reserved", 2, true, []string{"spot", "on-demand"}, nil, 0, 5, 0},
		{"reserved only", 2, true, []string{"reserved"}, nil, 2, 0, 3},
		{"pods elsewhere", 2, true, nil, map[string]string{karpv1.LabelZone: "test-zone-2"}, 0, 5, 0},
		{"pods want the reservation", 2, true, nil, map[string]string{karpv1.LabelCapacityReservationID: "cr-1"}, 2, 0, 3},
		{"reservation type", 2, true, nil, map[string]string{karpv1.LabelCapacityReservationType: "capacity-block"}, 0, 0, 5},
		{"unavailable", 2, false, nil, nil, 0, 5, 0},
		{"empty", 0, true, nil, nil, 0, 5, 0},
		{"enough for all", 9, true, nil, nil, 5, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := nodePool("default")
			if tc.poolTypes != nil {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: karpv1.LabelCapacityType, Operator: karpv1.OpIn, Values: tc.poolTypes}}
			}
			plan := Solve(&Input{Pods: hostPods(5, tc.nodeSelector), NodePools: []*karpv1.NodePool{np},
				InstanceTypes: map[string][]*catalog.InstanceType{"default": reservedTypes(tc.capacity, tc.available)}})
			reserved, other := 0, 0
			for _, nc := range plan.NodeClaims {
				if nc.CapacityType != karpv1.CapacityTypeReserved {
					other++
					continue
				}
				reserved++
				if nc.InstanceType != "fake-it-1" || nc.Zone != "test-zone-1" || !slices.Equal(nc.InstanceTypes, []string{"fake-it-1"}) ||
					!hasRequirement(nc.Requirements, karpv1.LabelCapacityReservationID, "cr-1") ||
					!hasRequirement(nc.Requirements, karpv1.LabelCapacityType, karpv1.CapacityTypeReserved) {
					t.Errorf("reserved claim %+v", nc)
				}
			}
			if reserved != tc.reserved || other != tc.other || len(plan.Unschedulable) != tc.unschedulable {
				t.Errorf("%d reserved, %d other claims, unschedulable %+v; want %d, %d, %d", reserved, other, plan.Unschedulable,
					tc.reserved, tc.other, tc.unschedulable)
			}
		})
	}
}

// hasRequirement: reqs hold key In exactly [value].
func hasRequirement(reqs []corev1.NodeSelectorRequirement, key, value string) bool {
	return slices.ContainsFunc(reqs, func(r corev1.NodeSelectorRequirement) bool {
		return r.Key == key && r.Operator == corev1.NodeSelectorOpIn && slices.Equal(r.Values, []string{value})
	})
}

// TestReservationsShared: two pools of two classes that list one
// reservation share its count (the least any class reports: the classes'
// types were listed at different times).
func TestReservationsShared(t *testing.T) {
	a, b := nodePool("a"), nodePool("b")
	w := int32(10)
	a.Spec.Weight = &w
	pods := hostPods(3, nil)
	other := hostPods(3, nil)
	for i, p := range other {
		p.Name = fmt.Sprintf("s-%d", i)
		p.Labels = map[string]string{"app": "s"}
		p.Spec.Affinity = antiAffinity(karpv1.LabelHostname, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "s"}})
	}
	a.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}
	for _, p := range pods {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}}
	}
	b.Spec.Template.Spec.NodeClassRef.Name = "other"
	plan := Solve(&Input{Pods: append(pods, other...), NodePools: []*karpv1.NodePool{a, b},
		InstanceTypes: map[string][]*catalog.InstanceType{"default": reservedTypes(4, true), "other": reservedTypes(3, true)}})
	reserved := 0
	for _, nc := range plan.NodeClaims {
		if nc.CapacityType == karpv1.CapacityTypeReserved {
			reserved++
		}
	}
	if reserved != 3 || len(plan.NodeClaims) != 6 {
		t.Errorf("%d reserved of %d claims, want 3 of 6: %+v", reserved, len(plan.NodeClaims), plan.NodeClaims)
	}
}
