// Package podutil holds the pod predicates Karpenter's provisioning, disruption and
// termination share (its pkg/utils/pod), one implementation for the
// coordinator and the node agent's drain.
package podutil

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// StuckAfter is how long past its deletionTimestamp a terminating pod
// counts as stuck (Karpenter's IsStuckTerminating). The deletionTimestamp
// is the deletion's time plus the pod's grace period, so a kubelet that is
// alive has had the whole grace period and this minute more to remove it.
const StuckAfter = time.Minute

// StuckTerminating says whether p is being deleted and its
// deletionTimestamp is more than StuckAfter before now: its kubelet is
// gone, so a drain neither evicts it nor waits for it (Karpenter's
// IsStuckTerminating, part of IsDrainable).
func StuckTerminating(p *corev1.Pod, now time.Time) bool {
	return p.DeletionTimestamp != nil && now.Sub(p.DeletionTimestamp.Time) > StuckAfter
}

// DoNotDisruptActive says whether a pod's karpenter.sh/do-not-disrupt
// annotation protects it at now (Karpenter's IsDoNotDisruptActive):
// "true", or a positive duration (e.g. "5m") not yet elapsed since the pod
// started (status.startTime; a pod without one is protected). Any other
// value is ignored, as if the annotation were not there.
func DoNotDisruptActive(p *corev1.Pod, now time.Time) bool {
	v, ok := p.Annotations[karpv1.AnnotationDoNotDisrupt]
	if !ok {
		return false
	}
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false
	}
	if p.Status.StartTime == nil {
		return true
	}
	return now.Sub(p.Status.StartTime.Time) < d
}

// disruptedNoSchedule is the taint a node being disrupted carries.
var disruptedNoSchedule = corev1.Taint{Key: karpv1.TaintDisruptedKey, Effect: corev1.TaintEffectNoSchedule}

// ToleratesDisrupted says whether p tolerates karpenter.sh/disrupted:NoSchedule
// (a toleration of that key, or operator Exists without a key): it could be
// scheduled right back onto the node being drained, so Karpenter neither
// evicts it nor waits for it (ToleratesDisruptedNoScheduleTaint).
func ToleratesDisrupted(p *corev1.Pod) bool {
	for i := range p.Spec.Tolerations {
		if p.Spec.Tolerations[i].ToleratesTaint(klog.Background(), &disruptedNoSchedule, true) {
			return true
		}
	}
	return false
}

// OwnedByNode says whether p is a static pod's mirror (the kubelet owns
// it; the API server cannot evict it): Karpenter's IsOwnedByNode, or the
// mirror annotation.
func OwnedByNode(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.APIVersion == "v1" && o.Kind == "Node" {
			return true
		}
	}
	return false
}

// Drainable says whether a drain evicts p or waits for it (Karpenter's
// IsDrainable): not tolerating karpenter.sh/disrupted, not stuck
// terminating at now, not a mirror pod. Do-not-disrupt pods are drainable:
// the drain waits for them, it does not evict them.
func Drainable(p *corev1.Pod, now time.Time) bool {
	return !ToleratesDisrupted(p) && !StuckTerminating(p, now) && !OwnedByNode(p)
}

// OwnedByDaemonSet says whether a DaemonSet owns p (an owner reference of
// apps/v1 DaemonSet, Karpenter's IsOwnedByDaemonSet).
func OwnedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.APIVersion == "apps/v1" && o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// Provisionable: a pending pod kube-scheduler could not place (Karpenter
// waits for PodScheduled=False/Unschedulable so it never races the
// scheduler onto existing capacity), as Karpenter's IsProvisionable: not
// one kube-scheduler is preempting pods for (status.nominatedNodeName: it
// will run where the victims were), not a DaemonSet's or a static pod.
func Provisionable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || Terminal(p) || len(p.Spec.SchedulingGates) > 0 || OwnedByDaemonSet(p) ||
		p.Status.NominatedNodeName != "" || OwnedByNode(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
