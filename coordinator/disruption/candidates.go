package disruption

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
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
		idx[p.Namespace] = append(idx[p.Namespace], pdbEntry{name: p.Namespace + "/" + p.Name, selector: sel, allowed: p.Status.DisruptionsAllowed})
	}
	return idx, nil
}

// blocking returns why the PDBs forbid evicting p, or "".
func (idx pdbIndex) blocking(p *corev1.Pod) string {
	var found []pdbEntry
	set := labels.Set(p.Labels)
	for _, e := range idx[p.Namespace] {
		if e.selector.Matches(set) {
			found = append(found, e)
		}
	}
	switch {
	case len(found) > 1:
		return fmt.Sprintf("pod %s/%s is selected by multiple pdbs (%s, %s)", p.Namespace, p.Name, found[0].name, found[1].name)
	case len(found) == 1 && found[0].allowed <= 0:
		return fmt.Sprintf("pdb %s prevents eviction", found[0].name)
	}
	return ""
}

// Reschedulable says whether a pod must find a new home when its node goes:
// not terminal, not terminating, not a DaemonSet or mirror (static) pod.
func Reschedulable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
		return false
	}
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" || o.Kind == "Node" {
			return false
		}
	}
	return true
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

// PodDoNotDisrupt says whether a pod's karpenter.sh/do-not-disrupt
// annotation protects it at now: "true", or a duration (e.g. "5m") that has
// not yet elapsed since the pod started. An unparsable value protects.
func PodDoNotDisrupt(p *corev1.Pod, now time.Time) bool {
	v, ok := p.Annotations[karpv1.AnnotationDoNotDisrupt]
	if !ok {
		return false
	}
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return true
	}
	start := p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		start = p.Status.StartTime.Time
	}
	return now.Before(start.Add(d))
}

// gracefulBlocker is why a node may not be disrupted gracefully (emptiness,
// drift, consolidation), or "". eventual is true for drift: with a
// terminationGracePeriod on the NodeClaim, pod-level do-not-disrupt and PDBs
// do not block it (Karpenter's "eventual" disruption class).
func (d *decider) gracefulBlocker(n *Node, eventual bool) string {
	switch {
	case !n.Initialized:
		return "node is not initialized"
	case n.MarkedForDeletion:
		return "node is already being disrupted"
	case n.Nominated:
		return "node is nominated for a pending pod"
	case n.Blocked != "":
		return n.Blocked
	case n.Annotations[karpv1.AnnotationDoNotDisrupt] == "true":
		return "node has annotation " + karpv1.AnnotationDoNotDisrupt
	case n.NodeClaim.Annotations[karpv1.AnnotationDoNotDisrupt] == "true":
		return "nodeclaim has annotation " + karpv1.AnnotationDoNotDisrupt
	}
	if eventual && n.NodeClaim.Spec.TerminationGracePeriod != nil {
		return ""
	}
	for _, p := range n.Node.Pods {
		if !Reschedulable(p) {
			continue
		}
		if PodDoNotDisrupt(p, d.in.Now) {
			return fmt.Sprintf("pod %s/%s has annotation %s", p.Namespace, p.Name, karpv1.AnnotationDoNotDisrupt)
		}
		if r := d.pdbs.blocking(p); r != "" {
			return r
		}
	}
	return ""
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
		if pool := d.pools[poolName(n)]; pool != nil {
			e = pool.Spec.Template.Spec.ExpireAfter
		}
	}
	if e.IsNever() || e.Duration == nil {
		return 0, false
	}
	return *e.Duration, true
}

func poolName(n *Node) string {
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
