package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func unschedulable(uid types.UID, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(uid), Namespace: "default", UID: uid, Labels: labels},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
}

func tainted(uid types.UID, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(uid), UID: uid}, Spec: corev1.NodeSpec{Taints: taints}}
}

func ready(n *corev1.Node) *corev1.Node {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

var disrupted = corev1.Taint{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}

// Karpenter's provisioner triggers: a provisionable pod or a disrupted
// node triggers once per batch (until rearmed) while it qualifies; the
// churn of other objects does not.
func TestProvisioningTriggers(t *testing.T) {
	type step struct {
		name string
		do   func(pods, nodes, classes, claims cache.ResourceEventHandler)
		// fires says whether this step triggers.
		fires bool
	}
	var tr provisioningTriggers
	pod := unschedulable("p1", nil)
	bound := unschedulable("p1", nil)
	bound.Spec.NodeName = "n1"
	pending := unschedulable("p2", nil)
	pending.Status.Conditions = nil // kube-scheduler has not tried it yet
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", UID: "np", Generation: 1}}
	poolStatus := pool.DeepCopy()
	poolStatus.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: {}}
	poolSpec := pool.DeepCopy()
	poolSpec.Generation = 2
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "nc", Generation: 1}}
	classReady := class.DeepCopy()
	classReady.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionReady, Status: metav1.ConditionTrue}}
	classReadyAgain := classReady.DeepCopy()
	classReadyAgain.Status.AMIs = []awsv1.AMI{{ID: "ami-1"}}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "c1"}}
	claimStatus := claim.DeepCopy()
	claimStatus.Status.NodeName = "n1"
	claimDeleting := claimStatus.DeepCopy()
	claimDeleting.DeletionTimestamp = &metav1.Time{}
	steps := []step{
		{"a pod kube-scheduler has not tried", func(p, _, _, _ cache.ResourceEventHandler) { p.OnAdd(pending, false) }, false},
		{"it becomes unschedulable", func(p, _, _, _ cache.ResourceEventHandler) { p.OnUpdate(pending, unschedulable("p2", nil)) }, true},
		{"a provisionable pod listed", func(p, _, _, _ cache.ResourceEventHandler) { p.OnAdd(pod, true) }, true},
		{"its labels change", func(p, _, _, _ cache.ResourceEventHandler) {
			p.OnUpdate(pod, unschedulable("p1", map[string]string{"a": "b"}))
		}, false},
		{"it is updated again", func(p, _, _, _ cache.ResourceEventHandler) { p.OnUpdate(pod, pod) }, false},
		{"updated once the batch closed", func(p, _, _, _ cache.ResourceEventHandler) { tr.rearm(); p.OnUpdate(pod, pod) }, true},
		{"and again in the new batch", func(p, _, _, _ cache.ResourceEventHandler) { p.OnUpdate(pod, pod) }, false},
		{"it is bound", func(p, _, _, _ cache.ResourceEventHandler) { p.OnUpdate(pod, bound) }, false},
		{"it is unschedulable again (unbound by a test)", func(p, _, _, _ cache.ResourceEventHandler) { p.OnUpdate(bound, pod) }, true},
		{"it is deleted", func(p, _, _, _ cache.ResourceEventHandler) { p.OnDelete(cache.DeletedFinalStateUnknown{Obj: pod}) }, false},
		{"it is seen again", func(p, _, _, _ cache.ResourceEventHandler) { p.OnAdd(pod, false) }, true},
		{"a node joins", func(_, n, _, _ cache.ResourceEventHandler) { n.OnAdd(tainted("n1"), false) }, true},
		{"it turns Ready", func(_, n, _, _ cache.ResourceEventHandler) { n.OnUpdate(tainted("n1"), ready(tainted("n1"))) }, true},
		{"its Ready heartbeat", func(_, n, _, _ cache.ResourceEventHandler) {
			n.OnUpdate(ready(tainted("n1")), ready(tainted("n1")))
		}, false},
		{"a node with another taint", func(_, n, _, _ cache.ResourceEventHandler) {
			n.OnUpdate(tainted("n1"), tainted("n1", corev1.Taint{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoExecute}))
		}, false},
		{"the node is disrupted", func(_, n, _, _ cache.ResourceEventHandler) { n.OnUpdate(tainted("n1"), tainted("n1", disrupted)) }, true},
		{"its heartbeat", func(_, n, _, _ cache.ResourceEventHandler) {
			n.OnUpdate(tainted("n1", disrupted), tainted("n1", disrupted))
		}, false},
		{"its heartbeat once the batch closed", func(_, n, _, _ cache.ResourceEventHandler) {
			tr.rearm()
			n.OnUpdate(tainted("n1", disrupted), tainted("n1", disrupted))
		}, true},
		{"the taint is removed", func(_, n, _, _ cache.ResourceEventHandler) { n.OnUpdate(tainted("n1", disrupted), tainted("n1")) }, false},
		{"and put back", func(_, n, _, _ cache.ResourceEventHandler) { n.OnUpdate(tainted("n1"), tainted("n1", disrupted)) }, true},
		{"a NodePool appears", func(_, _, c, _ cache.ResourceEventHandler) { c.OnAdd(pool, false) }, true},
		{"its status is written", func(_, _, c, _ cache.ResourceEventHandler) { c.OnUpdate(pool, poolStatus) }, false},
		{"its spec changes", func(_, _, c, _ cache.ResourceEventHandler) { c.OnUpdate(poolStatus, poolSpec) }, true},
		{"an EC2NodeClass appears", func(_, _, c, _ cache.ResourceEventHandler) { c.OnAdd(class, false) }, true},
		{"it becomes Ready", func(_, _, c, _ cache.ResourceEventHandler) { c.OnUpdate(class, classReady) }, true},
		{"its status changes, still Ready", func(_, _, c, _ cache.ResourceEventHandler) { c.OnUpdate(classReady, classReadyAgain) }, false},
		{"a NodeClaim's status is written", func(_, _, _, c cache.ResourceEventHandler) { c.OnUpdate(claim, claimStatus) }, false},
		{"it is being deleted", func(_, _, _, c cache.ResourceEventHandler) { c.OnUpdate(claimStatus, claimDeleting) }, true},
		{"its status is written while it goes", func(_, _, _, c cache.ResourceEventHandler) { c.OnUpdate(claimDeleting, claimDeleting) }, false},
		{"a NodeClaim is gone", func(_, _, _, c cache.ResourceEventHandler) {
			c.OnDelete(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
		}, true},
	}
	ch, stop := tr.out.subscribe()
	defer stop()
	pods, nodes, classes, claims := tr.handlers()
	for _, s := range steps {
		s.do(pods, nodes, classes, claims)
		var fired bool
		select {
		case <-ch:
			fired = true
		default:
		}
		if fired != s.fires {
			t.Errorf("%s: triggered = %t, want %t", s.name, fired, s.fires)
		}
	}
}
