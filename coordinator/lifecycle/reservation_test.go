package lifecycle

import (
	"context"
	"maps"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/view"
)

// TestApplyLaunchReservationLabels: an instance launched into a capacity
// reservation gives its NodeClaim the reservation's ID, type and
// interruptibility (from the candidate it launched from) with capacity
// type reserved, as Karpenter labels a reserved NodeClaim; other instances
// get no reservation label.
func TestApplyLaunchReservationLabels(t *testing.T) {
	reserved := cloud.Candidate{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: karpv1.CapacityTypeReserved, ImageID: "ami-a",
		ReservationID: "cr-1", ReservationType: "capacity-block"}
	tests := []struct {
		name string
		inst func(*fsm.Instance)
		want map[string]string
	}{
		{"reserved", func(i *fsm.Instance) { i.CapacityType = karpv1.CapacityTypeReserved }, map[string]string{
			karpv1.LabelCapacityType: karpv1.CapacityTypeReserved, karpv1.LabelCapacityReservationID: "cr-1",
			karpv1.LabelCapacityReservationType: "capacity-block", karpv1.LabelCapacityReservationInterruptible: "false"}},
		{"spot", func(*fsm.Instance) {}, map[string]string{karpv1.LabelCapacityType: karpv1.CapacityTypeSpot}},
	}
	for _, tc := range tests {
		in := intent(fsm.IntentLaunched)
		in.Spec.Candidates = append(in.Spec.Candidates, reserved)
		inst := instance(fsm.InstanceLaunched)
		tc.inst(&inst)
		nc := claim()
		ApplyLaunch(nc, in, inst, nil, t0)
		got := map[string]string{}
		for k, v := range nc.Labels {
			if k == karpv1.LabelCapacityType || karpv1.ReservationLabels[k] {
				got[k] = v
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: labels %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDemoteReserved(t *testing.T) {
	tests := []struct {
		in, want map[string]string
		changed  bool
	}{
		{map[string]string{karpv1.LabelCapacityType: "reserved", karpv1.LabelCapacityReservationID: "cr-1",
			karpv1.LabelCapacityReservationType: "default", karpv1.LabelCapacityReservationInterruptible: "false", "team": "a"},
			map[string]string{karpv1.LabelCapacityType: "on-demand", karpv1.LabelCapacityReservationInterruptible: "false", "team": "a"}, true},
		{map[string]string{karpv1.LabelCapacityType: "spot"}, map[string]string{karpv1.LabelCapacityType: "spot"}, false},
		{map[string]string{}, map[string]string{}, false},
	}
	for _, tc := range tests {
		got := maps.Clone(tc.in)
		if changed := DemoteReserved(got); changed != tc.changed || !maps.Equal(got, tc.want) {
			t.Errorf("DemoteReserved(%v) = %v, %v; want %v, %v", tc.in, got, changed, tc.want, tc.changed)
		}
	}
}

// TestReservationEndDemotesClaimAndNode: garbage collection's listing
// says an instance of a reserved NodeClaim runs on demand now (its
// reservation ended): the NodeClaim and its registered Node turn
// on-demand without the reservation labels (Karpenter's capacity-type
// controller); a Node not registered yet, a NodeClaim being deleted and an
// instance still reserved are left alone.
func TestReservationEndDemotesClaimAndNode(t *testing.T) {
	reservedLabels := func(labels map[string]string) {
		labels[karpv1.LabelCapacityType] = karpv1.CapacityTypeReserved
		labels[karpv1.LabelCapacityReservationID] = "cr-1"
		labels[karpv1.LabelCapacityReservationType] = "default"
	}
	tests := []struct {
		name       string
		cloudType  string
		registered bool
		deleting   bool
		claimType  string // capacity type label after the pass
		nodeType   string
	}{
		{"ended", karpv1.CapacityTypeOnDemand, true, false, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeOnDemand},
		{"node not registered yet", karpv1.CapacityTypeOnDemand, false, false, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved},
		{"still reserved", karpv1.CapacityTypeReserved, true, false, karpv1.CapacityTypeReserved, karpv1.CapacityTypeReserved},
		{"claim being deleted", karpv1.CapacityTypeOnDemand, true, true, karpv1.CapacityTypeReserved, karpv1.CapacityTypeReserved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			nc := claim(launchedClaim(t0), func(nc *karpv1.NodeClaim) {
				reservedLabels(nc.Labels)
				if tc.deleting {
					nc.DeletionTimestamp = &metav1.Time{Time: t0}
				}
			})
			h := newHarness(t, Config{}, nc)
			n := node(func(n *corev1.Node) {
				reservedLabels(n.Labels)
				if tc.registered {
					n.Labels[karpv1.LabelRegistered] = "true"
				}
			})
			if _, err := h.kube.nodes.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.cloud.insts["i-1"] = cloud.Instance{ID: "i-1", State: "running", CapacityType: tc.cloudType}
			if _, err := h.l.CollectGarbage(ctx); err != nil {
				t.Fatal(err)
			}
			cl, nd := h.claim().Labels, h.node().Labels
			if cl[karpv1.LabelCapacityType] != tc.claimType || nd[karpv1.LabelCapacityType] != tc.nodeType {
				t.Errorf("nodeclaim %v, node %v; want capacity types %s, %s", cl, nd, tc.claimType, tc.nodeType)
			}
			if _, ok := cl[karpv1.LabelCapacityReservationID]; ok == (tc.claimType == karpv1.CapacityTypeOnDemand) {
				t.Errorf("nodeclaim labels %v", cl)
			}
		})
	}
}

// blockClasses resolve every class to capacity block cr-b ending at end.
type blockClasses struct{ end time.Time }

func (c blockClasses) Class(string) *view.Class {
	end := metav1.NewTime(c.end)
	return &view.Class{Resolved: cloud.Resolved{CapacityReservations: []awsv1.CapacityReservation{
		{ID: "cr-b", ReservationType: awsv1.CapacityReservationTypeCapacityBlock, EndTime: &end}}}}
}

// TestExpiringCapacityBlockDeletesItsClaims: a NodeClaim in a capacity
// block is deleted from 40 minutes before the block ends (Karpenter's
// expiration controller); one in an ODCR, or in another reservation, stays.
func TestExpiringCapacityBlockDeletesItsClaims(t *testing.T) {
	end := t0.Add(2 * time.Hour)
	tests := []struct {
		name    string
		now     time.Time
		id, typ string
		deleted bool
	}{
		{"41 minutes before", end.Add(-41 * time.Minute), "cr-b", "capacity-block", false},
		{"40 minutes before", end.Add(-40 * time.Minute), "cr-b", "capacity-block", true},
		{"other reservation", end, "cr-x", "capacity-block", false},
		{"ODCR label", end, "cr-b", "default", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := claim(launchedClaim(t0), func(nc *karpv1.NodeClaim) {
				nc.Labels[karpv1.LabelCapacityType] = karpv1.CapacityTypeReserved
				nc.Labels[karpv1.LabelCapacityReservationID] = tc.id
				nc.Labels[karpv1.LabelCapacityReservationType] = tc.typ
			})
			h := newHarness(t, Config{}, nc)
			l, err := New(Config{Now: func() time.Time { return tc.now }}, Deps{Cache: h.kube, Claims: h.kube, Nodes: h.kube.nodes,
				State: h.state, Raft: h.raft, Cloud: h.cloud, Classes: blockClasses{end}, Log: zaptest.NewLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			h.cloud.insts["i-1"] = cloud.Instance{ID: "i-1", State: "running", CapacityType: karpv1.CapacityTypeReserved}
			if _, err := l.CollectGarbage(context.Background()); err != nil {
				t.Fatal(err)
			}
			if deleted := len(h.kube.deleted) == 1; deleted != tc.deleted ||
				(deleted && h.claim().Annotations[karpv1.AnnotationDisruptionReason] != ReasonCapacityBlockExpiring) {
				t.Errorf("deleted %v, annotations %v; want deleted %v", h.kube.deleted, h.claim().Annotations, tc.deleted)
			}
		})
	}
}
