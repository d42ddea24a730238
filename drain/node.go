package drain

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"

	corekarp "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/events"
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

// taintsFor are the taints of req: an advisory request's lack
// karpenter.sh/disrupted, which tells the coordinator the node is going
// away (its pods are given new capacity, disruption leaves it alone) when
// nothing will take it away.
func taintsFor(req Request) []corev1.Taint {
	ts := Taints(req.Reason)
	if req.Advisory {
		return ts[1:]
	}
	return ts
}

// Cordon puts the taints on the node, marks it unschedulable and sets the
// condition, in one update where possible. It is a no-op on a node that
// already has all of them.
func (d *Drainer) Cordon(ctx context.Context, req Request) error {
	_, err := d.cordon(ctx, req)
	return err
}

// cordon is Cordon returning the Node as last read or written (nil in a
// dry run), what the drain's Events reference.
func (d *Drainer) cordon(ctx context.Context, req Request) (*corev1.Node, error) {
	log := d.log.With(logging.Node(req.Node), zap.String("reason", req.Reason))
	if d.opts.DryRun {
		log.Info("dry-run: would have tainted and cordoned the node", zap.Any("taints", taintsFor(req)))
		return nil, nil
	}
	changed := false
	var latest *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := d.kube.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest = node
		changed = false
		for _, t := range taintsFor(req) {
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
		updated, err := d.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			latest = updated
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cordoning node %s: %w", req.Node, err)
	}
	if changed {
		log.Info("node tainted and cordoned")
		d.publish(events.NodeCordoned(latest, req.Reason, req.Message))
		d.setCondition(ctx, req, "Cordoned", req.Message)
	}
	return latest, nil
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

// publish records ev through the Recorder (none without one); a dry run
// logs it instead.
func (d *Drainer) publish(ev events.Event) {
	if d.opts.DryRun {
		d.log.Info("dry-run: would have recorded event", zap.String("event-reason", ev.Reason), zap.String("message", ev.Message))
		return
	}
	if d.opts.Recorder != nil {
		events.Publish(d.opts.Recorder, ev)
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
