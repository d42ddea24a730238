package view

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/internal/podutil"
)

// Key is a pod's namespace/name, the key raft nominations use.
func Key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Provisionable: a pending pod kube-scheduler could not place (Karpenter
// waits for PodScheduled=False/Unschedulable so it never races the
// scheduler onto existing capacity), as Karpenter's IsProvisionable: not
// one kube-scheduler is preempting pods for (status.nominatedNodeName: it
// will run where the victims were), not a DaemonSet's or a static pod.
func Provisionable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || podutil.Terminal(p) || len(p.Spec.SchedulingGates) > 0 || podutil.OwnedByDaemonSet(p) ||
		p.Status.NominatedNodeName != "" || podutil.OwnedByNode(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// Reschedulable: a pod on a disrupted node that needs capacity elsewhere:
// Karpenter's IsCurrentlyReschedulable (active, or a terminating
// StatefulSet pod; not a DaemonSet's or static pod; not kept there by
// do-not-disrupt or a fully blocking PDB), and, unlike Karpenter, with a
// controller that recreates it (a bare pod is not recreated, so capacity
// for it would go to waste).
func Reschedulable(p *corev1.Pod, now time.Time, pdbs podutil.PDBs) bool {
	if !podutil.CurrentlyReschedulable(p, now, pdbs) {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
