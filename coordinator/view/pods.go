package view

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/internal/podutil"
)

// Key is a pod's namespace/name, the key raft nominations use.
func Key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Terminal reports whether a pod has finished.
func Terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Provisionable: a pending pod kube-scheduler could not place (Karpenter
// waits for PodScheduled=False/Unschedulable so it never races the
// scheduler onto existing capacity), as Karpenter's IsProvisionable: not
// one kube-scheduler is preempting pods for (status.nominatedNodeName: it
// will run where the victims were), not a DaemonSet's or a static pod.
func Provisionable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || Terminal(p) || len(p.Spec.SchedulingGates) > 0 || podutil.OwnedByDaemonSet(p) ||
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

// Reschedulable: a pod on a disrupted node that its controller will
// recreate elsewhere (not a DaemonSet or mirror pod, not finished).
func Reschedulable(p *corev1.Pod) bool {
	if Terminal(p) || p.DeletionTimestamp != nil || podutil.OwnedByDaemonSet(p) {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
