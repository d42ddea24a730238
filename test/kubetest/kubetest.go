// Package kubetest helps tests that run against a real API server with no
// kubelets: fake Ready nodes, a fake kubelet that runs and removes their
// pods, and a poll-until helper. Test code only.
package kubetest

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

	"github.com/joiner-dev/joiner/test/poll"
)

// RegisterNode creates a Ready node (8 CPU, 32Gi, 110 pods) with no taints,
// the given provider ID (may be empty) and finalizers.
func RegisterNode(ctx context.Context, t testing.TB, c kubernetes.Interface, name, providerID string, finalizers []string) {
	t.Helper()
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}, Finalizers: finalizers},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
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

// Kubelet plays the kubelet for fake nodes: pods of Namespace bound to one
// of Nodes become Running and Ready; pods being deleted are removed
// (terminated) TerminateAfter after it first sees them terminating.
type Kubelet struct {
	Client         kubernetes.Interface
	Namespace      string
	Nodes          map[string]bool
	TerminateAfter time.Duration
	// Logf, if set, reports failed writes.
	Logf func(format string, args ...any)

	mu      sync.Mutex
	seenDel map[string]time.Time
}

// Run tends the pods every 50ms until ctx ends.
func (k *Kubelet) Run(ctx context.Context) {
	for {
		pods, err := k.Client.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range pods.Items {
				k.tend(ctx, &pods.Items[i])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (k *Kubelet) tend(ctx context.Context, p *corev1.Pod) {
	if !k.Nodes[p.Spec.NodeName] {
		return
	}
	if p.DeletionTimestamp != nil {
		k.mu.Lock()
		if k.seenDel == nil {
			k.seenDel = map[string]time.Time{}
		}
		first, ok := k.seenDel[string(p.UID)]
		if !ok {
			first = time.Now()
			k.seenDel[string(p.UID)] = first
		}
		k.mu.Unlock()
		if time.Since(first) >= k.TerminateAfter {
			zero := int64(0)
			err := k.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
				k.logf("fake kubelet: deleting %s: %v", p.Name, err)
			}
		}
		return
	}
	if PodReady(p) {
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
	if _, err := k.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		k.logf("fake kubelet: pod %s status: %v", p.Name, err)
	}
}

func (k *Kubelet) logf(format string, args ...any) {
	if k.Logf != nil {
		k.Logf(format, args...)
	}
}

// PodReady says whether a pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitFor polls cond every 100ms and fails t if it does not hold within d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 100*time.Millisecond, what, cond)
}
