package disruption

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/internal/podutil"
)

// podDeletionCost is the annotation Kubernetes uses to rank pods of a
// ReplicaSet for deletion; Karpenter folds it into eviction cost.
const podDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// pdbIndex answers "which PDBs select this pod" per namespace.
type pdbIndex map[string][]pdbEntry

type pdbEntry struct {
	name     string
	selector labels.Selector
	allowed  int32
	// fullyBlocking: the PDB never allows an eviction (maxUnavailable 0
	// or "0%", minAvailable "100%"), whatever its status says.
	fullyBlocking bool
	// evictUnhealthy: unhealthyPodEvictionPolicy AlwaysAllow, so a pod
	// that is not Ready may always be evicted.
	evictUnhealthy bool
}

func buildPDBIndex(in *Input) (pdbIndex, error) {
	idx := pdbIndex{}
	for _, p := range in.PDBs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("pdb %s/%s: spec.selector: %w", p.Namespace, p.Name, err)
		}
		if p.Spec.Selector == nil {
			sel = labels.Nothing()
		}
		mu, ma := p.Spec.MaxUnavailable, p.Spec.MinAvailable
		idx[p.Namespace] = append(idx[p.Namespace], pdbEntry{
			name: p.Namespace + "/" + p.Name, selector: sel, allowed: p.Status.DisruptionsAllowed,
			fullyBlocking: mu != nil && (mu.Type == intstr.Int && mu.IntVal == 0 || mu.Type == intstr.String && mu.StrVal == "0%") ||
				ma != nil && ma.Type == intstr.String && ma.StrVal == "100%",
			evictUnhealthy: p.Spec.UnhealthyPodEvictionPolicy != nil && *p.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow,
		})
	}
	return idx, nil
}

// blocking returns why the PDBs keep p from being evicted at now, or "" (Karpenter's
// pdb.Limits isEvictable). A pod Joiner would not evict (see evictable) is
// never held. One selected by several PDBs always is (the eviction API
// refuses it); one selected by a single PDB is held when that PDB allows
// no disruption now, or with fully only when it never allows any (a fully
// blocking PDB) — unless the PDB lets unhealthy pods go and the pod is
// not Ready.
func (idx pdbIndex) blocking(p *corev1.Pod, now time.Time, fully bool) string {
	if len(idx[p.Namespace]) == 0 || !evictable(p, now) {
		return ""
	}
	var found []pdbEntry
	set := labels.Set(p.Labels)
	for _, e := range idx[p.Namespace] {
		if e.selector.Matches(set) {
			found = append(found, e)
		}
	}
	switch {
	case len(found) > 1:
		names := make([]string, len(found))
		for i, e := range found {
			names[i] = e.name
		}
		return fmt.Sprintf("eviction does not support multiple PDBs (PodDisruptionBudget(s)=[%s])", strings.Join(names, " "))
	case len(found) == 0:
		return ""
	}
	e := found[0]
	if e.evictUnhealthy && notReady(p) {
		return ""
	}
	if fully {
		if e.fullyBlocking {
			return fmt.Sprintf("pdb %s never allows an eviction", e.name)
		}
		return ""
	}
	if e.allowed <= 0 {
		return fmt.Sprintf("pdb prevents pod evictions (PodDisruptionBudget=[%s])", e.name)
	}
	return ""
}

func notReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}

// Pod classification, Karpenter v1.14.1's pkg/utils/pod: owners are
// matched by API version and kind, as Karpenter does.

func ownerIs(p *corev1.Pod, apiVersion, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.APIVersion == apiVersion && o.Kind == kind {
			return true
		}
	}
	return false
}

func ownedByStatefulSet(p *corev1.Pod) bool { return ownerIs(p, "apps/v1", "StatefulSet") }

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// active: neither finished nor being deleted.
func active(p *corev1.Pod) bool { return !terminal(p) && !terminating(p) }

// Reschedulable says whether a pod must find a new home when its node goes
// (Karpenter's IsReschedulable): active, or a terminating StatefulSet pod
// (its replacement can only start once it is gone, so its room is needed),
// and neither a DaemonSet nor a static pod.
func Reschedulable(p *corev1.Pod) bool {
	return (active(p) || ownedByStatefulSet(p) && terminating(p)) && !podutil.OwnedByDaemonSet(p) && !podutil.OwnedByNode(p)
}

func reschedulablePods(n *Node) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range n.Node.Pods {
		if Reschedulable(p) {
			out = append(out, p)
		}
	}
	return out
}

// disruptable: the pod does not keep its node (Karpenter's IsDisruptable):
// it is not active, or no do-not-disrupt protects it. DaemonSet and static
// pods can keep their node this way too.
func disruptable(p *corev1.Pod, now time.Time) bool {
	return !active(p) || !podutil.DoNotDisruptActive(p, now)
}

// evictable: draining the node evicts the pod (Karpenter's IsEvictable):
// active, not tolerating the karpenter.sh/disrupted:NoSchedule taint, not
// static, not protected by do-not-disrupt.
func evictable(p *corev1.Pod, now time.Time) bool {
	return active(p) && !podutil.ToleratesDisrupted(p) && !podutil.OwnedByNode(p) && !podutil.DoNotDisruptActive(p, now)
}

// currentlyReschedulable: a reschedulable pod that would move now
// (Karpenter's IsCurrentlyReschedulable): not protected by do-not-disrupt
// and not held by a fully blocking PDB. A simulation places only these:
// capacity for a pod that will not be evicted would go to waste.
func (d *decider) currentlyReschedulable(p *corev1.Pod) bool {
	return Reschedulable(p) && disruptable(p, d.in.Now) && d.pdbs.blocking(p, d.in.Now, true) == ""
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
		if !disruptable(p, d.in.Now) {
			return fmt.Sprintf("pod has %q annotation (Pod=%s/%s)", karpv1.AnnotationDoNotDisrupt, p.Namespace, p.Name)
		}
	}
	for _, p := range n.Node.Pods {
		if r := d.pdbs.blocking(p, d.in.Now, false); r != "" {
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
