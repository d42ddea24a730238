package drain_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// fakeKubelet plays the kubelet for fake nodes: pods bound to them become
// Running and Ready; pods being deleted are removed (terminated) shortly after.
type fakeKubelet struct {
	c     kubernetes.Interface
	ns    string
	nodes map[string]bool
	// TerminateAfter is how long a terminating pod lingers.
	terminateAfter time.Duration

	mu      sync.Mutex
	seenDel map[string]time.Time
}

func newFakeNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Capacity: list, Allocatable: list,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status = node.Status
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s status: %v", name, err)
	}
	// Admission puts node.kubernetes.io/not-ready on a new node; the node
	// lifecycle controller (off in these tests) would lift it once Ready.
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = nil
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s taints: %v", name, err)
	}
}

// run loops until ctx ends.
func (k *fakeKubelet) run(ctx context.Context, t *testing.T) {
	for {
		pods, err := k.c.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range pods.Items {
				k.tend(ctx, t, &pods.Items[i])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (k *fakeKubelet) tend(ctx context.Context, t *testing.T, p *corev1.Pod) {
	if !k.nodes[p.Spec.NodeName] {
		return
	}
	if p.DeletionTimestamp != nil {
		k.mu.Lock()
		first, ok := k.seenDel[string(p.UID)]
		if !ok {
			first = time.Now()
			k.seenDel[string(p.UID)] = first
		}
		k.mu.Unlock()
		if time.Since(first) >= k.terminateAfter {
			zero := int64(0)
			err := k.c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
				t.Logf("fake kubelet: deleting %s: %v", p.Name, err)
			}
		}
		return
	}
	if isReady(p) {
		return
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	if _, err := k.c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		t.Logf("fake kubelet: pod %s status: %v", p.Name, err)
	}
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
