package drain

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"

	corekarp "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/logging"
)

// LabelExcludeFromLB asks cloud load balancers to stop sending traffic to the node.
const LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"

// Taints returns the taints Drain puts on a node for reason.
func Taints(reason string) []corev1.Taint {
	return []corev1.Taint{
		{Key: corekarp.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: TaintInterruptionKey, Value: reason, Effect: corev1.TaintEffectNoSchedule},
	}
}

// Cordon puts the taints on the node, marks it unschedulable and sets the
// condition, in one update where possible. It is a no-op on a node that
// already has all of them.
func (d *Drainer) Cordon(ctx context.Context, req Request) error {
	log := d.log.With(logging.Node(req.Node), zap.String("reason", req.Reason))
	if d.opts.DryRun {
		log.Info("dry-run: would have tainted and cordoned the node", zap.Any("taints", Taints(req.Reason)))
		return nil
	}
	changed := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := d.kube.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed = false
		for _, t := range Taints(req.Reason) {
			i := taintIndex(node.Spec.Taints, t)
			switch {
			case i < 0:
				node.Spec.Taints = append(node.Spec.Taints, t)
				changed = true
			case req.Evict && node.Spec.Taints[i].Value != t.Value:
				// A drain's reason outranks a taint-only one (spot after rebalance).
				node.Spec.Taints[i].Value = t.Value
				changed = true
			}
		}
		if !node.Spec.Unschedulable {
			node.Spec.Unschedulable = true
			changed = true
		}
		if req.Evict && node.Labels[LabelExcludeFromLB] == "" {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[LabelExcludeFromLB] = "joiner"
			changed = true
		}
		if !changed {
			return nil
		}
		_, err = d.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("cordoning node %s: %w", req.Node, err)
	}
	if changed {
		log.Info("node tainted and cordoned")
		d.event(ctx, req, corev1.EventTypeWarning, "Cordoned", fmt.Sprintf("Cordoned (%s): %s", req.Reason, req.Message))
		d.setCondition(ctx, req, "Cordoned", req.Message)
	}
	return nil
}

// taintIndex is the index in ts of the taint with t's key and effect (a node
// carries at most one per key and effect), or -1.
func taintIndex(ts []corev1.Taint, t corev1.Taint) int {
	for i, x := range ts {
		if x.Key == t.Key && x.Effect == t.Effect {
			return i
		}
	}
	return -1
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool { return taintIndex(ts, t) >= 0 }

// setCondition sets the joiner.io/Interruption condition (best effort: a
// failure is logged, the drain goes on).
func (d *Drainer) setCondition(ctx context.Context, req Request, reason, msg string) {
	if d.opts.DryRun {
		return
	}
	now := metav1.NewTime(d.opts.Now())
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := d.kube.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := corev1.NodeCondition{
			Type: ConditionType, Status: corev1.ConditionTrue, Reason: reason, Message: truncate(msg, 1024),
			LastHeartbeatTime: now, LastTransitionTime: now,
		}
		found := false
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == ConditionType {
				c.LastTransitionTime = node.Status.Conditions[i].LastTransitionTime
				node.Status.Conditions[i] = c
				found = true
			}
		}
		if !found {
			node.Status.Conditions = append(node.Status.Conditions, c)
		}
		_, err = d.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		d.log.Warn("setting node condition", logging.Node(req.Node), zap.Error(err))
	}
}

// event records a Kubernetes Event on the node (best effort).
func (d *Drainer) event(ctx context.Context, req Request, typ, reason, msg string) {
	if d.opts.DryRun {
		d.log.Info("dry-run: would have recorded event", logging.Node(req.Node), zap.String("event-reason", reason), zap.String("message", msg))
		return
	}
	now := d.opts.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      req.Node + "." + strconv.FormatInt(now.UnixNano(), 16),
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: req.Node, UID: "" /* nodes are referenced by name */},
		Reason:         reason,
		Message:        truncate(msg, 1024),
		Type:           typ,
		Source:         corev1.EventSource{Component: EventSource, Host: req.Node},
		FirstTimestamp: metav1.NewTime(now),
		LastTimestamp:  metav1.NewTime(now),
		Count:          1,
	}
	if _, err := d.kube.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		d.log.Warn("recording node event", logging.Node(req.Node), zap.String("event-reason", reason), zap.Error(err))
	}
}

func (d *Drainer) listPods(ctx context.Context, node string) ([]corev1.Pod, error) {
	l, err := d.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node, err)
	}
	return l.Items, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// timeLeft is the time until deadline, never negative.
func (d *Drainer) timeLeft(deadline time.Time) time.Duration {
	return max(deadline.Sub(d.opts.Now()), 0)
}
