package nodeclass

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/poolhealth"
	"github.com/joiner-dev/joiner/coordinator/view/fake"
)

func readyClass(status metav1.ConditionStatus, reason string) *awsv1.EC2NodeClass {
	c := class("default")
	if status != "" {
		c.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionReady, Status: status, Reason: reason, Message: "msg " + reason}}
	}
	return c
}

func claimOf(name, pool, providerID, cpu string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: pool}}}
	nc.Status.ProviderID = providerID
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("29")}
	return nc
}

// TestPoolStatus pins the NodePool status Karpenter v1.14 writes
// (nodepool readiness, counter and validation controllers).
func TestPoolStatus(t *testing.T) {
	node := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}}}
	nodeOf := func(id string) *corev1.Node {
		if id == node.Spec.ProviderID {
			return node
		}
		return nil
	}
	claims := []*karpv1.NodeClaim{
		claimOf("registered", "default", "aws:///us-east-1a/i-1", "8"), // its Node's capacity counts
		claimOf("in-flight", "default", "", "2"),
		claimOf("other-pool", "other", "", "64"),
		// Going away: not counted (Karpenter's StateNode.Deleted).
		deleting(claimOf("deleting", "default", "", "32")),
		terminating(claimOf("terminating", "default", "", "16")),
	}
	now := metav1.NewTime(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name                string
		invalid             error
		class               *awsv1.EC2NodeClass
		wantReady           metav1.ConditionStatus
		wantReadyMsg        string
		wantClass, wantWhy  string
		wantCPU, wantMemory string
		wantNodes           int64
	}{
		{"ready", nil, readyClass(metav1.ConditionTrue, "Ready"), metav1.ConditionTrue, "", "True", ConditionNodeClassReady, "6", "16Gi", 2},
		{"class not found", nil, nil, metav1.ConditionFalse, "NodeClassReady=False", "False", "NodeClassNotFound", "6", "16Gi", 2},
		{"class not ready", nil, readyClass(metav1.ConditionFalse, "AMIsNotFound"), metav1.ConditionFalse, "NodeClassReady=False", "False", "AMIsNotFound", "6", "16Gi", 2},
		{"class readiness unknown", nil, readyClass("", ""), metav1.ConditionFalse, "NodeClassReady=False", "False", "NodeClassReadinessUnknown", "6", "16Gi", 2},
		{"invalid", errors.New("spec.weight: bad"), readyClass(metav1.ConditionTrue, "Ready"), metav1.ConditionFalse, "ValidationSucceeded=False", "True", ConditionNodeClassReady, "6", "16Gi", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := pool("default")
			st := PoolStatus(np, tc.invalid, tc.class, claims, nodeOf, now)
			ready := meta.FindStatusCondition(st.Conditions, awsv1.ConditionReady)
			if ready == nil || ready.Status != tc.wantReady || ready.Message != tc.wantReadyMsg {
				t.Errorf("Ready = %+v, want %s %q", ready, tc.wantReady, tc.wantReadyMsg)
			}
			if tc.wantReady == metav1.ConditionFalse && ready.Reason != "UnhealthyDependents" {
				t.Errorf("Ready reason %q, want UnhealthyDependents", ready.Reason)
			}
			c := meta.FindStatusCondition(st.Conditions, ConditionNodeClassReady)
			if c == nil || string(c.Status) != tc.wantClass || c.Reason != tc.wantWhy {
				t.Errorf("NodeClassReady = %+v, want %s %s", c, tc.wantClass, tc.wantWhy)
			}
			if v := meta.FindStatusCondition(st.Conditions, awsv1.ConditionValidationSucceeded); v == nil || (v.Status == metav1.ConditionTrue) != (tc.invalid == nil) ||
				(tc.invalid != nil && v.Reason != "NodePoolValidationFailed") {
				t.Errorf("ValidationSucceeded = %+v (Karpenter's reason when invalid: NodePoolValidationFailed)", v)
			}
			if q := st.Resources[corev1.ResourceCPU]; q.Cmp(resource.MustParse(tc.wantCPU)) != 0 {
				t.Errorf("resources cpu %s, want %s", q.String(), tc.wantCPU)
			}
			if q := st.Resources[corev1.ResourceMemory]; q.Cmp(resource.MustParse(tc.wantMemory)) != 0 {
				t.Errorf("resources memory %s, want %s", q.String(), tc.wantMemory)
			}
			if q := st.Resources[karpv1.ResourceNodes]; q.Value() != tc.wantNodes || st.Nodes == nil || *st.Nodes != tc.wantNodes {
				t.Errorf("nodes %s / %v, want %d", q.String(), st.Nodes, tc.wantNodes)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
				if _, ok := st.Resources[r]; !ok {
					t.Errorf("resources lack %s (Karpenter always lists it)", r)
				}
			}
		})
	}
	// A second computation with nothing changed keeps the transition times.
	np := pool("default")
	np.Status = PoolStatus(np, nil, readyClass(metav1.ConditionTrue, "Ready"), claims, nodeOf, now)
	later := PoolStatus(np, nil, readyClass(metav1.ConditionTrue, "Ready"), claims, nodeOf, metav1.NewTime(now.Add(time.Hour)))
	for _, c := range later.Conditions {
		if !c.LastTransitionTime.Equal(&now) {
			t.Errorf("%s moved its transition time with no change", c.Type)
		}
	}
}

