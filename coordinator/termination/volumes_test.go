package termination

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/test/observe"
)

// attachment is a VolumeAttachment of a PersistentVolume ("" : an inline
// volume) to ip-10-0-0-1.
func attachment(name, pv string) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: "ip-10-0-0-1"}}
	if pv != "" {
		va.Spec.Source.PersistentVolumeName = &pv
	} else {
		va.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{}
	}
	return va
}

type podOpt func(*corev1.Pod)

// volumePod is a pod on ip-10-0-0-1 using the claim "data-<name>".
func volumePod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{NodeName: "ip-10-0-0-1", Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ownedBy(kind, apiVersion string) podOpt {
	return func(p *corev1.Pod) {
		controller := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: "x", Controller: &controller}}
	}
}

func tolerating(tol corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tol) }
}

func podDeleted(ago time.Duration) podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0.Add(-ago)} }
}

func ephemeral(p *corev1.Pod) {
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
}

// claims binds claim "<namespace>/<name>" to a PersistentVolume "pv-<name>".
func claims(names ...string) func(namespace, name string) *corev1.PersistentVolumeClaim {
	return func(namespace, name string) *corev1.PersistentVolumeClaim {
		if namespace != "default" || !slices.Contains(names, name) {
			return nil
		}
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name}}
	}
}

// The VolumeAttachments that hold a drained node's instance: those of
// PersistentVolumes, except the volumes of pods the drain leaves.
func TestPendingAttachments(t *testing.T) {
	vas := []*storagev1.VolumeAttachment{attachment("va-web", "pv-data-web"), attachment("va-ds", "pv-data-ds"),
		attachment("va-inline", ""), attachment("va-orphan", "pv-gone")}
	all := claims("data-web", "data-ds", "job-scratch")
	for _, tc := range []struct {
		name string
		vas  []*storagev1.VolumeAttachment
		pods []*corev1.Pod
		want string
	}{
		{"none", nil, []*corev1.Pod{volumePod("web")}, ""},
		{"evicted pods' volumes and volumes no pod uses", vas, []*corev1.Pod{volumePod("web")}, "va-ds,va-orphan,va-web"},
		{"a DaemonSet pod does not (drained in its group)", vas, []*corev1.Pod{volumePod("ds", ownedBy("DaemonSet", "apps/v1"))}, "va-ds,va-orphan,va-web"},
		{"a ReplicaSet pod does not", vas, []*corev1.Pod{volumePod("ds", ownedBy("ReplicaSet", "apps/v1"))}, "va-ds,va-orphan,va-web"},
		{"a static pod keeps its volume", vas, []*corev1.Pod{volumePod("ds", ownedBy("Node", "v1"))}, "va-orphan,va-web"},
		{"a mirror pod keeps its volume", vas, []*corev1.Pod{volumePod("ds", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		})}, "va-orphan,va-web"},
		{"tolerating every taint keeps it", vas, []*corev1.Pod{volumePod("ds", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists}))},
			"va-orphan,va-web"},
		{"tolerating karpenter.sh/disrupted keeps it", vas, []*corev1.Pod{volumePod("ds", tolerating(corev1.Toleration{
			Key: karpv1.TaintDisruptedKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))}, "va-orphan,va-web"},
		{"tolerating another taint does not", vas, []*corev1.Pod{volumePod("ds", tolerating(corev1.Toleration{
			Key: "dedicated", Operator: corev1.TolerationOpExists}))}, "va-ds,va-orphan,va-web"},
		{"stuck terminating keeps it", vas, []*corev1.Pod{volumePod("ds", podDeleted(2*time.Minute))}, "va-orphan,va-web"},
		{"terminating a short while does not", vas, []*corev1.Pod{volumePod("ds", podDeleted(30*time.Second))}, "va-ds,va-orphan,va-web"},
		{"generic ephemeral volume of a kept pod", []*storagev1.VolumeAttachment{attachment("va-eph", "pv-job-scratch")},
			[]*corev1.Pod{volumePod("job", ephemeral, tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists}))}, ""},
		{"claim not found: the attachment holds", []*storagev1.VolumeAttachment{attachment("va-x", "pv-data-lost")},
			[]*corev1.Pod{volumePod("lost", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists}))}, "va-x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(PendingAttachments(tc.vas, tc.pods, all, t0), ","); got != tc.want {
				t.Errorf("PendingAttachments = %q, want %q", got, tc.want)
			}
		})
	}
}

