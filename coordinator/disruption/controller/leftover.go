package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// clearLeftovers removes what a disruption no longer under way left on a
// managed node, as Karpenter's disruption controller does every pass
// before it decides: the karpenter.sh/disrupted:NoSchedule taint and its
// NodeClaim's DisruptionReason condition (a leader that died between
// tainting and rolling back, or Karpenter stopped in the middle of a
// command). A node is left alone while a command of this leader holds it,
// a termination intent for its instance is pending, its Node or NodeClaim
// is being deleted or its instance is terminating, or the agent reported
// an interruption on it (its joiner.io/interruption taint). Failures are
// logged and retried next pass; they do not stop the pass.
func (c *Controller) clearLeftovers(ctx context.Context, v *pass) {
	var errs []error
	for _, node := range v.snap.AllNodes {
		nc := v.snap.NodeClaims[node.Name]
		if nc == nil || c.disruptionUnderWay(v, node, nc) {
			continue // not managed (never touched), or not a leftover
		}
		if hasTaintKey(node, karpv1.TaintDisruptedKey) {
			if err := c.updateNode(ctx, node.Name, removeDisruptedTaint, "removed leftover disruption taint"); err != nil {
				errs = append(errs, err)
			}
		}
		if init, _ := initialized(nc); init && meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionDisruptionReason) != nil {
			if err := c.clearDisruptionReason(ctx, nc.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.log.Warn("clearing leftovers of past disruptions", zap.Error(err))
	}
}

// disruptionUnderWay says whether the node is being disrupted or
// terminated by someone, so its taint and condition are not leftovers.
func (c *Controller) disruptionUnderWay(v *pass, node *corev1.Node, nc *karpv1.NodeClaim) bool {
	if node.DeletionTimestamp != nil || nc.DeletionTimestamp != nil || terminatingInstance(nc) || hasTaintKey(node, karpv1.TaintInterruptionKey) {
		return true
	}
	if id := v.instanceOf(node.Name); id != "" {
		if _, pending := v.terminating[id]; pending || c.commands[termID(id)] != nil || c.finished[termID(id)] {
			return true
		}
	}
	// The cache may have seen a deletion the pass's view has not.
	live := c.d.Cache.NodeClaim(nc.Name)
	return live == nil || live.DeletionTimestamp != nil
}

// terminatingInstance: the NodeClaim's instance is being terminated
// (condition InstanceTerminating True).
func terminatingInstance(nc *karpv1.NodeClaim) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionInstanceTerminating)
}

func hasTaintKey(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// removeDisruptedTaint drops karpenter.sh/disrupted from the node, unless
// the node is being deleted (the termination controller's to handle) or
// the agent put it there for an interruption (joiner.io/interruption is
// present); false when nothing changed.
func removeDisruptedTaint(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil || hasTaintKey(n, karpv1.TaintInterruptionKey) {
		return false
	}
	before := len(n.Spec.Taints)
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintDisruptedKey })
	return len(n.Spec.Taints) != before
}

// clearDisruptionReason removes the DisruptionReason condition from the
// NodeClaim as it is now, unless it is being deleted meanwhile.
func (c *Controller) clearDisruptionReason(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc, err := c.d.Kube.GetNodeClaim(ctx, name)
		if err != nil {
			return err
		}
		if nc.DeletionTimestamp != nil || !meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionDisruptionReason) {
			return nil
		}
		if _, err := c.d.Kube.UpdateNodeClaimStatus(ctx, nc); err != nil {
			return err
		}
		c.log.Info("removed DisruptionReason condition", zap.String("nodeclaim", name))
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("clearing condition %s of nodeclaim %s: %w", karpv1.ConditionDisruptionReason, name, err)
	}
	return nil
}
