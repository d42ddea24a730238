package harness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/internal/backoff"
)

// kubeletEvery is how often the kubelet stand-in looks at the pods, and
// kubeletWorkers how many pods it updates at once.
const (
	kubeletEvery   = 500 * time.Millisecond
	kubeletWorkers = 8
)

// runKubelet does for the sim's nodes (Nodes whose providerID is aws:///...)
// the two things of a kubelet that the rest of the system waits on, until
// ctx ends: a pod bound to such a node becomes Running and Ready, and a pod
// being deleted there is removed (grace period 0), as a kubelet does once
// its containers have stopped. Without it, evicted pods stay Terminating
// forever and drains never finish.
func (h *Harness) runKubelet(ctx context.Context) {
	for {
		if err := h.kubeletPass(ctx); err != nil && ctx.Err() == nil {
			h.opts.Log.Debug("kubelet stand-in", zap.Error(err))
		}
		if !backoff.Sleep(ctx, kubeletEvery) {
			return
		}
	}
}

func (h *Harness) kubeletPass(ctx context.Context) error {
	c := h.Env.Client
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	simNodes := map[string]bool{}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Spec.ProviderID, "aws:///") {
			simNodes[n.Name] = true
		}
	}
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	var firstErr error
	keep := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && firstErr == nil {
			firstErr = err
		}
	}
	zero := int64(0)
	exists := nodeNames(nodes.Items)
	// Many kubelets act at once: a few workers, so a thousand pods are not
	// marked one after the other.
	work := make(chan func() error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range kubeletWorkers {
		wg.Go(func() {
			for f := range work {
				err := f()
				mu.Lock()
				keep(err)
				mu.Unlock()
			}
		})
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		// A pod bound to a Node that is gone (or never was a sim node but
		// is being deleted) has no kubelet to confirm its deletion either.
		onSim := simNodes[p.Spec.NodeName]
		_, nodeExists := exists[p.Spec.NodeName]
		switch {
		case p.DeletionTimestamp != nil && (onSim || !nodeExists):
			work <- func() error {
				return c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		case onSim && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending:
			work <- func() error { return h.markRunning(ctx, p) }
		}
	}
	close(work)
	wg.Wait()
	return firstErr
}

func nodeNames(nodes []corev1.Node) map[string]struct{} {
	out := make(map[string]struct{}, len(nodes))
	for _, n := range nodes {
		out[n.Name] = struct{}{}
	}
	return out
}

// markRunning sets the pod Running with every container ready.
func (h *Harness) markRunning(ctx context.Context, p *corev1.Pod) error {
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, ct := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ct.Name, Image: ct.Image, Ready: true, Started: ptrTrue(),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, err := h.Env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

func ptrTrue() *bool { b := true; return &b }