func volumesCond(status metav1.ConditionStatus) claimOpt {
	return func(nc *karpv1.NodeClaim) {
		putCondition(nc, karpv1.ConditionVolumesDetached, status, "x", "", t0)
	}
}

// After the drain the instance waits for the volume attachments, until
// the grace period; the wait's end is recorded before the termination.
func TestDecideVolumes(t *testing.T) {
	pending := term(fsm.TerminationPending)
	drained := cond(karpv1.ConditionDrained)
	in := func(nc *karpv1.NodeClaim, n *corev1.Node, checked bool, now time.Time, vas ...string) ClaimInput {
		return ClaimInput{Claim: nc, Node: n, InstanceID: "i-0123", Instance: true, Termination: pending,
			VolumesChecked: checked, Attachments: vas, Now: now}
	}
	for _, tc := range []struct {
		name string
		in   ClaimInput
		want Step
	}{
		{"drained, attachments left: wait", in(claim(deleting, drained), node(tainted), true, t0, "va-1"), StepAwaitVolumes},
		{"still waiting", in(claim(deleting, drained, volumesCond(metav1.ConditionUnknown)), node(tainted), true, t0, "va-1"), StepAwaitVolumes},
		{"attachments gone: record it", in(claim(deleting, drained, volumesCond(metav1.ConditionUnknown)), node(tainted), true, t0), StepVolumesDetached},
		{"none from the start: record it", in(claim(deleting, drained), node(tainted), true, t0), StepVolumesDetached},
		{"grace period over: record it and go", in(claim(deleting, drained, tgp(time.Minute)), node(tainted), true, t0.Add(time.Minute), "va-1"),
			StepVolumesDetached},
		{"grace period over before the drain ended", in(claim(deleting, tgp(time.Minute)), node(tainted), true, t0.Add(time.Minute), "va-1"),
			StepVolumesDetached},
		{"recorded detached: terminate", in(claim(deleting, drained, volumesCond(metav1.ConditionTrue)), node(tainted), true, t0), StepTerminate},
		{"recorded given up: terminate", in(claim(deleting, drained, volumesCond(metav1.ConditionFalse)), node(tainted), true, t0, "va-1"), StepTerminate},
		{"not checked (no volume source): terminate", in(claim(deleting, drained), node(tainted), false, t0), StepTerminate},
		{"no node: terminate", in(claim(deleting, drained), nil, true, t0, "va-1"), StepTerminate},
		{"node deleting without us: terminate", in(claim(deleting), node(nodeDeleting, nodeNoFinalizer), true, t0, "va-1"), StepTerminate},
		{"not drained yet: drain first", in(claim(deleting), node(tainted), true, t0, "va-1"), StepDrain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.in); got != tc.want {
				t.Errorf("Decide = %s, want %s", got, tc.want)
			}
		})
	}
	if got := DecideNode(NodeInput{Node: node(nodeDeleting, tainted, nodeDrained), Attachments: []string{"va-1"}}); got != StepAwaitVolumes {
		t.Errorf("lone drained node with attachments: %s, want %s", got, StepAwaitVolumes)
	}
}

// fakeVolumes is the cache's storage view, changed by the test.
type fakeVolumes struct {
	mu   sync.Mutex
	vas  []*storagev1.VolumeAttachment
	pods []*corev1.Pod
}

func (f *fakeVolumes) VolumeAttachmentsOnNode(node string) []*storagev1.VolumeAttachment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*storagev1.VolumeAttachment
	for _, va := range f.vas {
		if va.Spec.NodeName == node {
			out = append(out, va)
		}
	}
	return out
}

func (f *fakeVolumes) PodsOnNode(string) []*corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pods)
}

func (f *fakeVolumes) PersistentVolumeClaim(namespace, name string) *corev1.PersistentVolumeClaim {
	return claims("data-web", "data-ds")(namespace, name)
}

func (f *fakeVolumes) set(vas ...*storagev1.VolumeAttachment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vas = vas
}

func volumesDetachedCondition(t *testing.T, r *rig, name string) *metav1.Condition {
	t.Helper()
	nc := r.claims.get(name)
	if nc == nil {
		t.Fatalf("nodeclaim %s is gone", name)
	}
	return meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionVolumesDetached)
}

