package disruption

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// podDeletionCost is the annotation Kubernetes uses to rank pods of a
// ReplicaSet for deletion; Karpenter folds it into eviction cost.
const podDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

func reschedulablePods(n *Node) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range n.Node.Pods {
		if podutil.Reschedulable(p) {
			out = append(out, p)
		}
	}
	return out
}

// currentlyReschedulable: a reschedulable pod that would move now
// (podutil.CurrentlyReschedulable). A simulation places only these:
// capacity for a pod that will not be evicted would go to waste.
func (d *decider) currentlyReschedulable(p *corev1.Pod) bool {
	return podutil.CurrentlyReschedulable(p, d.in.Now, d.pdbs)
}

// gracefulBlocker is why a node may not be disrupted gracefully (emptiness,
// drift, consolidation), or "" (Karpenter's ValidateNodeDisruptable and
// ValidatePodsDisruptable). eventual is true for drift: with a
// terminationGracePeriod on the NodeClaim, pod-level do-not-disrupt and PDBs
// do not block it (Karpenter's "eventual" disruption class).
func (d *decider) gracefulBlocker(n *Node, eventual bool) string {
	switch {
	case !n.Initialized:
		return "node isn't initialized"
	case d.deleting(n):
		return "node is deleting or marked for deletion"
	case n.Nominated:
		return "node is nominated for a pending pod"
	case n.Blocked != "":
		return n.Blocked
	case n.Annotations[karpv1.AnnotationDoNotDisrupt] == "true", n.NodeClaim.Annotations[karpv1.AnnotationDoNotDisrupt] == "true":
		return fmt.Sprintf("disruption is blocked through the %q annotation", karpv1.AnnotationDoNotDisrupt)
	}
	if eventual && n.NodeClaim.Spec.TerminationGracePeriod != nil {
		return ""
	}
	for _, p := range n.Node.Pods {
		if !podutil.Disruptable(p, d.in.Now) {
			return fmt.Sprintf("pod has %q annotation (Pod=%s/%s)", karpv1.AnnotationDoNotDisrupt, p.Namespace, p.Name)
		}
	}
	for _, p := range n.Node.Pods {
		if r := d.pdbs.Blocking(p, d.in.Now, false); r != "" {
			return r
		}
	}
	return ""
}

// deleting: the node is going away (a termination intent, the NodeClaim
// being deleted, or its instance terminating: Karpenter's
// MarkedForDeletion).
func (d *decider) deleting(n *Node) bool {
	return n.MarkedForDeletion || n.NodeClaim != nil && (n.NodeClaim.DeletionTimestamp != nil || instanceTerminating(n.NodeClaim))
}

// instanceTerminating: the NodeClaim's InstanceTerminating condition is
// True (drained, and the instance's termination requested).
func instanceTerminating(nc *karpv1.NodeClaim) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == karpv1.ConditionInstanceTerminating {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// consolidatableAt is when a node becomes consolidatable: consolidateAfter
// after the last pod event (or initialization when there was none).
func consolidatableAt(n *Node, pool *karpv1.NodePool) (time.Time, bool) {
	ca := pool.Spec.Disruption.ConsolidateAfter
	if ca.IsNever() {
		return time.Time{}, false
	}
	last := n.InitializedAt
	if t := n.NodeClaim.Status.LastPodEventTime.Time; t.After(last) {
		last = t
	}
	if ca.Duration == nil {
		return last, true
	}
	return last.Add(*ca.Duration), true
}

// EvictionCost is Karpenter's per-pod eviction cost: 1 plus deletion cost
// / 2^27 plus priority / 2^25, clamped to [-10, 10].
func EvictionCost(p *corev1.Pod) float64 {
	c := 1.0
	if v, ok := p.Annotations[podDeletionCost]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			c += f / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		c += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Max(-10, math.Min(10, c))
}

// expireAfter is the NodeClaim's expireAfter (else its pool's), false when
// Never or unset.
func (d *decider) expireAfter(n *Node) (time.Duration, bool) {
	e := n.NodeClaim.Spec.ExpireAfter
	if e.IsZero() {
		if pool := d.pools[n.Pool()]; pool != nil {
			e = pool.Spec.Template.Spec.ExpireAfter
		}
	}
	if e.IsNever() || e.Duration == nil {
		return 0, false
	}
	return *e.Duration, true
}

// Pool is the name of the node's NodePool ("" for a node Joiner does not
// manage).
func (n *Node) Pool() string {
	if n.NodeClaim == nil {
		return ""
	}
	if p := n.NodeClaim.Labels[karpv1.LabelNodePool]; p != "" {
		return p
	}
	return n.Node.Labels[karpv1.LabelNodePool]
}

func capacityType(n *Node) string {
	if v := n.NodeClaim.Labels[karpv1.LabelCapacityType]; v != "" {
		return v
	}
	return n.Node.Labels[karpv1.LabelCapacityType]
}
