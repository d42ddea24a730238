package static

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/coordinator/disruption"
	"github.com/joiner-dev/joiner/coordinator/fsm"
)

// Collect maps Joiner's objects and raft records onto Karpenter's
// NodePoolState: NodeClaims (launched or not) and committed launches whose
// object is not created yet are active; a pending disruption termination
// makes one pending disruption until its NodeClaim is deleted; a deleting
// NodeClaim or Node, or one the static loop just deleted, is deleting.
func TestCollect(t *testing.T) {
	now := t0.Add(time.Hour)
	del := metav1.NewTime(now)
	nc := func(name, pool, instance string) *karpv1.NodeClaim {
		c := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.LabelNodePool: pool}, CreationTimestamp: metav1.NewTime(t0)}}
		if instance != "" {
			c.Status.ProviderID = "aws:///us-east-1a/" + instance
		}
		return c
	}
	node := func(name, instance string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}
	}
	deletingClaim := nc("s-deleting", "s", "i-3")
	deletingClaim.DeletionTimestamp = &del
	nodeGone := node("node-4", "i-4")
	nodeGone.DeletionTimestamp = &del
	intent := func(id, claim string, st fsm.IntentState, instance string, updated time.Time) fsm.LaunchIntent {
		in := fsm.LaunchIntent{ID: id, State: st, InstanceID: instance, CreatedAt: t0, UpdatedAt: updated}
		in.Spec.LaunchSpec = cloud.LaunchSpec{NodePool: "s", NodeClaim: claim}
		return in
	}
	src := &Sources{Now: now,
		NodeClaims: []*karpv1.NodeClaim{nc("s-active", "s", "i-1"), nc("s-unlaunched", "s", ""), nc("s-disrupting", "s", "i-2"), deletingClaim,
			nc("s-nodegone", "s", "i-4"), nc("s-justdeleted", "s", "i-5"), nc("other", "", "i-6")},
		Nodes:        []*corev1.Node{node("node-1", "i-1"), node("node-2", "i-2"), nodeGone},
		PodsByNode:   map[string][]*corev1.Pod{"node-1": pods("web")},
		Terminations: []fsm.TerminationIntent{{ID: "term-i-2", InstanceID: "i-2", State: fsm.TerminationPending}, {ID: "term-i-9", InstanceID: "i-9", State: fsm.TerminationPending}},
		Intents: []fsm.LaunchIntent{
			intent("a", "s-active", fsm.IntentLaunched, "i-1", t0), // has its object
			intent("b", "s-committed", fsm.IntentPending, "", t0),  // object not created yet
			intent("c", "s-recent", fsm.IntentLaunched, "i-7", now.Add(-10*time.Second)),
			intent("d", "s-stale", fsm.IntentLaunched, "i-8", t0),        // launched long ago, object deleted
			intent("e", "s-terminating", fsm.IntentLaunched, "i-9", now), // being terminated
			intent("f", "s-failed", fsm.IntentFailed, "", now),
		},
		Deleted: map[string]bool{"s-justdeleted": true},
	}
	got := map[string]Claim{}
	for _, c := range Collect(src) {
		got[c.Name] = c
	}
	want := map[string]ClaimState{"s-active": Active, "s-unlaunched": Active, "s-disrupting": PendingDisruption, "s-deleting": Deleting,
		"s-nodegone": Deleting, "s-justdeleted": Deleting, "s-committed": Active, "s-recent": Active}
	if len(got) != len(want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	for name, st := range want {
		if c, ok := got[name]; !ok || c.State != st || c.Pool != "s" {
			t.Errorf("%s: %+v, want state %d", name, c, st)
		}
	}
	if c := got["s-active"]; !c.Object || !c.Resolved || c.Node != "node-1" || len(c.Pods) != 1 {
		t.Errorf("s-active: %+v", c)
	}
	if c := got["s-unlaunched"]; !c.Object || c.Resolved {
		t.Errorf("s-unlaunched: %+v", c)
	}
	if c := got["s-committed"]; c.Object {
		t.Errorf("s-committed has no object: %+v", c)
	}
	if n := Counts(Collect(src))["s"]; n != (disruption.StaticCount{Active: 4, PendingDisruption: 1, Deleting: 3}) {
		t.Errorf("counts %+v", n)
	}
}