// A drained NodeClaim's instance waits for the VolumeAttachment of its
// evicted pod's volume (not for that of the pod tolerating every taint,
// which the drain leaves on the node), then terminates; the
// condition, the Node's Event and the metric record the wait.
func TestTerminationWaitsForVolumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []claimOpt
		end    func(r *rig, v *fakeVolumes)
		result string
	}{
		{"attachments deleted", nil, func(r *rig, v *fakeVolumes) { r.now = r.now.Add(20 * time.Second); v.set() }, "detached"},
		{"grace period elapses", []claimOpt{tgp(time.Minute)}, func(r *rig, _ *fakeVolumes) { r.now = t0.Add(time.Minute) }, "grace_elapsed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := claim(append([]claimOpt{fresh}, tc.opts...)...)
			r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{node()})
			r.launch(nc.Name, "intent-1", "i-0123", fsm.IntentLaunched)
			v := &fakeVolumes{pods: []*corev1.Pod{volumePod("ds", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists}))}}
			v.set(attachment("va-web", "pv-data-web"), attachment("va-ds", "pv-data-ds"))
			r.c.d.Volumes = v

			r.pastMinDrain(t)
			r.settle(t, 4)
			c := volumesDetachedCondition(t, r, nc.Name)
			if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != "AwaitingVolumeDetachment" || c.Message != "AwaitingVolumeDetachment" {
				t.Fatalf("VolumesDetached = %+v, want Unknown AwaitingVolumeDetachment (Karpenter's reason and message)", c)
			}
			if got := r.claims.get(nc.Name); !conditionTrue(got, karpv1.ConditionDrained) {
				t.Error("waiting for volumes before the drain finished")
			}
			if calls := r.cloud.calls(); len(calls) != 0 {
				t.Fatalf("terminated %v while a volume is attached", calls)
			}
			// The Node's Event names the attachments (va-web only: the
			// tolerating pod's volume is not waited for).
			const want = "Normal AwaitingVolumeDetachment Awaiting deletion of bound volumeattachments (va-web)"
			if ev := observe.EventsText(r.rec); strings.Count(ev, "AwaitingVolumeDetachment") != 1 || !strings.Contains(ev, want) {
				t.Errorf("events %q: want one %q (passes repeat within two minutes, the event does not)", ev, want)
			}

			tc.end(r, v)
			r.settle(t, 4)
			if got := r.cloud.calls(); len(got) != 1 || got[0] != "i-0123" {
				t.Fatalf("terminate calls %v, want [i-0123]", got)
			}
			if r.claims.get(nc.Name) != nil {
				t.Fatal("nodeclaim not released")
			}
			if got := observe.Count(t, r.c.metrics.volumeWait.WithLabelValues(tc.result).(prometheus.Histogram)); got != 1 {
				t.Errorf("volume waits {%s} = %v, want 1", tc.result, got)
			}
		})
	}
}

// The condition as the wait ends, before the NodeClaim goes: True after
// the attachments went, False when the grace period ended the wait.
func TestVolumesDetachedCondition(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []claimOpt
		left    []*storagev1.VolumeAttachment
		now     time.Time
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"detached", nil, nil, t0.Add(time.Second), metav1.ConditionTrue, karpv1.ConditionVolumesDetached, ""},
		{"given up", []claimOpt{tgp(time.Minute)}, []*storagev1.VolumeAttachment{attachment("va-web", "pv-data-web")}, t0.Add(time.Minute),
			metav1.ConditionFalse, "TerminationGracePeriodElapsed", "TerminationGracePeriodElapsed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := claim(append([]claimOpt{deleting, cond(karpv1.ConditionDrained)}, tc.opts...)...)
			r := newRig(t, Config{}, []*karpv1.NodeClaim{nc}, []*corev1.Node{node(tainted)})
			v := &fakeVolumes{}
			v.set(tc.left...)
			r.c.d.Volumes = v
			r.now = tc.now
			in, err := r.c.claimInput(context.Background(), r.claims.get(nc.Name))
			if err != nil {
				t.Fatal(err)
			}
			if step := Decide(in); step != StepVolumesDetached {
				t.Fatalf("step %s, want %s", step, StepVolumesDetached)
			}
			if _, err := r.c.doClaimStep(context.Background(), StepVolumesDetached, in); err != nil {
				t.Fatal(err)
			}
			c := volumesDetachedCondition(t, r, nc.Name)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
				t.Errorf("VolumesDetached = %+v, want %s %s %q", c, tc.status, tc.reason, tc.message)
			}
			if n := observe.Count(t, r.c.metrics.volumeWait); n != 0 {
				t.Errorf("%v wait samples: there was no wait", n)
			}
		})
	}
}
