package provisioner

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
)

// reserveXLarge adds capacity reservation cr-1 of n m5.xlarge in
// us-east-1a to the listed types, priced as the AWS provider prices it.
func reserveXLarge(n int) func([]*catalog.InstanceType) []*catalog.InstanceType {
	return func(its []*catalog.InstanceType) []*catalog.InstanceType {
		out := make([]*catalog.InstanceType, len(its))
		for i, it := range its {
			out[i] = it
			if it.Name != "m5.xlarge" {
				continue
			}
			c := *it
			c.Offerings = append(slices.Clone(it.Offerings), catalog.Offering{Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved,
				Price: 0.192 / 1e7, Available: true, ReservationID: "cr-1", ReservationType: "default", ReservationCapacity: n})
			out[i] = &c
		}
		return out
	}
}

// TestPodsLandOnReservedCapacityFirst: five pods that each need a node, a
// pool that allows reserved and on-demand capacity, and a reservation of
// two m5.xlarge: two NodeClaims launch into the reservation (one reserved
// candidate each, pinned to it, labelled reserved; the reservation labels
// come with the launch) and three overflow to on-demand in the same pass.
func TestPodsLandOnReservedCapacityFirst(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "r"}}
	var pods []*corev1.Pod
	for i := range 5 {
		p := pendingPod(fmt.Sprintf("r%d", i), "3")
		p.Labels = map[string]string{"app": "r"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: sel, TopologyKey: karpv1.LabelHostname}}}}
		pods = append(pods, p)
	}
	c := &fake.Cache{PodList: pods, ClassList: []*awsv1.EC2NodeClass{class()},
		PoolList: []*karpv1.NodePool{pool("general", req(karpv1.LabelCapacityType, "In", "reserved", "on-demand"))}}
	r := newTestProvisionerOn(t, c, &fakeCloud{offer: reserveXLarge(2)})
	if err := r.p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	intents := r.state.Intents()
	if len(intents) != 5 || len(r.w.created) != 5 {
		t.Fatalf("%d intents, %d nodeclaims; want 5", len(intents), len(r.w.created))
	}
	reserved := 0
	for _, in := range intents {
		cands := in.Spec.Candidates
		if cands[0].CapacityType != karpv1.CapacityTypeReserved {
			for _, cand := range cands {
				if cand.CapacityType != karpv1.CapacityTypeOnDemand || cand.ReservationID != "" {
					t.Errorf("overflow claim %s: candidate %+v", in.Spec.NodeClaim, cand)
				}
			}
			continue
		}
		reserved++
		nc := fake.Find(r.w.created, in.Spec.NodeClaim)
		if len(cands) != 1 || cands[0].InstanceType != "m5.xlarge" || cands[0].Zone != "us-east-1a" || cands[0].ReservationID != "cr-1" ||
			cands[0].ReservationType != "default" {
			t.Errorf("reserved claim %s: candidates %+v", in.Spec.NodeClaim, cands)
		}
		if !hasReq(nc.Spec.Requirements, karpv1.LabelCapacityType, karpv1.CapacityTypeReserved) || !hasReq(nc.Spec.Requirements, karpv1.LabelCapacityReservationID, "cr-1") {
			t.Errorf("reserved claim %s: requirements %+v", nc.Name, nc.Spec.Requirements)
		}
		if nc.Labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeReserved || nc.Labels[karpv1.LabelCapacityReservationID] != "" ||
			in.Spec.Labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeReserved {
			t.Errorf("reserved claim %s: labels %v, launch labels %v", nc.Name, nc.Labels, in.Spec.Labels)
		}
	}
	if reserved != 2 {
		t.Errorf("%d claims launch into the reservation, want 2", reserved)
	}
}

// hasReq: reqs hold key In exactly [value].
func hasReq(reqs []karpv1.NodeSelectorRequirementWithMinValues, key, value string) bool {
	return slices.ContainsFunc(reqs, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
		return r.Key == key && r.Operator == karpv1.OpIn && slices.Equal(r.Values, []string{value})
	})
}
