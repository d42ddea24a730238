package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

func TestStuckTerminating(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		deleted *time.Time
		want    bool
	}{
		{"not terminating", nil, false},
		{"deletionTimestamp ahead (grace period running)", new(now.Add(30 * time.Second)), false},
		{"a minute past: not yet", new(now.Add(-StuckAfter)), false},
		{"over a minute past", new(now.Add(-StuckAfter - time.Second)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{}
			if tc.deleted != nil {
				p.DeletionTimestamp = new(metav1.NewTime(*tc.deleted))
			}
			if got := StuckTerminating(p, now); got != tc.want {
				t.Errorf("StuckTerminating = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDoNotDisruptActive(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name    string
		value   *string
		started time.Duration // before now; 0: no start time
		want    bool
	}{
		{"no annotation", nil, time.Minute, false},
		{"true", new("true"), time.Hour, true},
		{"true, no start time", new("true"), 0, true},
		{"duration not elapsed", new("5m"), 4 * time.Minute, true},
		{"duration just elapsed", new("5m"), 5 * time.Minute, false},
		{"duration elapsed", new("5m"), 6 * time.Minute, false},
		{"duration, no start time", new("5m"), 0, true},
		{"false", new("false"), time.Minute, false},
		{"empty", new(""), time.Minute, false},
		{"not a duration", new("forever"), time.Minute, false},
		{"no unit", new("300"), time.Minute, false},
		{"zero", new("0s"), 0, false},
		{"negative", new("-5m"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{}
			if tc.value != nil {
				p.Annotations = map[string]string{karpv1.AnnotationDoNotDisrupt: *tc.value}
			}
			if tc.started > 0 {
				p.Status.StartTime = new(metav1.NewTime(now.Add(-tc.started)))
			}
			if got := DoNotDisruptActive(p, now); got != tc.want {
				t.Errorf("DoNotDisruptActive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDrainable(t *testing.T) {
	now := time.Now()
	tol := func(tl corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{tl}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a plain pod", &corev1.Pod{}, true},
		{"a DaemonSet pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds"}}}}, true},
		{"do-not-disrupt: waited for", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{karpv1.AnnotationDoNotDisrupt: "true"}}}, true},
		{"tolerates every taint", tol(corev1.Toleration{Operator: corev1.TolerationOpExists}), false},
		{"tolerates karpenter.sh/disrupted", tol(corev1.Toleration{Key: karpv1.TaintDisruptedKey, Operator: corev1.TolerationOpExists}), false},
		{"tolerates it by value", tol(corev1.Toleration{Key: karpv1.TaintDisruptedKey, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}), false},
		{"tolerates it for NoExecute only", tol(corev1.Toleration{Key: karpv1.TaintDisruptedKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}), true},
		{"tolerates another taint", tol(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}), true},
		{"a mirror pod (annotation)", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}, false},
		{"a static pod (owned by its Node)", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n"}}}}, false},
		{"stuck terminating", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: new(metav1.NewTime(now.Add(-2 * time.Minute)))}}, false},
		{"terminating within its minute", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: new(metav1.NewTime(now.Add(-30 * time.Second)))}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Drainable(tc.pod, now); got != tc.want {
				t.Errorf("Drainable = %v, want %v", got, tc.want)
			}
		})
	}
}

// unschedulablePod is a ReplicaSet's pod kube-scheduler could not place.
func unschedulablePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p",
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", APIVersion: "apps/v1", Controller: new(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

// Karpenter's IsProvisionable: only pods kube-scheduler gave up on, and
// not those it preempts for, DaemonSets' or static pods.
func TestProvisionable(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want bool
	}{
		{"unschedulable", func(*corev1.Pod) {}, true},
		{"not yet tried by kube-scheduler", func(p *corev1.Pod) { p.Status.Conditions = nil }, false},
		{"bound", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false},
		{"preempting (nominatedNodeName)", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n1" }, false},
		{"gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "g"}} }, false},
		{"a DaemonSet's", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", APIVersion: "apps/v1", Controller: new(true)}}
		}, false},
		{"static (owned by its Node)", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n1", APIVersion: "v1", Controller: new(true)}}
		}, false},
		{"finished", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := unschedulablePod()
			tc.edit(p)
			if got := Provisionable(p); got != tc.want {
				t.Errorf("Provisionable = %t, want %t", got, tc.want)
			}
		})
	}
}
