package termination

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/observe"
)

// Cases of Karpenter v1.14.1's node termination suite
// (pkg/controllers/node/termination/suite_test.go) not covered elsewhere,
// in the controller's terms.

func readyStatus(status corev1.ConditionStatus) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: status})
	}
}

// TestNodeOfGoneInstance: Karpenter's "delete nodes with no underlying
// instance even if not fully drained" and "not delete nodes with no
// underlying instance if the node is still Ready". A Node whose kubelet
// is not Ready and whose instance the cloud no longer knows is not drained
// (its pods could only go stuck terminating, or wait for ever on a
// budget): the termination goes straight on. A Ready kubelet is still
// running whatever the cloud says, so its node is drained.
func TestNodeOfGoneInstance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ready     nodeOpt
		lost      bool
		wantDrain bool
	}{
		{"not ready, instance gone: no drain", readyStatus(corev1.ConditionFalse), true, false},
		{"ready condition unknown, instance gone: no drain", readyStatus(corev1.ConditionUnknown), true, false},
		{"ready, instance gone: drained", readyStatus(corev1.ConditionTrue), true, true},
		{"not ready, instance running: drained", readyStatus(corev1.ConditionFalse), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := claim(fresh)
			r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{node(tc.ready)})
			r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
			r.cloud.lost = tc.lost
			r.pastMinDrain(t)
			r.settle(t, 6)
			r.wantReleased(t, nc.Name)
			if drained := len(r.drainer.drains) > 0; drained != tc.wantDrain {
				t.Errorf("drains %d, want drained %v", len(r.drainer.drains), tc.wantDrain)
			}
		})
	}
}

// TestNodeTerminationMetrics: Karpenter's "fire the terminationSummary
// metric", "the nodesTerminated counter metric" and "the lifetime duration
// histogram metric when deleting nodes": each Node released by the
// termination counts once in karpenter_nodes_terminated_total (pool and
// zone) and observes karpenter_nodes_termination_duration_seconds and
// karpenter_nodes_lifetime_duration_seconds, whether or not it has a
// NodeClaim; karpenter_nodes_drained_total counts only a NodeClaim's node
// (Karpenter counts it on the NodeClaim's Drained condition).
func TestNodeTerminationMetrics(t *testing.T) {
	labelled := func(n *corev1.Node) {
		n.Labels = map[string]string{karpv1.LabelNodePool: "default", karpv1.LabelZone: "us-east-1a"}
		n.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	}
	for _, tc := range []struct {
		name        string
		withClaim   bool
		wantDrained float64
	}{
		{"node of a nodeclaim", true, 1},
		{"node without a nodeclaim", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *rig
			if tc.withClaim {
				nc := claim(fresh, func(nc *karpv1.NodeClaim) { nc.Labels = map[string]string{karpv1.LabelNodePool: "default"} })
				r = newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{node(labelled)})
				r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
			} else {
				r = newRig(t, Config{}, nil, []*corev1.Node{node(labelled, nodeDeleting)})
			}
			r.pastMinDrain(t)
			r.settle(t, 6)
			if n := r.node(t, "ip-10-0-0-1"); n != nil && hasFinalizer(n.Finalizers) {
				t.Fatalf("node not released: finalizers %v", n.Finalizers)
			}
			pool := map[string]string{"nodepool": "default"}
			for _, m := range []struct {
				name   string
				labels map[string]string
				want   float64
			}{
				{"karpenter_nodes_terminated_total", map[string]string{"nodepool": "default", "zone": "us-east-1a"}, 1},
				{"karpenter_nodes_termination_duration_seconds", pool, 1},
				{"karpenter_nodes_lifetime_duration_seconds", pool, 1},
				{"karpenter_nodes_drained_total", pool, tc.wantDrained},
			} {
				if got, _ := observe.Sample(t, r.reg, m.name, m.labels); got != m.want {
					t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
				}
			}
		})
	}
}

// TestDecideGoneInstance: the steps of TestNodeOfGoneInstance. The cloud
// is asked before the drain only while the kubelet is not Ready
// (kubeletDown); a gone instance then skips the drain and the wait for
// volumes, not the termination call, the Node's deletion or the wait for
// the instance.
func TestDecideGoneInstance(t *testing.T) {
	pending, done := term(fsm.TerminationPending), term(fsm.TerminationDone)
	notReady, ready := readyStatus(corev1.ConditionFalse), readyStatus(corev1.ConditionTrue)
	gone := func(n *corev1.Node, termination *fsm.TerminationIntent) ClaimInput {
		return ClaimInput{Claim: claim(deleting), Node: n, InstanceID: "i-0123", Instance: true, Termination: termination,
			InstanceChecked: true, InstanceGone: true, VolumesChecked: true, Attachments: []string{"va-1"}, Now: t0}
	}
	for _, c := range []struct {
		name    string
		in      ClaimInput
		want    Step
		wantAsk bool
	}{
		{"not ready, gone: terminate, no drain, no volume wait", gone(node(tainted, notReady), pending), StepTerminate, true},
		{"not ready, gone, not tainted yet: terminate", gone(node(notReady), pending), StepTerminate, true},
		{"no Ready condition, gone: terminate", gone(node(tainted), pending), StepTerminate, true},
		{"ready, gone: drain", gone(node(tainted, ready), pending), StepDrain, false},
		{"not ready, gone, terminated: delete the node", gone(node(tainted, notReady), done), StepDeleteNode, true},
		{"not ready, not checked: drain", ClaimInput{Claim: claim(deleting), Node: node(tainted, notReady), InstanceID: "i-0123", Instance: true,
			Termination: pending, Now: t0}, StepDrain, true},
		{"not ready, drained: no need to ask", ClaimInput{Claim: claim(deleting, cond(karpv1.ConditionDrained)), Node: node(tainted, notReady),
			InstanceID: "i-0123", Instance: true, Termination: pending}, StepTerminate, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Decide(c.in); got != c.want {
				t.Errorf("Decide = %s, want %s", got, c.want)
			}
			if got := kubeletDown(c.in); got != c.wantAsk {
				t.Errorf("kubeletDown = %v, want %v", got, c.wantAsk)
			}
		})
	}
}
