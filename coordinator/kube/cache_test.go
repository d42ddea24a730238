package kube

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/test/poll"
	"github.com/joiner-dev/joiner/test/testenv"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 2*time.Minute, 50*time.Millisecond, what, cond)
}

// TestCacheAndClients runs the typed CRD clients and the cache against a
// real API server with the CRDs installed.
func TestCacheAndClients(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: true})
	c, err := NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := NewCache(c, zaptest.NewLogger(t))
	done := make(chan struct{})
	go func() { _ = k.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	changes, unsub := k.Changes()
	defer unsub()
	if err := k.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}

	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", Labels: map[string]string{karpv1.LabelNodePool: "default"},
			Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{
				Key: corev1.LabelInstanceTypeStable, Operator: karpv1.OpIn, Values: []string{"m5.large"}}},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		},
	}
	created, err := c.CreateNodeClaim(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	created.Status.ProviderID = "aws:///us-east-1a/i-0123"
	if _, err := c.UpdateNodeClaimStatus(ctx, created); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-time.After(2 * time.Minute):
		t.Fatal("no change notification")
	}
	waitFor(t, "nodeclaim by providerID in the cache", func() bool {
		got := k.NodeClaimByProviderID("aws:///us-east-1a/i-0123")
		return got != nil && got.Name == nc.Name
	})
	got := k.NodeClaim(nc.Name)
	if got.Spec.NodeClassRef.Name != "default" || got.Spec.Requirements[0].Values[0] != "m5.large" {
		t.Fatalf("cached nodeclaim spec = %+v", got.Spec)
	}
	if len(k.NodeClaims()) != 1 {
		t.Fatalf("NodeClaims() = %d, want 1", len(k.NodeClaims()))
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123"}}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node and pod in the cache", func() bool {
		n := k.NodeByProviderID("aws:///us-east-1a/i-0123")
		return n != nil && n.Name == "n1" && len(k.PodsOnNode("n1")) == 1 && k.Pod("default", "p") != nil
	})

	latest, err := c.GetNodeClaim(ctx, nc.Name)
	if err != nil {
		t.Fatal(err)
	}
	latest.Finalizers = nil
	if _, err := c.UpdateNodeClaim(ctx, latest); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNodeClaim(ctx, nc.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNodeClaim(ctx, nc.Name); err != nil {
		t.Fatalf("deleting a deleted nodeclaim: %v", err)
	}
	waitFor(t, "nodeclaim gone from the cache", func() bool { return k.NodeClaim(nc.Name) == nil })

	// Provisioning triggers through the informers: a pod kube-scheduler
	// gave up on triggers once; its later updates do not.
	fired := func() int { k.provisioning.mu.Lock(); defer k.provisioning.mu.Unlock(); return k.provisioning.fired }
	waitFor(t, "the node's joining and the nodeclaim's deletion triggered provisioning", func() bool { return fired() == 2 })
	triggers, unsubTriggers := k.ProvisioningTriggers()
	defer unsubTriggers()
	unschedulable := func(name string) *corev1.Pod {
		p, err := c.Kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		if p, err = c.Kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	q := unschedulable("q")
	select {
	case <-triggers:
	case <-time.After(2 * time.Minute):
		t.Fatal("no provisioning trigger for an unschedulable pod")
	}
	q.Labels = map[string]string{"churn": "1"}
	if _, err := c.Kube.CoreV1().Pods("default").Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := unschedulable("r") // the pod informer hands events over in order: q's update is seen first
	waitFor(t, "pod r's trigger", func() bool {
		k.provisioning.mu.Lock()
		defer k.provisioning.mu.Unlock()
		_, ok := k.provisioning.on[r.UID]
		return ok
	})
	if got := fired(); got != 4 {
		t.Fatalf("provisioning triggers = %d, want 4 (node joined, nodeclaim gone, pod q, pod r; not q's label update)", got)
	}
}