// TestHashStamping: the loop writes the current hashes on pools and
// classes, and a hash version change re-stamps NodeClaims that are not
// drifted (Karpenter's hash controllers), so no NodeClaim drifts from the
// version change alone.
func TestHashStamping(t *testing.T) {
	np := pool("default")
	np.Annotations = map[string]string{karpv1.AnnotationNodePoolHash: "old", karpv1.AnnotationNodePoolHashVersion: "v2"}
	fresh := claimOf("fresh", "default", "aws:///us-east-1a/i-1", "2")
	fresh.Annotations = map[string]string{karpv1.AnnotationNodePoolHashVersion: "v2", karpv1.AnnotationNodePoolHash: "old"}
	drifted := claimOf("drifted", "default", "aws:///us-east-1a/i-2", "2")
	drifted.Annotations = map[string]string{karpv1.AnnotationNodePoolHashVersion: "v2", karpv1.AnnotationNodePoolHash: "old"}
	drifted.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"}}
	current := claimOf("current", "default", "aws:///us-east-1a/i-3", "2")
	current.Annotations = map[string]string{karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion, karpv1.AnnotationNodePoolHash: "x"}
	c := &fake.Cache{PoolList: []*karpv1.NodePool{np}, ClaimList: []*karpv1.NodeClaim{fresh, drifted, current}}
	r := newRig(c)
	r.l.Reconcile(context.Background())
	want := np.Hash()
	got := strings.Join(r.kube.Annotated, "\n")
	for _, line := range []string{
		"nodeclaims/fresh map[karpenter.sh/nodepool-hash:" + want + " karpenter.sh/nodepool-hash-version:v3]",
		"nodeclaims/drifted map[karpenter.sh/nodepool-hash-version:v3]",
		"nodepools/default map[karpenter.sh/nodepool-hash:" + want + " karpenter.sh/nodepool-hash-version:v3]",
	} {
		if !slices.Contains(r.kube.Annotated, line) {
			t.Errorf("missing %q in:\n%s", line, got)
		}
	}
	if strings.Contains(got, "nodeclaims/current") {
		t.Errorf("a NodeClaim of the current version was re-stamped:\n%s", got)
	}
}

func deleting(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	t := metav1.NewTime(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	nc.DeletionTimestamp = &t
	return nc
}

func terminating(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionInstanceTerminating, Status: metav1.ConditionTrue,
		Reason: karpv1.ConditionInstanceTerminating})
	return nc
}

// Karpenter's registration health controller: Unknown while nothing is
// known since the pool or its class changed, then True or False from the
// pool's recent registrations; a new leader seeds its record from the
// condition as written.
func TestRegistrationHealth(t *testing.T) {
	np := pool("default")
	np.UID, np.Generation = "uid-pool", 3
	class := readyClass(metav1.ConditionTrue, "Ready")
	class.Generation = 7
	h := poolhealth.New()
	now := metav1.NewTime(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	pass := func() *metav1.Condition {
		t.Helper()
		st := np.Status.DeepCopy()
		RegistrationHealth(st, np, class, h, now)
		np.Status = *st
		if st.NodeClassObservedGeneration != class.Generation {
			t.Fatalf("nodeClassObservedGeneration %d, want %d", st.NodeClassObservedGeneration, class.Generation)
		}
		return meta.FindStatusCondition(st.Conditions, ConditionNodeRegistrationHealthy)
	}
	want := func(c *metav1.Condition, status metav1.ConditionStatus, reason string) {
		t.Helper()
		if c == nil || c.Status != status || c.Reason != reason {
			t.Fatalf("NodeRegistrationHealthy = %+v, want %s %s", c, status, reason)
		}
	}
	want(pass(), metav1.ConditionUnknown, "AwaitingReconciliation")
	want(pass(), metav1.ConditionUnknown, "AwaitingReconciliation") // nothing recorded yet
	h.Registered(np.UID)
	want(pass(), metav1.ConditionTrue, ConditionNodeRegistrationHealthy)
	h.Failed(np.UID, poolhealth.Failure{Reason: "RegistrationFailed", Message: "Failed to register node"})
	want(pass(), metav1.ConditionTrue, ConditionNodeRegistrationHealthy) // 1 of 4
	h.Failed(np.UID, poolhealth.Failure{Reason: "InsufficientCapacity", Message: "later failure"})
	want(pass(), metav1.ConditionFalse, "InsufficientCapacity")
	h.Failed(np.UID, poolhealth.Failure{Reason: "RegistrationFailed", Message: "Failed to register node"})
	want(pass(), metav1.ConditionFalse, "InsufficientCapacity") // kept while it stays False

	// A new leader: its record starts from the condition.
	h = poolhealth.New()
	want(pass(), metav1.ConditionFalse, "InsufficientCapacity")
	h.Registered(np.UID)
	want(pass(), metav1.ConditionFalse, "InsufficientCapacity")

	// The class changes: Unknown, and the record is forgotten.
	class.Generation++
	want(pass(), metav1.ConditionUnknown, "AwaitingReconciliation")
	if st, _ := h.Status(np.UID); st != poolhealth.Unknown {
		t.Fatalf("record kept across a class change: %v", st)
	}
	// So does a change of the pool.
	h.Registered(np.UID)
	want(pass(), metav1.ConditionTrue, ConditionNodeRegistrationHealthy)
	np.Generation++
	want(pass(), metav1.ConditionUnknown, "AwaitingReconciliation")
}
